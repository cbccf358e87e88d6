//! NVIDIA GPUs through NVML (nvml-wrapper, which loads libnvidia-ml at run
//! time, so building needs no driver and no CUDA toolkit).
//!
//! Device handles are created once. XID errors come from an NVML event set
//! waited on by a thread of its own, not from polling. The few readings
//! nvml-wrapper cannot make as we need them (the raw clocks-event bitmask with
//! unknown bits kept, NVLink field values with the link in `scopeId`, remapped
//! rows, the GPU's fabric registration) call the sys layer directly.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::{field_id, nvmlFieldValue_t, nvmlReturn_enum_NVML_SUCCESS};

use crate::jobs;
use nvml_wrapper::GpmSample;
use nvml_wrapper::enums::gpm::GpmMetricId;

use crate::proto::{Gpm, GpuInfo, GpuProcess, GpuSample, MigInstance, NodeInfo, NvLinkInfo, Sample, XidEvent};
use crate::sampler::Sampler;

/// NVML could not be used on this machine; the message is one line for people.
#[derive(Debug, thiserror::Error)]
#[error("NVML not available: {0}")]
pub struct NvmlUnavailable(String);

/// XID events seen by the event thread, waiting for the next sample: (GPU index, event).
type XidQueue = Arc<Mutex<Vec<(u32, XidEvent)>>>;

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

/// NVML for every GPU of the node. Each GPU is read on a worker thread of
/// its own, so that a GPU whose NVML calls hang holds up only itself: the
/// sampler asks every worker at once, waits until a deadline, and reports a
/// GPU that has not answered as stuck while its worker stays in the call.
pub struct NvmlSampler {
    nvml: &'static Nvml,
    /// Shared with the workers; here for the node description.
    gpus: Vec<Arc<Gpu>>,
    workers: Vec<Worker>,
    /// How long a sample waits for the GPUs' answers (see `answer_deadline`).
    deadline: Duration,
    xids: XidQueue,
}

/// How long a sample waits for a GPU: 80 % of the interval, so that the
/// rest of the node's sample (IB, host) and its sending still fit in the
/// tick and a stuck GPU costs the others no sample; at most 1 s, because
/// NVML answers in milliseconds and at long intervals waiting longer only
/// ages the other readings; at least 250 ms, so that a healthy GPU on a
/// loaded node is not called stuck for a scheduling delay at very short
/// intervals (those samples then take longer and skip ticks, as before).
pub fn answer_deadline(interval: Duration) -> Duration {
    (interval * 4 / 5).clamp(Duration::from_millis(250), Duration::from_secs(1))
}

/// One GPU's reader, owned by its worker thread: the handles, and what lives
/// from one of its samples to the next.
struct GpuReader {
    nvml: &'static Nvml,
    gpu: Arc<Gpu>,
    /// The previous PCIe byte counters (when read, tx, rx), for a throughput
    /// over the whole interval where the driver counts bytes.
    pcie_prev: Option<(Instant, u64, u64)>,
    /// With GPM, the previous GPM sample: metrics are over the interval
    /// between two samples, so each sample pairs with the last.
    gpm_prev: Option<GpmSample<'static>>,
    /// The same per MIG instance (nvmlGpmMigSampleGet), in `gpu.mig` order.
    mig_gpm_prev: Vec<Option<GpmSample<'static>>>,
    /// A GPU without GPM (before Hopper) is never asked again.
    gpm_supported: bool,
    proc_root: PathBuf,
    /// The NVML call under way, for the sampler to name when the GPU is stuck.
    doing: Arc<Mutex<&'static str>>,
}

/// The sampler's end of a GPU's worker thread.
struct Worker {
    index: u32,
    /// Requests out, answers back; `Err`: the worker cannot answer (its
    /// thread could not start or has ended), the reason as sent for the GPU.
    link: Result<(Sender<()>, Receiver<GpuSample>), String>,
    doing: Arc<Mutex<&'static str>>,
    /// When the request the worker has not answered yet was sent.
    asked: Option<Instant>,
}

