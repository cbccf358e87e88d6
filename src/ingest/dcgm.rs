//! dcgm-exporter's series, and a fleetop agent's own `fleetop_*` and
//! `node_infiniband_*` series, mapped once into the console's domain model:
//! a node's description (`NodeDesc`) and one sample (`NodeSample`). Both the
//! `--dcgm-exporter` scraper (parsed text) and the `--prometheus` reader
//! (query results) hand their series to this one module, one series at a
//! time (`NodeAcc::add`), so a large answer is never held as labelled
//! samples.
//!
//! What a series does not give stays `None`: dcgm-exporter has no host
//! readings, processes, per-link NVLink state or InfiniBand ports, so those
//! are absent, never 0 (a fleetop agent's series give the links and ports).
//! DCGM marks a value it could not read with a "blank" sentinel
//! (`DCGM_INT32_BLANK` 0x7ffffff0 and the 15 above it, `DCGM_INT64_BLANK`
//! 0x7ffffffffffffff0 and above, `DCGM_FP64_BLANK` 2^47 and above): those
//! read as absent too, never as a temperature.

use std::collections::{BTreeMap, HashMap};

use fleetop_proto::{ib, throttle};

use crate::ingest::promtext::Sample;
use crate::model::sample::{
    Gpm, GpuDesc, GpuError, GpuReading, IbPortDesc, IbReading, MigReading, NodeDesc, NodeSample, Xid,
};

/// Every series this module reads, with what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Field {
    GpuUtil,
    MemCopyUtil,
    FbUsed,
    FbFree,
    FbTotal,
    FbReserved,
    GpuTemp,
    MemoryTemp,
    PowerUsage,
    PowerLimit,
    Energy,
    SmClock,
    MemClock,
    MaxSmClock,
    MaxMemClock,
    SlowdownTemp,
    ShutdownTemp,
    Xid,
    PcieReplay,
    PcieTx,
    PcieRx,
    EccSbeVol,
    EccDbeVol,
    RetiredSbe,
    RetiredDbe,
    RemapCorrectable,
    RemapUncorrectable,
    RemapFailure,
    RemapPending,
    ThrottleReasons,
    SmActive,
    SmOccupancy,
    TensorActive,
    DramActive,
    // fleetop's own series (a fleetop agent's /metrics).
    /// `fleetop_gpu_throttle_reason{reason}`: one series per reason (0/1).
    ThrottleReason,
    /// `fleetop_gpu_error{error}`: the GPU did not answer.
    GpuErrorKind,
    /// `fleetop_gpu_nvlink_state{link}`: 0 inactive, 1 active, 2 sleep.
    NvlinkState,
    /// `fleetop_flag{kind}`: what the agent raised on its latest sample.
    AgentFlag,
    /// `fleetop_agent_info{version,backend,driver_version}`.
    AgentInfo,
    // InfiniBand, per port (node_exporter's names; fleetop's for the rest).
    IbState,
    IbPhysState,
    IbRate,
    IbTxBytes,
    IbRxBytes,
    IbTxPackets,
    IbRxPackets,
    /// A node_exporter error counter: its position in `ib::ERROR_COUNTERS`.
    IbError(u8),
    /// `fleetop_infiniband_port_errors_total{counter}`.
    IbOtherErrors,
}

/// How often `--prometheus` asks for a series: every refresh, or with the
/// inventory (a few times a minute), for what moves slowly or only counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    Fast,
    Slow,
}

/// Which query a series is asked in (`--prometheus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Per GPU (or MIG instance), reduced to the GPU's key labels.
    Gpu,
    /// Per InfiniBand port (`device`, `port`, `counter`).
    Port,
    /// Asked by its own query (several labels matter): not in a batch.
    Own,
}

use Field as F;
use Group::{Gpu as G, Own as O, Port as P};
use Pace::{Fast as Q, Slow as S};

