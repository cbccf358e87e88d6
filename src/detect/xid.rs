//! XIDs: what they mean, and whether they point at the hardware.

/// What XIDs mean, for the ones an SRE meets (NVIDIA's XID catalogue).
/// The second field: whether it points at the hardware (crit) rather than
/// the application (warn).
pub fn xid_meaning(xid: u32) -> (&'static str, bool) {
    match xid {
        13 => ("graphics engine exception (often the application)", false),
        31 => ("GPU memory page fault (often the application)", false),
        43 => ("GPU stopped processing (often the application)", false),
        45 => ("preemptive cleanup after a fault", false),
        48 => ("double-bit ECC error", true),
        61 | 62 => ("internal micro-controller error", true),
        63 | 64 => ("ECC page retirement or row remapping event", true),
        74 => ("NVLink error", true),
        79 => ("GPU has fallen off the bus", true),
        92 => ("high single-bit ECC error rate", true),
        94 => ("contained uncorrectable ECC error", true),
        95 => ("uncontained uncorrectable ECC error", true),
        119 | 120 => ("GSP firmware error", true),
        _ => ("see NVIDIA's XID catalogue", true),
    }
}
