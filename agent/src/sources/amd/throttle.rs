//! AMD's throttling, spelled out in AMD's words and mapped onto NVML's
//! throttle-reason bits, so that the console's flags (throttled, thermal
//! trouble) mean the same on both vendors.
//!
//! Two sources, both "now": MI300's violation status
//! (`amdsmi_get_violation_status`, `active_*`: PVIOL and TVIOL and their
//! kin) and the ASIC-independent throttler bits of the metrics table
//! (`indep_throttle_status`, the kernel's `SMU_THROTTLER_*_BIT`s).

use fleetop_amdsmi_abi as abi;
use fleetop_amdsmi_abi::throttler as t;
use fleetop_proto::throttle::{HW_SLOWDOWN, SW_POWER_CAP, SW_THERMAL_SLOWDOWN};

/// What is throttling a GPU now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Throttle {
    /// NVML's bits (`fleetop_proto::throttle`).
    pub(crate) reasons: u64,
    /// AMD's words for every reason active, violations first.
    pub(crate) words: Vec<String>,
}

/// NVML's nearest bit for each kind of limit: a firmware limit on power
/// (PPT, SPL, current TDC) is NVML's software power cap; a temperature
/// held under its limit by lowering clocks is NVML's software thermal
/// slowdown (NVML counts memory temperature there too); a hardware signal
/// (PROCHOT, a voltage regulator hot) is NVML's hardware slowdown. 0: no
/// NVML equivalent, the word alone.
const POWER: u64 = SW_POWER_CAP;
const THERMAL: u64 = SW_THERMAL_SLOWDOWN;
const HARDWARE: u64 = HW_SLOWDOWN;

