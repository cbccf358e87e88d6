//! Chooses and assembles the samplers of a node from the command line.

use std::path::PathBuf;
use std::time::Duration;

use crate::collector::Collector;
use crate::keep::journal::{Journal, StateDirError};
use crate::proto::NodeInfo;
use crate::sim::{SimConfig, SimNode};
use crate::sources::Sampler;
use crate::sources::amd::{self, AmdSampler, AmdUnavailable};
use crate::sources::host::HostSampler;
use crate::sources::ib::IbSampler;
use crate::sources::kmsg::KmsgSampler;
use crate::sources::nvml::{self, NvmlSampler, NvmlUnavailable};
use crate::sources::pci::NodeChecks;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// NVML if it loads and sees GPUs, else AMD SMI if it does, otherwise
    /// host and InfiniBand data only.
    Auto,
    /// NVML, or fail.
    Nvml,
    /// AMD SMI (libamd_smi.so from $ROCM_PATH/lib, the loader's path or
    /// /opt/rocm/lib), or fail.
    Amd,
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
    /// The kernel log to read XIDs and NVSwitch SXids from (/dev/kmsg, or a
    /// file in its record format); `None`: none.
    pub kmsg: Option<PathBuf>,
    /// Where the fault journal is kept; `None`: no journal.
    pub state_dir: Option<StateDir>,
    /// Root of sysfs, for the PCI bus and kernel modules (node checks).
    pub sysfs_root: PathBuf,
    /// The GPUs the node should have (`NodeInfo.expect_gpus`), 0 when not said.
    pub expect_gpus: u32,
}

/// The agent's state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    pub path: PathBuf,
    /// Named on the command line: a directory that cannot be used fails the
    /// start. The default one only gives a warning (an agent not run as root
    /// has no /var/lib to write to, and runs on without a journal).
    pub given: bool,
}

/// Why a collector could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Nvml(#[from] NvmlUnavailable),
    #[error(transparent)]
    Amd(#[from] AmdUnavailable),
    #[error(transparent)]
    StateDir(#[from] StateDirError),
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
            nvlink_counters_every: crate::collector::NVLINK_COUNTERS_EVERY,
            kmsg: None,
            state_dir: None,
            sysfs_root: Default::default(),
            expect_gpus: 0,
        }
    }
}

/// The kernel log sampler, or a warning and none (no permission on
/// /dev/kmsg: the agent is not root; XIDs then come from NVML alone).
fn kmsg_sampler(opts: &BackendOptions) -> Option<Box<dyn Sampler>> {
    let path = opts.kmsg.as_deref()?;
    match KmsgSampler::open(path, &opts.proc_root) {
        Ok(k) => Some(Box::new(k)),
        Err(e) => {
            let why = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (reading it takes root or CAP_SYSLOG)"
            } else {
                ""
            };
            tracing::warn!(
                "kernel log {}: {e}{why}; XIDs come from NVML alone and NVSwitch SXids are not reported",
                path.display()
            );
            None
        }
    }
}

