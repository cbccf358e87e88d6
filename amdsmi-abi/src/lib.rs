//! AMD SMI's C ABI (`libamd_smi.so`) as Rust types, for the calls fleetop
//! makes: the agent's AMD reader loads the library at run time and calls
//! through these, and the fake library in `tests/fake-amdsmi` exports
//! functions of these very types.
//!
//! # The reference
//!
//! AMD's Python package `amdsmi` **7.0.2** (PyPI) is the reference: its
//! `amdsmi_wrapper.py` is a ctypes binding generated from that release's
//! `amdsmi.h`, with every struct's fields, padding and enum values, and the
//! 184 functions it binds when imported ([`ALL_SYMBOLS`]). Each type here
//! follows the wrapper field by field; where the wrapper writes explicit
//! `PADDING_n` members, natural C alignment (`#[repr(C)]`) gives the same
//! offsets, and the size of every struct the wrapper makes clear is asserted
//! at compile time below (the unit tests check the offsets of the fields
//! fleetop reads).
//!
//! Note how 7.0.2 differs from older headers: `amdsmi_link_type_t` has PCIE
//! = 1 and XGMI = 2 (swapped from 6.x), `amdsmi_power_info_t` starts with a
//! 64-bit `socket_power`, the voltages are 64-bit, and
//! `amdsmi_gpu_metrics_t` is the 4,544-byte v1.8 layout with per-partition
//! `xcp_stats` and `xgmi_link_status`.
//!
//! # What proves it
//!
//! A wrong layout here would be wrong in the agent and in the fake alike, and
//! the two would still agree. So the proof is outside this crate: the CI
//! check `.ci/amdsmi_check.py` reads the fake through AMD's own `amdsmi`
//! package (its ctypes structs, not ours) and must see every value the
//! profiles set. Keep that check passing when anything here changes.
//!
//! # Units, as the library gives them (Linux bare metal)
//!
//! Temperatures in °C (`amdsmi_get_temp_metric`); clocks in MHz; socket power
//! and the power limit in `amdsmi_power_info_t` in W; power caps in
//! `amdsmi_power_cap_info_t` in µW; memory in bytes
//! (`amdsmi_get_gpu_memory_*`), MB in `amdsmi_vram_usage_t`; process memory
//! in bytes; XGMI counters (`read`/`write`, `xgmi_*_data_acc`) in KB; PCIe
//! speed in MT/s (`amdsmi_pcie_info_t`) and 0.1 GT/s
//! (`amdsmi_gpu_metrics_t::pcie_link_speed`). All-ones in a field
//! (`u16::MAX`, `u32::MAX`, `u64::MAX`) means "not supported" (N/A).
//!
//! # Function choices (checked against the 7.0.2 wrapper)
//!
//! - VRAM: `amdsmi_get_gpu_memory_total` / `_usage` with
//!   [`AMDSMI_MEM_TYPE_VRAM`] (bytes); `amdsmi_get_gpu_vram_usage` (MB) too.
//! - Socket power: `amdsmi_get_power_info` (`current_socket_power`, W, on
//!   MI300; `average_socket_power` is for older parts); the cap:
//!   `amdsmi_get_power_cap_info` with sensor index 0.
//! - Throttling: `amdsmi_get_violation_status` is bound by 7.0.2 and is
//!   MI300's own account (PVIOL/TVIOL); `amdsmi_gpu_metrics_t::
//!   indep_throttle_status` carries the ASIC-independent throttler bits.
//! - XGMI: `amdsmi_get_gpu_xgmi_link_status` (per-link up/down),
//!   `amdsmi_get_link_metrics` (per-peer KB read/written, bit rate),
//!   `amdsmi_gpu_xgmi_error_status`, `amdsmi_topo_get_link_type`.
//! - Partitions: `amdsmi_get_gpu_compute_partition` and
//!   `amdsmi_get_gpu_memory_partition` answer strings ("SPX", "CPX",
//!   "NPS1", "NPS4"); `amdsmi_get_gpu_kfd_info` gives a partition's id.
//! - Events: `amdsmi_init_gpu_event_notification`, `_set_..._mask` (bit
//!   `event - 1` per [`amdsmi_evt_notification_type_t`]), `amdsmi_get_gpu_
//!   event_notification` (a timeout in ms; no event is
//!   [`AMDSMI_STATUS_NO_DATA`]) and `amdsmi_stop_gpu_event_notification`.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

// ---- handles and scalar typedefs --------------------------------------------

/// An opaque processor (GPU, or GPU partition) handle.
pub type amdsmi_processor_handle = *mut c_void;
/// An opaque socket handle: one per physical GPU (its partitions share it).
pub type amdsmi_socket_handle = *mut c_void;
pub type amdsmi_status_t = u32;
pub type processor_type_t = u32;
pub type amdsmi_init_flags_t = u64;
pub type amdsmi_clk_type_t = u32;
pub type amdsmi_temperature_type_t = u32;
pub type amdsmi_temperature_metric_t = u32;
pub type amdsmi_memory_type_t = u32;
/// A RAS block: one bit each, passed as a 64-bit value.
pub type amdsmi_gpu_block_t = u64;
pub type amdsmi_ras_err_state_t = u32;
pub type amdsmi_link_type_t = u32;
pub type amdsmi_xgmi_status_t = u32;
pub type amdsmi_xgmi_link_status_type_t = u32;
pub type amdsmi_evt_notification_type_t = u32;
pub type amdsmi_compute_partition_type_t = u32;
pub type amdsmi_accelerator_partition_type_t = u32;
pub type amdsmi_memory_partition_type_t = u32;
pub type amdsmi_fw_block_t = u32;
pub type amdsmi_card_form_factor_t = u32;
pub type amdsmi_vram_type_t = u32;
pub type amdsmi_memory_page_status_t = u32;
pub type amdsmi_process_handle_t = u32;

// ---- sizes the wrapper and header fix ----------------------------------------

pub const AMDSMI_MAX_STRING_LENGTH: usize = 256;
/// The UUID buffer amd-smi passes: 36 characters and the NUL, plus one.
pub const AMDSMI_GPU_UUID_SIZE: usize = 38;
pub const AMDSMI_MAX_NUM_XGMI_LINKS: usize = 8;
pub const AMDSMI_MAX_NUM_XGMI_PHYSICAL_LINK: usize = 64;
pub const AMDSMI_NUM_HBM_INSTANCES: usize = 4;
pub const AMDSMI_MAX_NUM_VCN: usize = 4;
pub const AMDSMI_MAX_NUM_CLKS: usize = 4;
pub const AMDSMI_MAX_NUM_GFX_CLKS: usize = 8;
pub const AMDSMI_MAX_NUM_JPEG: usize = 32;
pub const AMDSMI_MAX_NUM_JPEG_ENG_V1: usize = 40;
pub const AMDSMI_MAX_NUM_XCC: usize = 8;
pub const AMDSMI_MAX_NUM_XCP: usize = 8;
pub const AMDSMI_MAX_DEVICES: usize = 32;
/// `amdsmi_fw_info_t::fw_info_list`'s length (`AMDSMI_FW_ID__MAX`).
pub const AMDSMI_FW_ID__MAX: usize = 80;
/// amd-smi's Python package asks for up to this many processes.
pub const AMDSMI_MAX_NUM_PROCESSES: usize = 1024;
/// The buffer the Python package passes for partition strings.
pub const AMDSMI_PARTITION_STRING_LENGTH: usize = 80;

// ---- amdsmi_status_t ---------------------------------------------------------

