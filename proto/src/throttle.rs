//! NVML clocks-event ("throttle") reason bits and their names.
//!
//! The agent ships the raw bitmask; names are for people and JSON. Unknown
//! bits (newer drivers add some) are named by value rather than dropped.

pub const GPU_IDLE: u64 = 0x1;
pub const APPLICATIONS_CLOCKS_SETTING: u64 = 0x2;
pub const SW_POWER_CAP: u64 = 0x4;
pub const HW_SLOWDOWN: u64 = 0x8;
pub const SYNC_BOOST: u64 = 0x10;
pub const SW_THERMAL_SLOWDOWN: u64 = 0x20;
pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
pub const DISPLAY_CLOCK_SETTING: u64 = 0x100;

/// The reasons that are real trouble: DCGM's diagnostics fail on exactly these.
pub const TROUBLE: u64 = HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN;

const NAMES: [(u64, &str); 9] = [
    (GPU_IDLE, "gpu_idle"),
    (APPLICATIONS_CLOCKS_SETTING, "applications_clocks_setting"),
    (SW_POWER_CAP, "sw_power_cap"),
    (HW_SLOWDOWN, "hw_slowdown"),
    (SYNC_BOOST, "sync_boost"),
    (SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
    (HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
    (HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown"),
    (DISPLAY_CLOCK_SETTING, "display_clock_setting"),
];

/// Names of every bit set in `mask`, lowest bit first.
pub fn names(mask: u64) -> Vec<String> {
    (0..64)
        .map(|bit| 1u64 << bit)
        .filter(|b| mask & b != 0)
        .map(|b| {
            NAMES
                .iter()
                .find(|(v, _)| *v == b)
                .map(|(_, n)| (*n).to_string())
                .unwrap_or_else(|| format!("unknown_{b:#x}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_known_and_unknown_bits() {
        assert_eq!(
            names(HW_THERMAL_SLOWDOWN | SW_POWER_CAP | 0x1000),
            ["sw_power_cap", "hw_thermal_slowdown", "unknown_0x1000"]
        );
        assert!(names(0).is_empty());
    }

    #[test]
    fn trouble_is_the_four_dcgm_bits() {
        assert_eq!(TROUBLE, 0x8 | 0x20 | 0x40 | 0x80);
    }
}
