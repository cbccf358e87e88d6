//! What a modal step of the console holds: the dialog of a cluster action
//! (`Dialog`), the typed-name guard over nodes someone else holds
//! (`Guard`), and the `:` line being typed (`CommandLine`). State only:
//! `app` holds it, and the handlers (`actions`, `command`, `keys`) change
//! it, so none of them needs the others to name it.

use crate::ingest::hostlist;
use crate::model::action::NodeAction;
use crate::model::action::Plan;
use crate::model::bench::Suite;
use crate::model::returning::Prepared;

/// A modal step of a cluster action.
#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    /// Typing the reason for a drain: `text` is the person's words; the
    /// fixed `fleetop: ` prefix is added by `action::plan`, shown, never typed.
    Reason {
        action: NodeAction,
        nodes: Vec<String>,
        text: String,
        /// How the nodes were chosen ("the alert's node", "2 marked nodes").
        chosen: String,
    },
    /// The exact commands, waiting for `y` (anything else cancels); with a
    /// guard, for the held nodes' names typed instead.
    Confirm {
        plan: Plan,
        chosen: String,
        guard: Option<Guard>,
    },
    /// Return to service: what happens to each node and the commands,
    /// waiting for `y` (`s` switches the burn-in suite), or the guard.
    ConfirmReturn {
        prepared: Box<Prepared>,
        chosen: String,
        guard: Option<Guard>,
    },
    /// Sent; waiting for the result.
    Running(Plan),
    /// A burn-in suite on these nodes, waiting for `y`.
    /// (`guard`: nodes with running jobs, or held by someone else, run
    /// only with their names typed.)
    ConfirmBench {
        nodes: Vec<usize>,
        suite: Suite,
        guard: Option<Guard>,
    },
    /// Stopping the running burn-in, waiting for `y`.
    ConfirmCancelBench { nodes: Vec<String> },
    /// Signalling a GPU's processes through node `node`'s agent, waiting for `y`.
    ConfirmSignal { node: usize, plan: Plan },
    /// The result of the last action, node by node.
    Result,
}

/// Nodes someone else holds out of service (a person, another tool,
/// Slurm): putting them back overrides that, so a reflexive `y` must not
/// do it. Only their names, typed, confirm (and the plan is forced).
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// What the nodes have in common, above them ("held out of service").
    pub head: &'static str,
    /// "gpu02: drained by alice at 2026-..: maintenance", one per node.
    pub held: Vec<String>,
    /// Each held node and why, as given: what a confirmed plan overrides.
    pub why: Vec<(String, String)>,
    /// What must be typed: the held nodes as a Slurm hostlist.
    pub names: String,
    pub typed: String,
    /// Enter was pressed on something else: the dialog says so.
    pub wrong: bool,
}

impl Guard {
    /// The guard over `held` (a node's name, and why it needs its name
    /// typed), or `None` when no node does.
    pub(crate) fn over(head: &'static str, held: Vec<(String, String)>) -> Option<Guard> {
        if held.is_empty() {
            return None;
        }
        let list: Vec<String> = held.iter().map(|(n, _)| n.clone()).collect();
        Some(Guard {
            head,
            held: held.iter().map(|(n, why)| format!("{n}: {why}")).collect(),
            why: held,
            names: hostlist::compress(&list),
            typed: String::new(),
            wrong: false,
        })
    }
}

/// The `:` line being typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandLine {
    pub text: String,
    /// What Tab found and could not choose between, shown in the footer.
    pub choices: Vec<String>,
}
