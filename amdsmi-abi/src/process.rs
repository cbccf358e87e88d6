//! Processes and partitions: compute, accelerator and memory partition types and the process info structs.

use crate::*;
use std::ffi::c_char;

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
