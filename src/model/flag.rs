//! What a flag is: a kind, a severity, what it is about, when it began, and
//! the numbers that raised it. Detectors (`detect`) raise and clear them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

// Severity and the actions are the fault catalog's (shared with the agent).
pub use fleetop_catalog::{Action, Severity};

/// The kinds of trouble (and waste) the console flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    /// A GPU held by a job or process sits under the utilization threshold for the idle window.
    Idle,
    /// HW slowdown, SW/HW thermal slowdown or HW power brake, debounced.
    Throttled,
    /// Sustained software power cap (normal at full load; informational).
    PowerCapped,
    /// An XID error was reported recently.
    Xid,
    /// Volatile uncorrectable ECC errors.
    EccUncorrected,
    /// The GPU does not answer (fallen off the bus).
    GpuLost,
    NvlinkDown,
    IbDown,
    /// InfiniBand error counters are rising.
    IbErrors,
    /// No sample from the node for several intervals.
    Stale,
    /// Temperature near the GPU's slowdown threshold.
    Hot,
    /// A row remap waits for a GPU reset (warn).
    RemapPending,
    /// A row remap failed: the GPU needs replacing (crit).
    RemapFailed,
    /// Busy by NVML's utilization, yet most SMs idle by GPM (info).
    Underused,
    /// An NVML call on the GPU does not return: no readings from it (warn,
    /// crit once it lasts 30 s).
    GpuStuck,
    /// The node's agent cannot be reached (or never could) for
    /// `unreachable_after`: crit, with the reason (refused, DNS, TLS, timeout).
    Unreachable,
    /// The node's last burn-in failed a check (crit) or did not run to the
    /// end (warn); cleared by a later passing run or by the person (`c`).
    BurninFailed,
    /// An NVSwitch error from the kernel log (fatal: crit; non-fatal: info).
    Sxid,
    /// The GPU's PCIe link is narrower or slower than its maximum, or its
    /// replay counter rises.
    PcieDegraded,
    /// A GPU on the PCI bus that NVML does not list, or fewer GPUs than
    /// the node should have (node-level).
    GpuMissing,
    /// The GPU has not registered with the NVLink fabric (NVSwitch systems).
    FabricUnhealthy,
    /// Persistence mode is off.
    PersistenceOff,
    /// nvidia_peermem is not loaded on a node with InfiniBand (node-level).
    PeermemMissing,
    /// The node's driver or VBIOS differs from most of the fleet's nodes of
    /// the same GPU model (info).
    VersionSkew,
    /// An AMD GPU's driver reported a fault (AMD SMI's events: a reset, a
    /// VM fault; the XGMI error status), held as XIDs are; the action is
    /// the AMD fault catalog's.
    GpuEvent,
    /// No GPU library (NVML, AMD SMI) loaded on a node that has GPUs: on
    /// its PCI bus, or as many as `expect_gpus` says (node-level, crit).
    GpuLibrary,
}