/// The violation status's `active_*` fields by name (amdsmi.h's, without
/// `active_`), with their NVML bit.
fn violations(v: &abi::amdsmi_violation_status_t) -> [(&'static str, u8, u64); 6] {
    [
        ("prochot_thrm", v.active_prochot_thrm, HARDWARE),
        ("ppt_pwr", v.active_ppt_pwr, POWER),
        ("socket_thrm", v.active_socket_thrm, THERMAL),
        ("vr_thrm", v.active_vr_thrm, HARDWARE),
        ("hbm_thrm", v.active_hbm_thrm, THERMAL),
        // The GFX clock is below what the host asked for, for any reason:
        // a summary of the others, no reason of its own.
        ("gfx_clk_below_host_limit", v.active_gfx_clk_below_host_limit, 0),
    ]
}

/// The throttler bits by the kernel's names (`SMU_THROTTLER_<name>_BIT`).
const THROTTLERS: [(u32, &str, u64); 34] = [
    (t::PPT0, "PPT0", POWER),
    (t::PPT1, "PPT1", POWER),
    (t::PPT2, "PPT2", POWER),
    (t::PPT3, "PPT3", POWER),
    (t::SPL, "SPL", POWER),
    (t::FPPT, "FPPT", POWER),
    (t::SPPT, "SPPT", POWER),
    (t::SPPT_APU, "SPPT_APU", POWER),
    (t::TDC_GFX, "TDC_GFX", POWER),
    (t::TDC_SOC, "TDC_SOC", POWER),
    (t::TDC_MEM, "TDC_MEM", POWER),
    (t::TDC_VDD, "TDC_VDD", POWER),
    (t::TDC_CVIP, "TDC_CVIP", POWER),
    // Current limits the hardware enforces at once (EDC), and the APU's
    // power sharing: AMD's own, no NVML equivalent.
    (t::EDC_CPU, "EDC_CPU", 0),
    (t::EDC_GFX, "EDC_GFX", 0),
    (t::APCC, "APCC", 0),
    (t::TEMP_GPU, "TEMP_GPU", THERMAL),
    (t::TEMP_CORE, "TEMP_CORE", THERMAL),
    (t::TEMP_MEM, "TEMP_MEM", THERMAL),
    (t::TEMP_EDGE, "TEMP_EDGE", THERMAL),
    (t::TEMP_HOTSPOT, "TEMP_HOTSPOT", THERMAL),
    (t::TEMP_SOC, "TEMP_SOC", THERMAL),
    (t::TEMP_VR_GFX, "TEMP_VR_GFX", HARDWARE),
    (t::TEMP_VR_SOC, "TEMP_VR_SOC", HARDWARE),
    (t::TEMP_VR_MEM0, "TEMP_VR_MEM0", HARDWARE),
    (t::TEMP_VR_MEM1, "TEMP_VR_MEM1", HARDWARE),
    (t::TEMP_LIQUID0, "TEMP_LIQUID0", THERMAL),
    (t::TEMP_LIQUID1, "TEMP_LIQUID1", THERMAL),
    (t::VRHOT0, "VRHOT0", HARDWARE),
    (t::VRHOT1, "VRHOT1", HARDWARE),
    (t::PROCHOT_CPU, "PROCHOT_CPU", HARDWARE),
    (t::PROCHOT_GFX, "PROCHOT_GFX", HARDWARE),
    // Peak power management and the reliability (FIT) limit: AMD's own.
    (t::PPM, "PPM", 0),
    (t::FIT, "FIT", 0),
];

/// What throttles the GPU, from the violation status and the throttler
/// bits where each was read (`indep`: all-ones is "not supported").
/// `None` when neither gave anything: no reading, not "not throttled".
pub(crate) fn throttle(violation: Option<&abi::amdsmi_violation_status_t>, indep: Option<u64>) -> Option<Throttle> {
    let mut out = Throttle::default();
    let mut read = false;
    for (name, active, bit) in violation.map(violations).into_iter().flatten() {
        // u8::MAX: this one is not supported; 0 or 1 otherwise.
        if active == u8::MAX {
            continue;
        }
        read = true;
        if active != 0 {
            out.reasons |= bit;
            out.words.push(name.to_string());
        }
    }
    if let Some(bits) = indep.filter(|&b| b != u64::MAX) {
        read = true;
        for k in 0..64 {
            if bits & (1 << k) == 0 {
                continue;
            }
            match THROTTLERS.iter().find(|(b, _, _)| *b == k) {
                Some((_, name, bit)) => {
                    out.reasons |= bit;
                    out.words.push((*name).to_string());
                }
                None => out.words.push(format!("THROTTLER_BIT_{k}")),
            }
        }
    }
    read.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thermal_violation_is_nvmls_thermal_slowdown_in_amds_words() {
        let mut v = abi::amdsmi_violation_status_t::zeroed();
        v.active_socket_thrm = 1;
        v.active_gfx_clk_below_host_limit = 1;
        v.active_vr_thrm = u8::MAX;
        let hot = (1 << t::TEMP_HOTSPOT) | (1 << t::TEMP_GPU);
        let got = throttle(Some(&v), Some(hot)).expect("read");
        assert_eq!(got.reasons, SW_THERMAL_SLOWDOWN);
        assert_eq!(
            got.words,
            ["socket_thrm", "gfx_clk_below_host_limit", "TEMP_GPU", "TEMP_HOTSPOT"]
        );
        assert!(
            got.reasons & fleetop_proto::throttle::TROUBLE != 0,
            "trouble, as on NVIDIA"
        );
    }

    #[test]
    fn power_and_hardware_limits_map_and_unknown_bits_keep_their_number() {
        let mut v = abi::amdsmi_violation_status_t::zeroed();
        v.active_ppt_pwr = 1;
        v.active_prochot_thrm = 1;
        let got = throttle(Some(&v), Some((1 << t::PPM) | (1 << 50))).expect("read");
        assert_eq!(got.reasons, SW_POWER_CAP | HW_SLOWDOWN);
        assert_eq!(got.words, ["prochot_thrm", "ppt_pwr", "THROTTLER_BIT_50", "PPM"]);
    }

    #[test]
    fn nothing_read_is_absent_and_nothing_active_is_zero() {
        assert_eq!(throttle(None, None), None);
        assert_eq!(throttle(None, Some(u64::MAX)), None);
        let mut na = abi::amdsmi_violation_status_t::zeroed();
        na.active_prochot_thrm = u8::MAX;
        na.active_ppt_pwr = u8::MAX;
        na.active_socket_thrm = u8::MAX;
        na.active_vr_thrm = u8::MAX;
        na.active_hbm_thrm = u8::MAX;
        na.active_gfx_clk_below_host_limit = u8::MAX;
        assert_eq!(throttle(Some(&na), None), None);
        assert_eq!(throttle(None, Some(0)), Some(Throttle::default()));
    }
}