pub const AMDSMI_STATUS_SUCCESS: amdsmi_status_t = 0;
pub const AMDSMI_STATUS_INVAL: amdsmi_status_t = 1;
pub const AMDSMI_STATUS_NOT_SUPPORTED: amdsmi_status_t = 2;
pub const AMDSMI_STATUS_NOT_YET_IMPLEMENTED: amdsmi_status_t = 3;
pub const AMDSMI_STATUS_FAIL_LOAD_MODULE: amdsmi_status_t = 4;
pub const AMDSMI_STATUS_FAIL_LOAD_SYMBOL: amdsmi_status_t = 5;
pub const AMDSMI_STATUS_DRM_ERROR: amdsmi_status_t = 6;
pub const AMDSMI_STATUS_API_FAILED: amdsmi_status_t = 7;
pub const AMDSMI_STATUS_TIMEOUT: amdsmi_status_t = 8;
pub const AMDSMI_STATUS_RETRY: amdsmi_status_t = 9;
pub const AMDSMI_STATUS_NO_PERM: amdsmi_status_t = 10;
pub const AMDSMI_STATUS_INTERRUPT: amdsmi_status_t = 11;
pub const AMDSMI_STATUS_IO: amdsmi_status_t = 12;
pub const AMDSMI_STATUS_ADDRESS_FAULT: amdsmi_status_t = 13;
pub const AMDSMI_STATUS_FILE_ERROR: amdsmi_status_t = 14;
pub const AMDSMI_STATUS_OUT_OF_RESOURCES: amdsmi_status_t = 15;
pub const AMDSMI_STATUS_INTERNAL_EXCEPTION: amdsmi_status_t = 16;
pub const AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS: amdsmi_status_t = 17;
pub const AMDSMI_STATUS_INIT_ERROR: amdsmi_status_t = 18;
pub const AMDSMI_STATUS_REFCOUNT_OVERFLOW: amdsmi_status_t = 19;
pub const AMDSMI_STATUS_DIRECTORY_NOT_FOUND: amdsmi_status_t = 20;
pub const AMDSMI_STATUS_BUSY: amdsmi_status_t = 30;
pub const AMDSMI_STATUS_NOT_FOUND: amdsmi_status_t = 31;
pub const AMDSMI_STATUS_NOT_INIT: amdsmi_status_t = 32;
pub const AMDSMI_STATUS_NO_SLOT: amdsmi_status_t = 33;
pub const AMDSMI_STATUS_DRIVER_NOT_LOADED: amdsmi_status_t = 34;
pub const AMDSMI_STATUS_MORE_DATA: amdsmi_status_t = 39;
pub const AMDSMI_STATUS_NO_DATA: amdsmi_status_t = 40;
pub const AMDSMI_STATUS_INSUFFICIENT_SIZE: amdsmi_status_t = 41;
pub const AMDSMI_STATUS_UNEXPECTED_SIZE: amdsmi_status_t = 42;
pub const AMDSMI_STATUS_UNEXPECTED_DATA: amdsmi_status_t = 43;
pub const AMDSMI_STATUS_NON_AMD_CPU: amdsmi_status_t = 44;
pub const AMDSMI_STATUS_NO_ENERGY_DRV: amdsmi_status_t = 45;
pub const AMDSMI_STATUS_NO_MSR_DRV: amdsmi_status_t = 46;
pub const AMDSMI_STATUS_NO_HSMP_DRV: amdsmi_status_t = 47;
pub const AMDSMI_STATUS_NO_HSMP_SUP: amdsmi_status_t = 48;
pub const AMDSMI_STATUS_NO_HSMP_MSG_SUP: amdsmi_status_t = 49;
pub const AMDSMI_STATUS_HSMP_TIMEOUT: amdsmi_status_t = 50;
pub const AMDSMI_STATUS_NO_DRV: amdsmi_status_t = 51;
pub const AMDSMI_STATUS_FILE_NOT_FOUND: amdsmi_status_t = 52;
pub const AMDSMI_STATUS_ARG_PTR_NULL: amdsmi_status_t = 53;
pub const AMDSMI_STATUS_AMDGPU_RESTART_ERR: amdsmi_status_t = 54;
pub const AMDSMI_STATUS_SETTING_UNAVAILABLE: amdsmi_status_t = 55;
pub const AMDSMI_STATUS_CORRUPTED_EEPROM: amdsmi_status_t = 56;
pub const AMDSMI_STATUS_MAP_ERROR: amdsmi_status_t = 0xFFFF_FFFE;
pub const AMDSMI_STATUS_UNKNOWN_ERROR: amdsmi_status_t = 0xFFFF_FFFF;

/// The status's name as amdsmi.h spells it (`None`: not a 7.0.2 code).
pub fn status_name(s: amdsmi_status_t) -> Option<&'static str> {
    Some(match s {
        AMDSMI_STATUS_SUCCESS => "AMDSMI_STATUS_SUCCESS",
        AMDSMI_STATUS_INVAL => "AMDSMI_STATUS_INVAL",
        AMDSMI_STATUS_NOT_SUPPORTED => "AMDSMI_STATUS_NOT_SUPPORTED",
        AMDSMI_STATUS_NOT_YET_IMPLEMENTED => "AMDSMI_STATUS_NOT_YET_IMPLEMENTED",
        AMDSMI_STATUS_FAIL_LOAD_MODULE => "AMDSMI_STATUS_FAIL_LOAD_MODULE",
        AMDSMI_STATUS_FAIL_LOAD_SYMBOL => "AMDSMI_STATUS_FAIL_LOAD_SYMBOL",
        AMDSMI_STATUS_DRM_ERROR => "AMDSMI_STATUS_DRM_ERROR",
        AMDSMI_STATUS_API_FAILED => "AMDSMI_STATUS_API_FAILED",
        AMDSMI_STATUS_TIMEOUT => "AMDSMI_STATUS_TIMEOUT",
        AMDSMI_STATUS_RETRY => "AMDSMI_STATUS_RETRY",
        AMDSMI_STATUS_NO_PERM => "AMDSMI_STATUS_NO_PERM",
        AMDSMI_STATUS_INTERRUPT => "AMDSMI_STATUS_INTERRUPT",
        AMDSMI_STATUS_IO => "AMDSMI_STATUS_IO",
        AMDSMI_STATUS_ADDRESS_FAULT => "AMDSMI_STATUS_ADDRESS_FAULT",
        AMDSMI_STATUS_FILE_ERROR => "AMDSMI_STATUS_FILE_ERROR",
        AMDSMI_STATUS_OUT_OF_RESOURCES => "AMDSMI_STATUS_OUT_OF_RESOURCES",
        AMDSMI_STATUS_INTERNAL_EXCEPTION => "AMDSMI_STATUS_INTERNAL_EXCEPTION",
        AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS => "AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS",
        AMDSMI_STATUS_INIT_ERROR => "AMDSMI_STATUS_INIT_ERROR",
        AMDSMI_STATUS_REFCOUNT_OVERFLOW => "AMDSMI_STATUS_REFCOUNT_OVERFLOW",
        AMDSMI_STATUS_DIRECTORY_NOT_FOUND => "AMDSMI_STATUS_DIRECTORY_NOT_FOUND",
        AMDSMI_STATUS_BUSY => "AMDSMI_STATUS_BUSY",
        AMDSMI_STATUS_NOT_FOUND => "AMDSMI_STATUS_NOT_FOUND",
        AMDSMI_STATUS_NOT_INIT => "AMDSMI_STATUS_NOT_INIT",
        AMDSMI_STATUS_NO_SLOT => "AMDSMI_STATUS_NO_SLOT",
        AMDSMI_STATUS_DRIVER_NOT_LOADED => "AMDSMI_STATUS_DRIVER_NOT_LOADED",
        AMDSMI_STATUS_MORE_DATA => "AMDSMI_STATUS_MORE_DATA",
        AMDSMI_STATUS_NO_DATA => "AMDSMI_STATUS_NO_DATA",
        AMDSMI_STATUS_INSUFFICIENT_SIZE => "AMDSMI_STATUS_INSUFFICIENT_SIZE",
        AMDSMI_STATUS_UNEXPECTED_SIZE => "AMDSMI_STATUS_UNEXPECTED_SIZE",
        AMDSMI_STATUS_UNEXPECTED_DATA => "AMDSMI_STATUS_UNEXPECTED_DATA",
        AMDSMI_STATUS_NON_AMD_CPU => "AMDSMI_STATUS_NON_AMD_CPU",
        AMDSMI_STATUS_NO_ENERGY_DRV => "AMDSMI_STATUS_NO_ENERGY_DRV",
        AMDSMI_STATUS_NO_MSR_DRV => "AMDSMI_STATUS_NO_MSR_DRV",
        AMDSMI_STATUS_NO_HSMP_DRV => "AMDSMI_STATUS_NO_HSMP_DRV",
        AMDSMI_STATUS_NO_HSMP_SUP => "AMDSMI_STATUS_NO_HSMP_SUP",
        AMDSMI_STATUS_NO_HSMP_MSG_SUP => "AMDSMI_STATUS_NO_HSMP_MSG_SUP",
        AMDSMI_STATUS_HSMP_TIMEOUT => "AMDSMI_STATUS_HSMP_TIMEOUT",
        AMDSMI_STATUS_NO_DRV => "AMDSMI_STATUS_NO_DRV",
        AMDSMI_STATUS_FILE_NOT_FOUND => "AMDSMI_STATUS_FILE_NOT_FOUND",
        AMDSMI_STATUS_ARG_PTR_NULL => "AMDSMI_STATUS_ARG_PTR_NULL",
        AMDSMI_STATUS_AMDGPU_RESTART_ERR => "AMDSMI_STATUS_AMDGPU_RESTART_ERR",
        AMDSMI_STATUS_SETTING_UNAVAILABLE => "AMDSMI_STATUS_SETTING_UNAVAILABLE",
        AMDSMI_STATUS_CORRUPTED_EEPROM => "AMDSMI_STATUS_CORRUPTED_EEPROM",
        AMDSMI_STATUS_MAP_ERROR => "AMDSMI_STATUS_MAP_ERROR",
        AMDSMI_STATUS_UNKNOWN_ERROR => "AMDSMI_STATUS_UNKNOWN_ERROR",
        _ => return None,
    })
}

