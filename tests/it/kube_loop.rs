//! The loop on Kubernetes, end to end: a GPU falls off the bus (XID 79) on
//! gpu01; `fleetop watch --kubernetes --remediate drain` quarantines it
//! after its grace (cordon, taint, condition, Event, evictions within a
//! PodDisruptionBudget); a return is refused while the GPU is lost; once
//! the node is repaired, a burn-in on its own agent passes and the return
//! leaves nothing of fleetop's on the node. Against the fake API server
//! and simulated agents reached through `[agents]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use serde_json::{Value, json};

use crate::kube_return::fleetops;
use crate::support::fake_kube::{ADMIN_TOKEN, FakeApi, kubeconfig};
use crate::support::{log_of, wait_until};

fn config(dir: &Path, token: &Path, agents: &[(&str, u16)]) -> PathBuf {
    let mut cfg = format!(
        "bench_token_file = \"{}\"\n[remediate]\ngrace = \"1s\"\n[agents]\n",
        token.display()
    );
    for (node, port) in agents {
        cfg.push_str(&format!("{node} = \"127.0.0.1:{port}\"\n"));
    }
    let p = dir.join("config.toml");
    std::fs::write(&p, cfg).expect("config");
    p
}

fn agent(token: &Path, scenario: &str) -> crate::support::Agent {
    crate::support::start_bench_agent(token, scenario)
}

fn events(api: &FakeApi, reason: &str) -> Vec<Event> {
    let all = api.state.lock().expect("lock").events.clone();
    all.into_iter()
        .map(|e| serde_json::from_value::<Event>(e).expect("a v1 Event"))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

#[test]
fn an_xid_is_quarantined_by_the_policy_refused_while_the_gpu_is_lost_and_returned_clean_once_repaired() {
    let api = FakeApi::fleet();
    // train-0's budget allows no disruption now; train-1 may go.
    api.state
        .lock()
        .expect("lock")
        .pdb
        .insert("ml/train-0".into(), "train-0-budget");
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &api.url(), ADMIN_TOKEN);
    let token = dir.path().join("bench.token");
    crate::write_secret(&token, "s3cret\n");
    let broken = agent(&token, "xid79");
    let healthy = agent(&token, "training");
    let cfg = config(
        dir.path(),
        &token,
        &[("gpu01", broken.port()), ("gpu02", healthy.port())],
    );
    let audit = dir.path().join("audit.jsonl");
    let fleetop = |args: &[&str]| {
        let out = crate::fleetop()
            .arg("--config")
            .arg(&cfg)
            .args(args)
            .args(["--kubernetes", "--yes", "--insecure", "--kubeconfig"])
            .arg(&kc)
            .env("FLEETOP_AUDIT_LOG", &audit)
            .env_remove("KUBECONFIG")
            .timeout(Duration::from_secs(240))
            .output()
            .expect("runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // The policy, in drain mode, on Kubernetes.
    let log = dir.path().join("watch.log");
    let watch = Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .arg("--config")
        .arg(&cfg)
        .args(["--insecure", "watch", "--kubernetes", "--kubeconfig"])
        .arg(&kc)
        .args(["--remediate", "drain", "--interval", "500ms"])
        .env("FLEETOP_AUDIT_LOG", &audit)
        .env("FLEETOP_LOG", "info")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("watch starts");
    let watch = crate::support::Killed(watch);
    wait_until(
        90,
        || {
            fleetops(&api.node("gpu01")).contains(&"taint fleetop/quarantine".to_string())
                && api.requests().iter().any(|r| r.target.contains("/eviction"))
        },
        || format!("gpu01 quarantined by the policy; the watch said:\n{}", log_of(&log)),
    );
    // Give it time to do more than it should; then stop it.
    std::thread::sleep(Duration::from_secs(3));
    drop(watch);

    let n = api.node("gpu01");
    let reason = n["metadata"]["annotations"]["fleetop/reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The GPU that fell off the bus, in the catalog's words, marked as the policy's.
    assert!(
        reason.starts_with("fleetop-policy: ") && reason.contains("on gpu1"),
        "{reason}"
    );
    assert_eq!(
        fleetops(&n).len(),
        6,
        "cordon, taint, condition and three annotations: {:?}",
        fleetops(&n)
    );
    let warned = events(&api, "FleetopQuarantine");
    assert_eq!(warned.len(), 1, "one Event: {warned:?}");
    assert!(
        warned[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("fleetop-policy:")),
        "{warned:?}"
    );
    // The budget held train-0; train-1 went; nothing was deleted.
    assert!(api.pods_on("gpu01").contains(&"ml/train-0".to_string()));
    assert!(!api.pods_on("gpu01").contains(&"ml/train-1".to_string()));
    assert!(
        api.requests()
            .iter()
            .all(|r| r.method != "DELETE" || r.target.contains("leases"))
    );
    // gpu02 is someone else's cordon: not touched.
    assert_eq!(
        api.node("gpu02")["metadata"]["annotations"],
        json!({"example.com/maintenance": "alice: PSU swap"})
    );

    // The GPU is still lost: the return is refused, naming it.
    let (ok, out, err) = fleetop(&["node", "return", "gpu01"]);
    assert!(!ok, "{out}{err}");
    assert!(out.contains("gpu_lost") && out.contains("still active"), "{out}");
    assert!(!err.contains("RunBench"), "{err}");

    // Repaired: the node's agent is back with its GPUs, at a new address;
    // the training job under the budget has finished.
    let fixed = agent(&token, "training");
    let cfg_text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(
        &cfg,
        cfg_text.replace(
            &format!("127.0.0.1:{}", broken.port()),
            &format!("127.0.0.1:{}", fixed.port()),
        ),
    )
    .expect("config");
    {
        let mut st = api.state.lock().expect("lock");
        for p in st.pods.iter_mut() {
            if p["metadata"]["name"] == "train-0" {
                p["status"]["phase"] = Value::from("Succeeded");
            }
        }
    }
    let (ok, out, err) = fleetop(&["node", "return", "gpu01"]);
    assert!(ok, "{out}{err}");
    assert!(err.contains("RunBench suite=quick"), "{err}");
    let n = api.node("gpu01");
    assert_eq!(fleetops(&n), Vec::<String>::new(), "nothing of fleetop's: {n:#}");
    assert_eq!(n["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"], "0");
    let released = events(&api, "FleetopRelease");
    assert_eq!(released.len(), 1, "{released:?}");
    drop((broken, healthy, fixed));
}
