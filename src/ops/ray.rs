//! Drain in Ray, through Ray's own call (the GCS autoscaler state service's
//! DrainNode): the same rules as a Slurm drain. The plan names each node's
//! Ray id and the exact request; a node Ray already drains is left as it is;
//! Ray's refusal is reported in Ray's words; the result is what Ray says
//! afterwards, read back, not the call's answer alone.
//!
//! Ray has no undrain: a drained node is expected to leave the cluster (at
//! its deadline, or when its raylet is stopped) and comes back by starting
//! its raylet again. So fleetop offers no resume for Ray, and there is no
//! drain of someone else's for it to undo.

use std::time::Duration;

use crate::ingest::ray::{DrainAnswer, Ray};
use crate::model::action::{self, ActionReport, NodeAction, NodeResult, Plan, Scheduler, Stage};
use crate::model::ray::{RayNode, RayNodeStatus};
use crate::ops::audit;

/// The call, as Ray's protobuf names it.
pub const DRAIN_CALL: &str = "ray.rpc.autoscaler.AutoscalerStateService/DrainNode";
/// Ray's reasons: a preemption (Ray always accepts it; what runs may
/// finish until the deadline) or an idle termination (Ray refuses it while
/// anything runs on the node: `--if-idle`).
const PREEMPTION: &str = "DRAIN_NODE_REASON_PREEMPTION";
const IDLE_TERMINATION: &str = "DRAIN_NODE_REASON_IDLE_TERMINATION";

/// How long a drain's result is read back before what Ray says is final.
const READ_BACK: Duration = Duration::from_secs(10);

/// Why Ray has no resume, for whoever asks for one.
pub const NO_RESUME: &str = "Ray has no undrain: a drained Ray node leaves the cluster (at its deadline, or when \
     its raylet stops) and comes back when its raylet is started again (`ray start --address ...`)";

/// How a Ray drain is asked for.
pub struct RayDrain {
    /// Tells Ray when the node will go (none: no deadline).
    pub deadline: Option<Duration>,
    /// Drain only a node where nothing runs (Ray refuses it otherwise).
    pub if_idle: bool,
}

/// Plans draining fleetop's nodes in Ray: `nodes` pairs each node's name
/// with the Ray node it is, `None` where Ray has no such node (refused
/// here: nothing is planned for a node Ray does not know).
pub fn drain_plan(
    gcs: &str,
    nodes: Vec<(String, Option<&RayNode>)>,
    reason: Option<String>,
    how: &RayDrain,
    now_ms: i64,
) -> Result<Plan, String> {
    if let Some(r) = &reason {
        crate::model::action::check_reason(r)?;
    }
    let unknown: Vec<&str> = nodes
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(n, _)| n.as_str())
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "Ray has no node named {} (matched by Ray's node name, then its IP address)",
            unknown.join(", ")
        ));
    }
    let names = nodes.iter().map(|(n, _)| n.clone()).collect();
    let mut plan = action::plan(NodeAction::Drain, names, reason)?;
    let deadline_ms = how.deadline.map_or(0, |d| now_ms + d.as_millis() as i64);
    let why = if how.if_idle { IDLE_TERMINATION } else { PREEMPTION };
    plan.commands = nodes
        .iter()
        .filter_map(|(_, r)| *r)
        .map(|r| {
            vec![
                DRAIN_CALL.to_string(),
                format!("gcs={gcs}"),
                format!("node_id={}", r.id),
                format!("reason={why}"),
                format!("reason_message={}", plan.reason.as_deref().unwrap_or_default()),
                format!("deadline_timestamp_ms={deadline_ms}"),
            ]
        })
        .collect();
    plan.scheduler = Scheduler::Ray;
    Ok(plan)
}

/// A field of a planned call (`node_id=...`): the call runs as it was shown.
fn field<'a>(argv: &'a [String], key: &str) -> Option<&'a str> {
    argv.iter().find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
}

fn label(n: &RayNode) -> String {
    n.status.word().to_string()
}

