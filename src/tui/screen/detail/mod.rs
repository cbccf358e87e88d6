//! Node detail: one node's GPUs and, below them, one pane at a time.

mod keys;

use super::KeyRow;

pub(crate) use keys::on_key;

/// What node detail shows: which node, which GPU, which pane.
#[derive(Debug, Clone)]
pub struct DetailState {
    /// The node shown (its index in the store) and its selected GPU's position.
    pub node: usize,
    pub gpu: usize,
    pub pane: Pane,
    /// How many of the node's newest events the timeline pane scrolled past.
    pub timeline_scroll: usize,
    pub zoom: Zoom,
}

impl Default for DetailState {
    fn default() -> Self {
        DetailState {
            node: 0,
            gpu: 0,
            pane: Pane::History,
            timeline_scroll: 0,
            zoom: Zoom::TenMinutes,
        }
    }
}

/// How much history the node detail's sparklines show (`z` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoom {
    OneMinute,
    TenMinutes,
    /// Everything the ring holds.
    All,
}

impl Zoom {
    pub fn window_ms(self) -> i64 {
        match self {
            Zoom::OneMinute => 60_000,
            Zoom::TenMinutes => 600_000,
            Zoom::All => i64::MAX,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Zoom::OneMinute => "1 min",
            Zoom::TenMinutes => "10 min",
            Zoom::All => "all",
        }
    }

    pub(crate) fn next(self) -> Zoom {
        match self {
            Zoom::OneMinute => Zoom::TenMinutes,
            Zoom::TenMinutes => Zoom::All,
            Zoom::All => Zoom::OneMinute,
        }
    }
}

/// The panes of the node detail's lower half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    History,
    Nvlink,
    Infiniband,
    Processes,
    /// What happened to the node and who did it, newest first.
    Timeline,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::History,
        Pane::Nvlink,
        Pane::Infiniband,
        Pane::Processes,
        Pane::Timeline,
    ];

    /// The pane's tab, for a node whose GPUs are `vendor`'s: its links
    /// are NVLink on NVIDIA, XGMI on AMD.
    pub fn title_for(self, vendor: crate::model::sample::Vendor) -> &'static str {
        match (self, vendor) {
            (Pane::Nvlink, crate::model::sample::Vendor::Amd) => "2 XGMI",
            _ => self.title(),
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Pane::History => "1 history",
            Pane::Nvlink => "2 NVLink",
            Pane::Infiniband => "3 InfiniBand",
            Pane::Processes => "4 processes",
            Pane::Timeline => "5 timeline",
        }
    }
}

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "select a GPU"),
    ("1-5  h l", "pane: history, NVLink, InfiniBand, processes, timeline"),
    ("", "  in the timeline (5) j k PgUp PgDn g G scroll it"),
    ("n N  c C", "open the next / previous node flagged warn+; c C: crit"),
    ("z", "history: the last minute, ten minutes, or all of it"),
    ("K  A", "scancel this GPU's Slurm job (asks) / A: this node's alerts"),
    ("x  X", "SIGTERM / SIGKILL the GPU's processes via its agent (asks)"),
];
