//! The remediation policy on Kubernetes (`fleetop watch --kubernetes
//! --remediate dry-run|drain`), against the fake API server and real
//! agents (a swarm whose simulated GPUs fall off the bus, XID 79, 20 s
//! after it starts). Failures first: what is refused at start, a dry-run
//! that writes nothing, a Lease taken from under the watch, RBAC without
//! one rule; then the quarantine with its refusals and its breaker; then
//! two watches with their own state over one cluster, the holder killed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetop::model::action::{NodeAction, Stage};
use serde_json::{Value, json};

use crate::support::fake_kube::{ADMIN_TOKEN, FakeApi, Req, State, kubeconfig, node, pod};
use crate::support::fake_kube_lease::rules_of;
use crate::support::{log_of, wait_log, wait_until};

/// A swarm of simulated agents, killed when dropped.
struct Swarm(Child);

impl Drop for Swarm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A watch, killed (SIGTERM: a clean stop) when dropped.
struct Watch(Option<Child>);

impl Watch {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM, and the wait.
    fn stop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            let _ = c.wait();
        }
    }

    /// SIGKILL: no clean stop, the Lease is not given back.
    fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Env {
    api: FakeApi,
    dir: tempfile::TempDir,
    _swarms: Vec<Swarm>,
    /// Just before the agents started (ms since the epoch).
    started_ms: i64,
}

/// `xid` nodes that lose a GPU (gpu01, ...) and `healthy` ones after them,
/// each a GPU node of the fake with a pod holding GPUs and one holding
/// none; `[remediate]` with a 2 s grace, `extra` after it.
fn setup(xid: usize, healthy: usize, extra: &str) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::write_secret(&dir.path().join("token"), "s3cret\n");
    let started_ms = fleetop::model::time::now_ms();
    let mut swarms = Vec::new();
    let mut files = Vec::new();
    for (i, (scenario, count)) in [("xid79", xid), ("training", healthy)].into_iter().enumerate() {
        if count == 0 {
            continue;
        }
        let hosts = dir.path().join(format!("agents-{i}"));
        let child = Command::new(crate::agent_bin())
            .arg("--insecure")
            .args(["swarm", "--count", &count.to_string(), "--sim-gpus", "2"])
            .args(["--sim-scenario", scenario, "--sim-seed", &(i + 1).to_string()])
            .arg("--hostfile")
            .arg(&hosts)
            .arg("--bench-token-file")
            .arg(dir.path().join("token"))
            .stderr(Stdio::null())
            .spawn()
            .expect("agents start");
        swarms.push(Swarm(child));
        files.push(hosts);
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
    let mut st = State::default();
    st.tokens.insert(ADMIN_TOKEN.into(), "admin");
    let mut cfg = format!("[remediate]\ngrace = \"2s\"\nlease_duration = \"8s\"\n{extra}\n[agents]\n");
    for (i, a) in addrs.iter().enumerate() {
        let name = format!("gpu{:02}", i + 1);
        cfg.push_str(&format!("{name} = \"{a}\"\n"));
        st.nodes.insert(
            name.clone(),
            node(&name, &format!("10.0.0.{}", i + 1), Some(2), false, json!({})),
        );
        st.pods.push(pod(
            "ml",
            &format!("train-{name}"),
            &name,
            Some("StatefulSet"),
            2,
            false,
        ));
        st.pods.push(pod(
            "web",
            &format!("cache-{name}"),
            &name,
            Some("ReplicaSet"),
            0,
            false,
        ));
    }
    std::fs::write(dir.path().join("config.toml"), cfg).expect("config");
    Env {
        api: FakeApi::start(st),
        dir,
        _swarms: swarms,
        started_ms,
    }
}