impl Worker {
    /// Starts the thread that reads this GPU for as long as the sampler lives.
    fn spawn(reader: GpuReader) -> Worker {
        let index = reader.gpu.index;
        let doing = reader.doing.clone();
        let (ask, asks) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("nvml-gpu{index}"))
            .spawn(move || {
                let mut reader = reader;
                // Ends when the sampler is dropped (its sender with it).
                while asks.recv().is_ok() {
                    if answer.send(reader.sample()).is_err() {
                        return;
                    }
                }
            });
        let link = match spawned {
            Ok(_) => Ok((ask, answers)),
            Err(e) => {
                tracing::error!("GPU {index}: cannot start its NVML thread: {e}");
                Err(format!("nvml_worker: cannot start the GPU's reader thread: {e}"))
            }
        };
        Worker {
            index,
            link,
            doing,
            asked: None,
        }
    }

    /// The worker's thread is gone (it can only have panicked): say so in
    /// every sample from now on rather than take the agent down.
    fn gone(&mut self) {
        tracing::error!("GPU {}: its NVML thread ended", self.index);
        self.link = Err("nvml_worker: the GPU's reader thread ended".into());
        self.asked = None;
    }

    /// Asks for a sample at `now`, unless the previous one is still under
    /// way (the GPU is stuck). Whether it asked.
    fn ask(&mut self, now: Instant) -> bool {
        let Ok((ask, answers)) = &self.link else {
            return false;
        };
        if self.asked.is_some() {
            match answers.try_recv() {
                // Answered after its deadline: readings from before the hang
                // are old, so it is asked again rather than believed.
                Ok(_) => self.asked = None,
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => {
                    self.gone();
                    return false;
                }
            }
        }
        if ask.send(()).is_err() {
            self.gone();
            return false;
        }
        self.asked = Some(now);
        true
    }

    /// The GPU's answer if it comes by `until`; otherwise a sample that says
    /// the GPU is stuck, naming the call and how long it has not answered.
    fn answer(&mut self, until: Instant) -> GpuSample {
        let mut s = GpuSample {
            index: self.index,
            ..Default::default()
        };
        let (Ok((_, answers)), Some(asked)) = (&self.link, self.asked) else {
            s.error = match &self.link {
                Err(e) => e.clone(),
                Ok(_) => "nvml_worker: not asked".into(),
            };
            return s;
        };
        match answers.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(answer) => {
                self.asked = None;
                answer
            }
            Err(RecvTimeoutError::Timeout) => {
                let call = self.doing.lock().map(|d| *d).unwrap_or("?");
                s.error = format!("nvml_stuck: {call}: no answer for {} ms", asked.elapsed().as_millis());
                s
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.gone();
                s.error = self.link.as_ref().err().cloned().unwrap_or_default();
                s
            }
        }
    }
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
    /// Opens every GPU NVML counts. A GPU that cannot be opened is kept, with
    /// the reason, so that it shows as that GPU (lost, no permission) rather
    /// than as a node with one GPU fewer.
    /// `interval`: the agent's sampling interval, which sets how long a
    /// sample waits for a GPU before calling it stuck.
    pub fn new(nvml: &'static Nvml, proc_root: PathBuf, interval: Duration) -> Result<Self, NvmlUnavailable> {
        let count = nvml
            .device_count()
            .map_err(|e| NvmlUnavailable(format!("cannot count GPUs: {e}")))?;
        let mut gpus = Vec::new();
        for index in 0..count {
            match nvml.device_by_index(index) {
                Ok(dev) => {
                    let links = (0..PROBE_LINKS)
                        .filter_map(|l| dev.link_wrapper_for(l).is_active().ok().map(|up| (l, !up)))
                        .collect();
                    let mig = mig_devices(&dev);
                    gpus.push(Gpu {
                        index,
                        dev: Ok(dev),
                        links,
                        mig,
                    });
                }
                Err(e) => {
                    tracing::warn!("GPU {index}: cannot open: {e}");
                    gpus.push(Gpu {
                        index,
                        dev: Err(error_text(&e)),
                        links: Vec::new(),
                        mig: Vec::new(),
                    });
                }
            }
        }
        let xids: XidQueue = Arc::default();
        let handles = gpus
            .iter()
            .filter_map(|g| g.dev.as_ref().ok().map(|d| (g.index, Handle(unsafe_handle(d)))))
            .collect();
        spawn_xid_thread(nvml, handles, Arc::downgrade(&xids));
        let gpus: Vec<Arc<Gpu>> = gpus.into_iter().map(Arc::new).collect();
        let workers = gpus
            .iter()
            .map(|g| {
                Worker::spawn(GpuReader {
                    nvml,
                    gpu: g.clone(),
                    pcie_prev: None,
                    gpm_prev: None,
                    mig_gpm_prev: g.mig.iter().map(|_| None).collect(),
                    gpm_supported: g.dev.as_ref().is_ok_and(|d| d.gpm_support().unwrap_or(false)),
                    proc_root: proc_root.clone(),
                    doing: Arc::new(Mutex::new("")),
                })
            })
            .collect();
        Ok(NvmlSampler {
            nvml,
            gpus,
            workers,
            deadline: answer_deadline(interval),
            xids,
        })
    }
}

/// A device handle as an address, to tell which GPU an event came from:
/// NVML's handles are stable for the life of the library, and the event
/// carries the handle, while asking a lost GPU for its index fails.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Handle(usize);

fn unsafe_handle(d: &Device) -> usize {
    // SAFETY: the raw handle is only compared, never used to call NVML.
    unsafe { d.handle() as usize }
}