/// The fault journal, if there is to be one. A state directory given on the
/// command line that cannot be used is an error; the default one a warning.
fn journal(opts: &BackendOptions) -> Result<Option<Journal>, StateDirError> {
    let Some(dir) = &opts.state_dir else {
        return Ok(None);
    };
    let boot_id = crate::keep::journal::boot_id(&opts.proc_root);
    match Journal::open(&dir.path, boot_id, crate::now_ms()) {
        Ok(j) => Ok(Some(j)),
        Err(e) if !dir.given => {
            tracing::warn!("{e}; no fault journal (give --state-dir to keep one elsewhere)");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The GPU sampler chosen, if any, and why there is none where `auto` found none.
type GpuChoice = (Option<Box<dyn Sampler>>, Option<String>);

/// The GPU sampler the options choose, and why there is none where `auto`
/// found no GPUs. `auto` takes the first library that loads and sees
/// GPUs, NVML then AMD SMI; where neither sees any, NVML with none (as
/// before AMD SMI was known), else none with both reasons.
fn gpu_sampler(opts: &BackendOptions) -> Result<GpuChoice, BuildError> {
    let nvml = || {
        nvml::open(opts.nvml_lib.as_deref()).and_then(|n| NvmlSampler::new(n, opts.proc_root.clone(), opts.interval))
    };
    let amd = || amd::open().and_then(|a| AmdSampler::new(a, opts.proc_root.clone(), opts.interval));
    match opts.backend {
        Backend::Nvml => return Ok((Some(Box::new(nvml()?)), None)),
        Backend::Amd => return Ok((Some(Box::new(amd()?)), None)),
        Backend::Auto | Backend::Sim => {}
    }
    let nvml = match nvml() {
        Ok(s) if s.gpu_count() > 0 => return Ok((Some(Box::new(s)), None)),
        other => other,
    };
    let amd = match amd() {
        Ok(s) if s.gpu_count() > 0 => return Ok((Some(Box::new(s)), None)),
        Ok(_) => "AMD SMI: no AMD GPUs".to_string(),
        Err(e) => e.to_string(),
    };
    match nvml {
        Ok(s) => Ok((Some(Box::new(s)), None)),
        Err(e) => Ok((None, Some(format!("{e}; {amd}")))),
    }
}

/// The collector for these options, and a one-line note when `auto` fell
/// back to no GPUs (for the operator's stderr).
pub fn build(opts: &BackendOptions) -> Result<(Collector, Option<String>), BuildError> {
    let base = NodeInfo {
        agent_version: crate::VERSION.into(),
        expect_gpus: opts.expect_gpus,
        ..Default::default()
    };
    if opts.backend == Backend::Sim {
        let journal = journal(opts)?;
        // No PCI checks: the simulated GPUs are not on this machine's bus.
        let mut samplers: Vec<Box<dyn Sampler>> = vec![Box::new(SimNode::new(opts.sim.clone()))];
        samplers.extend(kmsg_sampler(opts));
        let mut collector = Collector::new(samplers, base);
        collector.set_simulation(opts.sim.clone());
        collector.set_nvlink_counters_every(opts.nvlink_counters_every);
        // A simulated node is not this machine: it has an id of its own.
        collector.set_machine_id(format!("sim-{}", opts.sim.hostname));
        keep(&mut collector, journal, opts);
        return Ok((collector, None));
    }
    let mut base = base;
    // This machine's boot, journal or not (a simulated node has none).
    base.boot_id = crate::keep::journal::boot_id(&opts.proc_root);
    let mut samplers: Vec<Box<dyn Sampler>> = Vec::new();
    let (gpus, note) = gpu_sampler(opts)?;
    samplers.extend(gpus);
    // After the GPUs: an agent that cannot start creates no state directory.
    let journal = journal(opts)?;
    // After the GPUs: it ties XIDs to the GPUs NVML described, and adds its own
    // to theirs in each sample (the collector sends a fault both saw once).
    samplers.extend(kmsg_sampler(opts));
    samplers.push(Box::new(IbSampler::new(opts.ib_sysfs.clone())));
    samplers.push(Box::new(HostSampler::new()));
    // Last: it compares the GPUs and InfiniBand ports described before it
    // with sysfs.
    samplers.push(Box::new(NodeChecks::new(opts.sysfs_root.clone(), opts.expect_gpus)));
    let note = note.map(|n| format!("{n}; serving host and InfiniBand data only"));
    let mut collector = Collector::new(samplers, base);
    collector.set_nvlink_counters_every(opts.nvlink_counters_every);
    if let Some(n) = &note {
        collector.set_note(n.clone());
    }
    collector.set_machine_id(crate::keep::burnins::machine_id(std::path::Path::new("/")));
    keep(&mut collector, journal, opts);
    Ok((collector, note))
}

/// The journals in the state directory, where it could be used: faults,
/// and burn-ins beside them (in memory where there is none).
fn keep(collector: &mut Collector, journal: Option<Journal>, opts: &BackendOptions) {
    if let (Some(j), Some(dir)) = (journal, &opts.state_dir) {
        collector.set_journal(j);
        collector.set_burn_ins(crate::keep::burnins::BurnIns::open(&dir.path, crate::now_ms()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_simulation_with_nothing_to_read_or_write_is_sampled_in_place() {
        let sim = SimConfig {
            hostname: "t".into(),
            gpus: 2,
            ib_ports: 0,
            model: crate::sim::Model::H100,
            scenario: crate::sim::Scenario::Training,
            seed: 1,
            start_ms: 0,
            problem_ms: None,
            interval_ms: 1000,
        };
        let (c, _) = build(&BackendOptions::sim(sim.clone())).expect("builds");
        assert!(!c.blocks(), "arithmetic only");

        // A kernel log to read, or a journal to write: off the runtime.
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("kmsg");
        std::fs::write(&log, "").expect("w");
        let mut opts = BackendOptions::sim(sim.clone());
        opts.kmsg = Some(log);
        assert!(build(&opts).expect("builds").0.blocks(), "the kernel log");
        let mut opts = BackendOptions::sim(sim);
        opts.state_dir = Some(StateDir {
            path: dir.path().join("state"),
            given: true,
        });
        assert!(build(&opts).expect("builds").0.blocks(), "the journal");
    }
}
