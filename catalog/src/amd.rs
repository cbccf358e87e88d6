//! AMD's GPU faults as data, as [`crate::xid`] holds NVIDIA's: what the
//! agent reads of an AMD Instinct GPU through AMD SMI (its event
//! notifications, the ECC counts of each RAS block, the XGMI error status,
//! the throttle and violation words, the bad pages pending retirement),
//! each with a one-line meaning in our own words, the action that gets the
//! GPU back into service, what to look at if it recurs, and the public
//! document the fact comes from.
//!
//! Where the two vendors have the same fault, the action is the same: an
//! uncorrectable ECC error in an MI300X's HBM (RAS block UMC) asks what
//! NVIDIA's uncorrectable ECC asks (drain, reset the GPU; replace if it
//! keeps coming: AMD's driver retires the bad page at the reset and, past
//! its bad-page threshold, reports the GPU for RMA); an XGMI error what
//! NVIDIA's NVLink error (XID 74) asks; a VM fault what a GPU page fault
//! (XID 31) asks.

use crate::Action;

/// One AMD fault: what it means, in our words, what to do, and where AMD
/// (or the amdgpu driver's documentation, AMD's own) says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdFault {
    /// Our name for it: an event's kind ("gpu_reset", "vmfault"), a RAS
    /// block's uncorrectable error ("ras_umc"), "xgmi_error", ...
    pub code: &'static str,
    /// What AMD SMI reports that raises it, in its words.
    pub seen_as: &'static str,
    pub meaning: &'static str,
    pub immediate: Action,
    pub investigate: Option<Action>,
    /// The public document: AMD SMI's reference, the amdgpu driver's RAS
    /// documentation.
    pub source: &'static str,
}

const SMI_EVENTS: &str = "https://rocm.docs.amd.com/projects/amdsmi/en/latest/doxygen/docBin/html/structamdsmi__evt__notification__data__t.html";
const SMI_ECC: &str = "https://rocm.docs.amd.com/projects/amdsmi/en/latest/doxygen/docBin/html/group__tagECCInfo.html";
const SMI_XGMI: &str = "https://rocm.docs.amd.com/projects/amdsmi/en/latest/doxygen/docBin/html/group__tagXGMI.html";
const SMI_VIOLATIONS: &str = "https://rocm.docs.amd.com/projects/amdsmi/en/develop/conceptual/gpu-violations.html";
const AMDGPU_RAS: &str = "https://docs.kernel.org/gpu/amdgpu/ras.html";

