//! A node as the console knows it: the agent's description of it and its
//! samples, decoded once from the wire (`ingest::decode`). A reading that was
//! not taken, is not supported or could not be read is `None`: no consumer
//! ever has to guess whether a 0 means "zero" or "unknown". Every time is on
//! the console's clock.
//!
//! Serde here serves recordings (`record`): their encoding is positional,
//! so a change to these types is a new recording schema version.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What does not change while an agent runs (from its `NodeInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeDesc {
    pub hostname: String,
    pub agent_version: String,
    /// "nvml", "amdsmi", "sim:<scenario>" or "none".
    pub backend: String,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    /// The agent's sampling interval (never zero).
    pub interval_ms: i64,
    pub gpus: Vec<GpuDesc>,
    pub ib_ports: Vec<IbPortDesc>,
    /// Why there are no GPUs, if so ("NVML not available: ...").
    pub gpu_note: Option<String>,
    /// Names the agent process: with a sample's `seq`, names the sample.
    pub instance: u64,
    /// The node's health checks, as the agent took them at its start, and
    /// its fault journal. Not in recordings (schema 2 predates them): a
    /// replay shows none of these.
    #[serde(skip)]
    pub health: NodeHealth,
}

impl NodeDesc {
    /// The description with every text from outside made printable and
    /// bounded (`fleetop_proto::input::printable`): an agent, an exporter
    /// or a GPU's firmware names these, and the TUI shows them. The
    /// mappers of every source (agent, dcgm-exporter, Prometheus) call this
    /// once, so nothing after them escapes again.
    pub fn printable(mut self) -> NodeDesc {
        fn line(s: &mut String, max: usize) {
            if s.len() > max || fleetop_proto::input::has_unprintable(s) {
                *s = fleetop_proto::input::printable(s, max);
            }
        }
        fn some(s: &mut Option<String>, max: usize) {
            if let Some(s) = s {
                line(s, max);
            }
        }
        // Bounds in characters: a DNS name's 253; the rest generous for
        // what NVML and the drivers say (a GPU's name is under 96 bytes).
        line(&mut self.hostname, 253);
        line(&mut self.agent_version, 64);
        line(&mut self.backend, 64);
        some(&mut self.driver_version, 64);
        some(&mut self.cuda_version, 64);
        some(&mut self.gpu_note, 500);
        some(&mut self.health.boot_id, 64);
        for g in &mut self.gpus {
            line(&mut g.uuid, 96);
            line(&mut g.model, 96);
            line(&mut g.pci_bus_id, 32);
            some(&mut g.vbios_version, 64);
            some(&mut g.serial_number, 64);
            some(&mut g.board_part_number, 64);
            if let Some(p) = &mut g.partition {
                line(&mut p.compute, 16);
                line(&mut p.memory, 16);
            }
            // AMD SMI names some 30 firmware blocks: a list past any GPU's
            // is not a description.
            g.firmware.truncate(MAX_FIRMWARE);
            for f in &mut g.firmware {
                line(&mut f.name, 32);
                line(&mut f.version, 64);
            }
        }
        for p in &mut self.ib_ports {
            line(&mut p.device, 64);
            line(&mut p.link_layer, 32);
        }
        for b in &mut self.health.gpus_missing_pci {
            line(b, 32);
        }
        some(&mut self.health.machine_id, 64);
        for b in &mut self.health.burn_ins {
            line(&mut b.requested_by, 200);
            line(&mut b.node.hostname, 253);
            some(&mut b.node.machine_id, 64);
            some(&mut b.node.boot_id, 64);
            some(&mut b.error, 500);
            for u in &mut b.node.gpu_uuids {
                line(u, 96);
            }
            for c in &mut b.checks {
                line(&mut c.name, 64);
                some(&mut c.unit, 32);
                some(&mut c.expected_source, 200);
                some(&mut c.reason, 500);
            }
        }
        for r in &mut self.health.fault_journal {
            line(&mut r.gpu_uuid, 96);
            line(&mut r.kind, 64);
            some(&mut r.boot_id, 64);
        }
        self
    }
}

/// What the agent checked of the node as a whole, and the faults its
/// journal keeps across restarts and reboots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeHealth {
    /// NVIDIA GPUs on the PCI bus that NVML does not list (bus ids).
    pub gpus_missing_pci: Vec<String>,
    /// How many GPUs the node should have, where said.
    pub expect_gpus: Option<u32>,
    /// GPUs (NVIDIA's or AMD's) on the node's PCI bus, whatever a library
    /// sees; `None` when none, unknown, or from an agent that predates it.
    pub gpus_on_pci: Option<u32>,
    /// nvidia_peermem loaded, on a node with InfiniBand ports; `None`
    /// without InfiniBand or when unknown.
    pub peermem: Option<bool>,
    /// The agent's fault journal, oldest first.
    pub fault_journal: Vec<FaultRecord>,
    /// The node's current boot.
    pub boot_id: Option<String>,
    /// The machine (/etc/machine-id, or a simulated node's own).
    pub machine_id: Option<String>,
    /// The agent's burn-in journal, oldest first: the verdicts of the
    /// burn-ins this node ran, kept by its agent.
    pub burn_ins: Vec<crate::model::bench::BurnIn>,
}