impl FlagKind {
    pub const ALL: [FlagKind; 26] = [
        FlagKind::Idle,
        FlagKind::Throttled,
        FlagKind::PowerCapped,
        FlagKind::Xid,
        FlagKind::EccUncorrected,
        FlagKind::GpuLost,
        FlagKind::NvlinkDown,
        FlagKind::IbDown,
        FlagKind::IbErrors,
        FlagKind::Stale,
        FlagKind::Hot,
        FlagKind::RemapPending,
        FlagKind::RemapFailed,
        FlagKind::Underused,
        FlagKind::GpuStuck,
        FlagKind::Unreachable,
        FlagKind::BurninFailed,
        FlagKind::Sxid,
        FlagKind::PcieDegraded,
        FlagKind::GpuMissing,
        FlagKind::FabricUnhealthy,
        FlagKind::PersistenceOff,
        FlagKind::PeermemMissing,
        FlagKind::VersionSkew,
        FlagKind::GpuEvent,
        FlagKind::GpuLibrary,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FlagKind::Idle => "idle",
            FlagKind::Throttled => "throttled",
            FlagKind::PowerCapped => "power_capped",
            FlagKind::Xid => "xid",
            FlagKind::EccUncorrected => "ecc_uncorrected",
            FlagKind::GpuLost => "gpu_lost",
            FlagKind::NvlinkDown => "nvlink_down",
            FlagKind::IbDown => "ib_down",
            FlagKind::IbErrors => "ib_errors",
            FlagKind::Stale => "stale",
            FlagKind::Hot => "hot",
            FlagKind::RemapPending => "remap_pending",
            FlagKind::RemapFailed => "remap_failed",
            FlagKind::Underused => "underused",
            FlagKind::GpuStuck => "gpu_stuck",
            FlagKind::Unreachable => "unreachable",
            FlagKind::BurninFailed => "burnin_failed",
            FlagKind::Sxid => "sxid",
            FlagKind::PcieDegraded => "pcie_degraded",
            FlagKind::GpuMissing => "gpu_missing",
            FlagKind::FabricUnhealthy => "fabric_unhealthy",
            FlagKind::PersistenceOff => "persistence_off",
            FlagKind::PeermemMissing => "peermem_missing",
            FlagKind::VersionSkew => "version_skew",
            FlagKind::GpuEvent => "gpu_event",
            FlagKind::GpuLibrary => "gpu_library",
        }
    }

    /// Whether the flag says something of the job on the GPU (its use of
    /// it), not of the hardware: such flags fold into one alert per job.
    pub fn about_the_job(self) -> bool {
        matches!(self, FlagKind::Idle | FlagKind::Underused)
    }

    /// A short name, for where the full one does not fit (an 80-column header).
    pub fn short(self) -> &'static str {
        match self {
            FlagKind::Throttled => "thr",
            FlagKind::PowerCapped => "pcap",
            FlagKind::EccUncorrected => "ecc",
            FlagKind::GpuLost => "lost",
            FlagKind::NvlinkDown => "nvl_dn",
            FlagKind::IbDown => "ib_dn",
            FlagKind::IbErrors => "ib_err",
            FlagKind::RemapPending => "rmp_pend",
            FlagKind::RemapFailed => "rmp_fail",
            FlagKind::Underused => "under",
            FlagKind::GpuStuck => "stuck",
            FlagKind::Unreachable => "unreach",
            FlagKind::BurninFailed => "burnin",
            FlagKind::PcieDegraded => "pcie",
            FlagKind::GpuMissing => "missing",
            FlagKind::FabricUnhealthy => "fabric",
            FlagKind::PersistenceOff => "persist",
            FlagKind::PeermemMissing => "peermem",
            FlagKind::VersionSkew => "skew",
            FlagKind::GpuEvent => "event",
            FlagKind::GpuLibrary => "gpulib",
            FlagKind::Idle | FlagKind::Xid | FlagKind::Stale | FlagKind::Hot | FlagKind::Sxid => self.name(),
        }
    }

    pub fn from_name(s: &str) -> Option<FlagKind> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The fault catalog's entry for this kind (every kind has one: a test
    /// holds the two lists together).
    pub fn entry(self) -> &'static fleetop_catalog::Entry {
        fleetop_catalog::flag(self.name()).unwrap_or(&FALLBACK)
    }

    /// What to do about this kind, before any detail (an XID's code) says more.
    pub fn action(self) -> Action {
        self.entry().immediate
    }
}

/// Never used while every kind has its entry (see the test below); keeps
/// the lookup total without a panic.
const FALLBACK: fleetop_catalog::Entry = fleetop_catalog::Entry {
    kind: "unknown",
    meaning: "not in the fault catalog",
    immediate: Action::None,
    investigate: None,
    runbook: &[],
};

/// What a flag is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    Node,
    Gpu(u32),
    /// Index into the node's InfiniBand ports.
    IbPort(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Flag {
    pub kind: FlagKind,
    pub severity: Severity,
    pub subject: Subject,
    /// When the condition began (ms since the epoch, the console's clock).
    pub since_ms: i64,
    /// One line for people: after the holder's words where there is a
    /// holder (see `words`).
    pub detail: String,
    /// Who holds the GPU, for a flag about its use (idle, underused).
    pub holder: Option<Holder>,
    /// The numbers behind it.
    pub evidence: BTreeMap<String, f64>,
    /// What to do, from the fault catalog (for an XID, its most urgent
    /// code's; escalated by the GPU's fault history).
    pub action: Action,
    /// Why the action is more than the catalog's first step, if it is
    /// ("3rd XID 79 on this GPU in 7 days ...").
    pub escalation: Option<String>,
}

/// Who holds a GPU, as an SRE asks: the Slurm jobs on it, else the Ray
/// jobs of its processes; the Kubernetes pods given it; else how many
/// processes it has. Raised into a flag by `detect::gpu`, said by `words`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Holder {
    pub jobs: Vec<HoldingJob>,
    /// Ray's jobs, named only where no Slurm job is.
    pub ray: Vec<RayHolding>,
    /// The pods given the GPU.
    pub pods: Vec<String>,
    /// The GPU's processes, said where nothing above names them.
    pub processes: usize,
}

