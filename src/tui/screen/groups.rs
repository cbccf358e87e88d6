//! The groups screen (`J`): the shown nodes grouped by job, partition,
//! rack, pod or Ray job.

use super::KeyRow;

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "move"),
    ("b", "by job, partition, rack, pod, Ray job (cycles)"),
    ("", "  the least busy first; nodes in none: \"(none)\""),
    ("", "  flags: 3 crit 1 warn, or 3c 1w where the words do not fit"),
    ("Enter", "show the group's nodes on the heatmap (Esc clears)"),
];
