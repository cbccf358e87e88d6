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

use std::ffi::c_char;

mod events;
mod functions;
mod identity;
mod links;
mod memory;
mod metrics;
mod power;
mod process;
mod ras;
mod status;
mod symbols;
mod types;

pub use events::*;
pub use functions::*;
pub use identity::*;
pub use links::*;
pub use memory::*;
pub use metrics::*;
pub use power::*;
pub use process::*;
pub use ras::*;
pub use status::*;
pub use symbols::*;
pub use types::*;

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