/// Series name -> field, pace and query group. dcgm-exporter's names
/// (DCGM field names; a fleetop agent serves the same), then fleetop's.
const FIELDS: &[(&str, Field, Pace, Group)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", F::GpuUtil, Q, G),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", F::MemCopyUtil, Q, G),
    ("DCGM_FI_DEV_FB_USED", F::FbUsed, Q, G),
    ("DCGM_FI_DEV_FB_FREE", F::FbFree, S, G),
    ("DCGM_FI_DEV_FB_TOTAL", F::FbTotal, S, G),
    ("DCGM_FI_DEV_FB_RESERVED", F::FbReserved, S, G),
    ("DCGM_FI_DEV_GPU_TEMP", F::GpuTemp, Q, G),
    ("DCGM_FI_DEV_MEMORY_TEMP", F::MemoryTemp, Q, G),
    ("DCGM_FI_DEV_POWER_USAGE", F::PowerUsage, Q, G),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", F::PowerLimit, S, G),
    // The name a fleetop agent (and dcgm-exporter's dashboards) use.
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", F::PowerLimit, S, G),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", F::Energy, S, G),
    ("DCGM_FI_DEV_SM_CLOCK", F::SmClock, S, G),
    ("DCGM_FI_DEV_MEM_CLOCK", F::MemClock, S, G),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", F::MaxSmClock, S, G),
    ("DCGM_FI_DEV_MAX_MEM_CLOCK", F::MaxMemClock, S, G),
    ("DCGM_FI_DEV_SLOWDOWN_TEMP", F::SlowdownTemp, S, G),
    ("DCGM_FI_DEV_SHUTDOWN_TEMP", F::ShutdownTemp, S, G),
    ("DCGM_FI_DEV_XID_ERRORS", F::Xid, Q, G),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", F::PcieReplay, S, G),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", F::PcieTx, Q, G),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", F::PcieRx, Q, G),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", F::EccSbeVol, S, G),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", F::EccDbeVol, S, G),
    ("DCGM_FI_DEV_RETIRED_SBE", F::RetiredSbe, S, G),
    ("DCGM_FI_DEV_RETIRED_DBE", F::RetiredDbe, S, G),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", F::RemapCorrectable, S, G),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", F::RemapUncorrectable, S, G),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", F::RemapFailure, S, G),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", F::RemapPending, S, G),
    // The NVML clocks-event (throttle) bitmask; renamed in DCGM 3.3.
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", F::ThrottleReasons, Q, G),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", F::ThrottleReasons, Q, G),
    ("DCGM_FI_PROF_SM_ACTIVE", F::SmActive, Q, G),
    ("DCGM_FI_PROF_SM_OCCUPANCY", F::SmOccupancy, Q, G),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", F::TensorActive, Q, G),
    ("DCGM_FI_PROF_DRAM_ACTIVE", F::DramActive, Q, G),
    // Asked per GPU without its `reason` (max: 1 when any reason is set,
    // and the GPU has a throttle reading at all); the set reasons come
    // by their own query.
    ("fleetop_gpu_throttle_reason", F::ThrottleReason, Q, G),
    ("fleetop_gpu_pcie_transmit_bytes_per_second", F::PcieTx, Q, G),
    ("fleetop_gpu_pcie_receive_bytes_per_second", F::PcieRx, Q, G),
    ("fleetop_gpu_error", F::GpuErrorKind, Q, O),
    ("fleetop_gpu_nvlink_state", F::NvlinkState, Q, O),
    ("fleetop_flag", F::AgentFlag, Q, O),
    ("fleetop_agent_info", F::AgentInfo, S, O),
    ("node_infiniband_state_id", F::IbState, Q, P),
    ("node_infiniband_physical_state_id", F::IbPhysState, S, P),
    ("node_infiniband_rate_bytes_per_second", F::IbRate, S, P),
    ("node_infiniband_port_data_transmitted_bytes_total", F::IbTxBytes, S, P),
    ("node_infiniband_port_data_received_bytes_total", F::IbRxBytes, S, P),
    ("node_infiniband_port_packets_transmitted_total", F::IbTxPackets, S, P),
    ("node_infiniband_port_packets_received_total", F::IbRxPackets, S, P),
    ("node_infiniband_link_downed_total", F::IbError(2), S, P),
    ("node_infiniband_link_error_recovery_total", F::IbError(1), S, P),
    ("node_infiniband_port_errors_received_total", F::IbError(3), S, P),
    ("node_infiniband_port_discards_transmitted_total", F::IbError(6), S, P),
    (
        "node_infiniband_port_constraint_errors_received_total",
        F::IbError(8),
        S,
        P,
    ),
    (
        "node_infiniband_port_constraint_errors_transmitted_total",
        F::IbError(7),
        S,
        P,
    ),
    ("fleetop_infiniband_port_errors_total", F::IbOtherErrors, S, P),
];

/// The series names `--prometheus` asks in one batch: those of `group`
/// read at `pace`.
pub fn series_names(pace: Pace, group: Group) -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .filter(move |(_, _, p, g)| *p == pace && *g == group)
        .map(|(n, ..)| *n)
}

/// The InfiniBand error counters' series names (`--prometheus` reads
/// their recent past at start, for `ib_errors`).
pub fn ib_error_names() -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .filter(|(_, f, ..)| matches!(f, F::IbError(_) | F::IbOtherErrors))
        .map(|(n, ..)| *n)
}

fn field(name: &str) -> Option<Field> {
    FIELDS.iter().find(|(n, ..)| *n == name).map(|(_, f, ..)| *f)
}

/// Fields read every refresh (`--prometheus` keeps the rest from its
/// slower reads).
fn is_fast(f: Field) -> bool {
    FIELDS.iter().any(|(_, x, p, _)| *x == f && *p == Pace::Fast)
}

/// The labels the mapping reads, in a fixed order (`Labels` is indexed by it).
pub const KEYS: [&str; 21] = [
    "__name__",
    "Hostname",
    "hostname",
    "instance",
    "gpu",
    "UUID",
    "modelName",
    "pci_bus_id",
    "DCGM_FI_DRIVER_VERSION",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "reason",
    "link",
    "error",
    "kind",
    "device",
    "port",
    "counter",
    "version",
    "backend",
    "driver_version",
];

/// A series' labels that the mapping reads, borrowed from wherever the
/// series is (a parsed text line, a JSON answer): no map per series.
#[derive(Debug, Default, Clone, Copy)]
pub struct Labels<'a>(pub [Option<&'a str>; KEYS.len()]);

impl<'a> Labels<'a> {
    /// The position of label `k` in `KEYS`.
    pub fn key(k: &str) -> Option<usize> {
        KEYS.iter().position(|x| *x == k)
    }

    pub fn get(&self, k: &str) -> Option<&'a str> {
        Self::key(k).and_then(|i| self.0[i])
    }

    pub fn from_sample(s: &'a Sample) -> Labels<'a> {
        let mut l = Labels::default();
        for (k, v) in &s.labels {
            if let Some(i) = Labels::key(k) {
                l.0[i] = Some(v);
            }
        }
        l
    }

    /// The node a series belongs to: its `Hostname` label (dcgm-exporter's),
    /// `hostname` (some deployments relabel), else Prometheus' `instance`
    /// without its port.
    pub fn host(&self) -> Option<&'a str> {
        for l in [1, 2] {
            if let Some(h) = self.0[l].filter(|h| !h.is_empty()) {
                return Some(h);
            }
        }
        let inst = self.0[3].filter(|h| !h.is_empty())?;
        Some(strip_port(inst))
    }
}

/// The node a parsed sample belongs to (see `Labels::host`).
pub fn host_of(s: &Sample) -> Option<String> {
    Labels::from_sample(s).host().map(str::to_string)
}

const INT32_BLANK: f64 = 2_147_483_632.0; // 0x7ffffff0
const INT32_BLANK_END: f64 = 2_147_483_647.0; // 0x7fffffff
/// DCGM_FP64_BLANK (2^47); every DCGM_INT64_BLANK (near 2^63) is above it.
const FP64_BLANK: f64 = 140_737_488_355_328.0;

