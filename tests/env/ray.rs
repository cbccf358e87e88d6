//! fleetop beside a real Ray (PyPI's `ray`, pinned by `.ci/run`): a head and
//! a worker on loopback with logical GPUs, a driver running GPU actors on
//! both and a GPU task on the worker, fleetop agents for both nodes (the
//! head's on the fake NVML listing the actors' real pids as its GPU
//! processes). Checked: the nodes matched (by Ray's node name, by IP), the
//! work and the jobs on them, the processes named by their Ray job, the
//! group view by Ray job and node detail in a real terminal, and drains
//! through Ray's GCS: read-only refused, Ray's refusal of an idle
//! termination on a busy node reported in Ray's words, a drain that Ray
//! carries out read back, a second one left alone, each in the audit log.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fleetop::export::Snapshot;
use serde_json::Value;

use crate::e2e_tmux::Tmux;
use crate::ray_harness::RayCluster;
use crate::{Agent, agent_bin, fleetop};

/// Two GPU actors on the head, one on the worker and a GPU task there; the
/// actors' pids as one JSON line, then it runs until killed.
const DRIVER: &str = r#"
import json, os, sys, time, ray
ray.init(address=sys.argv[1])

@ray.remote(num_gpus=1, num_cpus=0)
class Trainer:
    def pid(self):
        return os.getpid()

@ray.remote(num_gpus=1, num_cpus=0, resources={"fleetop_worker": 1})
def spin():
    time.sleep(3600)

head = [Trainer.options(name=f"trainer{i}", resources={"fleetop_head": 1}).remote() for i in range(2)]
worker = Trainer.options(name="trainer2", resources={"fleetop_worker": 1}).remote()
pids = {"head": [ray.get(a.pid.remote()) for a in head], "worker": ray.get(worker.pid.remote())}
task = spin.remote()
print(json.dumps(pids), flush=True)
time.sleep(3600)
"#;

fn fake_lib() -> std::path::PathBuf {
    let lib = std::path::PathBuf::from(env!("CARGO_BIN_EXE_fleetop")).with_file_name("libnvidia_ml.so");
    if !lib.exists() {
        let ok = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "fleetop-fake-nvml"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "building the fake NVML failed");
    }
    lib
}

/// The head's agent: the fake NVML, its GPUs 0 and 1 running the head's
/// actors (their real pids), the others nothing.
fn head_agent(dir: &Path, pids: &[u64]) -> Agent {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-nvml/profiles/h100-sxm5.toml");
    let mut text = std::fs::read_to_string(base).expect("profile");
    let default = "processes = [{ pid = 4242, used_mem_bytes = 70000000000 }]";
    assert!(text.contains(default), "the profile's processes line moved");
    text = text.replace(default, "processes = []");
    for (gpu, pid) in pids.iter().enumerate() {
        text.push_str(&format!(
            "\n[[override]]\nindex = {gpu}\nprocesses = [{{ pid = {pid}, used_mem_bytes = 1000000000 }}]\n"
        ));
    }
    let profile = dir.join("head.toml");
    std::fs::write(&profile, text).expect("write profile");
    let mut cmd = Command::new(agent_bin());
    cmd.args(["--backend", "nvml", "--interval", "500ms", "--ib-sysfs", "/nonexistent"])
        .arg("--nvml-lib")
        .arg(fake_lib())
        .env("FAKE_NVML_PROFILE", &profile);
    listening(cmd, "127.0.0.1")
}

/// `cmd` (an agent) listening on a port of its own on `ip`, quiet, ended
/// with the test.
fn listening(mut cmd: Command, ip: &str) -> Agent {
    cmd.args(crate::HERMETIC_AGENT)
        .args(["--listen", &format!("{ip}:0")])
        .stdout(Stdio::null());
    Agent::spawn(&mut cmd, "warn")
}

/// The worker's agent: simulated, on the worker's IP, reporting a host name
/// Ray does not know (so only the IP matches it).
fn worker_agent() -> Agent {
    let mut cmd = Command::new(agent_bin());
    cmd.args([
        "--backend",
        "sim",
        "--sim-gpus",
        "2",
        "--sim-hostname",
        "gpu-w1",
        "--interval",
        "500ms",
    ]);
    listening(cmd, "127.0.0.2")
}

