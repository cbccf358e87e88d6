//! The alerts screen: every active flag, then the recently cleared ones.

mod keys;
mod rows;

use crate::model::flag::Silence;

use super::KeyRow;

pub(crate) use keys::on_key;
pub use rows::AlertRow;

/// The alerts screen's cursor and order, and the alerts a person quieted.
#[derive(Debug, Clone)]
pub struct AlertsState {
    pub cursor: usize,
    pub sort: AlertSort,
    /// Identical flags of one job fold into one row (`z` unfolds).
    pub folded: bool,
    /// Acknowledged and silenced alerts (loaded from the state dir at start).
    pub silences: Vec<Silence>,
}

impl Default for AlertsState {
    fn default() -> Self {
        AlertsState {
            cursor: 0,
            sort: AlertSort::Severity,
            folded: true,
            silences: Vec::new(),
        }
    }
}

/// How alerts are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertSort {
    Severity,
    Age,
    Node,
    Kind,
}

impl AlertSort {
    pub fn next(self) -> Self {
        match self {
            AlertSort::Severity => AlertSort::Age,
            AlertSort::Age => AlertSort::Node,
            AlertSort::Node => AlertSort::Kind,
            AlertSort::Kind => AlertSort::Severity,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AlertSort::Severity => "severity",
            AlertSort::Age => "age",
            AlertSort::Node => "node",
            AlertSort::Kind => "kind",
        }
    }
}

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "move"),
    ("g G  PgUp PgDn", "top, bottom, page"),
    ("Enter", "open the node of the alert"),
    ("D", "drain the alert's node, the catalog's reason filled in"),
    ("s", "sort by severity, age, node, kind"),
    ("z", "fold / unfold identical flags of one job into one row"),
    ("a", "acknowledge the alert (until it clears); again to undo"),
    ("1 4 8", "silence this kind on this node for 1, 4 or 8 hours"),
];
