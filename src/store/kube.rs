//! Kubernetes' view of the fleet's nodes (`--kubernetes`), kept beside the
//! rest: each fleetop node's `KubeNode`, matched by name or by address, and
//! how reading the API server goes.

use crate::model::kube::{KubeNode, KubeSnapshot};
use crate::model::sched::SchedHealth;
use crate::store::NodeState;

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

    /// Gives each node the Kubernetes node of its name (or with its name
    /// among its addresses), else the one with its agent's address where
    /// that address is the node's alone (`matching::match_nodes`).
    pub fn apply(&mut self, nodes: &[NodeState], snap: &KubeSnapshot, now_ms: i64) {
        let position = |hit: &dyn Fn(&KubeNode) -> bool| snap.nodes.iter().position(hit);
        let matched = super::matching::match_nodes(
            nodes,
            snap.nodes.len(),
            |n| position(&|k| k.name == n.target.name).or_else(|| position(&|k| k.matches(&n.target.name))),
            |host| position(&|k| k.matches(host)),
        );
        self.nodes = matched.into_iter().map(|j| j.map(|j| snap.nodes[j].clone())).collect();
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
