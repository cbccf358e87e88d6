//! AMD GPUs end to end: the agent on the fake libamd_smi.so
//! (tests/fake-amdsmi), found through `ROCM_PATH` as AMD's tools find the
//! real one, its clock frozen after every fault the profiles script. The
//! default profile (8 x MI300X), the CPX/NPS4 one (each partition a GPU),
//! each fault as the console needs to see it, a missing library, the
//! backend chosen by flag, by `auto` and by the config file, the new wire
//! fields through a live stream, and every value against AMD's own
//! `amdsmi` package reading the same fake (`.ci/amdsmi_check.py compare`).

// How a test learns the port the agent bound (docs/testing.md#ports).
#[allow(dead_code)]
#[path = "../../tests/support/ports.rs"]
mod ports;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "common/fake_amdsmi.rs"]
mod fake_amdsmi;
use fake_amdsmi::{Rocm, profile, root};

/// The profile's PCI addresses, one per physical GPU.
const BDFS: [&str; 8] = [
    "0000:05:00.0",
    "0000:26:00.0",
    "0000:46:00.0",
    "0000:65:00.0",
    "0000:85:00.0",
    "0000:a6:00.0",
    "0000:c6:00.0",
    "0000:e5:00.0",
];

/// fleetop_proto::absent's bits for what AMD never gives: PCIe throughput
/// in two directions and remapped rows.
const NEVER_ON_AMD: u64 = (1 << 9) | (1 << 12);

/// A node's trees for the agent: procfs with the training process of GPU
/// 0 (its owner, command and Slurm job), an empty sysfs and InfiniBand.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("proc/41001");
        std::fs::create_dir_all(&p).expect("mkdir");
        std::fs::write(p.join("status"), "Name:\tpython3\nUid:\t0\t0\t0\t0\n").expect("w");
        std::fs::write(p.join("cmdline"), b"python3\0train.py\0").expect("w");
        std::fs::write(p.join("cgroup"), "0::/system.slice/slurmstepd.scope/job_4242/step_0\n").expect("w");
        std::fs::create_dir_all(dir.path().join("sys")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("ib")).expect("mkdir");
        Node { dir }
    }

    fn args(&self) -> Vec<String> {
        let d = self.dir.path().display();
        vec![
            format!("--proc-root={d}/proc"),
            format!("--sysfs-root={d}/sys"),
            format!("--ib-sysfs={d}/ib"),
            "--kmsg=none".into(),
        ]
    }
}