/// Runs a confirmed Ray drain node by node, then reads the nodes back.
pub async fn execute(ray: &Ray, plan: &Plan) -> ActionReport {
    if plan.action != NodeAction::Drain {
        return audit::report(plan, Stage::Done, Some(NO_RESUME.into()), Vec::new());
    }
    let before = ray.read().await;
    let mut results = Vec::new();
    let mut sent = Vec::new();
    for (node, argv) in plan.nodes.iter().zip(&plan.commands) {
        let id = field(argv, "node_id").unwrap_or_default();
        let fail = |message: String, before: Option<&RayNode>| NodeResult {
            node: node.clone(),
            ok: false,
            message,
            state_before: before.map(label),
            state_after: before.map(label),
        };
        let was = match &before {
            Err(e) => {
                results.push(fail(format!("not run: {e}"), None));
                continue;
            }
            Ok(snap) => snap.nodes.iter().find(|n| n.id == id),
        };
        let Some(was) = was else {
            results.push(fail(
                format!("Ray no longer knows node id {id} (its raylet restarted?): plan the drain again"),
                None,
            ));
            continue;
        };
        match was.status {
            RayNodeStatus::Draining => {
                results.push(NodeResult {
                    ok: true,
                    message: "already draining in Ray; left as it is".into(),
                    ..fail(String::new(), Some(was))
                });
                continue;
            }
            RayNodeStatus::Dead => {
                results.push(fail("dead in Ray: nothing to drain".into(), Some(was)));
                continue;
            }
            _ => {}
        }
        let message = field(argv, "reason_message").unwrap_or_default();
        let deadline = field(argv, "deadline_timestamp_ms")
            .and_then(|d| d.parse().ok())
            .unwrap_or(0);
        let idle_only = field(argv, "reason") == Some(IDLE_TERMINATION);
        match ray.drain(id, message, deadline, idle_only).await {
            Ok(DrainAnswer::Accepted) => {
                sent.push(results.len());
                results.push(NodeResult {
                    ok: true,
                    message: "Ray accepted the drain".into(),
                    ..fail(String::new(), Some(was))
                });
            }
            Ok(DrainAnswer::Rejected(why)) => {
                results.push(fail(format!("Ray rejected the drain: {why}"), Some(was)));
            }
            Err(e) => results.push(fail(e.to_string(), Some(was))),
        }
    }
    // Ray accepts a drain for a node it does not know: the truth is its
    // node's status afterwards, which the GCS reports a moment later (from
    // the raylet's next report): read until every node sent says so, or
    // the read-back time is up.
    let ids: Vec<&str> = sent
        .iter()
        .filter_map(|&i| plan.commands.get(i).and_then(|a| field(a, "node_id")))
        .collect();
    let deadline = tokio::time::Instant::now() + READ_BACK;
    let after = loop {
        let after = ray.read().await;
        let all = after.as_ref().is_ok_and(|s| {
            ids.iter().all(|id| {
                s.nodes
                    .iter()
                    .any(|n| n.id == *id && n.status == RayNodeStatus::Draining)
            })
        });
        if all || tokio::time::Instant::now() >= deadline {
            break after;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    for i in sent {
        let r = &mut results[i];
        let id = plan
            .commands
            .get(i)
            .and_then(|a| field(a, "node_id"))
            .unwrap_or_default();
        match after.as_ref().map(|s| s.nodes.iter().find(|n| n.id == id)) {
            Ok(Some(n)) => {
                r.state_after = Some(label(n));
                r.ok = n.status == RayNodeStatus::Draining;
                r.message = if r.ok {
                    "now draining in Ray: no new work is placed on it".into()
                } else {
                    format!("Ray accepted the drain, but the node is {}", n.status.word())
                };
            }
            Ok(None) => {
                r.ok = false;
                r.message = "Ray accepted the drain but no longer lists the node".into();
            }
            Err(e) => {
                r.ok = false;
                r.message = format!("sent, but the result could not be read back: {e}");
            }
        }
    }
    audit::report(plan, Stage::Done, None, results)
}

/// Runs a confirmed plan as every caller must: logged before it runs (not
/// run if it cannot be logged), logged with its results.
pub async fn run_logged(ray: &Ray, plan: Plan) -> ActionReport {
    audit::run_logged(&plan, || execute(ray, &plan)).await
}

/// What `node return --ray` says of a node on Ray's side: what Ray shows
/// of it now (`seen`: Ray's view, or why it could not be read), and what
/// only a person on the node can do. fleetop never takes a node back in
/// Ray: a drained raylet has left the cluster, and only `ray start` on the
/// node brings it back (as a new Ray node).
pub fn return_words(seen: Result<&crate::model::ray::RaySnapshot, &str>, node: &str, gcs: &str) -> String {
    let restart = format!("restart its raylet on the node: ray start --address={gcs}");
    match seen {
        Err(e) => format!("Ray could not be read ({e}); fleetop cannot put a node back in Ray: {restart}"),
        Ok(snap) => match snap.node_for(&[node]) {
            Some(r) if !r.status.out_of_service() => {
                format!(
                    "Ray lists it {} (id {}): it is in Ray's cluster already",
                    r.status.word(),
                    short(&r.id)
                )
            }
            Some(r) => format!(
                "Ray lists it {} (id {}): a drained raylet leaves the cluster and fleetop cannot undrain it; {restart}",
                r.status.word(),
                short(&r.id)
            ),
            None => format!("Ray does not list it (its raylet has left the cluster); {restart}"),
        },
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_shows_the_exact_call_and_refuses_nodes_ray_does_not_know() {
        let node = RayNode {
            id: "ab".repeat(28),
            name: "gpu01".into(),
            ip: "10.0.0.1".into(),
            head: false,
            status: RayNodeStatus::Running,
            gpus_total: Some(8.0),
            gpus_used: Some(8.0),
            activity: Vec::new(),
        };
        let plan = drain_plan(
            "head:6379",
            vec![("gpu01".into(), Some(&node))],
            Some("xid 79".into()),
            &RayDrain {
                deadline: Some(Duration::from_secs(600)),
                if_idle: false,
            },
            1_000,
        )
        .expect("plan");
        assert_eq!(plan.scheduler, Scheduler::Ray);
        assert_eq!(
            plan.commands[0],
            [
                DRAIN_CALL.to_string(),
                "gcs=head:6379".into(),
                format!("node_id={}", "ab".repeat(28)),
                "reason=DRAIN_NODE_REASON_PREEMPTION".into(),
                "reason_message=fleetop: xid 79".into(),
                "deadline_timestamp_ms=601000".into(),
            ]
        );
        let now = RayDrain {
            deadline: None,
            if_idle: true,
        };
        let err =
            drain_plan("head:6379", vec![("gpu09".into(), None)], Some("x".into()), &now, 0).expect_err("unknown");
        assert!(err.contains("no node named gpu09"), "{err}");
        assert!(drain_plan("head:6379", vec![("gpu01".into(), Some(&node))], None, &now, 0).is_err());
    }

    #[test]
    fn a_return_says_what_ray_shows_and_that_only_ray_start_brings_a_node_back() {
        let node = |status| RayNode {
            id: "cd".repeat(28),
            name: "gpu01".into(),
            ip: "10.0.0.1".into(),
            head: false,
            status,
            gpus_total: Some(8.0),
            gpus_used: None,
            activity: Vec::new(),
        };
        let snap = |n: Vec<RayNode>| crate::model::ray::RaySnapshot {
            nodes: n,
            work: Vec::new(),
            jobs: Vec::new(),
        };
        let dead = snap(vec![node(RayNodeStatus::Dead)]);
        let w = return_words(Ok(&dead), "gpu01", "head:6379");
        assert!(w.starts_with("Ray lists it dead (id cdcdcdcdcdcd)"), "{w}");
        assert!(
            w.contains("fleetop cannot undrain") && w.ends_with("ray start --address=head:6379"),
            "{w}"
        );
        let back = snap(vec![node(RayNodeStatus::Dead), node(RayNodeStatus::Idle)]);
        let w = return_words(Ok(&back), "gpu01", "head:6379");
        assert!(w.contains("in Ray's cluster already"), "{w}");
        let w = return_words(Ok(&snap(Vec::new())), "gpu01", "head:6379");
        assert!(w.starts_with("Ray does not list it"), "{w}");
        let w = return_words(Err("refused"), "gpu01", "head:6379");
        assert!(w.starts_with("Ray could not be read (refused)"), "{w}");
    }
}
