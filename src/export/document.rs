//! The full export document (`Snapshot`): the JSON contract scripts read,
//! field by field. Each field's unit is in its name.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::flag::{Action, FlagKind, Severity};
use crate::model::sched::Job;

/// The version of the export's JSON. 2 (2026-11-22): remapped rows as
/// `remap_pending`/`remap_failed` booleans with the row counts beside them
/// (1 had `remapped_rows_pending`/`_failed` counts), readings a GPU does not
/// give are null (MIG utilization, HBM temperature), `gpm`-derived fields,
/// `mig` instances, `scheduler_read_at`/`scheduler_error`, and `agent`
/// versions, NVLink peers and IB states null where unknown. Later within 2,
/// additive: GPM fields per `mig` instance (`sm_active_pct` etc.), and the
/// `Summary` document (`export --view summary`) beside the full `Snapshot`;
/// a node's `rack` and its scheduler's `partitions`; each GPU's `pods`;
/// with `--ray`, each node's `ray` (its Ray node and the work holding GPUs
/// there), a process's `ray_job`, and `ray_read_at`/`ray_error`;
/// `console_behind_ms` while the console is behind; with `--kubernetes`,
/// `kube_read_at`/`kube_error`; `slurm_error` beside `scheduler_error`;
/// each GPU's `vendor`, and on AMD its partition, firmware, RAS, XGMI,
/// events, throttle words and pending bad pages (absent on NVIDIA).
pub const SCHEMA_VERSION: u32 = 2;

/// One snapshot of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub schema_version: u32,
    /// RFC 3339.
    pub generated_at: String,
    /// With a scheduler (`--slurm`): when it was last read (RFC 3339), and
    /// why the latest read failed, if it did. Its nodes' `scheduler` fields
    /// are as old as `scheduler_read_at`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scheduler_read_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scheduler_error: Option<String>,
    /// `scheduler_error` under the name scripts look for beside
    /// `ray_error` and `kube_error` (Slurm is the scheduler `--slurm` reads):
    /// why the latest read of Slurm failed, and the document was written
    /// with what the agents said.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub slurm_error: Option<String>,
    /// With `--ray`: when Ray was last read, and why the latest read
    /// failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ray_read_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ray_error: Option<String>,
    /// With `--kubernetes`: when the API server was last read, and why the
    /// latest read failed, if it did (a deadline, a refusal, an answer too
    /// large).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kube_read_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kube_error: Option<String>,
    /// Present only while the console is behind (its queue, or a runtime
    /// starved of CPU): how far, in ms. What it shows is that old, and
    /// while its runtime is late it judges no node stale or unreachable.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub console_behind_ms: Option<i64>,
    pub nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    /// host:port of the agent (of the dcgm-exporter with `--dcgm-exporter`).
    pub address: String,
    pub status: Status,
    /// Why the node is not ok (the connection error, the age of its data).
    pub status_detail: Option<String>,
    /// What was judged of the node: its worst flag's severity (`ok` with
    /// none, or only info flags), as the console's status word reads it.
    /// `status` says whether the node can be judged at all (fresh data);
    /// `health` what was judged: a node with a lost GPU is `status: ok`,
    /// `health: crit`. A node that cannot be judged (`status` not `ok`) is
    /// `unknown`, never `ok`, and carries its `stale` or `unreachable` flag.
    pub health: Health,
    /// Host name the agent reports.
    pub hostname: Option<String>,
    pub agent: Option<AgentDesc>,
    /// RFC 3339 time of the latest sample.
    pub sampled_at: Option<String>,
    pub host: Option<Host>,
    /// What the scheduler says of the node (with `--slurm`).
    pub scheduler: Option<Scheduler>,
    /// The node's rack, from the config's `[racks]`; absent where it names none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rack: Option<String>,
    /// With `--ray`: the Ray node this node is (by Ray's node name, then
    /// its IP address); absent where Ray has none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ray: Option<RayNodeOut>,
    /// The newest burn-in the node's own agent recorded (its burn-in
    /// journal, the evidence a return is decided on); absent where its
    /// agent holds none, or predates the journal.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_burn_in: Option<BurnInOut>,
    pub gpus: Vec<Gpu>,
    pub ib_ports: Vec<IbPort>,
    pub flags: Vec<FlagOut>,
}

