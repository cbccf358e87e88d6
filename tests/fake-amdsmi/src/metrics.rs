//! The gpu_metrics table and the violation (throttling) status.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_metrics_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_gpu_metrics_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if out.is_null() {
            return INVAL;
        }
        put(out, metrics(f, p.gpu))
    })
}

fn metrics(f: &Fake, gpu: u32) -> amdsmi_gpu_metrics_t {
    let g = f.spec(gpu);
    let now = f.now_s();
    let na16 = u16::MAX;
    let mut m = amdsmi_gpu_metrics_t::zeroed();
    m.common_header = amd_metrics_table_header_t {
        structure_size: std::mem::size_of::<amdsmi_gpu_metrics_t>() as u16,
        format_revision: 1,
        content_revision: 8,
    };
    m.temperature_edge = f.edge_temp_c(gpu).map_or(na16, |t| t as u16);
    m.temperature_hotspot = f.hotspot_c(gpu) as u16;
    m.temperature_mem = f.vram_temp_c(gpu) as u16;
    [m.temperature_vrgfx, m.temperature_vrsoc, m.temperature_vrmem] = [na16; 3];
    let gfx = f.gpu_gfx_activity(gpu);
    m.average_gfx_activity = gfx as u16;
    let umc: u32 = (0..f.parts).map(|q| f.umc_activity(f.proc_of(gpu, q))).sum::<u32>() / f.parts;
    m.average_umc_activity = umc as u16;
    m.average_mm_activity = g.mm_activity_pct.map_or(na16, |a| a as u16);
    m.average_socket_power = na16;
    m.energy_accumulator = (energy_uj(f, gpu) / f64::from(ENERGY_RESOLUTION_UJ)) as u64;
    m.system_clock_counter = (now * 1e9) as u64;
    [
        m.average_gfxclk_frequency,
        m.average_socclk_frequency,
        m.average_uclk_frequency,
        m.average_vclk0_frequency,
        m.average_dclk0_frequency,
        m.average_vclk1_frequency,
        m.average_dclk1_frequency,
    ] = [na16; 7];
    m.current_gfxclk = f.gfx_clock_mhz(gpu) as u16;
    m.current_uclk = g.mem_clock_mhz as u16;
    [
        m.current_socclk,
        m.current_vclk0,
        m.current_dclk0,
        m.current_vclk1,
        m.current_dclk1,
    ] = [na16; 5];
    // MI300's table leaves the ASIC-specific field unset; the
    // ASIC-independent bits and the violation counters carry throttling.
    m.throttle_status = u32::MAX;
    m.indep_throttle_status = if f.throttle(gpu).is_some() {
        (1 << throttler::TEMP_HOTSPOT) | (1 << throttler::TEMP_GPU)
    } else {
        0
    };
    m.current_fan_speed = na16;
    m.pcie_link_width = g.pcie_width;
    m.pcie_link_speed = pcie_gts_x10(g.pcie_gen);
    m.gfx_activity_acc = (f64::from(gfx) * now) as u32;
    m.mem_activity_acc = (f64::from(umc) * now) as u32;
    m.temperature_hbm = [na16; AMDSMI_NUM_HBM_INSTANCES];
    m.firmware_timestamp = (now * 1e8) as u64;
    [m.voltage_soc, m.voltage_gfx, m.voltage_mem] = [na16; 3];
    m.current_socket_power = f.power_w(gpu) as u16;
    m.vcn_activity = [na16; AMDSMI_MAX_NUM_VCN];
    m.xgmi_link_width = u16::from(g.xgmi_lanes);
    m.xgmi_link_speed = g.xgmi_bit_rate_gbps as u16;
    let pcie_gbs = f64::from(g.pcie_bandwidth_mbps) / 8000.0;
    m.pcie_bandwidth_acc = (pcie_gbs * now) as u64;
    m.pcie_bandwidth_inst = pcie_gbs.round() as u64;
    m.pcie_replay_count_acc = g.pcie_replay_count;
    for k in 0..AMDSMI_MAX_NUM_XGMI_LINKS as u32 {
        let i = k as usize;
        match f.peer_of(gpu, k).filter(|_| k < g.xgmi_links) {
            Some(peer) => {
                m.xgmi_read_data_acc[i] = f.xgmi_kb(peer, gpu);
                m.xgmi_write_data_acc[i] = f.xgmi_kb(gpu, peer);
                m.xgmi_link_status[i] = u16::from(f.link_down_since(gpu, peer).is_none());
            }
            None => {
                m.xgmi_read_data_acc[i] = u64::MAX;
                m.xgmi_write_data_acc[i] = u64::MAX;
                m.xgmi_link_status[i] = na16;
            }
        }
    }
    m.current_gfxclks = [na16; AMDSMI_MAX_NUM_GFX_CLKS];
    for c in m.current_gfxclks.iter_mut().take(g.xccs as usize) {
        *c = f.gfx_clock_mhz(gpu) as u16;
    }
    m.current_socclks = [na16; AMDSMI_MAX_NUM_CLKS];
    m.current_vclk0s = [na16; AMDSMI_MAX_NUM_CLKS];
    m.current_dclk0s = [na16; AMDSMI_MAX_NUM_CLKS];
    m.jpeg_activity = [na16; AMDSMI_MAX_NUM_JPEG];
    m.accumulation_counter = (now * 1000.0) as u64;
    m.socket_thm_residency_acc = f.throttled_ms(gpu);
    m.num_partition = f.parts as u16;
    let per_part = (g.xccs / f.parts) as usize;
    for (q, x) in m.xcp_stats.iter_mut().enumerate() {
        x.gfx_busy_inst = [u32::MAX; AMDSMI_MAX_NUM_XCC];
        x.jpeg_busy = [na16; AMDSMI_MAX_NUM_JPEG_ENG_V1];
        x.vcn_busy = [na16; AMDSMI_MAX_NUM_VCN];
        for a in [
            &mut x.gfx_busy_acc,
            &mut x.gfx_below_host_limit_acc,
            &mut x.gfx_below_host_limit_ppt_acc,
            &mut x.gfx_below_host_limit_thm_acc,
            &mut x.gfx_low_utilization_acc,
            &mut x.gfx_below_host_limit_total_acc,
        ] {
            *a = [u64::MAX; AMDSMI_MAX_NUM_XCC];
        }
        if q as u32 >= f.parts {
            continue;
        }
        let busy = f.gfx_activity(f.proc_of(gpu, q as u32));
        for c in 0..per_part {
            x.gfx_busy_inst[c] = xcc_busy(busy, c, per_part);
            x.gfx_busy_acc[c] = (f64::from(busy) * now) as u64;
            x.gfx_below_host_limit_thm_acc[c] = f.throttled_ms(gpu);
            x.gfx_below_host_limit_ppt_acc[c] = 0;
            x.gfx_below_host_limit_acc[c] = f.throttled_ms(gpu);
            x.gfx_below_host_limit_total_acc[c] = f.throttled_ms(gpu);
            x.gfx_low_utilization_acc[c] = 0;
        }
    }
    m.vram_max_bandwidth = g.vram_max_bandwidth;
    m
}

