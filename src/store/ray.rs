//! The Ray cluster beside the fleet (`--ray`): the last snapshot, which of
//! fleetop's nodes each Ray node is, and how reading Ray goes.

use std::sync::Arc;

use crate::model::ray::{RayNode, RaySnapshot, RayWork};
use crate::model::sched::SchedHealth;
use crate::store::Store;

#[derive(Debug, Clone, Default)]
pub struct RayState {
    pub snap: Arc<RaySnapshot>,
    /// Per fleetop node (store index): its Ray node's index in `snap.nodes`.
    of_node: Vec<Option<usize>>,
    pub health: SchedHealth,
    /// The GCS's address, where drains go (for the plans shown).
    pub gcs: String,
}

impl RayState {
    pub fn new(gcs: String) -> RayState {
        RayState {
            gcs,
            ..RayState::default()
        }
    }

    /// Node `i`'s Ray node, where Ray has it.
    pub fn node(&self, i: usize) -> Option<&RayNode> {
        self.of_node
            .get(i)
            .copied()
            .flatten()
            .and_then(|r| self.snap.nodes.get(r))
    }

    /// The Ray work holding GPUs on node `i`.
    pub fn work(&self, i: usize) -> impl Iterator<Item = &RayWork> {
        self.node(i).into_iter().flat_map(|r| self.snap.work_on(&r.id))
    }

    /// The Ray work of process `pid` on node `i`.
    pub fn work_of_pid(&self, i: usize, pid: u32) -> Option<&RayWork> {
        self.work(i).find(|w| w.pid == Some(pid))
    }
}

impl Store {
    pub(super) fn apply_ray(&mut self, snap: Arc<RaySnapshot>, now_ms: i64) {
        // What Ray said of each node before this read, for the timeline.
        let first = self.ray.as_ref().is_none_or(|r| r.health.read_ms.is_none());
        let before: Vec<_> = (0..self.nodes.len()).map(|i| self.ray_status(i)).collect();
        let ray = self.ray.get_or_insert_with(RayState::default);
        ray.snap = snap;
        ray.health = SchedHealth {
            read_ms: Some(now_ms),
            error: None,
            error_ms: None,
        };
        self.match_ray();
        let mut events = Vec::new();
        for (i, before) in before.into_iter().enumerate() {
            let now = self.ray_status(i);
            if let Some((state, detail)) = crate::model::ray::timeline_change(before, now, first) {
                events.push(crate::model::timeline::Event {
                    time_ms: now_ms,
                    node: self.nodes[i].target.name.clone(),
                    what: crate::model::timeline::What::SchedulerState {
                        scheduler: "Ray".into(),
                        state: state.into(),
                        detail: detail.into(),
                    },
                    by: "ray".into(),
                });
            }
        }
        // A live console and `watch` keep them on disk, as flag changes:
        // `node history` and the next console show Ray's side too.
        if let Some(unsaved) = self.unsaved.as_mut() {
            unsaved.extend(events.iter().cloned());
        }
        self.add_events(events);
    }

    /// What Ray says of node `i` now; `None` where Ray does not list it.
    fn ray_status(&self, i: usize) -> Option<crate::model::ray::RayNodeStatus> {
        self.ray.as_ref().and_then(|r| r.node(i)).map(|n| n.status)
    }

    /// Which Ray node each node is, again: after a Ray read, and after node
    /// descriptions arrive (the host names agents report are names too).
    /// By name (the node's, or its agent's host name, against Ray's node
    /// name), then by IP (`matching::match_nodes`).
    pub(super) fn match_ray(&mut self) {
        let Some(ray) = self.ray.as_mut() else { return };
        let snap = ray.snap.clone();
        let of_node = super::matching::match_nodes(
            &self.nodes,
            snap.nodes.len(),
            |n| {
                let hostname = n.info.as_ref().map(|i| i.hostname.as_str());
                snap.position(|r| r.name == n.target.name || Some(r.name.as_str()) == hostname)
            },
            |host| snap.position(|r| r.ip == host),
        );
        ray.of_node = of_node;
        for (n, r) in self.nodes.iter_mut().zip(&ray.of_node) {
            n.detector.ray = r
                .map(|r| snap.work_on(&snap.nodes[r].id).cloned().collect())
                .unwrap_or_default();
        }
    }

    pub(super) fn apply_ray_error(&mut self, e: String, now_ms: i64) {
        let ray = self.ray.get_or_insert_with(RayState::default);
        ray.health.error = Some(e);
        ray.health.error_ms = Some(now_ms);
    }
}
