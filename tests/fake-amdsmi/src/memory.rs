//! Activity, memory (totals, usage, VRAM) and the process list.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_activity(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_engine_usage_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_engine_usage_t::zeroed();
        v.gfx_activity = f.gfx_activity(p);
        v.umc_activity = f.umc_activity(p);
        v.mm_activity = f.spec(p.gpu).mm_activity_pct.unwrap_or(0xFFFF);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_memory_total(h: amdsmi_processor_handle, kind: u32, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| match kind {
        AMDSMI_MEM_TYPE_VRAM | AMDSMI_MEM_TYPE_VIS_VRAM => put(out, f.vram_total(p)),
        AMDSMI_MEM_TYPE_GTT => put(out, f.spec(p.gpu).gtt_total_bytes),
        _ => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_memory_usage(h: amdsmi_processor_handle, kind: u32, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| match kind {
        AMDSMI_MEM_TYPE_VRAM | AMDSMI_MEM_TYPE_VIS_VRAM => put(out, f.vram_used(p)),
        AMDSMI_MEM_TYPE_GTT => put(out, f.gtt_used(p)),
        _ => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_vram_usage(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_vram_usage_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_vram_usage_t::zeroed();
        v.vram_total = (f.vram_total(p) >> 20) as u32;
        v.vram_used = (f.vram_used(p) >> 20) as u32;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_vram_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_vram_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_vram_info_t::zeroed();
        v.vram_type = AMDSMI_VRAM_TYPE_HBM3;
        set_c_str(&mut v.vram_vendor, &g.vram_vendor);
        v.vram_size = f.vram_total(p) >> 20;
        v.vram_bit_width = g.vram_bit_width;
        v.vram_max_bandwidth = g.vram_max_bandwidth;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_process_list(
    h: amdsmi_processor_handle,
    count: *mut u32,
    out: *mut amdsmi_proc_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let util = f64::from(f.gfx_activity(p)) / 100.0;
        let list: Vec<amdsmi_proc_info_t> = f
            .processes(p)
            .map(|pr| {
                let mut v = amdsmi_proc_info_t::zeroed();
                set_c_str(&mut v.name, &pr.name);
                v.pid = pr.pid;
                v.mem = pr.vram_bytes + pr.gtt_bytes;
                v.engine_usage.gfx = (f.now_s() * 1e9 * util) as u64;
                v.memory_usage.gtt_mem = pr.gtt_bytes;
                v.memory_usage.vram_mem = pr.vram_bytes;
                v.cu_occupancy = pr.cu_occupancy.unwrap_or(u32::MAX);
                v
            })
            .collect();
        put_list(count, out, &list, AMDSMI_STATUS_OUT_OF_RESOURCES)
    })
}
