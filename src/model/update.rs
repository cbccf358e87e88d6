//! Everything the console learns arrives as an `Update` on one channel: from
//! a node's agent, from the scheduler, or from an action it ran.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::action::ActionReport;
use crate::model::bench::BenchUpdate;
use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::sched;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Update {
    /// About one node; `node` indexes the store (the order of the targets).
    Node { node: usize, event: Event },
    /// The scheduler's view of the fleet, read just now.
    Scheduler(Arc<sched::Snapshot>),
    /// The scheduler could not be read.
    SchedulerError(String),
    /// What a cluster action did, node by node.
    ActionDone(Arc<ActionReport>),
    /// Burn-in progress on one node.
    Bench { node: usize, event: BenchUpdate },
    /// Nodes' timelines as kept on disk (the console's state directory, the
    /// audit log), read at start: added to what the console sees itself.
    Timeline(Vec<crate::model::timeline::Event>),
    /// The remediation policy's state as `fleetop watch` keeps it (read
    /// from the state directory when it changes), for the header.
    Remediation(Box<crate::model::remediation::State>),
    /// The Ray cluster's nodes and the work holding GPUs, read just now (`--ray`).
    Ray(Arc<crate::model::ray::RaySnapshot>),
    /// Ray could not be read.
    RayError(String),
    /// Kubernetes' GPU nodes (`--kubernetes`), read just now.
    Kube(Arc<crate::model::kube::KubeSnapshot>),
    /// The Kubernetes API server could not be read, in one line.
    KubeError(String),
}

/// What a node's connection brought.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Event {
    /// The agent's node description, first thing on every connection.
    Info(Box<NodeDesc>),
    Sample(Box<NodeSample>),
    /// The agent has sent all of its history; what follows is live.
    CaughtUp,
    /// The node's agent recorded a burn-in (every console is told at once).
    /// Never in recordings (`record::Recorder::record` leaves it out).
    #[serde(skip)]
    BurnIn(Box<crate::model::bench::BurnIn>),
    /// The connection failed or broke, with the reason.
    Down(String),
}
