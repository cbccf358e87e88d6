//! The bench screen: burn-in progress and verdicts, once a suite ran.

use super::KeyRow;

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "move"),
    ("D", "drain the selected failed node, the failure as reason"),
    ("Enter", "each check of this node: figure, floor, verdict, why"),
    ("c", "clear this finished run and its burnin_failed flag"),
    ("x", "stop the running burn-in (asks; cancelled, not failed)"),
];
