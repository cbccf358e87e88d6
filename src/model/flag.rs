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
