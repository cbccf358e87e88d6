//! The one trait every data source of the agent implements, and the collector
//! that runs them together into one node description and one sample per tick.

use crate::proto::{HostSample, NodeInfo, Sample};

/// A source of node data: NVML GPUs, InfiniBand ports, the host, or a simulation.
pub trait Sampler: Send {
    /// Adds what does not change while the agent runs to the node description.
    fn describe(&mut self, info: &mut NodeInfo);

    /// Adds this source's readings, taken at `now_ms`, to `out`. A failure to
    /// read one device is recorded in the sample as data about that device;
    /// it never fails the sample.
    fn sample(&mut self, now_ms: i64, out: &mut Sample);

    /// True while this source cannot produce samples at all, as when a driver
    /// call hangs (the simulation uses it to model that).
    fn is_hung(&self, _now_ms: i64) -> bool {
        false
    }
}

/// Runs a set of samplers as one node.
pub struct Collector {
    samplers: Vec<Box<dyn Sampler>>,
    info: NodeInfo,
    seq: u64,
}

/// Default for how often per-link NVLink counters are sent (every 10th sample).
pub const NVLINK_COUNTERS_EVERY: u32 = 10;

impl Collector {
    /// Builds the collector and its static node description.
    pub fn new(mut samplers: Vec<Box<dyn Sampler>>, base: NodeInfo) -> Self {
        let mut info = base;
        for s in &mut samplers {
            s.describe(&mut info);
        }
        info.nvlink_counters_every = NVLINK_COUNTERS_EVERY;
        Collector { samplers, info, seq: 0 }
    }

    /// Sends per-link NVLink counters in every `n`-th sample only.
    pub fn set_nvlink_counters_every(&mut self, n: u32) {
        self.info.nvlink_counters_every = n.max(1);
    }

    /// Records why the node has no GPU data (sent to every subscriber).
    pub fn set_note(&mut self, note: String) {
        if self.info.backend.is_empty() {
            self.info.backend = "none".into();
        }
        self.info.gpu_backend_note = note;
    }

    pub fn info(&self) -> &NodeInfo {
        &self.info
    }

    /// One sample of every source at `now_ms`, or `None` while a source hangs.
    pub fn sample(&mut self, now_ms: i64) -> Option<Sample> {
        if self.samplers.iter().any(|s| s.is_hung(now_ms)) {
            return None;
        }
        self.seq += 1;
        let mut out = Sample {
            seq: self.seq,
            time_ms: now_ms,
            host: Some(HostSample::default()),
            ..Default::default()
        };
        for s in &mut self.samplers {
            s.sample(now_ms, &mut out);
        }
        // The first sample, then every n-th, carries the NVLink counters.
        if !(self.seq - 1).is_multiple_of(u64::from(self.info.nvlink_counters_every.max(1))) {
            for g in &mut out.gpus {
                g.nvlink_tx_kib.clear();
                g.nvlink_rx_kib.clear();
            }
        }
        Some(out)
    }
}
