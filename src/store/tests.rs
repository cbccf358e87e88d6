use super::*;
use crate::model::flag::{FlagKind, Severity};
use crate::model::sample::{GpuReading, NodeDesc, NodeSample};

fn target() -> Target {
    Target {
        name: "n1".into(),
        host: "127.0.0.1".into(),
        port: 1,
    }
}

fn on(st: &mut Store, event: Event, now_ms: i64) {
    on_node(st, 0, event, now_ms);
}

fn on_node(st: &mut Store, node: usize, event: Event, now_ms: i64) {
    st.apply(Update::Node { node, event }, now_ms);
}

fn feed(st: &mut Store, s: NodeSample) {
    on(st, Event::Sample(Box::new(s)), 0);
}

/// A store of `n` nodes (`n0`, `n1`, ...), each described (1 s
/// interval) and caught up at `t0`: what it takes in now is live.
fn live_store(n: usize, t0: i64) -> Store {
    let targets = (0..n).map(|i| Target {
        name: format!("n{i}"),
        ..target()
    });
    let mut st = Store::new(targets.collect(), Thresholds::default());
    for node in 0..n {
        let desc = NodeDesc {
            interval_ms: 1_000,
            ..Default::default()
        };
        on_node(&mut st, node, Event::Info(Box::new(desc)), t0);
        on_node(&mut st, node, Event::CaughtUp, t0);
    }
    st
}

/// Node `node`'s sample taken at `time_ms`, taken in at `now_ms`.
fn sample_at(st: &mut Store, node: usize, time_ms: i64, now_ms: i64) {
    let s = NodeSample {
        time_ms,
        ..Default::default()
    };
    on_node(st, node, Event::Sample(Box::new(s)), now_ms);
}

/// A starved console reads each stream's backlog in a burst when it
/// gets to it: each node's newest sample is fresh, the rest seconds old.
/// It is behind, and says by how much most samples waited; a few slow
/// agents among prompt ones do not make it behind.
#[test]
fn a_console_reading_backlogs_in_bursts_is_behind() {
    let t0 = 1_700_000_000_000;
    let mut st = live_store(10, t0);
    let burst = |st: &mut Store, now: i64, ages: &[i64]| {
        for node in 0..10 {
            for age in ages {
                sample_at(st, node, now - age, now);
            }
        }
    };
    let now = t0 + 5_000;
    burst(&mut st, now, &[6_000, 5_000, 4_000, 3_000, 2_000, 1_000, 100]);
    st.tick(now + 1_000);
    assert_eq!(st.lag.behind_ms, 3_000);
    // Then prompt again, but for two slow agents.
    let now = now + 1_500;
    burst(&mut st, now, &[100]);
    for node in 0..2 {
        sample_at(&mut st, node, now - 9_000, now);
    }
    st.tick(now + 600);
    assert_eq!(st.lag.behind_ms, 0);
}

/// A console starved outright takes nothing in: no sample has an age
/// to count, and only its runtime's probe knows it is behind.
#[test]
fn a_console_its_runtime_gets_to_late_says_so_and_calls_no_node_silent_for_it() {
    let th = Thresholds::default();
    let t0 = 1_700_000_000_000;
    let starved = |late: Option<std::time::Duration>| {
        let mut st = live_store(2, t0);
        sample_at(&mut st, 0, t0 - 200, t0);
        sample_at(&mut st, 1, t0 - 200, t0);
        st.tick(t0 + 1_000);
        assert_eq!(st.lag.behind_ms, 0);
        if let Some(late) = late {
            let ran = tokio::time::Instant::now();
            st.pace.beat(ran - late, ran);
        }
        // Then nothing taken in for four and a half seconds.
        for ms in [t0 + 3_000, t0 + 4_000, t0 + 4_500] {
            st.tick(ms);
        }
        st
    };
    let st = starved(Some(std::time::Duration::from_secs(4)));
    assert!((4_000..4_100).contains(&st.lag.behind_ms), "{}", st.lag.behind_ms);
    for n in &st.nodes {
        // However long: it cannot tell a silent node from one it did
        // not get to.
        assert_eq!(n.status(t0 + 600_000, &th), NodeStatus::Ok);
        assert_eq!(n.detector.active().count(), 0, "no flag");
    }
    // The same silence on a console on time is the nodes'.
    let st = starved(None);
    assert_eq!(st.lag.behind_ms, 0);
    for n in &st.nodes {
        assert_eq!(n.status(t0 + 4_500, &th), NodeStatus::Stale);
        assert!(n.detector.active().any(|f| f.kind == FlagKind::Stale));
    }
}

