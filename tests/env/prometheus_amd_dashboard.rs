//! AMD's Grafana dashboards for its device-metrics-exporter (grafana/ in
//! ROCm/device-metrics-exporter), their queries as written there, against a
//! real Prometheus (Debian's `prometheus`, on loopback) scraping a fleetop
//! agent on the fake libamd_smi.so (8 x MI300X) at 1 s: the dashboards'
//! variables resolve, every panel below returns data, and the values are
//! the agent's own, those gated on `card_model` (AMD's board part numbers)
//! and the per-XCC GFX busy among them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::prometheus_harness::{encode, http_get};
use crate::{Agent, HERMETIC_AGENT, agent_bin};

/// Panels of AMD's dashboards that read what the agent serves, their
/// PromQL as written there (`dashboard_node.json`, `dashboard_gpu.json`,
/// `dashboard_overview.json`); `${g_metrics_prefix}`, `$__interval` and the
/// other variables are filled in below as Grafana fills them.
const PANELS: [(&str, &str); 20] = [
    // Gated on card_model (AMD's board part numbers) and per XCC.
    (
        "node: GPU Usage (busy GPUs)",
        r#"sum(group by(gpu_id) (${g_metrics_prefix}gpu_gfx_busy_instantaneous{hostname="$g_hostname", card_model!~"102-D65208-0C|102-D67305-00|102-D65209-0C"} > 0))"#,
    ),
    (
        "gpu: GFX Busy per XCC",
        r#"${g_metrics_prefix}gpu_gfx_busy_instantaneous{gpu_uuid="$g_gpu_uuid", card_model!~"102-D65208-0C|102-D67305-00|102-D65209-0C", gpu_id="$g_gpu_id"}"#,
    ),
    (
        "gpu: Power (MI300 boards)",
        r#"${g_metrics_prefix}gpu_package_power{gpu_uuid="$g_gpu_uuid", card_model=~"102-G30211-00|102-G30211-0C|102-G30211-4C|102-G30212-0C|102-G30213-00|102-G30213-0C|102-G39205-00|102-G36220-0C|102-G36221-0C|102-G39206-00", gpu_id="$g_gpu_id"}"#,
    ),
    (
        "gpu: Junction Temperature (MI300 boards)",
        r#"${g_metrics_prefix}gpu_junction_temperature{gpu_uuid="$g_gpu_uuid", card_model=~"102-G30211-00|102-G30211-0C|102-G30211-4C|102-G30212-0C|102-G30213-00|102-G30213-0C|102-G39205-00|102-G36220-0C|102-G36221-0C|102-G39206-00", gpu_id="$g_gpu_id"}"#,
    ),
    (
        "node: Memory Usage (used)",
        r#"sum(${g_metrics_prefix}gpu_used_vram{hostname="$g_hostname"})"#,
    ),
    (
        "node: Memory Usage (total)",
        r#"sum(${g_metrics_prefix}gpu_total_vram{hostname="$g_hostname"})"#,
    ),
    (
        "node: Top 5 Used VRAM",
        r#"topk(5, ${g_metrics_prefix}gpu_used_vram{hostname="$g_hostname"})"#,
    ),
    (
        "node: Total Power Usage",
        r#"sum(${g_metrics_prefix}gpu_package_power{hostname="$g_hostname"}) or vector(0)"#,
    ),
    (
        "node: PCIe Max Speed",
        r#"${g_metrics_prefix}pcie_max_speed{hostname="$g_hostname"}"#,
    ),
    (
        "node: PCIe Counts",
        r#"sum(delta(${g_metrics_prefix}pcie_replay_count{hostname="$g_hostname"}[$__interval]))"#,
    ),
    (
        "node: Total ECC Counts",
        r#"sum(delta(${g_metrics_prefix}gpu_ecc_correct_total{hostname="$g_hostname"}[$__interval]))"#,
    ),
    (
        "node: Energy Consumed",
        r#"sum(delta(${g_metrics_prefix}gpu_energy_consumed{hostname="$g_hostname"}[$__interval]))"#,
    ),
    (
        "node: Average Memory Temperature",
        r#"avg(${g_metrics_prefix}gpu_memory_temperature{hostname="$g_hostname"})"#,
    ),
    (
        "node: Average Sensor Temperatures",
        r#"avg(${g_metrics_prefix}gpu_junction_temperature{hostname="$g_hostname"})"#,
    ),
    (
        "node: All GPUs",
        r#"${g_metrics_prefix}gpu_health{hostname="$g_hostname"}"#,
    ),
    (
        "overview: GPUs",
        r#"sum(${g_metrics_prefix}gpu_nodes_total{cluster_name="$g_cluster_name"})"#,
    ),
    (
        "gpu: Used VRAM",
        r#"${g_metrics_prefix}gpu_used_vram{gpu_uuid="$g_gpu_uuid", gpu_id="$g_gpu_id"}"#,
    ),
    (
        "gpu: Memory Temperature",
        r#"${g_metrics_prefix}gpu_memory_temperature{gpu_uuid="$g_gpu_uuid", gpu_id="$g_gpu_id"}"#,
    ),
    (
        "gpu: Temperature Sensors",
        r#"${g_metrics_prefix}gpu_junction_temperature{gpu_uuid="$g_gpu_uuid", gpu_id="$g_gpu_id"}"#,
    ),
    (
        "gpu: Health",
        r#"${g_metrics_prefix}gpu_health{gpu_uuid="$g_gpu_uuid", hostname="$g_hostname", gpu_id="$g_gpu_id"}"#,
    ),
];

