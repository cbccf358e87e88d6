//! Temperature, power, the power cap, energy and clocks.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_temp_metric(
    h: amdsmi_processor_handle,
    sensor: amdsmi_temperature_type_t,
    metric: amdsmi_temperature_metric_t,
    out: *mut i64,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let v = match (sensor, metric) {
            (AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CURRENT) => f.edge_temp_c(p.gpu),
            (AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CRITICAL) => g.edge_temp_c.and(g.edge_critical_c),
            (AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_EMERGENCY) => g.edge_temp_c.and(g.edge_emergency_c),
            (AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CURRENT) => Some(f.hotspot_c(p.gpu)),
            (AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CRITICAL) => Some(g.hotspot_critical_c),
            (AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_EMERGENCY) => Some(g.hotspot_emergency_c),
            (AMDSMI_TEMPERATURE_TYPE_VRAM, AMDSMI_TEMP_CURRENT) => Some(f.vram_temp_c(p.gpu)),
            (AMDSMI_TEMPERATURE_TYPE_VRAM, AMDSMI_TEMP_CRITICAL) => Some(g.vram_critical_c),
            (AMDSMI_TEMPERATURE_TYPE_VRAM, AMDSMI_TEMP_EMERGENCY) => Some(g.vram_emergency_c),
            _ => None,
        };
        match v {
            Some(t) => put(out, t),
            None if out.is_null() => INVAL,
            None => NOT_SUPPORTED,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_power_info(h: amdsmi_processor_handle, out: *mut amdsmi_power_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let w = f.power_w(p.gpu);
        let mut v = amdsmi_power_info_t::zeroed();
        v.socket_power = u64::from(w);
        v.current_socket_power = w;
        // MI300 reports the current socket power, not the average.
        v.average_socket_power = u32::MAX;
        v.gfx_voltage = u64::MAX;
        v.soc_voltage = u64::MAX;
        v.mem_voltage = u64::MAX;
        v.power_limit = f.spec(p.gpu).power_cap_w;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_power_cap_info(
    h: amdsmi_processor_handle,
    sensor: u32,
    out: *mut amdsmi_power_cap_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if sensor != 0 {
            return if out.is_null() { INVAL } else { NOT_SUPPORTED };
        }
        let g = f.spec(p.gpu);
        let mut v = amdsmi_power_cap_info_t::zeroed();
        v.power_cap = u64::from(g.power_cap_w) * 1_000_000;
        v.default_power_cap = u64::from(g.default_power_cap_w) * 1_000_000;
        v.dpm_cap = u64::from(g.gfx_max_mhz);
        v.min_power_cap = u64::from(g.min_power_cap_w) * 1_000_000;
        v.max_power_cap = u64::from(g.max_power_cap_w) * 1_000_000;
        put(out, v)
    })
}

/// µJ used since time zero.
pub(crate) fn energy_uj(f: &Fake, gpu: u32) -> f64 {
    let g = f.spec(gpu);
    (g.energy_base_j as f64 + f64::from(g.power_w) * f.now_s()) * 1e6
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_energy_count(
    h: amdsmi_processor_handle,
    acc: *mut u64,
    resolution: *mut f32,
    timestamp: *mut u64,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if acc.is_null() || resolution.is_null() || timestamp.is_null() {
            return INVAL;
        }
        put(acc, (energy_uj(f, p.gpu) / f64::from(ENERGY_RESOLUTION_UJ)) as u64);
        put(resolution, ENERGY_RESOLUTION_UJ);
        put(timestamp, (f.now_s() * 1e9) as u64)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_clock_info(
    h: amdsmi_processor_handle,
    clk: amdsmi_clk_type_t,
    out: *mut amdsmi_clk_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_clk_info_t::zeroed();
        match clk {
            AMDSMI_CLK_TYPE_GFX => {
                [v.clk, v.min_clk, v.max_clk] = [f.gfx_clock_mhz(p.gpu), g.gfx_min_mhz, g.gfx_max_mhz]
            }
            AMDSMI_CLK_TYPE_MEM => [v.clk, v.min_clk, v.max_clk] = [g.mem_clock_mhz, g.mem_min_mhz, g.mem_max_mhz],
            _ if out.is_null() => return INVAL,
            _ => return NOT_SUPPORTED,
        }
        put(out, v)
    })
}
