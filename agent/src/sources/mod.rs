//! Where the agent's readings come from: NVML (`nvml`), AMD SMI (`amd`), the kernel log
//! (`kmsg`), InfiniBand ports (`ib`), the host (`host`), the PCI bus
//! (`pci`), the kubelet's pods (`pods`), and the processes and jobs on the
//! GPUs (`procinfo`, `jobs`). Each source implements `Sampler`; the
//! simulation (`crate::sim`) implements it too. A source knows nothing of
//! how its readings are kept or served.

use std::sync::Arc;

use crate::proto::{NodeInfo, Sample};

pub mod amd;
pub mod host;
pub mod ib;
pub mod jobs;
pub mod kmsg;
pub mod nvml;
pub mod pci;
pub mod pods;
pub mod procinfo;
pub mod worker;

/// A source of node data: NVML or AMD SMI GPUs, InfiniBand ports, the host, or a simulation.
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

    /// Whether a sample may wait on something outside the process (a driver
    /// call, sysfs, the kernel log): such a source is sampled off the async
    /// runtime. One that only computes (the simulation) is sampled in place,
    /// which spares a swarm of thousands of agents a thread handoff each a
    /// second.
    fn blocks(&self) -> bool {
        true
    }

    /// Where the processes on this source's GPUs can be asked for at any
    /// moment, not only at a sample (SignalProcess checks a pid there
    /// before it signals it); `None` for a source without GPU processes.
    fn gpu_processes(&self) -> Option<Arc<dyn GpuProcesses>> {
        None
    }
}

/// The processes a GPU runs now, asked of the driver at the moment.
pub trait GpuProcesses: Send + Sync {
    /// The pids on GPU `index` now; `Err`: the GPU could not say (lost,
    /// no permission, no such GPU), in words. It may block on the driver.
    fn pids(&self, index: u32) -> Result<Vec<u32>, String>;
}
