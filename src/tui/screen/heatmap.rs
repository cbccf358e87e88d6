//! The heatmap, the home screen: one row per node, or the dense wall of
//! one cell per node.

use super::KeyRow;

/// The heatmap's own keys (the wall's included).
pub const KEYS: &[KeyRow] = &[
    (
        "j k g G  PgDn",
        "move, top, bottom, page (PgUp); on the wall a row of cells",
    ),
    ("h l  ← →", "move along the wall"),
    ("Enter", "open the node"),
    ("s  S", "sort by name, metric, flags, age, Slurm state; S reverses"),
    ("n N  c C", "next / previous node flagged warn or worse; c C: crit"),
    ("w", "toggle the dense wall (one cell per node)"),
    ("space", "mark / unmark the node (for actions), then move down"),
    (
        "a u  Ctrl-Space",
        "mark all shown / unmark all / from the last mark here",
    ),
    ("y", "copy the marked nodes (or this one) as a Slurm hostlist"),
];
