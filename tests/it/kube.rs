//! `fleetop node cordon|drain|resume --kubernetes` against the in-process
//! fake API server (`support::kube`): failures first (unreachable, a bad
//! kubeconfig, RBAC, someone else's cordon, a PodDisruptionBudget,
//! read-only), then the audit line, then the happy paths.

use std::path::{Path, PathBuf};

use fleetop::model::action::{AuditLine, Scheduler, Stage};
use serde_json::Value;

use crate::support::fake_kube::{ADMIN_TOKEN, FakeApi, VIEWER_TOKEN, kubeconfig};

pub(crate) struct Run {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// `fleetop node ARGS --kubernetes --kubeconfig KC --yes` with its own audit log.
pub(crate) fn node(kc: &Path, log: &Path, args: &[&str]) -> Run {
    let out = crate::fleetop()
        .arg("node")
        .args(args)
        .args(["--kubernetes", "--yes", "--kubeconfig"])
        .arg(kc)
        .env("FLEETOP_AUDIT_LOG", log)
        .env_remove("KUBECONFIG")
        .output()
        .expect("runs");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn audit(log: &Path) -> Vec<AuditLine> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line"))
        .collect()
}

pub(crate) fn setup(token: &str) -> (FakeApi, tempfile::TempDir, PathBuf, PathBuf) {
    let api = FakeApi::fleet();
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &api.url(), token);
    let log = dir.path().join("audit.jsonl");
    (api, dir, kc, log)
}

pub(crate) fn annotations(n: &Value) -> &serde_json::Map<String, Value> {
    n["metadata"]["annotations"].as_object().expect("annotations")
}

#[test]
fn an_api_server_that_does_not_answer_fails_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = crate::RefusedPort::for_the_run();
    let kc = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), ADMIN_TOKEN);
    let log = dir.path().join("audit.jsonl");
    let r = node(&kc, &log, &["cordon", "gpu[01-02]", "--reason", "xid 79"]);
    assert!(!r.ok);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("gpu01"))
        .expect("gpu01's result");
    assert!(
        line.contains("FAIL") && line.contains(&format!("cannot reach the API server at http://127.0.0.1:{port}/")),
        "{}",
        r.stdout
    );
    // Tried once: the next node says so without trying again.
    assert!(
        r.stdout.contains("gpu02  FAIL  not run: cannot read the node"),
        "{}",
        r.stdout
    );
    assert_eq!(
        r.stderr.lines().count(),
        r.stderr.lines().filter(|l| !l.trim().is_empty()).count()
    );
    assert!(
        r.stderr
            .contains("fleetop: cordon failed on 2 of 2 node(s): gpu01,gpu02"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bad_kubeconfig_is_one_line_naming_the_file_and_nothing_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("broken-kubeconfig");
    std::fs::write(&kc, "apiVersion: v1\nclusters: [ {name: x\n").expect("write");
    let log = dir.path().join("audit.jsonl");
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "x"]);
    assert!(!r.ok);
    let last = r.stderr.lines().last().expect("an error");
    assert!(
        last.starts_with("fleetop: kubeconfig ") && last.contains(&kc.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(audit(&log).is_empty(), "nothing ran, so nothing was started");
    // A context the kubeconfig does not have.
    let api = FakeApi::fleet();
    let kc = kubeconfig(dir.path(), &api.url(), ADMIN_TOKEN);
    let r = node(
        &kc,
        &log,
        &["cordon", "gpu01", "--reason", "x", "--kube-context", "nosuch"],
    );
    assert!(!r.ok);
    assert!(
        r.stderr.contains("nosuch") && r.stderr.contains("kubeconfig"),
        "{}",
        r.stderr
    );
    assert!(api.requests().is_empty());
}

#[test]
fn rbac_that_lacks_patch_is_named() {
    let (api, _dir, kc, log) = setup(VIEWER_TOKEN);
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok);
    assert!(
        r.stdout.contains("403 Forbidden: RBAC must allow 'patch' on 'nodes'")
            && r.stdout.contains("cannot patch resource \"nodes\""),
        "{}",
        r.stdout
    );
    assert_eq!(api.node("gpu01")["spec"].get("unschedulable"), None);
    let (_api, _dir, kc, log) = setup("not-a-token");
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "xid 79"]);
    assert!(
        r.stdout.contains("401 Unauthorized from http://127.0.0.1:"),
        "{}",
        r.stdout
    );
}

