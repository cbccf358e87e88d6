//! Burn-in: the suites, each measurement with its verdict, a node's run as
//! it progresses, and the report of a whole run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The suites, shared with the agent that runs them.
pub use fleetop_proto::bench::Suite;

/// What a measurement says about the hardware (an enum on the wire too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    /// Below the expected figure, within what the expectation tolerates.
    Warn,
    Fail,
    /// Not measured; the reason says why.
    Skipped,
}

/// One measurement, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchResult {
    pub name: String,
    pub gpu: Option<u32>,
    pub peer: Option<u32>,
    /// The figure; `None` when nothing was measured (skipped).
    pub value: Option<f64>,
    pub unit: Option<String>,
    pub expected_min: Option<f64>,
    pub expected_source: Option<String>,
    pub verdict: Verdict,
    pub reason: Option<String>,
}

/// A burn-in's verdict as the node's own agent keeps it (its burn-in
/// journal): the evidence a return to service is decided on. Times are on
/// the console's clock where the agent's skew is known.
#[derive(Debug, Clone, PartialEq)]
pub struct BurnIn {
    pub started_ms: i64,
    pub ended_ms: i64,
    /// `None`: a suite this console does not know.
    pub suite: Option<Suite>,
    pub passed: bool,
    /// Who asked ("alice@console1"), as the agent was told.
    pub requested_by: String,
    /// The node as the agent knew it when the burn-in ran.
    pub node: Identity,
    pub checks: Vec<BenchResult>,
    /// Why the suite did not complete, if so.
    pub error: Option<String>,
}

/// A node as its agent knows it: what a burn-in's verdict is matched by,
/// never a name alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    pub hostname: String,
    pub machine_id: Option<String>,
    pub boot_id: Option<String>,
    /// The GPUs' UUIDs, in index order.
    pub gpu_uuids: Vec<String>,
}

impl Identity {
    /// Why a burn-in of `ran` says nothing of the node that is `self` now,
    /// if it does not: another host, another machine, other GPUs (one
    /// swapped since, or one missing). A boot of its own is fine: a node is
    /// rebooted between a burn-in and a return.
    pub fn differs(&self, ran: &Identity) -> Option<String> {
        if ran.hostname != self.hostname {
            return Some(format!("it ran on host '{}', not '{}'", ran.hostname, self.hostname));
        }
        match (&ran.machine_id, &self.machine_id) {
            (Some(a), Some(b)) if a != b => return Some(format!("it ran on machine {a}, this is {b}")),
            (None, Some(_)) | (Some(_), None) => return Some("its machine id is not this node's".into()),
            _ => {}
        }
        let missing: Vec<&String> = self.gpu_uuids.iter().filter(|u| !ran.gpu_uuids.contains(u)).collect();
        if let Some(u) = missing.first() {
            return Some(format!("it did not test GPU {u} (a GPU changed since)"));
        }
        None
    }
}

/// The failed checks of a run in words ("pcie_h2d gpu 0, tcp"), if any.
pub fn failed_checks(checks: &[BenchResult]) -> Option<String> {
    let failed: Vec<String> = checks
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(|r| match r.gpu {
            Some(g) => format!("{} gpu {g}", r.name),
            None => r.name.clone(),
        })
        .collect();
    (!failed.is_empty()).then(|| failed.join(", "))
}

impl BurnIn {
    /// The failing checks in words: the error, else each failed check.
    pub fn failure(&self) -> String {
        match &self.error {
            Some(e) => e.clone(),
            None => failed_checks(&self.checks).unwrap_or_else(|| "not every GPU measured".into()),
        }
    }

    /// Whether it counts for a return that asks for `suite`: the full suite
    /// holds the quick one's checks.
    pub fn covers(&self, suite: Suite) -> bool {
        match suite {
            Suite::Quick => self.suite.is_some(),
            Suite::Full => self.suite == Some(Suite::Full),
        }
    }
}

/// One node's run, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchNode {
    pub name: String,
    pub address: String,
    /// No failed result and no error.
    pub ok: bool,
    /// Why the suite did not run or did not finish.
    pub error: Option<String>,
    /// The agent (host:port) this node sent its network test to.
    pub net_peer: Option<String>,
    pub results: Vec<BenchResult>,
    /// The suite never started (the agent refused the token, could not be
    /// reached, was busy): `error` says why, and nothing was judged.
    #[serde(default)]
    pub refused: bool,
    /// The verdict as the node's agent recorded it, where it did.
    #[serde(skip)]
    pub record: Option<BurnIn>,
}

impl BenchNode {
    /// No GPU check measured anything: `ok` is then false.
    pub fn incomplete(&self) -> bool {
        self.error.is_none() && !measured_a_gpu(&self.results)
    }

