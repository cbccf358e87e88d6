//! Return to service (`fleetop node return`, and the console's `T`): a
//! drained node goes back only with a passing burn-in taken after its drain
//! began. Nodes without one get one (the quick suite unless told
//! otherwise); those that pass are resumed, the others stay drained with the
//! failing check added to their reason. Every step is in the audit log: the
//! return's plan before anything runs, the burn-in (as `fleetop bench` logs
//! it), and the return's results node by node.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::ingest::agent::Access;
use crate::ingest::slurm::Slurm;
use crate::model::action::{self, ActionReport, NodeAction, NodeResult, Plan, Stage};
use crate::model::bench::{BenchNode, BenchUpdate, Suite, Verdict};
use crate::model::sched::{Hold, SchedNode};
use crate::model::target::Target;
use crate::model::time::rfc3339;
use crate::model::timeline::{Event, What};
use crate::ops::{audit, bench, slurm, timeline};

pub use crate::model::returning::{NodePlan, Prepared, Step};

/// The plan of a return: a burn-in on the nodes that need one, then a
/// resume of every node that may pass.
fn plan_of(nodes: &[NodePlan], suite: Suite, force: bool) -> Plan {
    let benched = crate::model::returning::bench_targets(nodes);
    let mut commands = Vec::new();
    if !benched.is_empty() {
        commands.extend(bench::plan(suite.name(), &benched).commands);
    }
    for n in nodes {
        if !matches!(n.step, Step::Done { .. }) {
            commands.push(action::command(NodeAction::Resume, &n.node, None));
        }
    }
    let mut p = Plan::new(
        NodeAction::Return,
        nodes.iter().map(|n| n.node.clone()).collect(),
        Some(format!("return to service after a passing burn-in ({})", suite.name())),
        commands,
    );
    p.force = force;
    p
}

/// The last passing burn-in of each node since its drain began, from the
/// timeline (the audit log's bench results): the suite asked for, or the
/// full one, which holds the quick one's checks.
fn passed_since(events: &[Event], node: &str, since_ms: i64, suite: Suite) -> Option<i64> {
    events
        .iter()
        .filter(|e| e.node == node && e.time_ms >= since_ms)
        .filter_map(|e| match &e.what {
            What::Action {
                action: NodeAction::Bench,
                ok: true,
                reason,
                ..
            } => {
                let ran = reason
                    .as_deref()
                    .and_then(|r| r.strip_prefix("suite "))
                    .and_then(Suite::parse);
                let enough = match suite {
                    Suite::Quick => ran.is_some(),
                    Suite::Full => ran == Some(Suite::Full),
                };
                enough.then_some(e.time_ms)
            }
            _ => None,
        })
        .max()
}

/// Decides, per node, from Slurm's state (`sched`: a node by name) and the
/// timeline: `targets` are the agents of the nodes (by name), `events` the
/// nodes' timelines (from disk, or the console's).
pub fn prepare<'a>(
    names: &[String],
    sched: impl Fn(&str) -> Option<&'a SchedNode>,
    targets: &[Target],
    events: &[Event],
    suite: Suite,
    force: bool,
) -> Prepared {
    let nodes = names
        .iter()
        .map(|name| {
            let done = |ok: bool, message: String| Step::Done { ok, message };
            let Some(s) = sched(name) else {
                return NodePlan {
                    node: name.clone(),
                    reason: None,
                    step: done(false, "Slurm does not list this node".into()),
                };
            };
            let step = match s.hold() {
                Hold::InService => done(true, format!("already in service ({})", s.label())),
                Hold::Other if !force => done(
                    false,
                    format!("{}: not drained by fleetop (--force to return it anyway)", s.held_by()),
                ),
                Hold::Other | Hold::Fleetop { .. } => {
                    // Without a known start, no earlier burn-in can be
                    // shown to be after it: one runs now.
                    let since = s.reason_time.as_deref().and_then(timeline::parse_time);
                    let passed = since.and_then(|t| passed_since(events, name, t, suite));
                    let drained = match &s.reason_time {
                        Some(t) => format!("drained since {t}"),
                        None => "the drain's start is unknown".into(),
                    };
                    match (passed, targets.iter().find(|t| &t.name == name)) {
                        (Some(t), _) => Step::Resume {
                            passed: format!("burn-in passed at {} ({drained})", rfc3339(t)),
                        },
                        (None, Some(target)) => Step::Bench {
                            target: target.clone(),
                            since: format!("no passing burn-in since the drain ({drained})"),
                        },
                        (None, None) => done(
                            false,
                            "no passing burn-in since the drain, and no agent known for this node to run one".into(),
                        ),
                    }
                }
            };
            NodePlan {
                node: name.clone(),
                reason: s.reason.clone(),
                step,
            }
        })
        .collect::<Vec<_>>();
    let plan = plan_of(&nodes, suite, force);
    Prepared {
        suite,
        force,
        nodes,
        plan,
    }
}

