//! NVIDIA GPUs through NVML (nvml-wrapper, which loads libnvidia-ml at run
//! time, so building needs no driver and no CUDA toolkit).
//!
//! Device handles are created once. XID errors come from an NVML event set
//! waited on by a thread of its own, not from polling. The few readings
//! nvml-wrapper cannot make as we need them (the raw clocks-event bitmask with
//! unknown bits kept, NVLink field values with the link in `scopeId`, remapped
//! rows, the GPU's fabric registration) call the sys layer directly.
//!
//! This file holds the sampler and its small public interface: loading NVML
//! (`open`), opening the GPUs (`NvmlSampler::new`), the node description and
//! the per-tick sample. Each GPU is read on its own thread
//! (`sources::worker`, shared with AMD SMI). The rest, one concern a file:
//!
//! - `reader`: reading one GPU's sample on its worker (the NVML calls);
//! - `fields`: the field-values call (HBM temperature, PCIe byte counters,
//!   NVLink state and throughput) and decoding its answers;
//! - `gpm`: GPM metrics between two samples, of the GPU and its MIG instances;
//! - `health`: PCIe link, persistence mode and NVLink fabric registration;
//! - `temperature`: the GPU temperature and its slowdown/shutdown limits;
//! - `xid`: XID errors from the NVML event set, on a thread of their own.

mod field_value;
mod fields;
mod gpm;
mod health;
mod reader;
mod temperature;
mod xid;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::error::NvmlError;

use crate::proto::{GpuInfo, NodeInfo, NvLinkInfo, Sample};
use crate::sources::Sampler;

pub use crate::sources::worker::answer_deadline;

use crate::sources::worker::{Doing, Worker, sample_all, start_all};
use reader::GpuReader;
use xid::{Handle, XidQueue, spawn_xid_thread, unsafe_handle};

/// NVML could not be used on this machine; the message is one line for people.
#[derive(Debug, thiserror::Error)]
#[error("NVML not available: {0}")]
pub struct NvmlUnavailable(String);

/// Links NVML may number: nvml.h's NVML_NVLINK_MAX_LINKS has grown (18 in
/// the bindings, 36 in current headers); asking past the last gives an error.
const PROBE_LINKS: u32 = 36;

struct Gpu {
    index: u32,
    /// `Err`: the handle could not be opened ("gpu_lost", "no_permission",
    /// ...); the GPU is still listed, with that error in every sample.
    dev: Result<Device<'static>, String>,
    /// NVLink links this GPU has (those NVML answers for), in wire order,
    /// and whether each was inactive when the agent started.
    links: Vec<(u32, bool)>,
    /// MIG instances, where the GPU is in MIG mode (handles made once).
    mig: Vec<Device<'static>>,
}

