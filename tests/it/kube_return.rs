//! Return to service on Kubernetes (`node return --kubernetes`): the gates
//! of a return on Slurm (a fault that keeps the node out, someone else's
//! cordon, GPU pods still running, an unknown node, read-only) and the
//! same burn-in on the node's own agent; a node that passes is uncordoned
//! and left with nothing of fleetop's, and an Event says so. Against the
//! fake API server and simulated agents reached through `[agents]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetop::model::action::{AuditLine, NodeAction, Scheduler, Stage};
use serde_json::{Value, json};

use crate::kube::{Run, annotations, audit};
use crate::support::fake_kube::{ADMIN_TOKEN, FakeApi, kubeconfig, node as kube_node};

/// A fake API server with gpu01 (two GPU pods, one under a budget that
/// allows no disruption), gpu02 (cordoned by someone else) and gpu03; an
/// agent per node with the bench token, through `[agents]`.
struct Env {
    api: FakeApi,
    dir: tempfile::TempDir,
    kc: PathBuf,
    agents: Vec<crate::support::Agent>,
}

fn setup(scenarios: &[(&str, &str)]) -> Env {
    let api = FakeApi::fleet();
    {
        let mut st = api.state.lock().expect("lock");
        let n = kube_node("gpu03", "10.0.0.3", Some(2), false, json!({"example.com/rack": "r7"}));
        st.nodes.insert("gpu03".into(), n);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &api.url(), ADMIN_TOKEN);
    let token = dir.path().join("bench.token");
    crate::write_secret(&token, "s3cret\n");
    let mut cfg = format!("bench_token_file = \"{}\"\n[agents]\n", token.display());
    let mut agents = Vec::new();
    for (node, scenario) in scenarios {
        let a = crate::support::start_bench_agent(&token, scenario);
        cfg.push_str(&format!("{node} = \"127.0.0.1:{}\"\n", a.port()));
        agents.push(a);
    }
    std::fs::write(dir.path().join("config.toml"), cfg).expect("config");
    Env { api, dir, kc, agents }
}

impl Env {
    fn log(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    fn fleetop(&self, args: &[&str]) -> Run {
        let out = crate::fleetop()
            .arg("--config")
            .arg(self.dir.path().join("config.toml"))
            .arg("node")
            .args(args)
            .args(["--kubernetes", "--yes", "--insecure", "--kubeconfig"])
            .arg(&self.kc)
            .env("FLEETOP_AUDIT_LOG", self.log())
            .env_remove("KUBECONFIG")
            .timeout(Duration::from_secs(240))
            .output()
            .expect("runs");
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn drain(&self, node: &str, reason: &str) {
        let r = self.fleetop(&["drain", node, "--reason", reason, "--gpu-pods-only"]);
        assert!(
            r.stdout
                .lines()
                .any(|l| l.starts_with(node) && l.contains("tainted fleetop/quarantine")),
            "{}{}",
            r.stdout,
            r.stderr
        );
    }

    fn writes_since(&self, n: usize) -> Vec<String> {
        self.api.writes()[n..]
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect()
    }
}

fn line<'a>(r: &'a Run, node: &str) -> &'a str {
    r.stdout
        .lines()
        .find(|l| l.starts_with(node))
        .unwrap_or_else(|| panic!("no line for {node}: {}{}", r.stdout, r.stderr))
}

/// What fleetop put on a node: its taint, its condition, its annotations.
pub(crate) fn fleetops(n: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if n["spec"]["unschedulable"] == json!(true) {
        out.push("unschedulable".to_string());
    }
    for t in n["spec"]["taints"].as_array().into_iter().flatten() {
        if t["key"] == "fleetop/quarantine" {
            out.push("taint fleetop/quarantine".into());
        }
    }
    for c in n["status"]["conditions"].as_array().into_iter().flatten() {
        if c["type"] == "FleetopQuarantine" {
            out.push("condition FleetopQuarantine".into());
        }
    }
    if let Some(a) = n["metadata"]["annotations"].as_object() {
        out.extend(a.keys().filter(|k| k.starts_with("fleetop/")).cloned());
    }
    out
}

fn returns(log: &Path) -> Vec<AuditLine> {
    audit(log)
        .into_iter()
        .filter(|l| l.report.action == NodeAction::Return)
        .collect()
}