/// The cluster's name, as a Prometheus target label (AMD's exporter sets
/// it as a custom label; its dashboards filter on it).
const CLUSTER: &str = "mi-cluster";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// A ROCm tree holding the fake libamd_smi.so, built for this run.
fn fake_rocm() -> tempfile::TempDir {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "fleetop-fake-amdsmi"])
        .current_dir(root())
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

fn agent(rocm: &Path) -> Command {
    let mut c = Command::new(agent_bin());
    c.env("ROCM_PATH", rocm)
        .env(
            "FAKE_AMDSMI_PROFILE",
            root().join("tests/fake-amdsmi/profiles/mi300x-oam.toml"),
        )
        // The fake's clock frozen: the agent's sample and its scrapes agree.
        .env("FAKE_AMDSMI_TIME_S", "20")
        .env("FLEETOP_LOG", "warn")
        .env_remove("LD_LIBRARY_PATH")
        .args(["--backend", "amd", "--ib-sysfs", "/nonexistent"])
        .args(HERMETIC_AGENT);
    c
}

struct Prom(u16);

impl Prom {
    fn api(&self, path_and_query: &str) -> Value {
        let (status, body) = http_get(self.0, path_and_query).unwrap_or_default();
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert!(
            status == 200 && v["status"] == "success",
            "{path_and_query}: {status} {body}"
        );
        v["data"].clone()
    }