    pub fn summary(&self) -> String {
        let count = |v: Verdict| self.results.iter().filter(|r| r.verdict == v).count();
        let mut s = format!(
            "{} pass, {} warn, {} fail, {} skipped",
            count(Verdict::Pass),
            count(Verdict::Warn),
            count(Verdict::Fail),
            count(Verdict::Skipped)
        );
        if let Some(e) = &self.error {
            s.push_str(&format!("; {e}"));
        } else if self.incomplete() {
            s.push_str("; incomplete: no GPU check ran");
        }
        for r in self.results.iter().filter(|r| r.verdict == Verdict::Fail) {
            s.push_str(&format!("; {} failed: {}", r.name, r.reason.as_deref().unwrap_or("")));
        }
        s
    }
}

/// The version of `fleetop bench`'s JSON. 2: a skipped check has no value
/// and no unit (null), where 1 had 0.0 and "".
pub const BENCH_SCHEMA_VERSION: u32 = 2;

/// A whole run (`fleetop bench`'s output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchReport {
    pub schema_version: u32,
    pub generated_at: String,
    pub suite: String,
    pub nodes: Vec<BenchNode>,
}

/// What a node's burn-in did last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BenchUpdate {
    Started {
        suite: String,
    },
    Progress {
        step: String,
        done: u32,
        total: u32,
    },
    Result(BenchResult),
    Finished {
        error: Option<String>,
    },
    /// Stopped by the person who started it: says nothing about the hardware.
    Cancelled,
    /// Never started (refused, unreachable, busy): says nothing about the
    /// hardware either.
    Refused {
        why: String,
    },
    /// The person cleared a finished run from the screen (and its flag).
    Cleared,
}

/// Where a node's burn-in stands, for people: a cancelled run is not a
/// failure, and a run that measured no GPU did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Running,
    /// A check failed (the hardware is below its floor).
    Failed,
    /// The suite did not run or did not finish (agent unreachable, refused,
    /// stream broke): nothing was judged.
    Error,
    Cancelled,
    /// The suite never started: the error says why.
    Refused,
    /// Every GPU check was skipped (no driver, no GPU): not a pass.
    Incomplete,
    Passed,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Failed => "FAILED",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::Refused => "not run",
            Outcome::Incomplete => "incomplete",
            Outcome::Passed => "passed",
        }
    }
}

/// The checks that measure a GPU; when all of them are skipped, a run
/// says nothing about the GPUs.
pub use fleetop_proto::bench::GPU_CHECKS;

/// Whether `results` measured at least one GPU check (pass, warn or fail).
fn measured_a_gpu(results: &[BenchResult]) -> bool {
    results
        .iter()
        .any(|r| r.verdict != Verdict::Skipped && GPU_CHECKS.contains(&r.name.as_str()))
}

/// A node's burn-in, as far as it has gone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchState {
    pub suite: String,
    pub step: String,
    pub done: u32,
    pub total: u32,
    pub results: Vec<BenchResult>,
    pub finished: bool,
    pub error: Option<String>,
    pub cancelled: bool,
    pub refused: bool,
}

impl BenchState {
    pub fn apply(&mut self, event: BenchUpdate) {
        match event {
            BenchUpdate::Started { suite } => {
                *self = BenchState {
                    suite,
                    ..Default::default()
                }
            }
            BenchUpdate::Progress { step, done, total } => (self.step, self.done, self.total) = (step, done, total),
            BenchUpdate::Result(r) => self.results.push(r),
            BenchUpdate::Finished { error } => (self.finished, self.error) = (true, error),
            BenchUpdate::Cancelled => (self.finished, self.cancelled) = (true, true),
            BenchUpdate::Refused { why } => (self.finished, self.refused, self.error) = (true, true, Some(why)),
            BenchUpdate::Cleared => *self = BenchState::default(),
        }
    }

    /// A check failed (a cancelled run never fails, whatever it measured
    /// before it was stopped).
    pub fn failed(&self) -> bool {
        !self.cancelled && self.results.iter().any(|r| r.verdict == Verdict::Fail)
    }

    pub fn outcome(&self) -> Outcome {
        if self.cancelled {
            Outcome::Cancelled
        } else if self.refused {
            Outcome::Refused
        } else if self.failed() {
            Outcome::Failed
        } else if !self.finished {
            Outcome::Running
        } else if self.error.is_some() {
            Outcome::Error
        } else if !measured_a_gpu(&self.results) {
            Outcome::Incomplete
        } else {
            Outcome::Passed
        }
    }

    /// How many results have this verdict.
    pub fn count(&self, v: Verdict) -> usize {
        self.results.iter().filter(|r| r.verdict == v).count()
    }

    /// Why it failed, in one line (a drain reason).
    pub fn failure(&self) -> String {
        let mut parts: Vec<String> = self
            .results
            .iter()
            .filter(|r| r.verdict == Verdict::Fail)
            .map(|r| {
                let gpu = r.gpu.map(|g| format!(" GPU {g}")).unwrap_or_default();
                format!("{}{gpu}: {}", r.name, r.reason.as_deref().unwrap_or("failed"))
            })
            .collect();
        if let Some(e) = &self.error {
            parts.push(e.clone());
        }
        let verb = if self.results.iter().any(|r| r.verdict == Verdict::Fail) {
            "failed"
        } else {
            "did not finish"
        };
        format!("burn-in {} {verb}: {}", self.suite, parts.join("; "))
    }
}