/// XCC `c` of a partition's `n`: its activity spread by -1, +1, -2, +2
/// (repeating), so the XCCs differ and their mean is the partition's
/// `gfx_activity` (a whole number of such runs, and nothing past 0-100).
fn xcc_busy(busy: u32, c: usize, n: usize) -> u32 {
    if !n.is_multiple_of(4) || !(2..=98).contains(&busy) {
        return busy;
    }
    let d = [1u32, 1, 2, 2][c % 4];
    if c.is_multiple_of(2) { busy - d } else { busy + d }
}

/// PCIe generation to the metrics table's 0.1 GT/s.
fn pcie_gts_x10(gen_: u32) -> u16 {
    match gen_ {
        1 => 25,
        2 => 50,
        3 => 80,
        4 => 160,
        5 => 320,
        6 => 640,
        _ => u16::MAX,
    }
}

/// PCIe generation to MT/s.
pub(crate) fn pcie_mts(gen_: u32) -> u32 {
    match pcie_gts_x10(gen_) {
        u16::MAX => u32::MAX,
        x => u32::from(x) * 100,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_violation_status(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_violation_status_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if out.is_null() {
            return INVAL;
        }
        let now = f.now_s();
        let hot = f.throttle(p.gpu).is_some();
        let mut v = amdsmi_violation_status_t::zeroed();
        v.reference_timestamp = ((EPOCH_S + now) * 1e6) as u64;
        v.violation_timestamp = (now * 1000.0) as u64;
        v.acc_counter = (now * 1000.0) as u64;
        v.acc_socket_thrm = f.throttled_ms(p.gpu);
        v.acc_gfx_clk_below_host_limit = f.throttled_ms(p.gpu);
        v.per_socket_thrm = if hot { 100 } else { 0 };
        v.per_gfx_clk_below_host_limit = v.per_socket_thrm;
        v.active_socket_thrm = u8::from(hot);
        v.active_gfx_clk_below_host_limit = u8::from(hot);
        for a in [
            &mut v.acc_gfx_clk_below_host_limit_pwr,
            &mut v.acc_gfx_clk_below_host_limit_thm,
            &mut v.acc_low_utilization,
            &mut v.acc_gfx_clk_below_host_limit_total,
            &mut v.per_gfx_clk_below_host_limit_pwr,
            &mut v.per_gfx_clk_below_host_limit_thm,
            &mut v.per_low_utilization,
            &mut v.per_gfx_clk_below_host_limit_total,
        ] {
            *a = [[u64::MAX; 8]; 8];
        }
        for a in [
            &mut v.active_gfx_clk_below_host_limit_pwr,
            &mut v.active_gfx_clk_below_host_limit_thm,
            &mut v.active_low_utilization,
            &mut v.active_gfx_clk_below_host_limit_total,
        ] {
            *a = [[u8::MAX; 8]; 8];
        }
        put(out, v)
    })
}