/// A Slurm job on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldingJob {
    pub id: u64,
    /// The job's user and its GPUs on this node, where the scheduler
    /// listed the job.
    pub known: Option<(String, u32)>,
}

/// A Ray job on a GPU, by the pid Ray gives for its work.
#[derive(Debug, Clone, PartialEq)]
pub struct RayHolding {
    pub job: String,
    /// The actor or task ("Trainer trainer0").
    pub what: String,
}

impl Holder {
    /// "job 4411 (alice, 8 GPUs here)", "ray job 01000000 (Trainer
    /// trainer0)", "pod ns/train-0", "2 process(es)": the holder for people.
    pub fn words(&self) -> String {
        let mut named: Vec<String> = self
            .jobs
            .iter()
            .map(|j| match &j.known {
                Some((user, gpus)) => format!("job {} ({user}, {gpus} GPUs here)", j.id),
                None => format!("job {}", j.id),
            })
            .collect();
        named.extend(self.ray.iter().map(|w| format!("ray job {} ({})", w.job, w.what)));
        if !self.pods.is_empty() {
            let word = if self.pods.len() == 1 { "pod" } else { "pods" };
            named.push(format!("{word} {}", self.pods.join(", ")));
        }
        if named.is_empty() {
            format!("{} process(es)", self.processes)
        } else {
            named.join(", ")
        }
    }

    /// Whether the holder is Slurm job `id` and nothing else: where the job
    /// is said already (an alert row folding the job's GPUs), the holder's
    /// words are the job's.
    pub fn is_job_alone(&self, id: u64) -> bool {
        matches!(self.jobs.as_slice(), [j] if j.id == id) && self.ray.is_empty() && self.pods.is_empty()
    }
}

impl Flag {
    /// The flag's line for people: its holder, where it has one, then its
    /// detail. An idle GPU's holder "holds it at 0% for 12 min"; a busy,
    /// underused one's is "at 90% utilization but 3% SM activity".
    pub fn words(&self) -> String {
        match &self.holder {
            None => self.detail.clone(),
            Some(h) if self.kind == FlagKind::Idle => format!("{} holds it {}", h.words(), self.detail),
            Some(h) => format!("{} {}", h.words(), self.detail),
        }
    }

    /// The catalog's entry for this flag's kind.
    pub fn entry(&self) -> &'static fleetop_catalog::Entry {
        self.kind.entry()
    }

    /// The catalog's line for a drain of this flag's node, the person's (or
    /// the policy's) words after `fleetop:`: "xid on gpu3: reset_gpu (XID 79:
    /// fell off the bus)", on one line and short enough for sinfo.
    pub fn drain_reason(&self) -> String {
        let detail = self.words().replace(['\n', '\r'], " ");
        let mut r = format!(
            "{} on {}: {} ({detail})",
            self.kind.name(),
            self.subject.key(),
            self.action.name()
        );
        if r.len() > 200 {
            fleetop_proto::input::truncate_to(&mut r, 197);
            r.push_str("...");
        }
        r
    }

    /// Whether this flag, while active, keeps its node out of service: its
    /// action takes the node (reset, reboot, replace) and it says what the
    /// node is now (a GPU missing or lost, rows that cannot be remapped).
    /// An XID, SXid or AMD event is an event the drain was made for, held a while
    /// after it: the burn-in after the drain judges the node, not the held
    /// event; a failed burn-in is judged by the next one.
    pub fn keeps_out(&self) -> bool {
        self.action.takes_node()
            && !matches!(
                self.kind,
                FlagKind::Xid | FlagKind::Sxid | FlagKind::GpuEvent | FlagKind::BurninFailed
            )
    }

    /// "gpu_missing on node (3 of 4 GPUs answer)": the flag in a few words,
    /// for a refusal that names it.
    pub fn in_words(&self) -> String {
        // The detail may hold text from outside (a kernel log line).
        let d = fleetop_proto::input::printable(&self.words(), 120);
        format!("{} on {} ({d})", self.kind.name(), self.subject.key())
    }

    /// The sentence for the action: what to do, about what, and what next.
    pub fn action_detail(&self) -> String {
        let next = match &self.escalation {
            Some(_) => None,
            None => self.entry().investigate,
        };
        let mut s = fleetop_catalog::action_detail(self.action, &self.words(), next);
        if let Some(why) = &self.escalation {
            s.push_str(" (");
            s.push_str(why);
            s.push(')');
        }
        s
    }
}

