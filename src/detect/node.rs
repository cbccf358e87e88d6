//! The node-level flags a sample decides: an NVSwitch error from the kernel
//! log, a GPU missing from NVML (or AMD SMI), no GPU library loaded where
//! GPUs are, GPUDirect RDMA off.

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
    library: Debounce,
    peermem: Debounce,
}

/// Every node-level flag for one sample.
pub fn flags(st: &mut NodeState, info: &NodeDesc, s: &NodeSample, t: i64, th: &Thresholds, out: &mut Vec<Flag>) {
    sxid(st, s, t, th, out);
    let library = gpu_library(st, info, t, th, out);
    gpu_missing(st, info, t, th, library, out);
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

/// Why GPUs are expected on the node, in words, where they are: GPUs on
/// its PCI bus, or a count it should have (the agent's `--expect-gpus`,
/// else the config's `[thresholds] expect_gpus`).
fn gpus_expected(info: &NodeDesc, th: &Thresholds) -> Option<String> {
    let h = &info.health;
    let gpus = |n: u32| {
        if n == 1 {
            "1 GPU".to_string()
        } else {
            format!("{n} GPUs")
        }
    };
    let on_pci = h.gpus_on_pci.unwrap_or(0).max(h.gpus_missing_pci.len() as u32);
    if on_pci > 0 {
        return Some(format!("{} on the PCI bus", gpus(on_pci)));
    }
    match (h.expect_gpus, th.expect_gpus) {
        (Some(n), _) => Some(format!("the agent expects {}", gpus(n))),
        (None, Some(n)) => Some(format!("expect_gpus = {n}")),
        (None, None) => None,
    }
}

/// No GPU library loaded (the agent's backend is "none") on a node that
/// has GPUs: nothing reads them and no GPU job can run. The agent's own
/// words say what failed to load. A node with no GPUs expected (a login
/// node) is not judged. Returns whether it is raised.
fn gpu_library(st: &mut NodeState, info: &NodeDesc, t: i64, th: &Thresholds, out: &mut Vec<Flag>) -> bool {
    let expected = (info.backend == "none").then(|| gpus_expected(info, th)).flatten();
    let Some(since) = st.library.update(expected.is_some(), t, 1, 1) else {
        return false;
    };
    let why = info.gpu_note.as_deref().unwrap_or("no reason given");
    out.push(flag(
        FlagKind::GpuLibrary,
        Severity::Crit,
        Subject::Node,
        since,
        format!("the GPU library did not load ({}): {why}", expected.unwrap_or_default()),
        &[("gpus_listed", f64::from(info.physical_gpus() as u32))],
    ));
    true
}

/// A GPU on the PCI bus that NVML does not list, or fewer GPUs than the
/// node should have: the most common way a GPU fails after a reboot. Not
/// where no GPU library loaded (`no_library`): `gpu_library` says why
/// every GPU is missing.
fn gpu_missing(st: &mut NodeState, info: &NodeDesc, t: i64, th: &Thresholds, no_library: bool, out: &mut Vec<Flag>) {
    let h = &info.health;
    // Physical GPUs: an AMD GPU in compute partitions (CPX), a GPU of its
    // own on the wire per partition, counts once against what the node
    // should have.
    let listed = info.physical_gpus() as u32;
    // A node without NVML at all (no GPU backend) is not judged by the
    // fleet-wide count here: `gpu_library` judges it, by this count too.
    let fleet = th.expect_gpus.filter(|_| info.backend != "none");
    let short = h.expect_gpus.or(fleet).filter(|&n| n > listed);
    let missing = (!h.gpus_missing_pci.is_empty() || short.is_some()) && !no_library;
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