#[test]
fn someone_elses_cordon_is_left_alone_unless_forced() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let theirs = api.node("gpu02");
    // Uncordon: refused, exit non-zero.
    let r = node(&kc, &log, &["resume", "gpu02"]);
    assert!(!r.ok, "{}", r.stdout);
    assert!(
        r.stdout.contains("cordoned, not by fleetop") && r.stdout.contains("--force"),
        "{}",
        r.stdout
    );
    // Cordon and drain: it is cordoned already; its annotation, its pods stay.
    let r = node(&kc, &log, &["cordon", "gpu02", "--reason", "fan"]);
    assert!(r.ok && r.stdout.contains("left as it is"), "{}", r.stdout);
    let r = node(&kc, &log, &["drain", "gpu02", "--reason", "fan"]);
    assert!(r.ok && r.stdout.contains("its pods too"), "{}", r.stdout);
    assert!(api.writes().is_empty(), "{:?}", api.writes());
    assert_eq!(api.node("gpu02"), theirs);
    // Forced: uncordoned; their annotation is not fleetop's to remove.
    let r = node(&kc, &log, &["resume", "gpu02", "--force"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let n = api.node("gpu02");
    assert_eq!(n["spec"]["unschedulable"], false);
    assert_eq!(annotations(&n)["example.com/maintenance"], "alice: PSU swap");
    let forced = audit(&log).into_iter().last().expect("logged");
    assert!(forced.forced && forced.report.stage == Stage::Done);
}

#[test]
fn a_disruption_budget_refusing_one_eviction_is_reported_and_the_rest_evicted() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    api.state
        .lock()
        .expect("lock")
        .pdb
        .insert("ml/train-1".into(), "train-pdb");
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok, "{}", r.stdout);
    assert!(
        r.stdout.contains("NOT evicted: ml/train-1: 429 TooManyRequests: Cannot evict pod as it would violate the pod's disruption budget. (The disruption budget train-pdb needs 2 healthy pods and has 2 currently)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("drain failed on 1 of 1 node(s): gpu01"),
        "{}",
        r.stderr
    );
    // The others went; DaemonSet and mirror pods were never asked to.
    let mut left = api.pods_on("gpu01");
    left.sort();
    assert_eq!(
        left,
        [
            "kube-system/dcgm-exporter-x",
            "kube-system/kube-proxy-gpu01",
            "ml/train-1"
        ]
    );
    let posted: Vec<String> = api
        .writes()
        .iter()
        .filter(|w| w.method == "POST" && w.target.contains("/eviction"))
        .map(|w| w.target.clone())
        .collect();
    assert_eq!(posted.len(), 3, "{posted:?}");
    // Never forced: no pod was deleted.
    assert!(api.writes().iter().all(|w| w.method != "DELETE"), "{:?}", api.writes());
    assert!(posted.iter().all(|p| !p.contains("kube-system")), "{posted:?}");
    let ev = api
        .writes()
        .into_iter()
        .find(|w| w.method == "POST" && w.target.contains("/eviction"))
        .expect("an eviction");
    assert_eq!(ev.body.as_ref().expect("body")["kind"], "Eviction");
    assert_eq!(ev.body.as_ref().expect("body")["apiVersion"], "policy/v1");
    let done = audit(&log).into_iter().last().expect("logged");
    assert!(!done.report.results[0].ok);
}

#[test]
fn read_only_refuses_before_any_request() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let out = crate::fleetop()
        .args([
            "--read-only",
            "node",
            "drain",
            "gpu01",
            "--reason",
            "x",
            "--kubernetes",
            "--yes",
            "--kubeconfig",
        ])
        .arg(&kc)
        .env("FLEETOP_AUDIT_LOG", &log)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only mode: drain refused"));
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    let l = audit(&log);
    assert_eq!(l.len(), 1);
    assert_eq!(
        (l[0].report.stage, l[0].scheduler),
        (Stage::Refused, Scheduler::Kubernetes)
    );
}

