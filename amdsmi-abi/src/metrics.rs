//! The firmware's metrics table (`amdsmi_gpu_metrics_t`, v1.8) and its throttler bits.

use crate::*;

/// `amdsmi_gpu_metrics_t::indep_throttle_status` bits: the kernel's
/// ASIC-independent `SMU_THROTTLER_*_BIT`s (amdgpu_smu.h, as merged: the
/// drafts on the mailing list numbered PROCHOT, PPM and FIT otherwise).
pub mod throttler {
    pub const PPT0: u32 = 0;
    pub const PPT1: u32 = 1;
    pub const PPT2: u32 = 2;
    pub const PPT3: u32 = 3;
    pub const SPL: u32 = 4;
    pub const FPPT: u32 = 5;
    pub const SPPT: u32 = 6;
    pub const SPPT_APU: u32 = 7;
    pub const TDC_GFX: u32 = 16;
    pub const TDC_SOC: u32 = 17;
    pub const TDC_MEM: u32 = 18;
    pub const TDC_VDD: u32 = 19;
    pub const TDC_CVIP: u32 = 20;
    pub const EDC_CPU: u32 = 21;
    pub const EDC_GFX: u32 = 22;
    pub const APCC: u32 = 23;
    pub const TEMP_GPU: u32 = 32;
    pub const TEMP_CORE: u32 = 33;
    pub const TEMP_MEM: u32 = 34;
    pub const TEMP_EDGE: u32 = 35;
    pub const TEMP_HOTSPOT: u32 = 36;
    pub const TEMP_SOC: u32 = 37;
    pub const TEMP_VR_GFX: u32 = 38;
    pub const TEMP_VR_SOC: u32 = 39;
    pub const TEMP_VR_MEM0: u32 = 40;
    pub const TEMP_VR_MEM1: u32 = 41;
    pub const TEMP_LIQUID0: u32 = 42;
    pub const TEMP_LIQUID1: u32 = 43;
    pub const VRHOT0: u32 = 44;
    pub const VRHOT1: u32 = 45;
    pub const PROCHOT_CPU: u32 = 46;
    pub const PROCHOT_GFX: u32 = 47;
    pub const PPM: u32 = 56;
    pub const FIT: u32 = 57;
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amd_metrics_table_header_t {
    pub structure_size: u16,
    pub format_revision: u8,
    pub content_revision: u8,
}

/// One compute partition's (XCP's) share of the metrics table.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_gpu_xcp_metrics_t {
    /// Percent busy, per XCC.
    pub gfx_busy_inst: [u32; AMDSMI_MAX_NUM_XCC],
    pub jpeg_busy: [u16; AMDSMI_MAX_NUM_JPEG_ENG_V1],
    pub vcn_busy: [u16; AMDSMI_MAX_NUM_VCN],
    pub gfx_busy_acc: [u64; AMDSMI_MAX_NUM_XCC],
    pub gfx_below_host_limit_acc: [u64; AMDSMI_MAX_NUM_XCC],
    pub gfx_below_host_limit_ppt_acc: [u64; AMDSMI_MAX_NUM_XCC],
    pub gfx_below_host_limit_thm_acc: [u64; AMDSMI_MAX_NUM_XCC],
    pub gfx_low_utilization_acc: [u64; AMDSMI_MAX_NUM_XCC],
    pub gfx_below_host_limit_total_acc: [u64; AMDSMI_MAX_NUM_XCC],
}

/// The firmware's metrics table (v1.8 layout). °C, %, W, MHz; all-ones: N/A.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_gpu_metrics_t {
    pub common_header: amd_metrics_table_header_t,
    pub temperature_edge: u16,
    pub temperature_hotspot: u16,
    pub temperature_mem: u16,
    pub temperature_vrgfx: u16,
    pub temperature_vrsoc: u16,
    pub temperature_vrmem: u16,
    pub average_gfx_activity: u16,
    pub average_umc_activity: u16,
    pub average_mm_activity: u16,
    pub average_socket_power: u16,
    pub energy_accumulator: u64,
    pub system_clock_counter: u64,
    pub average_gfxclk_frequency: u16,
    pub average_socclk_frequency: u16,
    pub average_uclk_frequency: u16,
    pub average_vclk0_frequency: u16,
    pub average_dclk0_frequency: u16,
    pub average_vclk1_frequency: u16,
    pub average_dclk1_frequency: u16,
    pub current_gfxclk: u16,
    pub current_socclk: u16,
    pub current_uclk: u16,
    pub current_vclk0: u16,
    pub current_dclk0: u16,
    pub current_vclk1: u16,
    pub current_dclk1: u16,
    /// ASIC-specific throttler bits (amd-smi shows it only as a flag).
    pub throttle_status: u32,
    pub current_fan_speed: u16,
    pub pcie_link_width: u16,
    /// 0.1 GT/s.
    pub pcie_link_speed: u16,
    pub gfx_activity_acc: u32,
    pub mem_activity_acc: u32,
    pub temperature_hbm: [u16; AMDSMI_NUM_HBM_INSTANCES],
    pub firmware_timestamp: u64,
    pub voltage_soc: u16,
    pub voltage_gfx: u16,
    pub voltage_mem: u16,
    /// The ASIC-independent throttler bits ([`throttler`]).
    pub indep_throttle_status: u64,
    /// W.
    pub current_socket_power: u16,
    pub vcn_activity: [u16; AMDSMI_MAX_NUM_VCN],
    pub gfxclk_lock_status: u32,
    pub xgmi_link_width: u16,
    /// Gb/s.
    pub xgmi_link_speed: u16,
    /// GB/s, accumulated.
    pub pcie_bandwidth_acc: u64,
    /// GB/s.
    pub pcie_bandwidth_inst: u64,
    pub pcie_l0_to_recov_count_acc: u64,
    pub pcie_replay_count_acc: u64,
    pub pcie_replay_rover_count_acc: u64,
    /// KB, per XGMI link.
    pub xgmi_read_data_acc: [u64; AMDSMI_MAX_NUM_XGMI_LINKS],
    pub xgmi_write_data_acc: [u64; AMDSMI_MAX_NUM_XGMI_LINKS],
    pub current_gfxclks: [u16; AMDSMI_MAX_NUM_GFX_CLKS],
    pub current_socclks: [u16; AMDSMI_MAX_NUM_CLKS],
    pub current_vclk0s: [u16; AMDSMI_MAX_NUM_CLKS],
    pub current_dclk0s: [u16; AMDSMI_MAX_NUM_CLKS],
    pub jpeg_activity: [u16; AMDSMI_MAX_NUM_JPEG],
    pub pcie_nak_sent_count_acc: u32,
    pub pcie_nak_rcvd_count_acc: u32,
    pub accumulation_counter: u64,
    pub prochot_residency_acc: u64,
    pub ppt_residency_acc: u64,
    pub socket_thm_residency_acc: u64,
    pub vr_thm_residency_acc: u64,
    pub hbm_thm_residency_acc: u64,
    pub num_partition: u16,
    pub xcp_stats: [amdsmi_gpu_xcp_metrics_t; AMDSMI_MAX_NUM_XCP],
    pub pcie_lc_perf_other_end_recovery: u32,
    pub vram_max_bandwidth: u64,
    /// Per XGMI link: 1 up, 0 down, u16::MAX N/A.
    pub xgmi_link_status: [u16; AMDSMI_MAX_NUM_XGMI_LINKS],
}