// ---- enums -------------------------------------------------------------------

/// amdsmi_init_flags_t (the call takes it as a 64-bit value).
pub const AMDSMI_INIT_ALL_PROCESSORS: amdsmi_init_flags_t = 0xFFFF_FFFF;
pub const AMDSMI_INIT_AMD_CPUS: amdsmi_init_flags_t = 1;
pub const AMDSMI_INIT_AMD_GPUS: amdsmi_init_flags_t = 2;
pub const AMDSMI_INIT_NON_AMD_CPUS: amdsmi_init_flags_t = 4;
pub const AMDSMI_INIT_NON_AMD_GPUS: amdsmi_init_flags_t = 8;
pub const AMDSMI_INIT_AMD_APUS: amdsmi_init_flags_t = 3;

/// processor_type_t.
pub const AMDSMI_PROCESSOR_TYPE_UNKNOWN: processor_type_t = 0;
pub const AMDSMI_PROCESSOR_TYPE_AMD_GPU: processor_type_t = 1;
pub const AMDSMI_PROCESSOR_TYPE_AMD_CPU: processor_type_t = 2;
pub const AMDSMI_PROCESSOR_TYPE_NON_AMD_GPU: processor_type_t = 3;
pub const AMDSMI_PROCESSOR_TYPE_NON_AMD_CPU: processor_type_t = 4;
pub const AMDSMI_PROCESSOR_TYPE_AMD_CPU_CORE: processor_type_t = 5;
pub const AMDSMI_PROCESSOR_TYPE_AMD_APU: processor_type_t = 6;

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

/// amdsmi_memory_type_t.
pub const AMDSMI_MEM_TYPE_VRAM: amdsmi_memory_type_t = 0;
pub const AMDSMI_MEM_TYPE_VIS_VRAM: amdsmi_memory_type_t = 1;
pub const AMDSMI_MEM_TYPE_GTT: amdsmi_memory_type_t = 2;

/// amdsmi_gpu_block_t: the RAS blocks, one bit each.
pub const AMDSMI_GPU_BLOCK_INVALID: amdsmi_gpu_block_t = 0;
pub const AMDSMI_GPU_BLOCK_UMC: amdsmi_gpu_block_t = 1;
pub const AMDSMI_GPU_BLOCK_SDMA: amdsmi_gpu_block_t = 1 << 1;
pub const AMDSMI_GPU_BLOCK_GFX: amdsmi_gpu_block_t = 1 << 2;
pub const AMDSMI_GPU_BLOCK_MMHUB: amdsmi_gpu_block_t = 1 << 3;
pub const AMDSMI_GPU_BLOCK_ATHUB: amdsmi_gpu_block_t = 1 << 4;
pub const AMDSMI_GPU_BLOCK_PCIE_BIF: amdsmi_gpu_block_t = 1 << 5;
pub const AMDSMI_GPU_BLOCK_HDP: amdsmi_gpu_block_t = 1 << 6;
pub const AMDSMI_GPU_BLOCK_XGMI_WAFL: amdsmi_gpu_block_t = 1 << 7;
pub const AMDSMI_GPU_BLOCK_DF: amdsmi_gpu_block_t = 1 << 8;
pub const AMDSMI_GPU_BLOCK_SMN: amdsmi_gpu_block_t = 1 << 9;
pub const AMDSMI_GPU_BLOCK_SEM: amdsmi_gpu_block_t = 1 << 10;
pub const AMDSMI_GPU_BLOCK_MP0: amdsmi_gpu_block_t = 1 << 11;
pub const AMDSMI_GPU_BLOCK_MP1: amdsmi_gpu_block_t = 1 << 12;
pub const AMDSMI_GPU_BLOCK_FUSE: amdsmi_gpu_block_t = 1 << 13;
pub const AMDSMI_GPU_BLOCK_MCA: amdsmi_gpu_block_t = 1 << 14;
pub const AMDSMI_GPU_BLOCK_VCN: amdsmi_gpu_block_t = 1 << 15;
pub const AMDSMI_GPU_BLOCK_JPEG: amdsmi_gpu_block_t = 1 << 16;
pub const AMDSMI_GPU_BLOCK_IH: amdsmi_gpu_block_t = 1 << 17;
pub const AMDSMI_GPU_BLOCK_MPIO: amdsmi_gpu_block_t = 1 << 18;
pub const AMDSMI_GPU_BLOCK_RESERVED: amdsmi_gpu_block_t = 1 << 63;

/// Every RAS block of 7.0.2 with the name amd-smi prints for it, in bit order.
pub const GPU_BLOCKS: [(amdsmi_gpu_block_t, &str); 19] = [
    (AMDSMI_GPU_BLOCK_UMC, "UMC"),
    (AMDSMI_GPU_BLOCK_SDMA, "SDMA"),
    (AMDSMI_GPU_BLOCK_GFX, "GFX"),
    (AMDSMI_GPU_BLOCK_MMHUB, "MMHUB"),
    (AMDSMI_GPU_BLOCK_ATHUB, "ATHUB"),
    (AMDSMI_GPU_BLOCK_PCIE_BIF, "PCIE_BIF"),
    (AMDSMI_GPU_BLOCK_HDP, "HDP"),
    (AMDSMI_GPU_BLOCK_XGMI_WAFL, "XGMI_WAFL"),
    (AMDSMI_GPU_BLOCK_DF, "DF"),
    (AMDSMI_GPU_BLOCK_SMN, "SMN"),
    (AMDSMI_GPU_BLOCK_SEM, "SEM"),
    (AMDSMI_GPU_BLOCK_MP0, "MP0"),
    (AMDSMI_GPU_BLOCK_MP1, "MP1"),
    (AMDSMI_GPU_BLOCK_FUSE, "FUSE"),
    (AMDSMI_GPU_BLOCK_MCA, "MCA"),
    (AMDSMI_GPU_BLOCK_VCN, "VCN"),
    (AMDSMI_GPU_BLOCK_JPEG, "JPEG"),
    (AMDSMI_GPU_BLOCK_IH, "IH"),
    (AMDSMI_GPU_BLOCK_MPIO, "MPIO"),
];