impl Field {
    /// DCGM keeps these as 64-bit integers: a value in the 32-bit blank
    /// range is a real count (energy in mJ passes 2^31 within hours).
    fn is_wide(self) -> bool {
        matches!(
            self,
            F::Energy | F::PcieReplay | F::PcieTx | F::PcieRx | F::EccSbeVol | F::EccDbeVol
        )
    }
}

/// The value, or `None` for a DCGM blank, NaN, infinity or a negative
/// number (no field read here can be negative).
fn real(f: Field, v: f64) -> Option<f64> {
    if !(0.0..FP64_BLANK).contains(&v) {
        return None;
    }
    if !f.is_wide() && (INT32_BLANK..=INT32_BLANK_END).contains(&v) {
        return None;
    }
    Some(v)
}

/// "gpu01:9400" -> "gpu01"; "[::1]:9400" -> "::1"; a bare IPv6 address stays.
fn strip_port(inst: &str) -> &str {
    if let Some(rest) = inst.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match inst.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => inst,
    }
}

/// One GPU's (or one MIG instance's) values: a short list, searched in
/// place (a GPU has a few dozen fields at most).
#[derive(Debug, Default, Clone)]
struct Acc {
    vals: Vec<(Field, f64)>,
}

impl Acc {
    fn set(&mut self, f: Field, v: f64) {
        let Some(v) = real(f, v) else { return };
        match self.vals.iter_mut().find(|(x, _)| *x == f) {
            Some(slot) => slot.1 = v,
            None => self.vals.push((f, v)),
        }
    }

    fn get(&self, f: Field) -> Option<f64> {
        self.vals.iter().find(|(x, _)| *x == f).map(|(_, v)| *v)
    }

    fn u32(&self, f: Field) -> Option<u32> {
        self.get(f).map(|v| v.round().min(f64::from(u32::MAX)) as u32)
    }

    fn u64(&self, f: Field) -> Option<u64> {
        self.get(f).map(|v| v.round() as u64)
    }

    fn mib(&self, f: Field) -> Option<u64> {
        self.u64(f).map(|m| m.saturating_mul(1 << 20))
    }

    /// DCGM's profiling ratios (0-1) as percent; all four or none, since
    /// the model's GPM figures are read together.
    fn gpm(&self) -> Option<Gpm> {
        let pct = |f| self.get(f).map(|r| (r * 100.0).clamp(0.0, 100.0));
        Some(Gpm {
            sm_active_pct: pct(F::SmActive)?,
            sm_occupancy_pct: pct(F::SmOccupancy)?,
            tensor_active_pct: pct(F::TensorActive)?,
            dram_bw_pct: pct(F::DramActive)?,
        })
    }

    /// Keeps what the slow reads give; the framebuffer total is fixed from
    /// this read's used + free, so the next fast reads (used only) keep it.
    fn keep_slow(&mut self) {
        if self.get(F::FbTotal).is_none()
            && let Some(t) = fb_total_mib(self)
        {
            self.set(F::FbTotal, t as f64);
        }
        self.vals
            .retain(|(f, _)| !is_fast(*f) && !matches!(f, F::FbFree | F::FbReserved));
    }
}

#[derive(Debug, Default, Clone)]
struct GpuAcc {
    uuid: String,
    model: String,
    pci_bus_id: String,
    gpu: Acc,
    /// By GPU instance id: (profile, values).
    mig: BTreeMap<u32, (String, Acc)>,
    /// Bits of the set throttle reasons (`fleetop_gpu_throttle_reason`).
    reasons: u64,
    /// Some reason series seen: the GPU has a throttle reading.
    reasons_seen: bool,
    /// `fleetop_gpu_error`'s kind.
    error: Option<String>,
    /// NVLink links reported inactive (`fleetop_gpu_nvlink_state` 0).
    links_inactive: Vec<u32>,
    /// The agent flags a link that went down (not one unused by design).
    nvlink_down: bool,
}

impl GpuAcc {
    fn keep_slow(&mut self) {
        self.gpu.keep_slow();
        for (_, m) in self.mig.values_mut() {
            m.keep_slow();
        }
        self.reasons = 0;
        self.reasons_seen = false;
        self.error = None;
        self.links_inactive.clear();
        self.nvlink_down = false;
    }
}

/// One InfiniBand port being put together.
#[derive(Debug, Default, Clone)]
struct PortAcc {
    state: Option<f64>,
    phys: Option<f64>,
    rate: Option<f64>,
    tx_bytes: Option<f64>,
    rx_bytes: Option<f64>,
    tx_packets: Option<f64>,
    rx_packets: Option<f64>,
    errors: [Option<f64>; ib::ERROR_COUNTERS.len()],
}

/// One node being put together from its series, in any order.
#[derive(Debug, Default, Clone)]
pub struct NodeAcc {
    hostname: Option<String>,
    driver: Option<String>,
    agent_version: Option<String>,
    gpus: BTreeMap<u32, GpuAcc>,
    /// By (device, port).
    ports: BTreeMap<(String, u32), PortAcc>,
    skipped: usize,
}

/// What one node's series say.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    pub desc: NodeDesc,
    pub sample: NodeSample,
    /// Series that named a known field but no GPU (`gpu` label missing or
    /// not a number): counted, so a strange exporter is noticed in the log.
    pub skipped: usize,
}

/// NVIDIA's InfiniBand state numbers (sysfs "4: ACTIVE"), as node_exporter serves them.
fn state_word(id: f64) -> Option<&'static str> {
    Some(match id as u8 {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => return None,
    })
}

fn phys_state_word(id: f64) -> Option<&'static str> {
    Some(match id as u8 {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "Phy Test",
        _ => return None,
    })
}

/// The throttle bit of a `reason` label (`unknown_0x…` for bits NVML adds later).
fn reason_bit(name: &str) -> Option<u64> {
    if let Some(hex) = name.strip_prefix("unknown_0x") {
        return u64::from_str_radix(hex, 16).ok();
    }
    (0..64)
        .map(|b| 1u64 << b)
        .find(|&b| throttle::names(b).first().is_some_and(|n| n == name))
}

