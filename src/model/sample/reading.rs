//! What an agent reads every tick: the host, each GPU, each port
//! (`NodeSample`); absent is `None`.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::by_index;
use super::desc::{GpuDesc, NodeDesc, PcieLink};

/// One sample of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// The agent's sequence number (with `NodeDesc::instance`, names the sample).
    pub seq: u64,
    /// When it was taken, on the console's clock.
    pub time_ms: i64,
    pub host: Option<HostReading>,
    pub gpus: Vec<GpuReading>,
    pub ib_ports: Vec<IbReading>,
    /// NVSwitch errors since the previous sample (kernel log). Not in
    /// recordings (schema 2 predates them).
    #[serde(skip)]
    pub sxids: Vec<Sxid>,
}

/// An NVSwitch error (SXid) from the kernel log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sxid {
    pub sxid: u32,
    /// Console time.
    pub time_ms: i64,
    pub switch_pci: String,
    pub fatal: bool,
    pub text: String,
}

impl NodeSample {
    pub fn gpu(&self, index: u32) -> Option<&GpuReading> {
        by_index(&self.gpus, index, |g| g.index)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReading {
    #[serde(with = "crate::model::scaled::deci")]
    pub cpu_pct: f64,
    pub mem_used_bytes: u64,
    pub mem_total_bytes: u64,
    #[serde(with = "crate::model::scaled::centi")]
    pub load1: f64,
    pub uptime_s: u64,
}

/// Why a GPU gave no readings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GpuError {
    /// It does not answer: fallen off the bus.
    Lost,
    /// An NVML call on it has not returned (the agent's "nvml_stuck: <call>:
    /// no answer for N ms", kept whole in `text`); the agent serves the
    /// other GPUs meanwhile. `for_ms` is N.
    Stuck { text: String, for_ms: u64 },
    /// Anything else the agent reported, in its words.
    Other(String),
}

impl GpuError {
    /// The agent's word for it ("gpu_lost", ...).
    pub fn name(&self) -> &str {
        match self {
            GpuError::Lost => "gpu_lost",
            GpuError::Stuck { text, .. } => text,
            GpuError::Other(s) => s,
        }
    }
}

/// One GPU's readings in one sample. When `error` is set, every reading is
/// `None`: the agent could not take them. Without an error, a single
/// reading the GPU did not give (NOT_SUPPORTED) is `None` on its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    pub index: u32,
    pub error: Option<GpuError>,
    pub util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub temp_c: Option<u32>,
    pub hbm_temp_c: Option<u32>,
    #[serde(with = "crate::model::scaled::milli::opt")]
    pub power_w: Option<f64>,
    #[serde(with = "crate::model::scaled::milli::opt")]
    pub power_limit_w: Option<f64>,
    /// Energy since the driver loaded, mJ (a counter).
    pub energy_mj: Option<u64>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    /// NVML's clocks-event (throttle) reason bitmask, raw.
    pub throttle_mask: Option<u64>,
    #[serde(with = "crate::model::scaled::kilo::opt")]
    pub pcie_tx_bytes_per_s: Option<f64>,
    #[serde(with = "crate::model::scaled::kilo::opt")]
    pub pcie_rx_bytes_per_s: Option<f64>,
    pub pcie_replay_count: Option<u64>,
    pub ecc_corrected_volatile: Option<u64>,
    pub ecc_uncorrected_volatile: Option<u64>,
    pub retired_pages: Option<u32>,
    /// Rows remapped for correctable / uncorrectable errors (counts).
    pub remapped_rows_correctable: Option<u32>,
    pub remapped_rows_uncorrectable: Option<u32>,
    /// A remap waits for a GPU reset.
    pub remap_pending: Option<bool>,
    /// A remap failed (the GPU needs replacing).
    pub remap_failed: Option<bool>,
    /// XIDs reported since the previous sample.
    pub xids: Vec<Xid>,
    /// Positions (in `GpuDesc::nvlinks`) of the links that are down.
    pub nvlinks_down: Vec<usize>,
    /// Per-link NVLink data counters (KiB), in the order of
    /// `GpuDesc::nvlinks`; empty in the samples that do not carry them,
    /// and in the store's last sample of a node (they move to the base of
    /// its rates).
    pub nvlink_tx_kib: Vec<u64>,
    pub nvlink_rx_kib: Vec<u64>,
    /// Shared with the stream's previous sample where they did not change
    /// (`ingest::decode`): a long job's list, every second, is one count
    /// taken and given back rather than a list built and freed.
    pub processes: Arc<[GpuProcess]>,
    /// NVML GPM metrics (Hopper and later); `None` without GPM, never 0.
    pub gpm: Option<Gpm>,
    /// A GPU in MIG mode: its instances.
    pub mig: Vec<MigReading>,
    /// The PCIe link as trained now. This and the two below are not in
    /// recordings (schema 2 predates them).
    #[serde(skip)]
    pub pcie_link: Option<PcieLink>,
    #[serde(skip)]
    pub fabric: Option<Fabric>,
    #[serde(skip)]
    pub persistence: Option<bool>,
    /// The Kubernetes containers holding this GPU or one of its MIG
    /// instances (the kubelet's PodResources API, through the agent);
    /// sorted, empty off Kubernetes. Not recorded (schema 2 predates it).
    #[serde(skip)]
    pub pods: Vec<PodRef>,
    /// The link states were not read (AMD's XGMI link status failed):
    /// `nvlinks_down` then says nothing, and no link is known up or down.
    /// This and the AMD readings below are not recorded (schema 2 predates
    /// them).
    #[serde(skip)]
    pub links_unknown: bool,
    /// AMD's edge sensor (`None` where not read: MI300X has none). On AMD
    /// `temp_c` is the junction (hotspot) and `hbm_temp_c` the hottest HBM.
    #[serde(skip)]
    pub edge_temp_c: Option<u32>,
    /// ECC counts per RAS block (AMD SMI), every block with ECC on, in
    /// AMD's order; their sums are the `ecc_*_volatile` above.
    #[serde(skip)]
    pub ras: Vec<RasCount>,
    /// AMD's XGMI error status: 0 no errors, 1 one, 2 several.
    #[serde(skip)]
    pub xgmi_error_status: Option<u32>,
    /// Events the vendor's library reported since the previous sample
    /// (AMD SMI: a reset, a VM fault, a thermal throttle), like `xids`.
    #[serde(skip)]
    pub events: Vec<GpuEvent>,
    /// The throttle reasons in the vendor's own words, every one active now
    /// (AMD: "socket_thrm", "ppt_pwr", "TEMP_HOTSPOT", ...);
    /// `throttle_mask` holds the NVML bits they map to.
    #[serde(skip)]
    pub throttle_detail: Vec<Cow<'static, str>>,
    /// Of `retired_pages`, those waiting for a GPU reset to be retired
    /// (AMD's pending bad pages); `None` where the agent reads row
    /// remapping instead (NVIDIA's `remap_pending`).
    #[serde(skip)]
    pub retired_pages_pending: Option<u32>,
}

