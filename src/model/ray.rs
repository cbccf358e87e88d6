//! A Ray cluster as the console sees it: its nodes (alive, idle, draining,
//! dead; GPUs total and in use) and the work that holds GPUs (actors and
//! tasks, with their job, and the pid where Ray gives one), read from Ray's
//! GCS and its dashboard's state API by `ingest::ray`.

use serde::{Deserialize, Serialize};

/// Where a Ray node is, in the GCS's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RayNodeStatus {
    /// Running work.
    Running,
    /// Alive with nothing to do.
    Idle,
    /// Drained: no new work is placed on it; what runs may finish until
    /// the deadline, then the node is expected to go.
    Draining,
    Dead,
    /// The GCS did not say (a node the dashboard lists but the GCS does not).
    Unknown,
}

impl RayNodeStatus {
    pub fn word(self) -> &'static str {
        match self {
            RayNodeStatus::Running => "running",
            RayNodeStatus::Idle => "idle",
            RayNodeStatus::Draining => "draining",
            RayNodeStatus::Dead => "dead",
            RayNodeStatus::Unknown => "unknown",
        }
    }

    /// Taken out of Ray's scheduling (draining or gone).
    pub fn out_of_service(self) -> bool {
        matches!(self, RayNodeStatus::Draining | RayNodeStatus::Dead)
    }
}

/// One Ray node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayNode {
    /// Ray's node id, in hex (28 bytes): the only id a drain is sent for.
    pub id: String,
    /// `ray start --node-name` (Ray's default is the node's IP address).
    pub name: String,
    pub ip: String,
    pub head: bool,
    pub status: RayNodeStatus,
    /// Logical GPUs Ray schedules on this node (`--num-gpus`); `None`
    /// where Ray knows of none.
    pub gpus_total: Option<f64>,
    /// Logical GPUs held by actors and tasks now (total less available).
    pub gpus_used: Option<f64>,
    /// Why the GCS keeps it busy ("Resource: GPU currently in use.").
    pub activity: Vec<String>,
}

/// What holds GPUs on a Ray node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RayWorkKind {
    Actor,
    Task,
}

/// An actor or a running task that asked Ray for GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayWork {
    pub kind: RayWorkKind,
    /// Ray's job id, in hex ("01000000").
    pub job: String,
    /// The actor's class (and its name, where it has one: "Trainer trainer0")
    /// or the task's function.
    pub what: String,
    /// The node it runs on (Ray's node id).
    pub node: String,
    /// The worker's pid, where the state API gives it: the agent's GPU
    /// process with this pid is this work's.
    pub pid: Option<u32>,
    /// GPUs it asked for (fractions allowed).
    pub gpus: f64,
}

/// A Ray job: what started it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayJob {
    pub id: String,
    /// The submission id, for jobs submitted through the job API.
    pub submission: Option<String>,
    /// "python train.py": the driver's command line or the submitted entrypoint.
    pub entrypoint: Option<String>,
    /// RUNNING, SUCCEEDED, FAILED, ...
    pub status: Option<String>,
}

impl RayJob {
    /// The entrypoint with each path cut to its last part, as a person
    /// names a job in a narrow column: "python train.py" for
    /// "/opt/venv/bin/python /home/a/train.py".
    pub fn short_entrypoint(&self) -> Option<String> {
        let e = self.entrypoint.as_deref()?;
        let words: Vec<&str> = e
            .split_whitespace()
            .map(|w| w.rsplit('/').find(|p| !p.is_empty()).unwrap_or(w))
            .collect();
        Some(words.join(" "))
    }
}

/// Everything read from Ray at one time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RaySnapshot {
    pub nodes: Vec<RayNode>,
    pub work: Vec<RayWork>,
    pub jobs: Vec<RayJob>,
}

