//! Chooses and assembles the samplers of a node from the command line.

use std::path::PathBuf;
use std::time::Duration;

use crate::host::HostSampler;
use crate::ib::IbSampler;
use crate::nvml::{self, NvmlSampler, NvmlUnavailable};
use crate::proto::NodeInfo;
use crate::sampler::{Collector, Sampler};
use crate::sim::{SimConfig, SimNode};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// NVML if it loads, otherwise host and InfiniBand data only.
    Auto,
    /// NVML, or fail.
    Nvml,
    /// A simulated node (see --sim-*).
    Sim,
}

/// Everything needed to build a node's collector.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    pub backend: Backend,
    pub ib_sysfs: PathBuf,
    pub proc_root: PathBuf,
    /// The NVML library to load; `None`: the system's libnvidia-ml.so.1.
    pub nvml_lib: Option<PathBuf>,
    pub sim: SimConfig,
    /// Per-link NVLink counters go out in every this-many samples.
    pub nvlink_counters_every: u32,
    /// The sampling interval: how long NVML waits for a GPU follows from it.
    pub interval: Duration,
}

impl BackendOptions {
    /// A simulated node, as demos and tests use it.
    pub fn sim(sim: SimConfig) -> Self {
        BackendOptions {
            backend: Backend::Sim,
            ib_sysfs: Default::default(),
            proc_root: Default::default(),
            nvml_lib: None,
            interval: Duration::from_millis(u64::from(sim.interval_ms)),
            sim,
            nvlink_counters_every: crate::sampler::NVLINK_COUNTERS_EVERY,
        }
    }
}

/// The collector for these options, and a one-line note when `auto` fell
/// back to no GPUs (for the operator's stderr).
pub fn build(opts: &BackendOptions) -> Result<(Collector, Option<String>), NvmlUnavailable> {
    let base = NodeInfo {
        agent_version: crate::VERSION.into(),
        ..Default::default()
    };
    if opts.backend == Backend::Sim {
        let sim: Box<dyn Sampler> = Box::new(SimNode::new(opts.sim.clone()));
        let mut collector = Collector::new(vec![sim], base);
        collector.set_nvlink_counters_every(opts.nvlink_counters_every);
        return Ok((collector, None));
    }
    let mut samplers: Vec<Box<dyn Sampler>> = Vec::new();
    let mut note = None;
    match nvml::open(opts.nvml_lib.as_deref()).and_then(|n| NvmlSampler::new(n, opts.proc_root.clone(), opts.interval))
    {
        Ok(s) => samplers.push(Box::new(s)),
        Err(e) if opts.backend == Backend::Auto => note = Some(e.to_string()),
        Err(e) => return Err(e),
    }
    samplers.push(Box::new(IbSampler::new(opts.ib_sysfs.clone())));
    samplers.push(Box::new(HostSampler::new()));
    let note = note.map(|n| format!("{n}; serving host and InfiniBand data only"));
    let mut collector = Collector::new(samplers, base);
    collector.set_nvlink_counters_every(opts.nvlink_counters_every);
    if let Some(n) = &note {
        collector.set_note(n.clone());
    }
    Ok((collector, note))
}
