//! The machine a fake AMD SMI pretends to be: a TOML profile, optionally a
//! fault script layered on one (`base = "../mi300x-oam.toml"`). A script's
//! top-level keys replace the base's, its `[gpu]` keys change the base's
//! template (every GPU), its `[[override]]`s and `[[fault]]`s add to the
//! base's.

use std::collections::BTreeMap;
use std::path::Path;

use fleetop_amdsmi_abi as abi;
use fleetop_fake_profile::Layers;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// For people reading the profile; AMD SMI has no call for it.
    #[allow(dead_code)]
    pub name: String,
    /// amdsmi_get_lib_version: major, minor, release.
    pub lib_version: [u32; 3],
    pub driver_name: String,
    pub driver_version: String,
    pub driver_date: String,
    /// Physical GPUs (sockets, in AMD SMI's words).
    pub count: u32,
    /// One per physical GPU, in socket order: `0000:05:00.0`.
    pub bdfs: Vec<String>,
    /// "SPX", "DPX", "TPX", "QPX" or "CPX": how many processors each GPU is.
    #[serde(default = "spx")]
    pub compute_partition: String,
    /// "NPS1", "NPS2", "NPS4" or "NPS8".
    #[serde(default = "nps1")]
    pub memory_partition: String,
    /// Seconds per cycle of the values that move (activity, power, ...).
    #[serde(default = "default_period")]
    pub period_s: f64,
    /// The XGMI hive every GPU is in (amdsmi_get_xgmi_info).
    pub xgmi_hive_id: u64,
    /// Filled from the `[gpu]` template and the `[[override]]`s (by `index`).
    #[serde(skip)]
    pub gpus: Vec<GpuSpec>,
    #[serde(default)]
    pub fault: Vec<Fault>,
}

fn spx() -> String {
    "SPX".into()
}

fn nps1() -> String {
    "NPS1".into()
}

fn default_period() -> f64 {
    60.0
}

fn eight() -> u32 {
    8
}

/// One physical GPU. Temperatures °C, power W, clocks MHz, memory bytes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub market_name: String,
    pub product_name: String,
    pub model_number: String,
    pub manufacturer: String,
    pub vendor_id: u32,
    pub subvendor_id: u32,
    pub device_id: u64,
    pub rev_id: u32,
    pub subsystem_id: u32,
    /// e.g. 0x942 for gfx942.
    pub gfx_target: u64,
    /// Compute units of the whole GPU (each partition has its share).
    pub compute_units: u32,
    /// XCCs (XCDs) of the whole GPU.
    #[serde(default = "eight")]
    pub xccs: u32,
    /// The ASIC serial of GPU 0; GPU i has this plus i.
    pub serial_base: u64,
    pub vbios_name: String,
    pub vbios_version: String,
    pub vbios_part_number: String,
    pub vbios_build_date: String,
    /// Firmware versions by AMD SMI's block name ("PM", "PSP_SOSDRV", ...).
    pub firmware: BTreeMap<String, u64>,
    pub vram_total_bytes: u64,
    /// Used with no process: the driver's own.
    pub vram_base_used_bytes: u64,
    pub vram_vendor: String,
    pub vram_bit_width: u32,
    /// GB/s.
    pub vram_max_bandwidth: u64,
    /// GTT: host memory the GPU maps.
    pub gtt_total_bytes: u64,
    pub gfx_activity_pct: u32,
    pub gfx_activity_swing_pct: u32,
    pub umc_activity_pct: u32,
    /// Absent: not reported (0xFFFF, as MI300 gives it).
    pub mm_activity_pct: Option<u32>,
    /// Absent: the GPU has no edge sensor (NOT_SUPPORTED, as MI300X).
    pub edge_temp_c: Option<i64>,
    pub hotspot_temp_c: i64,
    pub vram_temp_c: i64,
    pub hotspot_critical_c: i64,
    pub hotspot_emergency_c: i64,
    pub vram_critical_c: i64,
    pub vram_emergency_c: i64,
    pub edge_critical_c: Option<i64>,
    pub edge_emergency_c: Option<i64>,
    pub power_w: u32,
    pub power_swing_w: u32,
    pub power_cap_w: u32,
    pub default_power_cap_w: u32,
    pub min_power_cap_w: u32,
    pub max_power_cap_w: u32,
    /// J at time zero.
    pub energy_base_j: u64,
    pub gfx_clock_mhz: u32,
    pub gfx_min_mhz: u32,
    pub gfx_max_mhz: u32,
    pub mem_clock_mhz: u32,
    pub mem_min_mhz: u32,
    pub mem_max_mhz: u32,
    pub pcie_gen: u32,
    pub pcie_width: u16,
    pub pcie_max_gen: u32,
    pub pcie_max_width: u16,
    pub pcie_replay_count: u64,
    /// Mb/s now.
    pub pcie_bandwidth_mbps: u32,
    /// "OAM", "PCIE", "CEM".
    pub slot_type: String,
    /// XGMI links the GPU has; those past its peers are "disabled".
    pub xgmi_links: u32,
    /// Lanes per link and Gb/s per lane.
    pub xgmi_lanes: u8,
    pub xgmi_bit_rate_gbps: u32,
    /// GB/s per link.
    pub xgmi_max_bandwidth_gbs: u32,
    /// Data per link and direction, KB/s.
    pub xgmi_kb_per_s: u64,
    /// RAS blocks with ECC on (AMD SMI's names: "UMC", "SDMA", "GFX", ...).
    pub ecc_blocks: Vec<String>,
    /// Counts at time zero, by block: [correctable, uncorrectable, deferred].
    #[serde(default)]
    pub ecc_counts: BTreeMap<String, [u64; 3]>,
    #[serde(default)]
    pub processes: Vec<Process>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub name: String,
    pub vram_bytes: u64,
    #[serde(default)]
    pub gtt_bytes: u64,
    /// Which partition of the GPU runs it (0 in SPX).
    #[serde(default)]
    pub partition: u32,
    /// Absent: not reported (u32::MAX).
    pub cu_occupancy: Option<u32>,
}