/// `sample --once` on `profile` with `backend`: the JSON document.
fn sample_with(rocm: &Rocm, profile: &Path, backend: &str) -> Value {
    let node = Node::new();
    let out = rocm
        .agent(profile)
        .args(["sample", "--once", "--format", "json", "--backend", backend])
        .args(node.args())
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn sample(profile: &Path) -> Value {
    sample_with(&Rocm::new(), profile, "amd")
}

fn gpus(doc: &Value, part: &str) -> Vec<Value> {
    doc[part]["gpus"].as_array().expect("gpus").clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn eight_mi300x_with_every_field() {
    let doc = sample(&profile("mi300x-oam.toml"));
    assert_eq!(doc["info"]["backend"], "amdsmi");
    assert_eq!(doc["info"]["driver_version"], "6.14.14");
    assert_eq!(doc["info"]["gpu_backend_note"], "");
    let info = gpus(&doc, "info");
    let samples = gpus(&doc, "sample");
    assert_eq!((info.len(), samples.len()), (8, 8));
    for (i, (d, s)) in info.iter().zip(&samples).enumerate() {
        let what = format!("GPU {i}");
        assert_eq!(u(&d["index"]), i as u64, "{what}");
        assert_eq!(d["vendor"], "AMD", "{what}");
        assert_eq!(d["model"], "AMD Instinct MI300X", "{what}");
        assert_eq!(d["pci_bus_id"], BDFS[i], "{what}");
        assert!(
            d["uuid"].as_str().is_some_and(|x| x.len() == 36),
            "{what}: {}",
            d["uuid"]
        );
        assert_eq!(u(&d["mem_total_bytes"]), 205_822_885_888, "{what}");
        assert_eq!(u(&d["power_limit_mw"]), 750_000, "{what}");
        assert_eq!(
            (u(&d["max_sm_clock_mhz"]), u(&d["max_mem_clock_mhz"])),
            (2100, 1300),
            "{what}"
        );
        assert_eq!(
            (u(&d["slowdown_temp_c"]), u(&d["shutdown_temp_c"])),
            (100, 110),
            "{what}"
        );
        assert_eq!(
            (u(&d["hbm_slowdown_temp_c"]), u(&d["hbm_shutdown_temp_c"])),
            (105, 115),
            "{what}"
        );
        assert_eq!(d["vbios_version"], "022.040.003.042.000001", "{what}");
        // The board: AMD's exporter's card_model and serial_number.
        assert_eq!(d["board_part_number"], "102-G30211-0C", "{what}");
        assert_eq!(d["serial_number"], format!("7A3C51E2D904000{i}"), "{what}");
        assert_eq!((u(&d["pcie_max_gen"]), u(&d["pcie_max_width"])), (5, 16), "{what}");
        assert_eq!(
            (&d["compute_partition"], &d["memory_partition"]),
            (&"SPX".into(), &"NPS1".into())
        );
        assert_eq!(u(&d["partition_id"]), 0, "{what}");
        let fw: Vec<(String, String)> = d["firmware"]
            .as_array()
            .expect("firmware")
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap_or("").into(),
                    f["version"].as_str().unwrap_or("").into(),
                )
            })
            .collect();
        assert!(fw.contains(&("PM".into(), "00.85.107.00".into())), "{what}: {fw:?}");
        assert!(
            fw.contains(&("PSP_SOSDRV".into(), "00.37.2E.4C".into())),
            "{what}: {fw:?}"
        );
        // XGMI: seven links to the seven others, the eighth (disabled) not listed.
        let peers: Vec<&str> = d["nvlinks"]
            .as_array()
            .expect("links")
            .iter()
            .map(|l| l["peer_pci_bus_id"].as_str().unwrap_or(""))
            .collect();
        let others: Vec<&str> = BDFS.iter().copied().filter(|b| *b != BDFS[i]).collect();
        assert_eq!(peers, others, "{what}");

        assert_eq!(s["error"], "", "{what}");
        assert_eq!(u(&s["absent"]), NEVER_ON_AMD, "{what}: every other reading taken");
        assert!(u(&s["util_pct"]) <= 100 && u(&s["mem_util_pct"]) <= 100, "{what}");
        assert!(u(&s["mem_used_bytes"]) > 0, "{what}");
        assert!((30..100).contains(&u(&s["temp_c"])), "{what}: junction {}", s["temp_c"]);
        assert!((30..100).contains(&u(&s["hbm_temp_c"])), "{what}");
        assert!(s["edge_temp_c"].is_null(), "{what}: MI300X has no edge sensor");
        assert!((100_000..=750_000).contains(&u(&s["power_mw"])), "{what}");
        assert_eq!(u(&s["power_limit_mw"]), 750_000, "{what}");
        assert!(u(&s["energy_mj"]) > 2_500_000_000_000, "{what}");
        assert!(u(&s["sm_clock_mhz"]) > 0 && u(&s["mem_clock_mhz"]) > 0, "{what}");
        assert_eq!(u(&s["throttle_reasons"]), 0, "{what}");
        assert_eq!(s["throttle_detail"], serde_json::json!([]), "{what}");
        assert_eq!((u(&s["pcie_gen"]), u(&s["pcie_width"])), (5, 16), "{what}");
        assert_eq!(u(&s["pcie_replay_count"]), 0, "{what}");
        // GFX busy on each of the 8 XCCs, averaging the GPU's activity.
        let xcc: Vec<u64> = s["xcc_gfx_busy_pct"].as_array().expect("xcc").iter().map(u).collect();
        assert_eq!(xcc.len(), 8, "{what}: {xcc:?}");
        assert_eq!(xcc.iter().sum::<u64>(), 8 * u(&s["util_pct"]), "{what}: {xcc:?}");
        let blocks: Vec<&str> = s["ras"]
            .as_array()
            .expect("ras")
            .iter()
            .map(|r| r["block"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            blocks,
            [
                "UMC",
                "SDMA",
                "GFX",
                "MMHUB",
                "PCIE_BIF",
                "HDP",
                "XGMI_WAFL",
                "MP0",
                "VCN",
                "JPEG"
            ],
            "{what}"
        );
        let corrected = if i == 2 { 3 } else { 0 };
        assert_eq!(u(&s["ras"][0]["correctable"]), corrected, "{what}: UMC");
        assert_eq!(u(&s["ecc_corrected_volatile"]), corrected, "{what}: the sum");
        assert_eq!(u(&s["ecc_uncorrected_volatile"]), 0, "{what}");
        assert_eq!(s["nvlink_state"], serde_json::json!([]), "{what}: every link up");
        assert_eq!(u(&s["nvlink_down_mask"]), 0, "{what}");
        for dir in ["nvlink_tx_kib", "nvlink_rx_kib"] {
            let c = s[dir].as_array().expect("counters");
            assert!(c.len() == 7 && c.iter().all(|k| u(k) > 0), "{what}: {dir} {c:?}");
        }
        assert_eq!(u(&s["xgmi_error_status"]), 0, "{what}");
        assert_eq!(s["events"], serde_json::json!([]), "{what}");
        let pids: Vec<u64> = s["processes"]
            .as_array()
            .expect("p")
            .iter()
            .map(|p| u(&p["pid"]))
            .collect();
        match i {
            6 => assert_eq!(pids, [52201, 52202]),
            7 => assert!(pids.is_empty(), "the idle GPU"),
            _ => assert_eq!(pids, [41001], "{what}"),
        }
    }
    let p = &samples[0]["processes"][0];
    assert_eq!(u(&p["used_mem_bytes"]), 178_000_000_000);
    assert_eq!(
        (&p["user"], &p["command"]),
        (&"root".into(), &"python3 train.py".into())
    );
    assert_eq!(u(&p["job_id"]), 4242);
}

