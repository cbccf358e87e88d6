//! NVIDIA's XID codes as data: every code in NVIDIA's XID catalog
//! ("Analyzing Xid Errors with the Xid Catalog",
//! <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>),
//! with a one-line meaning in our own words and the catalog's two resolution
//! buckets mapped onto our [`Action`].
//!
//! The catalog gives each code an *immediate* bucket (what gets the GPU back
//! into service) and an *investigatory* bucket (what to look at so it does not
//! happen again). They map onto our actions like this:
//!
//! | Catalog bucket                              | Our action                         |
//! |---------------------------------------------|------------------------------------|
//! | `IGNORE`, `IGNORE (sympathetic)`, `SYMPATHETIC_REPORT_SOLO`, `N/A` | [`Action::None`] |
//! | `RESTART_APP`, `CHECK_APP/CUDA`, `XID_137_FLOW` | [`Action::RestartApp`]         |
//! | `RESET_GPU`, `CHECK_UVM`                    | [`Action::ResetGpu`]               |
//! | `RESTART_BM`, `RESTART_VM`                  | [`Action::RebootNode`]             |
//! | `CONTACT_SUPPORT`                           | [`Action::Replace`]                |
//! | `UPDATE_SWFW`, `INVESTIGATE_SW`, `INVESTIGATE_SW_USER` | [`Action::UpdateSoftware`] |
//! | `CHECK_MECHANICALS` on a power code         | [`Action::CheckPower`]             |
//! | `CHECK_MECHANICALS` on a thermal code       | [`Action::CheckCooling`]           |
//! | `INVESTIGATE_LINK_SI`, NVLink/C2C workflows about the link itself | [`Action::CheckLink`] |
//! | `XID_154` / `XID_154_EVAL`                  | [`Action::ResetGpu`]; the driver's XID 154 names the real action |
//!
//! Workflow buckets go to the nearest action:
//! - `WORKFLOW_XID_13`, `WORKFLOW_XID_31`: check the app first (`RestartApp`);
//!   the same SM or GPU failing again points at hardware.
//! - `WORKFLOW_XID_45`: nothing now (follow the XID that caused it); when seen
//!   alone the catalog restarts Fabric Manager (`UpdateSoftware`).
//! - `WORKFLOW_XID_48`: `ResetGpu` now, `Replace` if it keeps happening.
//! - `WORKFLOW_NVLINK_ERR` (XID 74): `ResetGpu` now, `CheckLink` after.
//! - `WORKFLOW_NVLINK5_ERR` (XIDs 144-150): taken from the catalog's 144-150
//!   decode sheet; the fatal rows reset the GPU and go to support
//!   (`Replace`), except 149 (link down / BER: `CheckLink`); 147 and 148 only
//!   have non-fatal rows (`None` now).
//!
//! An investigatory bucket that is missing, `N/A`, or "ignore" is `None` in
//! [`XidEntry::investigate`]. Codes the catalog marks "Unused" keep its
//! `CONTACT_SUPPORT` bucket (`Replace`): seeing one on a current GPU is itself
//! odd. The catalog gives no buckets yet for 162-172; those entries are our
//! reading of its notes (power smoothing, confidential computing, XID 48
//! detail codes).

use crate::Action;

/// One XID code: what it means, in our words, and NVIDIA's resolution
/// buckets mapped onto our actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidEntry {
    pub code: u32,
    pub meaning: &'static str,
    pub immediate: Action,
    pub investigate: Option<Action>,
}