/// amdsmi_ras_err_state_t (amdsmi_get_gpu_ecc_status).
pub const AMDSMI_RAS_ERR_STATE_NONE: amdsmi_ras_err_state_t = 0;
pub const AMDSMI_RAS_ERR_STATE_DISABLED: amdsmi_ras_err_state_t = 1;
pub const AMDSMI_RAS_ERR_STATE_PARITY: amdsmi_ras_err_state_t = 2;
pub const AMDSMI_RAS_ERR_STATE_SING_C: amdsmi_ras_err_state_t = 3;
pub const AMDSMI_RAS_ERR_STATE_MULT_UC: amdsmi_ras_err_state_t = 4;
pub const AMDSMI_RAS_ERR_STATE_POISON: amdsmi_ras_err_state_t = 5;
pub const AMDSMI_RAS_ERR_STATE_ENABLED: amdsmi_ras_err_state_t = 6;
pub const AMDSMI_RAS_ERR_STATE_INVALID: amdsmi_ras_err_state_t = 0xFFFF_FFFF;

/// amdsmi_memory_page_status_t (a retired page's state).
pub const AMDSMI_MEM_PAGE_STATUS_RESERVED: amdsmi_memory_page_status_t = 0;
pub const AMDSMI_MEM_PAGE_STATUS_PENDING: amdsmi_memory_page_status_t = 1;
pub const AMDSMI_MEM_PAGE_STATUS_UNRESERVABLE: amdsmi_memory_page_status_t = 2;

/// amdsmi_link_type_t, as 7.0.2 numbers it (PCIE 1, XGMI 2).
pub const AMDSMI_LINK_TYPE_INTERNAL: amdsmi_link_type_t = 0;
pub const AMDSMI_LINK_TYPE_PCIE: amdsmi_link_type_t = 1;
pub const AMDSMI_LINK_TYPE_XGMI: amdsmi_link_type_t = 2;
pub const AMDSMI_LINK_TYPE_NOT_APPLICABLE: amdsmi_link_type_t = 3;
pub const AMDSMI_LINK_TYPE_UNKNOWN: amdsmi_link_type_t = 4;

/// amdsmi_xgmi_status_t (amdsmi_gpu_xgmi_error_status).
pub const AMDSMI_XGMI_STATUS_NO_ERRORS: amdsmi_xgmi_status_t = 0;
pub const AMDSMI_XGMI_STATUS_ERROR: amdsmi_xgmi_status_t = 1;
pub const AMDSMI_XGMI_STATUS_MULTIPLE_ERRORS: amdsmi_xgmi_status_t = 2;

/// amdsmi_xgmi_link_status_type_t (per link, amdsmi_get_gpu_xgmi_link_status).
pub const AMDSMI_XGMI_LINK_DOWN: amdsmi_xgmi_link_status_type_t = 0;
pub const AMDSMI_XGMI_LINK_UP: amdsmi_xgmi_link_status_type_t = 1;
pub const AMDSMI_XGMI_LINK_DISABLE: amdsmi_xgmi_link_status_type_t = 2;

/// amdsmi_evt_notification_type_t. The mask bit of event `e` is `1 << (e - 1)`.
pub const AMDSMI_EVT_NOTIF_NONE: amdsmi_evt_notification_type_t = 0;
pub const AMDSMI_EVT_NOTIF_VMFAULT: amdsmi_evt_notification_type_t = 1;
pub const AMDSMI_EVT_NOTIF_THERMAL_THROTTLE: amdsmi_evt_notification_type_t = 2;
pub const AMDSMI_EVT_NOTIF_GPU_PRE_RESET: amdsmi_evt_notification_type_t = 3;
pub const AMDSMI_EVT_NOTIF_GPU_POST_RESET: amdsmi_evt_notification_type_t = 4;
pub const AMDSMI_EVT_NOTIF_MIGRATE_START: amdsmi_evt_notification_type_t = 5;
pub const AMDSMI_EVT_NOTIF_MIGRATE_END: amdsmi_evt_notification_type_t = 6;
pub const AMDSMI_EVT_NOTIF_PAGE_FAULT_START: amdsmi_evt_notification_type_t = 7;
pub const AMDSMI_EVT_NOTIF_PAGE_FAULT_END: amdsmi_evt_notification_type_t = 8;
pub const AMDSMI_EVT_NOTIF_QUEUE_EVICTION: amdsmi_evt_notification_type_t = 9;
pub const AMDSMI_EVT_NOTIF_QUEUE_RESTORE: amdsmi_evt_notification_type_t = 10;
pub const AMDSMI_EVT_NOTIF_UNMAP_FROM_GPU: amdsmi_evt_notification_type_t = 11;
pub const AMDSMI_EVT_NOTIF_PROCESS_START: amdsmi_evt_notification_type_t = 12;
pub const AMDSMI_EVT_NOTIF_PROCESS_END: amdsmi_evt_notification_type_t = 13;

/// The mask bit amdsmi_set_gpu_event_notification_mask takes for an event.
pub const fn event_mask_bit(event: amdsmi_evt_notification_type_t) -> u64 {
    if event == AMDSMI_EVT_NOTIF_NONE || event > 64 {
        0
    } else {
        1 << (event - 1)
    }
}

/// amdsmi_compute_partition_type_t.
pub const AMDSMI_COMPUTE_PARTITION_INVALID: amdsmi_compute_partition_type_t = 0;
pub const AMDSMI_COMPUTE_PARTITION_SPX: amdsmi_compute_partition_type_t = 1;
pub const AMDSMI_COMPUTE_PARTITION_DPX: amdsmi_compute_partition_type_t = 2;
pub const AMDSMI_COMPUTE_PARTITION_TPX: amdsmi_compute_partition_type_t = 3;
pub const AMDSMI_COMPUTE_PARTITION_QPX: amdsmi_compute_partition_type_t = 4;
pub const AMDSMI_COMPUTE_PARTITION_CPX: amdsmi_compute_partition_type_t = 5;

/// amdsmi_accelerator_partition_type_t (same numbers as the compute type).
pub const AMDSMI_ACCELERATOR_PARTITION_INVALID: amdsmi_accelerator_partition_type_t = 0;
pub const AMDSMI_ACCELERATOR_PARTITION_SPX: amdsmi_accelerator_partition_type_t = 1;
pub const AMDSMI_ACCELERATOR_PARTITION_DPX: amdsmi_accelerator_partition_type_t = 2;
pub const AMDSMI_ACCELERATOR_PARTITION_TPX: amdsmi_accelerator_partition_type_t = 3;
pub const AMDSMI_ACCELERATOR_PARTITION_QPX: amdsmi_accelerator_partition_type_t = 4;
pub const AMDSMI_ACCELERATOR_PARTITION_CPX: amdsmi_accelerator_partition_type_t = 5;

/// amdsmi_memory_partition_type_t (the value is the NUMA node count).
pub const AMDSMI_MEMORY_PARTITION_UNKNOWN: amdsmi_memory_partition_type_t = 0;
pub const AMDSMI_MEMORY_PARTITION_NPS1: amdsmi_memory_partition_type_t = 1;
pub const AMDSMI_MEMORY_PARTITION_NPS2: amdsmi_memory_partition_type_t = 2;
pub const AMDSMI_MEMORY_PARTITION_NPS4: amdsmi_memory_partition_type_t = 4;
pub const AMDSMI_MEMORY_PARTITION_NPS8: amdsmi_memory_partition_type_t = 8;

/// amdsmi_card_form_factor_t (amdsmi_pcie_info_t's slot type).
pub const AMDSMI_CARD_FORM_FACTOR_PCIE: amdsmi_card_form_factor_t = 0;
pub const AMDSMI_CARD_FORM_FACTOR_OAM: amdsmi_card_form_factor_t = 1;
pub const AMDSMI_CARD_FORM_FACTOR_CEM: amdsmi_card_form_factor_t = 2;
pub const AMDSMI_CARD_FORM_FACTOR_UNKNOWN: amdsmi_card_form_factor_t = 3;

/// amdsmi_vram_type_t (the ones an Instinct part has).
pub const AMDSMI_VRAM_TYPE_UNKNOWN: amdsmi_vram_type_t = 0;
pub const AMDSMI_VRAM_TYPE_HBM: amdsmi_vram_type_t = 1;
pub const AMDSMI_VRAM_TYPE_HBM2: amdsmi_vram_type_t = 2;
pub const AMDSMI_VRAM_TYPE_HBM2E: amdsmi_vram_type_t = 3;
pub const AMDSMI_VRAM_TYPE_HBM3: amdsmi_vram_type_t = 4;

