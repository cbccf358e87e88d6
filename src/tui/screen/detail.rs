//! Node detail: one node's GPUs and, below them, one pane at a time.

use super::KeyRow;

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "select a GPU"),
    ("1-5  h l", "pane: history, NVLink, InfiniBand, processes, timeline"),
    ("", "  in the timeline (5) j k PgUp PgDn g G scroll it"),
    ("n N  c C", "open the next / previous node flagged warn+; c C: crit"),
    ("z", "history: the last minute, ten minutes, or all of it"),
    ("K  A", "scancel this GPU's Slurm job (asks) / A: this node's alerts"),
    ("x  X", "SIGTERM / SIGKILL the GPU's processes via its agent (asks)"),
];
