//! The scheduler's view of the fleet: node states, drain reasons, jobs, and
//! whether that view is fresh.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One node as the scheduler sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SchedNode {
    /// Slurm's state word: idle, allocated, mixed, drained, draining, down, ...
    pub state: String,
    /// Slurm marks the node not responding (`*`).
    pub not_responding: bool,
    /// Why it is drained or down, who said so and when.
    pub reason: Option<String>,
    pub reason_user: Option<String>,
    pub reason_time: Option<String>,
    /// The partitions the node is in (a node may be in several), sorted,
    /// without sinfo's `*` for the default one. Not serialized with the
    /// rest: recordings encode this type positionally and schema 1 had no
    /// such field; they carry it beside the snapshot (`record::Entry::Partitions`).
    #[serde(skip)]
    pub partitions: Vec<String>,
}

impl SchedNode {
    pub fn is_drained(&self) -> bool {
        self.state.starts_with("drain")
    }

    pub fn is_down(&self) -> bool {
        self.state.starts_with("down")
    }

    /// Out of service: drained, draining or down.
    pub fn out_of_service(&self) -> bool {
        self.is_drained() || self.is_down() || self.state.contains("drain")
    }

    /// Who holds the node out of service, by its reason: fleetop (the
    /// reason starts with `fleetop:`) or someone else.
    pub fn hold(&self) -> Hold<'_> {
        if !self.out_of_service() {
            return Hold::InService;
        }
        match self.reason.as_deref() {
            Some(r) if crate::model::action::own_words(r).is_some() => Hold::Fleetop { reason: r },
            _ => Hold::Other,
        }
    }

    /// "drained by alice at 2026-11-25T03:12:00Z: maintenance": who holds
    /// the node and why, in Slurm's words.
    pub fn held_by(&self) -> String {
        let mut s = self.label();
        if let Some(u) = &self.reason_user {
            s.push_str(&format!(" by {u}"));
        }
        if let Some(t) = &self.reason_time {
            s.push_str(&format!(" at {t}"));
        }
        match &self.reason {
            Some(r) => s.push_str(&format!(": {r}")),
            None => s.push_str(" with no reason given"),
        }
        s
    }

    /// "drained*": the state as Slurm prints it.
    pub fn label(&self) -> String {
        format!("{}{}", self.state, if self.not_responding { "*" } else { "" })
    }
}

/// One node as a scheduler holds it, Slurm's or Kubernetes': what a
/// return to service and the remediation policy ask of it, the same on
/// both.
pub trait Held {
    /// "Slurm", "Kubernetes": the scheduler that holds this view.
    fn scheduler(&self) -> &'static str;
    /// Who keeps the node out of service.
    fn hold(&self) -> Hold<'_>;
    /// Who holds it and why, in the scheduler's words.
    fn held_by(&self) -> String;
    /// Its state in a word or two ("drained", "cordoned").
    fn state(&self) -> String;
    /// The reason it is held for, as the scheduler keeps it.
    fn reason(&self) -> Option<&str>;
    /// When that reason was set (RFC 3339), where the scheduler says.
    fn since(&self) -> Option<&str>;
}

impl Held for SchedNode {
    fn scheduler(&self) -> &'static str {
        "Slurm"
    }
    fn hold(&self) -> Hold<'_> {
        SchedNode::hold(self)
    }
    fn held_by(&self) -> String {
        SchedNode::held_by(self)
    }
    fn state(&self) -> String {
        self.label()
    }
    fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    fn since(&self) -> Option<&str> {
        self.reason_time.as_deref()
    }
}

/// Who keeps a node out of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold<'a> {
    /// In service: nothing holds it.
    InService,
    /// Drained (or down) by fleetop, with this reason.
    Fleetop { reason: &'a str },
    /// Drained or down for a reason fleetop did not set (a person, another
    /// tool, Slurm itself), or none: fleetop leaves it alone.
    Other,
}

/// A running job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Job {
    pub id: u64,
    pub user: String,
    pub name: String,
    pub elapsed_s: u64,
    /// GPUs the job holds on each of its nodes (from its GRES).
    pub gpus_per_node: u32,
    pub nodes: Vec<String>,
}

impl Job {
    /// "job 4411 (alice, train)": the job in a few words, for a refusal.
    pub fn words(&self) -> String {
        format!(
            "job {} ({}, {})",
            self.id,
            fleetop_proto::input::printable(&self.user, 32),
            fleetop_proto::input::printable(&self.name, 64)
        )
    }
}

/// Everything read from the scheduler at one time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub nodes: BTreeMap<String, SchedNode>,
    pub jobs: Vec<Job>,
}

/// What the console keeps per node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub node: SchedNode,
    pub jobs: Vec<Job>,
}

/// How the last attempts to read the scheduler went. A scheduler that cannot
/// be read is never silent: its state on screen is as old as `read_ms`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedHealth {
    /// Console time of the last good read.
    pub read_ms: Option<i64>,
    /// Why the latest read failed, if it did (cleared by a good read).
    pub error: Option<String>,
    /// Console time of the latest failed read.
    pub error_ms: Option<i64>,
}

impl SchedHealth {
    /// Something was learned, good or bad: a first snapshot can be taken.
    pub fn answered(&self) -> bool {
        self.read_ms.is_some() || self.error.is_some()
    }
}
