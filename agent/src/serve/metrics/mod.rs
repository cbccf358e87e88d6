//! The agent's Prometheus endpoint (`--metrics-listen`): dcgm-exporter's
//! series, names and labels for what both collect on an NVIDIA GPU, AMD
//! device-metrics-exporter's on an AMD GPU, and `fleetop_*` /
//! `node_infiniband_*` series for the rest (docs/metrics.md lists them).
//!
//! A scrape never calls NVML and never waits on sampling: the sample loop
//! publishes each sample here (`Publisher::publish`, a pointer swap under a
//! short lock) and a scrape renders whatever was published last.
//!
//! A scrape is rendered by `render`, from the families in `dcgm`, `amd`,
//! `fleetop_gpu`, `infiniband` and `flags`, each reading the GPUs as `gpu`
//! gives them.

mod amd;
mod dcgm;
mod flags;
mod fleetop_gpu;
mod gpu;
pub mod http;
mod infiniband;
mod render;
pub mod text;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::proto::Sample;

pub use render::render;

/// One GPU's per-link NVLink data counters (KiB), in `GpuInfo.nvlinks` order.
#[derive(Debug, Clone, Default)]
pub struct NvlinkCounters {
    pub tx_kib: Vec<u64>,
    pub rx_kib: Vec<u64>,
}

/// What a scrape renders from: the newest sample, and what earlier samples
/// left that the newest may not carry.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub sample: Option<Arc<Sample>>,
    /// Per GPU index: the last XID seen since the agent started
    /// (`DCGM_FI_DEV_XID_ERRORS` is "the last XID", not the new ones).
    pub last_xid: BTreeMap<u32, u32>,
    /// Per GPU index: the newest per-link NVLink counters (tx, rx; KiB).
    /// Samples carry them only every `nvlink_counters_every`-th time.
    pub nvlink: BTreeMap<u32, Arc<NvlinkCounters>>,
    /// Samples taken since the agent started.
    pub samples_taken: u64,
    /// GPU readings that failed (a GPU with an error in a sample), since start.
    pub gpu_read_errors: u64,
}

impl Snapshot {
    /// The snapshot after `s`.
    fn after(&self, s: &Arc<Sample>) -> Snapshot {
        let mut next = self.clone();
        for g in &s.gpus {
            if let Some(x) = g.xids.last() {
                next.last_xid.insert(g.index, x.xid);
            }
            if !g.nvlink_tx_kib.is_empty() || !g.nvlink_rx_kib.is_empty() {
                let c = NvlinkCounters {
                    tx_kib: g.nvlink_tx_kib.clone(),
                    rx_kib: g.nvlink_rx_kib.clone(),
                };
                next.nvlink.insert(g.index, Arc::new(c));
            }
            if !g.error.is_empty() && g.error != "not_supported" {
                next.gpu_read_errors += 1;
            }
        }
        next.samples_taken += 1;
        next.sample = Some(s.clone());
        next
    }
}

/// Where the sample loop leaves each sample for scrapes.
#[derive(Debug, Default)]
pub struct Publisher {
    latest: Mutex<Arc<Snapshot>>,
}

impl Publisher {
    /// Called by the sample loop with each new sample.
    pub fn publish(&self, s: &Arc<Sample>) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        let next = latest.after(s);
        *latest = Arc::new(next);
    }

    /// The newest snapshot (a pointer copy).
    pub fn latest(&self) -> Arc<Snapshot> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What the tests of the render files share: a node, a GPU, a scrape and
/// its lines; and the tests of what a snapshot keeps from earlier samples.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::proto::{GpuInfo, GpuSample, NodeInfo, XidEvent};

    pub(super) fn info(gpus: u32) -> NodeInfo {
        NodeInfo {
            hostname: "n1".into(),
            sample_interval_ms: 1000,
            gpus: (0..gpus)
                .map(|i| GpuInfo {
                    index: i,
                    uuid: format!("GPU-{i}"),
                    model: "NVIDIA H100 80GB HBM3".into(),
                    pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + i),
                    mem_total_bytes: 80 << 30,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    pub(super) fn gpu(i: u32) -> GpuSample {
        GpuSample {
            index: i,
            util_pct: 50,
            temp_c: 60,
            hbm_temp_c: 70,
            power_mw: 300_500,
            mem_used_bytes: 10 << 30,
            ..Default::default()
        }
    }

    pub(super) fn scrape(info: &NodeInfo, samples: &[Sample], now_ms: i64) -> String {
        let p = Publisher::default();
        for s in samples {
            p.publish(&Arc::new(s.clone()));
        }
        let mut out = String::new();
        render(info, &p.latest(), now_ms, &mut out);
        out
    }

    /// The sample lines of one family, without the family name.
    pub(super) fn lines<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        text.lines()
            .filter_map(|l| l.strip_prefix(name))
            .filter(|rest| rest.starts_with('{') || rest.starts_with(' '))
            .collect()
    }

    #[test]
    fn a_gpu_that_did_not_answer_has_no_readings_but_its_xid_and_error() {
        let mut lost = gpu(0);
        lost.error = "gpu_lost".into();
        lost.xids = vec![XidEvent {
            xid: 79,
            time_ms: 9_000,
            source: 0,
        }];
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![lost, gpu(1)],
            ..Default::default()
        };
        let later = Sample {
            time_ms: 11_000,
            gpus: vec![
                GpuSample {
                    index: 0,
                    error: "gpu_lost".into(),
                    ..Default::default()
                },
                gpu(1),
            ],
            ..Default::default()
        };
        let t = scrape(&info(2), &[s, later], 11_100);
        assert_eq!(lines(&t, "DCGM_FI_DEV_GPU_TEMP").len(), 1);
        assert!(lines(&t, "DCGM_FI_DEV_GPU_TEMP")[0].contains("gpu=\"1\""));
        // The last XID stays, after the sample that carried it.
        let xid = lines(&t, "DCGM_FI_DEV_XID_ERRORS");
        assert!(
            xid.iter().any(|l| l.contains("gpu=\"0\"") && l.ends_with(" 79")),
            "{xid:?}"
        );
        assert!(xid.iter().any(|l| l.contains("gpu=\"1\"") && l.ends_with(" 0")));
        assert!(
            lines(&t, "fleetop_gpu_error")
                .iter()
                .any(|l| l.contains("error=\"gpu_lost\""))
        );
        assert!(
            lines(&t, "fleetop_flag")
                .iter()
                .any(|l| l.contains("kind=\"gpu_lost\""))
        );
        assert!(lines(&t, "fleetop_agent_gpu_read_errors_total")[0].ends_with(" 2"));
        // A lost GPU makes the node crit, in one series.
        assert_eq!(lines(&t, "fleetop_node_health"), ["{Hostname=\"n1\"} 2"]);
    }
}