/// One fault on one GPU, from the agent's journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRecord {
    pub gpu_uuid: String,
    /// "xid"
    pub kind: String,
    pub code: u32,
    /// When, on the agent's clock (a 7-day window does not mind skew).
    pub time_ms: i64,
    pub boot_id: Option<String>,
}

impl NodeHealth {
    /// Adds a burn-in the agent recorded (sent live), unless it has it.
    pub fn add_burn_in(&mut self, b: crate::model::bench::BurnIn) -> bool {
        let known = self
            .burn_ins
            .iter()
            .any(|x| x.started_ms == b.started_ms && x.ended_ms == b.ended_ms && x.suite == b.suite);
        if !known {
            self.burn_ins.push(b);
        }
        !known
    }

    /// The boots in which GPU `uuid` reported XID `code` since `since_ms`,
    /// counted from the journal and, when `now` is set, the current boot
    /// (a live XID the journal may not hold yet). A record of an unknown
    /// boot counts as a boot of its own.
    pub fn xid_boots(&self, uuid: &str, code: u32, since_ms: i64, now: bool) -> usize {
        let mut boots: Vec<String> = self
            .fault_journal
            .iter()
            .filter(|r| r.kind == "xid" && r.code == code && r.gpu_uuid == uuid && r.time_ms >= since_ms)
            .map(|r| r.boot_id.clone().unwrap_or_else(|| format!("@{}", r.time_ms)))
            .collect();
        if now {
            boots.push(self.boot_id.clone().unwrap_or_else(|| "@now".into()));
        }
        boots.sort_unstable();
        boots.dedup();
        boots.len()
    }
}

/// The most firmware versions a GPU's description keeps.
pub const MAX_FIRMWARE: usize = 64;

impl NodeDesc {
    /// The node as its agent knows it now, to match burn-ins by.
    pub fn identity(&self) -> crate::model::bench::Identity {
        crate::model::bench::Identity {
            hostname: self.hostname.clone(),
            machine_id: self.health.machine_id.clone(),
            boot_id: self.health.boot_id.clone(),
            gpu_uuids: self.gpus.iter().map(|g| g.uuid.clone()).collect(),
        }
    }

    pub fn gpu(&self, index: u32) -> Option<&GpuDesc> {
        by_index(&self.gpus, index, |g| g.index)
    }

    /// Who made the node's GPUs: its first GPU's vendor; without GPUs, AMD
    /// where the agent's backend is AMD SMI's, else NVIDIA (the words for
    /// links and the GPUs' library follow it).
    pub fn vendor(&self) -> Vendor {
        match self.gpus.first() {
            Some(g) => g.vendor,
            None if self.backend == "amdsmi" => Vendor::Amd,
            None => Vendor::Nvidia,
        }
    }

    /// How many physical GPUs the node has: an AMD GPU split into compute
    /// partitions (CPX: each partition a GPU of its own on the wire)
    /// counts once.
    pub fn physical_gpus(&self) -> usize {
        if self.gpus.iter().all(|g| g.partition.is_none()) {
            return self.gpus.len();
        }
        let mut seen: Vec<&str> = Vec::new();
        for g in &self.gpus {
            let id = g.physical_id();
            if !seen.contains(&id) {
                seen.push(id);
            }
        }
        seen.len()
    }

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

