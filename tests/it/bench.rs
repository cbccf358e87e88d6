//! Burn-in through the real binaries and real agents on loopback: host and
//! network benchmarks run for real, GPU ones take their "no CUDA" path; the
//! token, one-suite-at-a-time, cancellation, timeout and read-only rules.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetop::model::bench::{BenchReport, Verdict};
use fleetop_agent::proto::BenchRequest;
use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::bench_event::Kind;

struct Agents {
    child: Child,
    hosts: String,
    dir: tempfile::TempDir,
}

impl Drop for Agents {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two agent processes (one swarm) with benchmarks on, token "s3cret",
/// served over TLS with a CA made up for the test (the secure setup of
/// docs/security.md), and an operator's expectations file that lowers the
/// host floor (this machine shares its cores between the "nodes").
fn agents() -> Agents {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::write_secret(&dir.path().join("token"), "s3cret\n");
    crate::write_tls(dir.path());
    std::fs::write(
        dir.path().join("expect.toml"),
        "[host]\nhost_memcpy = { min = 0.01, source = \"test\" }\n",
    )
    .expect("expectations");
    let hostfile = dir.path().join("hosts");
    let child = Command::new(crate::agent_bin())
        .arg("--tls-cert")
        .arg(dir.path().join("agent.pem"))
        .arg("--tls-key")
        .arg(dir.path().join("agent.key"))
        .args(["swarm", "--count", "2", "--sim-gpus", "2", "--hostfile"])
        .arg(&hostfile)
        .arg("--bench-token-file")
        .arg(dir.path().join("token"))
        .arg("--bench-expectations")
        .arg(dir.path().join("expect.toml"))
        .stderr(Stdio::null())
        .spawn()
        .expect("agents start");
    let start = Instant::now();
    while !hostfile.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "agents did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let hosts = std::fs::read_to_string(&hostfile)
        .expect("hosts")
        .lines()
        .collect::<Vec<_>>()
        .join(",");
    Agents { child, hosts, dir }
}

impl Agents {
    fn bench(&self, extra: &[&str]) -> std::process::Output {
        crate::fleetop()
            .env("FLEETOP_AUDIT_LOG", self.dir.path().join("audit.jsonl"))
            .args(["bench", "--hosts", &self.hosts, "--yes", "--token-file"])
            .arg(self.dir.path().join("token"))
            .arg("--tls-ca")
            .arg(self.dir.path().join("ca.pem"))
            .args(extra)
            .output()
            .expect("runs")
    }
}

#[test]
fn host_and_network_run_for_real_and_simulated_gpu_checks_say_so() {
    let a = agents();
    let out = a.bench(&["--suite", "quick"]);
    // The simulated GPUs pass; the host and network checks of agents that
    // share this machine are judged as shares of it (warn, never fail).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: BenchReport = serde_json::from_slice(&out.stdout).expect("stdout is the JSON report");
    assert_eq!(report.suite, "quick");
    assert_eq!(report.nodes.len(), 2);
    for n in &report.nodes {
        assert!(n.error.is_none() && n.ok, "{n:?}");
        let get = |name: &str| {
            n.results
                .iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("{name} in {n:?}"))
        };
        let host = get("host_memcpy");
        assert!(
            host.value.is_some_and(|v| v > 0.0)
                && host.unit.as_deref() == Some("GB/s")
                && host.verdict == Verdict::Pass,
            "{host:?}"
        );
        assert_eq!(host.expected_min, Some(0.01), "the operator's file replaced the floor");
        let tcp = get("tcp");
        // Measured and judged by the rule, whatever this machine's speed:
        // below the floor fails, at or above it does not.
        let (v, min) = (tcp.value.expect("measured"), tcp.expected_min.expect("a floor"));
        assert!(v > 0.0 && tcp.unit.as_deref() == Some("Gb/s"), "{tcp:?}");
        assert_eq!(tcp.verdict == Verdict::Fail, v < min, "{tcp:?}");
        assert!(tcp.expected_source.is_some());
        // The sim backend's GPUs: judged by the same floors, and saying
        // they were not measured (the no-CUDA path is the agent's own test).
        let hbm = get("hbm_d2d");
        assert_eq!(
            (hbm.verdict, hbm.unit.as_deref()),
            (Verdict::Pass, Some("GB/s")),
            "{hbm:?}"
        );
        assert!(
            hbm.reason.as_deref().is_some_and(|r| r.contains("simulated")),
            "{hbm:?}"
        );
        assert!(n.net_peer.is_some());
    }
    // Reached by address, each is named by the host name its agent reports.
    let names: Vec<&str> = report.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["sim0001", "sim0002"], "{report:?}");
    // Each node sent to the other.
    assert_eq!(
        report.nodes[0].net_peer.as_deref(),
        Some(report.nodes[1].address.as_str())
    );
    assert_eq!(
        report.nodes[1].net_peer.as_deref(),
        Some(report.nodes[0].address.as_str())
    );
    // Progress went to stderr, and the attempt to the audit log.
    assert!(String::from_utf8_lossy(&out.stderr).contains("network"));
    let log = std::fs::read_to_string(a.dir.path().join("audit.jsonl")).expect("audit log");
    let entry: fleetop::model::action::ActionReport =
        serde_json::from_str(log.lines().last().expect("a line")).expect("json");
    assert_eq!((entry.action.verb(), entry.results.len()), ("bench", 2));
    for (r, n) in entry.results.iter().zip(&report.nodes) {
        assert_eq!(r.ok, n.ok, "the log says what the report says");
        assert!(r.message.contains("pass"), "{r:?}");
    }
}

