use super::*;
use crate::model::bench::Identity;
use crate::model::sched::{SchedNode, Snapshot};

const MACHINE: &str = "0123456789abcdef0123456789abcdef";

fn node_now(host: &str) -> Identity {
    Identity {
        hostname: host.into(),
        machine_id: Some(MACHINE.into()),
        boot_id: Some("boot-2".into()),
        gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()],
    }
}

fn burn_in(host: &str, ended_ms: i64, passed: bool, suite: Suite) -> BurnIn {
    BurnIn {
        started_ms: ended_ms - 1000,
        ended_ms,
        suite: Some(suite),
        passed,
        requested_by: "alice@console1".into(),
        node: Identity {
            boot_id: Some("boot-1".into()),
            ..node_now(host)
        },
        checks: Vec::new(),
        error: None,
    }
}

/// What the agent of node `n` says: its identity now and its journal.
fn agent_says(n: &str, journal: Vec<BurnIn>) -> Gate {
    Gate {
        burn_ins: journal,
        identity: Some(node_now(n)),
        ..Gate::default()
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

fn t(n: &str) -> Target {
    Target {
        name: n.into(),
        host: "127.0.0.1".into(),
        port: 1,
    }
}

const FORCE: Overrides = Overrides {
    force: true,
    beside_jobs: false,
};

#[test]
fn only_a_pass_its_own_agent_recorded_after_the_drain_counts_and_others_drains_need_force() {
    let mut snap = Snapshot::default();
    for n in ["a", "b"] {
        snap.nodes
            .insert(n.into(), drained("fleetop: xid 79", "1970-01-01T00:00:10Z"));
    }
    snap.nodes
        .insert("c".into(), drained("maintenance", "1970-01-01T00:00:10Z"));
    snap.nodes.insert(
        "d".into(),
        SchedNode {
            state: "idle".into(),
            ..Default::default()
        },
    );
    let gate = |n: &str| match n {
        // a: passed after the drain; b: passed before it, failed after.
        "a" => agent_says("a", vec![burn_in("a", 20_000, true, Suite::Quick)]),
        "b" => agent_says(
            "b",
            vec![
                burn_in("b", 5_000, true, Suite::Quick),
                burn_in("b", 15_000, false, Suite::Quick),
            ],
        ),
        n => agent_says(n, Vec::new()),
    };
    let names: Vec<String> = ["a", "b", "c", "d", "e"].iter().map(|s| s.to_string()).collect();
    let sched = |n: &str| snap.nodes.get(n);
    let p = prepare(
        &names,
        Scheduler::Slurm,
        sched,
        gate,
        &[t("a"), t("b"), t("c")],
        Suite::Quick,
        Overrides::default(),
    );
    let steps: Vec<&Step> = p.nodes.iter().map(|n| &n.step).collect();
    assert!(
        matches!(steps[0], Step::Resume { passed } if passed.contains("on its own agent") && passed.contains("alice@console1")),
        "{steps:?}"
    );
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
    assert!(plan.overrides.is_empty(), "nothing forced: {:?}", plan.overrides);
    // A full suite is asked for: the quick one that passed does not do.
    let full = prepare(
        &names[..1],
        Scheduler::Slurm,
        sched,
        gate,
        &[t("a")],
        Suite::Full,
        Overrides::default(),
    );
    assert!(matches!(full.nodes[0].step, Step::Bench { .. }));
    // Forced: someone else's drain is returned like ours, and the plan
    // says what it overrode.
    let forced = prepare(
        &names[2..3],
        Scheduler::Slurm,
        sched,
        gate,
        &[t("c")],
        Suite::Quick,
        FORCE,
    );
    assert!(matches!(forced.nodes[0].step, Step::Bench { .. }));
    assert_eq!(
        forced.plan.overrides["c"],
        vec!["drained by root at 1970-01-01T00:00:10Z: maintenance, not by fleetop".to_string()]
    );
    assert!(
        forced.describe()[0].contains("FORCED past: drained by root at 1970-01-01T00:00:10Z: maintenance"),
        "{:?}",
        forced.describe()
    );
}

#[test]
fn a_pass_of_another_machine_of_the_same_name_or_of_other_gpus_never_returns_a_node() {
    let mut snap = Snapshot::default();
    snap.nodes
        .insert("gpu26".into(), drained("fleetop: xid 79", "1970-01-01T00:00:10Z"));
    let sched = |n: &str| snap.nodes.get(n);
    let names = vec!["gpu26".to_string()];
    // The demo's gpu26 passed: a simulated machine of the same name.
    let mut demo = burn_in("gpu26", 20_000, true, Suite::Quick);
    demo.node.machine_id = Some("sim-gpu26".into());
    let p = prepare(
        &names,
        Scheduler::Slurm,
        sched,
        |_| agent_says("gpu26", vec![demo.clone()]),
        &[t("gpu26")],
        Suite::Quick,
        Overrides::default(),
    );
    assert!(
        matches!(&p.nodes[0].step, Step::Bench { since, .. } if since.contains("not this node's") && since.contains("sim-gpu26")),
        "{:?}",
        p.nodes[0]
    );
    // A GPU swapped since the pass: the pass says nothing of the new one.
    let mut swapped = burn_in("gpu26", 20_000, true, Suite::Quick);
    swapped.node.gpu_uuids = vec!["GPU-a".into(), "GPU-old".into()];
    let p = prepare(
        &names,
        Scheduler::Slurm,
        sched,
        |_| agent_says("gpu26", vec![swapped.clone()]),
        &[t("gpu26")],
        Suite::Quick,
        Overrides::default(),
    );
    assert!(
        matches!(&p.nodes[0].step, Step::Bench { since, .. } if since.contains("GPU-b")),
        "{:?}",
        p.nodes[0]
    );
    // An agent that could not be read: nothing can be matched.
    let unread = Gate {
        burn_ins: vec![burn_in("gpu26", 20_000, true, Suite::Quick)],
        ..Gate::default()
    };
    let p = prepare(
        &names,
        Scheduler::Slurm,
        sched,
        |_| unread.clone(),
        &[t("gpu26")],
        Suite::Quick,
        Overrides::default(),
    );
    assert!(
        matches!(&p.nodes[0].step, Step::Bench { since, .. } if since.contains("could not be read")),
        "{:?}",
        p.nodes[0]
    );
}

#[test]
fn a_node_with_a_fault_that_keeps_it_out_is_refused_naming_it_unless_forced_and_force_names_it() {
    let mut snap = Snapshot::default();
    snap.nodes
        .insert("a".into(), drained("fleetop: gpu_missing", "1970-01-01T00:00:10Z"));
    let names = vec!["a".to_string()];
    let gate = |_: &str| Gate {
        faults: Some("gpu_missing on node (3 of 4 GPUs answer)".into()),
        expect_gpus: Some(4),
        ..agent_says("a", vec![burn_in("a", 20_000, true, Suite::Quick)])
    };
    let sched = |n: &str| snap.nodes.get(n);
    // A burn-in passed since the drain, and still: the fault is up.
    let p = prepare(
        &names,
        Scheduler::Slurm,
        sched,
        gate,
        &[t("a")],
        Suite::Quick,
        Overrides::default(),
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
    // Forced: it goes on, its burn-in held to 4 GPUs, and the plan names
    // the fault it lifts.
    let f = prepare(&names, Scheduler::Slurm, sched, gate, &[t("a")], Suite::Quick, FORCE);
    assert!(matches!(f.nodes[0].step, Step::Resume { .. }), "{:?}", f.nodes[0]);
    assert_eq!(f.nodes[0].expect_gpus, Some(4));
    assert!(f.plan.force && f.plan.faults.contains_key("a"));
    assert_eq!(
        f.plan.overrides["a"],
        vec!["gpu_missing on node (3 of 4 GPUs answer) still active".to_string()]
    );
}

#[test]
fn a_burn_in_waits_for_the_jobs_on_a_draining_node_and_force_alone_does_not_run_it_beside_them() {
    let mut snap = Snapshot::default();
    let mut n = drained("fleetop: xid 79", "1970-01-01T00:00:10Z");
    n.state = "draining".into();
    snap.nodes.insert("a".into(), n);
    let names = vec!["a".to_string()];
    let gate = |_: &str| Gate {
        jobs: vec!["job 4411 (alice, train)".into()],
        ..agent_says("a", Vec::new())
    };
    let sched = |n: &str| snap.nodes.get(n);
    for how in [Overrides::default(), FORCE] {
        let p = prepare(&names, Scheduler::Slurm, sched, gate, &[t("a")], Suite::Quick, how);
        assert!(
            matches!(&p.nodes[0].step, Step::Done { ok: false, message } if message.contains("job 4411 (alice, train) still running") && message.contains("--beside-jobs")),
            "{how:?}: {:?}",
            p.nodes[0]
        );
        assert!(
            p.plan.commands.is_empty(),
            "no burn-in shown that will not run: {:?}",
            p.plan.commands
        );
    }
    let beside = Overrides {
        force: false,
        beside_jobs: true,
    };
    let f = prepare(&names, Scheduler::Slurm, sched, gate, &[t("a")], Suite::Quick, beside);
    assert!(matches!(f.nodes[0].step, Step::Bench { .. }), "{:?}", f.nodes[0]);
    assert_eq!(
        f.plan.overrides["a"],
        vec!["job 4411 (alice, train) still running: the burn-in takes their GPUs".to_string()]
    );
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
        refused: false,
        record: None,
    };
    assert_eq!(
        missing_gpus(&node, Some(4)).as_deref(),
        Some("gpu_missing: 3 of 4 GPUs measured")
    );
    assert_eq!(missing_gpus(&node, Some(3)), None);
    assert_eq!(missing_gpus(&node, None), None, "no count known: nothing to hold it to");
    assert_eq!(failing(&node, Some(4)), "gpu_missing: 3 of 4 GPUs measured");
}