/// The MIG instances of a GPU in MIG mode; none otherwise.
fn mig_devices(d: &Device<'static>) -> Vec<Device<'static>> {
    if !d.mig_mode().is_ok_and(|m| m.current == 1) {
        return Vec::new();
    }
    let n = d.mig_device_count().unwrap_or(0);
    (0..n).filter_map(|k| d.mig_device_by_index(k).ok()).collect()
}

/// NVML for every GPU of the node. Each GPU is opened, described and read
/// on a worker thread of its own, so that a GPU whose NVML calls hang holds
/// up only itself: at start the sampler waits for the descriptions until
/// `START_DEADLINE`; each tick it asks every worker at once, waits until a
/// deadline, and reports a GPU that has not answered as stuck while its
/// worker stays in the call.
pub struct NvmlSampler {
    nvml: &'static Nvml,
    /// Each GPU as its worker opened it, shared with the workers.
    gpus: Vec<Arc<Slot>>,
    /// Each GPU's description as it was when the start's wait ended.
    infos: Vec<GpuInfo>,
    workers: Vec<Worker>,
    /// How long a sample waits for the GPUs' answers (see `answer_deadline`).
    deadline: Duration,
    xids: XidQueue,
}

/// One GPU as its worker opens it: the handles once opened, and the
/// description as far as it got (a GPU that hangs in it keeps what it
/// answered before).
#[derive(Default)]
struct Slot {
    gpu: OnceLock<Arc<Gpu>>,
    info: Mutex<GpuInfo>,
}

/// Names the NVML call a worker is about to make (for a stuck GPU's report).
fn at(doing: &Doing, call: &'static str) {
    if let Ok(mut d) = doing.lock() {
        *d = call;
    }
}

/// Opens GPU `index` (on its worker). A GPU that cannot be opened is kept,
/// with the reason, so that it shows as that GPU (lost, no permission)
/// rather than as a node with one GPU fewer.
fn open_gpu(nvml: &'static Nvml, index: u32, doing: &Doing) -> Gpu {
    at(doing, "nvmlDeviceGetHandleByIndex");
    match nvml.device_by_index(index) {
        Ok(dev) => {
            at(doing, "nvmlDeviceGetNvLinkState");
            let links = (0..PROBE_LINKS)
                .filter_map(|l| dev.link_wrapper_for(l).is_active().ok().map(|up| (l, !up)))
                .collect();
            at(doing, "nvmlDeviceGetMigMode");
            let mig = mig_devices(&dev);
            Gpu {
                index,
                dev: Ok(dev),
                links,
                mig,
            }
        }
        Err(e) => {
            tracing::warn!("GPU {index}: cannot open: {e}");
            Gpu {
                index,
                dev: Err(error_text(&e)),
                links: Vec::new(),
                mig: Vec::new(),
            }
        }
    }
}

/// Describes an opened GPU (on its worker) into `out`: its PCI bus id and
/// UUID first, each as it comes, so that a GPU that hangs later in the
/// description is still named by them; then the rest at once.
fn describe_gpu(nvml: &'static Nvml, g: &Gpu, out: &Mutex<GpuInfo>, doing: &Doing) {
    let Ok(d) = &g.dev else {
        // Listed by index: the samples say why there is nothing more.
        if let Ok(mut i) = out.lock() {
            i.vendor.clear();
        }
        return;
    };
    let set = |f: &dyn Fn(&mut GpuInfo)| {
        if let Ok(mut i) = out.lock() {
            f(&mut i);
        }
    };
    at(doing, "nvmlDeviceGetPciInfo");
    let bus = d.pci_info().map(|p| p.bus_id).unwrap_or_default();
    set(&|i| i.pci_bus_id = bus.clone());
    at(doing, "nvmlDeviceGetUUID");
    let uuid = d.uuid().unwrap_or_default();
    set(&|i| i.uuid = uuid.clone());
    at(doing, "nvmlDeviceGetName");
    let model = d.name().unwrap_or_default();
    at(doing, "nvmlDeviceGetTemperatureThreshold");
    let limits = temperature::temperature_limits(nvml, d);
    at(doing, "nvmlDeviceGetMemoryInfo");
    let mem_total_bytes = d.memory_info().map(|m| m.total).unwrap_or(0);
    at(doing, "nvmlDeviceGetEnforcedPowerLimit");
    let power_limit_mw = d.enforced_power_limit().unwrap_or(0);
    at(doing, "nvmlDeviceGetMaxClockInfo");
    let max_sm_clock_mhz = d.max_clock_info(Clock::SM).unwrap_or(0);
    let max_mem_clock_mhz = d.max_clock_info(Clock::Memory).unwrap_or(0);
    at(doing, "nvmlDeviceGetVbiosVersion");
    let vbios_version = d.vbios_version().unwrap_or_default();
    // The link the GPU *and* the slot can train to
    // (nvmlDeviceGetMaxPcieLinkGeneration/-Width), not the GPU's own
    // maximum (nvmlDeviceGetGpuMaxPcieLinkGeneration): a Gen5 GPU
    // in a Gen4 host runs at its best at Gen4, which is no fault.
    at(doing, "nvmlDeviceGetMaxPcieLinkGeneration");
    let pcie_max_gen = d.max_pcie_link_gen().unwrap_or(0);
    let pcie_max_width = d.max_pcie_link_width().unwrap_or(0);
    at(doing, "nvmlDeviceGetNvLinkRemotePciInfo");
    let nvlinks = g
        .links
        .iter()
        .map(|&(l, inactive_at_start)| NvLinkInfo {
            link: l,
            inactive_at_start,
            peer_pci_bus_id: d
                .link_wrapper_for(l)
                .remote_pci_info()
                .map(|p| p.bus_id)
                .unwrap_or_default(),
        })
        .collect();
    let info = GpuInfo {
        index: g.index,
        vendor: "NVIDIA".into(),
        uuid,
        model,
        pci_bus_id: bus,
        mem_total_bytes,
        power_limit_mw,
        max_sm_clock_mhz,
        max_mem_clock_mhz,
        slowdown_temp_c: limits.0,
        shutdown_temp_c: limits.1,
        vbios_version,
        pcie_max_gen,
        pcie_max_width,
        nvlinks,
        // AMD's partitions, firmware list and HBM limits: none here.
        ..Default::default()
    };
    set(&|i| *i = info.clone());
}

/// Loads NVML once for the life of the process.
///
/// The handle is leaked on purpose: device handles borrow it and the XID
/// thread waits on it for as long as the agent runs.
/// `lib`: the library to load instead of the system's `libnvidia-ml.so.1`.
pub fn open(lib: Option<&Path>) -> Result<&'static Nvml, NvmlUnavailable> {
    let mut b = Nvml::builder();
    if let Some(p) = lib {
        b.lib_path(p.as_os_str());
    }
    match b.init() {
        Ok(n) => Ok(Box::leak(Box::new(n))),
        Err(NvmlError::LibloadingError(e)) => Err(NvmlUnavailable(match lib {
            Some(p) => format!("{} could not be loaded ({e})", p.display()),
            None => format!("libnvidia-ml.so could not be loaded ({e}); is the NVIDIA driver installed?"),
        })),
        Err(NvmlError::DriverNotLoaded) => Err(NvmlUnavailable("the NVIDIA kernel driver is not loaded".into())),
        Err(e) => Err(NvmlUnavailable(e.to_string())),
    }
}