/// amdsmi_fw_block_t: the blocks fleetop names (the enum runs to 79).
pub const AMDSMI_FW_ID_SMU: amdsmi_fw_block_t = 1;
pub const AMDSMI_FW_ID_CP_MEC1: amdsmi_fw_block_t = 7;
pub const AMDSMI_FW_ID_CP_MEC2: amdsmi_fw_block_t = 8;
pub const AMDSMI_FW_ID_RLC: amdsmi_fw_block_t = 9;
pub const AMDSMI_FW_ID_SDMA0: amdsmi_fw_block_t = 10;
pub const AMDSMI_FW_ID_VCN: amdsmi_fw_block_t = 18;
pub const AMDSMI_FW_ID_PSP_SOSDRV: amdsmi_fw_block_t = 30;
pub const AMDSMI_FW_ID_MC: amdsmi_fw_block_t = 36;
pub const AMDSMI_FW_ID_PSP_BL: amdsmi_fw_block_t = 37;
pub const AMDSMI_FW_ID_ASD: amdsmi_fw_block_t = 72;
pub const AMDSMI_FW_ID_TA_RAS: amdsmi_fw_block_t = 73;
pub const AMDSMI_FW_ID_TA_XGMI: amdsmi_fw_block_t = 74;
pub const AMDSMI_FW_ID_PM: amdsmi_fw_block_t = 77;
pub const AMDSMI_FW_ID_PLDM_BUNDLE: amdsmi_fw_block_t = 79;

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

// ---- structs -----------------------------------------------------------------