#[test]
fn the_audit_log_names_kubernetes_and_each_node() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let r = node(
        &kc,
        &log,
        &["cordon", "gpu01,gpu02", "--reason", "xid 79", "--format", "json"],
    );
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let raw = std::fs::read_to_string(&log).expect("log");
    assert!(raw.lines().all(|l| l.contains(r#""scheduler":"kubernetes""#)), "{raw}");
    let l = audit(&log);
    assert_eq!(
        l.iter().map(|l| l.report.stage).collect::<Vec<_>>(),
        [Stage::Started, Stage::Done]
    );
    let done = &l[1].report;
    assert_eq!(done.results.len(), 2);
    assert_eq!(done.results[0].state_before.as_deref(), Some("schedulable"));
    assert_eq!(done.results[0].state_after.as_deref(), Some("cordoned"));
    assert!(
        done.results[1].message.contains("left as it is"),
        "{:?}",
        done.results[1]
    );
    // The calls logged are those sent: the same body, who and when filled in.
    let patch = &api.writes()[0];
    let logged = done.commands.iter().find(|c| c[0] == "PATCH").expect("a PATCH");
    assert_eq!(logged[1], "/api/v1/nodes/gpu01");
    assert_eq!(
        Some(serde_json::from_str::<Value>(&logged[2]).expect("json")),
        patch.body
    );
    assert!(!logged[2].contains("(this user)"), "{}", logged[2]);
    // stdout is the report as JSON.
    let printed: AuditLine = serde_json::from_str(&r.stdout).expect("json report");
    assert_eq!(printed.scheduler, Scheduler::Kubernetes);
}

#[test]
fn cordon_then_uncordon_sets_and_clears_fleetops_annotations() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "xid 79"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let n = api.node("gpu01");
    assert_eq!(n["spec"]["unschedulable"], true);
    let a = annotations(&n);
    assert_eq!(a["fleetop/reason"], "fleetop: xid 79");
    assert!(a.contains_key("fleetop/cordoned-by") && a.contains_key("fleetop/cordoned-at"));
    assert_eq!(a["node.alpha.kubernetes.io/ttl"], "0", "others' annotations stay");
    assert_eq!(
        api.writes()[0].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert!(api.pods_on("gpu01").len() == 5, "a cordon evicts nothing");
    // Cordoning again keeps the first reason.
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "other words"]);
    assert!(r.ok && r.stdout.contains("already cordoned by fleetop"), "{}", r.stdout);
    assert_eq!(annotations(&api.node("gpu01"))["fleetop/reason"], "fleetop: xid 79");
    let r = node(&kc, &log, &["resume", "gpu01"]);
    assert!(r.ok && r.stdout.contains("now schedulable"), "{}", r.stdout);
    let n = api.node("gpu01");
    assert_eq!(n["spec"]["unschedulable"], false);
    assert!(annotations(&n).keys().all(|k| !k.starts_with("fleetop/")), "{n}");
    assert_eq!(annotations(&n)["node.alpha.kubernetes.io/ttl"], "0");
}

#[test]
fn drain_cordons_and_evicts_all_but_daemonset_and_mirror_pods() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("3 pod(s) evicted (ml/train-0, ml/train-1, web/cache)")
            && r.stdout.contains("kube-system/dcgm-exporter-x (DaemonSet pod)")
            && r.stdout.contains("kube-system/kube-proxy-gpu01 (mirror pod)"),
        "{}",
        r.stdout
    );
    assert_eq!(api.node("gpu01")["spec"]["unschedulable"], true);
    // The order: the cordon first, then the node's pods, then evictions.
    let methods: Vec<String> = api.requests().iter().map(|r| r.method.clone()).collect();
    let first_post = methods.iter().position(|m| m == "POST").expect("posts");
    assert!(methods[..first_post].contains(&"PATCH".to_string()), "{methods:?}");
    let list = api
        .requests()
        .into_iter()
        .find(|r| r.target.starts_with("/api/v1/pods"))
        .expect("listed");
    assert!(
        list.target.contains("fieldSelector=spec.nodeName%3Dgpu01"),
        "{}",
        list.target
    );
    // The plan on stderr shows the calls.
    assert!(r.stderr.contains("PATCH /api/v1/nodes/gpu01"), "{}", r.stderr);
}

