//! The series this reader knows: dcgm-exporter's field names and a fleetop
//! agent's, what each means and how often it is asked (`FIELDS`), the
//! labels read from each series (`KEYS`, `Labels`), and DCGM's "blank"
//! sentinels, which read as absent.

use crate::ingest::promtext::Sample;

/// Every series this module reads, with what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Field {
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
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE`: the share of time the graphics
    /// engine was busy (the profiling module's utilization), per GPU or MIG
    /// instance.
    GrActive,
    /// Any other `DCGM_FI_*` series with a `gpu` label: not read, but it
    /// says the GPU is there (an exporter with its own counters file).
    OtherDcgm,
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
pub(super) const FIELDS: &[(&str, Field, Pace, Group)] = &[
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
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", F::GrActive, Q, G),
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

/// The field of series `name`; any `DCGM_FI_*` name not in `FIELDS` is
/// `OtherDcgm`.
pub(super) fn field(name: &str) -> Option<Field> {
    FIELDS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(_, f, ..)| *f)
        .or_else(|| name.starts_with("DCGM_FI_").then_some(F::OtherDcgm))
}

/// Fields read every refresh (`--prometheus` keeps the rest from its
/// slower reads).
pub(super) fn is_fast(f: Field) -> bool {
    FIELDS.iter().any(|(_, x, p, _)| *x == f && *p == Pace::Fast)
}

/// The labels the mapping reads, in a fixed order (`Labels` is indexed by it).
pub const KEYS: [&str; 24] = [
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
    // dcgm-exporter's Kubernetes mapping (the GPU Operator turns it on).
    "pod",
    "namespace",
    "container",
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

pub(super) const INT32_BLANK: f64 = 2_147_483_632.0; // 0x7ffffff0
pub(super) const INT32_BLANK_END: f64 = 2_147_483_647.0; // 0x7fffffff
/// DCGM_FP64_BLANK (2^47); every DCGM_INT64_BLANK (near 2^63) is above it.
pub(super) const FP64_BLANK: f64 = 140_737_488_355_328.0;

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
pub(super) fn real(f: Field, v: f64) -> Option<f64> {
    if !(0.0..FP64_BLANK).contains(&v) {
        return None;
    }
    if !f.is_wide() && (INT32_BLANK..=INT32_BLANK_END).contains(&v) {
        return None;
    }
    Some(v)
}

/// "gpu01:9400" -> "gpu01"; "[::1]:9400" -> "::1"; a bare IPv6 address stays.
pub(super) fn strip_port(inst: &str) -> &str {
    if let Some(rest) = inst.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match inst.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => inst,
    }
}