#[test]
fn cpx_nps4_shows_each_partition_as_a_gpu_with_its_modes() {
    let doc = sample(&profile("mi300x-cpx-nps4.toml"));
    let info = gpus(&doc, "info");
    let samples = gpus(&doc, "sample");
    assert_eq!((info.len(), samples.len()), (64, 64));
    let mut uuids = std::collections::BTreeSet::new();
    for (i, (d, s)) in info.iter().zip(&samples).enumerate() {
        let (gpu, part) = (i / 8, i % 8);
        assert_eq!(u(&d["partition_id"]), part as u64, "GPU {i}");
        // The physical GPU's address, the partition in the function number.
        assert_eq!(d["pci_bus_id"], format!("{}{part}", &BDFS[gpu][..11]), "GPU {i}");
        assert_eq!(
            (&d["compute_partition"], &d["memory_partition"]),
            (&"CPX".into(), &"NPS4".into())
        );
        assert_eq!(
            u(&d["mem_total_bytes"]),
            205_822_885_888 / 8,
            "GPU {i}: its share of HBM"
        );
        uuids.insert(d["uuid"].as_str().unwrap_or("").to_string());
        assert_eq!(s["error"], "", "GPU {i}");
        assert!(u(&s["util_pct"]) <= 100, "GPU {i}");
        // One XCC a partition, its own; the board's serial, shared.
        assert_eq!(s["xcc_gfx_busy_pct"], serde_json::json!([u(&s["util_pct"])]), "GPU {i}");
        assert_eq!(d["serial_number"], format!("7A3C51E2D904000{gpu}"), "GPU {i}");
    }
    assert_eq!(uuids.len(), 64, "a UUID per partition");
    // GPU 6's jobs run on its partitions 0 and 3; the others' on their own.
    let pids = |i: usize| -> Vec<u64> {
        samples[i]["processes"]
            .as_array()
            .expect("p")
            .iter()
            .map(|p| u(&p["pid"]))
            .collect()
    };
    assert_eq!(pids(6 * 8), [62200]);
    assert_eq!(pids(6 * 8 + 3), [62203]);
    assert!(pids(6 * 8 + 1).is_empty());
    assert_eq!(pids(8 + 2), [61002]);
    assert!(pids(8 + 6).is_empty(), "the idle partition");
}

