//! NVIDIA's Grafana dashboard for dcgm-exporter, unchanged, against a real
//! Prometheus (Debian's `prometheus`, on loopback) scraping real simulated
//! fleetop agents at 1 s: every panel's query returns data, and the values
//! are the agents' own.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::prometheus_harness::{encode, http_get};
use crate::{Agent, agent_bin};

/// The PromQL of every panel of grafana/dcgm-exporter-dashboard.json
/// (NVIDIA/dcgm-exporter), as written there: `$Hostname` and `$gpu` are the
/// dashboard's variables, filled in below as Grafana fills in "All".
const PANELS: [(&str, &str); 8] = [
    (
        "GPU Temperature",
        r#"max(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)"#,
    ),
    (
        "GPU Avg. Temp",
        r#"avg(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"})"#,
    ),
    (
        "GPU Power Usage",
        r#"max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)"#,
    ),
    (
        "GPU Power Total",
        r#"sum(max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (gpu))"#,
    ),
    (
        "GPU SM Clocks",
        r#"max(DCGM_FI_DEV_SM_CLOCK{Hostname=~"$Hostname", gpu=~"$gpu"} * 1000000) by (Hostname, UUID, gpu)"#,
    ),
    (
        "GPU Utilization",
        r#"max(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"#,
    ),
    (
        "Tensor Core Utilization",
        r#"max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"#,
    ),
    (
        "GPU Framebuffer Mem Used",
        r#"max(DCGM_FI_DEV_FB_USED{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"#,
    ),
];

