//! The agent's Prometheus endpoint (`--metrics-listen`): dcgm-exporter's
//! series, names and labels for what both collect, and `fleetop_*` /
//! `node_infiniband_*` series for the rest (docs/metrics.md lists them).
//!
//! A scrape never calls NVML and never waits on sampling: the sample loop
//! publishes each sample here (`Publisher::publish`, a pointer swap under a
//! short lock) and a scrape renders whatever was published last.

pub mod http;
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
