//! AMD GPUs through AMD SMI (`libamd_smi.so`, ROCm 6.x/7.x), loaded at run
//! time, as NVML is: one agent binary serves both vendors and needs nothing
//! of ROCm at build time. The types are the `fleetop-amdsmi-abi` crate's
//! (AMD SMI 7.0.2's, checked against AMD's own Python package in CI).
//!
//! The shape is the NVML reader's, and so is its honesty: a reading not
//! taken is absent, never 0; each GPU is read on a thread of its own, so a
//! call that hangs holds up only its GPU ("nvml_stuck: <call>: ..."); a
//! GPU that stops answering is "gpu_lost"; events come from a thread of
//! their own. AMD shows each compute partition (CPX) as a GPU to a job,
//! and so does the agent: one GPU on the wire per AMD SMI processor.
//!
//! This file holds the sampler: opening the GPUs, the node description and
//! the per-tick sample. One concern a file besides:
//!
//! - `library`: finding and loading the library, its calls, statuses;
//! - `calls`: each call as a safe function, lists bounded;
//! - `info`: the static description (identity, limits, partitions,
//!   firmware, XGMI links);
//! - `read`: one GPU's sample;
//! - `throttle`: AMD's throttling in its words and NVML's bits;
//! - `events`: resets, thermal throttling and VM faults as events;
//! - the per-GPU threads and a stuck call's report are NVML's too
//!   (`sources::worker`).

mod calls;
mod events;
mod info;
mod library;
mod read;
mod throttle;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetop_amdsmi_abi as abi;
use fleetop_proto::input::printable;

use crate::proto::{GpuInfo, NodeInfo, Sample};
use crate::sources::Sampler;
use crate::sources::worker::answer_deadline;

use crate::sources::worker::{Doing, Worker, sample_all};
use events::EventQueue;
use library::{Amd, Handle};
use read::GpuReader;

/// AMD SMI could not be used on this machine; one line for people.
#[derive(Debug, thiserror::Error)]
#[error("AMD SMI not available: {0}")]
pub struct AmdUnavailable(String);

/// How long the first sample waits for the event thread's first read, so
/// that it carries the events already pending when the agent started.
const FIRST_EVENTS_WAIT: Duration = Duration::from_secs(2);

/// One AMD SMI processor: a GPU, or a compute partition of one.
pub(crate) struct Gpu {
    index: u32,
    handle: Handle,
    /// The XGMI links listed in the description, by AMD's link number.
    links: Vec<u32>,
    /// The edge sensor answered at start (MI300X has none): asked since.
    edge: bool,
    /// Which compute partition of its physical GPU (0 in SPX): its slot in
    /// the metrics table's per-partition (XCP) figures.
    partition: u32,
    /// Reported lost in the last sample (its warning is logged once).
    lost: AtomicBool,
}

