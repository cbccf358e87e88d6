//! The groups screen (`J`): the shown nodes grouped by job, partition,
//! rack, pod or Ray job.

mod keys;

use super::KeyRow;
use crate::tui::view::GroupBy;

pub(crate) use keys::on_key;

/// The groups screen's cursor and what it groups by.
#[derive(Debug, Clone)]
pub struct GroupsState {
    pub cursor: usize,
    /// What the nodes are grouped by (`b` cycles).
    pub by: GroupBy,
}

impl Default for GroupsState {
    fn default() -> Self {
        GroupsState {
            cursor: 0,
            by: GroupBy::Job,
        }
    }
}

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "move"),
    ("b", "by job, partition, rack, pod, Ray job (cycles)"),
    ("", "  the least busy first; nodes in none: \"(none)\""),
    ("", "  flags: 3 crit 1 warn, or 3c 1w where the words do not fit"),
    ("Enter", "show the group's nodes on the heatmap (Esc clears)"),
];