/// Every AMD fault the catalog knows, events first, then the RAS blocks,
/// the links, the throttle reasons and the bad pages. One line per entry,
/// so kept out of rustfmt's hands.
#[rustfmt::skip]
pub const AMD_FAULTS: &[AmdFault] = &[
    AmdFault { code: "gpu_reset", seen_as: "event gpu_pre_reset / gpu_post_reset", meaning: "The driver reset the GPU (after an uncorrectable error or a hang); work on it was lost", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: AMDGPU_RAS },
    AmdFault { code: "vmfault", seen_as: "event vmfault", meaning: "GPU page fault: a process touched an address it does not map; same GPU again: HW", immediate: Action::RestartApp, investigate: Some(Action::RestartApp), source: SMI_EVENTS },
    AmdFault { code: "thermal_throttle", seen_as: "event thermal_throttle", meaning: "The GPU throttled for heat (the throttled flag judges how long)", immediate: Action::None, investigate: Some(Action::CheckCooling), source: SMI_EVENTS },
    AmdFault { code: "event", seen_as: "event event_<n>", meaning: "An event AMD SMI reported that fleetop does not know; recorded", immediate: Action::None, investigate: None, source: SMI_EVENTS },
    AmdFault { code: "ras_umc", seen_as: "RAS block UMC, uncorrectable", meaning: "Uncorrectable ECC error in HBM; the bad page is retired at the next reset", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: AMDGPU_RAS },
    AmdFault { code: "ras_gfx", seen_as: "RAS block GFX, uncorrectable", meaning: "Uncorrectable error in the compute engines' memories", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: SMI_ECC },
    AmdFault { code: "ras_sdma", seen_as: "RAS block SDMA, uncorrectable", meaning: "Uncorrectable error in a DMA (copy) engine", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: SMI_ECC },
    AmdFault { code: "ras_mmhub", seen_as: "RAS block MMHUB, uncorrectable", meaning: "Uncorrectable error in the memory hub", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: SMI_ECC },
    AmdFault { code: "ras_xgmi_wafl", seen_as: "RAS block XGMI_WAFL, uncorrectable", meaning: "Uncorrectable error on an XGMI link to a peer GPU; may be the far end", immediate: Action::ResetGpu, investigate: Some(Action::CheckLink), source: SMI_ECC },
    AmdFault { code: "ras_pcie_bif", seen_as: "RAS block PCIE_BIF, uncorrectable", meaning: "Uncorrectable error on the GPU's PCIe interface", immediate: Action::ResetGpu, investigate: Some(Action::CheckLink), source: SMI_ECC },
    AmdFault { code: "ras_other", seen_as: "any other RAS block, uncorrectable", meaning: "Uncorrectable error in another block of the GPU (fabric, hubs, firmware processors)", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: SMI_ECC },
    AmdFault { code: "xgmi_error", seen_as: "XGMI error status 1 (one) or 2 (several)", meaning: "Errors on the GPU's XGMI links to its peers; may be the far end", immediate: Action::ResetGpu, investigate: Some(Action::CheckLink), source: SMI_XGMI },
    AmdFault { code: "thermal", seen_as: "socket_thrm, hbm_thrm, TEMP_*", meaning: "The GPU slows itself down for its junction or HBM temperature", immediate: Action::CheckCooling, investigate: Some(Action::CheckPower), source: SMI_VIOLATIONS },
    AmdFault { code: "hw_slowdown", seen_as: "prochot_thrm, vr_thrm, VRHOT*, PROCHOT_*, TEMP_VR_*", meaning: "The board forces the GPU's clocks down (processor hot, a voltage regulator's limit)", immediate: Action::CheckPower, investigate: Some(Action::Replace), source: SMI_VIOLATIONS },
    AmdFault { code: "power_cap", seen_as: "ppt_pwr, PPT*, SPL, FPPT, SPPT, TDC_*", meaning: "The GPU holds its package power at its cap (normal at full load)", immediate: Action::None, investigate: None, source: SMI_VIOLATIONS },
    AmdFault { code: "bad_pages_pending", seen_as: "bad pages PENDING (amdsmi_get_gpu_bad_page_info)", meaning: "HBM pages wait to be retired, which takes a GPU reset", immediate: Action::ResetGpu, investigate: Some(Action::Replace), source: AMDGPU_RAS },
];

/// The entry of a code, by name.
pub fn lookup(code: &str) -> Option<&'static AmdFault> {
    AMD_FAULTS.iter().find(|f| f.code == code)
}

fn entry(code: &str) -> &'static AmdFault {
    // Every code asked for below is in the table (a test holds them).
    lookup(code).unwrap_or(&AMD_FAULTS[3])
}

/// The entry of an AMD SMI event, by the agent's word for it
/// ("gpu_pre_reset", "vmfault", ...; "event_<n>" for one not known).
pub fn event(kind: &str) -> &'static AmdFault {
    entry(match kind {
        "gpu_pre_reset" | "gpu_post_reset" => "gpu_reset",
        "vmfault" => "vmfault",
        "thermal_throttle" => "thermal_throttle",
        _ => "event",
    })
}

/// The entry of an uncorrectable error in RAS block `block` (AMD SMI's
/// name: "UMC", "GFX", ...).
pub fn ras(block: &str) -> &'static AmdFault {
    let code = format!("ras_{}", block.to_ascii_lowercase());
    lookup(&code).unwrap_or_else(|| entry("ras_other"))
}