/// A flag that was active and is no longer, kept a while so people see it went.
#[derive(Debug, Clone, PartialEq)]
pub struct ClearedFlag {
    pub flag: Flag,
    pub cleared_ms: i64,
}

/// A person's word on an alert: acknowledged (this flag, until it clears)
/// or silenced (this kind on this node, for a while). Either dims it in the
/// alerts screen; neither changes what the detectors decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    pub node: String,
    pub kind: FlagKind,
    /// Acknowledged: the flag's subject ("gpu3", "ib0", "node") and start;
    /// a new occurrence of the flag is not covered.
    pub ack: Option<(String, i64)>,
    /// Silenced until (ms since the epoch); `None` for an acknowledgement.
    pub until_ms: Option<i64>,
    /// Who, and when (ms since the epoch).
    pub by: String,
    pub at_ms: i64,
}

impl Subject {
    /// "node", "gpu3", "ib0": a stable name for files and logs.
    pub fn key(self) -> String {
        match self {
            Subject::Node => "node".into(),
            Subject::Gpu(g) => format!("gpu{g}"),
            Subject::IbPort(p) => format!("ib{p}"),
        }
    }
}

impl Silence {
    /// Whether this covers `flag` of `node` at `now_ms`.
    pub fn covers(&self, node: &str, flag: &Flag, now_ms: i64) -> bool {
        self.node == node
            && self.kind == flag.kind
            && match (&self.ack, self.until_ms) {
                (Some((subject, since)), _) => *subject == flag.subject.key() && *since == flag.since_ms,
                (None, Some(until)) => now_ms < until,
                (None, None) => false,
            }
    }

    /// Still worth keeping: a silence not yet over, an acknowledgement of a
    /// flag that may still be active (kept a day at most).
    pub fn live(&self, now_ms: i64) -> bool {
        match self.until_ms {
            Some(until) => now_ms < until,
            None => now_ms - self.at_ms < 24 * 3_600_000,
        }
    }
}

/// The flags among `flags` that keep their node out of service, in words
/// ("gpu_missing on node (3 of 4 GPUs answer); ..."), or `None`.
pub fn keeping_out<'a>(flags: impl IntoIterator<Item = &'a Flag>) -> Option<String> {
    let words: Vec<String> = flags
        .into_iter()
        .filter(|f| f.keeps_out())
        .map(Flag::in_words)
        .collect();
    (!words.is_empty()).then(|| words.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_keeps_a_node_out_is_its_present_state_not_a_held_event() {
        let f = |kind: FlagKind| Flag {
            kind,
            severity: Severity::Crit,
            subject: Subject::Node,
            since_ms: 0,
            detail: "3 of 4 GPUs answer\u{1b}]0;x\u{7}".into(),
            holder: None,
            evidence: BTreeMap::new(),
            action: kind.action(),
            escalation: None,
        };
        for k in [FlagKind::GpuMissing, FlagKind::GpuLost, FlagKind::RemapFailed] {
            assert!(f(k).keeps_out(), "{k:?}");
        }
        // The XID the drain was for, a failed burn-in, a dead agent: the
        // burn-in (or the agent) decides, not this gate.
        for k in [
            FlagKind::Xid,
            FlagKind::BurninFailed,
            FlagKind::Unreachable,
            FlagKind::Idle,
        ] {
            assert!(!f(k).keeps_out(), "{k:?}");
        }
        let words = keeping_out(&[f(FlagKind::Idle), f(FlagKind::GpuMissing)]).expect("one keeps it out");
        assert!(words.starts_with("gpu_missing on node (3 of 4 GPUs answer"), "{words}");
        assert!(
            !words.contains('\u{1b}') && !words.contains('\u{7}'),
            "escaped: {words}"
        );
        assert_eq!(keeping_out(&[f(FlagKind::Idle)]), None);
    }

    #[test]
    fn every_flag_kind_has_a_catalog_entry_and_every_entry_a_kind() {
        for k in FlagKind::ALL {
            assert!(
                fleetop_catalog::flag(k.name()).is_some(),
                "{} has no catalog entry",
                k.name()
            );
        }
        for e in fleetop_catalog::FLAGS {
            assert!(
                FlagKind::from_name(e.kind).is_some(),
                "catalog entry {} is no flag kind",
                e.kind
            );
        }
    }
}