/// One RAS block's ECC counters, since the driver loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RasCount {
    /// AMD SMI's block name: "UMC", "SDMA", "GFX", "XGMI_WAFL", ...
    pub block: Cow<'static, str>,
    pub correctable: u64,
    pub uncorrectable: u64,
    /// Poisoned data, consumed later.
    pub deferred: u64,
}

/// An event a GPU's library reported (AMD SMI's event notification).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuEvent {
    /// AMD's event name, lower case: "gpu_pre_reset", "gpu_post_reset",
    /// "thermal_throttle", "vmfault", "event_<n>".
    pub kind: Cow<'static, str>,
    /// When the agent read it, on the console's clock.
    pub time_ms: i64,
    /// The library's message, printable, at most 200 characters.
    pub text: String,
}

/// A Kubernetes container that holds a GPU, or a MIG instance of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodRef {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// The MIG instance it holds (its UUID); `None`: the whole GPU, or a
    /// replica of a shared one.
    pub mig_uuid: Option<String>,
}

impl PodRef {
    /// A pod as a source names it (an agent's stream, dcgm-exporter's
    /// labels), made printable and cut to Kubernetes' own limits on the
    /// names: they reach the screen. An empty `mig_uuid` is the whole GPU.
    pub fn printable(namespace: &str, pod: &str, container: &str, mig_uuid: &str) -> PodRef {
        use fleetop_proto::input::printable;
        PodRef {
            namespace: printable(namespace, 63),
            pod: printable(pod, 253),
            container: printable(container, 63),
            mig_uuid: (!mig_uuid.is_empty()).then(|| printable(mig_uuid, 64)),
        }
    }

    /// "namespace/pod", as kubectl names a pod.
    pub fn name(&self) -> String {
        format!("{}/{}", self.namespace, self.pod)
    }
}

impl GpuReading {
    /// The pods holding this GPU ("namespace/pod"), each once, in order.
    pub fn pod_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pods.iter().map(PodRef::name).collect();
        v.dedup();
        v
    }
}

/// One MIG instance of a GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigReading {
    pub gpu_instance_id: u32,
    /// "3g.40gb"
    pub profile: String,
    pub uuid: String,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    /// This instance's GPM metrics; `None` without GPM.
    pub gpm: Option<Gpm>,
    /// Its graphics engine's busy share, where a dcgm-exporter gives it per
    /// instance (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`); NVML gives none. Not in
    /// the positional (recorded) form, which predates it.
    #[serde(skip)]
    pub util_pct: Option<u32>,
}

