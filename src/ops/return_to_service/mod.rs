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
//! local error: no burn-in is recorded. On Kubernetes (`Back::Kube`) the
//! same gates hold, its GPU pods standing for Slurm's jobs, and a node that
//! passes is uncordoned and left with nothing of fleetop's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::ingest::agent::Access;
use crate::ingest::kube::Kube;
use crate::ingest::slurm::Slurm;
use crate::model::action::{self, ActionReport, NodeAction, NodeResult, Plan, Scheduler, Stage};
use crate::model::bench::{BenchNode, BenchResult, BenchUpdate, BurnIn, Suite, Verdict};
use crate::model::kube as km;
use crate::model::sched::{Held, Hold};
use crate::model::target::Target;
use crate::model::time::rfc3339;
use crate::ops::{audit, bench, slurm, timeline};

pub use crate::model::returning::{Gate, NodePlan, Overrides, Prepared, Step};

/// The plan of a return: a burn-in on the nodes that need one, then a
/// resume of every node that may pass; what it overrides, per node.
fn plan_of(nodes: &[NodePlan], on: Scheduler, suite: Suite, force: bool, faults: &BTreeMap<String, String>) -> Plan {
    let benched = crate::model::returning::bench_targets(nodes);
    let mut commands = Vec::new();
    if !benched.is_empty() {
        commands.extend(bench::plan(suite.name(), &benched).commands);
    }
    let reason = format!("return to service after a passing burn-in ({})", suite.name());
    for n in nodes {
        if matches!(n.step, Step::Done { .. }) {
            continue;
        }
        match on {
            // Who and when are filled in as the release is sent.
            Scheduler::Kubernetes => {
                commands.extend(km::release_calls(&n.node, &reason, km::UNSTAMPED_BY, km::UNSTAMPED_AT))
            }
            _ => commands.push(action::command(NodeAction::Resume, &n.node, None)),
        }
    }
    let mut p = Plan::new(
        NodeAction::Return,
        nodes.iter().map(|n| n.node.clone()).collect(),
        Some(reason),
        commands,
    );
    p.scheduler = on;
    p.force = force;
    p.faults = faults.clone();
    p.overrides = nodes
        .iter()
        .filter(|n| !n.overrides.is_empty() && !matches!(n.step, Step::Done { .. }))
        .map(|n| (n.node.clone(), n.overrides.clone()))
        .collect();
    p
}

/// The burn-in a return may count for a node: one its own agent recorded
/// (the gate's journal), that passed the suite asked for (or the full one,
/// which holds the quick one's checks), ended after the drain began, and ran
/// on this node as its agent knows it now (host, machine, GPUs). In words,
/// the newest such pass; else why there is none.
fn passed_since(gate: &Gate, since_ms: i64, suite: Suite) -> Result<String, String> {
    let Some(now) = &gate.identity else {
        return Err("its agent could not be read, so no burn-in can be matched to it".into());
    };
    let passes: Vec<&BurnIn> = gate
        .burn_ins
        .iter()
        .filter(|b| b.passed && b.covers(suite) && b.ended_ms >= since_ms)
        .collect();
    let Some(newest) = passes.last() else {
        return Err("no passing burn-in on its own agent since the drain".into());
    };
    match passes.iter().rev().find(|b| now.differs(&b.node).is_none()) {
        Some(b) => Ok(format!(
            "burn-in {} passed at {} on its own agent (host {}{}, asked by {})",
            b.suite.map_or("?", Suite::name),
            rfc3339(b.ended_ms),
            b.node.hostname,
            b.node
                .machine_id
                .as_deref()
                .map(|m| format!(", machine {}", m.get(..12).unwrap_or(m)))
                .unwrap_or_default(),
            b.requested_by
        )),
        None => Err(format!(
            "the pass its agent holds since the drain is not this node's: {}",
            now.differs(&newest.node).unwrap_or_default()
        )),
    }
}