/// A burn-in's verdict as the node's agent keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BurnInOut {
    /// "quick" or "full".
    pub suite: String,
    pub passed: bool,
    /// RFC 3339: when it ended (the console's clock).
    pub ended_at: String,
    /// Who asked ("alice@console1").
    pub requested_by: String,
    /// Why it failed, where it did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub failure: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Ok,
    Warn,
    Crit,
    /// No fresh data: the node is stale or cannot be reached, so nothing
    /// that was judged of it can be trusted now.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Stale,
    Unreachable,
    // Its agent answered (or has neither answered nor failed yet), but its
    // data had not all arrived: it is still reading its history. Not
    // unreachable, and nothing judged of it yet. (A plain comment: the
    // schema keeps one enum of words.)
    Connecting,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentDesc {
    pub version: String,
    /// "nvml", "sim:<scenario>" or "none".
    pub backend: String,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub sample_interval_ms: i64,
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scheduler {
    /// Slurm's state word: idle, allocated, mixed, drained, draining, down, ...
    pub state: String,
    pub not_responding: bool,
    pub reason: Option<String>,
    pub reason_user: Option<String>,
    pub reason_time: Option<String>,
    /// The Slurm partitions the node is in, sorted (sinfo's `*` for the
    /// default partition dropped).
    #[serde(default)]
    pub partitions: Vec<String>,
    pub jobs: Vec<Job>,
}

/// A node as Ray sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RayNodeOut {
    /// Ray's node id (hex).
    pub node_id: String,
    /// Ray's node name (`ray start --node-name`; Ray's default is the IP).
    pub name: String,
    pub ip: String,
    pub head: bool,
    /// running, idle, draining, dead or unknown.
    pub status: String,
    /// Logical GPUs Ray schedules here, and those held now.
    pub gpus_total: Option<f64>,
    pub gpus_used: Option<f64>,
    /// The actors and running tasks holding GPUs here.
    pub work: Vec<RayWorkOut>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RayWorkOut {
    /// actor or task.
    pub kind: String,
    /// Ray's job id (hex).
    pub job: String,
    /// The job's entrypoint (the driver's command line or the submitted one).
    pub entrypoint: Option<String>,
    /// The actor's class and name, or the task's function.
    pub what: String,
    pub pid: Option<u32>,
    pub gpus: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub cpu_pct: f64,
    pub mem_used_bytes: u64,
    pub mem_total_bytes: u64,
    pub load1: f64,
    pub uptime_s: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub pci_bus_id: String,
    /// What went wrong reading this GPU ("gpu_lost", "nvml_stuck: <call>: no
    /// answer for N ms", ...); readings are null then.
    pub error: Option<String>,
    pub util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub temp_c: Option<u32>,
    pub hbm_temp_c: Option<u32>,
    pub slowdown_temp_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub energy_j: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub sm_clock_max_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub throttle_reasons: Vec<String>,
    /// The raw NVML clocks-event bitmask.
    pub throttle_mask: Option<u64>,
    pub pcie_tx_bytes_per_s: Option<f64>,
    pub pcie_rx_bytes_per_s: Option<f64>,
    pub pcie_replay_count: Option<u64>,
    pub ecc_corrected_volatile: Option<u64>,
    pub ecc_uncorrected_volatile: Option<u64>,
    pub retired_pages: Option<u32>,
    /// Rows remapped for correctable / uncorrectable errors (counts).
    pub remapped_rows_correctable: Option<u32>,
    pub remapped_rows_uncorrectable: Option<u32>,
    /// A row remap waits for a GPU reset.
    pub remap_pending: Option<bool>,
    /// A row remap failed: the GPU needs replacing.
    pub remap_failed: Option<bool>,
    /// The XIDs behind the GPU's active `xid` flag (and any reported with
    /// the latest sample), in the order seen.
    pub xids: Vec<u32>,
    /// The PCIe link as trained now, and what it can train to (`null`
    /// where unknown). An idle link may run a lower generation.
    #[serde(default)]
    pub pcie_link_gen: Option<u32>,
    #[serde(default)]
    pub pcie_link_width: Option<u32>,
    #[serde(default)]
    pub pcie_link_max_gen: Option<u32>,
    #[serde(default)]
    pub pcie_link_max_width: Option<u32>,
    /// Persistence mode.
    #[serde(default)]
    pub persistence_mode: Option<bool>,
    /// NVSwitch systems: "not_supported", "not_started", "in_progress",
    /// "registered" or "failed" (fabric registration).
    #[serde(default)]
    pub fabric_state: Option<String>,
    #[serde(default)]
    pub vbios_version: Option<String>,
    /// NVML GPM (Hopper and later), percent of the interval: SMs with a warp
    /// assigned, warp occupancy, tensor pipes busy, DRAM bandwidth. `null`
    /// where the GPU has no GPM (not 0).
    pub sm_active_pct: Option<f64>,
    pub sm_occupancy_pct: Option<f64>,
    pub tensor_active_pct: Option<f64>,
    pub dram_bw_pct: Option<f64>,
    /// A GPU in MIG mode: its instances (empty otherwise).
    #[serde(default)]
    pub mig: Vec<MigInstance>,
    pub nvlink: Vec<NvLink>,
    pub processes: Vec<Process>,
    /// The Kubernetes containers holding this GPU or one of its MIG
    /// instances (the kubelet's PodResources API, through the agent's
    /// `--kubelet-socket`); empty off Kubernetes.
    #[serde(default)]
    pub pods: Vec<Pod>,
    /// Who made it. On AMD the field names stay NVIDIA's: `nvlink` holds
    /// the XGMI links, `sm_clock_mhz` the GFX clock, `temp_c` the junction
    /// (hotspot) temperature. The fields after this one are AMD's, absent
    /// on NVIDIA.
    #[serde(default)]
    pub vendor: GpuVendor,
    /// The compute partition mode ("SPX", "DPX", "QPX", "CPX"), the memory
    /// partition mode ("NPS1", "NPS4"), and which compute partition of its
    /// physical GPU this one is (0 in SPX). In CPX each partition is a GPU
    /// of its own here; its power, temperatures, clocks, throttling, PCIe,
    /// XGMI and RAS are the physical GPU's, repeated on each partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_partition: Option<String>,
    /// The memory partition mode ("NPS1", "NPS4").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_partition: Option<String>,
    /// Which compute partition of its physical GPU this one is (0 in SPX).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_id: Option<u32>,
    /// Firmware versions by block name, as AMD SMI formats them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub firmware: BTreeMap<String, String>,
    /// Where the HBM temperature slows the GPU down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_slowdown_temp_c: Option<u32>,
    /// The board's serial (AMD SMI's board information; AMD's exporter's
    /// `serial_number`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// The board's part number ("102-G30211-0C"; AMD's exporter's
    /// `card_model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_part_number: Option<String>,
    /// The edge sensor (MI300X has none: absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_temp_c: Option<u32>,
    /// ECC counts per RAS block, every block with ECC on; their sums are
    /// `ecc_corrected_volatile` and `ecc_uncorrected_volatile`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ras: Vec<RasBlock>,
    /// The XGMI error status: 0 none, 1 one error, 2 several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xgmi_error_status: Option<u32>,
    /// The AMD faults behind the GPU's active `gpu_event` flag (and any
    /// reported with the latest sample), in the order seen: the AMD fault
    /// catalog's codes ("gpu_reset", "vmfault", "xgmi_error", ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// The throttle reasons in AMD's words ("socket_thrm", "ppt_pwr",
    /// "TEMP_HOTSPOT", ...); `throttle_reasons` has the NVML reasons they
    /// map to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_detail: Vec<String>,
    /// Of `retired_pages`, those waiting for a GPU reset to be retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_pages_pending: Option<u32>,
}

/// Who made a GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpuVendor {
    #[default]
    Nvidia,
    Amd,
}