/// Held judgement neither raises nor clears for the console's lag: a
/// node flagged before stays flagged; one that answers is cleared.
#[test]
fn while_judging_is_held_a_flag_stays_until_its_node_answers() {
    let t0 = 1_700_000_000_000;
    let mut st = live_store(2, t0);
    let stale = |st: &Store, node: usize| st.nodes[node].detector.active().any(|f| f.kind == FlagKind::Stale);
    sample_at(&mut st, 0, t0, t0);
    sample_at(&mut st, 1, t0, t0);
    for s in 1..=10 {
        st.tick(t0 + s * 1_000);
    }
    assert!(
        stale(&st, 0) && stale(&st, 1),
        "both silent for 10 s on a console on time"
    );
    let ran = tokio::time::Instant::now();
    st.pace.beat(ran - std::time::Duration::from_secs(4), ran);
    sample_at(&mut st, 1, t0 + 11_000, t0 + 11_000);
    for s in 11..=13 {
        st.tick(t0 + s * 1_000);
    }
    assert!(st.lag.judging_held());
    assert!(stale(&st, 0), "still silent: the flag stays");
    assert!(!stale(&st, 1), "it answered");
}

#[test]
fn a_console_behind_says_so_and_calls_no_node_silent_for_it() {
    let th = Thresholds::default();
    let t0 = 1_700_000_000_000;
    let mut st = live_store(2, t0);
    // Samples taken in as they come: no lag.
    sample_at(&mut st, 0, t0 - 200, t0);
    sample_at(&mut st, 1, t0 - 200, t0);
    st.tick(t0 + 1_000);
    assert_eq!(st.lag.behind_ms, 0);
    // Then what is taken in is 8 s old (it waited in the queue): node
    // 0's next samples have not come out of it yet, node 1's keep coming.
    let now = t0 + 10_000;
    sample_at(&mut st, 0, now - 8_000, now);
    for s in 0..=12 {
        let ms = now + s * 1_000;
        sample_at(&mut st, 1, ms - 8_000, ms);
        st.tick(ms);
        if s == 5 {
            assert_eq!(st.lag.behind_ms, 8_000);
            // Node 0 is not stale for the console's own lag...
            assert_eq!(st.nodes[0].status(ms, &th), NodeStatus::Ok);
        }
    }
    // ...but it is once its silence outlasts the lag too.
    assert_eq!(st.nodes[0].status(now + 12_000, &th), NodeStatus::Stale);
    // Caught up again: after a whole second of fresh samples, the lag goes.
    sample_at(&mut st, 1, now + 13_000, now + 13_100);
    st.tick(now + 13_100);
    sample_at(&mut st, 1, now + 14_000, now + 14_100);
    st.tick(now + 14_100);
    assert_eq!(st.lag.behind_ms, 0);
    assert_eq!(st.nodes[0].console_lag_ms, 0);
}

