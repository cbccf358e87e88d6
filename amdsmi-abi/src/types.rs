//! The handles, scalar typedefs and fixed array sizes of amdsmi.h.

use std::ffi::c_void;

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