#[test]
fn gpu_pods_only_leaves_the_pods_without_gpus() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79", "--gpu-pods-only"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let mut left = api.pods_on("gpu01");
    left.sort();
    assert_eq!(
        left,
        [
            "kube-system/dcgm-exporter-x",
            "kube-system/kube-proxy-gpu01",
            "web/cache"
        ]
    );
    assert!(r.stdout.contains("web/cache (holds no GPU)"), "{}", r.stdout);
    // Not a Kubernetes flag without --kubernetes.
    let out = crate::fleetop()
        .args(["node", "drain", "gpu01", "--reason", "x", "--gpu-pods-only"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    // Cordon is Kubernetes' only.
    let out = crate::fleetop()
        .args(["node", "cordon", "gpu01", "--reason", "x", "--yes"])
        .env("FLEETOP_AUDIT_LOG", &log)
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cordon is a Kubernetes action: add --kubernetes"));
}

// The console: node detail's Kubernetes lines and the dialogs' plans, on
// the real event loop (TestBackend, as tests/it/tui.rs drives it).

mod console {
    use std::sync::Arc;

    use crossterm::event::KeyCode;
    use fleetop::model::action::{NodeAction, Scheduler};
    use fleetop::model::kube::{Annotation, Condition, KubeNode, KubeSnapshot, Taint};
    use fleetop::model::request::Request;
    use fleetop::model::update::Update;
    use fleetop::tui::app::App;

    use crate::tui::{Step, drive_steps, fleet_updates, key, keys, text, theme};

    fn kube_node(name: &str) -> KubeNode {
        KubeNode {
            name: name.into(),
            addresses: vec![format!("10.9.0.{}", &name[name.len() - 1..])],
            gpu_capacity: Some(8),
            gpu_allocatable: Some(8),
            conditions: vec![Condition {
                kind: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: None,
            }],
            ..Default::default()
        }
    }

    /// gpu01 cordoned by fleetop, not Ready, one GPU short, tainted;
    /// gpu03 cordoned by someone else; gpu02 and gpu04 schedulable.
    fn snapshot() -> KubeSnapshot {
        let mut a = kube_node("gpu01");
        a.unschedulable = true;
        a.gpu_allocatable = Some(7);
        a.fleetop = Some(Annotation {
            reason: "fleetop: xid 79".into(),
            by: Some("alice".into()),
            at: Some("2026-01-01T00:00:00Z".into()),
        });
        a.conditions = vec![Condition {
            kind: "Ready".into(),
            status: "False".into(),
            reason: Some("KubeletNotReady".into()),
            message: Some("PLEG is not healthy".into()),
        }];
        a.taints = vec![Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            value: None,
            effect: "NoSchedule".into(),
        }];
        let mut c = kube_node("gpu03");
        c.unschedulable = true;
        KubeSnapshot {
            nodes: vec![a, kube_node("gpu02"), c, kube_node("gpu04")],
        }
    }

    fn with_kube(app: &mut App) {
        app.store.kube.known = true;
    }

    fn arrive() -> Step {
        Step::Arrive(Update::Kube(Arc::new(snapshot())))
    }

    #[test]
    fn node_detail_shows_the_nodes_kubernetes_state() {
        let steps = vec![arrive(), Step::Do(key(KeyCode::Enter))];
        let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, with_kube);
        let screen = text(&buf);
        assert!(
            screen.contains(
                "kubernetes 7/8 GPUs allocatable · cordoned by fleetop (alice, 2026-01-01T00:00:00Z): fleetop: xid 79"
            ),
            "{screen}"
        );
        assert!(
            screen.contains("not OK: Ready=False (KubeletNotReady: PLEG is not healthy)"),
            "{screen}"
        );
        assert!(
            screen.contains("taints: node.kubernetes.io/unschedulable:NoSchedule"),
            "{screen}"
        );
        insta::assert_snapshot!("kube_detail_100x30", screen);
        // The API server stops answering: said first, with the age of what is shown.
        let steps = vec![
            arrive(),
            Step::Arrive(Update::KubeError(
                "cannot reach the API server at https://k8s:6443/".into(),
            )),
            Step::Do(key(KeyCode::Enter)),
        ];
        let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, with_kube);
        assert!(
            text(&buf)
                .contains("kubernetes last read 0s ago: cannot reach the API server at https://k8s:6443/ │ 7/8 GPUs"),
            "{}",
            text(&buf)
        );
        // Without --kubernetes: no such line.
        let steps = vec![arrive(), Step::Do(key(KeyCode::Enter))];
        let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, |_| {});
        assert!(!text(&buf).contains("kubernetes"), "{}", text(&buf));
    }

    #[test]
    fn the_drain_dialog_sends_a_kubernetes_plan_when_kubernetes_is_read_and_slurm_is_not() {
        let steps = || {
            let mut v = vec![
                arrive(),
                Step::Do(key(KeyCode::Char('j'))),
                Step::Do(key(KeyCode::Char('D'))),
            ];
            v.extend(keys("fan").into_iter().map(Step::Do));
            v.push(Step::Do(key(KeyCode::Enter)));
            v
        };
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 60), steps(), with_kube);
        let screen = text(&buf);
        assert!(screen.contains("PATCH /api/v1/nodes/"), "{screen}");
        // The confirm names each call of the quarantine.
        assert!(screen.contains("PATCH /api/v1/nodes/gpu02/status"), "{screen}");
        assert!(screen.contains("POST /api/v1/namespaces/default/events"), "{screen}");
        assert!(screen.contains("evicts the pods"), "{screen}");
        assert!(asked.is_empty(), "nothing before the y");
        let mut yes = steps();
        yes.push(Step::Do(key(KeyCode::Char('y'))));
        let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), yes, with_kube);
        let Some(Request::Run(plan)) = asked.first() else {
            panic!("{asked:?}")
        };
        assert_eq!(
            (plan.action, plan.scheduler),
            (NodeAction::Drain, Scheduler::Kubernetes)
        );
        assert_eq!(plan.reason.as_deref(), Some("fleetop: fan"));
        assert_eq!(plan.commands[0][0], "PATCH");
    }

    #[test]
    fn capital_t_returns_a_kubernetes_node_with_a_burn_in_then_the_uncordon_and_its_event() {
        let steps = |then: &str| {
            let mut v = vec![arrive(), Step::Do(key(KeyCode::Char('T')))];
            v.extend(keys(then).into_iter().map(Step::Do));
            v
        };
        let ours = |app: &mut App| {
            with_kube(app);
            app.marked.insert(0);
        };
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 40), steps(""), ours);
        let screen = text(&buf);
        assert!(asked.is_empty(), "{asked:?}");
        assert!(
            screen.contains("gpu01: burn-in (quick) first")
                && screen.contains("(cordoned since")
                && screen.contains("those nodes stay cordoned")
                && screen.contains("PATCH /api/v1/nodes/gpu01/status")
                && screen.contains("POST /api/v1/namespaces/default/events"),
            "{screen}"
        );
        let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 40), steps("y"), ours);
        let [Request::Return(p)] = asked.as_slice() else {
            panic!("{asked:?}")
        };
        assert_eq!(p.plan.scheduler, Scheduler::Kubernetes);
        let calls: Vec<String> = p.plan.commands.iter().map(|c| c[..2].join(" ")).collect();
        assert_eq!(
            calls[1..],
            [
                "PATCH /api/v1/nodes/gpu01",
                "PATCH /api/v1/nodes/gpu01",
                "PATCH /api/v1/nodes/gpu01/status",
                "POST /api/v1/namespaces/default/events"
            ],
            "a burn-in, then the uncordon, the taint and condition removed, an Event: {calls:?}"
        );
        // Someone else's cordon: y alone returns nothing.
        let theirs = |app: &mut App| {
            with_kube(app);
            app.marked.insert(2);
        };
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 40), steps("y"), theirs);
        assert!(asked.is_empty(), "{asked:?}");
        assert!(text(&buf).contains("cordoned, not by fleetop"), "{}", text(&buf));
    }

    #[test]
    fn resuming_someone_elses_cordon_needs_its_name_typed() {
        // gpu03 is someone else's: y alone does not send it.
        let find_gpu03 = |app: &mut App| {
            with_kube(app);
            app.marked.insert(2);
        };
        let steps = vec![
            arrive(),
            Step::Do(key(KeyCode::Char('R'))),
            Step::Do(key(KeyCode::Char('y'))),
        ];
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, find_gpu03);
        assert!(asked.is_empty(), "{asked:?}");
        let screen = text(&buf);
        assert!(screen.contains("cordoned, not by fleetop"), "{screen}");
    }
}