#[test]
fn nodes_given_by_address_take_their_agents_host_name_and_the_port_where_taken() {
    let t = |name: &str, host: &str, port: u16| Target {
        name: name.into(),
        host: host.into(),
        port,
    };
    let mut st = Store::new(
        vec![
            t("127.0.0.1:7001", "127.0.0.1", 7001),
            t("127.0.0.1:7002", "127.0.0.1", 7002),
            t("gpu01", "10.0.0.9", 50051),
        ],
        Thresholds::default(),
    );
    let info = |h: &str| {
        Event::Info(Box::new(NodeDesc {
            hostname: h.into(),
            ..Default::default()
        }))
    };
    for node in 0..3 {
        on_node(&mut st, node, info("n1"), 0);
    }
    let names: Vec<&str> = st.nodes.iter().map(|n| n.target.name.as_str()).collect();
    assert_eq!(names, ["n1", "n1:7002", "gpu01"], "a node given by name keeps it");
    // A reconnect describing the same host changes nothing.
    on_node(&mut st, 1, info("n1"), 1);
    assert_eq!(st.nodes[1].target.name, "n1:7002");
}

#[test]
fn nvlink_rates_hold_between_counter_carrying_samples() {
    let mut st = Store::new(vec![target()], Thresholds::default());
    on(&mut st, Event::Info(Box::default()), 0);
    let with = |t: i64, kib: u64| NodeSample {
        seq: t as u64,
        time_ms: t,
        gpus: vec![GpuReading {
            nvlink_tx_kib: vec![kib, 9],
            nvlink_rx_kib: vec![kib, 9],
            ..Default::default()
        }],
        ..Default::default()
    };
    let without = |t: i64| NodeSample {
        seq: t as u64,
        time_ms: t,
        gpus: vec![GpuReading::default()],
        ..Default::default()
    };
    feed(&mut st, with(0, 1000));
    feed(&mut st, without(1000));
    assert_eq!(st.nodes[0].derived.gpus[0].tx(0), None, "no rate from one reading");
    feed(&mut st, with(2000, 3048));
    let r = &st.nodes[0].derived.gpus[0];
    assert_eq!((r.tx(0), r.tx(1), r.tx(2)), (Some(1024.0 * 1024.0), Some(0.0), None));
    feed(&mut st, without(3000));
    assert_eq!(st.nodes[0].derived.gpus[0].tx(0), Some(1024.0 * 1024.0), "held");
    // A counter that went back (a reset): that link's rate is unknown, not a number.
    feed(&mut st, with(4000, 5));
    let r = &st.nodes[0].derived.gpus[0];
    assert_eq!((r.tx(0), r.rx(1)), (None, Some(0.0)));
}

#[test]
fn a_burn_in_that_passed_after_an_xid_ends_its_hold_wherever_it_ran() {
    use crate::model::sample::Xid;
    let th = Thresholds::default();
    let sample = |t: i64, xids: Vec<Xid>| NodeSample {
        seq: t as u64,
        time_ms: t,
        gpus: vec![GpuReading {
            xids,
            ..Default::default()
        }],
        ..Default::default()
    };
    let xid_flag = |st: &Store| st.nodes[0].detector.active().any(|f| f.kind == FlagKind::Xid);
    let mut st = Store::new(vec![target()], th.clone());
    on(&mut st, Event::Info(Box::default()), 1_000);
    on(&mut st, Event::CaughtUp, 1_000);
    let x = Xid {
        xid: 79,
        time_ms: 1_000,
    };
    on(&mut st, Event::Sample(Box::new(sample(1_000, vec![x]))), 1_000);
    on(&mut st, Event::Sample(Box::new(sample(2_000, vec![]))), 2_000);
    assert!(xid_flag(&st), "held for an hour");
    // The audit log says a burn-in passed (a person's request, from a
    // console's files): that alone ends nothing.
    let said = timeline::Event {
        time_ms: 10_000,
        node: "n1".into(),
        what: timeline::What::Action {
            action: crate::model::action::NodeAction::Bench,
            ok: true,
            reason: Some("suite quick".into()),
            message: String::new(),
            policy: None,
        },
        by: "alice".into(),
    };
    st.apply(Update::Timeline(vec![said]), 10_000);
    on(&mut st, Event::Sample(Box::new(sample(10_500, vec![]))), 10_500);
    assert!(xid_flag(&st), "a line in an audit log is no burn-in");
    // The node's agent records a failed burn-in at 10 s, then a pass at 12 s
    // (from the CLI, another console: wherever it was run from).
    let run = |ended_ms: i64, passed: bool| crate::model::bench::BurnIn {
        started_ms: ended_ms - 500,
        ended_ms,
        suite: Some(crate::model::bench::Suite::Quick),
        passed,
        requested_by: "alice@console2".into(),
        node: Default::default(),
        checks: Vec::new(),
        error: None,
    };
    on(&mut st, Event::BurnIn(Box::new(run(10_000, false))), 10_000);
    on(&mut st, Event::Sample(Box::new(sample(11_000, vec![]))), 11_000);
    assert!(xid_flag(&st), "a failed burn-in ends nothing");
    on(&mut st, Event::BurnIn(Box::new(run(12_000, true))), 12_000);
    on(&mut st, Event::Sample(Box::new(sample(13_000, vec![]))), 13_000);
    assert!(!xid_flag(&st), "the hold ended with the passing burn-in");
    // An XID after it is a new fault.
    let again = Xid {
        xid: 79,
        time_ms: 14_000,
    };
    on(&mut st, Event::Sample(Box::new(sample(14_000, vec![again]))), 14_000);
    assert!(xid_flag(&st));
}

