//! The heatmap, the home screen: one row per node, or the dense wall of
//! one cell per node.

mod keys;

use super::KeyRow;

pub(crate) use keys::on_key;

/// The heatmap's own state: the wall, and where a range mark starts.
#[derive(Debug, Clone)]
pub struct HeatmapState {
    pub wall: Wall,
    /// The wall's order, frozen when the person last sorted: each node's
    /// rank by node index.
    pub(crate) wall_order: Option<Vec<usize>>,
    /// Where a range mark (Ctrl-Space) starts: the last node marked.
    pub(crate) mark_anchor: Option<usize>,
}

impl Default for HeatmapState {
    fn default() -> Self {
        HeatmapState {
            wall: Wall::Auto,
            wall_order: None,
            mark_anchor: None,
        }
    }
}

/// Whether the fleet is drawn as one row per node or as a dense wall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wall {
    /// A wall above `WALL_AUTO_NODES` nodes.
    Auto,
    On,
    Off,
}

/// From this many nodes the heatmap becomes a wall on its own.
pub const WALL_AUTO_NODES: usize = 256;

/// The heatmap's own keys (the wall's included).
pub const KEYS: &[KeyRow] = &[
    (
        "j k g G  PgDn",
        "move, top, bottom, page (PgUp); on the wall a row of cells",
    ),
    ("h l  ← →", "move along the wall"),
    ("Enter", "open the node"),
    ("s  S", "sort: worst first, name, metric, age, Slurm; S reverses"),
    ("n N  c C", "next / previous node flagged warn or worse; c C: crit"),
    ("w", "toggle the dense wall (one cell per node)"),
    ("space", "mark / unmark the node (for actions), then move down"),
    (
        "a u  Ctrl-Space",
        "mark all shown / unmark all / from the last mark here",
    ),
    ("y", "copy the marked nodes (or this one) as a Slurm hostlist"),
];