/// A change of state from `at_s` seconds after amdsmi_init on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    #[serde(default)]
    pub at_s: f64,
    /// The physical GPU (socket index).
    pub gpu: u32,
    pub kind: FaultKind,
    /// ras_error: the RAS block ("UMC", ...) and how many errors of each kind.
    pub block: Option<String>,
    #[serde(default)]
    pub correctable: u64,
    #[serde(default)]
    pub uncorrectable: u64,
    #[serde(default)]
    pub deferred: u64,
    /// ras_error: pages retired (bad pages), and their state.
    #[serde(default)]
    pub retired_pages: u32,
    pub page_status: Option<String>,
    /// xgmi_link_down: the GPU at the link's other end.
    pub peer: Option<u32>,
    /// thermal_throttle: the junction temperature and the GFX clock it forces.
    pub hotspot_temp_c: Option<i64>,
    pub gfx_clock_mhz: Option<u32>,
    /// gpu_lost: the status every call on the GPU answers
    /// ("AMDSMI_STATUS_NOT_FOUND" unless set), and how long each call blocks first.
    pub status: Option<String>,
    pub hang_s: Option<f64>,
    /// event: AMD SMI's event name ("GPU_PRE_RESET", ...), the partition that
    /// reports it (0 unless set) and its message.
    pub event: Option<String>,
    pub partition: Option<u32>,
    pub message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// ECC errors on one RAS block (and retired pages).
    RasError,
    /// The XGMI link between `gpu` and `peer` goes down, at both ends.
    XgmiLinkDown,
    /// Thermal throttling: hot junction, clocks down, violation status set.
    ThermalThrottle,
    /// Every call on the GPU (its partitions too) answers an error status.
    GpuLost,
    /// An event notification (amdsmi_get_gpu_event_notification).
    Event,
}

impl Profile {
    /// Processors per physical GPU.
    pub fn partitions(&self) -> u32 {
        compute_partitions(&self.compute_partition).unwrap_or(1)
    }
}

/// Processors per GPU in a compute partition mode (MI300X: 8 XCDs).
pub fn compute_partitions(mode: &str) -> Option<u32> {
    Some(match mode {
        "SPX" => 1,
        "DPX" => 2,
        "TPX" => 3,
        "QPX" => 4,
        "CPX" => 8,
        _ => return None,
    })
}

