//! Return to service (`fleetop node return`, and the console's `T`): a
//! drained node goes back only with a passing burn-in taken after its drain
//! began, and never while a flag that keeps it out of service is active
//! (`--force` overrides that, audited). Nodes without a burn-in get one
//! (the quick suite unless told otherwise) that must measure every GPU the
//! node should have; those that pass are resumed, the others stay drained.
//! Slurm's reason and its time are never rewritten: they say why the node
//! was drained and since when, which the next return's "burn-in since the
//! drain" needs. Every step is in the audit log (and so on the timeline):
//! the return's plan before anything runs, the burn-in (as `fleetop bench`
//! logs it), and the return's results node by node. A return that could not
//! run a burn-in here (no token, an audit log that cannot be written) is a
//! local error: no burn-in is recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::ingest::agent::Access;
use crate::ingest::slurm::Slurm;
use crate::model::action::{self, ActionReport, NodeAction, NodeResult, Plan, Stage};
use crate::model::bench::{BenchNode, BenchResult, BenchUpdate, Suite, Verdict};
use crate::model::sched::{Hold, SchedNode};
use crate::model::target::Target;
use crate::model::time::rfc3339;
use crate::model::timeline::{Event, What};
use crate::ops::{audit, bench, slurm, timeline};

pub use crate::model::returning::{Gate, NodePlan, Prepared, Step};