#[test]
fn an_uncorrectable_ras_error_shows_its_count_its_page_and_the_reset_events() {
    let doc = sample(&profile("faults/ras-uncorrectable.toml"));
    let s = &gpus(&doc, "sample")[3];
    assert_eq!(s["ras"][0]["block"], "UMC");
    assert_eq!(u(&s["ras"][0]["uncorrectable"]), 1);
    assert_eq!(
        u(&s["ecc_uncorrected_volatile"]),
        1,
        "the ECC flag's figure, as on NVIDIA"
    );
    assert_eq!((u(&s["retired_pages"]), u(&s["retired_pages_pending"])), (1, 1));
    let events: Vec<(&str, &str)> = s["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| (e["kind"].as_str().unwrap_or(""), e["text"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        events,
        [
            ("gpu_pre_reset", "RAS: uncorrectable error in UMC, GPU reset begins"),
            ("gpu_post_reset", "RAS: GPU reset done")
        ]
    );
    assert!(u(&s["events"][0]["time_ms"]) > 1_700_000_000_000);
    for (i, g) in gpus(&doc, "sample").iter().enumerate().filter(|(i, _)| *i != 3) {
        assert_eq!(u(&g["ecc_uncorrected_volatile"]), 0, "GPU {i}");
        assert_eq!(g["events"], serde_json::json!([]), "GPU {i}");
    }
}

#[test]
fn an_xgmi_link_down_shows_in_the_nvlink_down_mask_at_both_ends() {
    let doc = sample(&profile("faults/xgmi-link-down.toml"));
    let s = gpus(&doc, "sample");
    // GPU 1's link 3 goes to GPU 4; GPU 4's link 1 to GPU 1.
    assert_eq!(u(&s[1]["nvlink_down_mask"]), 1 << 3);
    assert_eq!(s[1]["nvlink_state"], serde_json::json!([1, 1, 1, 0, 1, 1, 1]));
    assert_eq!(u(&s[4]["nvlink_down_mask"]), 1 << 1);
    assert_eq!(u(&s[1]["xgmi_error_status"]), 1);
    assert_eq!(u(&s[4]["xgmi_error_status"]), 1);
    let info = gpus(&doc, "info");
    assert_eq!(info[1]["nvlinks"][3]["peer_pci_bus_id"], BDFS[4]);
    assert_eq!(
        info[1]["nvlinks"][3]["inactive_at_start"], false,
        "down is a fault, at start too"
    );
    assert_eq!(u(&s[0]["nvlink_down_mask"]), 0);
}

#[test]
fn a_thermal_throttle_sets_nvmls_thermal_bit_with_amds_words_and_an_event() {
    let doc = sample(&profile("faults/thermal-throttle.toml"));
    let s = &gpus(&doc, "sample")[5];
    let d = &gpus(&doc, "info")[5];
    assert_eq!(u(&s["temp_c"]), 104);
    assert!(
        u(&s["temp_c"]) >= u(&d["slowdown_temp_c"]),
        "past the junction's critical limit"
    );
    assert_eq!(u(&s["sm_clock_mhz"]), 1350);
    let reasons = u(&s["throttle_reasons"]);
    assert_eq!(reasons, fleetop_agent::throttle::SW_THERMAL_SLOWDOWN);
    assert!(reasons & fleetop_agent::throttle::TROUBLE != 0);
    assert_eq!(
        s["throttle_detail"],
        serde_json::json!(["socket_thrm", "gfx_clk_below_host_limit", "TEMP_GPU", "TEMP_HOTSPOT"])
    );
    assert_eq!(s["events"][0]["kind"], "thermal_throttle");
    assert_eq!(u(&gpus(&doc, "sample")[4]["throttle_reasons"]), 0);
}