/// A RAS block by the name amd-smi prints.
pub fn block_bit(name: &str) -> Option<u64> {
    abi::GPU_BLOCKS.iter().find(|(_, n)| *n == name).map(|(b, _)| *b)
}

/// A firmware block by AMD SMI's name (the ones the fake knows).
pub fn fw_id(name: &str) -> Option<u32> {
    Some(match name {
        "SMU" => abi::AMDSMI_FW_ID_SMU,
        "CP_MEC1" => abi::AMDSMI_FW_ID_CP_MEC1,
        "CP_MEC2" => abi::AMDSMI_FW_ID_CP_MEC2,
        "RLC" => abi::AMDSMI_FW_ID_RLC,
        "SDMA0" => abi::AMDSMI_FW_ID_SDMA0,
        "VCN" => abi::AMDSMI_FW_ID_VCN,
        "PSP_SOSDRV" => abi::AMDSMI_FW_ID_PSP_SOSDRV,
        "MC" => abi::AMDSMI_FW_ID_MC,
        "PSP_BL" => abi::AMDSMI_FW_ID_PSP_BL,
        "ASD" => abi::AMDSMI_FW_ID_ASD,
        "TA_RAS" => abi::AMDSMI_FW_ID_TA_RAS,
        "TA_XGMI" => abi::AMDSMI_FW_ID_TA_XGMI,
        "PM" => abi::AMDSMI_FW_ID_PM,
        "PLDM_BUNDLE" => abi::AMDSMI_FW_ID_PLDM_BUNDLE,
        _ => return None,
    })
}

/// An event type by its name without the `AMDSMI_EVT_NOTIF_` prefix.
pub fn event_type(name: &str) -> Option<u32> {
    Some(match name {
        "VMFAULT" => abi::AMDSMI_EVT_NOTIF_VMFAULT,
        "THERMAL_THROTTLE" => abi::AMDSMI_EVT_NOTIF_THERMAL_THROTTLE,
        "GPU_PRE_RESET" => abi::AMDSMI_EVT_NOTIF_GPU_PRE_RESET,
        "GPU_POST_RESET" => abi::AMDSMI_EVT_NOTIF_GPU_POST_RESET,
        "MIGRATE_START" => abi::AMDSMI_EVT_NOTIF_MIGRATE_START,
        "MIGRATE_END" => abi::AMDSMI_EVT_NOTIF_MIGRATE_END,
        "PAGE_FAULT_START" => abi::AMDSMI_EVT_NOTIF_PAGE_FAULT_START,
        "PAGE_FAULT_END" => abi::AMDSMI_EVT_NOTIF_PAGE_FAULT_END,
        "QUEUE_EVICTION" => abi::AMDSMI_EVT_NOTIF_QUEUE_EVICTION,
        "QUEUE_RESTORE" => abi::AMDSMI_EVT_NOTIF_QUEUE_RESTORE,
        "UNMAP_FROM_GPU" => abi::AMDSMI_EVT_NOTIF_UNMAP_FROM_GPU,
        "PROCESS_START" => abi::AMDSMI_EVT_NOTIF_PROCESS_START,
        "PROCESS_END" => abi::AMDSMI_EVT_NOTIF_PROCESS_END,
        _ => return None,
    })
}

/// A status by name, with or without the `AMDSMI_STATUS_` prefix.
pub fn status_code(name: &str) -> Option<u32> {
    let full = if name.starts_with("AMDSMI_STATUS_") {
        name.to_string()
    } else {
        format!("AMDSMI_STATUS_{name}")
    };
    (0..=60u32)
        .chain([abi::AMDSMI_STATUS_MAP_ERROR, abi::AMDSMI_STATUS_UNKNOWN_ERROR])
        .find(|&s| abi::status_name(s) == Some(full.as_str()))
}

pub fn page_status(name: &str) -> Option<u32> {
    Some(match name {
        "RESERVED" => abi::AMDSMI_MEM_PAGE_STATUS_RESERVED,
        "PENDING" => abi::AMDSMI_MEM_PAGE_STATUS_PENDING,
        "UNRESERVABLE" => abi::AMDSMI_MEM_PAGE_STATUS_UNRESERVABLE,
        _ => return None,
    })
}

