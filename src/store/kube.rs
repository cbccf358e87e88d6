//! Kubernetes' view of the fleet's nodes (`--kubernetes`), kept beside the
//! rest: each fleetop node's `KubeNode`, matched by name or by address, and
//! how reading the API server goes.

use crate::model::kube::{KubeNode, KubeSnapshot};
use crate::model::sched::SchedHealth;
use crate::model::target::Target;

#[derive(Debug, Clone, Default)]
pub struct KubeOverlay {
    /// Whether the API server is read at all (`--kubernetes`).
    pub known: bool,
    /// How the reads go (the last good one, the latest error).
    pub health: SchedHealth,
    /// By node index (the store's order); `None`: Kubernetes does not
    /// list that node among its GPU nodes.
    nodes: Vec<Option<KubeNode>>,
}

impl KubeOverlay {
    /// The view of node `i`, where Kubernetes has one.
    pub fn of(&self, i: usize) -> Option<&KubeNode> {
        self.nodes.get(i).and_then(Option::as_ref)
    }

    /// Gives each target the Kubernetes node of its name, else the one
    /// with its address (a node given by IP, or named otherwise there).
    pub fn apply(&mut self, targets: &[&Target], snap: &KubeSnapshot, now_ms: i64) {
        self.nodes = targets
            .iter()
            .map(|t| {
                snap.nodes
                    .iter()
                    .find(|k| k.name == t.name)
                    .or_else(|| snap.nodes.iter().find(|k| k.matches(&t.name) || k.matches(&t.host)))
                    .cloned()
            })
            .collect();
        self.health = SchedHealth {
            read_ms: Some(now_ms),
            error: None,
            error_ms: None,
        };
    }

    /// The read failed: the view stays as it was (as old as `read_ms`).
    pub fn failed(&mut self, error: String, now_ms: i64) {
        self.health.error = Some(error);
        self.health.error_ms = Some(now_ms);
    }
}