#[test]
fn a_return_on_kubernetes_is_refused_by_each_gate_and_changes_nothing() {
    let env = setup(&[("gpu01", "training"), ("gpu02", "training"), ("gpu03", "gpu-missing")]);
    // gpu01's train-0 is under a budget that allows no disruption: it
    // stays, holding its GPUs.
    env.api
        .state
        .lock()
        .expect("lock")
        .pdb
        .insert("ml/train-0".into(), "train-0-budget");
    env.drain("gpu01", "xid 79");
    env.drain("gpu03", "gpu_missing: 1 of 2 GPUs");
    let before = env.api.writes().len();

    // Read-only: refused before any client is made, logged as Kubernetes'.
    let out = crate::fleetop()
        .arg("--config")
        .arg(env.dir.path().join("config.toml"))
        .args([
            "--read-only",
            "node",
            "return",
            "gpu01",
            "--kubernetes",
            "--yes",
            "--kubeconfig",
        ])
        .arg(&env.kc)
        .env("FLEETOP_AUDIT_LOG", env.log())
        .env_remove("KUBECONFIG")
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read-only mode: return refused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = returns(&env.log());
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (refused[0].scheduler, refused[0].report.stage),
        (Scheduler::Kubernetes, Stage::Refused)
    );

    // GPU pods still running: the burn-in waits for them.
    let r = env.fleetop(&["return", "gpu01"]);
    assert!(!r.ok);
    assert!(
        line(&r, "gpu01").contains("FAIL") && line(&r, "gpu01").contains("pod ml/train-0 still running"),
        "{}",
        r.stdout
    );
    assert!(
        !r.stderr.contains("RunBench"),
        "no burn-in shown that will not run: {}",
        r.stderr
    );
    // A GPU missing: a fault that keeps the node out, named.
    let r = env.fleetop(&["return", "gpu03"]);
    assert!(
        !r.ok && line(&r, "gpu03").contains("gpu_missing on node") && line(&r, "gpu03").contains("--force"),
        "{}",
        r.stdout
    );
    // Someone else's cordon is theirs; an unknown node is named.
    let r = env.fleetop(&["return", "gpu02,gpu09"]);
    assert!(!r.ok);
    assert!(
        line(&r, "gpu02").contains("cordoned, not by fleetop") && line(&r, "gpu02").contains("--force"),
        "{}",
        r.stdout
    );
    assert!(
        line(&r, "gpu09").contains("Kubernetes does not list this node"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr
            .lines()
            .last()
            .unwrap_or_default()
            .contains("2 of 2 node(s) not returned"),
        "{}",
        r.stderr
    );
    assert_eq!(env.writes_since(before), Vec::<String>::new(), "nothing was written");
    assert!(fleetops(&env.api.node("gpu01")).contains(&"taint fleetop/quarantine".to_string()));
    let theirs = env.api.node("gpu02");
    assert_eq!(annotations(&theirs)["example.com/maintenance"], "alice: PSU swap");
    assert_eq!(theirs["spec"]["unschedulable"], json!(true));

    // Forced past the fault: the burn-in runs and fails for the GPU it
    // cannot measure; the node stays quarantined.
    let r = env.fleetop(&["return", "gpu03", "--force"]);
    assert!(!r.ok, "{}", r.stdout);
    assert!(r.stderr.contains("RunBench suite=quick"), "{}", r.stderr);
    assert!(
        line(&r, "gpu03").contains("left cordoned") && line(&r, "gpu03").contains("gpu_missing: 1 of 2 GPUs measured"),
        "{}",
        r.stdout
    );
    let gpu03 = fleetops(&env.api.node("gpu03"));
    assert!(gpu03.contains(&"taint fleetop/quarantine".to_string()), "{gpu03:?}");
    drop(env.agents);
}

#[test]
fn a_return_on_kubernetes_after_a_passing_burn_in_leaves_nothing_of_fleetops_and_says_so() {
    let env = setup(&[("gpu01", "training")]);
    env.drain("gpu01", "xid 79");
    let quarantined = fleetops(&env.api.node("gpu01"));
    assert_eq!(
        quarantined.len(),
        6,
        "cordon, taint, condition, three annotations: {quarantined:?}"
    );
    let r = env.fleetop(&["return", "gpu01"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("RunBench suite=quick"), "{}", r.stderr);
    assert!(
        line(&r, "gpu01").contains("ok") && line(&r, "gpu01").contains("now schedulable"),
        "{}",
        r.stdout
    );
    let n = env.api.node("gpu01");
    assert_eq!(fleetops(&n), Vec::<String>::new(), "nothing of fleetop's: {n:#}");
    assert_eq!(
        annotations(&n)["node.alpha.kubernetes.io/ttl"],
        "0",
        "others' annotations stay"
    );
    let events = env.api.state.lock().expect("lock").events.clone();
    let release: Vec<k8s_openapi::api::core::v1::Event> = events
        .into_iter()
        .map(|e| serde_json::from_value(e).expect("a v1 Event"))
        .filter(|e: &k8s_openapi::api::core::v1::Event| e.reason.as_deref() == Some("FleetopRelease"))
        .collect();
    assert_eq!(release.len(), 1, "{release:?}");
    assert_eq!(release[0].involved_object.name.as_deref(), Some("gpu01"));
    assert_eq!(release[0].type_.as_deref(), Some("Normal"));
    assert!(
        release[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("returned") || m.contains("passing burn-in")),
        "{release:?}"
    );
    let done: Vec<AuditLine> = returns(&env.log())
        .into_iter()
        .filter(|l| l.report.stage == Stage::Done)
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].scheduler, Scheduler::Kubernetes);
    assert!(done[0].report.results[0].ok, "{done:?}");
}