/// The failing checks of a node's burn-in, for its drain reason.
fn failing(n: &BenchNode) -> String {
    if let Some(e) = &n.error {
        return e.clone();
    }
    let failed: Vec<String> = n
        .results
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(|r| match r.gpu {
            Some(g) => format!("{} gpu {g}", r.name),
            None => r.name.clone(),
        })
        .collect();
    if failed.is_empty() {
        "incomplete: no GPU check ran".into()
    } else {
        failed.join(", ")
    }
}

/// The reason a node that failed its return keeps: the failing check, then
/// the words it was drained for (Slurm keeps one reason; the old one stays
/// readable in it).
pub fn failed_reason(old: Option<&str>, suite: Suite, why: &str) -> String {
    let was = old.map(|r| action::own_words(r).unwrap_or(r)).unwrap_or_default();
    let mut r = format!("burn-in {} failed: {why}", suite.name());
    if !was.is_empty() {
        r.push_str(&format!("; drained for: {was}"));
    }
    // Slurm cuts long reasons; keep it well inside what sinfo shows.
    let mut r = action::owned_reason(&r);
    fleetop_proto::input::truncate_to(&mut r, 240);
    r
}

/// Runs a confirmed return. The plan was logged as started by the caller;
/// this logs the burn-in and returns the return's report (for the caller to
/// log and show). `seen` is told the burn-in's progress.
pub async fn run(
    prepared: &Prepared,
    slurm: &Slurm,
    token: Option<&str>,
    access: &Access,
    timeout: Duration,
    seen: &(dyn Fn(usize, &BenchUpdate) + Sync),
) -> ActionReport {
    let plan = prepared.plan.clone();
    let mut results: Vec<NodeResult> = Vec::new();
    let mut resume: Vec<String> = Vec::new();
    let mut keep_drained: Vec<(String, String)> = Vec::new();
    for n in &prepared.nodes {
        match &n.step {
            Step::Done { ok, message } => results.push(NodeResult {
                node: n.node.clone(),
                ok: *ok,
                message: message.clone(),
                state_before: None,
                state_after: None,
            }),
            Step::Resume { .. } => resume.push(n.node.clone()),
            Step::Bench { .. } => {}
        }
    }
    let targets = prepared.bench_targets();
    if !targets.is_empty() {
        match token {
            None => {
                for t in &targets {
                    keep_drained.push((t.name.clone(), "a burn-in needs the agents' bench token".into()));
                }
            }
            Some(token) => {
                let suite = prepared.suite.name();
                let logged = audit::started(&bench::plan(suite, &targets));
                let report = match logged {
                    Ok(()) => Some(bench::run_suites(&targets, suite, token, access, timeout, seen).await),
                    Err(e) => {
                        for t in &targets {
                            keep_drained.push((t.name.clone(), format!("burn-in not run: {e}")));
                        }
                        None
                    }
                };
                if let Some(report) = report {
                    if let Err(e) = bench::audit_report(&report, &targets) {
                        tracing::error!("{e}");
                    }
                    for n in &report.nodes {
                        if n.ok {
                            resume.push(n.name.clone());
                        } else {
                            keep_drained.push((n.name.clone(), failing(n)));
                        }
                    }
                }
            }
        }
    }
    // Resume the nodes that passed, through the same path as `node resume`
    // (which reads each node back from Slurm and leaves other people's
    // drains alone unless forced).
    if !resume.is_empty() {
        let mut p = Plan::new(
            NodeAction::Return,
            resume.clone(),
            plan.reason.clone(),
            resume
                .iter()
                .map(|n| action::command(NodeAction::Resume, n, None))
                .collect(),
        );
        p.force = prepared.force;
        let (s, p2) = (slurm.clone(), p.clone());
        let done = tokio::task::spawn_blocking(move || slurm::execute(&s, &p2)).await;
        match done {
            Ok(r) => results.extend(r.results),
            Err(e) => results.extend(resume.iter().map(|n| NodeResult {
                node: n.clone(),
                ok: false,
                message: format!("resume did not run: {e}"),
                state_before: None,
                state_after: None,
            })),
        }
    }
    // The others stay drained, and say why in Slurm's reason.
    let mut commands = plan.commands.clone();
    for (node, why) in keep_drained {
        let old = prepared
            .nodes
            .iter()
            .find(|n| n.node == node)
            .and_then(|n| n.reason.clone());
        let reason = failed_reason(old.as_deref(), prepared.suite, &why);
        let argv = vec![
            "scontrol".to_string(),
            "update".into(),
            format!("NodeName={node}"),
            format!("Reason={reason}"),
        ];
        commands.push(argv.clone());
        let s = slurm.clone();
        let updated = tokio::task::spawn_blocking(move || s.run(&argv[0], &argv[1..])).await;
        let note = match updated {
            Ok(Ok(_)) => format!("left drained: {reason}"),
            Ok(Err(e)) => format!("left drained ({why}); the reason could not be updated: {e}"),
            Err(e) => format!("left drained ({why}); the reason could not be updated: {e}"),
        };
        results.push(NodeResult {
            node,
            ok: false,
            message: note,
            state_before: None,
            state_after: None,
        });
    }
    // In the order the nodes were asked for.
    let order: Vec<&String> = prepared.nodes.iter().map(|n| &n.node).collect();
    results.sort_by_key(|r| order.iter().position(|n| **n == r.node).unwrap_or(usize::MAX));
    let mut report = audit::report(&plan, Stage::Done, None, results);
    report.commands = commands;
    report
}