/// The console's session with `--kubernetes`: the poller's snapshot reaches
/// the store (matched by name), and a Kubernetes plan sent from the screen
/// goes through `ops::execute` to the API server and comes back
/// as `ActionDone`.
#[test]
fn the_session_reads_the_nodes_and_routes_a_kubernetes_plan_to_the_api_server() {
    use clap::Parser;
    use fleetop::model::update::Update;
    // The audit log is found through the environment: the test runs
    // again in a process of its own with FLEETOP_AUDIT_LOG set, rather
    // than changing the environment of this one under the other tests.
    const CHILD: &str = "FLEETOP_TEST_KUBE_SESSION_LOG";
    let Some(log) = std::env::var_os(CHILD).map(PathBuf::from) else {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("audit.jsonl");
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "kube::the_session_reads_the_nodes_and_routes_a_kubernetes_plan_to_the_api_server",
            ])
            .env(CHILD, &log)
            .env("FLEETOP_AUDIT_LOG", &log)
            .output()
            .expect("runs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("1 passed"),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    };
    let (api, dir, kc, _) = setup(ADMIN_TOKEN);
    // No agent: the session reads Kubernetes only.
    let port = crate::RefusedPort::for_the_run();
    let cli = fleetop::cli::Cli::parse_from([
        "fleetop".to_string(),
        "--hosts".into(),
        format!("gpu01:{port}"),
        "--kubernetes".into(),
        "--kubeconfig".into(),
        kc.display().to_string(),
    ]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let cfg = fleetop::config::Config::default();
        let mut s = fleetop::session::Session::start(&fleetop::cli::resolve::source(&cli.source, &cfg), &cfg)
            .await
            .expect("session");
        assert!(s.kubernetes && s.store.kube.known);
        let within = std::time::Duration::from_secs(20);
        // The report of the next action the session finishes.
        async fn done(s: &mut fleetop::session::Session) -> std::sync::Arc<fleetop::model::action::ActionReport> {
            let next = async {
                loop {
                    if let Some(Update::ActionDone(r)) = s.updates.recv().await {
                        break r;
                    }
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(20), next)
                .await
                .expect("the action is done")
        }
        let snap = tokio::time::timeout(within, async {
            loop {
                if let Some(Update::Kube(k)) = s.updates.recv().await {
                    break k;
                }
            }
        })
        .await
        .expect("the nodes are read");
        s.store.apply(Update::Kube(snap.clone()), 0);
        assert_eq!(s.store.kube.of(0).map(|k| k.name.as_str()), Some("gpu01"));
        assert_eq!(
            snap.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["gpu01", "gpu02"]
        );
        let plan = fleetop::model::kube::plan(
            fleetop::model::action::NodeAction::Cordon,
            vec!["gpu01".into()],
            Some("xid 79".into()),
            false,
        )
        .expect("plan");
        let ask = s.actions.clone().expect("actions");
        ask.send(fleetop::model::request::Request::Run(plan))
            .await
            .expect("sent");
        let report = done(&mut s).await;
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.scheduler, Scheduler::Kubernetes);
        let a = annotations(&api.node("gpu01")).clone();
        assert_eq!(a["fleetop/reason"], "fleetop: xid 79");
        assert_ne!(a["fleetop/cordoned-by"], "(this user)", "stamped before it was sent");
        assert_eq!(audit(&log).len(), 2);

        // A return the console decided (its agent holds a pass since the
        // cordon) goes to the API server too: uncordon, and an Event.
        use fleetop::model::bench::{BurnIn, Identity, Suite};
        use fleetop::ops::return_to_service::{Gate, Overrides, prepare};
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(api.node("gpu01")).expect("a v1 Node");
        let held = fleetop::ingest::kube::decode_node(&node);
        let me = Identity {
            hostname: "gpu01".into(),
            machine_id: Some("m1".into()),
            boot_id: None,
            gpu_uuids: vec!["GPU-a".into()],
        };
        let pass = BurnIn {
            started_ms: fleetop::model::time::now_ms(),
            ended_ms: fleetop::model::time::now_ms() + 1_000,
            suite: Some(Suite::Quick),
            passed: true,
            requested_by: "alice@console2".into(),
            node: me.clone(),
            checks: Vec::new(),
            error: None,
        };
        let gate = |_: &str| Gate {
            burn_ins: vec![pass.clone()],
            identity: Some(me.clone()),
            ..Gate::default()
        };
        let names = vec!["gpu01".to_string()];
        let back = prepare(
            &names,
            Scheduler::Kubernetes,
            |_| Some(&held),
            gate,
            &[],
            Suite::Quick,
            Overrides::default(),
        );
        ask.send(fleetop::model::request::Request::Return(Box::new(back)))
            .await
            .expect("sent");
        let report = done(&mut s).await;
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.scheduler, Scheduler::Kubernetes);
    });
    let n = api.node("gpu01");
    assert_eq!(crate::kube_return::fleetops(&n), Vec::<String>::new(), "{n:#}");
    let events = api.state.lock().expect("lock").events.clone();
    assert!(events.iter().any(|e| e["reason"] == "FleetopRelease"), "{events:#?}");
    drop(dir);
}