/// Waits on an NVML event set for critical XID errors and queues them for the
/// sampler. Ends only when the sampler (the queue's owner) is gone: an error
/// from the wait (one GPU lost) must not end XID reporting for the others.
fn spawn_xid_thread(nvml: &'static Nvml, handles: Vec<(u32, Handle)>, queue: Weak<Mutex<Vec<(u32, XidEvent)>>>) {
    let spawned = std::thread::Builder::new().name("nvml-xid".into()).spawn(move || {
        // A failed registration frees the whole set, so first find the
        // GPUs that accept event registration, each in a throwaway set.
        let accepts = |i: u32| {
            let Ok(set) = nvml.create_event_set() else {
                return false;
            };
            match nvml
                .device_by_index(i)
                .map(|d| d.register_events(EventTypes::CRITICAL_XID_ERROR, set))
            {
                Ok(Ok(_)) => true,
                Ok(Err(e)) => {
                    tracing::warn!("GPU {i}: XID events unavailable: {}", e.error);
                    false
                }
                Err(_) => false,
            }
        };
        let accepted: Vec<u32> = handles.iter().map(|h| h.0).filter(|&i| accepts(i)).collect();
        let mut set = match nvml.create_event_set() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("XID events unavailable: {e}");
                return;
            }
        };
        for i in accepted {
            let Ok(dev) = nvml.device_by_index(i) else {
                continue;
            };
            match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(s) => set = s,
                Err(e) => {
                    tracing::warn!("XID events unavailable: {}", e.error);
                    return;
                }
            }
        }
        let mut warned = false;
        loop {
            let Some(queue) = queue.upgrade() else { return };
            match set.wait(1000) {
                Ok(ev) => {
                    let xid = match ev.event_data {
                        Some(XidError::Value(v)) => u32::try_from(v).unwrap_or(u32::MAX),
                        // nvml-wrapper turns XID 999 (NVML's "unknown") into this.
                        Some(XidError::Unknown) => 999,
                        None => continue,
                    };
                    let from = Handle(unsafe_handle(&ev.device));
                    let Some(&(index, _)) = handles.iter().find(|(_, h)| *h == from) else {
                        tracing::warn!("XID {xid} from a GPU the agent does not know");
                        continue;
                    };
                    if let Ok(mut q) = queue.lock() {
                        q.push((
                            index,
                            XidEvent {
                                xid,
                                time_ms: crate::now_ms(),
                                // 0: NVML's event set.
                                source: 0,
                            },
                        ));
                    }
                }
                Err(NvmlError::Timeout) => {}
                Err(e) => {
                    // A lost GPU makes the wait fail; the others still
                    // report. Pause so a wait that fails at once cannot spin.
                    if !warned {
                        tracing::warn!("XID event wait: {e}; still listening");
                        warned = true;
                    }
                    drop(queue);
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the XID event thread: {e}");
    }
}

/// Field values read in one NVML call per GPU: HBM temperature, the PCIe
/// byte counters, then per link its state and data throughput counters
/// (KiB), the link in `scopeId`.
fn field_request(links: &[(u32, bool)]) -> Vec<nvmlFieldValue_t> {
    let mut ids = vec![
        (field_id::NVML_FI_DEV_MEMORY_TEMP, 0),
        (field_id::NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0),
        (field_id::NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0),
    ];
    for &(l, _) in links {
        ids.push((field_id::NVML_FI_DEV_NVLINK_GET_STATE, l));
        ids.push((field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, l));
        ids.push((field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, l));
    }
    ids.into_iter()
        .map(|(id, scope)| {
            // SAFETY: nvmlFieldValue_t is plain old data; all-zero is a valid value.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v.scopeId = scope;
            v
        })
        .collect()
}

/// The value of one answered field as an integer; `None` if NVML refused it.
#[allow(non_upper_case_globals)] // bindgen's names for NVML's C enum
fn field_u64(v: &nvmlFieldValue_t) -> Option<u64> {
    use nvml_wrapper_sys::bindings::*;
    if v.nvmlReturn != nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    // SAFETY: valueType says which member of the union NVML wrote.
    unsafe {
        Some(match v.valueType {
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => u64::from(v.value.uiVal),
            // c_ulong is 64-bit on the Linux targets NVML supports.
            #[allow(clippy::useless_conversion)]
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => u64::from(v.value.ulVal),
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => v.value.ullVal,
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => v.value.sllVal.max(0) as u64,
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => v.value.siVal.max(0) as u64,
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => u64::from(v.value.usVal),
            nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE => v.value.dVal.max(0.0) as u64,
            _ => return None,
        })
    }
}

/// The PCIe byte counters (when read, tx, rx) one sample read, where the driver has them.
#[derive(Default)]
struct PcieCounters {
    now: Option<(Instant, u64, u64)>,
}

/// What nvmlDeviceGetRemappedRows says.
struct RemappedRows {
    correctable: u32,
    uncorrectable: u32,
    /// A remap waits for a GPU reset.
    pending: bool,
    /// A remap failed: the GPU needs replacing.
    failed: bool,
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

/// A reading, or its `absent` bit set when the GPU did not give it. Only
/// that field is affected: NOT_SUPPORTED (a MIG GPU's utilization, an HBM
/// sensor that is not there) is no reading, not a GPU error.
fn got<T: Default>(r: Result<T, NvmlError>, bit: u32, absent: &mut u32) -> T {
    r.unwrap_or_else(|_| {
        *absent |= bit;
        T::default()
    })
}

impl GpuReader {
    /// Notes the NVML call about to be made (for a stuck GPU's report), then makes it.
    fn call<T>(&self, name: &'static str, f: impl FnOnce() -> T) -> T {
        if let Ok(mut d) = self.doing.lock() {
            *d = name;
        }
        f()
    }

    /// This GPU's sample, its PCIe throughput over the interval since the
    /// previous one and its GPM metrics with it.
    fn sample(&mut self) -> GpuSample {
        let mut pcie = PcieCounters::default();
        let mut s = self.sample_gpu(&mut pcie);
        // PCIe throughput over the whole interval from the driver's byte
        // counters where it has them: NVML's throughput call looks at
        // 20 ms only, noise at one sample a second. Timed where they were
        // read: this GPU's reads may have waited on a slow call.
        if let Some((at, tx, rx)) = pcie.now {
            if let Some((t0, tx0, rx0)) = self.pcie_prev
                && at > t0
                && tx >= tx0
                && rx >= rx0
            {
                // Bytes per ms are KB/s.
                let us = (at - t0).as_micros().max(1);
                let kbps = |b: u64| u32::try_from(u128::from(b) * 1000 / us).unwrap_or(u32::MAX);
                s.pcie_tx_kbps = kbps(tx - tx0);
                s.pcie_rx_kbps = kbps(rx - rx0);
            }
            self.pcie_prev = Some((at, tx, rx));
        }
        if s.error.is_empty() {
            s.gpm = self.gpm();
            // In `gpu.mig` order, as `sample_gpu` lists them.
            for (k, m) in s.mig.iter_mut().enumerate() {
                m.gpm = self.mig_gpm(k, m.gpu_instance_id);
            }
        }
        s
    }

    fn sample_gpu(&self, pcie: &mut PcieCounters) -> GpuSample {
        use fleetop_proto::absent as a;
        let g = &*self.gpu;
        let mut s = GpuSample {
            index: g.index,
            ..Default::default()
        };
        let d = match &g.dev {
            Ok(d) => d,
            Err(e) => {
                s.error = e.clone();
                return s;
            }
        };
        let mut ab = 0;
        // Utilization answers first; if the GPU is lost there is no point in
        // asking the rest (each call would take NVML's timeout).
        match self.call("nvmlDeviceGetUtilizationRates", || d.utilization_rates()) {
            Ok(u) => {
                s.util_pct = u.gpu;
                s.mem_util_pct = u.memory;
            }
            Err(e @ NvmlError::GpuLost) | Err(e @ NvmlError::Unknown) => {
                s.error = error_text(&e);
                return s;
            }
            Err(_) => ab |= a::UTIL | a::MEM_UTIL,
        }
        match self.call("nvmlDeviceGetMemoryInfo", || d.memory_info()) {
            Ok(m) => s.mem_used_bytes = m.used,
            Err(_) => ab |= a::MEM_USED,
        }
        s.temp_c = got(
            self.call("nvmlDeviceGetTemperature", || gpu_temperature(self.nvml, d)),
            a::TEMP,
            &mut ab,
        );
        s.power_mw = got(
            self.call("nvmlDeviceGetPowerUsage", || d.power_usage()),
            a::POWER,
            &mut ab,
        );
        s.power_limit_mw = got(
            self.call("nvmlDeviceGetEnforcedPowerLimit", || d.enforced_power_limit()),
            a::POWER_LIMIT,
            &mut ab,
        );
        s.energy_mj = got(
            self.call("nvmlDeviceGetTotalEnergyConsumption", || d.total_energy_consumption()),
            a::ENERGY,
            &mut ab,
        );
        let clock = |c| self.call("nvmlDeviceGetClockInfo", || d.clock_info(c));
        s.sm_clock_mhz = got(clock(Clock::SM), a::SM_CLOCK, &mut ab);
        s.mem_clock_mhz = got(clock(Clock::Memory), a::MEM_CLOCK, &mut ab);
        s.throttle_reasons = got(
            self.call("nvmlDeviceGetCurrentClocksEventReasons", || {
                self.raw_clock_event_reasons(d)
            })
            .ok_or(NvmlError::NotSupported),
            a::THROTTLE,
            &mut ab,
        );
        let pcie_tp = |c| self.call("nvmlDeviceGetPcieThroughput", || d.pcie_throughput(c));
        match (pcie_tp(PcieUtilCounter::Send), pcie_tp(PcieUtilCounter::Receive)) {
            (Ok(tx), Ok(rx)) => (s.pcie_tx_kbps, s.pcie_rx_kbps) = (tx, rx),
            _ => ab |= a::PCIE_THROUGHPUT,
        }
        s.pcie_replay_count = got(
            self.call("nvmlDeviceGetPcieReplayCounter", || d.pcie_replay_counter())
                .map(u64::from),
            a::PCIE_REPLAY,
            &mut ab,
        );
        let ecc = |e| {
            self.call("nvmlDeviceGetTotalEccErrors", || {
                d.total_ecc_errors(e, EccCounter::Volatile)
            })
        };
        match (ecc(MemoryError::Corrected), ecc(MemoryError::Uncorrected)) {
            (Ok(c), Ok(u)) => (s.ecc_corrected_volatile, s.ecc_uncorrected_volatile) = (c, u),
            _ => ab |= a::ECC,
        }
        if let Some(r) = self.call("nvmlDeviceGetRemappedRows", || self.remapped_rows(d)) {
            s.remapped_rows_correctable = r.correctable;
            s.remapped_rows_uncorrectable = r.uncorrectable;
            s.remapped_rows_pending = u32::from(r.pending);
            s.remapped_rows_failed = u32::from(r.failed);
        } else {
            ab |= a::REMAPPED_ROWS;
            // Pre-Ampere GPUs retire pages instead of remapping rows.
            use nvml_wrapper::enum_wrappers::device::RetirementCause;
            s.retired_pages = [
                RetirementCause::MultipleSingleBitEccErrors,
                RetirementCause::DoubleBitEccError,
            ]
            .into_iter()
            .filter_map(|c| self.call("nvmlDeviceGetRetiredPages", || d.retired_pages(c)).ok())
            .map(|p| p.len() as u32)
            .sum();
        }
        self.call("nvmlDeviceGetFieldValues", || {
            self.read_fields(g, d, &mut s, &mut ab, pcie)
        });
        // Link, persistence and fabric: four calls that read driver state
        // (no GPU work, microseconds each), so taken every sample rather
        // than cached. Each one that fails leaves its field 0 (unknown);
        // the sample stands.
        s.pcie_gen = self
            .call("nvmlDeviceGetCurrPcieLinkGeneration", || d.current_pcie_link_gen())
            .unwrap_or(0);
        s.pcie_width = self
            .call("nvmlDeviceGetCurrPcieLinkWidth", || d.current_pcie_link_width())
            .unwrap_or(0);
        s.persistence = match self.call("nvmlDeviceGetPersistenceMode", || d.is_in_persistent_mode()) {
            Ok(true) => 2,
            Ok(false) => 1,
            Err(_) => 0,
        };
        if let Some((state, status)) = self.call("nvmlDeviceGetGpuFabricInfoV", || self.fabric(d)) {
            s.fabric_state = state;
            s.fabric_status = status;
        }
        match self.call("nvmlDeviceGetComputeRunningProcesses", || d.running_compute_processes()) {
            Ok(procs) => {
                s.processes = procs
                    .into_iter()
                    .map(|p| GpuProcess {
                        pid: p.pid,
                        used_mem_bytes: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => b,
                            UsedGpuMemory::Unavailable => 0,
                        },
                        job_id: jobs::job_id_of_pid(&self.proc_root, p.pid).unwrap_or(0),
                    })
                    .collect()
            }
            Err(_) => ab |= a::PROCESSES,
        }
        s.absent = ab;
        s.mig = g
            .mig
            .iter()
            .map(|m| self.call("nvmlDeviceGetMemoryInfo (MIG)", || self.mig_instance(m)))
            .collect();
        s
    }

    /// One MIG instance: its profile (from NVML's name, "<model> MIG 3g.40gb")
    /// and memory.
    fn mig_instance(&self, m: &Device) -> MigInstance {
        let name = m.name().unwrap_or_default();
        let profile = name.rsplit_once(" MIG ").map(|(_, p)| p.to_string()).unwrap_or(name);
        let mut id = 0u32;
        if let Ok(sym) = self.nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref() {
            // SAFETY: a valid MIG device handle and a u32 NVML writes.
            let rc = unsafe { sym(m.handle(), &mut id) };
            if rc != nvmlReturn_enum_NVML_SUCCESS {
                id = 0;
            }
        }
        let mem = m.memory_info().ok();
        MigInstance {
            gpu_instance_id: id,
            profile,
            uuid: m.uuid().unwrap_or_default(),
            mem_used_bytes: mem.as_ref().map(|x| x.used).unwrap_or(0),
            mem_total_bytes: mem.map(|x| x.total).unwrap_or(0),
            gpm: None,
        }
    }

    /// GPM metrics of MIG instance `k` (GPU instance `gi`) since the previous
    /// sample: asked of the parent GPU by GPU instance id. `None` without
    /// GPM, on the first sample, or where the instance id is unknown (0).
    fn mig_gpm(&mut self, k: usize, gi: u32) -> Option<Gpm> {
        if !self.gpm_supported || gi == 0 {
            return None;
        }
        let d = self.gpu.dev.as_ref().ok()?;
        let cur = self.call("nvmlGpmMigSampleGet", || d.gpm_mig_sample(gi));
        let slot = self.mig_gpm_prev.get_mut(k)?;
        let Ok(cur) = cur else {
            *slot = None;
            return None;
        };
        let prev = slot.replace(cur)?;
        let cur = self.mig_gpm_prev.get(k)?.as_ref()?;
        self.gpm_between(&prev, cur)
    }

    /// GPM metrics since the previous sample, `None` without GPM or on the
    /// first sample.
    fn gpm(&mut self) -> Option<Gpm> {
        if !self.gpm_supported {
            return None;
        }
        let d = self.gpu.dev.as_ref().ok()?;
        let cur = match self.call("nvmlGpmSampleGet", || d.gpm_sample()) {
            Ok(s) => s,
            Err(_) => {
                self.gpm_prev = None;
                return None;
            }
        };
        let prev = self.gpm_prev.replace(cur)?;
        let cur = self.gpm_prev.as_ref()?;
        self.gpm_between(&prev, cur)
    }

    /// The four GPM metrics between two GPM samples of one GPU or instance.
    fn gpm_between(&self, prev: &GpmSample<'static>, cur: &GpmSample<'static>) -> Option<Gpm> {
        let ids = [
            GpmMetricId::SmUtil,
            GpmMetricId::SmOccupancy,
            GpmMetricId::AnyTensorUtil,
            GpmMetricId::DramBwUtil,
        ];
        let r = self
            .call("nvmlGpmMetricsGet", || {
                nvml_wrapper::gpm::gpm_metrics_get(self.nvml, prev, cur, &ids)
            })
            .ok()?;
        // Percent to hundredths of a percent, as the wire carries them.
        let v = |k: usize| {
            let p = r.get(k)?.as_ref().ok()?.value;
            p.is_finite().then(|| (p.clamp(0.0, 100.0) * 100.0).round() as u32)
        };
        Some(Gpm {
            sm_active_cpct: v(0)?,
            sm_occupancy_cpct: v(1)?,
            tensor_active_cpct: v(2)?,
            dram_bw_cpct: v(3)?,
        })
    }

    /// The raw clocks-event bitmask, unknown bits kept (nvml-wrapper's typed
    /// call truncates bits it does not know).
    fn raw_clock_event_reasons(&self, d: &Device) -> Option<u64> {
        let lib = self.nvml.lib();
        let sym = lib
            .nvmlDeviceGetCurrentClocksEventReasons
            .as_ref()
            .or(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref())
            .ok()?;
        let mut mask = 0u64;
        // SAFETY: a valid device handle and a pointer to a u64 NVML writes.
        let rc = unsafe { sym(d.handle(), &mut mask) };
        (rc == nvmlReturn_enum_NVML_SUCCESS).then_some(mask)
    }

    /// Remapped rows (Ampere and later): two counts and two flags.
    fn remapped_rows(&self, d: &Device) -> Option<RemappedRows> {
        let sym = self.nvml.lib().nvmlDeviceGetRemappedRows.as_ref().ok()?;
        let (mut corr, mut unc, mut pending, mut failed) = (0u32, 0u32, 0u32, 0u32);
        // SAFETY: a valid device handle and pointers to four u32 NVML writes.
        let rc = unsafe { sym(d.handle(), &mut corr, &mut unc, &mut pending, &mut failed) };
        (rc == nvmlReturn_enum_NVML_SUCCESS).then_some(RemappedRows {
            correctable: corr,
            uncorrectable: unc,
            pending: pending != 0,
            failed: failed != 0,
        })
    }

    /// The GPU's registration with the NVLink fabric (NVSwitch systems), as
    /// the wire carries it: (nvmlGpuFabricState_t + 1, and once completed
    /// its nvmlReturn_t result). `None` (not reported) where the driver has
    /// no such call or answers NOT_SUPPORTED or any error.
    ///
    /// nvmlDeviceGetGpuFabricInfoV with the v2 struct, the first version
    /// that call took (drivers that know later ones still accept it, and
    /// v3 adds only a health summary the wire does not carry); where the
    /// driver predates the V call, the deprecated nvmlDeviceGetGpuFabricInfo.
    fn fabric(&self, d: &Device) -> Option<(u32, u32)> {
        use nvml_wrapper_sys::bindings::{
            NVML_GPU_FABRIC_STATE_COMPLETED, nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v2_t,
        };
        let lib = self.nvml.lib();
        let (state, status) = if let Ok(sym) = lib.nvmlDeviceGetGpuFabricInfoV.as_ref() {
            // SAFETY: plain old data; all-zero is a valid value.
            let mut f: nvmlGpuFabricInfo_v2_t = unsafe { std::mem::zeroed() };
            // nvmlGpuFabricInfo_v2: the struct's size, version 2 in the top byte.
            f.version = std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as u32 | (2 << 24);
            // nvmlGpuFabricInfoV_t is the bindings' latest (v3), a larger
            // struct with the same leading fields: NVML reads `version` and
            // writes no more than the v2 struct it names.
            let p = (&mut f as *mut nvmlGpuFabricInfo_v2_t).cast();
            // SAFETY: a valid device handle and a versioned struct NVML fills.
            if unsafe { sym(d.handle(), p) } != nvmlReturn_enum_NVML_SUCCESS {
                return None;
            }
            (f.state, f.status)
        } else {
            let sym = lib.nvmlDeviceGetGpuFabricInfo.as_ref().ok()?;
            // SAFETY: plain old data; all-zero is a valid value.
            let mut f: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: a valid device handle and the struct NVML fills.
            if unsafe { sym(d.handle(), &mut f) } != nvmlReturn_enum_NVML_SUCCESS {
                return None;
            }
            (f.state, f.status)
        };
        let completed = u32::from(state) == NVML_GPU_FABRIC_STATE_COMPLETED;
        Some((u32::from(state) + 1, if completed { status } else { 0 }))
    }

    /// HBM temperature and NVLink state and throughput in one field-values call.
    fn read_fields(&self, g: &Gpu, d: &Device, s: &mut GpuSample, ab: &mut u32, pcie: &mut PcieCounters) {
        use fleetop_proto::absent as a;
        let Ok(sym) = self.nvml.lib().nvmlDeviceGetFieldValues.as_ref() else {
            *ab |= a::HBM_TEMP;
            return;
        };
        let mut req = field_request(&g.links);
        // SAFETY: a valid device handle and a buffer of req.len() field values.
        let rc = unsafe { sym(d.handle(), req.len() as i32, req.as_mut_ptr()) };
        if rc != nvmlReturn_enum_NVML_SUCCESS {
            *ab |= a::HBM_TEMP;
            return;
        }
        match field_u64(&req[0]) {
            Some(t) => s.hbm_temp_c = u32::try_from(t).unwrap_or(u32::MAX),
            None => *ab |= a::HBM_TEMP,
        }
        let at = Instant::now();
        pcie.now = field_u64(&req[1]).zip(field_u64(&req[2])).map(|(tx, rx)| (at, tx, rx));
        for (i, chunk) in req[3..].chunks(3).enumerate() {
            // NVML_NVLINK_STATE: 0 inactive, 1 active, 2 sleep (up, low
            // power). A state NVML cannot give counts as inactive.
            let state = field_u64(&chunk[0]).and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
            s.nvlink_state.push(state);
            if state == 0 && i < 32 {
                s.nvlink_down_mask |= 1 << i;
            }
            s.nvlink_tx_kib.push(field_u64(&chunk[1]).unwrap_or(0));
            s.nvlink_rx_kib.push(field_u64(&chunk[2]).unwrap_or(0));
        }
        // All links active, the usual case, travels as no states at all.
        if s.nvlink_state.iter().all(|&st| st == 1) {
            s.nvlink_state.clear();
        }
    }
}

impl NvmlSampler {
    /// Slowdown and shutdown temperatures, °C: the threshold call while the
    /// driver answers it (°C exactly as NVIDIA states them), else the T.Limit
    /// field values converted to °C (see `tlimit_limits`); 0 where neither
    /// answers. Where both answer and disagree, the agent says so once in
    /// its log: the conversion is checked on the fake only (docs/NVML.md),
    /// and a GPU will tell.
    fn temperature_limits(&self, d: &Device) -> (u32, u32) {
        let legacy = d
            .temperature_threshold(TemperatureThreshold::Slowdown)
            .ok()
            .zip(d.temperature_threshold(TemperatureThreshold::Shutdown).ok());
        let tlimit = self.tlimit_limits(d);
        if let Some((l, t)) = legacy.zip(tlimit).filter(|(l, t)| l != t) {
            tracing::warn!(
                "slowdown/shutdown: the threshold call says {} / {} °C, the T.Limit fields {} / {} °C; using the threshold call",
                l.0,
                l.1,
                t.0,
                t.1
            );
        }
        legacy.or(tlimit).unwrap_or((0, 0))
    }

    /// T.Limit thresholds are degrees below the GPU's maximum operating
    /// temperature (negative: above it), which is the temperature now plus
    /// the margin to it (nvmlDeviceGetMarginTemperature): nvidia-smi's
    /// "Slowdown T.Limit Temp: -2 C" on a GPU at 34 °C with a 51 °C margin is
    /// a slowdown at 87 °C. The temperature is read on both sides of the
    /// margin, and again if it moved meanwhile.
    fn tlimit_limits(&self, d: &Device) -> Option<(u32, u32)> {
        use nvml_wrapper_sys::bindings::nvmlMarginTemperature_t;
        let lib = self.nvml.lib();
        let fields = lib.nvmlDeviceGetFieldValues.as_ref().ok()?;
        let margin = lib.nvmlDeviceGetMarginTemperature.as_ref().ok()?;
        let mut req = [
            field_id::NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT,
            field_id::NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT,
        ]
        .map(|id| {
            // SAFETY: nvmlFieldValue_t is plain old data; all-zero is a valid value.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v
        });
        // SAFETY: a valid device handle and a buffer of two field values.
        if unsafe { fields(d.handle(), 2, req.as_mut_ptr()) } != nvmlReturn_enum_NVML_SUCCESS {
            return None;
        }
        let (slowdown, shutdown) = (field_i64(&req[0])?, field_i64(&req[1])?);
        for _ in 0..3 {
            let before = gpu_temperature(self.nvml, d).ok()?;
            let mut m = nvmlMarginTemperature_t {
                // nvmlMarginTemperature_v1: the struct's size, version 1 in the top byte.
                version: std::mem::size_of::<nvmlMarginTemperature_t>() as u32 | (1 << 24),
                marginTemperature: 0,
            };
            // SAFETY: a valid device handle and a versioned struct NVML fills.
            if unsafe { margin(d.handle(), &mut m) } != nvmlReturn_enum_NVML_SUCCESS {
                return None;
            }
            if gpu_temperature(self.nvml, d).ok()? == before {
                let max = i64::from(before) + i64::from(m.marginTemperature);
                let at = |tlimit: i64| u32::try_from(max - tlimit).ok();
                return at(slowdown).zip(at(shutdown));
            }
        }
        None
    }
}

/// GPU temperature, °C: nvmlDeviceGetTemperatureV where the driver has
/// it (nvmlDeviceGetTemperature is deprecated), the old call otherwise.
fn gpu_temperature(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    if let Ok(sym) = nvml.lib().nvmlDeviceGetTemperatureV.as_ref() {
        let mut t = nvml_wrapper_sys::bindings::nvmlTemperature_t {
            // nvmlTemperature_v1: the struct's size, version 1 in the top byte.
            version: std::mem::size_of::<nvml_wrapper_sys::bindings::nvmlTemperature_t>() as u32 | (1 << 24),
            sensorType: nvml_wrapper_sys::bindings::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU,
            temperature: 0,
        };
        // SAFETY: a valid device handle and a versioned struct NVML fills.
        let rc = unsafe { sym(d.handle(), &mut t) };
        if rc == nvmlReturn_enum_NVML_SUCCESS {
            return Ok(u32::try_from(t.temperature).unwrap_or(0));
        }
    }
    d.temperature(TemperatureSensor::Gpu)
}

/// The value of one answered field as a signed integer (T.Limit
/// thresholds are negative above the maximum operating temperature).
#[allow(non_upper_case_globals)] // bindgen's names for NVML's C enum
fn field_i64(v: &nvmlFieldValue_t) -> Option<i64> {
    use nvml_wrapper_sys::bindings::*;
    if v.nvmlReturn != nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    // SAFETY: valueType says which member of the union NVML wrote.
    unsafe {
        match v.valueType {
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => Some(i64::from(v.value.siVal)),
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => Some(v.value.sllVal),
            _ => field_u64(v).and_then(|u| i64::try_from(u).ok()),
        }
    }
}

/// The GPUs' compute processes, asked of NVML when called (the same call
/// the samples make: nvmlDeviceGetComputeRunningProcesses).
struct NvmlProcesses(Vec<Arc<Gpu>>);

impl crate::sampler::GpuProcesses for NvmlProcesses {
    fn pids(&self, index: u32) -> Result<Vec<u32>, String> {
        let g = self
            .0
            .iter()
            .find(|g| g.index == index)
            .ok_or_else(|| format!("no GPU {index}"))?;
        let d = g.dev.as_ref().map_err(Clone::clone)?;
        d.running_compute_processes()
            .map(|procs| procs.into_iter().map(|p| p.pid).collect())
            .map_err(|e| error_text(&e))
    }
}

impl Sampler for NvmlSampler {
    fn gpu_processes(&self) -> Option<Arc<dyn crate::sampler::GpuProcesses>> {
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
        for g in &self.gpus {
            let Ok(d) = &g.dev else {
                // Listed by index: the samples say why there is nothing more.
                info.gpus.push(GpuInfo {
                    index: g.index,
                    ..Default::default()
                });
                continue;
            };
            let limits = self.temperature_limits(d);
            // The link the GPU *and* the slot can train to
            // (nvmlDeviceGetMaxPcieLinkGeneration/-Width), not the GPU's own
            // maximum (nvmlDeviceGetGpuMaxPcieLinkGeneration): a Gen5 GPU
            // in a Gen4 host runs at its best at Gen4, which is no fault.
            info.gpus.push(GpuInfo {
                index: g.index,
                uuid: d.uuid().unwrap_or_default(),
                model: d.name().unwrap_or_default(),
                pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                mem_total_bytes: d.memory_info().map(|m| m.total).unwrap_or(0),
                power_limit_mw: d.enforced_power_limit().unwrap_or(0),
                max_sm_clock_mhz: d.max_clock_info(Clock::SM).unwrap_or(0),
                max_mem_clock_mhz: d.max_clock_info(Clock::Memory).unwrap_or(0),
                slowdown_temp_c: limits.0,
                shutdown_temp_c: limits.1,
                vbios_version: d.vbios_version().unwrap_or_default(),
                pcie_max_gen: d.max_pcie_link_gen().unwrap_or(0),
                pcie_max_width: d.max_pcie_link_width().unwrap_or(0),
                nvlinks: g
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
                    .collect(),
            });
        }
    }

    fn sample(&mut self, _now_ms: i64, out: &mut Sample) {
        let xids = self
            .xids
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default();
        let now = Instant::now();
        // Every GPU at once; one still in a call from an earlier sample is
        // stuck and not waited for again, so it delays no sample after the
        // first that found it stuck.
        let asked: Vec<bool> = self.workers.iter_mut().map(|w| w.ask(now)).collect();
        let deadline = now + self.deadline;
        for (w, asked) in self.workers.iter_mut().zip(asked) {
            let mut s = w.answer(if asked { deadline } else { now });
            // XIDs come from the event thread: a stuck GPU still reports them.
            s.xids = xids.iter().filter(|(i, _)| *i == w.index).map(|(_, e)| *e).collect();
            out.gpus.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_request_puts_the_link_in_scope_id() {
        let req = field_request(&[(0, false), (5, true)]);
        assert_eq!(req.len(), 3 + 2 * 3);
        assert_eq!(req[0].fieldId, field_id::NVML_FI_DEV_MEMORY_TEMP);
        assert_eq!(req[1].fieldId, field_id::NVML_FI_DEV_PCIE_COUNT_TX_BYTES);
        assert_eq!(req[6].fieldId, field_id::NVML_FI_DEV_NVLINK_GET_STATE);
        assert_eq!(req[6].scopeId, 5);
        assert_eq!(req[7].fieldId, field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX);
        assert_eq!(req[8].fieldId, field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX);
        assert_eq!(req[8].scopeId, 5);
    }

    #[test]
    fn field_values_decode_by_type_and_refusal() {
        use nvml_wrapper_sys::bindings::*;
        let mut v = field_request(&[])[0];
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v.value.ullVal = 1 << 40;
        assert_eq!(field_u64(&v), Some(1 << 40));
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
        v.value = nvmlValue_t { uiVal: 71 };
        assert_eq!(field_u64(&v), Some(71));
        v.nvmlReturn = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        assert_eq!(field_u64(&v), None);
    }

    #[test]
    fn a_gpu_is_waited_for_most_of_the_interval_within_bounds() {
        let ms = |n| Duration::from_millis(n);
        assert_eq!(answer_deadline(ms(1000)), ms(800));
        assert_eq!(answer_deadline(ms(500)), ms(400));
        // Short intervals: not a scheduling delay; long ones: NVML is slow.
        assert_eq!(answer_deadline(ms(10)), ms(250));
        assert_eq!(answer_deadline(ms(60_000)), ms(1000));
    }

    #[test]
    fn lost_gpu_is_named_plainly() {
        assert_eq!(error_text(&NvmlError::GpuLost), "gpu_lost");
        assert_eq!(error_text(&NvmlError::NotSupported), "not_supported");
    }
}
