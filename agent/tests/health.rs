//! Node health from outside NVML, end to end: the agent on the fake NVML
//! (tests/fake-nvml, the h100-sxm5 profile) reads a kernel log file in
//! /dev/kmsg's record format (agent/tests/fixtures), a test-written sysfs and
//! procfs, and keeps its fault journal in a temporary state directory.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/fake_nvml.rs"]
mod fake_nvml;
use fake_nvml::fake_lib;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn profile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fake-nvml/profiles")
        .join(name)
}

/// The node booted this long ago: the fixtures' records (at 5678 s and
/// 5681 s since boot) are then a little over an hour old, well within the
/// journal's 30 days.
const UP_S: i64 = 10_000;

/// A node's trees: procfs (boot time and id), sysfs (the PCI bus: the
/// profile's eight GPUs, one more NVML does not list, its audio function and
/// an NVSwitch) and InfiniBand (one port, no nvidia_peermem).
struct Node {
    dir: tempfile::TempDir,
    /// Boot time, seconds since the epoch.
    btime_s: i64,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let btime_s = fleetop_agent::now_ms() / 1000 - UP_S;
        let node = Node { dir, btime_s };
        node.set_boot("6c1f0e52-0d3c-4a5e-9a55-8d6b1c0a0001", btime_s);
        let bus = [
            ("0000:18:00.0", "0x030200"),
            ("0000:2a:00.0", "0x030200"),
            ("0000:3a:00.0", "0x030200"),
            ("0000:5d:00.0", "0x030200"),
            ("0000:9a:00.0", "0x030200"),
            ("0000:ab:00.0", "0x030200"),
            ("0000:ba:00.0", "0x030200"),
            ("0000:db:00.0", "0x030200"),
            // On the bus, not in NVML: the GPU the driver lost at boot.
            ("0000:ee:00.0", "0x030200"),
            ("0000:ee:00.1", "0x040300"),
            ("0000:c8:00.0", "0x068000"),
        ];
        for (b, class) in bus {
            let d = node.sysfs().join("bus/pci/devices").join(b);
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("vendor"), "0x10de\n").expect("w");
            std::fs::write(d.join("class"), format!("{class}\n")).expect("w");
        }
        std::fs::create_dir_all(node.sysfs().join("module/nvidia")).expect("mkdir");
        let port = node.ib().join("mlx5_0/ports/1");
        std::fs::create_dir_all(&port).expect("mkdir");
        std::fs::write(port.join("link_layer"), "InfiniBand\n").expect("w");
        node
    }

    fn set_boot(&self, boot_id: &str, btime_s: i64) {
        let random = self.proc().join("sys/kernel/random");
        std::fs::create_dir_all(&random).expect("mkdir");
        std::fs::write(random.join("boot_id"), format!("{boot_id}\n")).expect("w");
        std::fs::write(self.proc().join("stat"), format!("cpu 1 2 3 4\nbtime {btime_s}\n")).expect("w");
    }

    fn proc(&self) -> PathBuf {
        self.dir.path().join("proc")
    }
    fn sysfs(&self) -> PathBuf {
        self.dir.path().join("sys")
    }
    fn ib(&self) -> PathBuf {
        self.dir.path().join("ib")
    }
    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `fleetop-agent sample --once` on the fake NVML with this kernel log.
    fn sample_once(&self, kmsg: &Path, extra: &[&str]) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
            .args(["sample", "--once", "--format", "json", "--backend", "nvml"])
            .arg("--nvml-lib")
            .arg(fake_lib())
            .arg("--kmsg")
            .arg(kmsg)
            .arg("--proc-root")
            .arg(self.proc())
            .arg("--sysfs-root")
            .arg(self.sysfs())
            .arg("--ib-sysfs")
            .arg(self.ib())
            .arg("--state-dir")
            .arg(self.state())
            .args(extra)
            .env("FAKE_NVML_PROFILE", profile("h100-sxm5.toml"))
            .env("FLEETOP_LOG", "warn")
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("stdout is JSON")
    }
}

/// (GPU index, XID, time_ms, source) of every XID in the sample.
fn xids(doc: &Value) -> Vec<(u64, u64, i64, u64)> {
    let mut all = Vec::new();
    for g in doc["sample"]["gpus"].as_array().expect("gpus") {
        for x in g["xids"].as_array().expect("xids") {
            all.push((
                g["index"].as_u64().expect("index"),
                x["xid"].as_u64().expect("xid"),
                x["time_ms"].as_i64().expect("time"),
                x["source"].as_u64().expect("source"),
            ));
        }
    }
    all
}

/// (uuid, code, time_ms, boot_id) of the journal in the node description.
fn journal(doc: &Value) -> Vec<(String, u64, i64, String)> {
    doc["info"]["fault_journal"]
        .as_array()
        .expect("journal")
        .iter()
        .map(|r| {
            assert_eq!(r["kind"], "xid");
            (
                r["gpu_uuid"].as_str().expect("uuid").to_string(),
                r["code"].as_u64().expect("code"),
                r["time_ms"].as_i64().expect("time"),
                r["boot_id"].as_str().expect("boot").to_string(),
            )
        })
        .collect()
}