impl NvmlSampler {
    /// Opens and describes every GPU NVML counts, each on its worker, all
    /// at once, and waits for them until `START_DEADLINE`. A GPU that has
    /// not answered by then is listed as far as it was described (index,
    /// PCI bus id) and is stuck in every sample until it answers; the rest
    /// of the node is served. `interval`: the agent's sampling interval,
    /// which sets how long a sample waits for a GPU before calling it stuck.
    pub fn new(nvml: &'static Nvml, proc_root: PathBuf, interval: Duration) -> Result<Self, NvmlUnavailable> {
        let count = nvml
            .device_count()
            .map_err(|e| NvmlUnavailable(format!("cannot count GPUs: {e}")))?;
        let mut gpus = Vec::new();
        let mut workers = Vec::new();
        for index in 0..count {
            let slot = Arc::new(Slot::default());
            if let Ok(mut i) = slot.info.lock() {
                *i = GpuInfo {
                    index,
                    vendor: "NVIDIA".into(),
                    ..Default::default()
                };
            }
            let doing: Doing = Arc::new(Mutex::new(""));
            let (s, d, proc_root) = (slot.clone(), doing.clone(), proc_root.clone());
            workers.push(Worker::start("nvml", index, doing, move || {
                let g = Arc::new(open_gpu(nvml, index, &d));
                let _ = s.gpu.set(g.clone());
                describe_gpu(nvml, &g, &s.info, &d);
                at(&d, "nvmlGpmQueryDeviceSupport");
                let gpm_supported = g.dev.as_ref().is_ok_and(|d| d.gpm_support().unwrap_or(false));
                let mut reader = GpuReader {
                    nvml,
                    mig_gpm_prev: g.mig.iter().map(|_| None).collect(),
                    gpu: g,
                    pcie_prev: None,
                    gpm_prev: None,
                    gpm_supported,
                    proc_root,
                    doing: d,
                };
                move || reader.sample()
            }));
            gpus.push(slot);
        }
        let (started, infos) = start_all(&mut workers, |i| {
            gpus.get(i)
                .and_then(|s| s.info.lock().ok().map(|i| i.clone()))
                .unwrap_or_default()
        });
        // XIDs of the GPUs that answered: registering a hung one's events
        // would hang the event thread.
        let xids: XidQueue = Arc::default();
        let handles = gpus
            .iter()
            .zip(&started)
            .filter(|(_, ok)| **ok)
            .filter_map(|(s, _)| s.gpu.get())
            .filter_map(|g| g.dev.as_ref().ok().map(|d| (g.index, Handle(unsafe_handle(d)))))
            .collect();
        spawn_xid_thread(nvml, handles, Arc::downgrade(&xids));
        Ok(NvmlSampler {
            nvml,
            gpus,
            infos,
            workers,
            deadline: answer_deadline(interval),
            xids,
        })
    }
}

