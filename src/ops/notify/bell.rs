//! The TUI's bell: rings when a crit flag appears that was not active at
//! the last look. Flags a node brings with its history on connect are the
//! past, not news: they never ring.

use std::collections::BTreeSet;

use crate::model::flag::{FlagKind, Severity, Subject};
use crate::store::Store;

#[derive(Debug, Default)]
pub struct Bell {
    crit: BTreeSet<(usize, FlagKind, Subject)>,
}

impl Bell {
    /// Whether a crit flag was raised since the last call.
    pub fn check(&mut self, store: &Store) -> bool {
        let mut now = BTreeSet::new();
        let mut ring = false;
        for (i, n) in store.nodes.iter().enumerate() {
            let history = matches!(n.link, crate::store::Link::Connected { .. }) && !n.caught_up;
            for f in n.detector.active().filter(|f| f.severity == Severity::Crit) {
                let key = (i, f.kind, f.subject);
                ring |= !history && !self.crit.contains(&key);
                now.insert(key);
            }
        }
        self.crit = now;
        ring
    }
}
