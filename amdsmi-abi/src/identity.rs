//! Identity: BDF, library version, ASIC, board, driver, VBIOS, firmware, KFD and enumeration info.

use crate::*;
use std::ffi::c_char;

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
