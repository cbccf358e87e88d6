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
/// Held as `f32`, link by link, NaN where unknown (read as `None` through
/// `tx` and `rx`, never seen as a number): a rate from KiB counters a
/// second or more apart has no more digits than that, and 18 links of 8
/// GPUs in both directions are 1.1 KiB a node this way, not 4.6 as
/// `Option<f64>`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuRates {
    tx: Vec<f32>,
    rx: Vec<f32>,
}

impl GpuRates {
    /// From rates in bytes a second, link by link (NaN: unknown).
    pub fn new(tx: Vec<f32>, rx: Vec<f32>) -> Self {
        GpuRates { tx, rx }
    }

    /// Link `i`'s transmit rate in bytes a second, where known.
    pub fn tx(&self, i: usize) -> Option<f64> {
        known(self.tx.get(i))
    }

    /// Link `i`'s receive rate in bytes a second, where known.
    pub fn rx(&self, i: usize) -> Option<f64> {
        known(self.rx.get(i))
    }
}

fn known(r: Option<&f32>) -> Option<f64> {
    r.filter(|r| !r.is_nan()).map(|&r| f64::from(r))
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IbRates {
    pub tx_bytes_per_s: Option<f64>,
    pub rx_bytes_per_s: Option<f64>,
    /// Per `fleetop_proto::ib::ERROR_COUNTERS` entry: the change since the
    /// previous sample, `None` where the counter is not readable on this port.
    pub errors: crate::model::sample::IbErrors<Delta>,
}
