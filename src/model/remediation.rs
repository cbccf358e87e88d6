//! The remediation policy's record of what it did (kept in the state
//! directory by `ops::remediate`, shown in the console's header).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::flag::FlagKind;

/// What the remediation policy does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Says what it would drain (in its log), drains nothing.
    DryRun,
    /// Drains the nodes, within the breaker's bounds.
    Drain,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::DryRun => "dry-run",
            Mode::Drain => "drain",
        }
    }
}

/// What the policy has done, as kept on disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct State {
    /// Nodes the policy drained whose incident is not over (by node).
    pub holding: BTreeMap<String, Drained>,
    /// The policy's drains within the breaker's window, oldest first.
    pub recent: Vec<Drained>,
    /// Set when the breaker tripped: the policy acts no more until reset.
    pub tripped: Option<Tripped>,
    /// The running policy's mode and limit, for the console's header.
    pub mode: Option<Mode>,
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drained {
    pub node: String,
    pub at_ms: i64,
    pub kind: FlagKind,
    pub reason: String,
    /// Slurm has shown the node out of service since the drain: only then
    /// does a node back in service mean someone put it back (a scheduler
    /// read from before the drain says nothing).
    #[serde(default)]
    pub seen_out: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tripped {
    pub at_ms: i64,
    pub why: String,
}

impl State {
    /// Records a drain the policy made.
    pub fn drained(&mut self, node: &str, kind: FlagKind, reason: &str, now_ms: i64) {
        let d = Drained {
            node: node.to_string(),
            at_ms: now_ms,
            kind,
            reason: reason.to_string(),
            seen_out: false,
        };
        self.holding.insert(node.to_string(), d.clone());
        self.recent.push(d);
    }
}
