//! What a flag is: a kind, a severity, what it is about, when it began, and
//! the numbers that raised it. Detectors (`detect`) raise and clear them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
}

impl FlagKind {
    pub const ALL: [FlagKind; 17] = [
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
        }
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
            FlagKind::Idle | FlagKind::Xid | FlagKind::Stale | FlagKind::Hot => self.name(),
        }
    }

    pub fn from_name(s: &str) -> Option<FlagKind> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warn,
    Crit,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Crit => "crit",
        }
    }
}

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
    /// One line for people.
    pub detail: String,
    /// The numbers behind it.
    pub evidence: BTreeMap<String, f64>,
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
