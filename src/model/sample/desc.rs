//! What an agent says of its node once: the node, its GPUs, links and
//! ports, its health at start (`NodeDesc`, from `NodeInfo`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::by_index;

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
