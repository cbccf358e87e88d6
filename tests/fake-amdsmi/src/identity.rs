//! Identity: BDF, UUID, ASIC, board, driver, VBIOS, firmware, KFD and enumeration info, partition modes.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_device_bdf(h: amdsmi_processor_handle, out: *mut amdsmi_bdf_t) -> amdsmi_status_t {
    on_proc(h, true, |f, p| put(out, f.bdf(p)))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_device_uuid(
    h: amdsmi_processor_handle,
    len: *mut u32,
    out: *mut c_char,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if len.is_null() {
            return INVAL;
        }
        let uuid = f.uuid(p);
        // SAFETY: non-null, a u32 by contract.
        let room = unsafe { *len } as usize;
        let r = put_str(out, room, &uuid);
        if r == OK {
            // SAFETY: as above.
            unsafe { *len = uuid.len() as u32 + 1 };
        }
        r
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_id(h: amdsmi_processor_handle, out: *mut u16) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.spec(p.gpu).device_id as u16))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_asic_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_asic_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_asic_info_t::zeroed();
        set_c_str(&mut v.market_name, &g.market_name);
        v.vendor_id = g.vendor_id;
        set_c_str(&mut v.vendor_name, "Advanced Micro Devices Inc. [AMD/ATI]");
        v.subvendor_id = g.subvendor_id;
        v.device_id = g.device_id;
        v.rev_id = g.rev_id;
        set_c_str(&mut v.asic_serial, &format!("{:016X}", f.serial(p.gpu)));
        v.oam_id = p.gpu;
        v.num_of_compute_units = g.compute_units / f.parts;
        v.target_graphics_version = g.gfx_target;
        v.subsystem_id = g.subsystem_id;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_board_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_board_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_board_info_t::zeroed();
        set_c_str(&mut v.model_number, &g.model_number);
        set_c_str(&mut v.product_serial, &format!("{:016X}", f.serial(p.gpu)));
        set_c_str(&mut v.fru_id, &format!("FRU-{:04}", 1000 + p.gpu));
        set_c_str(&mut v.product_name, &g.product_name);
        set_c_str(&mut v.manufacturer_name, &g.manufacturer);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_driver_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_driver_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, _| {
        let mut v = amdsmi_driver_info_t::zeroed();
        set_c_str(&mut v.driver_version, &f.p.driver_version);
        set_c_str(&mut v.driver_date, &f.p.driver_date);
        set_c_str(&mut v.driver_name, &f.p.driver_name);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_vbios_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_vbios_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_vbios_info_t::zeroed();
        set_c_str(&mut v.name, &g.vbios_name);
        set_c_str(&mut v.build_date, &g.vbios_build_date);
        set_c_str(&mut v.part_number, &g.vbios_part_number);
        set_c_str(&mut v.version, &g.vbios_version);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_fw_info(h: amdsmi_processor_handle, out: *mut amdsmi_fw_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut fw: Vec<(u32, u64)> = f
            .spec(p.gpu)
            .firmware
            .iter()
            .filter_map(|(n, v)| Some((profile::fw_id(n)?, *v)))
            .collect();
        fw.sort_unstable();
        let mut v = amdsmi_fw_info_t::zeroed();
        for (slot, (id, ver)) in v.fw_info_list.iter_mut().zip(&fw) {
            slot.fw_id = *id;
            slot.fw_version = *ver;
        }
        v.num_fw_info = fw.len().min(AMDSMI_FW_ID__MAX) as u8;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_kfd_info(h: amdsmi_processor_handle, out: *mut amdsmi_kfd_info_t) -> amdsmi_status_t {
    on_proc(h, false, |_, p| {
        let mut v = amdsmi_kfd_info_t::zeroed();
        v.kfd_id = 0x1_0000 + u64::from(p.index) * 0x111;
        // KFD numbers the CPU NUMA nodes first (two sockets here).
        v.node_id = 2 + p.index;
        v.current_partition_id = p.part;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_enumeration_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_enumeration_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_enumeration_info_t::zeroed();
        v.drm_render = 128 + p.index;
        v.drm_card = 1 + p.index;
        v.hsa_id = 2 + p.index;
        v.hip_id = p.index;
        set_c_str(
            &mut v.hip_uuid,
            &format!("GPU-{:016x}", f.serial(p.gpu) ^ u64::from(p.part)),
        );
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_compute_partition(
    h: amdsmi_processor_handle,
    out: *mut c_char,
    len: u32,
) -> amdsmi_status_t {
    on_proc(h, false, |f, _| put_str(out, len as usize, &f.p.compute_partition))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_memory_partition(
    h: amdsmi_processor_handle,
    out: *mut c_char,
    len: u32,
) -> amdsmi_status_t {
    on_proc(h, false, |f, _| put_str(out, len as usize, &f.p.memory_partition))
}