fn export(hosts: &str, ray: &RayCluster) -> Snapshot {
    let out = fleetop()
        .args([
            "export",
            "--once",
            "--hosts",
            hosts,
            "--ray",
            &ray.dashboard(),
            "--ray-gcs",
            &ray.gcs(),
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("export runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("export JSON")
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line"))
        .collect()
}

pub fn ray_nodes_and_their_gpu_work_show_and_a_drain_goes_through_rays_gcs() {
    let ray = RayCluster::start();
    let (_driver, line) = ray.driver(DRIVER);
    let pids: Value = serde_json::from_str(&line).expect("the driver's pids");
    let head_pids: Vec<u64> = pids["head"]
        .as_array()
        .expect("head")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let worker_pid = pids["worker"].as_u64().expect("worker pid");
    let dir = tempfile::tempdir().expect("tempdir");
    let _head_agent = head_agent(dir.path(), &head_pids);
    let _worker_agent = worker_agent();
    let (hp, wp) = (_head_agent.port(), _worker_agent.port());
    let hosts = format!("127.0.0.1:{hp},127.0.0.2:{wp}");

    // The task shows as running once Ray's task events arrive: wait for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let snap = loop {
        let snap = export(&hosts, &ray);
        let tasks = snap
            .nodes
            .iter()
            .filter_map(|n| n.ray.as_ref())
            .flat_map(|r| &r.work)
            .filter(|w| w.kind == "task")
            .count();
        if tasks == 1 {
            break snap;
        }
        assert!(Instant::now() < deadline, "the GPU task never showed: {snap:#?}");
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(
        snap.ray_error.is_none() && snap.ray_read_at.is_some(),
        "{:?}",
        snap.ray_error
    );

    // The head: matched by Ray's node name (the host name its agent reports).
    let head = snap
        .nodes
        .iter()
        .find(|n| n.address == format!("127.0.0.1:{hp}"))
        .expect("head node");
    let r = head
        .ray
        .as_ref()
        .unwrap_or_else(|| panic!("the head is not matched: {head:#?}"));
    assert_eq!(
        (r.name.as_str(), r.head, r.status.as_str()),
        (ray.head_name.as_str(), true, "running")
    );
    assert_eq!((r.gpus_total, r.gpus_used), (Some(2.0), Some(2.0)));
    let mut actors: Vec<(&str, Option<u32>)> = r.work.iter().map(|w| (w.what.as_str(), w.pid)).collect();
    actors.sort();
    let want: Vec<(&str, Option<u32>)> = vec![
        ("Trainer trainer0", Some(head_pids[0] as u32)),
        ("Trainer trainer1", Some(head_pids[1] as u32)),
    ];
    assert_eq!(actors, want);
    let job = r.work[0].job.clone();
    assert!(
        r.work[0].entrypoint.as_deref().is_some_and(|e| e.contains("driver.py")),
        "{:?}",
        r.work[0].entrypoint
    );
    // Its GPUs' processes are the actors, named by their Ray job.
    for (gpu, pid) in head_pids.iter().enumerate() {
        let p = &head.gpus[gpu].processes;
        assert_eq!(p.len(), 1, "gpu {gpu}: {p:?}");
        assert_eq!(
            (u64::from(p[0].pid), p[0].ray_job.as_deref()),
            (*pid, Some(job.as_str()))
        );
    }

    // The worker: matched by its IP alone (its agent says "gpu-w1").
    let worker = snap.nodes.iter().find(|n| n.name == "gpu-w1").expect("worker node");
    let r = worker
        .ray
        .as_ref()
        .unwrap_or_else(|| panic!("the worker is not matched: {worker:#?}"));
    assert_eq!(
        (r.name.as_str(), r.ip.as_str(), r.head),
        (ray.worker_name, ray.worker_ip, false)
    );
    assert_eq!(r.gpus_used, Some(2.0));
    let mut kinds: Vec<(&str, &str)> = r.work.iter().map(|w| (w.kind.as_str(), w.what.as_str())).collect();
    kinds.sort();
    assert_eq!(kinds, [("actor", "Trainer trainer2"), ("task", "spin")]);
    assert!(r.work.iter().any(|w| w.pid == Some(worker_pid as u32)));

    // The console in a real terminal: the group view by Ray job, node detail.
    {
        let args = format!("--hosts {hosts} --ray {} --ray-gcs {}", ray.dashboard(), ray.gcs());
        let t = Tmux::start(&crate::e2e_tmux::bin(), &args, (160, 40));
        t.wait_for(&ray.head_name, Duration::from_secs(30));
        // b: job, partition, rack, pod, then Ray job.
        t.keys(&["J", "b", "b", "b", "b"]);
        let s = t.wait_for("ray jobs · 1 holding 2 GPUs", Duration::from_secs(30));
        assert!(s.contains(&job) && s.contains("driver.py"), "{s}");
        t.keys(&["Escape", ":"]);
        t.keys(&[&format!("node {}", ray.head_name), "Enter"]);
        let s = t.wait_for("ray running (head)", Duration::from_secs(30));
        assert!(s.contains("2/2 GPUs in use") && s.contains("Trainer trainer0"), "{s}");
        t.keys(&["q"]);
    }

    // Drains, each through Ray's GCS and into the audit log.
    let audit = dir.path().join("audit.jsonl");
    let drain = |node: &str, extra: &[&str]| {
        fleetop()
            .env("FLEETOP_AUDIT_LOG", &audit)
            .args([
                "--ray",
                &ray.dashboard(),
                "--ray-gcs",
                &ray.gcs(),
                "node",
                "drain",
                node,
            ])
            .args(["--reason", "xid 79 on gpu 1", "--yes", "--format", "json"])
            .args(extra)
            .timeout(Duration::from_secs(60))
            .output()
            .expect("drain runs")
    };
    let status_of = |name: &str| {
        let snap = export(&hosts, &ray);
        let n = snap
            .nodes
            .iter()
            .find(|n| n.ray.as_ref().is_some_and(|r| r.name == name))
            .cloned();
        n.and_then(|n| n.ray).map(|r| r.status)
    };

    // Read-only: refused, logged, nothing sent.
    let out = fleetop()
        .env("FLEETOP_AUDIT_LOG", &audit)
        .args([
            "--read-only",
            "--ray",
            &ray.dashboard(),
            "--ray-gcs",
            &ray.gcs(),
            "node",
            "drain",
            ray.worker_name,
        ])
        .args(["--reason", "x", "--yes"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only mode"));
    assert_eq!(status_of(ray.worker_name).as_deref(), Some("running"));

    // A node Ray does not know: refused before anything is sent.
    let out = drain("gpu-nope", &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Ray has no node named gpu-nope"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // --if-idle on the busy head: Ray refuses, in its own words.
    let out = drain(&ray.head_name, &["--if-idle"]);
    assert!(!out.status.success(), "Ray drained a busy node for idleness");
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    let msg = report["results"][0]["message"].as_str().unwrap_or_default().to_string();
    assert!(
        msg.starts_with("Ray rejected the drain: ") && msg.contains("idle"),
        "{msg}"
    );
    assert_eq!(status_of(&ray.head_name).as_deref(), Some("running"));

    // The worker, for real: Ray drains it, and says so when read back.
    let out = drain(ray.worker_name, &["--deadline", "10m"]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(report["scheduler"], "ray");
    assert_eq!(report["results"][0]["state_after"], "draining", "{report:#}");
    let call = report["commands"][0].as_array().expect("the call");
    assert!(
        call.iter().any(|a| a == "reason_message=fleetop: xid 79 on gpu 1"),
        "{call:?}"
    );
    assert_eq!(status_of(ray.worker_name).as_deref(), Some("draining"));

    // Again: already draining, left as it is.
    let out = drain(ray.worker_name, &[]);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert!(
        report["results"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already draining")),
        "{report:#}"
    );

    // The audit log: the refusal, then started/done for each attempt sent.
    let lines = audit_lines(&audit);
    let stages: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["stage"].as_str().unwrap_or(""),
                l["scheduler"].as_str().unwrap_or("slurm"),
            )
        })
        .collect();
    assert_eq!(
        stages,
        [
            ("refused", "ray"),
            ("started", "ray"),
            ("done", "ray"),
            ("started", "ray"),
            ("done", "ray"),
            ("started", "ray"),
            ("done", "ray"),
        ]
    );
}