#[test]
fn an_agent_connected_but_not_sampling_is_unreachable_once_it_lasts() {
    let th = Thresholds::default();
    let mut st = Store::new(vec![target()], th.clone());
    let info = NodeDesc {
        interval_ms: 1000,
        ..Default::default()
    };
    on(&mut st, Event::Info(Box::new(info)), 10_000);
    let s = NodeSample {
        time_ms: 10_000,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(s)), 10_000);
    on(&mut st, Event::CaughtUp, 10_000);
    // Still connected, no sample since 10 s: stale (warn) a while...
    st.tick(30_000);
    assert_eq!(st.nodes[0].status(30_000, &th), NodeStatus::Stale);
    // ...then, past `unreachable_after`, crit, saying why.
    st.tick(40_000);
    assert_eq!(st.nodes[0].status(40_000, &th), NodeStatus::Unreachable);
    let flags: Vec<_> = st.nodes[0].detector.active().map(|f| (f.kind, f.severity)).collect();
    assert_eq!(flags, [(FlagKind::Unreachable, Severity::Crit)]);
    let f = st.nodes[0].detector.active().next().expect("flag");
    assert_eq!(f.detail, "agent connected but not sampling for 30 s");
}

#[test]
fn status_moves_from_ok_to_stale_to_unreachable() {
    let th = Thresholds::default();
    let mut st = Store::new(vec![target()], th.clone());
    assert_eq!(st.nodes[0].status(0, &th), NodeStatus::Connecting);
    let info = NodeDesc {
        interval_ms: 1000,
        ..Default::default()
    };
    on(&mut st, Event::Info(Box::new(info)), 10_000);
    let s = NodeSample {
        time_ms: 10_000,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(s)), 10_000);
    on(&mut st, Event::CaughtUp, 10_000);
    assert_eq!(st.nodes[0].status(12_000, &th), NodeStatus::Ok);
    assert_eq!(st.nodes[0].status(14_000, &th), NodeStatus::Stale);
    on(&mut st, Event::Down("refused".into()), 14_000);
    st.tick(14_000);
    assert!(
        st.nodes[0]
            .detector
            .active()
            .any(|f| f.kind == crate::model::flag::FlagKind::Stale)
    );
    assert_eq!(st.nodes[0].status(20_000, &th), NodeStatus::Stale);
    // Silent since 10 s, noticed down at 14 s: unreachable 30 s after it
    // went silent, not 30 s after it was noticed.
    assert_eq!(st.nodes[0].status(39_000, &th), NodeStatus::Stale);
    assert_eq!(st.nodes[0].status(40_000, &th), NodeStatus::Unreachable);
    // Unreachable is an alert, crit, with the reason; stale gives way to it.
    st.tick(40_000);
    let kinds = |st: &Store| {
        st.nodes[0]
            .detector
            .active()
            .map(|f| (f.kind, f.severity))
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds(&st), [(FlagKind::Unreachable, Severity::Crit)]);
    let f = st.nodes[0].detector.active().next().expect("flag");
    assert_eq!(f.detail, "agent unreachable for 30 s: refused");
    assert_eq!(f.since_ms, 10_000, "since it went silent");
    // Back: the alert clears.
    on(&mut st, Event::Info(Box::default()), 41_000);
    let s = NodeSample {
        seq: 2,
        time_ms: 41_000,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(s)), 41_000);
    st.tick(41_000);
    assert!(kinds(&st).is_empty());
}