/// Every struct here is plain data: integers, arrays of them and raw
/// pointers, for which all-zero bytes are a valid value.
macro_rules! zeroed {
    ($($t:ty),* $(,)?) => {$(
        impl $t {
            /// All fields zero, as C callers pass these (`= {0}`).
            pub fn zeroed() -> Self {
                // SAFETY: the type is #[repr(C)] plain data (integers, arrays
                // of integers, raw pointers); all-zero bytes are valid for it.
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}

/// amdsmi_bdf_t: a union of a 64-bit value and bit fields (function 3 bits,
/// device 5, bus 8, domain 48, lowest first).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct amdsmi_bdf_t {
    pub as_uint: u64,
}

impl amdsmi_bdf_t {
    pub fn new(domain: u64, bus: u8, device: u8, function: u8) -> Self {
        Self {
            as_uint: (u64::from(function) & 0x7)
                | ((u64::from(device) & 0x1F) << 3)
                | (u64::from(bus) << 8)
                | ((domain & 0xFFFF_FFFF_FFFF) << 16),
        }
    }
    pub fn function_number(self) -> u8 {
        (self.as_uint & 0x7) as u8
    }
    pub fn device_number(self) -> u8 {
        ((self.as_uint >> 3) & 0x1F) as u8
    }
    pub fn bus_number(self) -> u8 {
        ((self.as_uint >> 8) & 0xFF) as u8
    }
    pub fn domain_number(self) -> u64 {
        self.as_uint >> 16
    }
    /// As amd-smi prints it: `0000:05:00.0` (lower-case hex).
    pub fn to_bus_id(self) -> String {
        format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain_number(),
            self.bus_number(),
            self.device_number(),
            self.function_number()
        )
    }
    /// Parses `DDDD:BB:DD.F` (hex; a longer domain is allowed).
    pub fn parse(s: &str) -> Option<Self> {
        let (rest, func) = s.rsplit_once('.')?;
        let mut it = rest.rsplitn(3, ':');
        let dev = it.next()?;
        let bus = it.next()?;
        let dom = it.next()?;
        let function = u8::from_str_radix(func, 16).ok()?;
        let device = u8::from_str_radix(dev, 16).ok()?;
        if function > 7 || device > 31 {
            return None;
        }
        Some(Self::new(
            u64::from_str_radix(dom, 16).ok()?,
            u8::from_str_radix(bus, 16).ok()?,
            device,
            function,
        ))
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_version_t {
    pub major: u32,
    pub minor: u32,
    pub release: u32,
    /// A NUL-terminated string the library owns.
    pub build: *const c_char,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_asic_info_t {
    pub market_name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub vendor_id: u32,
    pub vendor_name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub subvendor_id: u32,
    pub device_id: u64,
    pub rev_id: u32,
    /// Hex digits, no `0x` (amd-smi parses it with base 16).
    pub asic_serial: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub oam_id: u32,
    pub num_of_compute_units: u32,
    /// e.g. 0x942 for gfx942 (amd-smi prints `"gfx" + hex`).
    pub target_graphics_version: u64,
    pub subsystem_id: u32,
    pub reserved: [u32; 21],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_board_info_t {
    pub model_number: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub product_serial: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub fru_id: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub product_name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub manufacturer_name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub reserved: [u64; 64],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_driver_info_t {
    pub driver_version: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub driver_date: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub driver_name: [c_char; AMDSMI_MAX_STRING_LENGTH],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_vbios_info_t {
    pub name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub build_date: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub part_number: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub version: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub reserved: [u64; 68],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_fw_info_list_t {
    pub fw_id: amdsmi_fw_block_t,
    pub fw_version: u64,
    pub reserved: [u64; 2],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_fw_info_t {
    /// How many of `fw_info_list` are filled.
    pub num_fw_info: u8,
    pub fw_info_list: [amdsmi_fw_info_list_t; AMDSMI_FW_ID__MAX],
    pub reserved: [u32; 7],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_kfd_info_t {
    pub kfd_id: u64,
    pub node_id: u32,
    pub current_partition_id: u32,
    pub reserved: [u32; 12],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_enumeration_info_t {
    pub drm_render: u32,
    pub drm_card: u32,
    pub hsa_id: u32,
    pub hip_id: u32,
    pub hip_uuid: [c_char; AMDSMI_MAX_STRING_LENGTH],
}

/// Percent; 0xFFFF (as amd-smi checks) or u32::MAX: not supported.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_engine_usage_t {
    pub gfx_activity: u32,
    pub umc_activity: u32,
    pub mm_activity: u32,
    pub reserved: [u32; 13],
}

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

/// MB.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_vram_usage_t {
    pub vram_total: u32,
    pub vram_used: u32,
    pub reserved: [u32; 2],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_vram_info_t {
    pub vram_type: amdsmi_vram_type_t,
    pub vram_vendor: [c_char; AMDSMI_MAX_STRING_LENGTH],
    /// MB.
    pub vram_size: u64,
    pub vram_bit_width: u32,
    /// GB/s.
    pub vram_max_bandwidth: u64,
    pub reserved: [u64; 37],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_error_count_t {
    pub correctable_count: u64,
    pub uncorrectable_count: u64,
    pub deferred_count: u64,
    pub reserved: [u64; 5],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_retired_page_record_t {
    pub page_address: u64,
    pub page_size: u64,
    pub status: amdsmi_memory_page_status_t,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_pcie_static_t {
    pub max_pcie_width: u16,
    /// MT/s.
    pub max_pcie_speed: u32,
    /// The PCIe generation trained now.
    pub pcie_interface_version: u32,
    pub slot_type: amdsmi_card_form_factor_t,
    pub max_pcie_interface_version: u32,
    pub reserved: [u64; 9],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_pcie_metric_t {
    pub pcie_width: u16,
    /// MT/s.
    pub pcie_speed: u32,
    /// Mb/s, instantaneous.
    pub pcie_bandwidth: u32,
    pub pcie_replay_count: u64,
    pub pcie_l0_to_recovery_count: u64,
    pub pcie_replay_roll_over_count: u64,
    pub pcie_nak_sent_count: u64,
    pub pcie_nak_received_count: u64,
    pub pcie_lc_perf_other_end_recovery_count: u32,
    pub reserved: [u64; 12],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_pcie_info_t {
    pub pcie_static: amdsmi_pcie_static_t,
    pub pcie_metric: amdsmi_pcie_metric_t,
    pub reserved: [u64; 32],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_link_t {
    /// The peer's BDF.
    pub bdf: amdsmi_bdf_t,
    /// Gb/s per lane.
    pub bit_rate: u32,
    /// GB/s.
    pub max_bandwidth: u32,
    pub link_type: amdsmi_link_type_t,
    /// KB received from the peer, accumulated.
    pub read: u64,
    /// KB sent to the peer, accumulated.
    pub write: u64,
    pub reserved: [u64; 2],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_link_metrics_t {
    pub num_links: u32,
    pub links: [amdsmi_link_t; AMDSMI_MAX_NUM_XGMI_PHYSICAL_LINK],
    pub reserved: [u64; 7],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_xgmi_link_status_t {
    pub total_links: u32,
    pub status: [amdsmi_xgmi_link_status_type_t; AMDSMI_MAX_NUM_XGMI_LINKS],
    pub reserved: [u64; 7],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_xgmi_info_t {
    pub xgmi_lanes: u8,
    pub xgmi_hive_id: u64,
    pub xgmi_node_id: u64,
    pub index: u32,
    pub reserved: [u32; 9],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_proc_engine_usage_t {
    /// ns spent on the engine.
    pub gfx: u64,
    pub enc: u64,
    pub reserved: [u32; 12],
}

/// Bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_proc_memory_usage_t {
    pub gtt_mem: u64,
    pub cpu_mem: u64,
    pub vram_mem: u64,
    pub reserved: [u32; 10],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_proc_info_t {
    pub name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub pid: amdsmi_process_handle_t,
    /// Bytes, all kinds.
    pub mem: u64,
    pub engine_usage: amdsmi_proc_engine_usage_t,
    pub memory_usage: amdsmi_proc_memory_usage_t,
    pub container_name: [c_char; AMDSMI_MAX_STRING_LENGTH],
    pub cu_occupancy: u32,
    pub reserved: [u32; 11],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_evt_notification_data_t {
    pub processor_handle: amdsmi_processor_handle,
    pub event: amdsmi_evt_notification_type_t,
    pub message: [c_char; AMDSMI_MAX_STRING_LENGTH],
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

zeroed!(
    amdsmi_version_t,
    amdsmi_asic_info_t,
    amdsmi_board_info_t,
    amdsmi_driver_info_t,
    amdsmi_vbios_info_t,
    amdsmi_fw_info_t,
    amdsmi_kfd_info_t,
    amdsmi_enumeration_info_t,
    amdsmi_engine_usage_t,
    amdsmi_power_info_t,
    amdsmi_power_cap_info_t,
    amdsmi_clk_info_t,
    amdsmi_vram_usage_t,
    amdsmi_vram_info_t,
    amdsmi_error_count_t,
    amdsmi_retired_page_record_t,
    amdsmi_pcie_info_t,
    amdsmi_link_metrics_t,
    amdsmi_xgmi_link_status_t,
    amdsmi_xgmi_info_t,
    amdsmi_proc_info_t,
    amdsmi_evt_notification_data_t,
    amdsmi_gpu_metrics_t,
    amdsmi_violation_status_t,
);

// The sizes the 7.0.2 wrapper's ctypes structs have (ctypes.sizeof).
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<amdsmi_bdf_t>() == 8);
    assert!(size_of::<amdsmi_version_t>() == 24);
    assert!(size_of::<amdsmi_asic_info_t>() == 896);
    assert!(size_of::<amdsmi_board_info_t>() == 1792);
    assert!(size_of::<amdsmi_driver_info_t>() == 768);
    assert!(size_of::<amdsmi_vbios_info_t>() == 1568);
    assert!(size_of::<amdsmi_fw_info_list_t>() == 32);
    assert!(size_of::<amdsmi_fw_info_t>() == 2600);
    assert!(size_of::<amdsmi_kfd_info_t>() == 64);
    assert!(size_of::<amdsmi_enumeration_info_t>() == 272);
    assert!(size_of::<amdsmi_engine_usage_t>() == 64);
    assert!(size_of::<amdsmi_power_info_t>() == 192);
    assert!(size_of::<amdsmi_power_cap_info_t>() == 64);
    assert!(size_of::<amdsmi_clk_info_t>() == 32);
    assert!(size_of::<amdsmi_vram_usage_t>() == 16);
    assert!(size_of::<amdsmi_vram_info_t>() == 584);
    assert!(size_of::<amdsmi_error_count_t>() == 64);
    assert!(size_of::<amdsmi_retired_page_record_t>() == 24);
    assert!(size_of::<amdsmi_pcie_static_t>() == 96);
    assert!(size_of::<amdsmi_pcie_metric_t>() == 160);
    assert!(size_of::<amdsmi_pcie_info_t>() == 512);
    assert!(size_of::<amdsmi_link_t>() == 56);
    assert!(size_of::<amdsmi_link_metrics_t>() == 3648);
    assert!(size_of::<amdsmi_xgmi_link_status_t>() == 96);
    assert!(size_of::<amdsmi_xgmi_info_t>() == 64);
    assert!(size_of::<amdsmi_proc_engine_usage_t>() == 64);
    assert!(size_of::<amdsmi_proc_memory_usage_t>() == 64);
    assert!(size_of::<amdsmi_proc_info_t>() == 704);
    assert!(size_of::<amdsmi_evt_notification_data_t>() == 272);
    assert!(size_of::<amd_metrics_table_header_t>() == 4);
    assert!(size_of::<amdsmi_gpu_xcp_metrics_t>() == 504);
    assert!(size_of::<amdsmi_gpu_metrics_t>() == 4544);
    assert!(size_of::<amdsmi_violation_status_t>() == 6016);
};

/// Reads a NUL-terminated C string out of a fixed array (lossy UTF-8; the
/// whole array when it has no NUL).
pub fn c_str(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Writes `s` into a fixed C array, truncated to leave room for the NUL,
/// and zero-fills the rest.
pub fn set_c_str(buf: &mut [c_char], s: &str) {
    let n = s.len().min(buf.len().saturating_sub(1));
    for (d, b) in buf.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    for d in buf.iter_mut().skip(n) {
        *d = 0;
    }
}

// ---- the functions fleetop calls, as function-pointer types -------------------
//
// Named after the C function with `_fn`. Each is `unsafe`: the library
// writes through the pointers it is given.

pub type amdsmi_init_fn = unsafe extern "C" fn(flags: amdsmi_init_flags_t) -> amdsmi_status_t;
pub type amdsmi_shut_down_fn = unsafe extern "C" fn() -> amdsmi_status_t;
/// The string is the library's (static); the caller must not free it.
pub type amdsmi_status_code_to_string_fn =
    unsafe extern "C" fn(status: amdsmi_status_t, status_string: *mut *const c_char) -> amdsmi_status_t;
pub type amdsmi_get_lib_version_fn = unsafe extern "C" fn(version: *mut amdsmi_version_t) -> amdsmi_status_t;
/// Call once with a null `socket_handles` for the count, then with room for it.
pub type amdsmi_get_socket_handles_fn =
    unsafe extern "C" fn(socket_count: *mut u32, socket_handles: *mut amdsmi_socket_handle) -> amdsmi_status_t;
pub type amdsmi_get_socket_info_fn =
    unsafe extern "C" fn(socket_handle: amdsmi_socket_handle, len: usize, name: *mut c_char) -> amdsmi_status_t;
/// Per socket; a null `processor_handles` asks for the count.
pub type amdsmi_get_processor_handles_fn = unsafe extern "C" fn(
    socket_handle: amdsmi_socket_handle,
    processor_count: *mut u32,
    processor_handles: *mut amdsmi_processor_handle,
) -> amdsmi_status_t;
pub type amdsmi_get_processor_type_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    processor_type: *mut processor_type_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_asic_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_asic_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_board_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_board_info_t) -> amdsmi_status_t;
/// `uuid_length` in: the buffer's size (pass [`AMDSMI_GPU_UUID_SIZE`]).
pub type amdsmi_get_gpu_device_uuid_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    uuid_length: *mut u32,
    uuid: *mut c_char,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_device_bdf_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, bdf: *mut amdsmi_bdf_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_driver_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_driver_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_vbios_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_vbios_info_t) -> amdsmi_status_t;
pub type amdsmi_get_fw_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_fw_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_kfd_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_kfd_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_enumeration_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_enumeration_info_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_activity_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_engine_usage_t,
) -> amdsmi_status_t;
/// Bytes.
pub type amdsmi_get_gpu_memory_total_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    mem_type: amdsmi_memory_type_t,
    total: *mut u64,
) -> amdsmi_status_t;
/// Bytes.
pub type amdsmi_get_gpu_memory_usage_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    mem_type: amdsmi_memory_type_t,
    used: *mut u64,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_vram_usage_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_vram_usage_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_vram_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_vram_info_t) -> amdsmi_status_t;
/// °C.
pub type amdsmi_get_temp_metric_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    sensor_type: amdsmi_temperature_type_t,
    metric: amdsmi_temperature_metric_t,
    temperature: *mut i64,
) -> amdsmi_status_t;
pub type amdsmi_get_power_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_power_info_t) -> amdsmi_status_t;
/// `sensor_ind` 0 is the GPU's own cap.
pub type amdsmi_get_power_cap_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    sensor_ind: u32,
    info: *mut amdsmi_power_cap_info_t,
) -> amdsmi_status_t;
/// Energy = `energy_accumulator * counter_resolution` µJ; `timestamp` in ns.
pub type amdsmi_get_energy_count_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    energy_accumulator: *mut u64,
    counter_resolution: *mut f32,
    timestamp: *mut u64,
) -> amdsmi_status_t;
pub type amdsmi_get_clock_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    clk_type: amdsmi_clk_type_t,
    info: *mut amdsmi_clk_info_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_metrics_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_gpu_metrics_t) -> amdsmi_status_t;
pub type amdsmi_get_violation_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_violation_status_t,
) -> amdsmi_status_t;
/// One RAS block (a single [`GPU_BLOCKS`] bit).
pub type amdsmi_get_gpu_ecc_count_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    ec: *mut amdsmi_error_count_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_total_ecc_count_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, ec: *mut amdsmi_error_count_t) -> amdsmi_status_t;
/// The RAS blocks with ECC on, as a mask of [`GPU_BLOCKS`] bits.
pub type amdsmi_get_gpu_ecc_enabled_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, enabled_blocks: *mut u64) -> amdsmi_status_t;
pub type amdsmi_get_gpu_ecc_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    state: *mut amdsmi_ras_err_state_t,
) -> amdsmi_status_t;
/// A null `info` asks for the count.
pub type amdsmi_get_gpu_bad_page_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    num_pages: *mut u32,
    info: *mut amdsmi_retired_page_record_t,
) -> amdsmi_status_t;
pub type amdsmi_get_pcie_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_pcie_info_t) -> amdsmi_status_t;
pub type amdsmi_get_link_metrics_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_link_metrics_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_xgmi_link_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_xgmi_link_status_t,
) -> amdsmi_status_t;
pub type amdsmi_get_xgmi_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_xgmi_info_t) -> amdsmi_status_t;
pub type amdsmi_topo_get_link_type_fn = unsafe extern "C" fn(
    src: amdsmi_processor_handle,
    dst: amdsmi_processor_handle,
    hops: *mut u64,
    link_type: *mut amdsmi_link_type_t,
) -> amdsmi_status_t;
pub type amdsmi_gpu_xgmi_error_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    status: *mut amdsmi_xgmi_status_t,
) -> amdsmi_status_t;
/// `max_processes` in: room in `list`; out: how many were written (a null
/// `list` asks for the count). More processes than room:
/// [`AMDSMI_STATUS_OUT_OF_RESOURCES`] after filling the room.
pub type amdsmi_get_gpu_process_list_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    max_processes: *mut u32,
    list: *mut amdsmi_proc_info_t,
) -> amdsmi_status_t;
/// Writes "SPX", "DPX", "TPX", "QPX" or "CPX" into a buffer of `len` bytes.
pub type amdsmi_get_gpu_compute_partition_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    compute_partition: *mut c_char,
    len: u32,
) -> amdsmi_status_t;
/// Writes "NPS1", "NPS2", "NPS4" or "NPS8" into a buffer of `len` bytes.
pub type amdsmi_get_gpu_memory_partition_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    memory_partition: *mut c_char,
    len: u32,
) -> amdsmi_status_t;
pub type amdsmi_init_gpu_event_notification_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle) -> amdsmi_status_t;
/// `mask`: [`event_mask_bit`]s.
pub type amdsmi_set_gpu_event_notification_mask_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, mask: u64) -> amdsmi_status_t;
/// Waits up to `timeout_ms` for events of every GPU initialised for them;
/// `num_elem` in: room in `data`, out: how many were written. None came:
/// [`AMDSMI_STATUS_NO_DATA`].
pub type amdsmi_get_gpu_event_notification_fn = unsafe extern "C" fn(
    timeout_ms: i32,
    num_elem: *mut u32,
    data: *mut amdsmi_evt_notification_data_t,
) -> amdsmi_status_t;
pub type amdsmi_stop_gpu_event_notification_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle) -> amdsmi_status_t;