/// Every code in the catalog, sorted by code. One line per code, so kept
/// out of rustfmt's hands.
#[rustfmt::skip]
pub const XIDS: &[XidEntry] = &[
    XidEntry { code: 1, meaning: "Legacy FIFO method error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 2, meaning: "Legacy FIFO software-method error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 3, meaning: "Legacy FIFO unknown-method error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 4, meaning: "Legacy FIFO channel-busy error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 5, meaning: "Legacy FIFO overflow error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 6, meaning: "Legacy FIFO parse error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 7, meaning: "Legacy FIFO page-table error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 8, meaning: "GPU stopped making progress on a job (idle timeout)", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 9, meaning: "Legacy graphics instance error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 10, meaning: "Legacy graphics single-step error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 11, meaning: "App sent the GPU a bad or corrupt command stream", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 12, meaning: "Legacy graphics software-method error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 13, meaning: "App fault in a GPU kernel (often out of bounds); repeats on one SM: HW", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 14, meaning: "Injected or fake test error from userspace", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 15, meaning: "Legacy display scanline timeout; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 16, meaning: "Legacy display vblank timeout; not raised on current GPUs", immediate: Action::Replace, investigate: Some(Action::Replace) },
    XidEntry { code: 17, meaning: "Legacy parameter error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 18, meaning: "Legacy bus-master timeout; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 19, meaning: "Legacy display notifier error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 20, meaning: "Legacy MPEG engine error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 21, meaning: "Legacy ME engine error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 22, meaning: "Legacy video processor method error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 23, meaning: "Legacy RC logging marker; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 24, meaning: "Legacy semaphore timeout; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 25, meaning: "App sent the GPU an illegal command stream", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 26, meaning: "Legacy FIFO state timeout; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 27, meaning: "Legacy video processor error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 28, meaning: "Legacy video processor 2 error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 29, meaning: "Legacy bitstream processor error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 30, meaning: "Legacy bad address access; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 31, meaning: "GPU page fault: app touched a bad address; same GPU again: HW", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 32, meaning: "Command DMA fault; often PCIe signal quality, not the app", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 33, meaning: "Legacy security engine error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 34, meaning: "Legacy MSVLD video error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 35, meaning: "Legacy MSPDEC video error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 36, meaning: "Legacy MSPPP video error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 37, meaning: "GPU firmware got a method it does not implement; check the app", immediate: Action::None, investigate: Some(Action::RestartApp) },
    XidEntry { code: 38, meaning: "GPU firmware watchdog timed out", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 39, meaning: "Copy engine 0 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 40, meaning: "Copy engine 1 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 41, meaning: "Copy engine 2 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 42, meaning: "Legacy video image compositor error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 43, meaning: "App hit a software fault and was stopped; GPU itself is fine", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 44, meaning: "Compute engine fault while switching between jobs", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 45, meaning: "App torn down (kill, reset or earlier error); act on the other XID", immediate: Action::None, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 46, meaning: "GPU stopped responding (timeout)", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 47, meaning: "Legacy video encoder 0 error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 48, meaning: "Uncorrectable (double-bit) ECC memory error", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 49, meaning: "Legacy silent-running level set; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 50, meaning: "Legacy silent-running level change; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 51, meaning: "Legacy silent-running stress failure; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 52, meaning: "Legacy silent-running thermal step; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 53, meaning: "Legacy thermal clock reduction; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 54, meaning: "GPU auxiliary power cable not connected; clocks held down", immediate: Action::CheckPower, investigate: Some(Action::Replace) },
    XidEntry { code: 55, meaning: "Legacy temperature read error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 56, meaning: "Legacy display channel exception; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 57, meaning: "Legacy memory link training failure; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 58, meaning: "Legacy framebuffer memory error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 59, meaning: "Legacy power-management unit error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 60, meaning: "SEC2 (video/security processor) engine fault", immediate: Action::RestartApp, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 61, meaning: "Legacy PMU breakpoint; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 62, meaning: "On-GPU power-management controller halted", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 63, meaning: "Memory row remapped after an ECC error; takes effect on next reset", immediate: Action::None, investigate: None },
    XidEntry { code: 64, meaning: "Memory row remap failed; GPU cannot retire the bad row", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 65, meaning: "Legacy video encoder 1 error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 66, meaning: "Driver made an illegal register access", immediate: Action::None, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 67, meaning: "Driver access failed a verification check", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 68, meaning: "Video decoder 0 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 69, meaning: "App used an invalid compute/graphics class", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 70, meaning: "Copy engine 3 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 71, meaning: "Copy engine 4 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 72, meaning: "Copy engine 5 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 73, meaning: "Legacy video encoder 2 error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 74, meaning: "NVLink error to a peer GPU or NVSwitch; may be the far end", immediate: Action::ResetGpu, investigate: Some(Action::CheckLink) },
    XidEntry { code: 75, meaning: "Copy engine 6 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 76, meaning: "Copy engine 7 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 77, meaning: "Copy engine 8 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 78, meaning: "vGPU failed to start; guest/host driver or profile mismatch", immediate: Action::UpdateSoftware, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 79, meaning: "GPU fell off the PCIe bus and is unreachable", immediate: Action::RebootNode, investigate: Some(Action::Replace) },
    XidEntry { code: 80, meaning: "Command data reached the GPU corrupted (CRC mismatch)", immediate: Action::RestartApp, investigate: Some(Action::RestartApp) },
    XidEntry { code: 81, meaning: "Legacy VGA subsystem error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 82, meaning: "JPEG decoder 0 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 83, meaning: "Video decoder 1 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 84, meaning: "Video decoder 2 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 85, meaning: "Copy engine 9 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 86, meaning: "Optical flow accelerator fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 87, meaning: "Legacy telemetry report; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 88, meaning: "Video decoder 3 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 89, meaning: "Video decoder 4 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 90, meaning: "Legacy L2 cache error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 91, meaning: "Reserved code; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 92, meaning: "Correctable single-bit ECC errors at a high rate", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 93, meaning: "InfoROM write blocked by its provisioned wear limit", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 94, meaning: "Memory error contained to one app; restart that app only", immediate: Action::RestartApp, investigate: None },
    XidEntry { code: 95, meaning: "Memory error not contained; every app on the GPU is hit", immediate: Action::ResetGpu, investigate: None },
    XidEntry { code: 96, meaning: "Video decoder 5 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 97, meaning: "Video decoder 6 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 98, meaning: "Video decoder 7 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 99, meaning: "JPEG decoder 1 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 100, meaning: "JPEG decoder 2 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 101, meaning: "JPEG decoder 3 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 102, meaning: "JPEG decoder 4 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 103, meaning: "JPEG decoder 5 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 104, meaning: "JPEG decoder 6 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 105, meaning: "JPEG decoder 7 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 106, meaning: "Test message from the out-of-band management channel", immediate: Action::None, investigate: None },
    XidEntry { code: 107, meaning: "Silent test message from the out-of-band management channel", immediate: Action::None, investigate: None },
    XidEntry { code: 108, meaning: "NVLink remote address translation fault (largely unused)", immediate: Action::None, investigate: Some(Action::RestartApp) },
    XidEntry { code: 109, meaning: "GPU timed out switching between jobs", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 110, meaning: "GPU security fault; suspect recent HW changes, cold reset", immediate: Action::ResetGpu, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 111, meaning: "Legacy bundle error event; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 112, meaning: "Legacy display supervisor error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 113, meaning: "Legacy DisplayPort link training failure; not raised now", immediate: Action::Replace, investigate: None },
    XidEntry { code: 114, meaning: "Legacy display underflow; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 115, meaning: "Legacy display core channel error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 116, meaning: "Legacy display window channel error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 117, meaning: "Legacy display cursor channel error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 118, meaning: "Legacy display head error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 119, meaning: "GSP firmware processor did not answer the driver in time", immediate: Action::ResetGpu, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 120, meaning: "GSP firmware processor reported an error", immediate: Action::ResetGpu, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 121, meaning: "Corrected errors on the C2C link to the Grace CPU", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 122, meaning: "Legacy SPI flash read failure; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 123, meaning: "Legacy SPI flash write failure; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 124, meaning: "Legacy SPI flash erase failure; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 125, meaning: "Legacy InfoROM filesystem error; not raised on current GPUs", immediate: Action::Replace, investigate: None },
    XidEntry { code: 126, meaning: "Copy engine 10 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 127, meaning: "Copy engine 11 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 128, meaning: "Copy engine 12 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 129, meaning: "Copy engine 13 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 130, meaning: "Copy engine 14 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 131, meaning: "Copy engine 15 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 132, meaning: "Copy engine 16 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 133, meaning: "Copy engine 17 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 134, meaning: "Copy engine 18 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 135, meaning: "Copy engine 19 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 136, meaning: "NVLink link training failed", immediate: Action::ResetGpu, investigate: Some(Action::CheckLink) },
    XidEntry { code: 137, meaning: "Illegal NVLink peer-to-peer access, usually an app bug", immediate: Action::None, investigate: Some(Action::RestartApp) },
    XidEntry { code: 138, meaning: "Legacy deep-learning accelerator error; not raised now", immediate: Action::Replace, investigate: None },
    XidEntry { code: 139, meaning: "Optical flow accelerator 1 fault", immediate: Action::RestartApp, investigate: Some(Action::Replace) },
    XidEntry { code: 140, meaning: "Uncorrectable memory error the driver could not retire", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 141, meaning: "CUDA fast-path error", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 142, meaning: "Video encoder 3 fault", immediate: Action::Replace, investigate: None },
    XidEntry { code: 143, meaning: "GPU failed to initialise", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 144, meaning: "NVLink5 SAW unit error; decode the subcode, many are benign", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 145, meaning: "NVLink5 RLW unit error; decode the subcode, watch for XID 154", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 146, meaning: "NVLink5 TLW unit error; decode the subcode, many are benign", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 147, meaning: "NVLink5 TREX unit error; not expected in production", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 148, meaning: "NVLink5 power-control unit error (non-fatal)", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 149, meaning: "NVLink5 link event or link down; check cable, peer, port", immediate: Action::ResetGpu, investigate: Some(Action::CheckLink) },
    XidEntry { code: 150, meaning: "NVLink5 management firmware (MSE) fault or watchdog", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 151, meaning: "Confidential-computing key rotation failed; restart the VM", immediate: Action::RebootNode, investigate: Some(Action::Replace) },
    XidEntry { code: 152, meaning: "Deep-learning accelerator SMMU fault", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 153, meaning: "Deep-learning accelerator timeout", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 154, meaning: "Driver names the recovery action needed for another XID; do that", immediate: Action::ResetGpu, investigate: None },
    XidEntry { code: 155, meaning: "NVLink taken down on purpose by software or a user", immediate: Action::ResetGpu, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 156, meaning: "GPU retired a faulty resource; reset to apply it", immediate: Action::ResetGpu, investigate: None },
    XidEntry { code: 157, meaning: "GPU could not retire a faulty resource; no spares left", immediate: Action::None, investigate: Some(Action::Replace) },
    XidEntry { code: 158, meaning: "GPU hit a fatal timeout", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 159, meaning: "C2C/CHI non-data error; reset only if UVM or vGPU is in use", immediate: Action::ResetGpu, investigate: None },
    XidEntry { code: 160, meaning: "Driver retired a faulty channel", immediate: Action::None, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 161, meaning: "Driver failed to retire a faulty channel", immediate: Action::None, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 162, meaning: "Power-smoothing circuit switched back on", immediate: Action::None, investigate: None },
    XidEntry { code: 163, meaning: "Power-smoothing circuit switched off, often after thermal events", immediate: Action::None, investigate: Some(Action::CheckCooling) },
    XidEntry { code: 164, meaning: "Power-smoothing circuit near end of life; swings coming", immediate: Action::None, investigate: Some(Action::CheckPower) },
    XidEntry { code: 165, meaning: "Power-smoothing circuit worn out; site must absorb power swings", immediate: Action::None, investigate: Some(Action::CheckPower) },
    XidEntry { code: 166, meaning: "Confidential-computing NVLink traffic before encryption was set", immediate: Action::ResetGpu, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 167, meaning: "Fatal PCIe timeout talking to the GPU", immediate: Action::RebootNode, investigate: Some(Action::Replace) },
    XidEntry { code: 168, meaning: "Memory errors in protected region with ECC off; enable ECC", immediate: Action::UpdateSoftware, investigate: Some(Action::Replace) },
    XidEntry { code: 169, meaning: "On-GPU SEC2 security controller halted", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 170, meaning: "Unexpected NVLink interrupt in confidential-computing mode", immediate: Action::ResetGpu, investigate: Some(Action::UpdateSoftware) },
    XidEntry { code: 171, meaning: "Detail for XID 48: uncorrectable error was in DRAM", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
    XidEntry { code: 172, meaning: "Detail for XID 48: uncorrectable error was in on-chip SRAM", immediate: Action::ResetGpu, investigate: Some(Action::Replace) },
];

/// The catalog entry for an XID code, if NVIDIA's catalog has one.
pub fn lookup(code: u32) -> Option<&'static XidEntry> {
    XIDS.binary_search_by_key(&code, |e| e.code).ok().map(|i| &XIDS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(code: u32) -> &'static XidEntry {
        lookup(code).unwrap_or_else(|| panic!("XID {code} missing from the catalog"))
    }

    fn node_level(a: Action) -> bool {
        matches!(a, Action::ResetGpu | Action::RebootNode)
    }

    #[test]
    fn sorted_and_unique() {
        for pair in XIDS.windows(2) {
            assert!(
                pair[0].code < pair[1].code,
                "XID {} is not before XID {}",
                pair[0].code,
                pair[1].code
            );
        }
    }

    #[test]
    fn covers_the_catalog() {
        assert!(XIDS.len() >= 150, "only {} XIDs", XIDS.len());
        assert_eq!(XIDS.first().map(|e| e.code), Some(1));
    }

    #[test]
    fn meanings_are_short_single_lines() {
        for e in XIDS {
            let m = e.meaning;
            assert!(!m.trim().is_empty(), "XID {} has no meaning", e.code);
            assert!(m.chars().count() <= 80, "XID {} meaning is too long", e.code);
            assert!(
                !m.contains('\n') && !m.contains('\r'),
                "XID {} meaning spans lines",
                e.code
            );
            assert_eq!(m, m.trim(), "XID {} meaning has stray whitespace", e.code);
        }
    }

    #[test]
    fn lookup_finds_and_misses() {
        for e in XIDS {
            assert_eq!(lookup(e.code), Some(e));
        }
        assert_eq!(lookup(0), None);
        assert_eq!(lookup(u32::MAX), None);
    }

    #[test]
    fn spot_checks() {
        assert_eq!(entry(63).immediate, Action::None);
        assert_eq!(entry(92).immediate, Action::None);
        assert_eq!(entry(92).investigate, Some(Action::Replace));
        assert_eq!(entry(94).immediate, Action::RestartApp);
        assert_eq!(entry(43).immediate, Action::None);
        assert_eq!(entry(79).immediate, Action::RebootNode);
        assert_eq!(entry(48).immediate, Action::ResetGpu);
        assert_eq!(entry(48).investigate, Some(Action::Replace));
        assert!(node_level(entry(95).immediate));
        assert_eq!(entry(13).immediate, Action::RestartApp);
        assert_eq!(entry(31).immediate, Action::RestartApp);
        assert_eq!(entry(74).immediate, Action::ResetGpu);
        assert_eq!(entry(74).investigate, Some(Action::CheckLink));
        assert!(node_level(entry(119).immediate));
        assert!(node_level(entry(120).immediate));
        assert_eq!(entry(154).immediate, Action::ResetGpu);
    }
}
