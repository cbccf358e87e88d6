//! The machine a fake NVML pretends to be: a TOML profile, optionally a fault
//! script layered on a profile (`base = "h100-sxm5.toml"`). A script's
//! `[gpu]` keys change the base's template (every GPU), its `[[override]]`s
//! and `[[fault]]`s add to the base's.

use std::path::Path;

use fleetop_fake_profile::Layers;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// For people reading the profile; NVML has no call for it.
    #[allow(dead_code)]
    pub name: String,
    pub driver_version: String,
    pub nvml_version: String,
    /// As NVML encodes it: 1000 * major + 10 * minor.
    pub cuda_driver_version: i32,
    pub count: u32,
    /// One per GPU, in NVML index order.
    pub pci_bus_ids: Vec<String>,
    /// Seconds per cycle of the values that move (utilization, power, ...).
    #[serde(default = "default_period")]
    pub period_s: f64,
    /// Filled from the `[gpu]` template and the `[[override]]`s (by `index`).
    #[serde(skip)]
    pub gpus: Vec<GpuSpec>,
    #[serde(default)]
    pub fault: Vec<Fault>,
}

fn yes() -> bool {
    true
}

fn default_period() -> f64 {
    60.0
}

fn gen5() -> u32 {
    5
}

fn x16() -> u32 {
    16
}

fn default_vbios() -> String {
    "96.00.99.00.01".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub model: String,
    pub mem_total_bytes: u64,
    pub mem_reserved_bytes: u64,
    pub mem_used_bytes: u64,
    pub power_limit_mw: u32,
    pub power_mw: u32,
    /// How far power, utilization and temperature swing around their centre.
    pub power_swing_mw: u32,
    pub util_pct: u32,
    pub util_swing_pct: u32,
    pub mem_util_pct: u32,
    pub temp_c: u32,
    /// Absent: the GPU has no memory temperature sensor (NOT_SUPPORTED).
    pub hbm_temp_c: Option<u32>,
    pub slowdown_temp_c: u32,
    pub shutdown_temp_c: u32,
    pub mem_max_temp_c: u32,
    pub gpu_max_temp_c: u32,
    /// The driver gives the T.Limit fields and the margin temperature
    /// (recent drivers on Hopper and later); false: NOT_SUPPORTED.
    #[serde(default = "yes")]
    pub tlimit: bool,
    /// The driver still answers nvmlDeviceGetTemperatureThreshold; false:
    /// NOT_SUPPORTED (the agent must read the T.Limit fields instead).
    #[serde(default = "yes")]
    pub legacy_thresholds: bool,
    pub sm_clock_mhz: u32,
    pub mem_clock_mhz: u32,
    pub max_sm_clock_mhz: u32,
    pub max_mem_clock_mhz: u32,
    pub clocks_event_reasons: u64,
    pub energy_base_mj: u64,
    pub pcie_tx_kbps: u32,
    pub pcie_rx_kbps: u32,
    pub pcie_replay: u32,
    pub ecc_corrected: u64,
    pub ecc_uncorrected: u64,
    pub remap_correctable: u32,
    pub remap_uncorrectable: u32,
    /// NVLink links (18 on an H100 SXM5, 12 on an A100 SXM4).
    pub nvlinks: u32,
    /// Data per link and direction, KiB/s.
    pub nvlink_kib_per_s: u64,
    #[serde(default)]
    pub processes: Vec<Process>,
    /// GPM metrics (Hopper and later); absent: the GPU has no GPM.
    pub gpm: Option<GpmSpec>,
    /// MIG instances; a non-empty list puts the GPU in MIG mode.
    #[serde(default)]
    pub mig: Vec<MigSpec>,
    /// nvmlDeviceGetVbiosVersion.
    #[serde(default = "default_vbios")]
    pub vbios_version: String,
    /// The PCIe link the GPU and its slot can train to
    /// (nvmlDeviceGetMaxPcieLinkGeneration / -Width).
    #[serde(default = "gen5")]
    pub pcie_max_gen: u32,
    #[serde(default = "x16")]
    pub pcie_max_width: u32,
    /// The link as trained now (nvmlDeviceGetCurrPcieLinkGeneration / -Width).
    #[serde(default = "gen5")]
    pub pcie_gen: u32,
    #[serde(default = "x16")]
    pub pcie_width: u32,
    /// nvmlDeviceGetPersistenceMode.
    #[serde(default = "yes")]
    pub persistence: bool,
    /// The GPU's fabric registration (nvmlDeviceGetGpuFabricInfo[V]);
    /// absent: the call answers NOT_SUPPORTED (no NVSwitch fabric).
    #[serde(default)]
    pub fabric_state: Option<FabricState>,
    /// Its nvmlReturn_t result once completed (0 success).
    #[serde(default)]
    pub fabric_status: u32,
}

/// nvmlGpuFabricState_t, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    NotSupported,
    NotStarted,
    InProgress,
    Completed,
}

impl FabricState {
    /// The NVML_GPU_FABRIC_STATE_* value.
    pub fn nvml(self) -> u8 {
        match self {
            FabricState::NotSupported => 0,
            FabricState::NotStarted => 1,
            FabricState::InProgress => 2,
            FabricState::Completed => 3,
        }
    }
}

/// Percent of the interval, as nvmlGpmMetricsGet reports them.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpmSpec {
    pub sm_active_pct: f64,
    pub sm_occupancy_pct: f64,
    pub tensor_active_pct: f64,
    pub dram_bw_pct: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub used_mem_bytes: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigSpec {
    /// The GPU instance profile, e.g. "3g.40gb".
    pub profile: String,
    pub mem_total_bytes: u64,
    pub mem_used_bytes: u64,
    /// This instance's GPM metrics (nvmlGpmMigSampleGet) where the GPU has
    /// GPM; absent: the GPU's.
    #[serde(default)]
    pub gpm: Option<GpmSpec>,
}

/// A change of state from a moment on: `at_s` seconds after nvmlInit and
/// after `at_call` NVML calls (both default to 0: from the start).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    #[serde(default)]
    pub at_s: f64,
    #[serde(default)]
    pub at_call: u64,
    pub gpu: u32,
    pub kind: FaultKind,
    /// xid: the XID number.
    pub xid: Option<u64>,
    /// nvlink_state: the link and its NVML_NVLINK_STATE (0 inactive, 1 active, 2 sleep).
    pub link: Option<u32>,
    pub state: Option<u32>,
    /// hang: the NVML function that blocks, and for how long.
    pub call: Option<String>,
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Every call on the GPU returns GPU_IS_LOST (opening it too, from the start).
    GpuLost,
    /// Opening the GPU's handle returns NO_PERMISSION.
    NoPermission,
    Xid,
    NvlinkState,
    RemapPending,
    RemapFailure,
    Hang,
    /// Compute processes answer NO_PERMISSION.
    ProcessesNoPermission,
    /// The HBM temperature field answers NOT_SUPPORTED.
    HbmTempNotSupported,
}

/// Reads a profile or a fault script (whose `base` names the profile it
/// changes, relative to the script; its faults are added to the profile's).
pub fn load(path: &Path) -> Result<Profile, String> {
    let mut layers = Layers::read(path)?;
    let mut p: Profile = layers.profile()?;
    if p.pci_bus_ids.len() < p.count as usize {
        return Err(layers.here("fewer pci_bus_ids than GPUs"));
    }
    p.gpus = layers.gpus(p.count)?;
    Ok(p)
}
