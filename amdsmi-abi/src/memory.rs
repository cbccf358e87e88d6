//! Memory and activity: memory and VRAM types, engine usage and VRAM usage/info structs.

use crate::*;
use std::ffi::c_char;

/// amdsmi_memory_type_t.
pub const AMDSMI_MEM_TYPE_VRAM: amdsmi_memory_type_t = 0;
pub const AMDSMI_MEM_TYPE_VIS_VRAM: amdsmi_memory_type_t = 1;
pub const AMDSMI_MEM_TYPE_GTT: amdsmi_memory_type_t = 2;

/// amdsmi_vram_type_t (the ones an Instinct part has).
pub const AMDSMI_VRAM_TYPE_UNKNOWN: amdsmi_vram_type_t = 0;
pub const AMDSMI_VRAM_TYPE_HBM: amdsmi_vram_type_t = 1;
pub const AMDSMI_VRAM_TYPE_HBM2: amdsmi_vram_type_t = 2;
pub const AMDSMI_VRAM_TYPE_HBM2E: amdsmi_vram_type_t = 3;
pub const AMDSMI_VRAM_TYPE_HBM3: amdsmi_vram_type_t = 4;

/// Percent; 0xFFFF (as amd-smi checks) or u32::MAX: not supported.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_engine_usage_t {
    pub gfx_activity: u32,
    pub umc_activity: u32,
    pub mm_activity: u32,
    pub reserved: [u32; 13],
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