    /// "mlx5_0/1" for the node's InfiniBand port at position `k`.
    pub fn ib_port_name(&self, k: u32) -> String {
        self.ib_ports
            .get(k as usize)
            .map(|p| format!("{}/{}", p.device, p.port))
            .unwrap_or_else(|| format!("port{k}"))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuDesc {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub pci_bus_id: String,
    pub mem_total_bytes: Option<u64>,
    #[serde(with = "crate::model::scaled::milli::opt")]
    pub power_limit_w: Option<f64>,
    pub max_sm_clock_mhz: Option<u32>,
    pub max_mem_clock_mhz: Option<u32>,
    /// Where the GPU starts to slow itself down (NVML's slowdown threshold).
    pub slowdown_temp_c: Option<u32>,
    pub shutdown_temp_c: Option<u32>,
    pub nvlinks: Vec<NvLinkDesc>,
    /// Not in recordings (schema 2 predates them).
    #[serde(skip)]
    pub vbios_version: Option<String>,
    /// The PCIe link the GPU can train to.
    #[serde(skip)]
    pub pcie_max: Option<PcieLink>,
    /// Who made it; its NVLink fields carry XGMI links on AMD. This and
    /// the fields below are not in recordings (schema 2 predates them): a
    /// replay shows every GPU as NVIDIA's, without them.
    #[serde(skip)]
    pub vendor: Vendor,
    /// AMD: the compute and memory partition modes, and which compute
    /// partition of its physical GPU this GPU is; `None` on NVIDIA.
    #[serde(skip)]
    pub partition: Option<Partition>,
    /// Firmware versions, as the vendor's library names them (AMD: "PM",
    /// "PSP_SOSDRV", ...), at most `MAX_FIRMWARE`.
    #[serde(skip)]
    pub firmware: Vec<Firmware>,
    /// Where the HBM temperature slows the GPU down and shuts it off (AMD's
    /// VRAM sensor's critical and emergency limits).
    #[serde(skip)]
    pub hbm_slowdown_temp_c: Option<u32>,
    #[serde(skip)]
    pub hbm_shutdown_temp_c: Option<u32>,
    /// AMD: the board's serial and part number (AMD SMI's board
    /// information; AMD's exporter's `serial_number` and `card_model`).
    #[serde(skip)]
    pub serial_number: Option<String>,
    #[serde(skip)]
    pub board_part_number: Option<String>,
}

impl GpuDesc {
    /// The physical GPU's PCI bus id: an AMD partition's with its function
    /// number (the partition) dropped ("0000:26:00.3" is "0000:26:00");
    /// any other GPU's whole.
    pub fn physical_id(&self) -> &str {
        match &self.partition {
            Some(_) => self
                .pci_bus_id
                .rsplit_once('.')
                .map_or(&self.pci_bus_id, |(bus, _)| bus),
            None => &self.pci_bus_id,
        }
    }

    /// "NVLink" or "XGMI": what the vendor calls the GPU-to-GPU links.
    pub fn links_word(&self) -> &'static str {
        self.vendor.links_word()
    }
}

/// Who made a GPU. The wire's empty vendor (an agent before AMD) is NVIDIA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Vendor {
    #[default]
    Nvidia,
    Amd,
}

impl Vendor {
    /// The wire's word ("NVIDIA", "AMD", or empty for NVIDIA).
    pub fn from_wire(s: &str) -> Vendor {
        if s.eq_ignore_ascii_case("amd") {
            Vendor::Amd
        } else {
            Vendor::Nvidia
        }
    }

    /// "nvidia", "amd": the export's word.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
        }
    }

    /// What the vendor calls its GPU-to-GPU links.
    pub fn links_word(self) -> &'static str {
        match self {
            Vendor::Nvidia => "NVLink",
            Vendor::Amd => "XGMI",
        }
    }

    /// The library the agent reads the vendor's GPUs through.
    pub fn library(self) -> &'static str {
        match self {
            Vendor::Nvidia => "NVML",
            Vendor::Amd => "AMD SMI",
        }
    }
}

/// An AMD GPU's partition modes (AMD SMI's words) and its place in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// "SPX", "DPX", "QPX", "CPX"; empty where not read.
    pub compute: String,
    /// "NPS1", "NPS4"; empty where not read.
    pub memory: String,
    /// Which compute partition of the physical GPU (0 in SPX).
    pub id: u32,
}

impl Partition {
    /// "CPX/NPS4 partition 3"; "SPX/NPS1" for the one partition of SPX.
    pub fn words(&self) -> String {
        let modes: Vec<&str> = [self.compute.as_str(), self.memory.as_str()]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect();
        let modes = if modes.is_empty() {
            "?".to_string()
        } else {
            modes.join("/")
        };
        if self.compute == "SPX" && self.id == 0 {
            modes
        } else {
            format!("{modes} partition {}", self.id)
        }
    }
}

/// One firmware block's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firmware {
    pub name: String,
    pub version: String,
}

