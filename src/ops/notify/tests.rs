use super::*;
use crate::detect::Thresholds;
use crate::model::sample::{GpuDesc, GpuProcess, GpuReading, NodeDesc, NodeSample};
use crate::model::sched::{Job, NodeView, SchedNode};
use crate::model::target::Target;
use crate::model::update::{Event, Update};
use fleetop_proto::throttle;

fn store() -> Store {
    let target = Target {
        name: "gpu07".into(),
        host: "127.0.0.1".into(),
        port: 1,
    };
    let mut st = Store::new(vec![target], Thresholds::default());
    let info = NodeDesc {
        interval_ms: 1000,
        gpus: (0..4)
            .map(|i| GpuDesc {
                index: i,
                slowdown_temp_c: Some(87),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    on(&mut st, Event::Info(Box::new(info)), 0);
    on(&mut st, Event::CaughtUp, 0);
    st
}

fn on(st: &mut Store, event: Event, now_ms: i64) {
    st.apply(Update::Node { node: 0, event }, now_ms);
}

/// GPU 2 busy for job 4411, throttled (HW thermal) when `hot`, at `temp`.
fn sample(st: &mut Store, t: i64, hot: bool, temp: u32) {
    let gpus = (0..4)
        .map(|i| GpuReading {
            index: i,
            util_pct: Some(95),
            temp_c: Some(if i == 2 { temp } else { 60 }),
            sm_clock_mhz: Some(1900),
            throttle_mask: Some(if i == 2 && hot {
                throttle::HW_THERMAL_SLOWDOWN
            } else {
                0
            }),
            processes: vec![GpuProcess {
                pid: 100 + i,
                used_mem_bytes: 1,
                job_id: Some(4411),
                owner: None,
                command: None,
            }]
            .into(),
            ..Default::default()
        })
        .collect();
    let s = NodeSample {
        seq: t as u64 + 1,
        time_ms: t * 1000,
        gpus,
        ..Default::default()
    };
    on(st, Event::Sample(Box::new(s)), t * 1000);
}

fn raised(c: &[Change]) -> Vec<&Alert> {
    c.iter()
        .filter_map(|c| match c {
            Change::Raised(a) => Some(a),
            Change::Resolved(_) => None,
        })
        .collect()
}

fn resolved(c: &[Change]) -> Vec<&Alert> {
    c.iter()
        .filter_map(|c| match c {
            Change::Resolved(a) => Some(a),
            Change::Raised(_) => None,
        })
        .collect()
}

fn with_scheduler(st: &mut Store) {
    st.nodes[0].scheduler = Some(NodeView {
        node: SchedNode {
            state: "allocated".into(),
            not_responding: false,
            reason: None,
            reason_user: None,
            reason_time: None,
            partitions: Vec::new(),
        },
        jobs: vec![Job {
            id: 4411,
            user: "alice".into(),
            name: "train".into(),
            elapsed_s: 60,
            gpus_per_node: 4,
            nodes: vec!["gpu07".into()],
        }],
    });
}

/// A GPU that falls off the bus lists no processes: its alert names the
/// job that was on it when it last answered, so the page reaches its owner.
#[test]
fn a_lost_gpu_alert_names_the_job_it_was_running() {
    use crate::model::sample::GpuError;
    let mut st = store();
    with_scheduler(&mut st);
    let mut tr = Tracker::new(Rules::default());
    for t in 0..3 {
        sample(&mut st, t, false, 60);
    }
    assert!(raised(&tr.observe(&st, 3000)).is_empty());
    let mut s = st.nodes[0].last.clone().expect("sampled");
    s.seq += 1;
    s.time_ms += 1000;
    s.gpus[2] = GpuReading {
        index: 2,
        error: Some(GpuError::Lost),
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(s)), 4000);
    let changes = tr.observe(&st, 4000);
    let lost: Vec<&Alert> = raised(&changes)
        .into_iter()
        .filter(|a| a.labels["kind"] == "gpu_lost")
        .collect();
    assert_eq!(lost.len(), 1, "{changes:?}");
    assert_eq!(
        lost[0].labels.get("job").map(String::as_str),
        Some("4411"),
        "{:?}",
        lost[0]
    );
    assert_eq!(lost[0].labels.get("user").map(String::as_str), Some("alice"));
}

#[test]
fn a_throttled_gpu_becomes_one_alert_with_the_labels_a_router_needs() {
    let mut st = store();
    with_scheduler(&mut st);
    let cfg = NotifyConfig {
        labels: [("cluster".to_string(), "east".to_string())].into(),
        ..Default::default()
    };
    let mut tr = Tracker::new(Rules::new(&cfg));
    for t in 0..3 {
        sample(&mut st, t, true, 70);
    }
    let changes = tr.observe(&st, 3000);
    let up = raised(&changes);
    assert_eq!(up.len(), 1, "{changes:?}");
    let a = up[0];
    let label = |k: &str| a.labels.get(k).map(String::as_str);
    assert_eq!(label("alertname"), Some("FleetopThrottled"));
    assert_eq!(label("node"), Some("gpu07"));
    assert_eq!(label("gpu"), Some("2"));
    assert_eq!(label("kind"), Some("throttled"));
    assert_eq!(label("severity"), Some("crit"));
    assert_eq!(label("job"), Some("4411"));
    assert_eq!(label("user"), Some("alice"));
    assert_eq!(label("cluster"), Some("east"));
    // What to do (thermal: cooling), and the runbook.
    assert_eq!(label("action"), Some("check_cooling"));
    assert!(
        a.annotations["action"].starts_with("check cooling: fans"),
        "{:?}",
        a.annotations
    );
    assert_eq!(a.annotations["runbook_url"], "docs/faults.md#throttled");
    assert_eq!(a.starts_ms, 0, "starts when the condition began");
    let summary = &a.annotations["summary"];
    assert!(summary.starts_with("gpu07 GPU 2: throttled ("), "{summary}");
    assert!(summary.contains("hw_thermal_slowdown"), "{summary}");
    assert!(!a.annotations["evidence"].is_empty());
    // Alertmanager's body: camelCase times, no endsAt while firing.
    let v: serde_json::Value = serde_json::from_slice(&alertmanager::body(&[a])).expect("json");
    assert_eq!(v[0]["labels"]["alertname"], "FleetopThrottled");
    assert_eq!(v[0]["startsAt"], "1970-01-01T00:00:00.000Z");
    assert!(v[0].get("endsAt").is_none(), "{v}");
}

#[test]
fn a_runbook_base_makes_the_runbook_a_link() {
    let mut st = store();
    let cfg = NotifyConfig {
        runbook_base: Some("https://wiki.example/faults.md".into()),
        ..Default::default()
    };
    let mut tr = Tracker::new(Rules::new(&cfg));
    for t in 0..3 {
        sample(&mut st, t, true, 70);
    }
    let changes = tr.observe(&st, 3000);
    let up = raised(&changes);
    assert_eq!(
        up[0].annotations["runbook_url"],
        "https://wiki.example/faults.md#throttled"
    );
}

#[test]
fn which_kinds_notify_and_at_which_severity_is_configuration() {
    let mut st = store();
    for t in 0..3 {
        sample(&mut st, t, true, 84);
    }
    // The GPU is both throttled (crit) and hot (warn).
    let kinds = |cfg: NotifyConfig| {
        let mut tr = Tracker::new(Rules::new(&cfg));
        let mut out: Vec<(String, String)> = raised(&tr.observe(&st, 3000))
            .iter()
            .map(|a| (a.labels["kind"].clone(), a.labels["severity"].clone()))
            .collect();
        out.sort();
        out
    };
    let pair = |k: &str, s: &str| (k.to_string(), s.to_string());
    assert_eq!(
        kinds(NotifyConfig::default()),
        [pair("hot", "warn"), pair("throttled", "crit")]
    );
    assert_eq!(
        kinds(NotifyConfig {
            min_severity: Severity::Crit,
            ..Default::default()
        }),
        [pair("throttled", "crit")]
    );
    assert_eq!(
        kinds(NotifyConfig {
            kinds: Some(vec![FlagKind::Hot]),
            severity: [("hot".to_string(), Severity::Crit)].into(),
            ..Default::default()
        }),
        [pair("hot", "crit")]
    );
}

#[test]
fn a_cleared_flag_resolves_its_alert_with_the_same_labels() {
    let mut st = store();
    let mut tr = Tracker::default();
    for t in 0..3 {
        sample(&mut st, t, true, 70);
    }
    let up = tr.observe(&st, 3000);
    assert_eq!(raised(&up).len(), 1);
    // Clean samples until the detector clears the flag.
    let mut t = 3;
    let gone = loop {
        sample(&mut st, t, false, 70);
        let c = tr.observe(&st, t * 1000);
        if !c.is_empty() {
            break c;
        }
        t += 1;
        assert!(t < 30, "never cleared");
    };
    let down = resolved(&gone);
    assert_eq!(down.len(), 1, "{gone:?}");
    assert_eq!(down[0].labels, raised(&up)[0].labels);
    assert_eq!(down[0].ends_ms, Some(t * 1000), "ended when seen cleared");
    assert_eq!(tr.firing().count(), 0);
    let v: serde_json::Value = serde_json::from_slice(&alertmanager::body(&[down[0]])).expect("json");
    assert!(v[0]["endsAt"].is_string(), "{v}");
}

#[test]
fn a_flapping_flag_is_sent_once() {
    let mut st = store();
    let mut tr = Tracker::default();
    let mut all = Vec::new();
    // Throttled with the bit flickering off for fewer samples than it takes
    // to clear, and a temperature (evidence) moving every sample.
    let pattern = [
        true, true, true, false, true, false, false, true, true, false, true, true,
    ];
    for (t, hot) in pattern.into_iter().enumerate() {
        sample(&mut st, t as i64, hot, 70 + t as u32 % 3);
        all.extend(tr.observe(&st, t as i64 * 1000));
    }
    let up: Vec<_> = raised(&all).iter().map(|a| a.labels["kind"].clone()).collect();
    assert_eq!(up, ["throttled"], "{all:?}");
    assert!(resolved(&all).is_empty(), "{all:?}");
    // A bit that flickers without ever holding is never sent at all.
    let mut st = store();
    let mut tr = Tracker::default();
    for t in 0..12 {
        sample(&mut st, t, t % 2 == 0, 70);
        assert!(tr.observe(&st, t * 1000).is_empty());
    }
}

#[test]
fn a_node_still_sending_history_keeps_its_alerts_as_they_were() {
    let mut st = store();
    let mut tr = Tracker::default();
    for t in 0..3 {
        sample(&mut st, t, true, 70);
    }
    assert_eq!(raised(&tr.observe(&st, 3000)).len(), 1);
    // The agent reconnects: its history arrives again from the start.
    let info = st.nodes[0].info.clone().expect("info");
    on(&mut st, Event::Info(Box::new(info)), 4000);
    assert!(tr.observe(&st, 4000).is_empty(), "nothing resolved while catching up");
    assert_eq!(tr.firing().count(), 1);
}

#[test]
fn a_full_webhook_queue_drops_the_oldest_and_counts() {
    let mut q = webhook::Queue::new(3);
    let ev = |n: i64| {
        Change::Raised(Alert {
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            starts_ms: n,
            ends_ms: None,
        })
    };
    for n in 0..3 {
        assert!(!q.push(ev(n)));
    }
    assert!(q.push(ev(3)), "full: one dropped");
    assert!(q.push(ev(4)));
    assert_eq!((q.len(), q.dropped()), (3, 2));
    let starts = |q: &webhook::Queue| match q.front() {
        Some((_, Change::Raised(a))) => a.starts_ms,
        _ => -1,
    };
    assert_eq!(starts(&q), 2, "the oldest went first");
    // An event dropped while it was being sent is not removed twice.
    let n = q.front().map(|(n, _)| *n).expect("front");
    q.push(ev(5));
    q.done(n);
    assert_eq!((q.len(), starts(&q)), (3, 3));
    let n = q.front().map(|(n, _)| *n).expect("front");
    q.done(n);
    assert_eq!((q.len(), starts(&q)), (2, 4));
    // The count travels in every body.
    let v: serde_json::Value = serde_json::from_slice(&webhook::body(&ev(9), q.dropped(), 0)).expect("json");
    assert_eq!(v["dropped_total"], 3);
    assert_eq!(v["event"], "raised");
    assert_eq!(v["version"], 1);
}

#[test]
fn alertmanager_urls_get_the_api_path_once() {
    let u = |s: &str| alertmanager::alerts_url(s).map(|u| u.to_string());
    assert_eq!(
        u("http://am:9093").ok().as_deref(),
        Some("http://am:9093/api/v2/alerts")
    );
    assert_eq!(
        u("https://am.example/prefix/").ok().as_deref(),
        Some("https://am.example/prefix/api/v2/alerts")
    );
    assert_eq!(
        u("http://am:9093/api/v2/alerts").ok().as_deref(),
        Some("http://am:9093/api/v2/alerts")
    );
    let e = u("am:9093").expect_err("no scheme").to_string();
    assert!(e.contains("'am:9093'"), "{e}");
    assert!(u("ftp://am/").is_err());
}

#[test]
fn the_bell_rings_for_a_new_crit_flag_only() {
    let mut st = store();
    let mut bell = bell::Bell::default();
    sample(&mut st, 0, true, 70);
    assert!(!bell.check(&st));
    sample(&mut st, 1, true, 70);
    sample(&mut st, 2, true, 70);
    assert!(bell.check(&st), "throttled (crit) raised");
    sample(&mut st, 3, true, 70);
    assert!(!bell.check(&st), "already rung");
}
