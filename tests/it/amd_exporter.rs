//! `--amd-exporter`: AMD device-metrics-exporter's text (written from its
//! documented format: its metric names, the labels of its example config,
//! partitions, per-block ECC) served over HTTP on loopback and read through
//! `fleetop export`; a fleetop agent on the fake libamd_smi.so read the
//! same way agrees with its own sample; bad and hostile exporters each cost
//! only their own node.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fleetop::export::{GpuVendor, Status};
use serde_json::Value;

use crate::dcgm::{HttpServer, Reply, dcgm_text, mixed_node};
use crate::dcgm_exporter::{export, node};
use crate::{Agent, HERMETIC_AGENT, agent_bin, fleetop};

/// AMD's exporter on an MI300X node of `gpus` GPUs (CPX: two partitions a
/// physical GPU, the second with AMD's 0 for the socket's power), as its
/// client library writes it: every family a gauge, labels by name.
fn amd_text(hostname: &str, gpus: u32, cpx: bool) -> String {
    let labels = |gpu: u32| {
        let (partition, compute, memory) = if cpx {
            (gpu % 2, "cpx", "nps4")
        } else {
            (0, "spx", "nps1")
        };
        format!(
            "card_model=\"102-G30211-0C\",card_series=\"AMD Instinct MI300X OAM\",card_vendor=\"AMD\",\
             container=\"\",deployment_mode=\"baremetal\",driver_version=\"6.10.5\",\
             gpu_compute_partition_type=\"{compute}\",gpu_id=\"{gpu}\",gpu_memory_partition_type=\"{memory}\",\
             gpu_partition_id=\"{partition}\",gpu_uuid=\"3eff74a1-0000-1000-8042-{gpu:012x}\",\
             hostname=\"{hostname}\",job_id=\"\",job_partition=\"\",job_user=\"\",namespace=\"\",pod=\"\",\
             serial_number=\"69235100{gpu:02}\",vbios_version=\"113-M3000100-102\""
        )
    };
    type Get = fn(u32, bool) -> Option<String>;
    let families: [(&str, Get); 12] = [
        ("gpu_gfx_activity", |g, _| Some((80 + g).to_string())),
        ("gpu_umc_activity", |g, _| Some((30 + g).to_string())),
        ("gpu_used_vram", |g, _| Some((1000 * (g + 1)).to_string())),
        ("gpu_total_vram", |_, cpx| {
            Some(if cpx { "98288" } else { "196576" }.into())
        }),
        // The socket's readings: on partition 0 only, power 0 on the others.
        ("gpu_junction_temperature", |g, cpx| {
            (!cpx || g % 2 == 0).then(|| (60 + g).to_string())
        }),
        ("gpu_memory_temperature", |g, cpx| {
            (!cpx || g % 2 == 0).then(|| (50 + g).to_string())
        }),
        ("gpu_package_power", |g, cpx| {
            Some(if cpx && g % 2 == 1 {
                "0".into()
            } else {
                (600 + g).to_string()
            })
        }),
        ("gpu_energy_consumed", |g, cpx| {
            (!cpx || g % 2 == 0).then(|| format!("{}", 1.5e12 + f64::from(g) * 1e9))
        }),
        ("pcie_replay_count", |_, _| Some("0".into())),
        ("gpu_ecc_correct_total", |g, _| Some(g.to_string())),
        ("gpu_ecc_uncorrect_total", |_, _| Some("0".into())),
        ("gpu_ecc_correct_umc", |g, _| Some(g.to_string())),
    ];
    let mut out = String::new();
    for (name, get) in families {
        out.push_str(&format!("# HELP {name} test family\n# TYPE {name} gauge\n"));
        for g in 0..gpus {
            if let Some(v) = get(g, cpx) {
                out.push_str(&format!("{name}{{{}}} {v}\n", labels(g)));
            }
        }
    }
    out.push_str("# HELP gpu_clock test family\n# TYPE gpu_clock gauge\n");
    for g in 0..gpus {
        for x in 0..8 {
            out.push_str(&format!(
                "gpu_clock{{{},clock_index=\"{x}\",clock_type=\"system\"}} {}\n",
                labels(g),
                2000 + x * 10
            ));
        }
        out.push_str(&format!(
            "gpu_clock{{{},clock_index=\"8\",clock_type=\"memory\"}} 1300\n",
            labels(g)
        ));
    }
    out.push_str("# HELP gpu_nodes_total test family\n# TYPE gpu_nodes_total gauge\n");
    out.push_str(&format!("gpu_nodes_total{{hostname=\"{hostname}\"}} {gpus}\n"));
    out
}