/// A PCIe link: generation and lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieLink {
    pub gen_: u32,
    pub width: u32,
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvLinkDesc {
    /// NVML's link id.
    pub link: u32,
    /// PCI bus id of the GPU or switch on the other end, one copy for
    /// all the node's links to it.
    pub peer_pci_bus_id: Option<Arc<str>>,
    /// Not active when the agent started: unused by design, not a link that went down.
    pub inactive_at_start: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbPortDesc {
    pub device: String,
    pub port: u32,
    pub link_layer: String,
}

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

/// The GPU of NVML index `index` in `gpus`: first where it nearly always
/// is (agents list GPUs in index order), then by search. The wall and the
/// detectors ask this of every GPU of every node, and a search walks
/// through descriptions out of the cache.
fn by_index<T>(gpus: &[T], index: u32, of: impl Fn(&T) -> u32) -> Option<&T> {
    gpus.get(position_of(gpus, index, None, of)?)
}

/// Where GPU `index` is in `gpus`: at `hint` or at its index where it
/// nearly always is, else by a binary search (lists are in index order),
/// and only for a list out of order by a walk. Asked for every GPU of a
/// node, this keeps a node's work linear, not quadratic in its GPUs.
pub fn position_of<T>(gpus: &[T], index: u32, hint: Option<usize>, of: impl Fn(&T) -> u32) -> Option<usize> {
    for at in [hint, Some(index as usize)].into_iter().flatten() {
        if gpus.get(at).is_some_and(|g| of(g) == index) {
            return Some(at);
        }
    }
    match gpus.binary_search_by_key(&index, &of) {
        Ok(at) if of(&gpus[at]) == index => Some(at),
        _ => gpus.iter().position(|g| of(g) == index),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A port's error counters are recorded as the list recordings of
    /// schema 2 hold, and a list of another length reads as far as it goes.
    #[test]
    fn ib_error_counters_record_as_the_list_they_were() {
        #[derive(Serialize, Deserialize)]
        struct AsWritten {
            port: u32,
            state: Option<String>,
            phys_state: Option<String>,
            rate_gbps: Option<u32>,
            tx_bytes: u64,
            rx_bytes: u64,
            tx_packets: u64,
            rx_packets: u64,
            errors: Vec<Option<u64>>,
        }
        let mut errors = IbErrors::default();
        errors[0] = Some(7);
        errors[14] = Some(1 << 40);
        let r = IbReading {
            port: 2,
            state: Some("ACTIVE".into()),
            tx_bytes: 9,
            errors,
            ..Default::default()
        };
        let old = AsWritten {
            port: 2,
            state: Some("ACTIVE".into()),
            phys_state: None,
            rate_gbps: None,
            tx_bytes: 9,
            rx_bytes: 0,
            tx_packets: 0,
            rx_packets: 0,
            errors: errors.to_vec(),
        };
        let bytes = postcard::to_allocvec(&old).expect("encodes");
        assert_eq!(postcard::to_allocvec(&r).expect("encodes"), bytes);
        assert_eq!(postcard::from_bytes::<IbReading>(&bytes).expect("decodes"), r);
        let short = AsWritten {
            errors: vec![Some(3), None],
            ..old
        };
        let back: IbReading = postcard::from_bytes(&postcard::to_allocvec(&short).expect("encodes")).expect("decodes");
        assert_eq!(back.errors[0], Some(3));
        assert!(back.errors[1..].iter().all(Option::is_none));
    }

    /// Socket-wide readings repeat on each CPX partition: one reading per
    /// physical GPU, the first partition that answered.
    #[test]
    fn a_partitioned_gpu_counts_once() {
        let part = |index: u32, bus: &str, id: u32| GpuDesc {
            index,
            pci_bus_id: bus.into(),
            vendor: Vendor::Amd,
            partition: Some(Partition {
                compute: "CPX".into(),
                memory: "NPS4".into(),
                id,
            }),
            ..Default::default()
        };
        let d = NodeDesc {
            gpus: vec![
                part(0, "0000:18:00.0", 0),
                part(1, "0000:18:00.1", 1),
                part(2, "0000:28:00.0", 0),
                part(3, "0000:28:00.1", 1),
            ],
            ..Default::default()
        };
        assert_eq!(d.physical_gpus(), 2);
        let r = |index: u32, lost: bool| GpuReading {
            index,
            error: lost.then_some(GpuError::Lost),
            power_w: (!lost).then_some(700.0 + f64::from(index)),
            ..Default::default()
        };
        let s = NodeSample {
            gpus: vec![r(0, true), r(1, false), r(2, false), r(3, false)],
            ..Default::default()
        };
        let one: Vec<u32> = d.per_physical_gpu(&s).iter().map(|g| g.index).collect();
        assert_eq!(
            one,
            [1, 2],
            "partition 0 of the first is lost: its partition 1 speaks for it"
        );
        assert_eq!(d.vendor(), Vendor::Amd);
        assert_eq!(NodeDesc::default().vendor(), Vendor::Nvidia);
        assert_eq!(
            Partition {
                compute: "SPX".into(),
                memory: "NPS1".into(),
                id: 0
            }
            .words(),
            "SPX/NPS1"
        );
    }
}