    fn query(&self, q: &str) -> Vec<Value> {
        self.api(&format!("/api/v1/query?query={}", encode(q)))["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Grafana's `label_values(<matcher>, label)`; no matcher: `label_values(label)`.
    fn label_values(&self, label: &str, matcher: Option<&str>) -> Vec<String> {
        let path = match matcher {
            Some(m) => format!("/api/v1/label/{label}/values?match[]={}", encode(m)),
            None => format!("/api/v1/label/{label}/values"),
        };
        self.api(&path)
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    }
}

fn value(v: &Value) -> f64 {
    v["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN)
}

pub fn amds_dashboard_queries_return_the_agents_data() {
    let rocm = fake_rocm();
    let mut _agent = Agent::spawn(
        agent(rocm.path())
            .args(["--interval", "500ms", "--listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .stdout(Stdio::null()),
        "warn",
    );
    let port = _agent.log.metrics().port();
    let out = agent(rocm.path())
        .args(["sample", "--once", "--format", "json"])
        .output()
        .expect("sample runs");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("sample JSON");
    let host = doc["info"]["hostname"].as_str().expect("hostname").to_string();
    let gpus = doc["sample"]["gpus"].as_array().expect("gpus").clone();
    assert_eq!(gpus.len(), 8);

    let harness = crate::prometheus_harness::Prometheus::start_labelled(
        &[format!("127.0.0.1:{port}")],
        &[("cluster_name", CLUSTER)],
    );
    let prom = Prom(harness.port);
    let start = Instant::now();
    loop {
        let scrapes = prom.query("min(count_over_time(fleetop_agent_up[1m])) and count(up == 1) == 1");
        if scrapes.first().is_some_and(|r| value(r) >= 6.0) {
            break;
        }
        assert!(
            // Two scrapes take 2 s; a CI runner busy with Ray and Slurm
            // has missed 1 s scrape timeouts for most of a minute.
            start.elapsed() < Duration::from_secs(180),
            "Prometheus never scraped the agent six times"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // The dashboards' variables, as Grafana asks for them.
    assert_eq!(prom.label_values("cluster_name", None), [CLUSTER]);
    let hosts = prom.label_values("hostname", Some(&format!("{{cluster_name=\"{CLUSTER}\"}}")));
    assert_eq!(hosts, [host.as_str()]);
    let ids = prom.label_values("gpu_id", Some(&format!("{{hostname=\"{host}\"}}")));
    assert_eq!(ids, ["0", "1", "2", "3", "4", "5", "6", "7"]);
    let gpu_id = "3";
    let partitions = prom.label_values(
        "gpu_partition_id",
        Some(&format!("{{hostname=\"{host}\", gpu_id=\"{gpu_id}\"}}")),
    );
    assert_eq!(partitions, ["0"]);
    let uuids = prom.label_values(
        "gpu_uuid",
        Some(&format!(
            "{{cluster_name=\"{CLUSTER}\", hostname=\"{host}\", gpu_id=\"{gpu_id}\", gpu_partition_id=\"0\"}}"
        )),
    );
    let want_uuid = doc["info"]["gpus"][3]["uuid"].as_str().expect("uuid");
    assert_eq!(uuids, [want_uuid]);

    let fill = |expr: &str| {
        expr.replace("${g_metrics_prefix}", "")
            .replace("$__interval", "5s")
            .replace("$g_cluster_name", CLUSTER)
            .replace("$g_hostname", &host)
            .replace("$g_gpu_id", gpu_id)
            .replace("$g_gpu_uuid", want_uuid)
    };
    let mut got = std::collections::BTreeMap::new();
    for (title, expr) in PANELS {
        let q = fill(expr);
        let r = prom.query(&q);
        assert!(!r.is_empty(), "panel {title:?} has no data: {q}");
        got.insert(title, r);
    }

    // The values are the agent's own.
    let sum = |f: &dyn Fn(&Value) -> f64| gpus.iter().map(f).sum::<f64>();
    let num = |g: &Value, k: &str| g[k].as_f64().unwrap_or(f64::NAN);
    let one = |title: &str| value(&got[title][0]);
    let near = |what: &str, got: f64, want: f64| {
        assert!(
            (got - want).abs() <= want.abs() * 1e-9 + 1e-9,
            "{what}: Prometheus {got}, agent {want}"
        );
    };
    near(
        "VRAM used",
        one("node: Memory Usage (used)"),
        sum(&|g| ((num(g, "mem_used_bytes") as u64) >> 20) as f64),
    );
    near(
        "socket power",
        one("node: Total Power Usage"),
        sum(&|g| num(g, "power_mw") / 1000.0),
    );
    near(
        "junction temperature",
        one("node: Average Sensor Temperatures"),
        sum(&|g| num(g, "temp_c")) / 8.0,
    );
    near(
        "HBM temperature",
        one("gpu: Memory Temperature"),
        num(&gpus[3], "hbm_temp_c"),
    );
    near("GPUs", one("overview: GPUs"), 8.0);
    assert_eq!(got["node: Top 5 Used VRAM"].len(), 5);
    assert_eq!(got["node: All GPUs"].len(), 8);
    assert!(got["node: All GPUs"].iter().all(|r| value(r) == 1.0));
    let max_gen = doc["info"]["gpus"][0]["pcie_max_gen"].as_u64().expect("gen");
    assert_eq!(max_gen, 5);
    assert!(got["node: PCIe Max Speed"].iter().all(|r| value(r) == 32.0));
    // The MI300 panels: the GPUs busy (GPU 7 idles), 8 XCCs on GPU 3, its
    // power and junction picked by its board's part number.
    near(
        "busy GPUs",
        one("node: GPU Usage (busy GPUs)"),
        sum(&|g| f64::from(u8::from(num(g, "util_pct") > 0.0))),
    );
    assert_eq!(got["gpu: GFX Busy per XCC"].len(), 8);
    near(
        "power, MI300 boards",
        one("gpu: Power (MI300 boards)"),
        num(&gpus[3], "power_mw") / 1000.0,
    );
    near(
        "junction, MI300 boards",
        one("gpu: Junction Temperature (MI300 boards)"),
        num(&gpus[3], "temp_c"),
    );
}
