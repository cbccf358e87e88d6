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
