//! A GPU that hangs at start cannot keep the agent from serving. On the
//! fake NVML (one GPU's nvmlDeviceGetName blocks 300 s; every GPU's) and
//! the fake AMD SMI (one GPU blocks 30 s in every call), the agent serves
//! the rest of the node, names the hung GPU by its PCI bus id and reports
//! it stuck; `sample --once` ends even when every GPU hangs, saying which
//! did not answer. Without the start's deadline the agent sat in the hung
//! calls for minutes. The bounds here are liveness bounds (60 s), far
//! below the hangs, never a measure of this machine's speed.

// How a test learns the port the agent bound (docs/testing.md#ports).
#[allow(dead_code)]
#[path = "../../tests/support/ports.rs"]
mod ports;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::agent_message::Kind;
use fleetop_agent::proto::{GpuSample, NodeInfo, SubscribeRequest};
use fleetop_agent::wire::Decoder;

#[path = "common/fake_nvml.rs"]
mod fake_nvml;

#[path = "common/fake_amdsmi.rs"]
mod fake_amdsmi;

/// How long a test waits for what the fix makes take seconds.
const LIVENESS: Duration = Duration::from_secs(60);

fn nvml_profile(name: &str) -> std::path::PathBuf {
    fake_amdsmi::root().join("tests/fake-nvml/profiles").join(name)
}

/// Kills the agent when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Options every agent here runs with: nothing of this machine's.
fn quiet(c: &mut Command, dir: &Path) {
    c.arg("--kmsg=none")
        .arg(format!("--ib-sysfs={}/ib", dir.display()))
        .arg(format!("--sysfs-root={}/sys", dir.display()))
        .arg(format!("--proc-root={}/proc", dir.display()));
}

/// The description and the first live sample a console gets from the agent
/// on `port`, within the liveness bound from now.
async fn first_sample(port: u16) -> (NodeInfo, fleetop_agent::proto::Sample) {
    let start = Instant::now();
    let got = async {
        let mut client = loop {
            match AgentClient::connect(format!("http://127.0.0.1:{port}")).await {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let mut stream = client
            .subscribe(SubscribeRequest {
                no_backfill: true,
                ..Default::default()
            })
            .await
            .expect("subscribes")
            .into_inner();
        let mut decoder = Decoder::default();
        let mut info = None;
        loop {
            let m = stream.message().await.expect("a message").expect("the stream lasts");
            match m.kind {
                Some(Kind::Info(i)) => info = Some(i),
                Some(Kind::Sample(s)) => {
                    let s = decoder.decode(s).expect("decodes").clone();
                    return (info.expect("the description first"), s);
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(LIVENESS, got)
        .await
        .unwrap_or_else(|_| panic!("not served within {:?} of the test's start", start.elapsed()))
}

/// The hung GPU `hung` is named by its bus id and stuck in `call`; the
/// others are described and read.
fn one_stuck_the_rest_served(info: &NodeInfo, gpus: &[GpuSample], hung: usize, call: &str) {
    assert_eq!(info.gpus.len(), 8);
    assert_eq!(gpus.len(), 8);
    let h = &info.gpus[hung];
    assert!(!h.pci_bus_id.is_empty(), "the hung GPU is named by its bus id: {h:?}");
    assert!(h.model.is_empty(), "nothing it did not answer: {h:?}");
    let stuck = &gpus[hung].error;
    assert!(
        stuck.starts_with(&format!("nvml_stuck: {call}: no answer for ")),
        "{stuck}"
    );
    for (i, (d, s)) in info.gpus.iter().zip(gpus).enumerate().filter(|(i, _)| *i != hung) {
        assert!(!d.model.is_empty() && !d.pci_bus_id.is_empty(), "GPU {i}: {d:?}");
        assert!(s.error.is_empty(), "GPU {i}: {}", s.error);
        assert!(s.temp_c > 0, "GPU {i} read");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nvml_gpu_that_hangs_at_start_is_stuck_by_its_bus_id_and_the_rest_is_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"));
    c.args(["--backend", "nvml", "--state-dir", "none", "--listen", "127.0.0.1:0"])
        .arg("--nvml-lib")
        .arg(fake_nvml::fake_lib())
        .env("FAKE_NVML_PROFILE", nvml_profile("faults/hang-at-start.toml"))
        .stderr(Stdio::null());
    quiet(&mut c, dir.path());
    let _agent = Killed(c.spawn().expect("starts"));
    // The listener is bound before the GPUs are opened: found at once, so
    // the liveness bound is still counted from the start.
    let port = ports::wait_listening_port(_agent.0.id(), "the agent");
    let (info, s) = first_sample(port).await;
    one_stuck_the_rest_served(&info, &s.gpus, 3, "nvmlDeviceGetName");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amd_gpu_that_hangs_at_start_is_stuck_by_its_bus_id_and_the_rest_is_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rocm = fake_amdsmi::Rocm::new();
    let mut c = rocm.agent(&fake_amdsmi::profile("faults/hang-at-start.toml"));
    c.args(["--backend", "amd", "--state-dir", "none", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::null());
    quiet(&mut c, dir.path());
    let _agent = Killed(c.spawn().expect("starts"));
    let port = ports::wait_listening_port(_agent.0.id(), "the agent");
    let (info, s) = first_sample(port).await;
    one_stuck_the_rest_served(&info, &s.gpus, 2, "amdsmi_get_gpu_xgmi_link_status");
}

#[test]
fn sample_once_ends_when_every_gpu_hangs_at_start_naming_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"));
    c.args([
        "sample",
        "--once",
        "--format",
        "json",
        "--backend",
        "nvml",
        "--nvml-lib",
    ])
    .arg(fake_nvml::fake_lib())
    .env("FAKE_NVML_PROFILE", nvml_profile("faults/hang-every-gpu-at-start.toml"))
    .env("FLEETOP_LOG", "warn")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    quiet(&mut c, dir.path());
    let child = c.spawn().expect("starts");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(done) = rx.recv_timeout(LIVENESS) else {
        // SAFETY: kill(2) on the child this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("sample --once did not end within {LIVENESS:?}");
    };
    let done = done.expect("runs");
    let (out, err) = (
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr),
    );
    assert!(done.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is JSON");
    let gpus = doc["sample"]["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 8, "{out}");
    for (i, g) in gpus.iter().enumerate() {
        let e = g["error"].as_str().unwrap_or_default();
        assert!(e.starts_with("nvml_stuck: nvmlDeviceGetName: "), "GPU {i}: {e}");
        let bus = doc["info"]["gpus"][i]["pci_bus_id"].as_str().unwrap_or_default();
        assert!(!bus.is_empty(), "GPU {i} named by its bus id");
        assert!(
            err.lines().any(|l| l.contains(&format!("GPU {i} ({bus}): no answer"))),
            "GPU {i} not named on stderr: {err}"
        );
    }
}