impl NodeAcc {
    /// Adds one series (its name, the labels the mapping reads, its value).
    /// Names the mapping does not know are ignored.
    pub fn add(&mut self, name: &str, l: &Labels, value: f64) {
        if name.is_empty() {
            // The inventory (`--prometheus`): a GPU's descriptive labels.
            if let Some(idx) = l.get("gpu").and_then(|g| g.parse::<u32>().ok()) {
                self.describe(l);
                let g = self.gpus.entry(idx).or_default();
                fill_desc(g, l);
            }
            return;
        }
        let Some(f) = field(name) else { return };
        match f {
            F::AgentInfo => {
                self.describe(l);
                if let Some(v) = l.get("version").filter(|v| !v.is_empty()) {
                    self.agent_version = Some(v.to_string());
                }
                if self.driver.is_none() {
                    self.driver = l.get("driver_version").filter(|d| !d.is_empty()).map(str::to_string);
                }
                return;
            }
            F::IbState
            | F::IbPhysState
            | F::IbRate
            | F::IbTxBytes
            | F::IbRxBytes
            | F::IbTxPackets
            | F::IbRxPackets
            | F::IbError(_)
            | F::IbOtherErrors => {
                self.port(f, l, value);
                return;
            }
            _ => {}
        }
        let Some(idx) = l.get("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            // The agent's node-wide flags (stale) have no GPU: not a strange series.
            if f != F::AgentFlag {
                self.skipped += 1;
            }
            return;
        };
        self.describe(l);
        let g = self.gpus.entry(idx).or_default();
        fill_desc(g, l);
        match f {
            F::ThrottleReason => {
                if value.is_nan() {
                    return;
                }
                g.reasons_seen = true;
                if value > 0.0
                    && let Some(bit) = l.get("reason").and_then(reason_bit)
                {
                    g.reasons |= bit;
                }
                return;
            }
            F::GpuErrorKind => {
                if value > 0.0 {
                    g.error = Some(l.get("error").unwrap_or("error").to_string());
                }
                return;
            }
            F::NvlinkState => {
                if value == 0.0
                    && let Some(link) = l.get("link").and_then(|v| v.parse::<u32>().ok())
                    && !g.links_inactive.contains(&link)
                {
                    g.links_inactive.push(link);
                }
                return;
            }
            F::AgentFlag => {
                if value > 0.0 && l.get("kind") == Some("nvlink_down") {
                    g.nvlink_down = true;
                }
                return;
            }
            _ => {}
        }
        let gi = l
            .get("GPU_I_ID")
            .filter(|v| !v.is_empty())
            .and_then(|v| v.parse::<u32>().ok());
        match gi {
            // Memory and profiling figures are per instance in MIG mode;
            // the rest are the GPU's, repeated on each instance's series.
            Some(gi) => {
                let (profile, acc) = g.mig.entry(gi).or_default();
                if profile.is_empty() {
                    *profile = l.get("GPU_I_PROFILE").unwrap_or_default().to_string();
                }
                if is_per_instance(f) {
                    acc.set(f, value);
                } else {
                    g.gpu.set(f, value);
                }
            }
            None => g.gpu.set(f, value),
        }
    }

    /// The node's host name and driver, from the first series that gives them.
    fn describe(&mut self, l: &Labels) {
        if self.hostname.is_none() {
            self.hostname = [l.get("Hostname"), l.get("hostname")]
                .into_iter()
                .flatten()
                .find(|h| !h.is_empty())
                .map(str::to_string);
        }
        if self.driver.is_none() {
            self.driver = l
                .get("DCGM_FI_DRIVER_VERSION")
                .filter(|d| !d.is_empty())
                .map(str::to_string);
        }
    }

    fn port(&mut self, f: Field, l: &Labels, value: f64) {
        let (Some(dev), Some(port)) = (l.get("device"), l.get("port").and_then(|p| p.parse::<u32>().ok())) else {
            self.skipped += 1;
            return;
        };
        self.describe(l);
        // Counters and states are never negative, NaN or infinite.
        let v = (value.is_finite() && value >= 0.0).then_some(value);
        let p = self.ports.entry((dev.to_string(), port)).or_default();
        match f {
            F::IbState => p.state = v,
            F::IbPhysState => p.phys = v,
            F::IbRate => p.rate = v,
            F::IbTxBytes => p.tx_bytes = v,
            F::IbRxBytes => p.rx_bytes = v,
            F::IbTxPackets => p.tx_packets = v,
            F::IbRxPackets => p.rx_packets = v,
            F::IbError(i) => p.errors[usize::from(i)] = v,
            F::IbOtherErrors => {
                let i = l
                    .get("counter")
                    .and_then(|c| (0..ib::ERROR_COUNTERS.len()).find(|&i| ib::counter_name(i) == c));
                if let Some(i) = i {
                    p.errors[i] = v;
                }
            }
            _ => {}
        }
    }

    /// What the slower reads give, kept for the fast reads in between: the
    /// same accumulator minus every field read each refresh.
    pub fn keep_slow(&mut self) {
        for g in self.gpus.values_mut() {
            g.keep_slow();
        }
        for p in self.ports.values_mut() {
            p.state = None;
        }
    }

