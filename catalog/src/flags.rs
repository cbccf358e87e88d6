//! One entry per flag kind: what it means, what to do now, what to do if
//! it comes back, and the runbook's steps.

use crate::{Action, Entry};

/// Every flag kind the console raises, in the order docs/faults.md lists them.
pub const FLAGS: &[Entry] = &[
    Entry {
        kind: "xid",
        meaning: "the driver reported an XID error; the code says what failed",
        immediate: Action::ResetGpu,
        investigate: Some(Action::Replace),
        runbook: &[
            "The action is the code's, from NVIDIA's XID catalog (the table below); with several codes, the most urgent one's.",
            "Application codes (13, 31, 94, ...): tell the job's owner; the GPU is fine.",
            "Node codes (48, 79, 95, 119, ...): drain the node, reset the GPU or reboot as the action says, burn it in, return it.",
            "The same code asking for a reset or reboot in its third boot within 7 days escalates to replace: the reboots did not cure it.",
        ],
    },
    Entry {
        kind: "gpu_event",
        meaning: "an AMD GPU's driver reported a fault through AMD SMI (a reset, a VM fault) or XGMI errors; the event says what",
        immediate: Action::ResetGpu,
        investigate: Some(Action::Replace),
        runbook: &[
            "The action is the event's, from the AMD fault catalog (the table below); with several, the most urgent one's. Held as XIDs are, for the XID window after the last one.",
            "gpu_reset: the driver reset the GPU, most often after an uncorrectable RAS error (the ecc_uncorrected flag names the block): jobs on it were lost. Drain, read the RAS counts and bad pages (`amd-smi metric --ecc --ecc-blocks`, `amd-smi bad-pages`), burn in, return it.",
            "vmfault: the application's fault: tell the job's owner; the same GPU again points at the hardware.",
            "xgmi_error: drain, reset the GPU, burn in with the peer-to-peer test; again: check the link (the baseboard, or the peer GPU).",
        ],
    },
    Entry {
        kind: "sxid",
        meaning: "an NVSwitch reported an error (SXid); fatal ones take the GPUs behind it down",
        immediate: Action::RebootNode,
        investigate: Some(Action::Replace),
        runbook: &[
            "Fatal: CUDA jobs using the fabric fail; drain, reboot (the switch is reset with the node), burn in with the NVLink test.",
            "Non-fatal: info only; a rate of them on one link points at that link (investigate: check the link).",
            "The same switch fatal again after a reboot: replace the baseboard (vendor support).",
        ],
    },
    Entry {
        kind: "gpu_lost",
        meaning: "the GPU does not answer: it has fallen off the bus",
        immediate: Action::RebootNode,
        investigate: Some(Action::Replace),
        runbook: &[
            "Jobs on the GPU are gone; drain the node so nothing new lands on it.",
            "Reboot (a GPU reset rarely brings a lost GPU back), then burn in.",
            "Lost again within days: replace (reseat first if the vendor allows).",
        ],
    },
    Entry {
        kind: "gpu_missing",
        meaning: "fewer GPUs answer than the node has: one is on the PCI bus but not in NVML (AMD: AMD SMI), or the count is short",
        immediate: Action::RebootNode,
        investigate: Some(Action::Replace),
        runbook: &[
            "The most common way a GPU fails after a reboot: the node just shows fewer rows.",
            "Drain, check `lspci -d 10de:` and the kernel log (`dmesg | grep -i nvrm`), reboot once (AMD: `lspci -d 1002:`, `dmesg | grep -i amdgpu`).",
            "An AMD GPU in compute partitions (CPX) counts once: the expected count is of physical GPUs.",
            "Still missing after a reboot: reseat or replace the GPU.",
        ],
    },
    Entry {
        kind: "gpu_library",
        meaning: "the GPU library (NVML; AMD: AMD SMI) did not load on a node that has GPUs: nothing reads them, and no GPU job can run",
        immediate: Action::RebootNode,
        investigate: Some(Action::UpdateSoftware),
        runbook: &[
            "The flag's detail says what failed to load and why (the agent's own words), and why GPUs are expected (on the PCI bus, `expect_gpus`).",
            "Drain: jobs that land on the node find no GPU.",
            "Check the driver: `nvidia-smi`, `dmesg | grep -i nvrm`, `lsmod | grep nvidia` (AMD: `amd-smi list`, `dmesg | grep -i amdgpu`, `lsmod | grep amdgpu`).",
            "A driver upgraded under a running kernel module (\"Driver/library version mismatch\"): reboot. A driver package removed or broken: reinstall it, then reboot.",
            "Then restart the agent (or reboot) and burn the node in before its return.",
        ],
    },
    Entry {
        kind: "remap_failed",
        meaning: "a memory row could not be remapped: the GPU has run out of spare rows",
        immediate: Action::Replace,
        investigate: None,
        runbook: &[
            "Replace the GPU; a reset does not help (a pending remap on the same GPU is moot).",
            "Until the replacement: keep the node drained.",
        ],
    },
    Entry {
        kind: "remap_pending",
        meaning: "a memory row (AMD: an HBM page) waits to be remapped (retired), which takes a GPU reset",
        immediate: Action::ResetGpu,
        investigate: Some(Action::Replace),
        runbook: &[
            "The GPU works meanwhile (graded warn): at the next window drain, reset the GPU, burn it in.",
            "If the remap then fails (remap_failed), replace the GPU.",
            "AMD: bad pages pending retirement (AMD SMI's bad-page list); the driver retires them at the reset.",
        ],
    },
    Entry {
        kind: "ecc_uncorrected",
        meaning: "uncorrectable ECC errors in the GPU's memory since the driver loaded",
        immediate: Action::ResetGpu,
        investigate: Some(Action::Replace),
        runbook: &[
            "Jobs on the GPU may have read bad data: tell the owners.",
            "Drain, reset the GPU (it retires or remaps the rows), burn in.",
            "Again after the reset, or with remap_failed: replace.",
            "AMD: the detail names the RAS blocks (UMC is the HBM), each with its catalog entry (the AMD table below). The driver resets the GPU itself after such an error (a gpu_event) and retires the page; past its bad-page threshold the GPU is for RMA: replace.",
        ],
    },
    Entry {
        kind: "gpu_stuck",
        meaning: "a call to the GPU's library (NVML, AMD SMI) does not return: the driver or the GPU hangs",
        immediate: Action::RebootNode,
        investigate: Some(Action::Replace),
        runbook: &[
            "Graded warn until it lasts 30 s: a slow call may yet return.",
            "Then drain and reboot: a hung driver call does not clear by itself.",
            "Recurring on the same GPU: replace.",
        ],
    },
    Entry {
        kind: "fabric_unhealthy",
        meaning: "the GPU has not joined the NVLink fabric: CUDA will not start on it",
        immediate: Action::RebootNode,
        investigate: Some(Action::UpdateSoftware),
        runbook: &[
            "Check nvidia-fabricmanager (`systemctl status nvidia-fabricmanager`): it must run and match the driver's version.",
            "Restart it; if the GPU still does not register, drain and reboot.",
            "A version mismatch between fabric manager and driver: fix the install.",
        ],
    },
    Entry {
        kind: "nvlink_down",
        meaning: "an NVLink or XGMI link that was up is down: GPU traffic is slow or fails",
        immediate: Action::ResetGpu,
        investigate: Some(Action::CheckLink),
        runbook: &[
            "Drain, reset the GPU (or reboot), burn in with the NVLink test.",
            "Down again: the baseboard or NVSwitch (multi-node NVLink: the cable).",
            "AMD: XGMI links go GPU to GPU on the baseboard: the peer's bus id is in the links pane; a link AMD SMI could not read is unknown, never down.",
        ],
    },
    Entry {
        kind: "ib_down",
        meaning: "an InfiniBand port is not ACTIVE: the node is off the fabric on that port",
        immediate: Action::CheckLink,
        investigate: Some(Action::Replace),
        runbook: &[
            "The physical state says where to look (the flag's detail):",
            "Polling: no link partner: the cable or the switch port.",
            "Disabled: the port was disabled, by the switch or an admin.",
            "LinkUp while INIT or ARMED: the link is up but no subnet manager configured it: is opensm running?",
            "LinkErrorRecovery: the link retrains after errors: the cable or transceiver.",
            "Drain the node if jobs need that port; reseat or swap the cable; replace the HCA if it follows the card.",
        ],
    },
    Entry {
        kind: "ib_errors",
        meaning: "InfiniBand error counters rose within the window the deltas cover",
        immediate: Action::CheckLink,
        investigate: Some(Action::Replace),
        runbook: &[
            "Graded warn: traffic still flows, with retries.",
            "symbol_error, link_error_recovery, link_downed: the cable or transceiver; port_rcv_errors: the far end too.",
            "Swap the cable; if the errors follow the port, the HCA or the switch port.",
        ],
    },
    Entry {
        kind: "pcie_degraded",
        meaning: "the GPU's PCIe link runs narrower or slower than it can, or replays rise",
        immediate: Action::CheckLink,
        investigate: Some(Action::Replace),
        runbook: &[
            "Graded warn: the GPU works, host transfers are slower.",
            "Generation is judged only while the GPU is busy (an idle link trains down to save power); width always.",
            "Reseat the GPU or riser at the next window; a rising replay counter points at the slot or the card.",
        ],
    },
    Entry {
        kind: "throttled",
        meaning: "the GPU slows itself down for heat or power (the reason is in the detail)",
        immediate: Action::CheckCooling,
        investigate: Some(Action::CheckPower),
        runbook: &[
            "Thermal reasons: check cooling; power brake or hardware slowdown: check power.",
            "Software thermal slowdown alone is graded warn.",
            "If one GPU of many throttles: that GPU's cooling or seating.",
            "AMD: the detail gives AMD's own words (socket_thrm, hbm_thrm, prochot_thrm, vr_thrm, ppt_pwr, ...); their entries in the AMD table say which is heat and which is power.",
        ],
    },
    Entry {
        kind: "hot",
        meaning: "the GPU is near the temperature where it slows itself down",
        immediate: Action::CheckCooling,
        investigate: None,
        runbook: &[
            "Graded warn until the slowdown temperature, crit at it.",
            "The junction (hotspot) against its slowdown temperature; the HBM against its own where the GPU gives one (AMD).",
            "Fans, airflow, blanking panels, inlet temperature; compare with the node's other GPUs.",
        ],
    },
    Entry {
        kind: "unreachable",
        meaning: "the node's agent cannot be reached (the reason is in the detail)",
        immediate: Action::CheckNode,
        investigate: None,
        runbook: &[
            "Is the node up (ping, its BMC console)? Is the agent running (`systemctl status fleetop-agent`)?",
            "Refused: the agent is down; DNS or timeout: the network; TLS: certificates.",
            "Nothing is known of its GPUs meanwhile.",
        ],
    },
    Entry {
        kind: "stale",
        meaning: "no sample from the node for several intervals",
        immediate: Action::CheckNode,
        investigate: None,
        runbook: &[
            "Graded warn: after `unreachable_after` (30 s) it becomes unreachable (crit), an agent connected but not sampling as much as one that does not answer.",
            "A loaded agent or network; a console that is behind says so in its header instead.",
        ],
    },
    Entry {
        kind: "burnin_failed",
        meaning: "the node's last burn-in failed a check (crit) or did not finish (warn)",
        immediate: Action::ResetGpu,
        investigate: Some(Action::Replace),
        runbook: &[
            "Keep the node drained; the failed check is in the detail.",
            "Reset the GPU (or reboot) and run the burn-in again.",
            "Fails again: replace the part the check names.",
        ],
    },
    Entry {
        kind: "idle",
        meaning: "a job holds the GPU but does not use it",
        immediate: Action::RestartApp,
        investigate: None,
        runbook: &["Tell the job's owner (named in the detail): release the GPUs or fix the job."],
    },
    Entry {
        kind: "persistence_off",
        meaning: "persistence mode is off: the driver unloads between jobs and each start is slow",
        immediate: Action::UpdateSoftware,
        investigate: None,
        runbook: &["Run nvidia-persistenced (or `nvidia-smi -pm 1`) from the node's configuration."],
    },
    Entry {
        kind: "peermem_missing",
        meaning: "nvidia_peermem is not loaded on a node with InfiniBand: GPUDirect RDMA is off",
        immediate: Action::UpdateSoftware,
        investigate: None,
        runbook: &["`modprobe nvidia_peermem`, and load it at boot from the node's configuration."],
    },
    Entry {
        kind: "version_skew",
        meaning: "this node's driver or VBIOS differs from most nodes with the same GPU model, or its fleetop agent from most agents",
        immediate: Action::None,
        investigate: Some(Action::UpdateSoftware),
        runbook: &["Bring the node in line with the fleet at the next window (the detail names both versions)."],
    },
    Entry {
        kind: "underused",
        meaning: "busy by NVML's utilization, yet most of the GPU's SMs have nothing to do",
        immediate: Action::None,
        investigate: Some(Action::RestartApp),
        runbook: &["Tell the job's owner: the job uses a fraction of the GPU (a larger batch, or fewer GPUs)."],
    },
    Entry {
        kind: "power_capped",
        meaning: "the GPU runs at its power cap for a long time (normal at full load)",
        immediate: Action::None,
        investigate: None,
        runbook: &["Worth knowing only: check the enforced limit is the one intended."],
    },
];

