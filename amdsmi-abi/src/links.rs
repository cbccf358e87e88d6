//! Links: link types, XGMI status and info, PCIe info and per-peer link metrics.

use crate::*;

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

/// amdsmi_card_form_factor_t (amdsmi_pcie_info_t's slot type).
pub const AMDSMI_CARD_FORM_FACTOR_PCIE: amdsmi_card_form_factor_t = 0;
pub const AMDSMI_CARD_FORM_FACTOR_OAM: amdsmi_card_form_factor_t = 1;
pub const AMDSMI_CARD_FORM_FACTOR_CEM: amdsmi_card_form_factor_t = 2;
pub const AMDSMI_CARD_FORM_FACTOR_UNKNOWN: amdsmi_card_form_factor_t = 3;

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
