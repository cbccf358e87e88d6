//! Rates the store derives from two consecutive samples of a node: counters
//! travel as counters, so a lost message never invents a spike.

pub use fleetop_proto::counters::Delta;

/// Rates derived from the last two samples of a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    pub gpus: Vec<GpuRates>,
    pub ib: Vec<IbRates>,
}

/// Per-GPU NVLink throughput. NVLink counters come in every few samples:
/// these rates are over the last two samples that carried them, and hold
/// until the next.
///
/// Held as `f32`, link by link: a rate from KiB counters a second or more
/// apart has no more digits than that, and 18 links of 8 GPUs in both
/// directions are 2.3 KiB a node this way, not 4.6.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuRates {
    pub nvlink_tx_bytes_per_s: Vec<Option<f32>>,
    pub nvlink_rx_bytes_per_s: Vec<Option<f32>>,
}

impl GpuRates {
    /// Link `i`'s transmit rate in bytes a second, where known.
    pub fn tx(&self, i: usize) -> Option<f64> {
        self.nvlink_tx_bytes_per_s.get(i).copied().flatten().map(f64::from)
    }

    /// Link `i`'s receive rate in bytes a second, where known.
    pub fn rx(&self, i: usize) -> Option<f64> {
        self.nvlink_rx_bytes_per_s.get(i).copied().flatten().map(f64::from)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IbRates {
    pub tx_bytes_per_s: Option<f64>,
    pub rx_bytes_per_s: Option<f64>,
    /// Per `fleetop_proto::ib::ERROR_COUNTERS` entry: the change since the
    /// previous sample, `None` where the counter is not readable on this port.
    pub errors: Vec<Option<Delta>>,
}