fn gpu_uuid(i: u32) -> String {
    format!("GPU-fa4e0000-0000-4000-8000-{:012x}", 0xfa4e_0000u32 + i)
}

#[test]
fn kernel_xids_land_on_their_gpu_and_in_a_journal_that_outlives_restarts_and_reboots() {
    let node = Node::new();
    let log = fixture("kmsg-xid79.txt");
    let doc = node.sample_once(&log, &["--expect-gpus", "8"]);
    let btime_s = node.btime_s;

    // Record times are the boot time plus their microseconds since boot.
    let t79 = btime_s * 1000 + 5_678_901;
    let t48 = btime_s * 1000 + 5_679_000;
    assert_eq!(
        xids(&doc),
        [(0, 48, t48, 1), (2, 79, t79, 1)],
        "bus 3a is GPU 2, bus 18 GPU 0"
    );
    let sx = doc["sample"]["sxids"].as_array().expect("sxids");
    assert_eq!(sx.len(), 2, "detail lines of an SXid are not SXids: {sx:?}");
    assert_eq!(sx[0]["sxid"], 12028);
    assert_eq!(sx[0]["fatal"], false);
    assert_eq!(sx[0]["switch_pci"], "0000:c8:00.0");
    assert_eq!(sx[0]["text"], "Link 47 egress non-posted PRIV error (First)");
    assert_eq!(sx[0]["time_ms"], btime_s * 1000 + 5_680_000);
    assert_eq!(sx[1]["sxid"], 20034);
    assert_eq!(sx[1]["fatal"], true);
    assert_eq!(sx[1]["text"], "Link 30 LTSSM Fault Up");

    let info = &doc["info"];
    assert_eq!(info["gpus_missing_pci"], serde_json::json!(["0000:ee:00.0"]));
    assert_eq!(info["expect_gpus"], 8);
    assert_eq!(info["peermem"], 1, "InfiniBand without nvidia_peermem");
    assert_eq!(info["boot_id"], "6c1f0e52-0d3c-4a5e-9a55-8d6b1c0a0001");
    let boot_a = "6c1f0e52-0d3c-4a5e-9a55-8d6b1c0a0001".to_string();
    let first = journal(&doc);
    assert_eq!(
        first,
        [
            (gpu_uuid(2), 79, t79, boot_a.clone()),
            (gpu_uuid(0), 48, t48, boot_a.clone())
        ]
    );
    let file = node.state().join("faults.json");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("journal file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(node.state()).expect("dir").permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    // The agent restarts and reads the same kernel buffer: the journal has
    // each fault once, and the new description carries it.
    let doc = node.sample_once(&log, &[]);
    assert_eq!(journal(&doc), first);
    assert_eq!(doc["info"]["expect_gpus"], 0, "not said this time");

    // A reboot (a new boot id and boot time), and GPU 2 falls off again.
    // (The new boot 100 s ago.)
    let new_btime_s = btime_s + UP_S - 100;
    node.set_boot("6c1f0e52-0d3c-4a5e-9a55-8d6b1c0a0002", new_btime_s);
    let doc = node.sample_once(&fixture("kmsg-xid79-reboot.txt"), &[]);
    let t_again = new_btime_s * 1000 + 45_000;
    assert_eq!(xids(&doc), [(2, 79, t_again, 1)]);
    let j = journal(&doc);
    assert_eq!(j.len(), 3, "{j:?}");
    assert_eq!(
        j[2],
        (gpu_uuid(2), 79, t_again, "6c1f0e52-0d3c-4a5e-9a55-8d6b1c0a0002".into())
    );
    let gpu2_79s = j.iter().filter(|r| r.0 == gpu_uuid(2) && r.1 == 79).count();
    assert_eq!(gpu2_79s, 2, "two falls off the bus, two boots");
}

#[test]
fn a_corrupt_journal_warns_and_starts_over() {
    let node = Node::new();
    std::fs::create_dir_all(node.state()).expect("mkdir");
    std::fs::write(node.state().join("faults.json"), "{\"version\":1,\"records\":[{\"gpu").expect("w");
    let doc = node.sample_once(&fixture("kmsg-xid79.txt"), &[]);
    assert_eq!(journal(&doc).len(), 2);
}

#[test]
fn peermem_loaded_and_kmsg_none() {
    let node = Node::new();
    std::fs::create_dir_all(node.sysfs().join("module/nvidia_peermem")).expect("mkdir");
    let doc = node.sample_once(Path::new("none"), &[]);
    assert_eq!(doc["info"]["peermem"], 2);
    assert!(xids(&doc).is_empty(), "no kernel log read");
    assert!(doc["sample"]["sxids"].as_array().expect("sxids").is_empty());
}

#[test]
fn an_unreadable_kernel_log_is_one_warning() {
    let node = Node::new();
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args([
            "sample",
            "--once",
            "--backend",
            "sim",
            "--kmsg",
            "/nonexistent/kmsg",
            "--sim-gpus",
            "2",
        ])
        .env("FLEETOP_LOG", "warn")
        .arg("--proc-root")
        .arg(node.proc())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("kernel log /nonexistent/kmsg").count(), 1, "{err}");
}

