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

use crate::sources::worker::{Doing, Worker, sample_all, start_all};
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

/// One processor as its worker describes it (see `AmdSampler::new`).
struct Slot {
    info: Mutex<GpuInfo>,
    driver: Mutex<String>,
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
    /// Each processor's index and handle.
    gpus: Vec<(u32, Handle)>,
    /// Each processor's description as it was when the start's wait ended.
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
    /// Opens every AMD GPU processor AMD SMI lists and describes it, each
    /// on its worker, all at once, and waits for them until
    /// `START_DEADLINE`. A processor that does not answer is kept, with
    /// what AMD SMI kept from init (its PCI address), so it shows as that
    /// GPU: lost where it says so, stuck where it hangs; the rest of the
    /// node is served.
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
        let gpus: Vec<(u32, Handle)> = (0u32..).zip(handles).collect();
        let mut slots = Vec::new();
        let mut workers = Vec::new();
        for &(index, handle) in &gpus {
            // Kept by AMD SMI from init: it answers whatever the GPU does.
            let slot = Arc::new(Slot {
                info: Mutex::new(GpuInfo {
                    index,
                    vendor: "AMD".into(),
                    pci_bus_id: amd.bdf(handle).map(|b| b.to_bus_id()).unwrap_or_default(),
                    ..Default::default()
                }),
                driver: Mutex::new(String::new()),
            });
            let doing: Doing = Arc::new(Mutex::new(""));
            let (s, d, proc_root) = (slot.clone(), doing.clone(), proc_root.clone());
            workers.push(Worker::start("amdsmi", index, doing, move || {
                let at = |call| {
                    if let Ok(mut x) = d.lock() {
                        *x = call;
                    }
                };
                at("amdsmi_get_gpu_xgmi_link_status");
                let links = info::xgmi_links(amd, handle);
                at("amdsmi_get_gpu_asic_info");
                let desc = info::describe(amd, index, handle, &links);
                let partition = desc.partition_id;
                if let Ok(mut i) = s.info.lock() {
                    *i = desc;
                }
                at("amdsmi_get_gpu_driver_info");
                if let Ok(v) = amd.driver_info(handle)
                    && let Ok(mut x) = s.driver.lock()
                {
                    *x = printable(&abi::c_str(&v.driver_version), 64);
                }
                at("amdsmi_get_temp_metric");
                let edge = amd
                    .temperature(handle, abi::AMDSMI_TEMPERATURE_TYPE_EDGE, abi::AMDSMI_TEMP_CURRENT)
                    .is_ok();
                let gpu = Arc::new(Gpu {
                    index,
                    handle,
                    links,
                    edge,
                    partition,
                    lost: AtomicBool::new(false),
                });
                let mut reader = GpuReader {
                    amd,
                    gpu,
                    proc_root,
                    doing: d.clone(),
                };
                move || reader.sample()
            }));
            slots.push(slot);
        }
        let (started, infos) = start_all(&mut workers, |i| {
            slots
                .get(i)
                .and_then(|s| s.info.lock().ok().map(|i| i.clone()))
                .unwrap_or_default()
        });
        // The first processor's driver that answered.
        let driver_version = slots
            .iter()
            .find_map(|s| s.driver.lock().ok().filter(|d| !d.is_empty()).map(|d| d.clone()))
            .unwrap_or_default();
        let events: EventQueue = Arc::default();
        let events_ready = Arc::new(AtomicBool::new(gpus.is_empty()));
        // Events of the GPUs that answered: listening on a hung one would
        // hold up the event thread, and every GPU's events with it.
        let answered = gpus
            .iter()
            .zip(&started)
            .filter(|(_, ok)| **ok)
            .map(|(g, _)| *g)
            .collect();
        events::spawn(amd, answered, Arc::downgrade(&events), events_ready.clone());
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
struct AmdProcesses(&'static Amd, Vec<(u32, Handle)>);

impl crate::sources::GpuProcesses for AmdProcesses {
    fn pids(&self, index: u32) -> Result<Vec<u32>, String> {
        let &(_, handle) = self
            .1
            .iter()
            .find(|g| g.0 == index)
            .ok_or_else(|| format!("no GPU {index}"))?;
        self.0
            .processes(handle)
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