/// Every symbol AMD's `amdsmi` 7.0.2 Python package binds when imported, in
/// its order: a library that lacks one fails the import.
pub const ALL_SYMBOLS: [&str; 184] = [
    "amdsmi_free_name_value_pairs",
    "amdsmi_init",
    "amdsmi_shut_down",
    "amdsmi_get_socket_handles",
    "amdsmi_get_cpu_handles",
    "amdsmi_get_socket_info",
    "amdsmi_get_processor_info",
    "amdsmi_get_processor_count_from_handles",
    "amdsmi_get_processor_handles_by_type",
    "amdsmi_get_processor_handles",
    "amdsmi_get_cpucore_handles",
    "amdsmi_get_processor_type",
    "amdsmi_get_processor_handle_from_bdf",
    "amdsmi_get_gpu_device_bdf",
    "amdsmi_get_gpu_device_uuid",
    "amdsmi_get_gpu_enumeration_info",
    "amdsmi_get_cpu_affinity_with_scope",
    "amdsmi_get_gpu_virtualization_mode",
    "amdsmi_get_gpu_id",
    "amdsmi_get_gpu_revision",
    "amdsmi_get_gpu_vendor_name",
    "amdsmi_get_gpu_vram_vendor",
    "amdsmi_get_gpu_subsystem_id",
    "amdsmi_get_gpu_subsystem_name",
    "amdsmi_get_gpu_pci_bandwidth",
    "amdsmi_get_gpu_bdf_id",
    "amdsmi_get_gpu_topo_numa_affinity",
    "amdsmi_get_gpu_pci_throughput",
    "amdsmi_get_gpu_pci_replay_counter",
    "amdsmi_set_gpu_pci_bandwidth",
    "amdsmi_get_energy_count",
    "amdsmi_set_power_cap",
    "amdsmi_set_gpu_power_profile",
    "amdsmi_get_cpu_socket_power",
    "amdsmi_get_cpu_socket_power_cap",
    "amdsmi_get_cpu_socket_power_cap_max",
    "amdsmi_get_cpu_pwr_svi_telemetry_all_rails",
    "amdsmi_set_cpu_socket_power_cap",
    "amdsmi_set_cpu_pwr_efficiency_mode",
    "amdsmi_get_gpu_memory_total",
    "amdsmi_get_gpu_memory_usage",
    "amdsmi_get_gpu_bad_page_info",
    "amdsmi_get_gpu_bad_page_threshold",
    "amdsmi_gpu_validate_ras_eeprom",
    "amdsmi_get_gpu_ras_feature_info",
    "amdsmi_get_gpu_ras_block_features_enabled",
    "amdsmi_get_gpu_memory_reserved_pages",
    "amdsmi_get_gpu_fan_rpms",
    "amdsmi_get_gpu_fan_speed",
    "amdsmi_get_gpu_fan_speed_max",
    "amdsmi_get_temp_metric",
    "amdsmi_get_gpu_cache_info",
    "amdsmi_get_gpu_volt_metric",
    "amdsmi_reset_gpu_fan",
    "amdsmi_set_gpu_fan_speed",
    "amdsmi_get_gpu_busy_percent",
    "amdsmi_get_utilization_count",
    "amdsmi_get_gpu_perf_level",
    "amdsmi_set_gpu_perf_determinism_mode",
    "amdsmi_get_gpu_overdrive_level",
    "amdsmi_get_gpu_mem_overdrive_level",
    "amdsmi_get_clk_freq",
    "amdsmi_reset_gpu",
    "amdsmi_get_gpu_od_volt_info",
    "amdsmi_get_gpu_metrics_header_info",
    "amdsmi_get_gpu_metrics_info",
    "amdsmi_get_gpu_pm_metrics_info",
    "amdsmi_get_gpu_reg_table_info",
    "amdsmi_set_gpu_clk_range",
    "amdsmi_set_gpu_clk_limit",
    "amdsmi_set_gpu_od_clk_info",
    "amdsmi_set_gpu_od_volt_info",
    "amdsmi_get_gpu_od_volt_curve_regions",
    "amdsmi_get_gpu_power_profile_presets",
    "amdsmi_set_gpu_perf_level",
    "amdsmi_set_gpu_overdrive_level",
    "amdsmi_set_clk_freq",
    "amdsmi_get_soc_pstate",
    "amdsmi_set_soc_pstate",
    "amdsmi_get_xgmi_plpd",
    "amdsmi_set_xgmi_plpd",
    "amdsmi_get_gpu_process_isolation",
    "amdsmi_set_gpu_process_isolation",
    "amdsmi_clean_gpu_local_data",
    "amdsmi_get_lib_version",
    "amdsmi_get_gpu_ecc_count",
    "amdsmi_get_gpu_ecc_enabled",
    "amdsmi_get_gpu_total_ecc_count",
    "amdsmi_get_gpu_cper_entries",
    "amdsmi_get_afids_from_cper",
    "amdsmi_get_gpu_ecc_status",
    "amdsmi_status_code_to_string",
    "amdsmi_gpu_counter_group_supported",
    "amdsmi_gpu_create_counter",
    "amdsmi_gpu_destroy_counter",
    "amdsmi_gpu_control_counter",
    "amdsmi_gpu_read_counter",
    "amdsmi_get_gpu_available_counters",
    "amdsmi_get_gpu_compute_process_info",
    "amdsmi_get_gpu_compute_process_info_by_pid",
    "amdsmi_get_gpu_compute_process_gpus",
    "amdsmi_gpu_xgmi_error_status",
    "amdsmi_reset_gpu_xgmi_error",
    "amdsmi_get_xgmi_info",
    "amdsmi_get_gpu_xgmi_link_status",
    "amdsmi_get_link_metrics",
    "amdsmi_topo_get_numa_node_number",
    "amdsmi_topo_get_link_weight",
    "amdsmi_get_minmax_bandwidth_between_processors",
    "amdsmi_topo_get_link_type",
    "amdsmi_get_link_topology_nearest",
    "amdsmi_is_P2P_accessible",
    "amdsmi_topo_get_p2p_status",
    "amdsmi_get_gpu_compute_partition",
    "amdsmi_set_gpu_compute_partition",
    "amdsmi_get_gpu_memory_partition",
    "amdsmi_set_gpu_memory_partition",
    "amdsmi_get_gpu_memory_partition_config",
    "amdsmi_set_gpu_memory_partition_mode",
    "amdsmi_get_gpu_accelerator_partition_profile_config",
    "amdsmi_get_gpu_accelerator_partition_profile",
    "amdsmi_set_gpu_accelerator_partition_profile",
    "amdsmi_init_gpu_event_notification",
    "amdsmi_set_gpu_event_notification_mask",
    "amdsmi_get_gpu_event_notification",
    "amdsmi_stop_gpu_event_notification",
    "amdsmi_get_gpu_driver_info",
    "amdsmi_get_gpu_asic_info",
    "amdsmi_get_gpu_kfd_info",
    "amdsmi_get_gpu_vram_info",
    "amdsmi_get_gpu_board_info",
    "amdsmi_get_power_cap_info",
    "amdsmi_get_pcie_info",
    "amdsmi_get_gpu_xcd_counter",
    "amdsmi_get_fw_info",
    "amdsmi_get_gpu_vbios_info",
    "amdsmi_get_gpu_activity",
    "amdsmi_get_power_info",
    "amdsmi_is_gpu_power_management_enabled",
    "amdsmi_get_clock_info",
    "amdsmi_get_gpu_vram_usage",
    "amdsmi_get_violation_status",
    "amdsmi_get_gpu_process_list",
    "amdsmi_gpu_driver_reload",
    "amdsmi_get_cpu_core_energy",
    "amdsmi_get_cpu_socket_energy",
    "amdsmi_get_threads_per_core",
    "amdsmi_get_cpu_hsmp_driver_version",
    "amdsmi_get_cpu_smu_fw_version",
    "amdsmi_get_cpu_hsmp_proto_ver",
    "amdsmi_get_cpu_prochot_status",
    "amdsmi_get_cpu_fclk_mclk",
    "amdsmi_get_cpu_cclk_limit",
    "amdsmi_get_cpu_socket_current_active_freq_limit",
    "amdsmi_get_cpu_socket_freq_range",
    "amdsmi_get_cpu_core_current_freq_limit",
    "amdsmi_get_cpu_core_boostlimit",
    "amdsmi_get_cpu_socket_c0_residency",
    "amdsmi_set_cpu_core_boostlimit",
    "amdsmi_set_cpu_socket_boostlimit",
    "amdsmi_get_cpu_ddr_bw",
    "amdsmi_get_cpu_socket_temperature",
    "amdsmi_get_cpu_dimm_temp_range_and_refresh_rate",
    "amdsmi_get_cpu_dimm_power_consumption",
    "amdsmi_get_cpu_dimm_thermal_sensor",
    "amdsmi_set_cpu_xgmi_width",
    "amdsmi_set_cpu_gmi3_link_width_range",
    "amdsmi_cpu_apb_enable",
    "amdsmi_cpu_apb_disable",
    "amdsmi_set_cpu_socket_lclk_dpm_level",
    "amdsmi_get_cpu_socket_lclk_dpm_level",
    "amdsmi_set_cpu_pcie_link_rate",
    "amdsmi_set_cpu_df_pstate_range",
    "amdsmi_get_cpu_current_io_bandwidth",
    "amdsmi_get_cpu_current_xgmi_bw",
    "amdsmi_get_hsmp_metrics_table_version",
    "amdsmi_get_hsmp_metrics_table",
    "amdsmi_first_online_core_on_cpu_socket",
    "amdsmi_get_cpu_family",
    "amdsmi_get_cpu_model",
    "amdsmi_get_cpu_model_name",
    "amdsmi_get_esmi_err_msg",
    "amdsmi_get_cpu_cores_per_socket",
    "amdsmi_get_cpu_socket_count",
];

