//! The export against live agent processes: a one-shot export returns as
//! soon as every node has answered or failed, and an agent whose clock is
//! wrong shows true ages.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chrono::DateTime;
use fleetop::export::{Snapshot, Status};
use fleetop::model::flag::{FlagKind, Severity};

use crate::{RefusedPort, fleetop, start_agent};

/// Milliseconds between two RFC 3339 times.
fn ms_between(a: &str, b: &str) -> i64 {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).expect("RFC 3339").timestamp_millis();
    t(b) - t(a)
}

#[test]
fn once_returns_when_every_node_has_answered_not_at_the_timeout() {
    let _agent = start_agent(&[]);
    let port = _agent.port();
    let closed = RefusedPort::new();
    let refused = closed.port;
    // The default --timeout is 10 s: answering within 3 s means no waiting
    // for anything that will not come (a scheduler there is none of).
    let start = Instant::now();
    let out = fleetop()
        .args(["export", "--once", "--hosts", &format!("127.0.0.1:{port}")])
        .output()
        .expect("runs");
    let took = start.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    assert_eq!(snap.nodes[0].status, Status::Ok);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // A refused port is an answer too: at once, with the error.
    let start = Instant::now();
    let out = fleetop()
        .args(["export", "--once", "--hosts", &format!("127.0.0.1:{refused}")])
        .output()
        .expect("runs");
    let took = start.elapsed();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused"), "{out:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn agents_whose_clocks_are_90s_off_show_true_ages_and_never_go_stale() {
    let _a = start_agent(&["--sim-clock-offset", "90s"]);
    let _b = start_agent(&["--sim-clock-offset=-90s"]);
    let (ahead, behind) = (_a.port(), _b.port());
    let mut export = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .args(["export", "--format", "ndjson", "--interval", "500ms", "--count", "8"])
        .args(["--hosts", &format!("127.0.0.1:{ahead},127.0.0.1:{behind}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("export starts");
    let lines = BufReader::new(export.stdout.take().expect("stdout")).lines();
    let mut seen = 0;
    for line in lines {
        let snap: Snapshot = serde_json::from_str(&line.expect("a line")).expect("a snapshot");
        for n in &snap.nodes {
            assert_eq!(n.status, Status::Ok, "{n:?}");
            let sampled = n.sampled_at.as_deref().expect("sampled");
            // In console time, a 200 ms sample is at most a few hundred ms
            // old; 90 s off either way would show.
            let age = ms_between(sampled, &snap.generated_at);
            assert!(
                (-2_000..10_000).contains(&age),
                "{} sampled {age} ms before the snapshot",
                n.name
            );
            for f in &n.flags {
                assert!(
                    ms_between(&f.since, &snap.generated_at) >= -2_000,
                    "a flag from the future: {f:?}"
                );
            }
        }
        seen += 1;
    }
    let _ = export.wait();
    assert_eq!(seen, 8);
}

#[test]
fn a_node_never_reached_is_an_alert_with_the_reason_after_unreachable_after() {
    let _agent = start_agent(&[]);
    let closed = RefusedPort::new();
    let (live, refused) = (_agent.port(), closed.port);
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[thresholds]\nunreachable_after = \"2s\"\n").expect("config");
    let out = fleetop()
        .arg("--config")
        .arg(&cfg)
        .args(["export", "--format", "ndjson", "--interval", "1s", "--count", "4"])
        .args(["--hosts", &format!("127.0.0.1:{live},127.0.0.1:{refused}")])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last: Snapshot = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().expect("snapshots"))
        .expect("a snapshot");
    let node = last
        .nodes
        .iter()
        .find(|n| n.address.ends_with(&format!(":{refused}")))
        .expect("the node");
    assert_eq!(node.status, Status::Unreachable);
    let f = node
        .flags
        .iter()
        .find(|f| f.kind == FlagKind::Unreachable)
        .expect("an unreachable alert");
    assert_eq!(f.severity, Severity::Crit);
    assert!(
        f.detail.contains("never reached") && f.detail.contains("refused"),
        "{}",
        f.detail
    );
    assert!(
        node.status_detail.as_deref().is_some_and(|d| d.contains("refused")),
        "{node:?}"
    );
}

/// Agents that share a host (containers, the swarm) are two nodes with two
/// names in every view, never two `127.0.0.1`s; the summary names each
/// agent's address too.
#[test]
fn two_agents_on_one_host_have_two_names_and_their_addresses() {
    let (_a, _b) = (start_agent(&[]), start_agent(&[]));
    let (a, b) = (_a.port(), _b.port());
    let hosts = format!("127.0.0.1:{a},127.0.0.1:{b}");
    for view in ["full", "summary"] {
        let out = fleetop()
            .args(["export", "--once", "--view", view, "--hosts", &hosts])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let names: Vec<&str> = doc["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter_map(|n| n["name"].as_str())
            .collect();
        // Both agents call their host "n1": named by it, the port added
        // where the name is taken.
        assert_eq!(names.len(), 2, "{view}");
        assert_ne!(names[0], names[1], "{view}");
        assert!(names.contains(&"n1"), "{names:?}");
        assert!(
            names.iter().any(|n| *n == format!("n1:{a}") || *n == format!("n1:{b}")),
            "{names:?}"
        );
        let addrs: Vec<&str> = doc["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter_map(|n| n["address"].as_str())
            .collect();
        assert_eq!(addrs, [format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}")], "{view}");
    }
}

/// One snapshot of a large fleet reads less of each agent's history than a
/// console that keeps running (so 10,000 nodes export in seconds); what it
/// read is said in the log. The nodes need not answer: the budget is the
/// fleet's size.
#[test]
fn a_one_shot_export_of_a_large_fleet_reads_a_shorter_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hostfile = dir.path().join("hosts");
    // Nothing listens there: every node is refused at once.
    let hosts: String = (0..417).map(|i| format!("127.0.0.1:{}\n", 1 + i)).collect();
    std::fs::write(&hostfile, hosts).expect("hostfile");
    let read = |extra: &[&str]| {
        let out = fleetop()
            .env("FLEETOP_LOG", "info")
            .args(["export", "--timeout", "1s", "--view", "summary", "--hostfile"])
            .arg(&hostfile)
            .args(extra)
            .output()
            .expect("runs");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let once = read(&["--once"]);
    assert!(once.contains("417 nodes: 239 s of each agent's history"), "{once}");
    let two = read(&["--count", "2", "--interval", "1s"]);
    assert!(two.contains("417 nodes: 599 s of each agent's history"), "{two}");
}

/// A node that cannot be judged never reads `ok`: from the first document
/// of a one-shot export, a port nobody answers is `health: unknown` with its
/// `unreachable` flag, and the live node beside it is judged as usual.
#[test]
fn a_one_shot_export_never_calls_a_node_it_cannot_read_healthy() {
    let _agent = start_agent(&[]);
    let closed = RefusedPort::new();
    let (live, refused) = (_agent.port(), closed.port);
    let out = fleetop()
        .args(["export", "--once", "--format", "json"])
        .args(["--hosts", &format!("127.0.0.1:{live},127.0.0.1:{refused}")])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    let dead = snap
        .nodes
        .iter()
        .find(|n| n.address.ends_with(&format!(":{refused}")))
        .expect("the dead node");
    assert_eq!(dead.status, Status::Unreachable);
    assert_eq!(dead.health, fleetop::export::Health::Unknown, "{dead:?}");
    let f = dead.flags.first().expect("its unreachable flag");
    assert_eq!((f.kind, f.severity), (FlagKind::Unreachable, Severity::Crit));
    assert!(f.detail.contains("refused"), "{}", f.detail);
    let up = snap
        .nodes
        .iter()
        .find(|n| n.address.ends_with(&format!(":{live}")))
        .expect("the live node");
    assert_eq!((up.status, up.health), (Status::Ok, fleetop::export::Health::Ok));
    // The README's selector finds the dead node.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let bad: Vec<&str> = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["health"] != "ok")
        .map(|n| n["address"].as_str().expect("address"))
        .collect();
    assert_eq!(bad, [format!("127.0.0.1:{refused}")]);
}