/// The dashboard's template variables (label_values queries).
const HOSTNAME_VAR: (&str, &str) = ("Hostname", "DCGM_FI_DEV_FB_FREE");
const GPU_VAR: (&str, &str) = ("gpu", r#"DCGM_FI_DEV_FB_FREE{Hostname=~"$Hostname"}"#);

/// The simulated nodes: host name, GPUs, seed.
const NODES: [(&str, u32, u64); 3] = [("h1", 2, 11), ("h2", 3, 12), ("h3", 4, 13)];

fn agent_args(host: &str, gpus: u32, seed: u64) -> Vec<String> {
    [
        "--backend",
        "sim",
        "--sim-hostname",
        host,
        "--sim-gpus",
        &gpus.to_string(),
        "--sim-seed",
        &seed.to_string(),
        "--sim-ib-ports",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
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

    /// An instant query's result vector.
    fn query(&self, q: &str) -> Vec<Value> {
        self.api(&format!("/api/v1/query?query={}", encode(q)))["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// A range query over the last 30 s at 1 s steps: its series.
    fn query_range(&self, q: &str) -> Vec<Value> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        self.api(&format!(
            "/api/v1/query_range?query={}&start={:.3}&end={:.3}&step=1",
            encode(q),
            now - 30.0,
            now
        ))["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn label_values(&self, label: &str, matcher: &str) -> Vec<String> {
        self.api(&format!("/api/v1/label/{label}/values?match[]={}", encode(matcher)))
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    }
}

fn value(v: &Value) -> f64 {
    v["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN)
}

/// Grafana's "All" of a multi-value variable: a regex of every value.
fn all(values: &[String]) -> String {
    format!("({})", values.join("|"))
}

pub fn nvidias_dashboard_queries_return_the_agents_data() {
    let mut agents = Vec::new();
    let mut targets = Vec::new();
    for (host, gpus, seed) in NODES {
        let mut agent = Agent::spawn(
            Command::new(agent_bin())
                .args(agent_args(host, gpus, seed))
                .args(["--interval", "500ms", "--listen", "127.0.0.1:0"])
                .args(["--metrics-listen", "127.0.0.1:0"])
                .stdout(Stdio::null()),
            "warn",
        );
        targets.push(agent.log.metrics().to_string());
        agents.push(agent);
    }
    let harness = crate::prometheus_harness::Prometheus::start(&targets);
    let prom = Prom(harness.port);

    // Two scrapes of every agent, all of them up.
    let start = Instant::now();
    loop {
        let scrapes = prom.query("min(count_over_time(fleetop_agent_up[1m])) and count(up == 1) == 3");
        if scrapes.first().is_some_and(|r| value(r) >= 2.0) {
            break;
        }
        assert!(
            // Two scrapes take 2 s. A deadline, not a measure of speed: a
            // busy CI runner misses 1 s scrape timeouts for a while, as
            // the harness's own waits allow (60 s). It was 3 minutes while
            // an agent could lose its port to another test and never answer.
            start.elapsed() < Duration::from_secs(60),
            "Prometheus never scraped the agents twice"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // The variables, as Grafana asks for them.
    let hosts = prom.label_values(HOSTNAME_VAR.0, HOSTNAME_VAR.1);
    assert_eq!(hosts, ["h1", "h2", "h3"]);
    let host_re = all(&hosts);
    let gpus = prom.label_values(GPU_VAR.0, &GPU_VAR.1.replace("$Hostname", &host_re));
    assert_eq!(gpus, ["0", "1", "2", "3"]);
    let gpu_re = all(&gpus);
    let total_gpus: usize = NODES.iter().map(|n| n.1 as usize).sum();

    let mut per_panel = BTreeMap::new();
    for (title, expr) in PANELS {
        let q = expr.replace("$Hostname", &host_re).replace("$gpu", &gpu_re);
        let instant = prom.query(&q);
        assert!(!instant.is_empty(), "panel {title:?} has no data: {q}");
        let range = prom.query_range(&q);
        assert!(!range.is_empty(), "panel {title:?} has no range data: {q}");
        per_panel.insert(title, instant);
    }
    // Per-GPU panels: one series per GPU of every node.
    for title in [
        "GPU Temperature",
        "GPU Power Usage",
        "GPU SM Clocks",
        "GPU Utilization",
        "Tensor Core Utilization",
        "GPU Framebuffer Mem Used",
    ] {
        assert_eq!(per_panel[title].len(), total_gpus, "{title}");
    }

    // The values are the agents' own: each node's JSON sample (the same
    // simulation, taken now) against what Prometheus holds.
    for (host, n, seed) in NODES {
        let out = Command::new(agent_bin())
            .arg("sample")
            .arg("--once")
            .args(agent_args(host, n, seed))
            .output()
            .expect("sample runs");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("sample JSON");
        let series = prom.query(&format!("DCGM_FI_DEV_GPU_TEMP{{Hostname=\"{host}\"}}"));
        let uuids: BTreeSet<&str> = series.iter().filter_map(|s| s["metric"]["UUID"].as_str()).collect();
        let want: BTreeSet<&str> = doc["info"]["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .filter_map(|g| g["uuid"].as_str())
            .collect();
        assert_eq!(uuids, want, "{host}: the same GPUs");
        for g in doc["sample"]["gpus"].as_array().expect("sample gpus") {
            let i = g["index"].as_u64().unwrap_or(99);
            let one = |metric: &str| -> f64 {
                let r = prom.query(&format!("{metric}{{Hostname=\"{host}\",gpu=\"{i}\"}}"));
                assert_eq!(r.len(), 1, "{metric} {host} {i}: {r:?}");
                value(&r[0])
            };
            let near = |what: &str, got: f64, want: f64, tol: f64| {
                assert!(
                    (got - want).abs() <= tol,
                    "{host} GPU {i} {what}: Prometheus {got}, agent {want}"
                );
            };
            near(
                "temperature",
                one("DCGM_FI_DEV_GPU_TEMP"),
                g["temp_c"].as_f64().unwrap_or(f64::NAN),
                10.0,
            );
            let power = g["power_mw"].as_f64().unwrap_or(f64::NAN) / 1000.0;
            near("power", one("DCGM_FI_DEV_POWER_USAGE"), power, power * 0.3);
            let fb = g["mem_used_bytes"].as_f64().unwrap_or(f64::NAN) / 1048576.0;
            near("framebuffer", one("DCGM_FI_DEV_FB_USED"), fb, fb * 0.1);
            let tensor = g["gpm"]["tensor_active_cpct"].as_f64().unwrap_or(f64::NAN) / 10_000.0;
            near("tensor activity", one("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), tensor, 0.25);
        }
    }
}