#[test]
fn bad_flags_are_one_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let link = link.to_str().expect("utf-8").to_string();
    for (args, says) in [
        (vec!["--expect-gpus", "0"], "--expect-gpus"),
        (vec!["--expect-gpus", "65"], "--expect-gpus"),
        (vec!["--expect-gpus", "eight"], "--expect-gpus"),
        (vec!["--kmsg", ""], "--kmsg"),
        (vec!["--state-dir", ""], "--state-dir"),
        (vec!["--state-dir", link.as_str()], "symbolic link"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
            .args(["sample", "--once", "--backend", "sim"])
            .args(&args)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A console that subscribes after a new XID gets the journal with it: the
/// node description is taken per subscription, not once at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_subscriber_gets_the_journal_as_it_is_then() {
    use fleetop_agent::backend::{self, BackendOptions, StateDir};
    use fleetop_agent::proto::agent_message::Kind;
    use fleetop_agent::proto::{SubscribeRequest, agent_client::AgentClient};
    use std::io::Write;

    let node = Node::new();
    let log = node.dir.path().join("kmsg");
    std::fs::write(&log, "6,1,1000,-;Linux version (fixture)\n").expect("w");
    let mut opts = BackendOptions::sim(fleetop_agent::sim::SimConfig {
        hostname: "j".into(),
        gpus: 2,
        ib_ports: 0,
        model: fleetop_agent::sim::Model::H100,
        scenario: fleetop_agent::sim::Scenario::Training,
        seed: 1,
        start_ms: fleetop_agent::now_ms(),
        problem_ms: None,
        interval_ms: 100,
    });
    opts.kmsg = Some(log.clone());
    opts.proc_root = node.proc();
    opts.state_dir = Some(StateDir {
        path: node.state(),
        given: true,
    });
    let (collector, _) = backend::build(&opts).expect("builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let agent_opts = fleetop_agent::serve::server::AgentOptions {
        interval: std::time::Duration::from_millis(100),
        ..Default::default()
    };
    let handle = fleetop_agent::serve::server::serve(collector, agent_opts, listener)
        .await
        .expect("serves");
    let addr = handle.addr;
    let journal_now = || async move {
        let mut c = AgentClient::connect(format!("http://{addr}")).await.expect("connects");
        let req = SubscribeRequest {
            no_backfill: true,
            ..Default::default()
        };
        let mut stream = c.subscribe(req).await.expect("subscribes").into_inner();
        match stream.message().await.expect("a message").and_then(|m| m.kind) {
            Some(Kind::Info(info)) => info.fault_journal,
            other => panic!("the first message is not the description: {other:?}"),
        }
    };
    assert!(journal_now().await.is_empty());

    // GPU 1 of the simulation (bus 0x28) falls off the bus now.
    let since_boot_us = (fleetop_agent::now_ms() / 1000 - node.btime_s) * 1_000_000;
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).expect("append");
    writeln!(
        f,
        "3,2,{since_boot_us},-;NVRM: Xid (PCI:0000:28:00): 79, GPU has fallen off the bus."
    )
    .expect("w");
    let start = std::time::Instant::now();
    let journal = loop {
        let j = journal_now().await;
        if !j.is_empty() || start.elapsed() > std::time::Duration::from_secs(10) {
            break j;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(journal[0].code, 79);
    assert!(!journal[0].gpu_uuid.is_empty());
    handle.stop().await;
}

/// The package's `backend = "auto"` on a broken NVML (a file that is no
/// library) and no AMD SMI: the agent serves host data with backend
/// "none", says why in one printable line, and counts the GPUs on its PCI
/// bus, so a console can tell a node whose GPUs nothing reads from a node
/// with none.
#[test]
fn a_gpu_library_that_did_not_load_is_said_with_the_gpus_on_the_bus() {
    let node = Node::new();
    let broken = node.dir.path().join("libnvidia-ml.so.1");
    std::fs::write(&broken, "not a library\n").expect("w");
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args([
            "sample",
            "--once",
            "--format",
            "json",
            "--backend",
            "auto",
            "--kmsg",
            "none",
            "--state-dir",
            "none",
        ])
        .arg("--nvml-lib")
        .arg(&broken)
        .arg("--sysfs-root")
        .arg(node.sysfs())
        .arg("--ib-sysfs")
        .arg(node.ib())
        .env("ROCM_PATH", node.dir.path())
        .env("FLEETOP_LOG", "warn")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let info = &doc["info"];
    assert_eq!(info["backend"], "none");
    assert_eq!(info["gpus"].as_array().map(Vec::len), Some(0));
    assert_eq!(
        info["gpus_on_pci"], 9,
        "the bus's nine GPUs; not the audio function or the NVSwitch"
    );
    let note = info["gpu_backend_note"].as_str().expect("a note");
    assert!(
        note.starts_with("NVML not available: ") && note.contains("libnvidia-ml.so.1") && note.contains("AMD SMI"),
        "{note}"
    );
    assert!(
        note.chars().count() <= 500 && !note.chars().any(char::is_control),
        "{note}"
    );
}
