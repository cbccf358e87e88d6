//! What the screen asks `ops` to do: the app decides, `ops` does the I/O
//! (running, logging) and answers on the update channel. Apart from
//! `action` so that the plans and reports do not depend on every kind of
//! request (a return's decision, a silence).

use crate::model::action::Plan;
use crate::model::bench::Suite;

/// What the screen asks `ops` to do: the app decides, `ops` does the I/O
/// (running, logging) and answers on the update channel.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Run(Plan),
    /// An attempt refused before anything ran, for the audit log.
    Refused(Plan, String),
    /// A burn-in suite on these nodes (by index).
    Bench {
        nodes: Vec<usize>,
        suite: Suite,
    },
    /// Stop the running burn-in (the agents stop when their streams go).
    CancelBench,
    /// Keep these acknowledgements and silences (the whole list, saved in
    /// the state dir) and log the one just made.
    Silences {
        all: Vec<crate::model::flag::Silence>,
        made: crate::model::flag::Silence,
    },
    /// Signal these pids through node `node`'s agent (the plan says which
    /// signal and is what gets logged).
    Signal {
        node: usize,
        plan: Plan,
    },
    /// Return these nodes to service (`ops::return_to_service`), as
    /// decided and confirmed.
    Return(Box<crate::model::returning::Prepared>),
}