impl Env {
    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }

    fn kubeconfig(&self, token: &str) -> PathBuf {
        let d = self.path(&format!("kc-{token}"));
        std::fs::create_dir_all(&d).expect("dir");
        kubeconfig(&d, &self.api.url(), token)
    }

    /// `fleetop watch --kubernetes --remediate MODE` with a state directory
    /// of its own (`XDG_STATE_HOME` and the audit log under `state`).
    fn watch(&self, state: &str, mode: &str, token: &str) -> (Watch, PathBuf) {
        let dir = self.path(state);
        std::fs::create_dir_all(&dir).expect("state dir");
        let log = self.path(&format!("{state}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_fleetop"))
            .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
            .env("XDG_STATE_HOME", dir.join("xdg"))
            .env("FLEETOP_AUDIT_LOG", dir.join("audit.jsonl"))
            .env_remove("KUBECONFIG")
            .env_remove("FLEETOP_LOG")
            .arg("--config")
            .arg(self.path("config.toml"))
            .args([
                "watch",
                "--kubernetes",
                "--kube-refresh",
                "1s",
                "--remediate",
                mode,
                "--kubeconfig",
            ])
            .arg(self.kubeconfig(token))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("watch starts");
        (Watch(Some(child)), log)
    }

    /// `fleetop remediate status --kubernetes` of the state directory `state`.
    fn status(&self, state: &str, token: &str) -> String {
        let out = crate::fleetop()
            .env("XDG_STATE_HOME", self.path(state).join("xdg"))
            .env("FLEETOP_AUDIT_LOG", self.path(state).join("audit.jsonl"))
            .env_remove("KUBECONFIG")
            .arg("--config")
            .arg(self.path("config.toml"))
            .args(["remediate", "status", "--kubernetes", "--kubeconfig"])
            .arg(self.kubeconfig(token))
            .output()
            .expect("status");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The nodes whose fleetop/reason carries the policy's mark.
    fn marked(&self) -> Vec<String> {
        let st = self.api.state.lock().expect("lock");
        st.nodes
            .iter()
            .filter(|(_, n)| {
                n["metadata"]["annotations"]["fleetop/reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("fleetop-policy: "))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The requests that changed a node (PATCH).
    fn node_writes(&self) -> Vec<Req> {
        self.api
            .writes()
            .into_iter()
            .filter(|w| w.target.starts_with("/api/v1/nodes"))
            .collect()
    }

    /// Waits until the simulated faults are up and the grace has passed,
    /// and `extra` more.
    fn past_grace(&self, extra: Duration) {
        let until = self.started_ms + 24_000 + extra.as_millis() as i64;
        while fleetop::model::time::now_ms() < until {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The shipped RBAC (the console's ClusterRole and the Lease's Role).
fn shipped_rules() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/components/console-rbac/rbac.yaml");
    std::fs::read_to_string(p).expect("rbac.yaml")
}

fn req(method: &str, target: &str, body: Option<Value>) -> Req {
    Req {
        method: method.into(),
        target: target.into(),
        content_type: Some("application/json".into()),
        body,
    }
}

fn lease_body(holder: Option<&str>, rv: Option<&str>, renew: &str) -> Value {
    let mut l = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleetop-remediate", "namespace": "fleetop"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "renewTime": renew, "acquireTime": renew},
    });
    if let Some(rv) = rv {
        l["metadata"]["resourceVersion"] = json!(rv);
    }
    l
}

#[test]
fn the_fakes_leases_answer_conflicts_as_the_api_server_does() {
    let mut st = State::default();
    st.tokens.insert(ADMIN_TOKEN.into(), "admin");
    let path = "/apis/coordination.k8s.io/v1/namespaces/fleetop/leases";
    let one = format!("{path}/fleetop-remediate");
    let t = Some(ADMIN_TOKEN);
    assert_eq!(st.route(&req("GET", &one, None), t).0, 404);
    let body = lease_body(Some("a@h pid 1"), None, "2026-01-01T00:00:00.000000Z");
    let (code, made) = st.route(&req("POST", path, Some(body.clone())), t);
    assert_eq!(code, 201);
    let rv = made["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let (code, again) = st.route(&req("POST", path, Some(body)), t);
    assert_eq!((code, again["reason"].as_str()), (409, Some("AlreadyExists")));
    // A replace with the version read wins once; the same version again
    // is a Conflict, and changes nothing.
    let put = lease_body(Some("b@h pid 2"), Some(&rv), "2026-01-01T00:00:01.000000Z");
    let (code, won) = st.route(&req("PUT", &one, Some(put.clone())), t);
    assert_eq!(code, 200);
    assert_ne!(
        won["metadata"]["resourceVersion"],
        json!(rv),
        "a new version on every write"
    );
    let (code, lost) = st.route(&req("PUT", &one, Some(put)), t);
    assert_eq!((code, lost["reason"].as_str()), (409, Some("Conflict")));
    let stored = st.route(&req("GET", &one, None), t).1;
    assert_eq!(stored["spec"]["holderIdentity"], "b@h pid 2");
    let l: k8s_openapi::api::coordination::v1::Lease = serde_json::from_value(stored).expect("a Lease");
    assert!(l.spec.is_some());
    // Held to the shipped rules: a verb they lack is a 403 naming it.
    st.rules.insert("rbac".into(), rules_of(&shipped_rules()));
    assert_eq!(st.route(&req("GET", &one, None), Some("rbac")).0, 200);
    let (code, no) = st.route(&req("DELETE", &one, None), Some("rbac"));
    assert_eq!(code, 403);
    assert!(
        no["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot delete resource \"leases\" in API group \"coordination.k8s.io\"")),
        "{no}"
    );
    let (code, _) = st.route(
        &req("GET", "/api/v1/namespaces/kube-system/secrets", None),
        Some("rbac"),
    );
    assert_eq!(code, 403, "nothing more than the rules");
}

#[test]
fn the_policy_acts_on_one_scheduler_and_read_only_refuses_drain_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api = FakeApi::fleet();
    let kc = kubeconfig(dir.path(), &api.url(), ADMIN_TOKEN);
    let run = |args: &[&str]| {
        crate::fleetop()
            .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
            .env("XDG_STATE_HOME", dir.path().join("xdg"))
            .env_remove("KUBECONFIG")
            .args(args)
            .arg("--kubeconfig")
            .arg(&kc)
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs")
    };
    let out = run(&["watch", "--slurm", "--kubernetes", "--remediate", "drain"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("the policy acts on one scheduler"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let out = run(&["--read-only", "watch", "--kubernetes", "--remediate", "drain"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("refused in read-only mode"),
        "{err}"
    );
    assert!(api.writes().is_empty(), "{:?}", api.writes());
}

#[test]
fn a_dry_run_logs_what_it_would_quarantine_and_writes_nothing() {
    let env = setup(2, 1, "max_percent = 100\n");
    let (mut w, log) = env.watch("a", "dry-run", ADMIN_TOKEN);
    wait_log(&log, "dry-run: would quarantine gpu01: fleetop-policy: ", 90);
    wait_log(&log, "dry-run: would quarantine gpu02: fleetop-policy: ", 30);
    std::thread::sleep(Duration::from_secs(2));
    w.stop();
    assert!(!log_of(&log).contains("gpu03"), "healthy: {}", log_of(&log));
    assert!(
        env.api.writes().is_empty(),
        "no PATCH, POST or PUT at all: {:?}",
        env.api.writes()
    );
}

#[test]
fn a_lease_taken_from_under_the_watch_is_not_acted_on() {
    let env = setup(1, 0, "");
    // A Lease that ran out long ago: the watch takes it over with a
    // replace, but another watch (carol's) writes it first: a 409.
    {
        let mut st = env.api.state.lock().expect("lock");
        let body = lease_body(Some("bob@elsewhere pid 7"), None, "2026-01-01T00:00:00.000000Z");
        let (code, _) = st.leases.route("POST", "fleetop", None, Some(&body));
        assert_eq!(code, 201);
        st.leases.race = Some("carol@other pid 9".into());
    }
    let (mut w, log) = env.watch("a", "drain", ADMIN_TOKEN);
    wait_log(
        &log,
        "the policy acts in another watch: carol@other pid 9 (Lease fleetop/fleetop-remediate",
        60,
    );
    env.past_grace(Duration::from_secs(4));
    w.stop();
    let text = log_of(&log);
    assert!(text.contains("taking over the lease of bob@elsewhere pid 7"), "{text}");
    assert!(!text.contains("holds the lease"), "{text}");
    assert!(env.node_writes().is_empty(), "{:?}", env.node_writes());
    assert!(env.marked().is_empty());
}

#[test]
fn the_shipped_rbac_is_enough_and_without_update_leases_the_watch_names_it() {
    let env = setup(1, 1, "max_nodes = 1\n");
    let rules = rules_of(&shipped_rules());
    let drop_verb = |resource: &str, verb: &str| -> Vec<_> {
        rules
            .iter()
            .cloned()
            .map(|mut r| {
                if r.resources == [resource] {
                    r.verbs.retain(|v| v != verb);
                }
                r
            })
            .collect()
    };
    {
        let mut st = env.api.state.lock().expect("lock");
        st.rules.insert("no-update".into(), drop_verb("leases", "update"));
        st.rules.insert("no-events".into(), drop_verb("events", "list"));
        st.rules.insert("rbac".into(), rules.clone());
        // A Lease given back by an earlier watch: taking it is an update.
        let body = lease_body(None, None, "2026-01-01T00:00:00.000000Z");
        st.leases.route("POST", "fleetop", None, Some(&body));
    }
    // Without `update` on leases, the Lease cannot be taken; without
    // `list` on events, the window cannot be counted: each says so, and
    // nothing is quarantined.
    let (mut w, log) = env.watch("a", "drain", "no-update");
    wait_log(&log, "403 Forbidden: RBAC must allow 'update' on 'leases'", 60);
    // The next takes the Lease (it may update it), and cannot count.
    let (mut w2, log2) = env.watch("a2", "drain", "no-events");
    wait_log(&log2, "403 Forbidden: RBAC must allow 'list' on 'events'", 60);
    env.past_grace(Duration::from_secs(3));
    w.stop();
    w2.stop();
    assert!(env.node_writes().is_empty(), "{:?}", env.node_writes());
    assert!(!log_of(&log2).contains("quarantined gpu01"), "{}", log_of(&log2));

    // The shipped rules: the Lease, the quarantine, the count.
    let (mut w, log) = env.watch("b", "drain", "rbac");
    wait_log(&log, "remediate: quarantined gpu01", 60);
    let status = env.status("b", "rbac");
    w.stop();
    assert!(!log_of(&log).contains("403"), "{}", log_of(&log));
    assert_eq!(env.marked(), ["gpu01"]);
    assert!(
        status.contains("(Kubernetes' annotations and Events and the audit log): 1"),
        "{status}"
    );
    assert!(status.contains("lease: held by "), "{status}");
}

#[test]
fn the_policy_quarantines_xid_nodes_leaves_others_and_trips_at_its_limit() {
    // gpu01-gpu05 lose a GPU, gpu06 is healthy; at most 2 per window.
    let env = setup(5, 1, "max_nodes = 2\nmax_percent = 100\n");
    {
        let mut st = env.api.state.lock().expect("lock");
        // gpu01's training pod is under a budget that allows no eviction.
        st.pdb.insert("ml/train-gpu01".into(), "train-budget");
        // Someone else cordoned gpu02.
        let n = st.nodes.get_mut("gpu02").expect("gpu02");
        n["spec"]["unschedulable"] = json!(true);
    }
    let (mut w, log) = env.watch("a", "drain", ADMIN_TOKEN);
    wait_log(&log, "BREAKER TRIPPED", 90);
    std::thread::sleep(Duration::from_secs(3));
    w.stop();
    let text = log_of(&log);
    assert_eq!(env.marked(), ["gpu01", "gpu03"], "{text}");
    assert!(
        text.contains("2 node(s) quarantined by the policy in the last 1h") && text.contains("gpu04 would be the next"),
        "{text}"
    );
    // gpu01: quarantined, its refused eviction reported, nothing deleted.
    assert!(
        text.contains("remediate: quarantined gpu01: fleetop-policy: ")
            && text.contains("not every pod was evicted")
            && text.contains("NOT evicted: ml/train-gpu01: 429 TooManyRequests"),
        "{text}"
    );
    assert!(env.api.pods_on("gpu01").contains(&"ml/train-gpu01".to_string()));
    assert!(
        env.api.requests().iter().all(|r| r.method != "DELETE"),
        "nothing deleted"
    );
    // gpu03: its GPU pod evicted, the rest left running.
    assert_eq!(env.api.pods_on("gpu03"), ["web/cache-gpu03"]);
    for n in ["gpu01", "gpu03"] {
        let node = env.api.node(n);
        let taints = node["spec"]["taints"].to_string();
        assert!(taints.contains("fleetop/quarantine"), "{n}: {taints}");
        let conds = node["status"]["conditions"].to_string();
        assert!(conds.contains("FleetopQuarantine"), "{n}: {conds}");
        // Quarantined once, not again each tick.
        let cordons = env
            .api
            .writes()
            .iter()
            .filter(|r| {
                r.target.split('?').next() == Some(&format!("/api/v1/nodes/{n}"))
                    && r.content_type.as_deref() == Some("application/merge-patch+json")
            })
            .count();
        assert_eq!(cordons, 1, "{n}");
    }
    let events = env.api.state.lock().expect("lock").events.clone();
    let marked: Vec<&str> = events
        .iter()
        .filter(|e| e["reason"] == "FleetopQuarantine" && e["type"] == "Warning")
        .filter(|e| e["message"].as_str().is_some_and(|m| m.contains(": fleetop-policy: ")))
        .filter_map(|e| e["involvedObject"]["name"].as_str())
        .collect();
    assert_eq!(marked, ["gpu01", "gpu03"]);
    // Someone else's cordon: left alone, not counted.
    assert!(
        text.contains("gpu02: ") && text.contains("someone else's hold is left alone"),
        "{text}"
    );
    assert!(env.node_writes().iter().all(|w| !w.target.contains("gpu02")));
    // The audit log: the policy's quarantines, before and after each ran.
    let audit: Vec<fleetop::model::action::AuditLine> = std::fs::read_to_string(env.path("a/audit.jsonl"))
        .expect("audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line"))
        .collect();
    let reports: Vec<_> = audit.into_iter().map(|l| l.into_report()).collect();
    let done: Vec<_> = reports
        .iter()
        .filter(|r| r.action == NodeAction::Drain && r.stage == Stage::Done)
        .collect();
    assert_eq!(done.len(), 2, "{reports:?}");
    assert!(done.iter().all(|r| r.policy.as_deref() == Some("remediate")));
    assert!(
        done.iter()
            .all(|r| r.reason.as_deref().is_some_and(|x| x.starts_with("fleetop-policy: ")))
    );
}

#[test]
fn two_watches_share_one_lease_and_a_killed_holder_is_taken_over_within_the_limit() {
    let env = setup(4, 0, "max_nodes = 2\nmax_percent = 100\n");
    let (a, log_a) = env.watch("a", "drain", ADMIN_TOKEN);
    let (b, log_b) = env.watch("b", "drain", ADMIN_TOKEN);
    wait_until(
        120,
        || log_of(&log_a).contains("BREAKER TRIPPED") || log_of(&log_b).contains("BREAKER TRIPPED"),
        || format!("--- a\n{}\n--- b\n{}", log_of(&log_a), log_of(&log_b)),
    );
    std::thread::sleep(Duration::from_secs(2));
    let drained = env.marked();
    assert_eq!(drained.len(), 2, "the limit over both watches: {drained:?}");
    let a_acts = log_of(&log_a).contains("BREAKER TRIPPED");
    let (mut holder, mut other, other_log, other_state) = if a_acts { (a, b, log_b, "b") } else { (b, a, log_a, "a") };
    let text = log_of(&other_log);
    let said = "the policy acts in another watch: ".to_string();
    assert_eq!(text.matches(&said).count(), 1, "said once:\n{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&said) && l.contains(&format!(" pid {} (Lease fleetop/fleetop-remediate", holder.id()))),
        "{text}"
    );
    assert!(!text.contains("remediate: quarantined "), "{text}");

    // A return of one of them removes its annotations: its Event stays.
    let back = &drained[0];
    let r = crate::kube::node(
        &env.kubeconfig(ADMIN_TOKEN),
        &env.path("person-audit.jsonl"),
        &["resume", back],
    );
    assert!(r.ok, "{}{}", r.stdout, r.stderr);

    // The holder is killed: its Lease runs out (8 s), the other takes it
    // over and counts the two quarantines from the cluster, not its own
    // audit log (empty): it trips at once.
    holder.kill();
    wait_log(&other_log, "taking over the lease of ", 40);
    wait_log(&other_log, "holds the lease", 10);
    wait_log(&other_log, "BREAKER TRIPPED", 30);
    assert!(
        log_of(&other_log).contains("2 node(s) quarantined by the policy in the last 1h"),
        "{}",
        log_of(&other_log)
    );
    let status = env.status(other_state, ADMIN_TOKEN);
    assert!(
        status.contains("(Kubernetes' annotations and Events and the audit log): 2"),
        "{status}"
    );
    assert!(
        status.contains(&format!(" pid {} (Lease fleetop/fleetop-remediate", other.id())),
        "{status}"
    );
    other.stop();
    let mut now: Vec<String> = env.marked();
    now.push(back.clone());
    now.sort();
    assert_eq!(now, drained, "nothing more quarantined");
    // A clean stop gave the Lease back.
    assert!(env.status(other_state, ADMIN_TOKEN).contains("lease: free"));
}