#[cfg(test)]
mod layout;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_round_trips() {
        let b = amdsmi_bdf_t::new(0, 0xa6, 0, 5);
        assert_eq!(b.to_bus_id(), "0000:a6:00.5");
        assert_eq!(amdsmi_bdf_t::parse("0000:a6:00.5"), Some(b));
        assert_eq!(amdsmi_bdf_t::parse("0000:a6:00"), None);
        assert_eq!(b.as_uint, 5 | (0xa6 << 8));
    }

    #[test]
    fn strings_are_terminated() {
        let mut buf = [1 as c_char; 5];
        set_c_str(&mut buf, "abcdefg");
        assert_eq!(c_str(&buf), "abcd");
        assert_eq!(buf[4], 0);
        set_c_str(&mut buf, "x");
        assert_eq!(c_str(&buf), "x");
    }

    #[test]
    fn every_symbol_once() {
        let mut s = ALL_SYMBOLS.to_vec();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 184);
    }

    #[test]
    fn event_bits() {
        assert_eq!(event_mask_bit(AMDSMI_EVT_NOTIF_VMFAULT), 1);
        assert_eq!(event_mask_bit(AMDSMI_EVT_NOTIF_GPU_PRE_RESET), 4);
        assert_eq!(event_mask_bit(AMDSMI_EVT_NOTIF_NONE), 0);
    }
}