    /// The node's description and sample. `backend` names the source
    /// ("dcgm-exporter", "prometheus"); `name` is the node's name where no
    /// series gives a hostname; `interval_ms` is how often the source is read.
    pub fn finish(self, name: &str, backend: &str, interval_ms: i64, now_ms: i64) -> Mapped {
        let mut desc = NodeDesc {
            hostname: self.hostname.unwrap_or_else(|| name.to_string()),
            agent_version: self.agent_version.unwrap_or_else(|| backend.to_string()),
            backend: backend.to_string(),
            driver_version: self.driver,
            cuda_version: None,
            interval_ms: interval_ms.max(1),
            gpus: Vec::with_capacity(self.gpus.len()),
            ib_ports: Vec::with_capacity(self.ports.len()),
            gpu_note: None,
            instance: 1,
            ..Default::default()
        };
        if self.gpus.is_empty() {
            desc.gpu_note = Some(format!("no GPU series in the {backend} answer"));
        }
        let mut sample = NodeSample {
            seq: 0,
            time_ms: now_ms,
            gpus: Vec::with_capacity(self.gpus.len()),
            ..NodeSample::default()
        };
        for (idx, g) in self.gpus {
            let (d, r) = gpu(idx, g, now_ms);
            desc.gpus.push(d);
            sample.gpus.push(r);
        }
        for (k, ((device, port), p)) in self.ports.into_iter().enumerate() {
            desc.ib_ports.push(IbPortDesc {
                device,
                port,
                link_layer: String::new(),
            });
            let n = |v: Option<f64>| v.map_or(0, |v| v as u64);
            sample.ib_ports.push(IbReading {
                port: k as u32,
                state: p.state.and_then(state_word).map(str::to_string),
                phys_state: p.phys.and_then(phys_state_word).map(str::to_string),
                // B/s -> Gb/s, as sysfs gives it.
                rate_gbps: p.rate.map(|r| (r * 8.0 / 1e9).round() as u32).filter(|&r| r > 0),
                tx_bytes: n(p.tx_bytes),
                rx_bytes: n(p.rx_bytes),
                tx_packets: n(p.tx_packets),
                rx_packets: n(p.rx_packets),
                errors: p.errors.iter().map(|e| e.map(|v| v as u64)).collect(),
            });
        }
        Mapped {
            desc,
            sample,
            skipped: self.skipped,
        }
    }
}

/// The GPU's descriptive labels, from the first series that has them.
fn fill_desc(g: &mut GpuAcc, l: &Labels) {
    for (k, slot) in [
        ("UUID", &mut g.uuid),
        ("modelName", &mut g.model),
        ("pci_bus_id", &mut g.pci_bus_id),
    ] {
        if slot.is_empty()
            && let Some(v) = l.get(k)
        {
            *slot = v.to_string();
        }
    }
}

/// Maps one node's parsed series (`--dcgm-exporter`).
pub fn map_node<'a>(
    series: impl IntoIterator<Item = &'a Sample>,
    name: &str,
    backend: &str,
    interval_ms: i64,
    now_ms: i64,
) -> Mapped {
    let mut acc = NodeAcc::default();
    for s in series {
        acc.add(&s.name, &Labels::from_sample(s), s.value);
    }
    acc.finish(name, backend, interval_ms, now_ms)
}

fn is_per_instance(f: Field) -> bool {
    matches!(
        f,
        F::FbUsed
            | F::FbFree
            | F::FbTotal
            | F::FbReserved
            | F::SmActive
            | F::SmOccupancy
            | F::TensorActive
            | F::DramActive
    )
}

/// Framebuffer total: DCGM's FB_TOTAL, else used + free (+ reserved).
fn fb_total_mib(a: &Acc) -> Option<u64> {
    a.u64(F::FbTotal).or_else(|| {
        let used = a.u64(F::FbUsed)?;
        let free = a.u64(F::FbFree)?;
        Some(used + free + a.u64(F::FbReserved).unwrap_or(0))
    })
}

fn gpu_error(kind: &str) -> GpuError {
    match kind {
        "gpu_lost" => GpuError::Lost,
        // The series names the kind only, not the call nor for how long.
        "nvml_stuck" => GpuError::Stuck {
            text: "nvml_stuck".into(),
            for_ms: 0,
        },
        other => GpuError::Other(other.to_string()),
    }
}

fn gpu(index: u32, g: GpuAcc, now_ms: i64) -> (GpuDesc, GpuReading) {
    let a = &g.gpu;
    let mig: Vec<MigReading> = g
        .mig
        .iter()
        .map(|(&gi, (profile, m))| MigReading {
            gpu_instance_id: gi,
            profile: profile.clone(),
            uuid: String::new(),
            mem_used_bytes: m.mib(F::FbUsed),
            mem_total_bytes: fb_total_mib(m).map(|t| t << 20),
            gpm: m.gpm(),
        })
        .collect();
    // In MIG mode the GPU's memory is its instances' sum, where only they give it.
    let sum = |f: fn(&MigReading) -> Option<u64>| -> Option<u64> {
        if mig.is_empty() {
            return None;
        }
        mig.iter().map(f).sum()
    };
    let mem_total_bytes = fb_total_mib(a).map(|t| t << 20).or_else(|| sum(|m| m.mem_total_bytes));
    let mem_used_bytes = a.mib(F::FbUsed).or_else(|| sum(|m| m.mem_used_bytes));
    let retired = match (a.u32(F::RetiredSbe), a.u32(F::RetiredDbe)) {
        (None, None) => None,
        (s, d) => Some(s.unwrap_or(0).saturating_add(d.unwrap_or(0))),
    };
    // DCGM's bitmask where exported, else fleetop's reasons one by one.
    let throttle_mask = a.u64(F::ThrottleReasons).or(g.reasons_seen.then_some(g.reasons));
    let desc = GpuDesc {
        index,
        uuid: g.uuid,
        model: g.model,
        pci_bus_id: g.pci_bus_id,
        mem_total_bytes,
        power_limit_w: a.get(F::PowerLimit),
        max_sm_clock_mhz: a.u32(F::MaxSmClock),
        max_mem_clock_mhz: a.u32(F::MaxMemClock),
        slowdown_temp_c: a.u32(F::SlowdownTemp),
        shutdown_temp_c: a.u32(F::ShutdownTemp),
        // One series per link is too many to ask each refresh: the links
        // are named by their NVML id where one is down (below).
        nvlinks: Vec::new(),
        ..Default::default()
    };
    // DCGM's XID field holds the last XID seen (0: none); `Xids` keeps
    // it from being reported again on every read.
    let xids: Vec<Xid> = a
        .u32(F::Xid)
        .filter(|&x| x > 0)
        .map(|xid| Xid { xid, time_ms: now_ms })
        .into_iter()
        .collect();
    if let Some(kind) = &g.error {
        // A GPU that did not answer has no readings (its XIDs still count),
        // whatever an earlier read left.
        let reading = GpuReading {
            index,
            error: Some(gpu_error(kind)),
            xids,
            ..GpuReading::default()
        };
        return (desc, reading);
    }
    // Only links the agent says went down (it knows which were unused by
    // design); with no link list, a link's position is its NVML id.
    let mut nvlinks_down: Vec<usize> = if g.nvlink_down {
        g.links_inactive.iter().map(|&l| l as usize).collect()
    } else {
        Vec::new()
    };
    nvlinks_down.sort_unstable();
    let reading = GpuReading {
        index,
        error: None,
        util_pct: a.u32(F::GpuUtil),
        mem_util_pct: a.u32(F::MemCopyUtil),
        mem_used_bytes,
        temp_c: a.u32(F::GpuTemp),
        hbm_temp_c: a.u32(F::MemoryTemp),
        power_w: a.get(F::PowerUsage),
        power_limit_w: a.get(F::PowerLimit),
        energy_mj: a.u64(F::Energy),
        sm_clock_mhz: a.u32(F::SmClock),
        mem_clock_mhz: a.u32(F::MemClock),
        throttle_mask,
        pcie_tx_bytes_per_s: a.get(F::PcieTx),
        pcie_rx_bytes_per_s: a.get(F::PcieRx),
        pcie_replay_count: a.u64(F::PcieReplay),
        ecc_corrected_volatile: a.u64(F::EccSbeVol),
        ecc_uncorrected_volatile: a.u64(F::EccDbeVol),
        retired_pages: retired,
        remapped_rows_correctable: a.u32(F::RemapCorrectable),
        remapped_rows_uncorrectable: a.u32(F::RemapUncorrectable),
        remap_pending: a.get(F::RemapPending).map(|v| v > 0.0),
        remap_failed: a.get(F::RemapFailure).map(|v| v > 0.0),
        xids,
        nvlinks_down,
        nvlink_tx_kib: Vec::new(),
        nvlink_rx_kib: Vec::new(),
        processes: Vec::new(),
        gpm: a.gpm(),
        mig,
        // dcgm-exporter's default counters carry no PCIe link, fabric or
        // persistence state.
        ..Default::default()
    };
    (desc, reading)
}