#[test]
fn a_gpu_that_stops_answering_is_lost_and_the_others_stand() {
    let doc = sample(&profile("faults/gpu-lost.toml"));
    let s = gpus(&doc, "sample");
    assert_eq!(
        s[6]["error"], "gpu_lost",
        "as NVML's lost GPU, so the console's flag fires"
    );
    assert_eq!(u(&s[6]["temp_c"]), 0);
    assert_eq!(
        s[6]["ras"],
        serde_json::json!([]),
        "no readings from a GPU that does not answer"
    );
    // Described by what AMD SMI kept from init: listed, not missing.
    assert_eq!(gpus(&doc, "info")[6]["pci_bus_id"], BDFS[6]);
    for (i, g) in s.iter().enumerate().filter(|(i, _)| *i != 6) {
        assert_eq!(g["error"], "", "GPU {i}");
        assert_eq!(u(&g["absent"]), NEVER_ON_AMD, "GPU {i}");
    }
}

/// Whether this machine has a real AMD SMI (then the missing-library tests skip).
fn has_amdsmi() -> bool {
    [
        "/opt/rocm/lib/libamd_smi.so",
        "/usr/lib/x86_64-linux-gnu/libamd_smi.so",
        "/usr/lib64/libamd_smi.so",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// Whether this machine has an NVIDIA driver (then `auto` may pick it).
fn has_nvml() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/lib64/libnvidia-ml.so.1",
        "/usr/lib/libnvidia-ml.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

#[test]
fn a_missing_library_is_a_clear_note_not_a_crash() {
    if has_amdsmi() {
        eprintln!("skipped: this machine has AMD SMI");
        return;
    }
    let empty = tempfile::tempdir().expect("tempdir");
    let agent = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
            .env("ROCM_PATH", empty.path())
            .env_remove("LD_LIBRARY_PATH")
            .args(args)
            .output()
            .expect("runs")
    };
    let out = agent(&["--backend", "amd", "--listen", "127.0.0.1:0", "--kmsg", "none"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("AMD SMI not available: libamd_smi.so could not be loaded"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    if has_nvml() {
        eprintln!("skipped the auto half: this machine has NVML");
        return;
    }
    let out = agent(&["sample", "--once", "--format", "json", "--kmsg", "none"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["info"]["backend"], "none");
    let note = doc["info"]["gpu_backend_note"].as_str().expect("note");
    assert!(
        note.contains("NVML not available") && note.contains("AMD SMI not available"),
        "{note}"
    );
}

#[test]
fn auto_picks_amd_smi_where_nvml_is_missing_and_amd_sees_gpus() {
    if has_nvml() {
        eprintln!("skipped: this machine has NVML, which auto tries first");
        return;
    }
    let doc = sample_with(&Rocm::new(), &profile("mi300x-oam.toml"), "auto");
    assert_eq!(doc["info"]["backend"], "amdsmi");
    assert_eq!(gpus(&doc, "info").len(), 8);
}

/// The agent chosen by its config file (`backend = "amd"`), serving: a
/// console's column-delta stream decodes to samples that carry every AMD
/// field, an unchanged one elided and restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_files_backend_serves_amd_fields_through_a_live_stream() {
    use fleetop_agent::proto::agent_message::Kind;
    use fleetop_agent::proto::{SubscribeRequest, agent_client::AgentClient};
    use fleetop_agent::wire::Decoder;

    let rocm = Rocm::new();
    let node = Node::new();
    let cfg = node.dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        "backend = \"amd\"\nlisten = \"127.0.0.1:0\"\ninterval = \"200ms\"\nstate_dir = \"none\"\nkmsg = \"none\"\n",
    )
    .expect("w");
    let mut child = rocm
        .agent(&profile("faults/thermal-throttle.toml"))
        .arg("--config")
        .arg(&cfg)
        .args(node.args().iter().filter(|a| !a.starts_with("--kmsg")))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let port = ports::wait_listening_port(child.id(), "the agent");
    let start = std::time::Instant::now();
    let mut client = loop {
        match AgentClient::connect(format!("http://127.0.0.1:{port}")).await {
            Ok(c) => break c,
            Err(_) if start.elapsed() < std::time::Duration::from_secs(20) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("the agent does not serve: {e}"),
        }
    };
    // The history too: the first sample, which carries the event, was
    // taken before this subscriber came.
    let req = SubscribeRequest {
        columns: true,
        ..Default::default()
    };
    let mut stream = client.subscribe(req).await.expect("subscribes").into_inner();
    let mut decoder = Decoder::default();
    let (mut info, mut samples, mut deltas) = (None, Vec::new(), 0);
    while samples.len() < 4 {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(20), stream.message())
            .await
            .expect("in time")
            .expect("a message")
            .expect("the stream lasts");
        match msg.kind {
            Some(Kind::Info(i)) => info = Some(i),
            Some(Kind::Sample(s)) => {
                deltas += usize::from(s.delta_from_seq != 0);
                samples.push(decoder.decode(s).expect("decodes").clone());
            }
            _ => {}
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let info = info.expect("a description");
    assert_eq!(info.backend, "amdsmi");
    assert_eq!(info.gpus[5].vendor, "AMD");
    assert_eq!(info.gpus[5].firmware.len(), 8);
    assert!(deltas >= 3, "sent as deltas: {deltas}");
    for s in &samples {
        let g = &s.gpus[5];
        assert_eq!(g.ras.len(), 10, "unchanged RAS counts restored from the base");
        assert_eq!(g.xgmi_error_status, Some(0));
        assert_eq!(
            g.throttle_detail,
            ["socket_thrm", "gfx_clk_below_host_limit", "TEMP_GPU", "TEMP_HOTSPOT"]
        );
        assert_eq!(g.throttle_reasons, fleetop_agent::throttle::SW_THERMAL_SLOWDOWN);
        assert_eq!(g.edge_temp_c, None);
    }
    // The event came once, in the first sample, not in the ones after.
    assert_eq!(samples[0].seq, 1);
    let events: Vec<usize> = samples.iter().map(|s| s.gpus[5].events.len()).collect();
    assert_eq!(events, [1, 0, 0, 0]);
}

/// The venv `.ci/run` keeps AMD's `amdsmi` 7.0.2 in.
fn amdsmi_python() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let py = PathBuf::from(home).join(".cache/fleetop/amdsmi-7.0.2/bin/python");
    py.exists().then_some(py)
}

/// Every value the agent reports equals what AMD's own `amdsmi` package
/// reads from the same fake at the same moment, on every profile.
#[test]
fn the_agent_agrees_with_amds_own_amdsmi_on_every_profile() {
    let Some(py) = amdsmi_python() else {
        eprintln!(
            "skipped: no amdsmi 7.0.2 venv in ~/.cache/fleetop/amdsmi-7.0.2 (.ci/run makes it; \
             python3 -m venv ~/.cache/fleetop/amdsmi-7.0.2 && ~/.cache/fleetop/amdsmi-7.0.2/bin/pip install amdsmi==7.0.2)"
        );
        return;
    };
    let lib = fake_amdsmi::fake_lib();
    let out = Command::new(py)
        .arg(root().join(".ci/amdsmi_check.py"))
        .arg("compare")
        .arg(root().join("tests/fake-amdsmi/profiles"))
        .arg(lib)
        .arg(env!("CARGO_BIN_EXE_fleetop-agent"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("python runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains(", 0 differences"), "{said}");
}
