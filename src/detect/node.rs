//! The node-level flags a sample decides: an NVSwitch error from the kernel
//! log, a GPU missing from NVML (or AMD SMI), GPUDirect RDMA off.

use crate::detect::debounce::{Debounce, Hold};
use crate::detect::thresholds::Thresholds;
use crate::detect::{flag, ms};
use crate::model::flag::{Action, Flag, FlagKind, Severity, Subject};
use crate::model::sample::{NodeDesc, NodeSample};

#[derive(Debug, Default, Clone)]
pub struct NodeState {
    sxid: Hold,
    /// The episode's SXids: (code, fatal, switch, the kernel's words).
    sxids: Vec<(u32, bool, String, String)>,
    missing: Debounce,
    peermem: Debounce,
}

/// Every node-level flag for one sample.
pub fn flags(st: &mut NodeState, info: &NodeDesc, s: &NodeSample, t: i64, th: &Thresholds, out: &mut Vec<Flag>) {
    sxid(st, s, t, th, out);
    gpu_missing(st, info, t, th, out);
    peermem_missing(st, info, t, out);
}

/// NVSwitch errors, held like XIDs: a fatal one takes the GPUs behind the
/// switch down (crit, reboot); a non-fatal one is worth knowing (info).
fn sxid(st: &mut NodeState, s: &NodeSample, t: i64, th: &Thresholds, out: &mut Vec<Flag>) {
    for x in &s.sxids {
        st.sxid.event(x.time_ms);
        if !st.sxids.iter().any(|(c, _, sw, _)| *c == x.sxid && *sw == x.switch_pci) {
            st.sxids.push((x.sxid, x.fatal, x.switch_pci.clone(), x.text.clone()));
        }
    }
    let Some(first) = st.sxid.held(t, ms(th.xid_hold)) else {
        st.sxids.clear();
        return;
    };
    let fatal = st.sxids.iter().any(|x| x.1);
    let text: Vec<String> = st
        .sxids
        .iter()
        .map(|(code, fatal, sw, words)| {
            let kind = if *fatal { "fatal" } else { "non-fatal" };
            format!("SXid {code} ({kind}) on switch {sw}: {words}")
        })
        .collect();
    let ev: Vec<(&str, f64)> = st.sxids.iter().map(|x| ("sxid", f64::from(x.0))).collect();
    let action = if fatal { Action::RebootNode } else { Action::None };
    let mut f = flag(
        FlagKind::Sxid,
        action.severity(),
        Subject::Node,
        first,
        text.join("; "),
        &ev,
    );
    f.action = action;
    out.push(f);
}

/// A GPU on the PCI bus that NVML does not list, or fewer GPUs than the
/// node should have: the most common way a GPU fails after a reboot.
fn gpu_missing(st: &mut NodeState, info: &NodeDesc, t: i64, th: &Thresholds, out: &mut Vec<Flag>) {
    let h = &info.health;
    // Physical GPUs: an AMD GPU in compute partitions (CPX), a GPU of its
    // own on the wire per partition, counts once against what the node
    // should have.
    let listed = info.physical_gpus() as u32;
    // A node without NVML at all (no GPU backend) is not judged by the
    // fleet-wide count: it may be a login node.
    let fleet = th.expect_gpus.filter(|_| info.backend != "none");
    let short = h.expect_gpus.or(fleet).filter(|&n| n > listed);
    let missing = !h.gpus_missing_pci.is_empty() || short.is_some();
    let Some(since) = st.missing.update(missing, t, 1, 1) else {
        return;
    };
    let mut what = Vec::new();
    if let Some(n) = short {
        what.push(format!("{listed} of {n} GPUs answer"));
    }
    if !h.gpus_missing_pci.is_empty() {
        what.push(format!(
            "on the PCI bus, not in {}: {}",
            info.vendor().library(),
            h.gpus_missing_pci.join(", ")
        ));
    }
    let mut ev = vec![("gpus_listed", f64::from(listed))];
    ev.extend(short.map(|n| ("gpus_expected", f64::from(n))));
    out.push(flag(
        FlagKind::GpuMissing,
        Severity::Crit,
        Subject::Node,
        since,
        what.join("; "),
        &ev,
    ));
}

fn peermem_missing(st: &mut NodeState, info: &NodeDesc, t: i64, out: &mut Vec<Flag>) {
    let Some(since) = st.peermem.update(info.health.peermem == Some(false), t, 1, 1) else {
        return;
    };
    out.push(flag(
        FlagKind::PeermemMissing,
        Severity::Warn,
        Subject::Node,
        since,
        "nvidia_peermem not loaded on a node with InfiniBand: GPUDirect RDMA is off".into(),
        &[],
    ));
}
