//! `--prometheus` over fleetop agents: a real Prometheus scrapes simulated
//! agents' /metrics (a throttling GPU, an InfiniBand port down, an NVLink
//! link down, a GPU fallen off the bus), and `fleetop export --prometheus`
//! raises the same flags, on the same GPUs and ports, as `fleetop export`
//! reading the agents themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use fleetop::export::Snapshot;

use crate::prometheus_harness::{Prometheus, export_once};
use crate::{Agent, agent_bin};

/// host name, scenario: each one problem, on one GPU or port.
const NODES: [(&str, &str); 6] = [
    ("t-throttle", "thermal-throttle"),
    ("t-ib", "ib-down"),
    ("t-iberr", "ib-errors"),
    ("t-nvlink", "nvlink-down"),
    ("t-lost", "xid79"),
    ("t-quiet", "training"),
];

/// What a flag says, less its times and words.
type FlagKey = (String, String, Option<u32>, Option<String>);

fn flags(s: &Snapshot) -> BTreeMap<String, BTreeSet<FlagKey>> {
    s.nodes
        .iter()
        .map(|n| {
            let set = n
                .flags
                .iter()
                .map(|f| {
                    let kind = serde_json::to_value(f.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string));
                    let sev = serde_json::to_value(f.severity)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string));
                    (
                        kind.unwrap_or_default(),
                        sev.unwrap_or_default(),
                        f.gpu,
                        f.ib_port.clone(),
                    )
                })
                .collect();
            (n.hostname.clone().unwrap_or_else(|| n.name.clone()), set)
        })
        .collect()
}

fn export(args: &[&str]) -> Snapshot {
    export_once("30s", args).0
}

pub fn agent_flags_come_through_prometheus() {
    flags_come_through(Prometheus::start);
}

/// The same through VictoriaMetrics: the store past one console reads alike.
pub fn agent_flags_come_through_victoria_metrics() {
    flags_come_through(Prometheus::start_victoria);
}

fn flags_come_through(store: fn(&[String]) -> Prometheus) {
    let mut agents = Vec::new();
    let mut grpc = Vec::new();
    let mut metrics = Vec::new();
    for (i, (host, scenario)) in NODES.iter().enumerate() {
        // Two minutes of invented history: every problem (20 s into the
        // story) is on from the start.
        let mut agent = Agent::spawn(
            Command::new(agent_bin())
                .args(["--backend", "sim", "--sim-hostname", host, "--sim-scenario", scenario])
                .args([
                    "--sim-gpus",
                    "4",
                    "--sim-ib-ports",
                    "2",
                    "--sim-seed",
                    &(i + 1).to_string(),
                ])
                .args(["--sim-history", "2m", "--interval", "500ms"])
                .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
                .stdout(Stdio::null()),
            "warn",
        );
        grpc.push(agent.host());
        metrics.push(agent.log.metrics().to_string());
        agents.push(agent);
    }
    let prom = store(&metrics);
    // Enough scrapes for the flags' debounce (a few samples) in the history.
    prom.wait_scrapes(NODES.len(), 8);

    let mut direct = flags(&export(&["--hosts", &grpc.join(",")]));
    let via = flags(&export(&["--prometheus", &prom.url()]));

    // The problems are there at all (the simulation did its part).
    let kinds = |f: &BTreeMap<String, BTreeSet<FlagKey>>, host: &str| -> BTreeSet<String> {
        f.get(host)
            .map(|s| s.iter().map(|k| k.0.clone()).collect())
            .unwrap_or_default()
    };
    for (host, kind) in [
        ("t-throttle", "throttled"),
        ("t-ib", "ib_down"),
        ("t-nvlink", "nvlink_down"),
        ("t-lost", "gpu_lost"),
        ("t-iberr", "ib_errors"),
    ] {
        assert!(
            kinds(&direct, host).contains(kind),
            "{host}: agent export has no {kind}: {direct:?}"
        );
    }
    // The port that went down counted its link_downed once, at the onset,
    // in the agent's invented history: before Prometheus ran, so no rise
    // is in its data (t-iberr's errors keep rising, and are).
    if let Some(f) = direct.get_mut("t-ib") {
        f.retain(|k| k.0 != "ib_errors");
    }
    // Through Prometheus: the same flags on the same GPUs and ports.
    assert_eq!(via, direct, "\nvia prometheus: {via:#?}\ndirect: {direct:#?}");
}
