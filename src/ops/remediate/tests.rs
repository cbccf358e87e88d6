use super::lease::parse_lease_list;
use super::*;
use crate::detect::Thresholds;
use crate::model::remediation::Seen;
use crate::model::remediation::lease_holder;
use crate::model::sched::{NodeView, SchedNode};
use crate::model::target::Target;

fn store(n: usize) -> Store {
    let targets = (0..n)
        .map(|i| Target {
            name: format!("n{i:02}"),
            host: "127.0.0.1".into(),
            port: 1,
        })
        .collect();
    let mut st = Store::new(targets, Thresholds::default());
    for node in &mut st.nodes {
        node.scheduler = Some(NodeView {
            node: SchedNode {
                state: "idle".into(),
                ..Default::default()
            },
            jobs: Vec::new(),
        });
    }
    st
}

fn cfg(mode: RemediateMode) -> RemediateConfig {
    RemediateConfig {
        mode,
        grace: std::time::Duration::from_secs(60),
        ..Default::default()
    }
}

#[test]
fn the_limit_is_a_share_of_the_fleet_at_least_one_node() {
    let c = RemediateConfig::default();
    assert_eq!((c.limit(40), c.limit(5), c.limit(1000)), (4, 1, 100));
    let c = RemediateConfig {
        max_nodes: Some(3),
        ..Default::default()
    };
    assert_eq!(c.limit(1000), 3);
}

/// Node `i` reports XID `code` on GPU 0 at `t` (console time).
fn xid(st: &mut Store, i: usize, code: u32, t: i64) {
    use crate::model::sample::{GpuReading, NodeSample, Xid};
    use crate::model::update::{Event, Update};
    let on = |st: &mut Store, event| st.apply(Update::Node { node: i, event }, t);
    on(st, Event::Info(Box::default()));
    on(st, Event::CaughtUp);
    let s = NodeSample {
        seq: 1,
        time_ms: t,
        gpus: vec![GpuReading {
            xids: vec![Xid { xid: code, time_ms: t }],
            ..Default::default()
        }],
        ..Default::default()
    };
    on(st, Event::Sample(Box::new(s)));
}

