//! The GPU flags, one function per kind. Each reads one GPU's sample and
//! its memory of earlier ones, and pushes the flag when it is raised. The
//! kinds live by what they say: `faults` (the hardware's), `health` (links,
//! settings, limits), `usage` (the job's use of the GPU).

use crate::detect::debounce::{Debounce, Hold};
use crate::detect::thresholds::Thresholds;
use crate::model::flag::Flag;
use crate::model::sample::{GpuDesc, GpuReading, NodeHealth, Vendor};
use crate::model::sched::Job;

mod faults;
mod health;
mod usage;

pub use faults::stuck_words;
use faults::{ecc_uncorrected, gpu_event, gpu_lost, gpu_stuck, remap, xid};
use health::{fabric_unhealthy, hot, nvlink_down, pcie_degraded, persistence_off, power_capped, throttled};
use usage::{idle, underused};

/// Per-GPU detector memory.
#[derive(Debug, Default, Clone)]
pub struct GpuState {
    throttled: Debounce,
    hot: Debounce,
    lost: Debounce,
    stuck: Debounce,
    nvlink: Debounce,
    capped: Debounce,
    ecc: Debounce,
    remap_pending: Debounce,
    remap_failed: Debounce,
    capped_run_start: Option<i64>,
    low_util_since: Option<i64>,
    idle: Debounce,
    underused_since: Option<i64>,
    underused: Debounce,
    xid: Hold,
    xids: Vec<u32>,
    pcie: Debounce,
    replay: Hold,
    replay_last: Option<u64>,
    replays_seen: u64,
    fabric: Debounce,
    fabric_pending_since: Option<i64>,
    persistence: Debounce,
    event: Hold,
    /// The AMD fault catalog's entries behind the GPU's gpu_event flag
    /// while it is up, in the order seen.
    events: Vec<&'static fleetop_catalog::AmdFault>,
}

impl GpuState {
    /// The XID codes behind the GPU's xid flag while it is up, in the order seen.
    pub fn held_xids(&self) -> &[u32] {
        &self.xids
    }

    /// The AMD faults behind the GPU's gpu_event flag while it is up, in
    /// the order seen (their catalog codes: "gpu_reset", "xgmi_error", ...).
    pub fn held_events(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.events.iter().map(|e| e.code)
    }
}

/// What a GPU's flags are judged against.
pub struct Context<'a> {
    pub t: i64,
    pub desc: Option<&'a GpuDesc>,
    pub jobs: &'a [Job],
    /// Ray's work on this node (matched to the GPU's processes by pid).
    pub ray: &'a [crate::model::ray::RayWork],
    pub th: &'a Thresholds,
    /// The node's fault journal, for escalation.
    pub health: &'a NodeHealth,
    /// When the node last passed a burn-in: the XIDs before it are over.
    pub burnin_passed_ms: Option<i64>,
}

impl Context<'_> {
    /// Who made the GPU (NVIDIA without a description).
    fn vendor(&self) -> Vendor {
        self.desc.map(|d| d.vendor).unwrap_or_default()
    }
}

/// Every GPU flag for one sample.
pub fn flags(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // XIDs (AMD's events) first: they arrive with the sample that follows
    // them, lost GPU or not.
    xid(st, g, cx, out);
    gpu_event(st, g, cx, out);
    gpu_lost(st, g, cx, out);
    gpu_stuck(st, g, cx, out);
    if g.error.is_some() {
        // No readings to judge the rest by; keep their memory as it is.
        return;
    }
    throttled(st, g, cx, out);
    power_capped(st, g, cx, out);
    hot(st, g, cx, out);
    nvlink_down(st, g, cx, out);
    ecc_uncorrected(st, g, cx, out);
    remap(st, g, cx, out);
    idle(st, g, cx, out);
    underused(st, g, cx, out);
    pcie_degraded(st, g, cx, out);
    fabric_unhealthy(st, g, cx, out);
    persistence_off(st, g, cx, out);
}