#[test]
fn the_token_read_only_and_confirmation_guard_the_agents() {
    let a = agents();
    crate::write_secret(&a.dir.path().join("wrong"), "guess");
    let out = crate::fleetop()
        .env("FLEETOP_AUDIT_LOG", a.dir.path().join("audit.jsonl"))
        .args(["bench", "--hosts", &a.hosts, "--yes", "--token-file"])
        .arg(a.dir.path().join("wrong"))
        .arg("--tls-ca")
        .arg(a.dir.path().join("ca.pem"))
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let report: BenchReport = serde_json::from_slice(&out.stdout).expect("report");
    assert!(
        report
            .nodes
            .iter()
            .all(|n| n.error.as_deref() == Some("wrong bench token") && n.refused),
        "{report:?}"
    );
    // A refusal is no burn-in: the audit log says refused, with why, and
    // no node has a failed burn-in on record.
    let log = std::fs::read_to_string(a.dir.path().join("audit.jsonl")).expect("audit log");
    let entries: Vec<fleetop::model::action::ActionReport> =
        log.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    let done: Vec<_> = entries
        .iter()
        .filter(|e| e.stage != fleetop::model::action::Stage::Started)
        .collect();
    assert_eq!(done.len(), 2, "one refusal a node: {entries:#?}");
    for e in done {
        assert_eq!(e.stage, fleetop::model::action::Stage::Refused, "{e:?}");
        assert_eq!(e.refused.as_deref(), Some("wrong bench token"));
        assert!(e.results.is_empty(), "no result, failed or not: {e:?}");
    }

    let out = a.bench(&["--read-only"]);
    assert!(!out.status.success() && out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only mode: bench refused"));

    let out = crate::fleetop()
        .env("FLEETOP_AUDIT_LOG", a.dir.path().join("audit.jsonl"))
        .args(["bench", "--hosts", &a.hosts, "--token-file"])
        .arg(a.dir.path().join("token"))
        .arg("--tls-ca")
        .arg(a.dir.path().join("ca.pem"))
        .write_stdin("")
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --yes"));
}

async fn agent(max: Duration, token: Option<&str>) -> fleetop_agent::serve::server::AgentHandle {
    let bench = token.map(|t| fleetop_agent::serve::server::BenchSettings {
        token: t.into(),
        expectations: fleetop_agent::bench::expect::Expectations::load(None).expect("shipped"),
        max_duration: max,
    });
    let sim = fleetop::ingest::demo::plan(1, 1, 1, fleetop_agent::now_ms()).remove(0);
    // Plaintext, for the suite logic: these clients are in this process.
    let o = fleetop_agent::serve::server::AgentOptions {
        bench,
        insecure: true,
        ..Default::default()
    };
    fleetop_agent::serve::server::serve_sim(sim, o).await.expect("serves")
}

fn req(suite: &str) -> BenchRequest {
    BenchRequest {
        token: "t".into(),
        suite: suite.into(),
        timeout_s: 0,
        net_target: String::new(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_suite_at_a_time_and_cancelling_frees_the_agent() {
    let a = agent(Duration::from_secs(600), Some("t")).await;
    let mut c = AgentClient::connect(format!("http://{}", a.addr))
        .await
        .expect("connects");
    let sampled_before = a.samples_taken();
    let first = c.run_bench(req("full")).await.expect("starts").into_inner();
    let busy = c.run_bench(req("quick")).await.expect_err("a second suite is refused");
    assert_eq!(busy.code(), tonic::Code::ResourceExhausted);
    assert!(busy.message().contains("busy"));
    // The console goes away: the suite stops and the agent takes the next one.
    drop(first);
    let start = Instant::now();
    loop {
        match c.run_bench(req("quick")).await {
            Ok(_) => break,
            Err(s) if s.code() == tonic::Code::ResourceExhausted && start.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => panic!("cancelling did not free the agent: {s:?}"),
        }
    }
    // A bad suite name and a disabled agent are clear refusals.
    let bad = c.run_bench(req("forever")).await.expect_err("unknown suite");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    let off = agent(Duration::from_secs(1), None).await;
    let mut c = AgentClient::connect(format!("http://{}", off.addr))
        .await
        .expect("connects");
    let refused = c.run_bench(req("quick")).await.expect_err("disabled");
    assert!(refused.message().contains("--bench-token-file"), "{refused:?}");
    // Sampling went on all along on the agent that ran the suites: it keeps
    // taking samples, and a subscriber gets a live one.
    let start = Instant::now();
    while a.samples_taken() <= sampled_before + 1 {
        assert!(start.elapsed() < Duration::from_secs(30), "the agent stopped sampling");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c = AgentClient::connect(format!("http://{}", a.addr))
        .await
        .expect("connects");
    let req = SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    };
    let mut stream = c.subscribe(req).await.expect("subscribes").into_inner();
    let mut got_sample = false;
    while let Some(m) = stream.message().await.expect("stream") {
        if matches!(m.kind, Some(fleetop_agent::proto::agent_message::Kind::Sample(_))) {
            got_sample = true;
            break;
        }
    }
    assert!(got_sample, "a live sample from the agent that ran the suites");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_own_bound_ends_a_suite() {
    let a = agent(Duration::from_millis(1), Some("t")).await;
    let mut c = AgentClient::connect(format!("http://{}", a.addr))
        .await
        .expect("connects");
    let mut s = c.run_bench(req("full")).await.expect("starts").into_inner();
    let mut done = None;
    while let Some(ev) = s.message().await.expect("stream") {
        if let Some(Kind::Done(d)) = ev.kind {
            done = Some(d);
        }
    }
    let d = done.expect("a done event");
    assert!(d.error.contains("timed out"), "{d:?}");
}

/// A suite's answer ends with its verdict, not at the agent's bound: a
/// client that reads to the end (grpcurl, a script) is not held for the
/// half hour the agent allows a suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suites_answer_ends_with_its_verdict_not_at_the_bound() {
    let a = agent(Duration::from_secs(1800), Some("t")).await;
    let mut c = AgentClient::connect(format!("http://{}", a.addr))
        .await
        .expect("connects");
    let mut s = c.run_bench(req("quick")).await.expect("starts").into_inner();
    let mut done = None;
    let read_to_the_end = async {
        while let Some(ev) = s.message().await.expect("stream") {
            if let Some(Kind::Done(d)) = ev.kind {
                done = Some(d);
            }
        }
    };
    // Not a speed test: the quick suite takes seconds; the bound is 30 min.
    tokio::time::timeout(Duration::from_secs(240), read_to_the_end)
        .await
        .expect("the answer ends after the verdict");
    let d = done.expect("a done event");
    assert!(d.error.is_empty(), "{d:?}");
}

/// A burn-in's verdict belongs to the node: the agent that ran it keeps it,
/// with who asked and the node as it knew it, and tells every console. One
/// connected before the suite gets it live on its stream; one that
/// connects later finds it in the node's description; the caller gets it
/// with the verdict. A suite the agent refused leaves no record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_keeps_each_verdict_and_tells_every_console_at_once() {
    use fleetop_agent::proto::agent_message::Kind as Msg;
    let a = agent(Duration::from_secs(600), Some("t")).await;
    let mut c = AgentClient::connect(format!("http://{}", a.addr))
        .await
        .expect("connects");
    // A wrong token: refused, nothing kept.
    let mut wrong = req("quick");
    wrong.token = "guess".into();
    assert!(c.run_bench(wrong).await.is_err());
    // A console watching the node, connected before the suite.
    let live = SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    };
    let mut watching = c.subscribe(live).await.expect("subscribes").into_inner();
    let first = watching.message().await.expect("stream").expect("a message");
    let Some(Msg::Info(info)) = first.kind else {
        panic!("a description first: {first:?}")
    };
    assert!(
        info.burn_ins.is_empty(),
        "the refusal left no record: {:?}",
        info.burn_ins
    );
    assert!(!info.machine_id.is_empty(), "a simulated node has an id of its own");
    let mut run = req("quick");
    run.requested_by = "alice@console1".into();
    let mut s = c.run_bench(run).await.expect("starts").into_inner();
    let mut done = None;
    while let Some(ev) = s.message().await.expect("stream") {
        if let Some(Kind::Done(d)) = ev.kind {
            done = Some(d);
        }
    }
    let kept = done.and_then(|d| d.record).expect("the verdict as the agent keeps it");
    // Judged as the caller judges it (a host figure may fall below its
    // floor on a busy machine: then it failed, and says so).
    let failed = kept
        .checks
        .iter()
        .any(|c| c.verdict == fleetop_agent::proto::Verdict::Fail as i32);
    assert_eq!(kept.passed, !failed, "{kept:?}");
    assert_eq!(kept.requested_by, "alice@console1");
    assert_eq!(
        (kept.hostname.as_str(), kept.machine_id.as_str()),
        (info.hostname.as_str(), info.machine_id.as_str())
    );
    assert_eq!(
        kept.gpu_uuids,
        info.gpus.iter().map(|g| g.uuid.clone()).collect::<Vec<_>>()
    );
    assert!(kept.checks.iter().any(|c| c.name == "hbm_d2d"), "{kept:?}");
    // The watching console is told at once.
    let heard = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(m) = watching.message().await.expect("stream") {
            if let Some(Msg::BurnIn(b)) = m.kind {
                return b;
            }
        }
        panic!("the stream ended")
    })
    .await
    .expect("the verdict reached the watching console");
    assert_eq!(heard, kept);
    // A console that connects later reads it in the description.
    let mut later = c.subscribe(live).await.expect("subscribes").into_inner();
    let first = later.message().await.expect("stream").expect("a message");
    let Some(Msg::Info(info)) = first.kind else {
        panic!("a description first")
    };
    assert_eq!(info.burn_ins, vec![kept]);
}