#[test]
fn an_amd_exporter_node_is_exported_with_amds_readings() {
    let spx = HttpServer::start(Reply::Metrics(amd_text("mi-a", 2, false)));
    let cpx = HttpServer::start(Reply::Metrics(amd_text("mi-b", 4, true)));
    let snap = export(&["--amd-exporter", &format!("{},{}", spx.addr(), cpx.addr())]);
    let n = node(&snap, &spx.addr());
    assert_eq!(n.status, Status::Ok, "{n:?}");
    assert_eq!(n.hostname.as_deref(), Some("mi-a"));
    assert_eq!(n.agent.as_ref().map(|a| a.backend.as_str()), Some("amd-exporter"));
    assert_eq!(n.gpus.len(), 2);
    let g = &n.gpus[1];
    assert_eq!(g.vendor, GpuVendor::Amd);
    assert_eq!(g.model, "AMD Instinct MI300X OAM");
    assert_eq!(g.uuid, "3eff74a1-0000-1000-8042-000000000001");
    assert_eq!(g.util_pct, Some(81));
    assert_eq!(g.mem_util_pct, Some(31));
    assert_eq!(g.mem_used_bytes, Some(2000 << 20));
    assert_eq!(g.mem_total_bytes, Some(196_576 << 20));
    assert_eq!(g.temp_c, Some(61));
    assert_eq!(g.hbm_temp_c, Some(51));
    assert_eq!(g.power_w, Some(601.0));
    assert_eq!(g.energy_j, Some(1_501_000.0));
    assert_eq!(g.sm_clock_mhz, Some(2000));
    assert_eq!(g.mem_clock_mhz, Some(1300));
    assert_eq!(g.ecc_corrected_volatile, Some(1));
    assert_eq!(g.vbios_version.as_deref(), Some("113-M3000100-102"));
    assert_eq!(
        (
            g.compute_partition.as_deref(),
            g.memory_partition.as_deref(),
            g.partition_id
        ),
        (Some("SPX"), Some("NPS1"), Some(0))
    );
    assert_eq!(g.ras.len(), 1);
    assert_eq!((g.ras[0].block.as_str(), g.ras[0].correctable), ("UMC", 1));
    // What AMD's exporter does not give is absent, not 0.
    assert_eq!(g.throttle_mask, None);
    assert_eq!(g.edge_temp_c, None);
    assert!(n.host.is_none());
    // CPX: each partition a GPU; the socket's power once, on partition 0.
    let c = node(&snap, &cpx.addr());
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert_eq!(c.gpus.len(), 4);
    let p = |i: usize| (c.gpus[i].partition_id, c.gpus[i].power_w, c.gpus[i].temp_c);
    assert_eq!(p(0), (Some(0), Some(600.0), Some(60)));
    assert_eq!(p(1), (Some(1), None, None));
    assert_eq!(c.gpus[1].util_pct, Some(81));
    assert_eq!(c.gpus[3].compute_partition.as_deref(), Some("CPX"));
}

/// The fake libamd_smi.so, built for this run, and a ROCm tree that holds it.
pub(crate) fn fake_rocm() -> tempfile::TempDir {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "fleetop-fake-amdsmi"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the fake AMD SMI failed");
    let lib = agent_bin().with_file_name("libamd_smi.so");
    assert!(lib.exists(), "{} is missing", lib.display());
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("lib")).expect("mkdir");
    std::os::unix::fs::symlink(lib, dir.path().join("lib/libamd_smi.so")).expect("symlink");
    dir
}

pub(crate) fn profile(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-amdsmi/profiles")
        .join(name)
}