#[test]
fn a_node_never_reached_raises_an_alert_after_unreachable_after() {
    let th = Thresholds::default();
    let mut st = Store::new(vec![target()], th.clone());
    on(
        &mut st,
        Event::Down("dns error: failed to lookup address".into()),
        1_000,
    );
    st.tick(30_000);
    assert_eq!(st.nodes[0].detector.active().count(), 0, "not yet: 29 s");
    assert_eq!(
        st.nodes[0].status(30_000, &th),
        NodeStatus::Connecting,
        "still connecting"
    );
    st.tick(31_000);
    assert_eq!(st.nodes[0].status(31_000, &th), NodeStatus::Unreachable);
    let f = st.nodes[0].detector.active().next().expect("an alert");
    assert_eq!((f.kind, f.severity), (FlagKind::Unreachable, Severity::Crit));
    assert_eq!(
        f.detail,
        "agent never reached for 30 s: dns error: failed to lookup address"
    );
}

#[test]
fn samples_arriving_late_because_the_console_is_behind_are_not_stale() {
    let th = Thresholds::default();
    let mut st = Store::new(vec![target()], th.clone());
    let info = NodeDesc {
        interval_ms: 1000,
        ..Default::default()
    };
    on(&mut st, Event::Info(Box::new(info)), 0);
    on(&mut st, Event::CaughtUp, 0);
    // Taken at 10 s, 11 s, ... but taken in 20 s later each.
    for seq in 0..5 {
        let t = 10_000 + seq * 1000;
        let s = NodeSample {
            seq: seq as u64,
            time_ms: t,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(s)), t + 20_000);
        st.tick(t + 20_000);
        assert_eq!(st.nodes[0].status(t + 20_000, &th), NodeStatus::Ok, "{seq}");
    }
    assert_eq!(st.nodes[0].detector.active().count(), 0, "no stale flag");
    // Then nothing comes at all: the console, idle, is no longer behind,
    // and the node is stale a few intervals after the last one came.
    st.tick(34_000 + 3_000);
    assert_eq!(st.nodes[0].status(34_000 + 3_000, &th), NodeStatus::Ok);
    assert_eq!(st.nodes[0].status(34_000 + 3_001, &th), NodeStatus::Stale);
}

#[test]
fn history_still_arriving_is_not_stale() {
    let th = Thresholds::default();
    let mut st = Store::new(vec![target()], th.clone());
    let info = NodeDesc {
        interval_ms: 1000,
        ..Default::default()
    };
    on(&mut st, Event::Info(Box::new(info)), 100_000);
    let old = NodeSample {
        time_ms: 10_000,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(old)), 100_000);
    st.tick(100_000);
    assert_eq!(st.nodes[0].status(100_000, &th), NodeStatus::Connecting);
    assert_eq!(
        st.nodes[0].detector.active().count(),
        0,
        "no stale flag while history arrives"
    );
    on(&mut st, Event::CaughtUp, 100_000);
    st.tick(100_000);
    assert_eq!(
        st.nodes[0].status(100_000, &th),
        NodeStatus::Unreachable,
        "an agent silent 90 s is judged once caught up: past unreachable_after"
    );
}