impl NvmlSampler {
    /// How many GPUs NVML counts (`auto` tries AMD SMI where it is none).
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }
}

/// Short, stable text for an NVML error, as carried in `GpuSample.error`.
fn error_text(e: &NvmlError) -> String {
    match e {
        NvmlError::GpuLost => "gpu_lost".into(),
        NvmlError::NotSupported => "not_supported".into(),
        NvmlError::NoPermission => "no_permission".into(),
        other => format!("nvml: {other}"),
    }
}

/// The GPUs' compute processes, asked of NVML when called (the same call
/// the samples make: nvmlDeviceGetComputeRunningProcesses).
struct NvmlProcesses(Vec<Arc<Slot>>);

impl crate::sources::GpuProcesses for NvmlProcesses {
    fn pids(&self, index: u32) -> Result<Vec<u32>, String> {
        let g = self
            .0
            .get(index as usize)
            .ok_or_else(|| format!("no GPU {index}"))?
            .gpu
            .get()
            .ok_or_else(|| format!("nvml_stuck: GPU {index} has not answered since the agent started"))?;
        let d = g.dev.as_ref().map_err(Clone::clone)?;
        d.running_compute_processes()
            .map(|procs| procs.into_iter().map(|p| p.pid).collect())
            .map_err(|e| error_text(&e))
    }
}

impl Sampler for NvmlSampler {
    fn gpu_processes(&self) -> Option<Arc<dyn crate::sources::GpuProcesses>> {
        Some(Arc::new(NvmlProcesses(self.gpus.clone())))
    }

    fn describe(&mut self, info: &mut NodeInfo) {
        info.backend = "nvml".into();
        info.driver_version = self.nvml.sys_driver_version().unwrap_or_default();
        if let Ok(v) = self.nvml.sys_cuda_driver_version() {
            info.cuda_version = format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            );
        }
        info.gpus.extend(self.infos.iter().cloned());
    }

    fn sample(&mut self, _now_ms: i64, out: &mut Sample) {
        let xids = self
            .xids
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default();
        for (index, mut s) in sample_all(&mut self.workers, self.deadline) {
            // XIDs come from the event thread: a stuck GPU still reports them.
            s.xids = xids.iter().filter(|(i, _)| *i == index).map(|(_, e)| *e).collect();
            out.gpus.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_gpu_is_named_plainly() {
        assert_eq!(error_text(&NvmlError::GpuLost), "gpu_lost");
        assert_eq!(error_text(&NvmlError::NotSupported), "not_supported");
    }
}