/// The entry of a throttle or violation word the agent sends ("socket_thrm",
/// "PPT0", ...); `None` for the words that are no fault ("gfx_clk_below_host_limit",
/// "PPM", "FIT"), as the agent maps them onto no NVML bit.
pub fn throttle(word: &str) -> Option<&'static AmdFault> {
    let code = match word {
        "socket_thrm" | "hbm_thrm" => "thermal",
        "prochot_thrm" | "vr_thrm" => "hw_slowdown",
        "ppt_pwr" | "SPL" | "FPPT" | "SPPT" | "SPPT_APU" => "power_cap",
        w if w.starts_with("PPT") || w.starts_with("TDC_") => "power_cap",
        w if w.starts_with("TEMP_VR_") || w.starts_with("VRHOT") || w.starts_with("PROCHOT_") => "hw_slowdown",
        w if w.starts_with("TEMP_") => "thermal",
        _ => return None,
    };
    Some(entry(code))
}

/// The entry of the XGMI error status, where it says errors.
pub fn xgmi(status: u32) -> Option<&'static AmdFault> {
    (status != 0).then(|| entry("xgmi_error"))
}

/// The entry for bad pages pending retirement.
pub fn bad_pages_pending() -> &'static AmdFault {
    entry("bad_pages_pending")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Severity;

    #[test]
    fn every_code_is_unique_and_has_words_and_a_source() {
        let mut codes: Vec<&str> = AMD_FAULTS.iter().map(|f| f.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), AMD_FAULTS.len());
        for f in AMD_FAULTS {
            assert!(!f.meaning.is_empty() && !f.meaning.contains('|'), "{}", f.code);
            assert!(f.source.starts_with("https://"), "{}", f.code);
        }
        for code in [
            "gpu_reset",
            "vmfault",
            "thermal_throttle",
            "event",
            "ras_other",
            "xgmi_error",
            "thermal",
            "hw_slowdown",
            "power_cap",
            "bad_pages_pending",
        ] {
            assert!(lookup(code).is_some(), "{code}");
        }
        assert_eq!(AMD_FAULTS[3].code, "event", "the fallback");
    }

    /// An uncorrectable error in an MI300X's HBM asks what NVIDIA's
    /// uncorrectable ECC asks: drain and reset now, replace if it recurs.
    #[test]
    fn an_uncorrectable_hbm_error_asks_what_nvidias_ecc_does() {
        let umc = ras("UMC");
        let nvidia = crate::flag("ecc_uncorrected").expect("entry");
        assert_eq!((umc.immediate, umc.investigate), (nvidia.immediate, nvidia.investigate));
        assert_eq!(crate::xid_action(48), umc.immediate, "XID 48: double-bit ECC");
        assert_eq!(ras("MPIO").code, "ras_other");
        assert_eq!(ras("XGMI_WAFL").investigate, Some(Action::CheckLink));
    }

    #[test]
    fn events_and_words_find_their_entries() {
        assert_eq!(event("gpu_pre_reset").code, "gpu_reset");
        assert_eq!(event("gpu_post_reset").immediate.severity(), Severity::Crit);
        assert_eq!(event("vmfault").immediate, crate::xid_action(31), "as a GPU page fault");
        assert_eq!(event("event_9").immediate, Action::None);
        assert_eq!(throttle("socket_thrm").map(|f| f.immediate), Some(Action::CheckCooling));
        assert_eq!(throttle("TEMP_HOTSPOT").map(|f| f.code), Some("thermal"));
        assert_eq!(throttle("TEMP_VR_GFX").map(|f| f.code), Some("hw_slowdown"));
        assert_eq!(throttle("PPT0").map(|f| f.code), Some("power_cap"));
        assert_eq!(throttle("gfx_clk_below_host_limit"), None);
        assert_eq!(xgmi(0), None);
        assert_eq!(
            xgmi(2).map(|f| f.immediate),
            crate::xid(74).map(|x| x.immediate),
            "as NVLink's XID 74"
        );
    }
}