/// The agent on the fake AMD SMI, its clock frozen (every reading steady).
pub(crate) fn amd_agent(rocm: &tempfile::TempDir, profile: &PathBuf) -> Command {
    let mut c = Command::new(agent_bin());
    c.env("ROCM_PATH", rocm.path())
        .env("FAKE_AMDSMI_PROFILE", profile)
        .env("FAKE_AMDSMI_TIME_S", "20")
        .env("FLEETOP_LOG", "warn")
        .env_remove("LD_LIBRARY_PATH")
        .args(["--backend", "amd", "--ib-sysfs", "/nonexistent"])
        .args(HERMETIC_AGENT);
    c
}

/// The agent's /metrics on an AMD node, read by `--amd-exporter`, says what
/// the agent's own sample says: AMD's names, labels and units round-trip.
#[test]
fn an_agent_on_amd_read_through_its_metrics_matches_its_own_sample() {
    let rocm = fake_rocm();
    for name in ["mi300x-oam.toml", "mi300x-cpx-nps4.toml"] {
        let prof = profile(name);
        let mut _agent = Agent::spawn(
            amd_agent(&rocm, &prof)
                .args(["--interval", "300ms", "--listen", "127.0.0.1:0"])
                .args(["--metrics-listen", "127.0.0.1:0"])
                .stdout(Stdio::null()),
            "warn",
        );
        // Logged once it serves: the metrics listener is up.
        let port = _agent.log.metrics().port();
        let out = amd_agent(&rocm, &prof)
            .args(["sample", "--once", "--format", "json"])
            .output()
            .expect("sample runs");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("sample JSON");
        let addr = format!("127.0.0.1:{port}");
        let snap = export(&["--amd-exporter", &addr]);
        let n = node(&snap, &addr);
        assert_eq!(n.status, Status::Ok, "{name}: {n:?}");
        assert_eq!(
            n.agent.as_ref().map(|a| a.version.as_str()),
            Some(env!("CARGO_PKG_VERSION"))
        );
        let info = doc["info"]["gpus"].as_array().expect("gpus");
        let samples = doc["sample"]["gpus"].as_array().expect("gpus");
        assert_eq!(n.gpus.len(), samples.len(), "{name}");
        for (g, (d, s)) in n.gpus.iter().zip(info.iter().zip(samples)) {
            let what = format!("{name} GPU {}", g.index);
            let num = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{what}: {v}"));
            assert_eq!(g.vendor, GpuVendor::Amd, "{what}");
            assert_eq!(g.uuid, d["uuid"].as_str().unwrap_or_default(), "{what}");
            assert_eq!(g.model, d["model"].as_str().unwrap_or_default(), "{what}");
            assert_eq!(u64::from(g.util_pct.expect("util")), num(&s["util_pct"]), "{what}");
            assert_eq!(
                g.mem_used_bytes.map(|b| b >> 20),
                Some(num(&s["mem_used_bytes"]) >> 20),
                "{what}"
            );
            let partition = num(&d["partition_id"]);
            assert_eq!(g.partition_id, Some(partition as u32), "{what}");
            assert_eq!(
                g.compute_partition.as_deref(),
                d["compute_partition"].as_str(),
                "{what}"
            );
            if partition == 0 {
                // The socket's readings, on its first partition.
                assert_eq!(u64::from(g.temp_c.expect("temp")), num(&s["temp_c"]), "{what}");
                assert_eq!(g.power_w, Some(num(&s["power_mw"]) as f64 / 1000.0), "{what}");
                assert_eq!(
                    u64::from(g.sm_clock_mhz.expect("clock")),
                    num(&s["sm_clock_mhz"]),
                    "{what}"
                );
                assert_eq!(
                    g.ecc_corrected_volatile,
                    Some(num(&s["ecc_corrected_volatile"])),
                    "{what}"
                );
                let blocks = s["ras"].as_array().map_or(0, Vec::len);
                assert_eq!(g.ras.len(), blocks, "{what}");
            } else {
                assert_eq!((g.temp_c, g.power_w), (None, None), "{what}");
            }
        }
    }
}

