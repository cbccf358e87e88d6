//! `[agents]`: one map from a node's name to its agent for every
//! scheduler. A Kubernetes node (from the fake API server) and a node a
//! command names with `--ray` reach their agents through it;
//! `[slurm.agents]` keeps working; a bad entry is one line.

use std::path::Path;

use crate::support::fake_kube::{ADMIN_TOKEN, FakeApi, kubeconfig};

fn config(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("config.toml");
    std::fs::write(&p, text).expect("config");
    p
}

/// `export --once --kubernetes` with no hosts named: the nodes are the
/// GPU nodes Kubernetes lists, each read from the agent `[agents]` gives it.
#[test]
fn kubernetes_nodes_are_read_from_the_agents_that_agents_names() {
    let agent = crate::start_agent(&[]);
    let api = FakeApi::fleet();
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &api.url(), ADMIN_TOKEN);
    let refused = crate::RefusedPort::for_the_run();
    let cfg = config(
        dir.path(),
        &format!(
            "[agents]\ngpu01 = \"127.0.0.1:{}\"\ngpu02 = \"127.0.0.1:{refused}\"\n",
            agent.port()
        ),
    );
    let out = crate::fleetop()
        .arg("--config")
        .arg(&cfg)
        .args(["export", "--once", "--kubernetes", "--kubeconfig"])
        .arg(&kc)
        .env_remove("KUBECONFIG")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: fleetop::export::Snapshot = serde_json::from_slice(&out.stdout).expect("a document");
    let names: Vec<&str> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu01", "gpu02"], "the GPU nodes, not cpu01");
    let gpu01 = &snap.nodes[0];
    assert_eq!(gpu01.status, fleetop::export::Status::Ok, "{gpu01:?}");
    assert_eq!(gpu01.gpus.len(), 2, "the agent's GPUs: {gpu01:?}");
    assert_ne!(snap.nodes[1].status, fleetop::export::Status::Ok, "its agent refuses");
}

/// `node history NODE`: the node's agent is asked at the address of
/// `[agents]` (with --ray, as with --kubernetes or Slurm), else of
/// `[slurm.agents]`; one that does not answer is named with that address.
#[test]
fn a_ray_node_and_a_slurm_node_are_asked_at_the_address_the_config_maps_them_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = crate::RefusedPort::for_the_run();
    let cfg = config(
        dir.path(),
        &format!("[agents]\nray-w1 = \"127.0.0.1:{refused}\"\n[slurm.agents]\ngpu07 = \"127.0.0.2:{refused}\"\n"),
    );
    for (node, addr, extra) in [
        (
            "ray-w1",
            format!("127.0.0.1:{refused}"),
            &["--ray", "http://127.0.0.1:1"][..],
        ),
        ("gpu07", format!("127.0.0.2:{refused}"), &[][..]),
    ] {
        let out = crate::fleetop()
            .arg("--config")
            .arg(&cfg)
            .args(extra)
            .args(["node", "history", node, "--insecure"])
            .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!("{node}: the agent at {addr} did not answer")),
            "{err}"
        );
    }
}

/// A bad `[agents]` entry stops every command before it starts, in one
/// line naming the file, line, key and value.
#[test]
fn a_bad_agents_entry_is_one_line_naming_file_line_key_and_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path(), "port = 50051\n[agents]\ngpu01 = \"10.0.0.1:70000\"\n");
    let out = crate::fleetop()
        .arg("--config")
        .arg(&cfg)
        .args(["export", "--once", "--hosts", "127.0.0.1:1"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:3: agents.gpu01: '10.0.0.1:70000'", cfg.display());
    assert!(err.contains(&want), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