/// The node names of `report` that stay out of service.
pub fn still_drained(report: &ActionReport) -> BTreeSet<String> {
    report
        .results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| r.node.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sched::Snapshot;

    fn bench_event(node: &str, t: i64, ok: bool, suite: &str) -> Event {
        Event {
            time_ms: t,
            node: node.into(),
            what: What::Action {
                action: NodeAction::Bench,
                ok,
                reason: Some(format!("suite {suite}")),
                message: String::new(),
                policy: None,
            },
            by: "alice".into(),
        }
    }

    fn drained(reason: &str, at: &str) -> SchedNode {
        SchedNode {
            state: "drained".into(),
            reason: Some(reason.into()),
            reason_user: Some("root".into()),
            reason_time: Some(at.into()),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_burn_in_passed_after_the_drain_counts_and_others_drains_need_force() {
        let mut snap = Snapshot::default();
        snap.nodes
            .insert("a".into(), drained("fleetop: xid 79", "1970-01-01T00:00:10Z"));
        snap.nodes
            .insert("b".into(), drained("fleetop: ecc", "1970-01-01T00:00:10Z"));
        snap.nodes
            .insert("c".into(), drained("maintenance", "1970-01-01T00:00:10Z"));
        snap.nodes.insert(
            "d".into(),
            SchedNode {
                state: "idle".into(),
                ..Default::default()
            },
        );
        let events = vec![
            // a: passed after the drain; b: passed before it, failed after.
            bench_event("a", 20_000, true, "quick"),
            bench_event("b", 5_000, true, "quick"),
            bench_event("b", 15_000, false, "quick"),
        ];
        let t = |n: &str| Target {
            name: n.into(),
            host: "127.0.0.1".into(),
            port: 1,
        };
        let names: Vec<String> = ["a", "b", "c", "d", "e"].iter().map(|s| s.to_string()).collect();
        let sched = |n: &str| snap.nodes.get(n);
        let p = prepare(&names, sched, &[t("a"), t("b"), t("c")], &events, Suite::Quick, false);
        let steps: Vec<&Step> = p.nodes.iter().map(|n| &n.step).collect();
        assert!(matches!(steps[0], Step::Resume { .. }), "{steps:?}");
        assert!(matches!(steps[1], Step::Bench { .. }), "{steps:?}");
        assert!(
            matches!(steps[2], Step::Done { ok: false, message } if message.contains("by root") && message.contains("maintenance") && message.contains("--force")),
            "{steps:?}"
        );
        assert!(matches!(steps[3], Step::Done { ok: true, .. }), "{steps:?}");
        assert!(matches!(steps[4], Step::Done { ok: false, message } if message.contains("does not list")));
        // The plan names the burn-in and the resumes, exactly.
        let plan = &p.plan;
        assert_eq!(plan.commands[0][0], "RunBench");
        assert!(
            plan.commands
                .iter()
                .any(|c| c.join(" ") == "scontrol update NodeName=a State=RESUME")
        );
        // A full suite is asked for: the quick one that passed does not do.
        let full = prepare(&names[..1], sched, &[t("a")], &events, Suite::Full, false);
        assert!(matches!(full.nodes[0].step, Step::Bench { .. }));
        // Forced: someone else's drain is returned like ours.
        let forced = prepare(&names[2..3], sched, &[t("c")], &events, Suite::Quick, true);
        assert!(matches!(forced.nodes[0].step, Step::Bench { .. }));
    }

    #[test]
    fn a_failed_return_keeps_the_check_and_the_old_words_in_the_reason() {
        let r = failed_reason(Some("fleetop: xid 79 on gpu 3"), Suite::Quick, "pcie_h2d gpu 1");
        assert_eq!(
            r,
            "fleetop: burn-in quick failed: pcie_h2d gpu 1; drained for: xid 79 on gpu 3"
        );
        let long = failed_reason(Some(&"é".repeat(400)), Suite::Quick, "x");
        assert!(long.len() <= 240 && long.starts_with("fleetop: "));
    }
}
