//! Reading one GPU's sample, on its worker thread: the NVML calls in order
//! (each named first, for a stuck GPU's report), the readings a GPU does not
//! give marked absent, PCIe throughput over the whole interval from the
//! driver's byte counters, MIG instances, and the few readings made through
//! the sys layer directly (raw clocks-event reasons, remapped rows).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nvml_wrapper::Device;
use nvml_wrapper::GpmSample;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, PcieUtilCounter};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_SUCCESS;

use crate::proto::{GpuProcess, GpuSample, MigInstance};
use crate::sources::jobs;

use super::temperature::gpu_temperature;
use super::{Gpu, error_text};

/// One GPU's reader, owned by its worker thread: the handles, and what lives
/// from one of its samples to the next.
pub(super) struct GpuReader {
    pub(super) nvml: &'static Nvml,
    pub(super) gpu: Arc<Gpu>,
    /// The previous PCIe byte counters (when read, tx, rx), for a throughput
    /// over the whole interval where the driver counts bytes.
    pub(super) pcie_prev: Option<(Instant, u64, u64)>,
    /// With GPM, the previous GPM sample: metrics are over the interval
    /// between two samples, so each sample pairs with the last.
    pub(super) gpm_prev: Option<GpmSample<'static>>,
    /// The same per MIG instance (nvmlGpmMigSampleGet), in `gpu.mig` order.
    pub(super) mig_gpm_prev: Vec<Option<GpmSample<'static>>>,
    /// A GPU without GPM (before Hopper) is never asked again.
    pub(super) gpm_supported: bool,
    pub(super) proc_root: PathBuf,
    /// The NVML call under way, for the sampler to name when the GPU is stuck.
    pub(super) doing: Arc<Mutex<&'static str>>,
}

/// The PCIe byte counters (when read, tx, rx) one sample read, where the driver has them.
#[derive(Default)]
pub(super) struct PcieCounters {
    pub(super) now: Option<(Instant, u64, u64)>,
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
    pub(super) fn call<T>(&self, name: &'static str, f: impl FnOnce() -> T) -> T {
        if let Ok(mut d) = self.doing.lock() {
            *d = name;
        }
        f()
    }

    /// This GPU's sample, its PCIe throughput over the interval since the
    /// previous one and its GPM metrics with it.
    pub(super) fn sample(&mut self) -> GpuSample {
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
        self.link_and_fabric(d, &mut s);
        match self.call("nvmlDeviceGetComputeRunningProcesses", || d.running_compute_processes()) {
            Ok(procs) => {
                s.processes = procs
                    .into_iter()
                    .map(|p| {
                        let owner = crate::sources::procinfo::owner_of_pid(&self.proc_root, p.pid);
                        GpuProcess {
                            pid: p.pid,
                            used_mem_bytes: match p.used_gpu_memory {
                                UsedGpuMemory::Used(b) => b,
                                UsedGpuMemory::Unavailable => 0,
                            },
                            job_id: jobs::job_id_of_pid(&self.proc_root, p.pid).unwrap_or(0),
                            user: owner.user,
                            command: owner.command,
                        }
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
}