/// AMD SMI, loaded: `open` it, then `AmdSampler::new`.
pub struct AmdSmi(&'static Amd);

/// Loads and initialises AMD SMI (AMD GPUs only), once for the process,
/// found as AMD's tools find it: `$ROCM_PATH/lib/libamd_smi.so`, the
/// loader's search path, then `/opt/rocm/lib/libamd_smi.so`.
pub fn open() -> Result<AmdSmi, AmdUnavailable> {
    let amd = library::open()?;
    tracing::info!(
        "AMD SMI {} loaded from {}",
        amd.version().unwrap_or_else(|| "(version unknown)".into()),
        amd.path
    );
    Ok(AmdSmi(amd))
}

/// Every AMD GPU of the node, read as NVML's are (see the module's doc).
pub struct AmdSampler {
    amd: &'static Amd,
    gpus: Vec<Arc<Gpu>>,
    infos: Vec<GpuInfo>,
    driver_version: String,
    workers: Vec<Worker>,
    deadline: Duration,
    events: EventQueue,
    /// The event thread's first read is done; the first sample waits for it.
    events_ready: Arc<AtomicBool>,
    first_sample: bool,
}

impl AmdSampler {
    /// Opens every AMD GPU processor AMD SMI lists and describes it. A
    /// processor that does not answer is kept, with what AMD SMI kept
    /// from init (its PCI address), so it shows as that GPU, lost.
    pub fn new(amd: AmdSmi, proc_root: PathBuf, interval: Duration) -> Result<Self, AmdUnavailable> {
        let amd = amd.0;
        let handles = amd
            .processors()
            .map_err(|e| AmdUnavailable(format!("cannot list GPUs: {e}")))?;
        let handles: Vec<Handle> = handles
            .into_iter()
            .filter(|&h| {
                amd.processor_type(h)
                    .is_ok_and(|t| t == abi::AMDSMI_PROCESSOR_TYPE_AMD_GPU)
            })
            .collect();
        let mut gpus = Vec::new();
        let mut infos = Vec::new();
        let mut driver_version = String::new();
        for (index, handle) in (0u32..).zip(handles) {
            let links = info::xgmi_links(amd, handle);
            let desc = info::describe(amd, index, handle, &links);
            let partition = desc.partition_id;
            infos.push(desc);
            if driver_version.is_empty()
                && let Ok(d) = amd.driver_info(handle)
            {
                driver_version = printable(&abi::c_str(&d.driver_version), 64);
            }
            let edge = amd
                .temperature(handle, abi::AMDSMI_TEMPERATURE_TYPE_EDGE, abi::AMDSMI_TEMP_CURRENT)
                .is_ok();
            gpus.push(Arc::new(Gpu {
                index,
                handle,
                links,
                edge,
                partition,
                lost: AtomicBool::new(false),
            }));
        }
        let events: EventQueue = Arc::default();
        let events_ready = Arc::new(AtomicBool::new(gpus.is_empty()));
        events::spawn(
            amd,
            gpus.iter().map(|g| (g.index, g.handle)).collect(),
            Arc::downgrade(&events),
            events_ready.clone(),
        );
        let workers = gpus
            .iter()
            .map(|g| {
                let doing: Doing = Arc::new(Mutex::new(""));
                let mut reader = GpuReader {
                    amd,
                    gpu: g.clone(),
                    proc_root: proc_root.clone(),
                    doing: doing.clone(),
                };
                Worker::spawn("amdsmi", g.index, doing, move || reader.sample())
            })
            .collect();
        Ok(AmdSampler {
            amd,
            gpus,
            infos,
            driver_version,
            workers,
            deadline: answer_deadline(interval),
            events,
            events_ready,
            first_sample: true,
        })
    }

    /// How many GPUs (processors) AMD SMI lists.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }
}

/// The GPUs' processes, asked of AMD SMI when called (the call the samples
/// make: amdsmi_get_gpu_process_list).
struct AmdProcesses(&'static Amd, Vec<Arc<Gpu>>);

impl crate::sources::GpuProcesses for AmdProcesses {
    fn pids(&self, index: u32) -> Result<Vec<u32>, String> {
        let g = self
            .1
            .iter()
            .find(|g| g.index == index)
            .ok_or_else(|| format!("no GPU {index}"))?;
        self.0
            .processes(g.handle)
            .map(|l| l.iter().map(|p| p.pid).collect())
            .map_err(|e| {
                if e.is_lost() {
                    "gpu_lost".to_string()
                } else {
                    format!("amdsmi: {e}")
                }
            })
    }
}

impl Sampler for AmdSampler {
    fn gpu_processes(&self) -> Option<Arc<dyn crate::sources::GpuProcesses>> {
        Some(Arc::new(AmdProcesses(self.amd, self.gpus.clone())))
    }

    fn describe(&mut self, info: &mut NodeInfo) {
        info.backend = "amdsmi".into();
        info.driver_version = self.driver_version.clone();
        info.gpus.extend(self.infos.iter().cloned());
    }

    fn sample(&mut self, _now_ms: i64, out: &mut Sample) {
        if std::mem::take(&mut self.first_sample) {
            let until = Instant::now() + FIRST_EVENTS_WAIT;
            while !self.events_ready.load(Ordering::Acquire) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let events = self
            .events
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default();
        for (index, mut s) in sample_all(&mut self.workers, self.deadline) {
            // Events come from their own thread: a stuck or lost GPU still reports them.
            s.events = events
                .iter()
                .filter(|(i, _)| *i == index)
                .map(|(_, e)| e.clone())
                .collect();
            out.gpus.push(s);
        }
    }
}