/// One RAS block's ECC counts (since the driver loaded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RasBlock {
    /// AMD SMI's block name: "UMC" (the HBM), "SDMA", "GFX", "XGMI_WAFL", ...
    pub block: String,
    pub correctable: u64,
    pub uncorrectable: u64,
    /// Poisoned data, consumed later.
    pub deferred: u64,
}

/// A Kubernetes container that holds a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pod {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// The MIG instance it holds (its UUID); `null`: the whole GPU, or a
    /// replica of a shared GPU (several pods then hold it).
    pub mig_uuid: Option<String>,
}

/// One MIG instance of a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MigInstance {
    pub gpu_instance_id: u32,
    /// The GPU instance profile, e.g. "3g.40gb".
    pub profile: String,
    pub uuid: String,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    /// This instance's GPM metrics (as the GPU's above), `null` without GPM.
    #[serde(default)]
    pub sm_active_pct: Option<f64>,
    #[serde(default)]
    pub sm_occupancy_pct: Option<f64>,
    #[serde(default)]
    pub tensor_active_pct: Option<f64>,
    #[serde(default)]
    pub dram_bw_pct: Option<f64>,
    /// Its graphics engine's busy share, where a dcgm-exporter gives it per
    /// instance (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NvLink {
    pub link: u32,
    /// `null` while the GPU gives no reading.
    pub active: Option<bool>,
    pub peer_pci_bus_id: Option<String>,
    /// Not active when the agent started (unused by design): not flagged.
    #[serde(default)]
    pub inactive_at_start: bool,
    pub tx_bytes_per_s: Option<f64>,
    pub rx_bytes_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub used_mem_bytes: u64,
    /// Slurm job id, when the process runs in a job's cgroup.
    pub job_id: Option<u64>,
    /// The job's user, when the scheduler is known.
    pub user: Option<String>,
    /// Who runs the process on the node (its uid's name there), as the
    /// agent read it from /proc.
    pub owner: Option<String>,
    /// Its command line (at most 200 bytes).
    pub command: Option<String>,
    /// With `--ray`: the Ray job whose actor or task this process is (by
    /// the pid Ray gives).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ray_job: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IbPort {
    pub device: String,
    pub port: u32,
    pub link_layer: String,
    pub state: Option<String>,
    pub phys_state: Option<String>,
    pub rate_gbps: Option<u32>,
    pub tx_bytes_per_s: Option<f64>,
    pub rx_bytes_per_s: Option<f64>,
    /// Increase of each readable error counter since the previous sample.
    pub errors: BTreeMap<String, u64>,
    /// Counters stuck at their maximum: their true increase is unknown.
    pub saturated: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlagOut {
    pub kind: FlagKind,
    pub severity: Severity,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu: Option<u32>,
    /// "<device>/<port>", e.g. "mlx5_0/1".
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ib_port: Option<String>,
    /// RFC 3339 time the condition began.
    pub since: String,
    pub detail: String,
    pub evidence: BTreeMap<String, f64>,
    /// What to do, from the fault catalog (docs/faults.md): `none`,
    /// `restart_app`, `reset_gpu`, `reboot_node`, `replace`, ...
    pub action: Action,
    /// The action as a sentence, with what it is about and what next.
    pub action_detail: String,
    /// Why the action is more than the catalog's first step, if it is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub escalation: Option<String>,
    /// The flag kind's runbook section.
    pub runbook: String,
}
