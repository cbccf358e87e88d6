//! Power, thermal and clocks: their enums and the power, power-cap, clock and violation structs.

use crate::*;

/// amdsmi_clk_type_t (GFX and SYS are the same clock).
pub const AMDSMI_CLK_TYPE_SYS: amdsmi_clk_type_t = 0;
pub const AMDSMI_CLK_TYPE_GFX: amdsmi_clk_type_t = 0;
pub const AMDSMI_CLK_TYPE_DF: amdsmi_clk_type_t = 1;
pub const AMDSMI_CLK_TYPE_DCEF: amdsmi_clk_type_t = 2;
pub const AMDSMI_CLK_TYPE_SOC: amdsmi_clk_type_t = 3;
pub const AMDSMI_CLK_TYPE_MEM: amdsmi_clk_type_t = 4;
pub const AMDSMI_CLK_TYPE_PCIE: amdsmi_clk_type_t = 5;
pub const AMDSMI_CLK_TYPE_VCLK0: amdsmi_clk_type_t = 6;
pub const AMDSMI_CLK_TYPE_VCLK1: amdsmi_clk_type_t = 7;
pub const AMDSMI_CLK_TYPE_DCLK0: amdsmi_clk_type_t = 8;
pub const AMDSMI_CLK_TYPE_DCLK1: amdsmi_clk_type_t = 9;

/// amdsmi_temperature_type_t: the GPU's own sensors (board and baseboard
/// sensors, 100 and up, are left out: fleetop does not read them).
pub const AMDSMI_TEMPERATURE_TYPE_EDGE: amdsmi_temperature_type_t = 0;
pub const AMDSMI_TEMPERATURE_TYPE_HOTSPOT: amdsmi_temperature_type_t = 1;
pub const AMDSMI_TEMPERATURE_TYPE_JUNCTION: amdsmi_temperature_type_t = 1;
pub const AMDSMI_TEMPERATURE_TYPE_VRAM: amdsmi_temperature_type_t = 2;
pub const AMDSMI_TEMPERATURE_TYPE_HBM_0: amdsmi_temperature_type_t = 3;
pub const AMDSMI_TEMPERATURE_TYPE_HBM_1: amdsmi_temperature_type_t = 4;
pub const AMDSMI_TEMPERATURE_TYPE_HBM_2: amdsmi_temperature_type_t = 5;
pub const AMDSMI_TEMPERATURE_TYPE_HBM_3: amdsmi_temperature_type_t = 6;
pub const AMDSMI_TEMPERATURE_TYPE_PLX: amdsmi_temperature_type_t = 7;

/// amdsmi_temperature_metric_t.
pub const AMDSMI_TEMP_CURRENT: amdsmi_temperature_metric_t = 0;
pub const AMDSMI_TEMP_MAX: amdsmi_temperature_metric_t = 1;
pub const AMDSMI_TEMP_MIN: amdsmi_temperature_metric_t = 2;
pub const AMDSMI_TEMP_MAX_HYST: amdsmi_temperature_metric_t = 3;
pub const AMDSMI_TEMP_MIN_HYST: amdsmi_temperature_metric_t = 4;
pub const AMDSMI_TEMP_CRITICAL: amdsmi_temperature_metric_t = 5;
pub const AMDSMI_TEMP_CRITICAL_HYST: amdsmi_temperature_metric_t = 6;
pub const AMDSMI_TEMP_EMERGENCY: amdsmi_temperature_metric_t = 7;
pub const AMDSMI_TEMP_EMERGENCY_HYST: amdsmi_temperature_metric_t = 8;
pub const AMDSMI_TEMP_CRIT_MIN: amdsmi_temperature_metric_t = 9;
pub const AMDSMI_TEMP_CRIT_MIN_HYST: amdsmi_temperature_metric_t = 10;
pub const AMDSMI_TEMP_OFFSET: amdsmi_temperature_metric_t = 11;
pub const AMDSMI_TEMP_LOWEST: amdsmi_temperature_metric_t = 12;
pub const AMDSMI_TEMP_HIGHEST: amdsmi_temperature_metric_t = 13;
pub const AMDSMI_TEMP_SHUTDOWN: amdsmi_temperature_metric_t = 14;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_power_info_t {
    /// W.
    pub socket_power: u64,
    /// W (MI300 and later).
    pub current_socket_power: u32,
    /// W (MI200 and earlier, Navi).
    pub average_socket_power: u32,
    /// mV.
    pub gfx_voltage: u64,
    pub soc_voltage: u64,
    pub mem_voltage: u64,
    /// W.
    pub power_limit: u32,
    pub reserved: [u64; 18],
}

/// µW, except `dpm_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_power_cap_info_t {
    pub power_cap: u64,
    pub default_power_cap: u64,
    pub dpm_cap: u64,
    pub min_power_cap: u64,
    pub max_power_cap: u64,
    pub reserved: [u64; 3],
}

/// MHz.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_clk_info_t {
    pub clk: u32,
    pub min_clk: u32,
    pub max_clk: u32,
    pub clk_locked: u8,
    pub clk_deep_sleep: u8,
    pub reserved: [u32; 4],
}

/// MI300's throttling account: accumulated residency counters (`acc_*`),
/// percent of the last interval (`per_*`) and now (`active_*`, 0 or 1);
/// all-ones: not supported. The `[8][8]` arrays are per partition and XCC.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_violation_status_t {
    /// µs.
    pub reference_timestamp: u64,
    /// ms.
    pub violation_timestamp: u64,
    pub acc_counter: u64,
    pub acc_prochot_thrm: u64,
    /// PVIOL.
    pub acc_ppt_pwr: u64,
    /// TVIOL.
    pub acc_socket_thrm: u64,
    pub acc_vr_thrm: u64,
    pub acc_hbm_thrm: u64,
    pub acc_gfx_clk_below_host_limit: u64,
    pub per_prochot_thrm: u64,
    pub per_ppt_pwr: u64,
    pub per_socket_thrm: u64,
    pub per_vr_thrm: u64,
    pub per_hbm_thrm: u64,
    pub per_gfx_clk_below_host_limit: u64,
    pub active_prochot_thrm: u8,
    pub active_ppt_pwr: u8,
    pub active_socket_thrm: u8,
    pub active_vr_thrm: u8,
    pub active_hbm_thrm: u8,
    pub active_gfx_clk_below_host_limit: u8,
    pub acc_gfx_clk_below_host_limit_pwr: [[u64; 8]; 8],
    pub acc_gfx_clk_below_host_limit_thm: [[u64; 8]; 8],
    pub acc_low_utilization: [[u64; 8]; 8],
    pub acc_gfx_clk_below_host_limit_total: [[u64; 8]; 8],
    pub per_gfx_clk_below_host_limit_pwr: [[u64; 8]; 8],
    pub per_gfx_clk_below_host_limit_thm: [[u64; 8]; 8],
    pub per_low_utilization: [[u64; 8]; 8],
    pub per_gfx_clk_below_host_limit_total: [[u64; 8]; 8],
    pub active_gfx_clk_below_host_limit_pwr: [[u8; 8]; 8],
    pub active_gfx_clk_below_host_limit_thm: [[u8; 8]; 8],
    pub active_low_utilization: [[u8; 8]; 8],
    pub active_gfx_clk_below_host_limit_total: [[u8; 8]; 8],
    pub reserved: [[u64; 8]; 8],
    pub reserved2: [[u64; 8]; 8],
    pub reserved3: [[u64; 8]; 8],
}