/// The last XID each GPU reported, so one XID is one event, not one per read.
#[derive(Debug, Default)]
pub struct Xids {
    last: HashMap<u32, u32>,
}

impl Xids {
    /// Drops from `sample` the XIDs already reported; forgets a GPU whose
    /// XID field went back to 0.
    pub fn dedup(&mut self, sample: &mut NodeSample) {
        for g in &mut sample.gpus {
            match g.xids.first().map(|x| x.xid) {
                Some(x) if self.last.get(&g.index) == Some(&x) => g.xids.clear(),
                Some(x) => {
                    self.last.insert(g.index, x);
                }
                None => {
                    self.last.remove(&g.index);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::promtext::{Limits, parse};

    fn map(text: &str) -> Mapped {
        let e = parse(text, &Limits::default()).expect("a value");
        map_node(&e.samples, "fallback", "dcgm-exporter", 5000, 1_000)
    }

    const L0: &str = r#"gpu="0",UUID="GPU-aaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu07",DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod="""#;

    #[test]
    fn a_gpu_maps_with_units() {
        let m = map(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{{L0}}} 87\n\
             DCGM_FI_DEV_MEM_COPY_UTIL{{{L0}}} 40\n\
             DCGM_FI_DEV_FB_USED{{{L0}}} 1024\n\
             DCGM_FI_DEV_FB_FREE{{{L0}}} 80000\n\
             DCGM_FI_DEV_FB_RESERVED{{{L0}}} 535\n\
             DCGM_FI_DEV_GPU_TEMP{{{L0}}} 61\n\
             DCGM_FI_DEV_POWER_USAGE{{{L0}}} 412.5\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 2147483640\n\
             DCGM_FI_DEV_SM_CLOCK{{{L0}}} 1980\n\
             DCGM_FI_DEV_XID_ERRORS{{{L0}}} 79\n\
             DCGM_FI_PROF_SM_ACTIVE{{{L0}}} 0.5\n\
             DCGM_FI_PROF_SM_OCCUPANCY{{{L0}}} 0.25\n\
             DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{L0}}} 0.1\n\
             DCGM_FI_PROF_DRAM_ACTIVE{{{L0}}} 0.75\n"
        ));
        assert_eq!(m.desc.hostname, "gpu07");
        assert_eq!(m.desc.driver_version.as_deref(), Some("550.54.15"));
        let d = &m.desc.gpus[0];
        assert_eq!(
            (d.uuid.as_str(), d.model.as_str()),
            ("GPU-aaa", "NVIDIA H100 80GB HBM3")
        );
        assert_eq!(d.mem_total_bytes, Some((1024 + 80000 + 535) << 20));
        let g = &m.sample.gpus[0];
        assert_eq!(g.util_pct, Some(87));
        assert_eq!(g.mem_util_pct, Some(40));
        assert_eq!(g.mem_used_bytes, Some(1024 << 20));
        assert_eq!(g.power_w, Some(412.5));
        // A 64-bit counter in the 32-bit blank range is a real count.
        assert_eq!(g.energy_mj, Some(2_147_483_640));
        assert_eq!(
            g.xids,
            vec![Xid {
                xid: 79,
                time_ms: 1_000
            }]
        );
        let gpm = g.gpm.expect("a value");
        assert_eq!((gpm.sm_active_pct, gpm.dram_bw_pct), (50.0, 75.0));
        // What dcgm-exporter did not give is absent, never 0.
        assert_eq!(g.hbm_temp_c, None);
        assert_eq!(g.mem_clock_mhz, None);
        assert_eq!(g.throttle_mask, None);
        assert_eq!(g.ecc_uncorrected_volatile, None);
        assert!(m.sample.host.is_none());
    }

