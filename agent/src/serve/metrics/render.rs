//! The series of one scrape, rendered from the latest published snapshot.
//!
//! A reading the GPU did not give (its `absent` bit, or a GPU that did not
//! answer) is no sample at all, never a 0: a dashboard then shows a gap,
//! and an alert on `DCGM_FI_DEV_MEMORY_TEMP > 90` never sees a fake 0.
//!
//! This file holds the scrape's order and the agent's own health series;
//! each group of families is in a file of its own (`dcgm`, `amd`,
//! `fleetop_gpu`, `infiniband`, `flags`), and how a GPU is read and
//! labelled in `gpu`. Each GPU's readings go under its vendor's exporter's
//! names: dcgm-exporter's for NVIDIA, AMD device-metrics-exporter's for AMD.

use fleetop_catalog::{Action, Severity};

use super::Snapshot;
use super::amd::amd;
use super::dcgm::dcgm;
use super::flags::{FLAG_HELP, flags, node_health};
use super::fleetop_gpu::fleetop_gpu;
use super::gpu;
use super::infiniband::infiniband;
use super::text::{Kind, Writer, push_label};
use crate::proto::{NodeInfo, Sample};

/// The sample is older than three intervals (the console's stale rule):
/// its readings are not served as current.
pub fn is_stale(info: &NodeInfo, s: &Sample, now_ms: i64) -> bool {
    let interval = i64::from(info.sample_interval_ms.max(1));
    now_ms - s.time_ms > (3 * interval).max(1000)
}

/// Renders the whole scrape into `out`.
pub fn render(info: &NodeInfo, snap: &Snapshot, now_ms: i64, out: &mut String) {
    let mut w = Writer::new(out);
    health(&mut w, info, snap, now_ms);
    let Some(s) = snap.sample.as_deref() else { return };
    let stale = is_stale(info, s, now_ms);
    if stale {
        let mut l = String::new();
        push_label(&mut l, "Hostname", &info.hostname);
        w.family("fleetop_flag", Kind::Gauge, FLAG_HELP);
        let action = fleetop_catalog::flag("stale").map_or(Action::None, |e| e.immediate);
        w.sample(
            &l,
            &[("kind", "stale"), ("severity", "warn"), ("action", action.name())],
            1,
        );
        node_health(&mut w, info, Severity::Warn);
        return;
    }
    let mut gpus = gpu::gpus(info, s);
    // NVIDIA's GPUs first, in their order, then AMD's (a stable sort).
    gpus.sort_by_key(|g| g.amd);
    let nvidia = gpus.iter().take_while(|g| !g.amd).count();
    dcgm(&mut w, &gpus[..nvidia], snap);
    amd(&mut w, info, &gpus[nvidia..], snap);
    fleetop_gpu(&mut w, &gpus, snap);
    infiniband(&mut w, info, &s.ib_ports);
    let worst = flags(&mut w, info, &gpus, &s.ib_ports);
    node_health(&mut w, info, worst);
}

fn health(w: &mut Writer, info: &NodeInfo, snap: &Snapshot, now_ms: i64) {
    let mut host = String::new();
    push_label(&mut host, "Hostname", &info.hostname);
    w.family(
        "fleetop_agent_up",
        Kind::Gauge,
        "1: the agent answers (Prometheus' own `up` says whether it was reached).",
    );
    w.sample(&host, &[], 1);
    w.family(
        "fleetop_agent_info",
        Kind::Gauge,
        "The agent's version, GPU backend and driver, as labels; always 1.",
    );
    w.sample(
        &host,
        &[
            ("version", &info.agent_version),
            ("backend", &info.backend),
            ("driver_version", &info.driver_version),
        ],
        1,
    );
    w.family(
        "fleetop_agent_sample_interval_seconds",
        Kind::Gauge,
        "The agent's sampling interval (in s).",
    );
    w.sample(&host, &[], f64::from(info.sample_interval_ms) / 1000.0);
    w.family(
        "fleetop_agent_samples_total",
        Kind::Counter,
        "Samples taken since the agent started.",
    );
    w.sample(&host, &[], snap.samples_taken);
    w.family(
        "fleetop_agent_gpu_read_errors_total",
        Kind::Counter,
        "GPU readings that failed (a GPU that did not answer in a sample), since the agent started.",
    );
    w.sample(&host, &[], snap.gpu_read_errors);
    if let Some(s) = &snap.sample {
        w.family(
            "fleetop_agent_last_sample_age_seconds",
            Kind::Gauge,
            "Age of the newest sample when scraped (in s); the GPU series are left out once it passes three intervals.",
        );
        w.sample(&host, &[], (now_ms - s.time_ms).max(0) as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use crate::proto::Sample;
    use crate::serve::metrics::tests::{gpu, info, lines, scrape};

    #[test]
    fn a_stale_sample_serves_health_and_the_stale_flag_only() {
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![gpu(0)],
            ..Default::default()
        };
        let t = scrape(&info(1), &[s], 14_000);
        assert!(lines(&t, "DCGM_FI_DEV_GPU_TEMP").is_empty());
        assert!(lines(&t, "fleetop_agent_last_sample_age_seconds")[0].ends_with(" 4"));
        assert!(lines(&t, "fleetop_flag")[0].contains("kind=\"stale\""));
        assert!(lines(&t, "fleetop_node_health")[0].ends_with(" 1"), "{t}");
    }
}