pub fn slot_type(name: &str) -> Option<u32> {
    Some(match name {
        "PCIE" => abi::AMDSMI_CARD_FORM_FACTOR_PCIE,
        "OAM" => abi::AMDSMI_CARD_FORM_FACTOR_OAM,
        "CEM" => abi::AMDSMI_CARD_FORM_FACTOR_CEM,
        _ => return None,
    })
}

/// Reads a profile or a fault script and checks every name in it.
pub fn load(path: &Path) -> Result<Profile, String> {
    let mut layers = Layers::read(path)?;
    let mut p: Profile = layers.profile()?;
    p.gpus = layers.gpus(p.count)?;
    check(&p).map_err(|e| layers.here(e))?;
    Ok(p)
}

fn check(p: &Profile) -> Result<(), String> {
    if p.count == 0 || p.count > crate::MAX_GPUS as u32 {
        return Err(format!("count must be 1 to {}", crate::MAX_GPUS));
    }
    if p.bdfs.len() < p.count as usize {
        return Err("fewer bdfs than GPUs".into());
    }
    for b in &p.bdfs {
        abi::amdsmi_bdf_t::parse(b).ok_or(format!("bad BDF {b:?}"))?;
    }
    let parts = compute_partitions(&p.compute_partition).ok_or(format!(
        "compute_partition {:?}: not SPX, DPX, TPX, QPX or CPX",
        p.compute_partition
    ))?;
    if !matches!(p.memory_partition.as_str(), "NPS1" | "NPS2" | "NPS4" | "NPS8") {
        return Err(format!(
            "memory_partition {:?}: not NPS1, NPS2, NPS4 or NPS8",
            p.memory_partition
        ));
    }
    for (i, g) in p.gpus.iter().enumerate() {
        let here = |e: String| format!("GPU {i}: {e}");
        for name in g.firmware.keys() {
            fw_id(name).ok_or_else(|| here(format!("unknown firmware block {name:?}")))?;
        }
        for name in g.ecc_blocks.iter().chain(g.ecc_counts.keys()) {
            block_bit(name).ok_or_else(|| here(format!("unknown RAS block {name:?}")))?;
        }
        slot_type(&g.slot_type).ok_or_else(|| here(format!("unknown slot type {:?}", g.slot_type)))?;
        if g.xccs % parts != 0 || g.xgmi_links as usize > abi::AMDSMI_MAX_NUM_XGMI_LINKS {
            return Err(here(
                "xccs must divide into the partitions; at most 8 XGMI links".into(),
            ));
        }
        if p.count > 1 && (p.count - 1) > g.xgmi_links {
            return Err(here("more peers than XGMI links".into()));
        }
        if let Some(pr) = g.processes.iter().find(|pr| pr.partition >= parts) {
            return Err(here(format!(
                "process {} on partition {} of {parts}",
                pr.pid, pr.partition
            )));
        }
    }
    for (n, f) in p.fault.iter().enumerate() {
        let here = |e: &str| format!("fault {n} ({:?}): {e}", f.kind);
        if f.gpu >= p.count {
            return Err(here("no such GPU"));
        }
        match f.kind {
            FaultKind::RasError => {
                block_bit(f.block.as_deref().unwrap_or("")).ok_or_else(|| here("needs a known block"))?;
                if let Some(s) = &f.page_status {
                    page_status(s).ok_or_else(|| here("page_status: RESERVED, PENDING or UNRESERVABLE"))?;
                }
            }
            FaultKind::XgmiLinkDown => {
                let peer = f.peer.ok_or_else(|| here("needs a peer"))?;
                if peer >= p.count || peer == f.gpu {
                    return Err(here("peer must be another GPU"));
                }
            }
            FaultKind::ThermalThrottle => {}
            FaultKind::GpuLost => {
                if let Some(s) = &f.status {
                    status_code(s).ok_or_else(|| here("unknown status"))?;
                }
            }
            FaultKind::Event => {
                event_type(f.event.as_deref().unwrap_or("")).ok_or_else(|| here("needs a known event"))?;
                if f.partition.is_some_and(|q| q >= parts) {
                    return Err(here("no such partition"));
                }
            }
        }
    }
    Ok(())
}