    #[test]
    fn blank_sentinels_read_as_absent() {
        let m = map(&format!(
            "DCGM_FI_DEV_MEMORY_TEMP{{{L0}}} 9223372036854775794\n\
             DCGM_FI_DEV_GPU_TEMP{{{L0}}} 2147483632\n\
             DCGM_FI_DEV_SM_CLOCK{{{L0}}} 2147483646\n\
             DCGM_FI_DEV_POWER_USAGE{{{L0}}} 140737488355328\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 9223372036854775792\n\
             DCGM_FI_DEV_GPU_UTIL{{{L0}}} NaN\n\
             DCGM_FI_DEV_MEM_CLOCK{{{L0}}} 1593\n"
        ));
        let g = &m.sample.gpus[0];
        assert_eq!(g.hbm_temp_c, None);
        assert_eq!(g.temp_c, None);
        assert_eq!(g.sm_clock_mhz, None);
        assert_eq!(g.power_w, None);
        assert_eq!(g.energy_mj, None);
        assert_eq!(g.util_pct, None);
        assert_eq!(g.mem_clock_mhz, Some(1593));
    }

    #[test]
    fn mig_instances_become_per_instance_readings() {
        let mig = |gi: u32, prof: &str| {
            format!(
                r#"gpu="1",UUID="GPU-bbb",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu07",GPU_I_PROFILE="{prof}",GPU_I_ID="{gi}""#
            )
        };
        let (a, b) = (mig(1, "3g.40gb"), mig(2, "1g.10gb"));
        let m = map(&format!(
            "DCGM_FI_DEV_FB_USED{{{a}}} 100\nDCGM_FI_DEV_FB_FREE{{{a}}} 40000\n\
             DCGM_FI_DEV_FB_USED{{{b}}} 50\nDCGM_FI_DEV_FB_FREE{{{b}}} 9000\n\
             DCGM_FI_DEV_GPU_TEMP{{{a}}} 44\nDCGM_FI_DEV_GPU_TEMP{{{b}}} 44\n\
             DCGM_FI_DEV_GPU_UTIL{{{L0}}} 3\n"
        ));
        assert_eq!(m.sample.gpus.len(), 2);
        let g = m.sample.gpu(1).expect("a value");
        assert_eq!(g.mig.len(), 2);
        assert_eq!(g.mig[0].gpu_instance_id, 1);
        assert_eq!(g.mig[0].profile, "3g.40gb");
        assert_eq!(g.mig[0].mem_used_bytes, Some(100 << 20));
        assert_eq!(g.mig[1].mem_total_bytes, Some(9050 << 20));
        assert_eq!(g.mem_used_bytes, Some(150 << 20));
        assert_eq!(g.temp_c, Some(44));
        assert_eq!(g.util_pct, None);
        assert_eq!(m.desc.gpu(1).expect("a value").mem_total_bytes, Some(49150 << 20));
        // Two models on one node.
        assert_eq!(m.desc.gpu(0).expect("a value").model, "NVIDIA H100 80GB HBM3");
        assert_eq!(m.desc.gpu(1).expect("a value").model, "NVIDIA A100-SXM4-80GB");
        assert!(m.sample.gpu(0).expect("a value").mig.is_empty());
    }

    #[test]
    fn hostname_label_variants() {
        let e = parse(
            "a{Hostname=\"n1\",hostname=\"x\"} 1\nb{hostname=\"n2\"} 1\nc{instance=\"n3:9400\"} 1\n\
             d{instance=\"[::1]:9400\"} 1\ne{instance=\"n5\"} 1\nf{gpu=\"0\"} 1\n",
            &Limits::default(),
        )
        .expect("a value");
        let hosts: Vec<Option<String>> = e.samples.iter().map(host_of).collect();
        let want = [Some("n1"), Some("n2"), Some("n3"), Some("::1"), Some("n5"), None];
        assert_eq!(hosts, want.map(|h| h.map(str::to_string)));
        let m = map("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",hostname=\"lower\"} 30\n");
        assert_eq!(m.desc.hostname, "lower");
        let m = map("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 30\nDCGM_FI_DEV_GPU_TEMP{UUID=\"x\"} 30\n");
        assert_eq!(m.desc.hostname, "fallback");
        assert_eq!(m.skipped, 1);
    }

    #[test]
    fn pod_labels_do_not_split_a_gpu() {
        let m = map("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=\"train-1\",namespace=\"ml\"} 90\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",pod=\"train-1\",namespace=\"ml\"} 50\n");
        assert_eq!(m.sample.gpus.len(), 1);
        assert_eq!(m.sample.gpus[0].util_pct, Some(90));
    }

    #[test]
    fn an_xid_is_reported_once() {
        let mut x = Xids::default();
        let text = "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 48\n";
        let mut first = map(text).sample;
        x.dedup(&mut first);
        assert_eq!(first.gpus[0].xids.len(), 1);
        let mut again = map(text).sample;
        x.dedup(&mut again);
        assert!(again.gpus[0].xids.is_empty());
        let mut cleared = map("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 0\n").sample;
        x.dedup(&mut cleared);
        let mut back = map(text).sample;
        x.dedup(&mut back);
        assert_eq!(back.gpus[0].xids.len(), 1);
    }

