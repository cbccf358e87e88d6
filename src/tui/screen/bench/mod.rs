//! The bench screen: burn-in progress and verdicts, once a suite ran.

mod keys;

use super::KeyRow;

pub(crate) use keys::{cancel_bench, clear_bench, on_key};

/// The bench screen's cursor, and the node whose every check is open.
#[derive(Debug, Clone, Default)]
pub struct BenchState {
    pub cursor: usize,
    /// This node's every check is shown (Enter toggles).
    pub open: Option<usize>,
}

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "move"),
    ("D", "drain the selected failed node, the failure as reason"),
    ("Enter", "each check of this node: figure, floor, verdict, why"),
    ("c", "clear this finished run and its burnin_failed flag"),
    ("x", "stop the running burn-in (asks; cancelled, not failed)"),
];