impl RaySnapshot {
    /// The Ray node named `names` (its name as Ray knows it: `ray start
    /// --node-name`), else the one at address `names` (for a person naming
    /// a node by its IP). A dead node is taken only where no live one is (a
    /// node that rejoined has a new id).
    pub fn node_for(&self, names: &[&str]) -> Option<&RayNode> {
        let i = self
            .position(|n| names.contains(&n.name.as_str()))
            .or_else(|| self.position(|n| names.contains(&n.ip.as_str())))?;
        self.nodes.get(i)
    }

    /// The index of the node `hit` takes, a live one first.
    pub fn position(&self, hit: impl Fn(&RayNode) -> bool) -> Option<usize> {
        let mut dead = None;
        for (i, n) in self.nodes.iter().enumerate().filter(|(_, n)| hit(n)) {
            if n.status != RayNodeStatus::Dead {
                return Some(i);
            }
            dead = dead.or(Some(i));
        }
        dead
    }

    /// The work holding GPUs on Ray node `id`.
    pub fn work_on<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a RayWork> + 'a {
        self.work.iter().filter(move |w| w.node == id)
    }

    pub fn job(&self, id: &str) -> Option<&RayJob> {
        self.jobs.iter().find(|j| j.id == id)
    }
}

/// What the timeline says of a Ray node's change between two reads of
/// Ray (`None`: Ray does not list it; `first`: no read before this one),
/// as (state, detail): drained, gone, back, joined. A node merely busy or
/// idle says nothing.
pub fn timeline_change(
    before: Option<RayNodeStatus>,
    now: Option<RayNodeStatus>,
    first: bool,
) -> Option<(&'static str, &'static str)> {
    match (before, now) {
        (b, Some(RayNodeStatus::Draining)) if b != Some(RayNodeStatus::Draining) => Some((
            "draining",
            "drained in Ray: no new work is placed on it, and it leaves the cluster",
        )),
        (b, Some(RayNodeStatus::Dead)) if b != Some(RayNodeStatus::Dead) => Some((
            "dead",
            "its raylet has left Ray's cluster (ray start on the node brings it back)",
        )),
        (Some(b), Some(n)) if b.out_of_service() && !n.out_of_service() => Some((n.word(), "back in Ray's cluster")),
        (Some(b), None) if b != RayNodeStatus::Dead => Some(("absent", "Ray no longer lists it")),
        (None, Some(n)) if !first && !n.out_of_service() => Some((n.word(), "joined Ray's cluster")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, name: &str, ip: &str, status: RayNodeStatus) -> RayNode {
        RayNode {
            id: id.into(),
            name: name.into(),
            ip: ip.into(),
            head: false,
            status,
            gpus_total: Some(2.0),
            gpus_used: None,
            activity: Vec::new(),
        }
    }

    #[test]
    fn a_node_is_found_by_name_then_address_and_a_live_one_wins() {
        let snap = RaySnapshot {
            nodes: vec![
                node("aa", "gpu01", "10.0.0.1", RayNodeStatus::Dead),
                node("bb", "gpu01", "10.0.0.1", RayNodeStatus::Running),
                node("cc", "10.0.0.2", "10.0.0.2", RayNodeStatus::Idle),
            ],
            ..RaySnapshot::default()
        };
        assert_eq!(snap.node_for(&["gpu01"]).map(|n| n.id.as_str()), Some("bb"));
        assert_eq!(snap.node_for(&["gpu02", "10.0.0.2"]).map(|n| n.id.as_str()), Some("cc"));
        assert_eq!(snap.node_for(&["gpu09"]), None);
    }

    #[test]
    fn an_entrypoint_is_shortened_to_its_paths_last_parts() {
        let job = RayJob {
            id: "01000000".into(),
            submission: None,
            entrypoint: Some("/opt/venv/bin/python /home/a/train.py --lr 0.1 /".into()),
            status: None,
        };
        assert_eq!(job.short_entrypoint().as_deref(), Some("python train.py --lr 0.1 /"));
    }
}
