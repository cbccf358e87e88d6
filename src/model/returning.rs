//! Return to service, as decided before it runs (`ops::return_to_service`
//! decides and runs it): per node, what will happen, and the plan shown
//! for confirmation and logged.

use crate::model::action::Plan;
use crate::model::bench::{BurnIn, Identity, Suite};
use crate::model::target::Target;

/// What the return will do with one node, decided before anything runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing to do, or nothing fleetop may do: the result is known now.
    Done { ok: bool, message: String },
    /// Passed a burn-in after its drain began: resume it.
    Resume { passed: String },
    /// Needs a burn-in first, on this agent.
    Bench { target: Target, since: String },
}

/// One node of a prepared return.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    pub node: String,
    /// The reason it is drained for (ours, or someone else's with --force).
    pub reason: Option<String>,
    pub step: Step,
    /// How many GPUs its burn-in must measure: a node that lost one passes
    /// no burn-in on the ones left.
    pub expect_gpus: Option<u32>,
    /// The refusals this return lifts for the node, in words (`--force`:
    /// its faults, someone else's drain; `--beside-jobs`: its jobs).
    pub overrides: Vec<String>,
}

/// What the console knows of a node beyond Slurm, for its return: the
/// active flags that keep it out of service (in words), and how many GPUs it
/// should have.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    pub faults: Option<String>,
    pub expect_gpus: Option<u32>,
    /// The jobs Slurm lists on the node ("job 4411 alice train"): a burn-in
    /// would take their GPUs.
    pub jobs: Vec<String>,
    /// The node's agent's burn-in journal: the only burn-ins a return
    /// counts (never a console's files, never a demo's).
    pub burn_ins: Vec<BurnIn>,
    /// The node as its agent says it is now; `None` when the agent was not
    /// read (then no burn-in can be matched to the node).
    pub identity: Option<Identity>,
}

/// What a return may override, each by its own word.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overrides {
    /// `--force` (in the console, the node's name typed): a fault that
    /// keeps the node out, someone else's drain.
    pub force: bool,
    /// `--beside-jobs`: run the burn-in while Slurm lists jobs on the node
    /// (it takes their GPUs).
    pub beside_jobs: bool,
}

/// A return, decided and shown before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub suite: Suite,
    pub force: bool,
    /// `--beside-jobs`: the burn-in runs beside the node's jobs or pods.
    pub beside_jobs: bool,
    pub nodes: Vec<NodePlan>,
    /// The plan for the confirmation and the audit log: a burn-in on the
    /// nodes that need one, then `scontrol update ... State=RESUME` for the
    /// nodes that pass.
    pub plan: Plan,
}

impl Prepared {
    /// The agents of the nodes that need a burn-in.
    pub fn bench_targets(&self) -> Vec<Target> {
        bench_targets(&self.nodes)
    }

    /// What will happen to each node, in words, for the person to confirm.
    pub fn describe(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| {
                let what = match &n.step {
                    Step::Done { ok: true, message } => format!("nothing to do: {message}"),
                    Step::Done { ok: false, message } => format!("left as it is: {message}"),
                    Step::Resume { passed } => format!("resume: {passed}"),
                    Step::Bench { since, .. } => format!(
                        "burn-in ({}) first: {since}; resumed only if it passes",
                        self.suite.name()
                    ),
                };
                match n.overrides.is_empty() {
                    true => format!("{}: {what}", n.node),
                    false => format!("{}: {what}; FORCED past: {}", n.node, n.overrides.join("; ")),
                }
            })
            .collect()
    }
}

/// The agents of the nodes that need a burn-in.
pub fn bench_targets(nodes: &[NodePlan]) -> Vec<Target> {
    nodes
        .iter()
        .filter_map(|n| match &n.step {
            Step::Bench { target, .. } => Some(target.clone()),
            _ => None,
        })
        .collect()
}