#[test]
fn crit_node_level_flags_drain_after_grace_up_to_the_breaker_then_it_trips() {
    let mut st = store(20);
    let t0 = 1_000_000;
    for i in 0..6 {
        xid(&mut st, i, 79, t0);
    }
    xid(&mut st, 6, 94, t0); // warn: contained ECC error, not the node's
    xid(&mut st, 7, 79, t0);
    st.nodes[7].scheduler.as_mut().expect("sched").node = SchedNode {
        state: "drained".into(),
        reason: Some("maintenance".into()),
        ..Default::default()
    };
    let mut p = Policy::new(RemediateConfig {
        max_percent: 15.0, // 3 of 20
        ..cfg(RemediateMode::Drain)
    });
    let mut state = State::default();
    assert!(p.decide(&st, &mut state, t0).is_empty(), "the flags are seen up");
    assert!(
        p.decide(&st, &mut state, t0 + 59_000).is_empty(),
        "within the grace period"
    );
    let d = p.decide(&st, &mut state, t0 + 60_000);
    let drained: Vec<&str> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Drain { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(drained, ["n00", "n01", "n02"], "{d:?}");
    let Some(Decision::Trip { node, why }) = d.last() else {
        panic!("the 4th trips the breaker: {d:?}")
    };
    assert_eq!(node, "n03");
    assert!(why.contains("3 node(s) drained by the policy in the last 1h"), "{why}");
    let Decision::Drain { reason, .. } = &d[0] else {
        unreachable!()
    };
    assert!(
        reason.starts_with("fleetop-policy: xid on gpu0: reboot_node"),
        "{reason}"
    );
    for d in &d[..3] {
        if let Decision::Drain { node, kind, reason } = d {
            state.drained(node, *kind, reason, t0 + 60_000);
        }
    }
    state.tripped = Some(Tripped {
        at_ms: t0 + 60_000,
        why: why.clone(),
    });
    // Tripped: nothing more, however long it lasts, until reset.
    assert!(p.decide(&st, &mut state, t0 + 10 * 3_600_000).is_empty());
    // A restart with the same state, reset by a person: the drained
    // nodes are not drained again; the window has passed, so the next
    // ones are.
    state.tripped = None;
    let mut again = Policy::new(p.cfg.clone());
    assert!(
        again.decide(&st, &mut state, t0 + 2 * 3_600_000).is_empty(),
        "a restarted watch gives each flag its grace"
    );
    let d = again.decide(&st, &mut state, t0 + 2 * 3_600_000 + 60_000);
    let nodes: Vec<String> = d
        .iter()
        .map(|d| match d {
            Decision::Drain { node, .. } | Decision::Trip { node, .. } => node.clone(),
        })
        .collect();
    assert_eq!(
        nodes,
        ["n03", "n04", "n05"],
        "never n00-n02 again, never n06 (warn) or n07 (someone else's)"
    );
}

fn set_state(st: &mut Store, i: usize, state: &str, reason: Option<&str>) {
    st.nodes[i].scheduler.as_mut().expect("sched").node = SchedNode {
        state: state.into(),
        reason: reason.map(String::from),
        ..Default::default()
    };
}

fn drains(d: &[Decision]) -> Vec<&str> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Drain { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_node_put_back_with_its_fault_still_up_is_a_new_incident() {
    let mut st = store(20);
    let t0 = 1_000_000;
    xid(&mut st, 0, 79, t0);
    let mut p = Policy::new(cfg(RemediateMode::Drain));
    let mut state = State::default();
    let t = t0 + 60_000;
    assert!(p.decide(&st, &mut state, t0).is_empty());
    assert_eq!(drains(&p.decide(&st, &mut state, t)), ["n00"]);
    state.drained("n00", FlagKind::Xid, "fleetop: xid", t);
    // Slurm has not shown the drain yet: not put back, nothing again.
    assert!(p.decide(&st, &mut state, t + 1_000).is_empty());
    set_state(&mut st, 0, "drained", Some("fleetop: xid"));
    assert!(
        p.decide(&st, &mut state, t + 2_000).is_empty(),
        "one incident, one drain"
    );
    assert!(state.holding["n00"].seen_out);
    // Returned with the XID still held: a new incident, drained again.
    set_state(&mut st, 0, "idle", None);
    assert_eq!(drains(&p.decide(&st, &mut state, t + 3_000)), ["n00"]);
}

#[test]
fn the_window_counts_the_audit_logs_drains_whatever_the_state_file_says() {
    let mut st = store(20); // limit: 10% of 20 = 2
    let t0 = 1_000_000;
    xid(&mut st, 0, 79, t0);
    let mut p = Policy::new(cfg(RemediateMode::Drain));
    p.count_drain("n10", t0);
    p.count_drain("n11", t0 + 1_000);
    // An empty state file (deleted, or `{}`): the audit log's two drains
    // fill the window, and the next node trips the breaker.
    let mut state = State::default();
    assert!(p.decide(&st, &mut state, t0).is_empty());
    let d = p.decide(&st, &mut state, t0 + 60_000);
    assert!(
        matches!(d.as_slice(), [Decision::Trip { node, why }]
            if node == "n00" && why.contains("2 node(s)") && why.contains("10% of the fleet, at least 1")),
        "{d:?}"
    );
    // Past the window they no longer count.
    assert_eq!(drains(&p.decide(&st, &mut state, t0 + 2 * 3_600_000)), ["n00"]);
    // The audit log's lines of a policy drain are what is counted.
    use crate::model::timeline::{Event, What};
    let ev = |policy: Option<&str>, ok: bool| Event {
        time_ms: 5,
        node: "n01".into(),
        what: What::Action {
            action: crate::model::action::NodeAction::Drain,
            ok,
            reason: None,
            message: String::new(),
            policy: policy.map(String::from),
        },
        by: "root".into(),
    };
    let events = [
        ev(Some("remediate"), true),
        ev(None, true),
        ev(Some("remediate"), false),
    ];
    assert_eq!(drains_in(&events), [("n01".to_string(), 5)]);
}

#[test]
fn dry_run_decides_nothing_to_run() {
    let mut st = store(4);
    xid(&mut st, 0, 79, 0);
    let mut p = Policy::new(cfg(RemediateMode::DryRun));
    let mut state = State::default();
    assert!(p.decide(&st, &mut state, 0).is_empty());
    assert!(p.decide(&st, &mut state, 600_000).is_empty());
    assert_eq!(p.would.len(), 1, "it would have drained n00");
    assert_eq!(state, State::default(), "and changed nothing");
}

#[test]
fn grace_counts_from_when_this_watch_first_saw_the_flag_up() {
    // A restarted watch: the flag's since is an hour old (history).
    let mut st = store(20);
    let t0 = 1_000_000;
    xid(&mut st, 0, 79, t0);
    let mut p = Policy::new(RemediateConfig {
        max_percent: 1.0, // 1 node
        ..cfg(RemediateMode::Drain)
    });
    p.count_drain("n10", t0 + 3_000_000); // the window is full: the next one trips
    let mut state = State::default();
    let now = t0 + 3_600_000 - 1;
    assert!(
        p.decide(&st, &mut state, now).is_empty(),
        "first seen now: no drain, no trip in the same millisecond"
    );
    assert!(p.decide(&st, &mut state, now + 59_999).is_empty(), "within its grace");
    let d = p.decide(&st, &mut state, now + 60_000);
    assert!(
        matches!(d.as_slice(), [Decision::Trip { node, .. }] if node == "n00"),
        "{d:?}"
    );
    // A flag that goes down and up again begins its grace again.
    let mut p = Policy::new(cfg(RemediateMode::Drain));
    assert!(p.decide(&st, &mut state, t0).is_empty());
    let mut quiet = store(20);
    xid(&mut quiet, 1, 79, t0); // n00 clean now
    assert!(p.decide(&quiet, &mut state, t0 + 30_000).is_empty());
    assert!(p.decide(&st, &mut state, t0 + 61_000).is_empty(), "seen again at +61 s");
    assert_eq!(drains(&p.decide(&st, &mut state, t0 + 121_000)), ["n00"]);
}

#[test]
fn the_window_counts_the_marks_slurm_shows_with_no_audit_log_or_state() {
    let mut st = store(20); // limit 2
    let t0 = 10_000_000;
    xid(&mut st, 0, 79, t0);
    // Another watch drained two nodes; this one has no audit line of
    // them. One is still drained, one was returned since (seen once).
    set_state(&mut st, 5, "drained", Some("fleetop-policy: xid on gpu0: reboot_node"));
    st.nodes[5].scheduler.as_mut().expect("sched").node.reason_time = Some(rfc3339(t0 - 1_000));
    let mut p = Policy::new(cfg(RemediateMode::Drain));
    p.see_scheduler(marked_in_store(&st, t0));
    p.see_scheduler([("n06".to_string(), t0 - 2_000)]);
    p.see_scheduler(marked_in_store(&st, t0)); // seen again: one drain
    let mut state = State::default();
    assert!(p.decide(&st, &mut state, t0).is_empty());
    let d = p.decide(&st, &mut state, t0 + 60_000);
    assert!(
        matches!(d.as_slice(), [Decision::Trip { why, .. }] if why.contains("2 node(s)")),
        "{d:?}"
    );
    let w = p.window();
    assert_eq!(
        w.iter().map(|d| (d.node.as_str(), d.seen)).collect::<Vec<_>>(),
        [("n06", Seen::Scheduler), ("n05", Seen::Scheduler)]
    );
    // A person's drain through fleetop is not the policy's.
    set_state(&mut st, 5, "drained", Some("fleetop: fleetop-policy: x"));
    assert!(marked_in_store(&st, t0).is_empty());
}

#[test]
fn the_policys_drain_carries_the_mark_to_slurm_as_one_argument() {
    let reason = crate::model::remediation::policy_reason("xid on gpu0: reboot_node (XID 79)");
    let plan = drain_plan("gpu07", &reason).expect("plan");
    assert_eq!(plan.policy.as_deref(), Some("remediate"));
    assert_eq!(
        plan.commands,
        [vec![
            "scontrol".to_string(),
            "update".into(),
            "NodeName=gpu07".into(),
            "State=DRAIN".into(),
            "Reason=fleetop-policy: xid on gpu0: reboot_node (XID 79)".into()
        ]]
    );
    assert!(drain_plan("gpu07", "fleetop-policy: \u{1b}[2J").is_err());
}

#[test]
fn leases_listed_by_squeue_are_read_with_slurms_user() {
    let out = "57\u{1f}alice\u{1f}holder=mallory@h1 pid=42 until=2026-01-01T00:01:00Z\u{1e}\n\
                   12\u{1f}bob\u{1f}holder=bob@h2 pid=7 until=2026-01-01T00:00:30Z\u{1e}\n\
                   9\u{1f}eve\u{1f}just a job\u{1e}\n";
    let l = parse_lease_list(out);
    assert_eq!(
        l.iter().map(|l| l.id).collect::<Vec<_>>(),
        [12, 57],
        "sorted, not a lease left out"
    );
    assert_eq!(
        l[1].holder.words(),
        "alice@h1 pid 42",
        "the job's owner, not what its comment says"
    );
    let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("t").timestamp_millis();
    let now = t("2026-01-01T00:00:00Z");
    assert_eq!(
        lease_holder(&l, now, |_| false).map(|l| l.id),
        Some(12),
        "the lowest live id"
    );
    assert_eq!(
        lease_holder(&l, now + 40_000, |_| false).map(|l| l.id),
        Some(57),
        "12 ran out"
    );
    assert_eq!(
        lease_holder(&l, now, |l| l.id == 12).map(|l| l.id),
        Some(57),
        "12's process is gone"
    );
    assert_eq!(lease_holder(&l, now + 60_000, |_| false), None, "free");
}

#[test]
fn on_kubernetes_each_nodes_hold_is_read_from_kubernetes_and_named_so() {
    use crate::model::kube::{Annotation, KubeNode, KubeSnapshot};
    let mut st = store(4);
    let t0 = 1_000_000;
    for i in 0..4 {
        xid(&mut st, i, 79, t0);
    }
    // Slurm says n00 is drained by someone: the Kubernetes policy does not
    // read Slurm. Kubernetes: n00 schedulable, n01 cordoned by someone
    // else, n02 cordoned by fleetop, n03 not listed.
    st.nodes[0].scheduler.as_mut().expect("sched").node = SchedNode {
        state: "drained".into(),
        reason: Some("maintenance".into()),
        ..Default::default()
    };
    let k = |name: &str, cordoned: bool, reason: Option<&str>| KubeNode {
        name: name.into(),
        unschedulable: cordoned,
        fleetop: reason.map(|r| Annotation {
            reason: r.into(),
            by: None,
            at: None,
        }),
        ..Default::default()
    };
    let snap = KubeSnapshot {
        nodes: vec![
            k("n00", false, None),
            k("n01", true, None),
            k("n02", true, Some("fleetop: fan")),
        ],
    };
    let nodes = st.nodes.clone();
    st.kube.apply(&nodes, &snap, t0);
    let mut p = Policy::on(
        RemediateConfig {
            max_percent: 100.0,
            ..cfg(RemediateMode::Drain)
        },
        Scheduler::Kubernetes,
    );
    let mut state = State::default();
    assert!(p.decide(&st, &mut state, t0).is_empty());
    let d = p.decide(&st, &mut state, t0 + 60_000);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(matches!(&d[0], Decision::Drain { node, .. } if node == "n00"), "{d:?}");
    assert!(p.said.iter().any(|s| s == "nosched n03"), "{:?}", p.said);
    assert!(p.said.iter().any(|s| s.starts_with("other n01")), "{:?}", p.said);
    assert!(p.said.iter().any(|s| s.starts_with("fleetop n02")), "{:?}", p.said);
    assert_eq!((p.verb(), p.did()), ("quarantine", "quarantined"));
    // The same fleet on Slurm: n00 is someone else's drain there.
    let mut p = Policy::new(cfg(RemediateMode::Drain));
    let mut state = State::default();
    p.decide(&st, &mut state, t0);
    let d = p.decide(&st, &mut state, t0 + 60_000);
    assert!(
        d.iter()
            .all(|d| !matches!(d, Decision::Drain { node, .. } if node == "n00")),
        "{d:?}"
    );
}