/// The plan of a return: a burn-in on the nodes that need one, then a
/// resume of every node that may pass.
fn plan_of(nodes: &[NodePlan], suite: Suite, force: bool, faults: &BTreeMap<String, String>) -> Plan {
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
    p.faults = faults.clone();
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

/// Decides, per node, from Slurm's state (`sched`: a node by name), what
/// the console knows of it (`gate`: its active faults, its GPU count) and
/// the timeline: `targets` are the agents of the nodes (by name), `events`
/// the nodes' timelines (from disk, or the console's).
pub fn prepare<'a>(
    names: &[String],
    sched: impl Fn(&str) -> Option<&'a SchedNode>,
    gate: impl Fn(&str) -> Gate,
    targets: &[Target],
    events: &[Event],
    suite: Suite,
    force: bool,
) -> Prepared {
    let mut faults = BTreeMap::new();
    let nodes = names
        .iter()
        .map(|name| {
            let done = |ok: bool, message: String| Step::Done { ok, message };
            let Gate {
                faults: fault,
                expect_gpus,
                jobs,
            } = gate(name);
            let Some(s) = sched(name) else {
                return NodePlan {
                    node: name.clone(),
                    reason: None,
                    step: done(false, "Slurm does not list this node".into()),
                    expect_gpus,
                };
            };
            if let Some(f) = &fault {
                faults.insert(name.clone(), f.clone());
            }
            let step = match (s.hold(), fault) {
                (Hold::InService, _) => done(true, format!("already in service ({})", s.label())),
                (_, Some(f)) if !force => done(
                    false,
                    format!("{f} still active: not returned while it is (--force to return it anyway)"),
                ),
                (Hold::Other, _) if !force => done(
                    false,
                    format!("{}: not drained by fleetop (--force to return it anyway)", s.held_by()),
                ),
                (Hold::Other | Hold::Fleetop { .. }, _) => {
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
                        // A draining node's jobs still run: a burn-in would
                        // take their GPUs.
                        (None, Some(_)) if !jobs.is_empty() && !force => done(
                            false,
                            format!(
                                "{} still running: the burn-in waits for them (--force to run it anyway)",
                                jobs.join(", ")
                            ),
                        ),
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
                expect_gpus,
            }
        })
        .collect::<Vec<_>>();
    let plan = plan_of(&nodes, suite, force, &faults);
    Prepared {
        suite,
        force,
        nodes,
        plan,
    }
}

/// The GPUs a burn-in measured, against the count the node should have:
/// "gpu_missing: 3 of 4 GPUs measured" where one is missing.
fn missing_gpus(n: &BenchNode, expect: Option<u32>) -> Option<String> {
    let expect = expect?;
    let got = measured_gpus(n);
    (got < expect).then(|| format!("gpu_missing: {got} of {expect} GPUs measured"))
}

/// How many GPUs a burn-in measured: a GPU counts once a check measured
/// it, passed or failed.
fn measured_gpus(n: &BenchNode) -> u32 {
    let measured: BTreeSet<u32> = n
        .results
        .iter()
        .filter(|r| r.value.is_some())
        .filter_map(|r| r.gpu)
        .collect();
    measured.len() as u32
}

/// The failed `gpu_count` check of a burn-in that measured fewer GPUs than
/// the node should have, if it did.
fn gpu_count_check(n: &BenchNode, expect: Option<u32>) -> Option<BenchResult> {
    let why = missing_gpus(n, expect)?;
    Some(BenchResult {
        name: "gpu_count".into(),
        gpu: None,
        peer: None,
        value: Some(f64::from(measured_gpus(n))),
        unit: Some("GPUs".into()),
        expected_min: expect.map(f64::from),
        expected_source: Some("the node's expected GPU count".into()),
        verdict: Verdict::Fail,
        reason: Some(why),
    })
}

/// The failing checks of a node's burn-in, for its result: the cause once
/// (an error, or a missing GPU), else each failed check.
fn failing(n: &BenchNode, expect: Option<u32>) -> String {
    if let Some(e) = &n.error {
        return e.clone();
    }
    if let Some(m) = missing_gpus(n, expect) {
        return m;
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
    // The nodes that stay drained, and why in words: a failed burn-in, or
    // a burn-in that could not run here (a local error: nothing recorded).
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
                    keep_drained.push((
                        t.name.clone(),
                        "burn-in not run: it needs the agents' bench token (bench_token_file, --token-file)".into(),
                    ));
                }
            }
            Some(token) => {
                let suite = prepared.suite.name();
                let logged = audit::started(&bench::plan(suite, &targets));
                let report = match logged {
                    Ok(()) => {
                        for i in 0..targets.len() {
                            seen(i, &BenchUpdate::Started { suite: suite.into() });
                        }
                        Some(bench::run_suites(&targets, suite, token, access, timeout, seen).await)
                    }
                    Err(e) => {
                        for t in &targets {
                            keep_drained.push((t.name.clone(), format!("burn-in not run: {e}")));
                        }
                        None
                    }
                };
                if let Some(mut report) = report {
                    for (i, n) in report.nodes.iter_mut().enumerate() {
                        let expect = prepared
                            .nodes
                            .iter()
                            .find(|p| p.node == n.name)
                            .and_then(|p| p.expect_gpus);
                        // A GPU short is a failed check of the burn-in, in
                        // its report, the audit log and the bench screen.
                        if let Some(r) = gpu_count_check(n, expect) {
                            seen(i, &BenchUpdate::Result(r.clone()));
                            n.results.push(r);
                            n.ok = false;
                        }
                        seen(i, &BenchUpdate::Finished { error: n.error.clone() });
                        if n.ok {
                            resume.push(n.name.clone());
                        } else {
                            let why = format!("burn-in {} failed: {}", prepared.suite.name(), failing(n, expect));
                            keep_drained.push((n.name.clone(), why));
                        }
                    }
                    if let Err(e) = bench::audit_report(&report, &targets) {
                        tracing::error!("{e}");
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
        // The faults the return was decided on: Slurm's side refuses those
        // nodes too unless forced (`ops::slurm::leave_alone`).
        p.faults = plan.faults.clone();
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
    // The others stay drained. Slurm's reason and its time are left as
    // they are (why the node was drained, and since when); what this
    // return found is in its report, the audit log and the timeline.
    for (node, why) in keep_drained {
        results.push(NodeResult {
            node,
            ok: false,
            message: format!("left drained: {why}"),
            state_before: None,
            state_after: None,
        });
    }
    // In the order the nodes were asked for.
    let order: Vec<&String> = prepared.nodes.iter().map(|n| &n.node).collect();
    results.sort_by_key(|r| order.iter().position(|n| **n == r.node).unwrap_or(usize::MAX));
    audit::report(&plan, Stage::Done, None, results)
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
        let p = prepare(
            &names,
            sched,
            no_gate,
            &[t("a"), t("b"), t("c")],
            &events,
            Suite::Quick,
            false,
        );
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
        let full = prepare(&names[..1], sched, no_gate, &[t("a")], &events, Suite::Full, false);
        assert!(matches!(full.nodes[0].step, Step::Bench { .. }));
        // Forced: someone else's drain is returned like ours.
        let forced = prepare(&names[2..3], sched, no_gate, &[t("c")], &events, Suite::Quick, true);
        assert!(matches!(forced.nodes[0].step, Step::Bench { .. }));
    }

    fn no_gate(_: &str) -> Gate {
        Gate::default()
    }

    #[test]
    fn a_node_with_a_fault_that_keeps_it_out_is_refused_naming_it_unless_forced() {
        let mut snap = Snapshot::default();
        snap.nodes
            .insert("a".into(), drained("fleetop: gpu_missing", "1970-01-01T00:00:10Z"));
        let events = vec![bench_event("a", 20_000, true, "quick")];
        let t = Target {
            name: "a".into(),
            host: "127.0.0.1".into(),
            port: 1,
        };
        let names = vec!["a".to_string()];
        let gate = |_: &str| Gate {
            faults: Some("gpu_missing on node (3 of 4 GPUs answer)".into()),
            expect_gpus: Some(4),
            jobs: Vec::new(),
        };
        let sched = |n: &str| snap.nodes.get(n);
        // A burn-in passed since the drain, and still: the fault is up.
        let p = prepare(
            &names,
            sched,
            gate,
            std::slice::from_ref(&t),
            &events,
            Suite::Quick,
            false,
        );
        assert!(
            matches!(&p.nodes[0].step, Step::Done { ok: false, message } if message.contains("gpu_missing on node (3 of 4") && message.contains("--force")),
            "{:?}",
            p.nodes[0]
        );
        assert!(
            !p.plan.commands.iter().any(|c| c.join(" ").contains("State=RESUME")),
            "the plan shows no command it will not run: {:?}",
            p.plan.commands
        );
        // Forced: it goes on, and its burn-in is held to 4 GPUs.
        let f = prepare(&names, sched, gate, &[t], &events, Suite::Quick, true);
        assert!(matches!(f.nodes[0].step, Step::Resume { .. }), "{:?}", f.nodes[0]);
        assert_eq!(f.nodes[0].expect_gpus, Some(4));
        assert!(f.plan.force && f.plan.faults.contains_key("a"));
    }

    #[test]
    fn a_burn_in_waits_for_the_jobs_still_on_a_draining_node_unless_forced() {
        let mut snap = Snapshot::default();
        let mut n = drained("fleetop: xid 79", "1970-01-01T00:00:10Z");
        n.state = "draining".into();
        snap.nodes.insert("a".into(), n);
        let t = Target {
            name: "a".into(),
            host: "127.0.0.1".into(),
            port: 1,
        };
        let names = vec!["a".to_string()];
        let gate = |_: &str| Gate {
            jobs: vec!["job 4411 (alice, train)".into()],
            ..Gate::default()
        };
        let sched = |n: &str| snap.nodes.get(n);
        let p = prepare(&names, sched, gate, std::slice::from_ref(&t), &[], Suite::Quick, false);
        assert!(
            matches!(&p.nodes[0].step, Step::Done { ok: false, message } if message.contains("job 4411 (alice, train) still running") && message.contains("--force")),
            "{:?}",
            p.nodes[0]
        );
        assert!(
            p.plan.commands.is_empty(),
            "no burn-in shown that will not run: {:?}",
            p.plan.commands
        );
        let f = prepare(&names, sched, gate, &[t], &[], Suite::Quick, true);
        assert!(matches!(f.nodes[0].step, Step::Bench { .. }), "{:?}", f.nodes[0]);
    }

    #[test]
    fn a_burn_in_that_measured_fewer_gpus_than_the_node_should_have_fails_once_for_it() {
        let check = |gpu: u32, verdict: Verdict| crate::model::bench::BenchResult {
            name: "gemm".into(),
            gpu: Some(gpu),
            peer: None,
            value: Some(1.0),
            unit: None,
            expected_min: None,
            expected_source: None,
            verdict,
            reason: None,
        };
        let node = BenchNode {
            name: "a".into(),
            address: "127.0.0.1:1".into(),
            ok: true,
            error: None,
            net_peer: None,
            results: (0..3).map(|g| check(g, Verdict::Pass)).collect(),
        };
        assert_eq!(
            missing_gpus(&node, Some(4)).as_deref(),
            Some("gpu_missing: 3 of 4 GPUs measured")
        );
        assert_eq!(missing_gpus(&node, Some(3)), None);
        assert_eq!(missing_gpus(&node, None), None, "no count known: nothing to hold it to");
        assert_eq!(failing(&node, Some(4)), "gpu_missing: 3 of 4 GPUs measured");
    }
}