    /// A fleetop agent's own series, as its /metrics writes them.
    const AGENT: &str = r#"fleetop_agent_info{Hostname="n7",version="0.9.0",backend="sim:throttle",driver_version="550.54.15"} 1
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="H100",Hostname="n7"} 81
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="H100",Hostname="n7"} 0
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="gpu_idle"} 0
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="sw_power_cap"} 1
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="hw_thermal_slowdown"} 1
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="unknown_0x200"} 1
fleetop_gpu_pcie_transmit_bytes_per_second{gpu="0",UUID="GPU-a",Hostname="n7"} 2000
fleetop_gpu_nvlink_state{gpu="0",UUID="GPU-a",Hostname="n7",link="0"} 1
fleetop_gpu_nvlink_state{gpu="0",UUID="GPU-a",Hostname="n7",link="3"} 0
fleetop_flag{gpu="0",UUID="GPU-a",Hostname="n7",kind="nvlink_down",severity="crit"} 1
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-b",device="nvidia1",modelName="H100",Hostname="n7"} 79
fleetop_gpu_error{gpu="1",UUID="GPU-b",device="nvidia1",modelName="H100",Hostname="n7",error="gpu_lost"} 1
fleetop_gpu_nvlink_state{gpu="1",UUID="GPU-b",Hostname="n7",link="5"} 0
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",Hostname="n7"} 40
fleetop_gpu_nvlink_state{gpu="2",UUID="GPU-c",Hostname="n7",link="2"} 0
node_infiniband_state_id{device="mlx5_0",port="1",Hostname="n7"} 1
node_infiniband_physical_state_id{device="mlx5_0",port="1",Hostname="n7"} 3
node_infiniband_rate_bytes_per_second{device="mlx5_0",port="1",Hostname="n7"} 5e+10
node_infiniband_port_data_transmitted_bytes_total{device="mlx5_0",port="1",Hostname="n7"} 4096
node_infiniband_link_downed_total{device="mlx5_0",port="1",Hostname="n7"} 3
fleetop_infiniband_port_errors_total{device="mlx5_0",port="1",Hostname="n7",counter="symbol_error"} 12
fleetop_infiniband_port_errors_total{device="mlx5_0",port="1",Hostname="n7",counter="local_ack_timeout_err"} 7
node_infiniband_state_id{device="mlx5_1",port="1",Hostname="n7"} 4
fleetop_flag{Hostname="n7",kind="stale",severity="warn"} 1
"#;

    #[test]
    fn a_fleetop_agents_own_series_map_to_the_fields_the_flags_need() {
        let m = map(AGENT);
        assert_eq!(m.skipped, 0);
        assert_eq!(m.desc.agent_version, "0.9.0");
        assert_eq!(m.desc.backend, "dcgm-exporter");
        assert_eq!(m.desc.driver_version.as_deref(), Some("550.54.15"));
        let g0 = m.sample.gpu(0).expect("gpu 0");
        // One series per reason, back into NVML's bitmask (unknown bits too).
        assert_eq!(
            g0.throttle_mask,
            Some(throttle::SW_POWER_CAP | throttle::HW_THERMAL_SLOWDOWN | 0x200)
        );
        assert_eq!(g0.pcie_tx_bytes_per_s, Some(2000.0));
        assert_eq!(g0.pcie_rx_bytes_per_s, None);
        // The link the agent flags down, by its NVML id.
        assert_eq!(g0.nvlinks_down, vec![3]);
        assert_eq!(g0.temp_c, Some(81));
        // A lost GPU: the error, no readings, its XID still counted.
        let g1 = m.sample.gpu(1).expect("gpu 1");
        assert_eq!(g1.error, Some(GpuError::Lost));
        assert_eq!(g1.xids.len(), 1);
        assert!(g1.nvlinks_down.is_empty());
        assert_eq!(m.desc.gpu(1).expect("gpu 1").uuid, "GPU-b");
        // Inactive but not flagged (unused by design): not down; no reason
        // series at all: no throttle reading.
        let g2 = m.sample.gpu(2).expect("gpu 2");
        assert!(g2.nvlinks_down.is_empty());
        assert_eq!(g2.throttle_mask, None);
        // InfiniBand ports, by (device, port).
        let names: Vec<String> = (0..2).map(|k| m.desc.ib_port_name(k)).collect();
        assert_eq!(names, ["mlx5_0/1", "mlx5_1/1"]);
        let p = &m.sample.ib_ports[0];
        assert!(p.is_down());
        assert_eq!(p.state.as_deref(), Some("DOWN"));
        assert_eq!(p.phys_state.as_deref(), Some("Disabled"));
        assert_eq!(p.rate_gbps, Some(400));
        assert_eq!(p.tx_bytes, 4096);
        let err = |name: &str| {
            p.errors[(0..ib::ERROR_COUNTERS.len())
                .find(|&i| ib::counter_name(i) == name)
                .expect("a counter")]
        };
        assert_eq!(err("link_downed"), Some(3));
        assert_eq!(err("symbol_error"), Some(12));
        assert_eq!(err("local_ack_timeout_err"), Some(7));
        assert_eq!(err("port_rcv_errors"), None);
        assert!(!m.sample.ib_ports[1].is_down());
        assert_eq!(m.sample.ib_ports[1].rate_gbps, None);
    }

    #[test]
    fn a_fast_read_keeps_the_slow_fields_and_not_the_fast_ones() {
        let e = parse(
            &format!(
                "DCGM_FI_DEV_FB_USED{{{L0}}} 1000\nDCGM_FI_DEV_FB_FREE{{{L0}}} 9000\n\
                 DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 5000\nDCGM_FI_DEV_GPU_TEMP{{{L0}}} 50\n\
                 node_infiniband_state_id{{device=\"mlx5_0\",port=\"1\",Hostname=\"gpu07\"}} 1\n\
                 node_infiniband_rate_bytes_per_second{{device=\"mlx5_0\",port=\"1\",Hostname=\"gpu07\"}} 5e10\n"
            ),
            &Limits::default(),
        )
        .expect("a value");
        let mut acc = NodeAcc::default();
        for s in &e.samples {
            acc.add(&s.name, &Labels::from_sample(s), s.value);
        }
        let full = acc.clone().finish("x", "prometheus", 5000, 1);
        acc.keep_slow();
        let mut fast = acc.clone();
        let l = Labels::from_sample(&e.samples[0]);
        fast.add("DCGM_FI_DEV_FB_USED", &l, 3000.0);
        let fast = fast.finish("x", "prometheus", 5000, 2);
        // The description does not move (the total was fixed at the slow read).
        assert_eq!(fast.desc, full.desc);
        let g = &fast.sample.gpus[0];
        assert_eq!(g.mem_used_bytes, Some(3000 << 20));
        assert_eq!(g.energy_mj, Some(5000));
        // A fast field the fast read did not bring is absent, not the old value.
        assert_eq!(g.temp_c, None);
        assert_eq!(fast.sample.ib_ports[0].state, None);
        assert_eq!(fast.sample.ib_ports[0].rate_gbps, Some(400));
    }
}
