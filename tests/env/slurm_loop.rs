//! The loop fault -> drain -> burn-in -> return to service, against a real
//! Slurm: `fleetop node return` resuming only the nodes that pass a burn-in
//! on their agents (one agent's simulated GPU has a degraded PCIe link and
//! fails), leaving someone else's drain alone unless forced; `fleetop node
//! history`; and the remediation policy of `fleetop watch`, its grace
//! period, its breaker at 20 faulty nodes of 40, and a restart that drains
//! nothing twice and announces nothing twice; two watches with their own
//! state directories over one Slurm, of which one acts and neither drains
//! past the limit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetop::model::action::{AuditLine, NodeAction, Stage};

use crate::support::{log_of, wait_log, wait_until};

use crate::slurm_harness::SlurmCluster;
use crate::support::receiver::Receiver;

/// Agents for the Slurm nodes: one swarm per scenario, `(scenario, count)`,
/// mapped to gpu01, gpu02, ... in that order; burn-in on, token "s3cret",
/// plaintext (the console passes --insecure).
struct Loop {
    cluster: SlurmCluster,
    swarms: Vec<Child>,
    /// Just before the agents were started (ms since the epoch).
    swarms_at_ms: i64,
    dir: tempfile::TempDir,
}

impl Drop for Loop {
    fn drop(&mut self) {
        for s in &mut self.swarms {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

fn start_swarm(dir: &Path, scenario: &str, count: usize, i: usize) -> (Child, PathBuf) {
    let hosts = dir.join(format!("agents-{i}"));
    let child = Command::new(crate::agent_bin())
        .arg("--insecure")
        .args(["swarm", "--count", &count.to_string(), "--sim-gpus", "2"])
        .args(["--sim-scenario", scenario, "--sim-seed", &(i + 1).to_string()])
        .arg("--hostfile")
        .arg(&hosts)
        .arg("--bench-token-file")
        .arg(dir.join("token"))
        .arg("--bench-expectations")
        .arg(crate::support::lenient_expectations(dir))
        .stderr(Stdio::null())
        .spawn()
        .expect("agents start");
    (child, hosts)
}

fn setup(swarms: &[(&str, usize)], slurm_extra: &str) -> Loop {
    let n: usize = swarms.iter().map(|s| s.1).sum();
    let cluster = match SlurmCluster::start(&format!("gpu[01-{n:02}]")) {
        Ok(Some(c)) => c,
        Ok(None) => panic!("Slurm is not installed (the harness reports this test ignored then)"),
        Err(e) => panic!("Slurm is installed but did not start: {e}"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    crate::write_secret(&dir.path().join("token"), "s3cret\n");
    let swarms_at_ms = fleetop::model::time::now_ms();
    let mut children = Vec::new();
    let mut files = Vec::new();
    for (i, (scenario, count)) in swarms.iter().enumerate() {
        let (c, f) = start_swarm(dir.path(), scenario, *count, i);
        children.push(c);
        files.push(f);
    }
    let start = Instant::now();
    let mut addrs = Vec::new();
    for f in &files {
        while !f.exists() {
            assert!(start.elapsed() < Duration::from_secs(60), "agents did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        addrs.extend(std::fs::read_to_string(f).expect("addresses").lines().map(String::from));
    }
    let mut cfg = format!(
        "bench_token_file = \"{}\"\n[slurm]\nrefresh = \"1s\"\n{slurm_extra}[slurm.agents]\n",
        dir.path().join("token").display()
    );
    for (i, a) in addrs.iter().enumerate() {
        cfg.push_str(&format!("gpu{:02} = \"{a}\"\n", i + 1));
    }
    std::fs::write(dir.path().join("config.toml"), cfg).expect("config");
    Loop {
        cluster,
        swarms: children,
        swarms_at_ms,
        dir,
    }
}

impl Loop {
    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }

    fn fleetop(&self) -> assert_cmd::Command {
        let mut c = crate::fleetop();
        c.envs(self.cluster.env())
            .env("FLEETOP_AUDIT_LOG", self.path("state/audit.jsonl"))
            .arg("--config")
            .arg(self.path("config.toml"));
        c
    }

    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.fleetop().args(args).output().expect("runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    fn reason(&self, node: &str) -> String {
        self.cluster.node_reason(node)
    }

    /// When Slurm's reason was set (`sinfo -o %H`).
    fn reason_time(&self, node: &str) -> String {
        let out = self
            .cluster
            .command("sinfo")
            .args(["-h", "-N", "-n", node, "-o", "%H"])
            .output()
            .expect("sinfo");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn state(&self, node: &str) -> String {
        self.cluster.node_state(node)
    }

    fn wait(&self, node: &str, state: &str) {
        self.cluster
            .wait_state(node, state, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn audit(&self) -> Vec<fleetop::model::action::ActionReport> {
        std::fs::read_to_string(self.path("state/audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                serde_json::from_str::<AuditLine>(l)
                    .expect("each audit line is a report")
                    .into_report()
            })
            .collect()
    }

    fn scontrol_drain(&self, node: &str, reason: &str) {
        let ok = self
            .cluster
            .command("scontrol")
            .args([
                "update",
                &format!("NodeName={node}"),
                "State=DRAIN",
                &format!("Reason={reason}"),
            ])
            .status()
            .expect("scontrol");
        assert!(ok.success());
    }
}

/// The result line of `node` in a text report.
fn line<'a>(stdout: &'a str, node: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(node))
        .unwrap_or_else(|| panic!("{node} in {stdout}"))
}

pub fn return_resumes_only_the_nodes_that_pass_a_burn_in_since_their_drain() {
    // gpu01-gpu03 healthy; gpu04's GPU has a PCIe link trained to half width.
    let env = setup(&[("training", 3), ("pcie-degraded", 1)], "");
    for n in ["gpu01", "gpu02", "gpu04"] {
        let (ok, out, err) = env.run(&["node", "drain", n, "--yes", "--reason", "xid 79 on gpu 1"]);
        assert!(ok, "{out}{err}");
        env.wait(n, "drained");
    }
    assert_eq!(env.reason("gpu01"), "fleetop: xid 79 on gpu 1");
    // A colleague's drain, made with scontrol: not fleetop's to undo.
    env.scontrol_drain("gpu03", "maintenance: PSU swap");
    env.wait("gpu03", "drained");
    let (ok, out, _) = env.run(&["node", "resume", "gpu03", "--yes"]);
    assert!(!ok, "{out}");
    assert!(
        line(&out, "gpu03").contains("FAIL") && out.contains("maintenance: PSU swap") && out.contains("--force"),
        "{out}"
    );
    assert_eq!(env.state("gpu03"), "drained");

    // Read-only refuses, nothing runs.
    let (ok, _, err) = env.run(&["--read-only", "node", "return", "gpu[01-04]", "--yes"]);
    assert!(!ok && err.contains("read-only mode: return refused"), "{err}");
    assert_eq!(env.state("gpu01"), "drained");

    // The simulated fault begins 20 s after its agent starts.
    let onset = env.swarms_at_ms + 22_000;
    while fleetop::model::time::now_ms() < onset {
        std::thread::sleep(Duration::from_millis(200));
    }
    // No burn-in has passed since the drains: one runs, then only the
    // nodes that passed are resumed.
    let (ok, out, err) = env.run(&["--insecure", "node", "return", "gpu[01-04]", "--yes"]);
    assert!(!ok, "gpu04 failed and gpu03 is someone else's: non-zero\n{out}{err}");
    assert!(
        err.contains("no passing burn-in on its own agent since the drain"),
        "the plan said why: {err}"
    );
    assert!(err.contains("RunBench suite=quick"), "the exact calls first: {err}");
    assert!(
        err.contains("2 of 4 node(s) not returned to service: gpu[03-04]"),
        "{err}"
    );
    for n in ["gpu01", "gpu02"] {
        assert!(line(&out, n).contains("ok"), "{out}");
        env.wait(n, "idle");
    }
    assert!(line(&out, "gpu03").contains("not drained by fleetop"), "{out}");
    assert_eq!(
        (env.state("gpu03"), env.reason("gpu03")),
        ("drained".into(), "maintenance: PSU swap".into())
    );
    // gpu04 failed: it stays drained, and Slurm still says why it was
    // drained and since when; the failing check is in the result.
    assert_eq!(env.state("gpu04"), "drained");
    assert_eq!(env.reason("gpu04"), "fleetop: xid 79 on gpu 1", "the reason untouched");
    assert!(
        line(&out, "gpu04").contains("burn-in quick failed: pcie_h2d gpu"),
        "{out}"
    );

    // Every step in the audit log: the return before it ran, the burn-in,
    // the resume, the return's results.
    let log = env.audit();
    let steps: Vec<(NodeAction, Stage)> = log.iter().map(|r| (r.action, r.stage)).collect();
    let at = steps
        .iter()
        .position(|s| *s == (NodeAction::Return, Stage::Started))
        .expect("return logged before it ran");
    assert_eq!(
        steps[at + 1..at + 3],
        [(NodeAction::Bench, Stage::Started), (NodeAction::Bench, Stage::Done)],
        "{steps:?}"
    );
    let bench = &log[at + 2];
    assert_eq!(bench.nodes, ["gpu01", "gpu02", "gpu04"], "gpu03 was not touched");
    let done = log.last().expect("the return's results");
    assert_eq!((done.action, done.stage), (NodeAction::Return, Stage::Done));
    assert_eq!(done.results.iter().filter(|r| r.ok).count(), 2, "{done:?}");

    // gpu04 again: its burn-in after the drain failed, so another runs (and
    // fails again); nothing passes without a passing burn-in.
    let (ok, out, _) = env.run(&["--insecure", "node", "return", "gpu04", "--yes"]);
    assert!(!ok && line(&out, "gpu04").contains("FAIL"), "{out}");
    assert_eq!(env.state("gpu04"), "drained");

    // --force returns the colleague's node too, after its own burn-in.
    let (ok, out, err) = env.run(&["--insecure", "node", "return", "gpu03", "--yes", "--force"]);
    assert!(ok, "{out}{err}");
    env.wait("gpu03", "idle");

    // The node's history: the drain, the burn-in and the return, with who.
    let (ok, out, err) = env.run(&["node", "history", "gpu04", "--format", "json"]);
    assert!(ok, "{err}");
    let events: Vec<serde_json::Value> = serde_json::from_str(&out).expect("json");
    let texts: Vec<&str> = events.iter().filter_map(|e| e["text"].as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("drain ok (fleetop: xid 79 on gpu 1)")),
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("bench FAILED (suite quick)")),
        "{texts:#?}"
    );
    assert!(texts.iter().any(|t| t.starts_with("return FAILED")), "{texts:#?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("burn-in quick FAILED: pcie_h2d gpu")),
        "the verdict as the node's agent keeps it: {texts:#?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e["node"] == "gpu04" && e["by"].as_str().is_some_and(|b| b.starts_with("root"))),
        "{events:#?}"
    );
}

/// The loop on evidence every console shares. A node is drained for a
/// fault; the demo's node of the same name passes a burn-in, which writes
/// nothing into the user's audit log and does not count; a burn-in run by
/// the node's address on its own agent is filed under the host name that
/// agent reports, and its pass, kept by that agent, returns the node
/// without another burn-in.
pub fn a_demo_burn_in_never_returns_a_real_node_and_a_pass_on_its_own_agent_does() {
    let env = setup(&[("training", 2)], "");
    let (ok, out, err) = env.run(&["node", "drain", "gpu02", "--yes", "--reason", "xid 79 on gpu 1"]);
    assert!(ok, "{out}{err}");
    env.wait("gpu02", "drained");
    // Slurm's reason times are to the second: the burn-ins come after.
    std::thread::sleep(Duration::from_millis(1_100));
    let logged = env.audit().len();

    // The demo's gpu02 passes a burn-in: nothing of it reaches the user's
    // audit log, and the real gpu02's return does not count it.
    let (_, out, err) = env.run(&["bench", "--demo", "--nodes", "2", "--yes"]);
    let demo: fleetop::model::bench::BenchReport = serde_json::from_str(&out).expect("report");
    assert!(
        demo.nodes.iter().any(|n| n.name == "gpu02" && n.ok),
        "the demo's gpu02 passed: {out}{err}"
    );
    assert_eq!(env.audit().len(), logged, "the demo wrote nothing to the audit log");
    // Without --yes and with no terminal, the plan is shown and nothing runs.
    let (ok, _, err) = env.run(&["--insecure", "node", "return", "gpu02"]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("gpu02: burn-in (quick) first: no passing burn-in on its own agent since the drain"),
        "the demo's pass does not count: {err}"
    );
    assert_eq!(env.state("gpu02"), "drained");

    // A burn-in on the node's own agent, asked by its address.
    let cfg = std::fs::read_to_string(env.path("config.toml")).expect("config");
    let addr = cfg
        .lines()
        .find_map(|l| l.strip_prefix("gpu02 = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("gpu02's agent")
        .to_string();
    let (ok, out, err) = env.run(&[
        "bench",
        "--hosts",
        &addr,
        "--insecure",
        "--yes",
        "--token-file",
        env.path("token").to_str().expect("utf-8"),
    ]);
    assert!(ok, "{out}{err}");
    let report: fleetop::model::bench::BenchReport = serde_json::from_str(&out).expect("report");
    let host = report.nodes[0].name.clone();
    assert!(
        host.parse::<std::net::IpAddr>().is_err() && !host.contains(':'),
        "filed under the agent's host name, not {addr}: {host}"
    );
    let bench = env
        .audit()
        .into_iter()
        .rfind(|r| r.action == NodeAction::Bench && r.stage == Stage::Done)
        .expect("the burn-in in the audit log");
    assert_eq!(bench.results[0].node, host);

    // The return finds that pass on gpu02's own agent: no burn-in runs.
    let (ok, out, err) = env.run(&["--insecure", "node", "return", "gpu02", "--yes"]);
    assert!(ok, "{out}{err}");
    assert!(err.contains("on its own agent"), "{err}");
    assert!(!err.contains("RunBench"), "no second burn-in: {err}");
    env.wait("gpu02", "idle");
}

/// A node that lost a GPU (gpu_missing, crit) is drained; its return is
/// refused while the fault is up, naming it; forced, its burn-in fails for
/// the GPU it cannot measure; Slurm's reason and its time survive both;
/// repaired (its agent back with both GPUs), it passes and goes back.
pub fn a_node_missing_a_gpu_is_refused_then_fails_then_returns_once_repaired() {
    let env = setup(&[("training", 1), ("gpu-missing", 1)], "");
    let (ok, out, err) = env.run(&[
        "node",
        "drain",
        "gpu02",
        "--yes",
        "--reason",
        "gpu_missing: 1 of 2 GPUs",
    ]);
    assert!(ok, "{out}{err}");
    env.wait("gpu02", "drained");
    let (reason, since) = (env.reason("gpu02"), env.reason_time("gpu02"));
    assert_eq!(reason, "fleetop: gpu_missing: 1 of 2 GPUs");
    // Slurm's reason times are to the second: a rewrite would show.
    std::thread::sleep(Duration::from_millis(1_100));

    // Refused while the fault is up, naming it; no burn-in, nothing run.
    let (ok, out, err) = env.run(&["--insecure", "node", "return", "gpu02", "--yes"]);
    assert!(!ok, "{out}{err}");
    assert!(
        line(&out, "gpu02").contains("FAIL") && out.contains("gpu_missing on node") && out.contains("--force"),
        "{out}"
    );
    assert!(!err.contains("RunBench"), "no burn-in in the plan: {err}");
    // `resume` too: the same refusal, unless forced.
    let (ok, out, _) = env.run(&["--insecure", "node", "resume", "gpu02", "--yes"]);
    assert!(!ok && line(&out, "gpu02").contains("gpu_missing on node"), "{out}");
    assert_eq!(env.state("gpu02"), "drained");

    // Forced: the burn-in runs, passes on the GPU that answers, and fails
    // the node for the one it cannot measure, the cause said once.
    let (ok, out, err) = env.run(&["--insecure", "node", "return", "gpu02", "--yes", "--force"]);
    assert!(!ok, "{out}{err}");
    assert!(err.contains("RunBench suite=quick"), "{err}");
    assert!(
        err.contains("FORCED past: gpu_missing on node"),
        "what --force lifts is named before it runs: {err}"
    );
    assert!(
        line(&out, "gpu02").contains("gpu_missing: 1 of 2 GPUs measured"),
        "{out}"
    );
    assert_eq!(env.state("gpu02"), "drained");
    assert_eq!(
        (env.reason("gpu02"), env.reason_time("gpu02")),
        (reason.clone(), since.clone()),
        "why and since when it was drained, as they were"
    );
    let forced = env
        .audit()
        .into_iter()
        .rfind(|r| r.action == NodeAction::Return && r.stage == Stage::Done)
        .expect("the return's results");
    assert!(forced.forced, "a forced return is audited as one: {forced:?}");
    assert!(
        forced.overrides["gpu02"]
            .iter()
            .any(|o| o.starts_with("gpu_missing on node")),
        "and with what it overrode: {forced:?}"
    );

    // Repaired: the node's agent is back with both GPUs, at a new address.
    let (fixed, hosts) = start_swarm(env.dir.path(), "training", 1, 9);
    let start = Instant::now();
    while !hosts.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "agent did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _fixed = crate::Killed(fixed);
    let addr = std::fs::read_to_string(&hosts).expect("address");
    let cfg = std::fs::read_to_string(env.path("config.toml")).expect("config");
    let old = cfg
        .lines()
        .find(|l| l.starts_with("gpu02 = "))
        .expect("gpu02's line")
        .to_string();
    std::fs::write(
        env.path("config.toml"),
        cfg.replace(&old, &format!("gpu02 = \"{}\"", addr.trim())),
    )
    .expect("config");
    let (ok, out, err) = env.run(&["--insecure", "node", "return", "gpu02", "--yes"]);
    assert!(ok, "{out}{err}");
    assert!(line(&out, "gpu02").contains("ok"), "{out}");
    env.wait("gpu02", "idle");

    // The timeline tells it: the drain, the two failed returns, the pass.
    let (ok, out, err) = env.run(&["node", "history", "gpu02", "--format", "json"]);
    assert!(ok, "{err}");
    let events: Vec<serde_json::Value> = serde_json::from_str(&out).expect("json");
    let texts: Vec<&str> = events.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(
        texts.iter().filter(|t| t.starts_with("return FAILED")).count(),
        2,
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("bench FAILED (suite quick)")),
        "{texts:#?}"
    );
    let failed = texts.iter().rposition(|t| t.starts_with("return FAILED"));
    let passed = texts.iter().position(|t| t.starts_with("return ok"));
    assert!(passed > failed, "the pass after the failures: {texts:#?}");
}

fn watch(env: &Loop, webhook: u16, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .envs(env.cluster.env())
        .env("FLEETOP_AUDIT_LOG", env.path("state/audit.jsonl"))
        .arg("--config")
        .arg(env.path("config.toml"))
        .args(["watch", "--slurm", "--remediate", "drain", "--webhook"])
        .arg(format!("http://127.0.0.1:{webhook}/hook"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("watch starts")
}

fn stop(mut c: Child) {
    let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
    let _ = c.wait();
}

pub fn the_policy_drains_crit_nodes_after_grace_and_its_breaker_stops_a_fleet_wide_event() {
    // 40 nodes: gpu01 hot (a warn flag: never the policy's), gpu02-gpu21
    // lose a GPU (XID 79, crit, reboot_node), gpu22-gpu40 healthy. The
    // breaker allows 10% of 40: 4 drains an hour.
    let env = setup(&[("hot", 1), ("xid79", 20), ("training", 19)], "");
    // The config says dry-run; --remediate drain on the command line wins.
    let cfg = std::fs::read_to_string(env.path("config.toml")).expect("config");
    std::fs::write(
        env.path("config.toml"),
        format!("{cfg}[remediate]\nmode = \"dry-run\"\ngrace = \"20s\"\n"),
    )
    .expect("config");
    // A colleague already drained one of the faulty nodes.
    env.scontrol_drain("gpu02", "waiting for RMA");
    let hook = Receiver::start();
    let log1 = env.path("watch-1.log");
    let w = watch(&env, hook.port, &log1);
    let audit_drains = |env: &Loop| -> Vec<fleetop::model::action::ActionReport> {
        env.audit()
            .into_iter()
            .filter(|r| r.action == NodeAction::Drain && r.stage == Stage::Done)
            .collect()
    };
    // Until the breaker trips: 4 nodes drained, then it stops.
    let start = Instant::now();
    while !log_of(&log1).contains("BREAKER TRIPPED") {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the breaker never tripped:\n{}",
            log_of(&log1)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let drains = audit_drains(&env);
    let nodes: Vec<String> = drains.iter().map(|r| r.nodes[0].clone()).collect();
    let faulty = |n: &str| n[3..].parse::<u32>().is_ok_and(|i| (3..=21).contains(&i));
    assert_eq!(nodes.len(), 4, "the breaker's limit: {nodes:?}");
    assert!(
        nodes.iter().all(|n| faulty(n)),
        "only faulty nodes, never gpu01 (warn) or gpu02 (someone else's): {nodes:?}"
    );
    for r in &drains {
        assert_eq!(
            r.policy.as_deref(),
            Some("remediate"),
            "the policy acted, for this user: {r:?}"
        );
        assert!(r.actor.name.is_some());
        assert!(
            r.reason
                .as_deref()
                .is_some_and(|x| x.starts_with("fleetop-policy: ") && x.contains(" on gpu")),
            "the catalog's reason: {r:?}"
        );
        // After the grace period: the fault begins 20 s after its agent
        // starts, and 20 s of grace follow (a lower bound, whatever this
        // machine's speed).
        let at = fleetop::ops::timeline::parse_time(&r.time).expect("time");
        let up = env.swarms_at_ms;
        assert!(at - up >= 40_000, "drained {} ms after the agents started", at - up);
    }
    for n in &nodes {
        assert!(env.reason(n).starts_with("fleetop-policy: "), "{n}: {}", env.reason(n));
    }
    assert_eq!(env.reason("gpu02"), "waiting for RMA", "someone else's drain untouched");
    let still: Vec<String> = (3..=21)
        .map(|i| format!("gpu{i:02}"))
        .filter(|n| !nodes.contains(n))
        .collect();
    assert!(still.iter().all(|n| env.state(n) == "idle"), "the breaker held");
    assert_eq!(env.state("gpu01"), "idle", "a warn is not the policy's");
    // Notified: each drain and the breaker, once.
    let raised = |name: &str| {
        hook.all()
            .iter()
            .filter(|v| v["event"] == "raised" && v["alert"]["labels"]["alertname"] == name)
            .count()
    };
    hook.wait("the breaker alert", Duration::from_secs(30), |v| {
        v["alert"]["labels"]["alertname"] == "FleetopRemediationBreaker"
    });
    assert_eq!(raised("FleetopRemediationDrain"), 4);
    let status = env.run(&["remediate", "status"]);
    assert!(
        status.1.contains("breaker: TRIPPED") && status.1.contains(&nodes[0]),
        "{}",
        status.1
    );

    // A restart: still tripped, nothing drained twice, nothing announced twice.
    stop(w);
    let log2 = env.path("watch-2.log");
    let w = watch(&env, hook.port, &log2);
    let start = Instant::now();
    while !log_of(&log2).contains("the breaker is tripped") {
        assert!(start.elapsed() < Duration::from_secs(60), "{}", log_of(&log2));
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(audit_drains(&env).len(), 4, "no second drain");
    assert_eq!(
        (raised("FleetopRemediationDrain"), raised("FleetopRemediationBreaker")),
        (4, 1)
    );

    // `reset` asks first: without a terminal and without --yes, nothing.
    let (ok, _, err) = env.run(&["remediate", "reset"]);
    assert!(!ok && err.contains("not confirmed"), "{err}");
    assert!(env.run(&["remediate", "status"]).1.contains("breaker: TRIPPED"));

    // No state file can empty the window: deleted, the restarted policy
    // counts the 4 drains of the hour from the audit log and trips again
    // at once, draining nothing.
    stop(w);
    std::fs::remove_file(env.path("state/remediate.json")).expect("the state file");
    let log3 = env.path("watch-3.log");
    let w = watch(&env, hook.port, &log3);
    let start = Instant::now();
    while !log_of(&log3).contains("BREAKER TRIPPED") {
        assert!(start.elapsed() < Duration::from_secs(90), "{}", log_of(&log3));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        log_of(&log3).contains("4 node(s) drained by the policy in the last 1h"),
        "{}",
        log_of(&log3)
    );
    assert!(
        log_of(&log3).contains("10% of the fleet, at least 1"),
        "said plainly: {}",
        log_of(&log3)
    );
    assert_eq!(audit_drains(&env).len(), 4, "nothing drained past the limit");
    let status = env.run(&["remediate", "status"]).1;
    assert!(
        status.contains("drains in the last 1h (Slurm's reasons and the audit log): 4"),
        "{status}"
    );

    // A person lifts the stop: it says the window still counts, the next
    // node is named, and nothing more is drained within the hour.
    let (ok, out, err) = env.run(&["remediate", "reset", "--yes"]);
    assert!(ok && out.contains("re-armed"), "{out}{err}");
    assert!(err.contains("still count") && err.contains("when it tripped"), "{err}");
    let reset = env
        .audit()
        .into_iter()
        .find(|r| r.action == NodeAction::RemediateReset && r.stage == Stage::Done)
        .expect("the reset is in the audit log");
    assert!(reset.actor.name.is_some() && reset.results[0].state_after.as_deref() == Some("armed"));
    let start = Instant::now();
    while log_of(&log3).matches("BREAKER TRIPPED").count() < 2 {
        assert!(start.elapsed() < Duration::from_secs(60), "{}", log_of(&log3));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(audit_drains(&env).len(), 4, "the window still holds its 4");
    stop(w);
}

/// A watch stopped (SIGTERM) when dropped, a failed test's too.
struct Running(Option<Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            stop(c);
        }
    }
}

/// A watch in drain mode with a state directory of its own
/// (`FLEETOP_AUDIT_LOG` and `XDG_STATE_HOME` under `state`), no pager.
fn watch_in(env: &Loop, state: &str, log: &Path) -> Running {
    let dir = env.path(state);
    std::fs::create_dir_all(&dir).expect("state dir");
    Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .env("XDG_STATE_HOME", dir.join("xdg"))
        .envs(env.cluster.env())
        .env("FLEETOP_AUDIT_LOG", dir.join("audit.jsonl"))
        .arg("--config")
        .arg(env.path("config.toml"))
        .args(["watch", "--slurm", "--remediate", "drain"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .map(|c| Running(Some(c)))
        .expect("watch starts")
}

pub fn two_watches_with_their_own_state_never_drain_past_the_limit_and_one_names_the_other() {
    // 8 nodes: gpu01-gpu04 lose a GPU (XID 79: crit, reboot_node),
    // gpu05-gpu08 are healthy. 25% of 8: 2 drains an hour.
    let env = setup(&[("xid79", 4), ("training", 4)], "");
    let cfg = std::fs::read_to_string(env.path("config.toml")).expect("config");
    std::fs::write(
        env.path("config.toml"),
        format!("{cfg}[remediate]\nmax_percent = 25\ngrace = \"5s\"\n"),
    )
    .expect("config");
    let marked = || -> Vec<String> {
        (1..=8)
            .map(|i| format!("gpu{i:02}"))
            .filter(|n| env.reason(n).starts_with("fleetop-policy: "))
            .collect()
    };
    // Two admins, two watches, two state directories, one Slurm.
    let (log_a, log_b) = (env.path("watch-a.log"), env.path("watch-b.log"));
    let a = watch_in(&env, "a", &log_a);
    let b = watch_in(&env, "b", &log_b);
    wait_until(
        180,
        || log_of(&log_a).contains("BREAKER TRIPPED") || log_of(&log_b).contains("BREAKER TRIPPED"),
        || {
            format!(
                "the breaker never tripped:\n--- a\n{}\n--- b\n{}",
                log_of(&log_a),
                log_of(&log_b)
            )
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    let drained = marked();
    assert_eq!(
        drained.len(),
        2,
        "the limit, over both watches: {drained:?}\n--- a\n{}\n--- b\n{}",
        log_of(&log_a),
        log_of(&log_b)
    );
    let a_acts = log_of(&log_a).contains("BREAKER TRIPPED");
    let (holder, other, holder_state, other_log) = if a_acts { (a, b, "a", log_b) } else { (b, a, "b", log_a) };
    // The other says, once, which watch acts: user, host, pid.
    let said = "the policy acts in another watch: ".to_string();
    let pid = format!(" pid {} (Slurm job ", holder.id());
    let text = log_of(&other_log);
    assert_eq!(text.matches(&said).count(), 1, "said once:\n{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&said) && l.contains(&pid) && l.contains('@')),
        "names the holder ({pid}):\n{text}"
    );
    assert!(!text.contains("remediate: drained "), "it drained nothing:\n{text}");

    // The holder stops cleanly and gives the lease back. The other takes
    // it; its own audit log holds no drain, but Slurm shows the two marks:
    // it trips, draining nothing.
    drop(holder);
    wait_log(&other_log, "holds the lease", 60);
    wait_log(&other_log, "BREAKER TRIPPED", 90);
    assert!(
        log_of(&other_log).contains("2 node(s) drained by the policy in the last 1h"),
        "{}",
        log_of(&other_log)
    );
    assert_eq!(marked(), drained, "nothing more drained");

    // A restart with the audit log moved aside and the state file gone
    // makes no room either.
    drop(other);
    let dir = env.path(holder_state);
    std::fs::rename(dir.join("audit.jsonl"), dir.join("audit.jsonl.moved")).expect("move the audit log");
    let _ = std::fs::remove_file(dir.join("remediate.json"));
    let log_c = env.path("watch-c.log");
    let c = watch_in(&env, holder_state, &log_c);
    wait_log(&log_c, "BREAKER TRIPPED", 90);
    assert!(
        log_of(&log_c).contains("2 node(s) drained by the policy in the last 1h"),
        "{}",
        log_of(&log_c)
    );
    assert_eq!(marked(), drained, "nothing more drained");
    // `remediate status` of that state directory counts the same, says
    // where each came from, and names the lease's holder.
    let out = env
        .fleetop()
        .env("FLEETOP_AUDIT_LOG", dir.join("audit.jsonl"))
        .args(["remediate", "status"])
        .output()
        .expect("status");
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains("drains in the last 1h (Slurm's reasons and the audit log): 2"),
        "{status}"
    );
    for n in &drained {
        assert!(
            status
                .lines()
                .any(|l| l.contains(n.as_str()) && l.contains("(from Slurm's reason)")),
            "{n}: {status}"
        );
    }
    assert!(
        status.contains("lease: held by ") && status.contains(&format!(" pid {} ", c.id())),
        "{status}"
    );
    drop(c);
    // A clean stop gave the lease back.
    let out = env
        .fleetop()
        .env("FLEETOP_AUDIT_LOG", dir.join("audit.jsonl"))
        .args(["remediate", "status"])
        .output()
        .expect("status");
    assert!(String::from_utf8_lossy(&out.stdout).contains("lease: free"));

    // A watch killed outright leaves its lease job behind. A watch on the
    // same host takes it over at once: the holder's process is gone.
    let log_d = env.path("watch-d.log");
    let mut d = watch_in(&env, "d", &log_d);
    wait_log(&log_d, "holds the lease", 60);
    let mut killed = d.0.take().expect("watch d");
    killed.kill().expect("kill -9");
    let _ = killed.wait();
    let log_e = env.path("watch-e.log");
    let e = watch_in(&env, "e", &log_e);
    wait_log(&log_e, "its process is gone from this host", 30);
    wait_log(&log_e, "holds the lease", 30);
    assert_eq!(marked(), drained, "nothing more drained");
    drop(e);
}