/// What share of the GPU the work really used, percent of the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpm {
    /// SMs with at least one warp assigned.
    #[serde(with = "crate::model::scaled::centi")]
    pub sm_active_pct: f64,
    #[serde(with = "crate::model::scaled::centi")]
    pub sm_occupancy_pct: f64,
    #[serde(with = "crate::model::scaled::centi")]
    pub tensor_active_pct: f64,
    #[serde(with = "crate::model::scaled::centi")]
    pub dram_bw_pct: f64,
}

impl GpuReading {
    pub fn is_lost(&self) -> bool {
        self.error == Some(GpuError::Lost)
    }

    /// Whether the NVLink (AMD: XGMI) link at position `pos` is up (`None`
    /// without a reading, or where the link states were not read).
    pub fn nvlink_up(&self, pos: usize) -> Option<bool> {
        (self.error.is_none() && !self.links_unknown).then(|| !self.nvlinks_down.contains(&pos))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xid {
    pub xid: u32,
    /// Console time.
    pub time_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_mem_bytes: u64,
    /// The Slurm job whose cgroup it runs in.
    pub job_id: Option<u64>,
    /// Who runs it on the node (its real uid's name) and its command line,
    /// from the agent's /proc. Not recorded (recordings of schema 2 encode
    /// this type positionally and predate them). Shared with the previous
    /// sample's where they did not change (`ingest::decode::Stream`): the
    /// same names every second were most of what a console allocated.
    #[serde(skip)]
    pub owner: Option<Arc<str>>,
    #[serde(skip)]
    pub command: Option<Arc<str>>,
}

/// One InfiniBand port in one sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbReading {
    /// Position in `NodeDesc::ib_ports`.
    pub port: u32,
    /// "ACTIVE", "DOWN", "INIT", ...; `None` where sysfs could not be read.
    /// The words the kernel uses are static, not a copy a port a sample.
    pub state: Option<Cow<'static, str>>,
    pub phys_state: Option<Cow<'static, str>>,
    pub rate_gbps: Option<u32>,
    /// Octets (counters).
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// Packets (counters), as the agent last sent them: the column deltas a
    /// console asks for leave them out, so on a live stream they are those
    /// of the connection's history and first sample. Nothing judges or
    /// shows them; recordings keep them for their format's sake.
    pub tx_packets: u64,
    pub rx_packets: u64,
    /// Per `fleetop_proto::ib::ERROR_COUNTERS` entry: the raw counter, `None`
    /// where it is not readable on this port. In the reading, not a list of
    /// its own: every port of every node, every second, was an allocation
    /// made and freed, and the rates read both samples' lists out of cache.
    #[serde(with = "ib_errors")]
    pub errors: IbErrors<u64>,
}

/// A value per InfiniBand error counter (`fleetop_proto::ib::ERROR_COUNTERS`).
pub type IbErrors<T> = [Option<T>; fleetop_proto::ib::ERROR_COUNTERS.len()];

/// `IbErrors` in recordings: a list, as recordings of schema 2 wrote it
/// (before the counters had a fixed place). A list of another length (a
/// recording from a console that knew fewer counters) reads as far as it
/// goes; the rest are unknown.
mod ib_errors {
    use super::IbErrors;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &IbErrors<u64>, s: S) -> Result<S::Ok, S::Error> {
        v.as_slice().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IbErrors<u64>, D::Error> {
        let got = Vec::<Option<u64>>::deserialize(d)?;
        let mut v = IbErrors::default();
        for (slot, c) in v.iter_mut().zip(got) {
            *slot = c;
        }
        Ok(v)
    }
}

impl IbReading {
    /// Down means the port says so: a port whose state is unknown is not judged.
    pub fn is_down(&self) -> bool {
        self.state.as_deref().is_some_and(|s| s != "ACTIVE")
    }
}

/// Where a GPU stands with the NVLink fabric (NVSwitch systems).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    NotSupported,
    NotStarted,
    InProgress,
    /// Registration finished: 0 is success, anything else NVML's error code.
    Completed {
        status: u32,
    },
}

/// Readings matched to the description.
impl NodeDesc {
    /// One reading per physical GPU, for what is summed over a fleet
    /// (power): the socket-wide readings of an AMD GPU in compute
    /// partitions are its own, repeated on each partition. Of a physical
    /// GPU's partitions, the first that answered (else the first).
    /// Without partitions, every reading.
    pub fn per_physical_gpu<'a>(&self, s: &'a NodeSample) -> Vec<&'a GpuReading> {
        if self.gpus.iter().all(|g| g.partition.is_none()) {
            return s.gpus.iter().collect();
        }
        let mut out: Vec<(&str, &'a GpuReading)> = Vec::new();
        for r in &s.gpus {
            let id = self.gpu(r.index).map_or("", GpuDesc::physical_id);
            match out.iter_mut().find(|(seen, _)| !id.is_empty() && *seen == id) {
                Some(slot) if slot.1.error.is_some() && r.error.is_none() => slot.1 = r,
                Some(_) => {}
                None => out.push((id, r)),
            }
        }
        out.into_iter().map(|(_, r)| r).collect()
    }
}