#[test]
fn history_is_bounded_and_aligned() {
    let mut st = Store::new(vec![target()], Thresholds::default()).with_history(3);
    on(&mut st, Event::Info(Box::default()), 0);
    for t in 1..=5 {
        let gpus = (0..(t % 2 + 1))
            .map(|i| GpuReading {
                index: i as u32,
                util_pct: Some(10 * t as u32),
                ..Default::default()
            })
            .collect();
        let s = NodeSample {
            seq: t as u64,
            time_ms: t * 1000,
            gpus,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(s)), 0);
    }
    let h = &st.nodes[0].history;
    assert_eq!(h.times_ms().collect::<Vec<_>>(), [3000, 4000, 5000]);
    assert_eq!(h.points(0).count(), 3);
    assert_eq!(h.points(0).last().map(|p| p.1.util_pct), Some(50));
    // A replayed sample (one the agent sent before) changes nothing,
    // whatever its time says.
    let old = NodeSample {
        seq: 2,
        time_ms: 9000,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(old)), 0);
    assert_eq!(st.nodes[0].history.newest_ms(), Some(5000));
}

/// A burn-in's verdict comes from the node's agent, wherever it was run
/// from: a failure its agent holds raises `burnin_failed` in every console
/// that connects, and a pass recorded later (by another console, the
/// command line) clears it in a console that is running, at once.
#[test]
fn a_pass_the_nodes_agent_records_anywhere_clears_burnin_failed_at_once() {
    use crate::model::bench::{BurnIn, Identity, Suite};
    let t0 = 1_700_000_000_000;
    let run = |ended_ms: i64, passed: bool| BurnIn {
        started_ms: ended_ms - 1000,
        ended_ms,
        suite: Some(Suite::Quick),
        passed,
        requested_by: "alice@console2".into(),
        node: Identity::default(),
        checks: Vec::new(),
        error: (!passed).then(|| "hbm_d2d gpu 1".into()),
    };
    let burnin_failed = |st: &Store| {
        st.nodes[0]
            .detector
            .active()
            .find(|f| f.kind == FlagKind::BurninFailed)
            .map(|f| (f.severity, f.detail.clone()))
    };
    let mut st = Store::new(vec![target()], Thresholds::default());
    let mut desc = NodeDesc {
        interval_ms: 1_000,
        ..Default::default()
    };
    desc.health.burn_ins = vec![run(t0 - 60_000, true), run(t0 - 30_000, false)];
    on(&mut st, Event::Info(Box::new(desc)), t0);
    on(&mut st, Event::CaughtUp, t0);
    let (sev, detail) = burnin_failed(&st).expect("the agent's last verdict failed");
    assert_eq!(sev, Severity::Crit);
    assert!(
        detail.contains("hbm_d2d gpu 1") && detail.contains("the node's agent"),
        "{detail}"
    );
    // Another console's return passes on the node: its agent tells this one.
    on(&mut st, Event::BurnIn(Box::new(run(t0 + 5_000, true))), t0 + 5_100);
    assert_eq!(burnin_failed(&st), None, "cleared at once, no restart");
    assert_eq!(st.nodes[0].detector.burnin_passed_ms, Some(t0 + 5_000));
    // The same record again (a second stream) changes nothing; an older
    // failure arriving late does not raise it again.
    on(&mut st, Event::BurnIn(Box::new(run(t0 + 5_000, true))), t0 + 6_000);
    on(&mut st, Event::BurnIn(Box::new(run(t0 + 1_000, false))), t0 + 6_000);
    assert_eq!(burnin_failed(&st), None);
    let texts: Vec<String> = st.nodes[0].timeline.events().map(|e| e.line()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t == "burn-in quick passed (the node's agent), asked by alice@console2"),
        "{texts:#?}"
    );
}
