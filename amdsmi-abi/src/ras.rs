//! RAS and ECC: the RAS blocks, error states, retired pages and error counts.

use crate::*;

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