/// What an InfiniBand physical state (sysfs `phys_state`'s word) says about
/// where to look, for a port that is not ACTIVE.
pub fn ib_phys_state_says(phys: &str) -> Option<&'static str> {
    Some(match phys {
        "Polling" => "no link partner: cable or switch port",
        "Disabled" => "disabled by the switch or an admin",
        "Sleep" => "asleep: disabled for power",
        "LinkUp" => "link up, not configured: is the subnet manager running?",
        "LinkErrorRecovery" => "retraining after errors: cable or transceiver",
        "PortConfigurationTraining" | "Training" => "training with the switch: wait, then the cable",
        "PhyTest" => "in a physical test",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_has_words_and_a_runbook_and_names_are_unique() {
        let mut names: Vec<&str> = FLAGS.iter().map(|e| e.kind).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FLAGS.len());
        for e in FLAGS {
            assert!(!e.meaning.is_empty() && !e.meaning.contains('\n'), "{}", e.kind);
            assert!(!e.runbook.is_empty(), "{}", e.kind);
        }
    }

    #[test]
    fn remap_failed_and_pending_say_one_plan() {
        let failed = crate::flag("remap_failed").expect("entry");
        let pending = crate::flag("remap_pending").expect("entry");
        assert_eq!(failed.immediate, Action::Replace);
        assert_eq!(
            pending.investigate,
            Some(Action::Replace),
            "pending: reset, replace if it then fails"
        );
        assert!(
            failed.immediate.urgency() > pending.immediate.urgency(),
            "failed comes first"
        );
    }

    #[test]
    fn polling_means_no_partner() {
        assert_eq!(
            ib_phys_state_says("Polling"),
            Some("no link partner: cable or switch port")
        );
        assert_eq!(ib_phys_state_says("whatever"), None);
    }
}