/// The probes every source meets (docs/security.md), against
/// `--amd-exporter`: an exporter that answers HTML, an error, a cut page,
/// nothing, a byte at a time, without end, another exporter's page, and one
/// whose labels hold terminal escapes and bidi overrides. Each costs its
/// own node only, within the scrape timeout, and nothing it says is kept raw.
#[test]
fn bad_trickling_endless_and_hostile_amd_exporters_each_cost_only_their_node() {
    let text = amd_text("mi-good", 2, false);
    let good = HttpServer::start(Reply::Metrics(text.clone()));
    let html = HttpServer::start(Reply::html());
    let failing = HttpServer::start(Reply::status_500());
    let cut = HttpServer::start(Reply::truncated(&text));
    let slow = HttpServer::start(Reply::Hang);
    let trickle = HttpServer::start(Reply::Trickle);
    let endless = HttpServer::start(Reply::Endless);
    let nvidia = HttpServer::start(Reply::Metrics(dcgm_text("gpu-a", &mixed_node())));
    let raw = "mi\u{1b}]0;owned\u{7}\u{202e}x";
    let hostile_text = amd_text(raw, 2, false)
        .replace("AMD Instinct MI300X OAM", "MI300X\u{1b}[2J\u{202e}")
        .replace("vbios_version=\"113-M3000100-102\"", "vbios_version=\"v\u{1b}[31m\"")
        .replace("pod=\"\"", "pod=\"p\u{1b}[31m\"")
        .replace("namespace=\"\"", "namespace=\"ns\"")
        .replace(
            "gpu_compute_partition_type=\"spx\"",
            "gpu_compute_partition_type=\"\u{202e}cpx\"",
        );
    let hostile = HttpServer::start(Reply::Metrics(hostile_text));
    let all = [
        &good, &html, &failing, &cut, &slow, &trickle, &endless, &nvidia, &hostile,
    ];
    let hosts = all.map(|s| s.addr()).join(",");
    let started = Instant::now();
    let snap = export(&["--amd-exporter", &hosts]);
    // Not a speed test: a trickle that held the export would take minutes.
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(snap.nodes.len(), all.len());
    let g = node(&snap, &good.addr());
    assert_eq!(g.status, Status::Ok);
    assert_eq!(g.gpus[0].util_pct, Some(80));
    for (s, needle) in [
        (&html, "HTML"),
        (&failing, "HTTP 500"),
        (&cut, "truncated"),
        (&slow, "timed out"),
        (&trickle, "timed out"),
        (&endless, "over the limit"),
        (&nvidia, "no AMD GPU series"),
    ] {
        let n = node(&snap, &s.addr());
        assert_eq!(n.status, Status::Unreachable, "{n:?}");
        assert!(n.gpus.is_empty());
        let detail = n.status_detail.as_deref().unwrap_or_default();
        assert!(detail.contains(needle), "{needle:?} not in {detail:?}");
        assert!(!detail.contains('\n'), "{detail:?}");
    }
    let h = node(&snap, &hostile.addr());
    assert_eq!(h.status, Status::Ok, "{h:?}");
    let doc = serde_json::to_string(h).expect("json");
    for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!doc.contains(bad), "{bad:?} kept raw in {doc}");
    }
    assert_eq!(h.hostname.as_deref(), Some("mi\\u{1b}]0;owned\\u{7}\\u{202e}x"));
    assert_eq!(h.gpus[0].model, "MI300X\\u{1b}[2J\\u{202e}");
    assert_eq!(h.gpus[0].vbios_version.as_deref(), Some("v\\u{1b}[31m"));
    assert!(doc.contains("p\\\\u{1b}[31m"), "the pod, escaped: {doc}");
}

#[test]
fn amd_exporter_is_one_source_among_the_others() {
    for other in [
        &["--dcgm-exporter", "gpu01"][..],
        &["--hosts", "gpu01"],
        &["--prometheus", "http://prom:9090"],
    ] {
        let out = fleetop()
            .args(["export", "--once", "--amd-exporter", "mi01"])
            .args(other)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{other:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--amd-exporter") && err.contains("cannot be used with"),
            "{other:?}: {err}"
        );
    }
}