/// Decides, per node, from the scheduler's view (`sched`: a node by name,
/// as `on` holds it: Slurm's or Kubernetes') and what its agent says of it (`gate`: its active faults, its GPU count, its
/// burn-in journal and identity): `targets` are the agents of the nodes (by
/// name). `how` says which refusals the person lifted; each one lifted is
/// named in the plan.
pub fn prepare<'a, S: Held + 'a>(
    names: &[String],
    on: Scheduler,
    sched: impl Fn(&str) -> Option<&'a S>,
    gate: impl Fn(&str) -> Gate,
    targets: &[Target],
    suite: Suite,
    how: Overrides,
) -> Prepared {
    let mut faults = BTreeMap::new();
    let nodes = names
        .iter()
        .map(|name| {
            let done = |ok: bool, message: String| Step::Done { ok, message };
            let g = gate(name);
            let mut overrides = Vec::new();
            let node_plan = |step: Step, reason: Option<String>, overrides: Vec<String>| NodePlan {
                node: name.clone(),
                reason,
                step,
                expect_gpus: g.expect_gpus,
                overrides,
            };
            let Some(s) = sched(name) else {
                let why = format!("{} does not list this node", on.title());
                return node_plan(done(false, why), None, overrides);
            };
            if let Some(f) = &g.faults {
                faults.insert(name.clone(), f.clone());
            }
            let reason = s.reason().map(str::to_string);
            if s.hold() == Hold::InService {
                let step = done(true, format!("already in service ({})", s.state()));
                return node_plan(step, reason, overrides);
            }
            if let Some(f) = &g.faults {
                if !how.force {
                    let why = format!("{f} still active: not returned while it is (--force to return it anyway)");
                    return node_plan(done(false, why), reason, overrides);
                }
                overrides.push(format!("{f} still active"));
            }
            if s.hold() == Hold::Other {
                if !how.force {
                    let why = format!("{}: not drained by fleetop (--force to return it anyway)", s.held_by());
                    return node_plan(done(false, why), reason, overrides);
                }
                overrides.push(format!("{}, not by fleetop", s.held_by()));
            }
            // Without a known start, no earlier burn-in can be shown to be
            // after it: one runs now.
            let since = s.since().and_then(timeline::parse_time);
            let drained = match s.since() {
                Some(t) => format!("{} since {t}", s.state()),
                None => "the drain's start is unknown".into(),
            };
            let passed = match since {
                Some(t) => passed_since(&g, t, suite),
                None => Err("no burn-in can be shown to be after the drain".into()),
            };
            let step = match (passed, targets.iter().find(|t| &t.name == name)) {
                (Ok(passed), _) => Step::Resume {
                    passed: format!("{passed} ({drained})"),
                },
                (Err(none), Some(target)) => {
                    // A draining node's jobs still run: a burn-in would take
                    // their GPUs. Only their own word runs it beside them.
                    if !g.jobs.is_empty() {
                        let jobs = g.jobs.join(", ");
                        if !how.beside_jobs {
                            let why = format!(
                                "{jobs} still running: the burn-in waits for them (--beside-jobs to run it beside them)"
                            );
                            return node_plan(done(false, why), reason, overrides);
                        }
                        overrides.push(format!("{jobs} still running: the burn-in takes their GPUs"));
                    }
                    Step::Bench {
                        target: target.clone(),
                        since: format!("{none} ({drained})"),
                    }
                }
                (Err(none), None) => done(false, format!("{none}, and no agent known for this node to run one")),
            };
            node_plan(step, reason, overrides)
        })
        .collect::<Vec<_>>();
    let plan = plan_of(&nodes, on, suite, how.force, &faults);
    Prepared {
        suite,
        force: how.force,
        beside_jobs: how.beside_jobs,
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

/// A node's burn-in verdict as a return judges it: `Err(why)` where a
/// check failed, the suite did not finish, or a GPU is missing.
pub fn verdict(n: &BenchNode, expect: Option<u32>) -> Result<(), String> {
    if n.ok && missing_gpus(n, expect).is_none() {
        return Ok(());
    }
    Err(failing(n, expect))
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
    crate::model::bench::failed_checks(&n.results)
        .or_else(|| n.record.as_ref().filter(|r| !r.passed).map(|r| r.failure()))
        .unwrap_or_else(|| "incomplete: no GPU check ran".into())
}

/// Where a return puts its nodes back in service.
#[derive(Clone, Copy)]
pub enum Back<'a> {
    /// `scontrol update State=RESUME`, as `node resume` does.
    Slurm(&'a Slurm),
    /// The uncordon and the removal of what fleetop put on the node, with
    /// an Event (`ops::kube`).
    Kube(&'a Kube),
}

/// Runs a confirmed return. The plan was logged as started by the caller;
/// this logs the burn-in and returns the return's report (for the caller to
/// log and show). `seen` is told the burn-in's progress.
pub async fn run(
    prepared: &Prepared,
    back: Back<'_>,
    token: Option<&str>,
    access: &Access,
    timeout: Duration,
    told: &(dyn Fn(usize, &BenchUpdate) + Sync),
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
    let mut targets = prepared.bench_targets();
    // Where each target is among the prepared ones: `seen` is told by that.
    let mut at: Vec<usize> = (0..targets.len()).collect();
    // Kubernetes: the GPU pods on each node, asked as the burn-in is about
    // to start (the console decided without reading them).
    if let Back::Kube(kube) = back
        && !prepared.beside_jobs
    {
        let mut free = Vec::new();
        at.clear();
        for (i, t) in targets.into_iter().enumerate() {
            match kube.gpu_pods_on(&t.name).await {
                Ok(pods) if pods.is_empty() => {
                    free.push(t);
                    at.push(i);
                }
                Ok(pods) => keep_drained.push((
                    t.name.clone(),
                    format!(
                        "{} still running: the burn-in waits for them (--beside-jobs to run it beside them)",
                        pods.join(", ")
                    ),
                )),
                Err(e) => keep_drained.push((t.name.clone(), format!("burn-in not run: its pods cannot be read: {e}"))),
            }
        }
        targets = free;
    }
    let seen = |i: usize, u: &BenchUpdate| told(at[i], u);
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
                        Some(bench::run_suites(&targets, suite, token, access, timeout, &seen).await)
                    }
                    Err(e) => {
                        for t in &targets {
                            keep_drained.push((t.name.clone(), format!("burn-in not run: {e}")));
                        }
                        None
                    }
                };
                if let Some(mut report) = report {
                    for (i, (n, t)) in report.nodes.iter_mut().zip(&targets).enumerate() {
                        // The node as the return names it (a node reached by
                        // address is named in the report by its agent's host).
                        let node = t.name.clone();
                        // Refused before it started: nothing was measured,
                        // so nothing is said of the hardware.
                        if n.refused {
                            seen(i, &bench::finished(n));
                            let why = n.error.clone().unwrap_or_else(|| "refused".into());
                            keep_drained.push((node, format!("burn-in not run: {why}")));
                            continue;
                        }
                        let expect = prepared
                            .nodes
                            .iter()
                            .find(|p| p.node == node)
                            .and_then(|p| p.expect_gpus);
                        // A GPU short is a failed check of the burn-in, in
                        // its report, the audit log and the bench screen.
                        if let Some(r) = gpu_count_check(n, expect) {
                            seen(i, &BenchUpdate::Result(r.clone()));
                            n.results.push(r);
                            n.ok = false;
                        }
                        // The verdict the node's agent recorded is the one
                        // every console will see: it must agree.
                        if n.record.as_ref().is_some_and(|r| !r.passed) {
                            n.ok = false;
                        }
                        seen(i, &bench::finished(n));
                        if n.ok {
                            resume.push(node);
                        } else {
                            let why = format!("burn-in {} failed: {}", prepared.suite.name(), failing(n, expect));
                            keep_drained.push((node, why));
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
        p.overrides = plan.overrides.clone();
        let done = match back {
            Back::Slurm(slurm) => {
                let (s, p2) = (slurm.clone(), p.clone());
                tokio::task::spawn_blocking(move || slurm::execute(&s, &p2)).await
            }
            Back::Kube(kube) => {
                p.scheduler = Scheduler::Kubernetes;
                crate::ops::kube::stamp(&mut p);
                Ok(crate::ops::kube::execute(kube, &p).await)
            }
        };
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
            message: format!(
                "left {}: {why}",
                if matches!(back, Back::Kube(_)) {
                    "cordoned"
                } else {
                    "drained"
                }
            ),
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
mod tests;
