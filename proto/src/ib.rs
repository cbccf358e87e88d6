//! InfiniBand counters as they travel: which error counters a port sample
//! carries, in wire order, and how wide each is in hardware.

use crate::counters::CounterWidth;

/// Error counters shipped per port, in wire order (`IbSample.errors`), with
/// the width of the hardware register (IB PMA counters saturate at their
/// maximum). Names starting `hw_counters/` come from the driver's extra
/// counters, which are 64-bit.
pub const ERROR_COUNTERS: [(&str, CounterWidth); 15] = [
    ("symbol_error", CounterWidth::bits(16)),
    ("link_error_recovery", CounterWidth::bits(8)),
    ("link_downed", CounterWidth::bits(8)),
    ("port_rcv_errors", CounterWidth::bits(16)),
    ("port_rcv_remote_physical_errors", CounterWidth::bits(16)),
    ("port_rcv_switch_relay_errors", CounterWidth::bits(16)),
    ("port_xmit_discards", CounterWidth::bits(16)),
    ("port_xmit_constraint_errors", CounterWidth::bits(8)),
    ("port_rcv_constraint_errors", CounterWidth::bits(8)),
    ("local_link_integrity_errors", CounterWidth::bits(4)),
    ("excessive_buffer_overrun_errors", CounterWidth::bits(4)),
    ("VL15_dropped", CounterWidth::bits(16)),
    ("hw_counters/local_ack_timeout_err", CounterWidth::U64),
    ("hw_counters/out_of_sequence", CounterWidth::U64),
    ("hw_counters/packet_seq_err", CounterWidth::U64),
];

/// Width of the data counters as reported (octets). Kernels show the 64-bit
/// extended counters where the HCA has them and the legacy 32-bit ones (in
/// 4-octet units) otherwise; deltas treat them as 32-bit so a legacy wrap is
/// recognised, and a 64-bit counter only ever grows past that range.
pub const DATA_WIDTH: CounterWidth = CounterWidth { bits: 32, scale: 4 };

/// The kernel's port state words, by the number sysfs puts before them
/// ("4: ACTIVE"; drivers/infiniband/core/sysfs.c).
pub const PORT_STATES: [&str; 6] = ["NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"];

/// The kernel's physical state words, by their number less one ("5: LinkUp").
pub const PHYS_STATES: [&str; 7] = [
    "Sleep",
    "Polling",
    "Disabled",
    "PortConfigurationTraining",
    "LinkUp",
    "LinkErrorRecovery",
    "Phy Test",
];

/// The short name of a counter for people and JSON ("hw_counters/x" -> "x").
pub fn counter_name(i: usize) -> &'static str {
    let full = ERROR_COUNTERS[i].0;
    full.rsplit('/').next().unwrap_or(full)
}