/// A hostile API server on loopback: each connection's request is read,
/// then `answer` writes what it likes (bounded in time by the test).
fn hostile(answer: fn(&mut std::net::TcpStream)) -> u16 {
    use std::io::Read;
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in l.incoming().take(8) {
            let Ok(mut c) = conn else { return };
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut buf = [0u8; 65536];
                let _ = c.read(&mut buf);
                answer(&mut c);
            });
        }
    });
    port
}

/// Headers, then a byte a second: each read within the client's read
/// timeout, the whole never. The call ends at its deadline, in one line.
#[test]
fn an_api_server_that_trickles_cannot_hold_a_cordon() {
    let port = hostile(|c| {
        use std::io::Write;
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{");
        for _ in 0..90 {
            std::thread::sleep(std::time::Duration::from_secs(1));
            if c.write_all(b" ").is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), ADMIN_TOKEN);
    let log = dir.path().join("audit.jsonl");
    let started = std::time::Instant::now();
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("gpu01  FAIL") && r.stdout.contains("no whole answer within 30 s"),
        "after {:?}: {}{}",
        started.elapsed(),
        r.stdout,
        r.stderr
    );
}

/// An answer far larger than any fleet's: refused as it is read, in one
/// line; and a 401 whose body holds terminal escapes reaches no terminal.
#[test]
fn a_huge_answer_is_refused_and_an_error_body_is_escaped() {
    let huge = hostile(|c| {
        use std::io::Write;
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500000000\r\n\r\n");
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..500 {
            if c.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    let kc = kubeconfig(dir.path(), &format!("http://127.0.0.1:{huge}"), ADMIN_TOKEN);
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok && r.stdout.contains("gpu01  FAIL"), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.to_lowercase().contains("length limit"), "{}", r.stdout);
    let evil = hostile(|c| {
        use std::io::Write;
        let body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"\\u001b]0;PWNED\\u0007\\u001b[2J go away\",\"reason\":\"Unauthorized\",\"code\":401}";
        let _ = write!(
            c,
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
    });
    let kc = kubeconfig(dir.path(), &format!("http://127.0.0.1:{evil}"), ADMIN_TOKEN);
    let r = node(&kc, &log, &["cordon", "gpu01", "--reason", "xid 79"]);
    assert!(
        !r.ok && r.stdout.contains("401 Unauthorized"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    for text in [&r.stdout, &r.stderr] {
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text:?}");
    }
    assert!(r.stdout.contains("\\u{1b}]0;PWNED"), "{}", r.stdout);
}

/// `export --kubernetes` with an API server that does not answer: the
/// document is written with every agent's data and says why Kubernetes'
/// is missing (`kube_error`, as `ray_error`).
#[test]
fn export_says_when_kubernetes_failed() {
    let _agent = crate::start_agent(&[]);
    let port = _agent.port();
    let dir = tempfile::tempdir().expect("tempdir");
    let api = crate::RefusedPort::for_the_run();
    let kc = kubeconfig(dir.path(), &format!("http://127.0.0.1:{api}"), ADMIN_TOKEN);
    let out = crate::fleetop()
        .args(["export", "--once", "--hosts", &format!("127.0.0.1:{port}")])
        .args(["--kubernetes", "--kubeconfig"])
        .arg(&kc)
        .env_remove("KUBECONFIG")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: fleetop::export::Snapshot = serde_json::from_slice(&out.stdout).expect("a document");
    assert_eq!(snap.nodes[0].status, fleetop::export::Status::Ok);
    assert!(
        snap.kube_error
            .as_deref()
            .is_some_and(|e| e.contains("cannot reach the API server")),
        "{:?}",
        snap.kube_error
    );
    assert_eq!(snap.kube_read_at, None);
}
