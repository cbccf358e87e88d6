//! The JSON export: typed documents (also the source of the JSON Schema in
//! `docs/export.schema.json`) and their construction from the store.
//!
//! Field names carry their unit. A reading that is not known is `null`, never
//! a made-up zero.

use std::collections::BTreeMap;

use fleetop_proto::{ib, throttle};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::flag::{Action, Flag, FlagKind, Severity, Subject};
use crate::model::rates::Delta;
use crate::model::sample::{Fabric, GpuDesc, IbPortDesc};
use crate::model::sched::Job;
use crate::model::time::rfc3339;
use crate::store::{Link, NodeState, NodeStatus, Store};

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
/// `kube_read_at`/`kube_error`; `slurm_error` beside `scheduler_error`.
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
    pub gpus: Vec<Gpu>,
    pub ib_ports: Vec<IbPort>,
    pub flags: Vec<FlagOut>,
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

impl Health {
    /// The node's health at `status`: what its flags say only while its
    /// data is fresh.
    fn of(n: &NodeState, status: NodeStatus) -> Health {
        if status != NodeStatus::Ok {
            return Health::Unknown;
        }
        match n.worst_severity() {
            Some(Severity::Crit) => Health::Crit,
            Some(Severity::Warn) => Health::Warn,
            Some(Severity::Info) | None => Health::Ok,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Stale,
    Unreachable,
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

/// What `export` writes: a full `Snapshot` (`--view full`, the default) or a
/// `Summary` (`--view summary`). Only for the schema: a reader knows which
/// it asked for, and a summary says so in its `view` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Document {
    Full(Snapshot),
    Summary(Summary),
}

/// The summary view (`export --view summary`): per node and per GPU the
/// headline figures and every flag, about a tenth of a full snapshot, for
/// cron jobs, jq and dashboards that poll often. Same units and the same
/// rule as the full view: a reading that is not known is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// As in the full view (the summary came with 2, additively).
    pub schema_version: u32,
    /// Always "summary": tells this document from a full snapshot.
    pub view: SummaryView,
    /// RFC 3339.
    pub generated_at: String,
    /// As in the full view.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub console_behind_ms: Option<i64>,
    pub nodes: Vec<NodeSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummaryView {
    Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSummary {
    pub name: String,
    /// As in the full view: host:port of the agent (or exporter).
    pub address: String,
    pub status: Status,
    pub status_detail: Option<String>,
    /// As in the full view: the worst flag's severity.
    pub health: Health,
    /// RFC 3339 time of the latest sample.
    pub sampled_at: Option<String>,
    /// Slurm's state word, with `--slurm`.
    pub scheduler_state: Option<String>,
    pub gpus: Vec<GpuSummary>,
    pub ib_ports: Vec<IbPortSummary>,
    /// Every flag of the node, as in the full view.
    pub flags: Vec<FlagOut>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuSummary {
    pub index: u32,
    /// As the full view's: readings are null then.
    pub error: Option<String>,
    pub util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub temp_c: Option<u32>,
    pub power_w: Option<f64>,
    /// GPM SM activity (Hopper and later), `null` without GPM.
    pub sm_active_pct: Option<f64>,
    pub throttle_reasons: Vec<String>,
    /// Slurm jobs of the GPU's processes, distinct, ascending.
    pub job_ids: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IbPortSummary {
    /// "<device>/<port>", as flags name it.
    pub port: String,
    pub state: Option<String>,
    pub rate_gbps: Option<u32>,
}

/// The summary of a full snapshot: the same moment, fewer fields.
pub fn summary(s: &Snapshot) -> Summary {
    Summary {
        schema_version: s.schema_version,
        view: SummaryView::Summary,
        generated_at: s.generated_at.clone(),
        console_behind_ms: s.console_behind_ms,
        nodes: s
            .nodes
            .iter()
            .map(|n| NodeSummary {
                name: n.name.clone(),
                address: n.address.clone(),
                status: n.status,
                status_detail: n.status_detail.clone(),
                health: n.health,
                sampled_at: n.sampled_at.clone(),
                scheduler_state: n.scheduler.as_ref().map(|s| s.state.clone()),
                gpus: n
                    .gpus
                    .iter()
                    .map(|g| {
                        let mut job_ids: Vec<u64> = g.processes.iter().filter_map(|p| p.job_id).collect();
                        job_ids.sort_unstable();
                        job_ids.dedup();
                        GpuSummary {
                            index: g.index,
                            error: g.error.clone(),
                            util_pct: g.util_pct,
                            mem_used_bytes: g.mem_used_bytes,
                            mem_total_bytes: g.mem_total_bytes,
                            temp_c: g.temp_c,
                            power_w: g.power_w,
                            sm_active_pct: g.sm_active_pct,
                            throttle_reasons: g.throttle_reasons.clone(),
                            job_ids,
                        }
                    })
                    .collect(),
                ib_ports: n
                    .ib_ports
                    .iter()
                    .map(|p| IbPortSummary {
                        port: format!("{}/{}", p.device, p.port),
                        state: p.state.clone(),
                        rate_gbps: p.rate_gbps,
                    })
                    .collect(),
                flags: n.flags.clone(),
            })
            .collect(),
    }
}

/// The JSON Schema of the export's documents (a full snapshot or a
/// summary), as committed in `docs/export.schema.json`.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(Document);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// The snapshot of the whole store at console time `now_ms`.
pub fn snapshot(store: &Store, now_ms: i64) -> Snapshot {
    Snapshot {
        nodes: nodes(store, now_ms).collect(),
        ..head(store, now_ms)
    }
}

/// A snapshot without its nodes.
fn head(store: &Store, now_ms: i64) -> Snapshot {
    let sched = &store.scheduler;
    Snapshot {
        schema_version: SCHEMA_VERSION,
        generated_at: rfc3339(now_ms),
        scheduler_read_at: sched.read_ms.map(rfc3339),
        scheduler_error: sched.error.clone(),
        slurm_error: sched.error.clone(),
        ray_read_at: store.ray.as_ref().and_then(|r| r.health.read_ms).map(rfc3339),
        ray_error: store.ray.as_ref().and_then(|r| r.health.error.clone()),
        kube_read_at: store
            .kube
            .known
            .then_some(store.kube.health.read_ms)
            .flatten()
            .map(rfc3339),
        kube_error: store.kube.known.then(|| store.kube.health.error.clone()).flatten(),
        console_behind_ms: Some(store.lag.behind_ms).filter(|&ms| ms > 0),
        nodes: Vec::new(),
    }
}

fn nodes(store: &Store, now_ms: i64) -> impl Iterator<Item = Node> + '_ {
    store
        .nodes
        .iter()
        .enumerate()
        .map(move |(i, n)| node(i, n, store, now_ms))
}

/// The document `snapshot` makes, serialized a node at a time as it is
/// made: held whole, a 10,000-node snapshot is half a gigabyte, and
/// `export --once` spent a tenth of its time faulting that memory in.
pub struct Streamed<'a> {
    pub store: &'a Store,
    pub now_ms: i64,
}

impl Serialize for Streamed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Every field named: one added to `Snapshot` does not compile here
        // until it is written.
        let Snapshot {
            schema_version,
            generated_at,
            scheduler_read_at,
            scheduler_error,
            slurm_error,
            ray_read_at,
            ray_error,
            kube_read_at,
            kube_error,
            console_behind_ms,
            nodes: _,
        } = head(self.store, self.now_ms);
        let mut m = s.serialize_struct("Snapshot", 11)?;
        m.serialize_field("schema_version", &schema_version)?;
        m.serialize_field("generated_at", &generated_at)?;
        for (name, v) in [
            ("scheduler_read_at", scheduler_read_at),
            ("scheduler_error", scheduler_error),
            ("slurm_error", slurm_error),
            ("ray_read_at", ray_read_at),
            ("ray_error", ray_error),
            ("kube_read_at", kube_read_at),
            ("kube_error", kube_error),
        ] {
            match v {
                Some(v) => m.serialize_field(name, &v)?,
                None => m.skip_field(name)?,
            }
        }
        match console_behind_ms {
            Some(ms) => m.serialize_field("console_behind_ms", &ms)?,
            None => m.skip_field("console_behind_ms")?,
        }
        m.serialize_field("nodes", &Lazy(self))?;
        m.end()
    }
}

/// A snapshot's nodes, each made as it is serialized.
struct Lazy<'a>(&'a Streamed<'a>);

impl Serialize for Lazy<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(nodes(self.0.store, self.0.now_ms))
    }
}

fn node(i: usize, n: &NodeState, store: &Store, now_ms: i64) -> Node {
    let status = n.status(now_ms, &store.thresholds);
    let status_detail = match (status, &n.link) {
        (NodeStatus::Ok, _) => None,
        (_, Link::Down { error, .. }) => Some(error.clone()),
        (NodeStatus::Connecting, _) => Some("no answer yet".into()),
        _ => n.sample_age_ms(now_ms).map(|a| format!("no sample for {} s", a / 1000)),
    };
    let info = n.info.as_ref();
    let last = n.last.as_ref();
    let gpus = info
        .map(|d| d.gpus.iter().map(|g| gpu(n, g, store.ray.as_ref(), i)).collect())
        .unwrap_or_default();
    let ib_ports = info
        .map(|i| i.ib_ports.iter().enumerate().map(|(k, p)| ib_port(n, k, p)).collect())
        .unwrap_or_default();
    let flags = flags_out(n, status, status_detail.as_deref(), now_ms);
    Node {
        name: n.target.name.clone(),
        address: n.target.address(),
        status: match status {
            NodeStatus::Ok => Status::Ok,
            NodeStatus::Stale => Status::Stale,
            NodeStatus::Unreachable | NodeStatus::Connecting => Status::Unreachable,
        },
        status_detail,
        health: Health::of(n, status),
        hostname: info.map(|i| i.hostname.clone()),
        agent: info.map(|i| AgentDesc {
            version: i.agent_version.clone(),
            backend: i.backend.clone(),
            driver_version: i.driver_version.clone(),
            cuda_version: i.cuda_version.clone(),
            sample_interval_ms: i.interval_ms,
            note: i.gpu_note.clone(),
        }),
        sampled_at: last.map(|s| rfc3339(s.time_ms)),
        host: last.and_then(|s| s.host).map(|h| Host {
            cpu_pct: h.cpu_pct,
            mem_used_bytes: h.mem_used_bytes,
            mem_total_bytes: h.mem_total_bytes,
            load1: h.load1,
            uptime_s: h.uptime_s,
        }),
        scheduler: n.scheduler.as_ref().map(|v| Scheduler {
            state: v.node.state.clone(),
            not_responding: v.node.not_responding,
            reason: v.node.reason.clone(),
            reason_user: v.node.reason_user.clone(),
            reason_time: v.node.reason_time.clone(),
            partitions: v.node.partitions.clone(),
            jobs: v.jobs.clone(),
        }),
        rack: n.rack.clone(),
        ray: store.ray.as_ref().and_then(|r| ray_node(r, i)),
        gpus,
        ib_ports,
        flags,
    }
}

/// The node's active flags; a node whose status is not `ok` and that the
/// detectors have not flagged yet (the console waits `unreachable_after`
/// before it raises an alert, so a fleet starting up pages no one) carries
/// its `stale` or `unreachable` flag all the same: a script reading one
/// document must not take a silent node for a healthy one.
fn flags_out(n: &NodeState, status: NodeStatus, detail: Option<&str>, now_ms: i64) -> Vec<FlagOut> {
    let mut out: Vec<FlagOut> = n.detector.active().map(|f| flag_out(n, f)).collect();
    let (kind, severity) = match status {
        NodeStatus::Ok => return out,
        NodeStatus::Stale => (FlagKind::Stale, Severity::Warn),
        NodeStatus::Unreachable | NodeStatus::Connecting => (FlagKind::Unreachable, Severity::Crit),
    };
    let says = |k: FlagKind| {
        out.iter()
            .any(|f| f.kind == k && f.gpu.is_none() && f.ib_port.is_none())
    };
    if !says(FlagKind::Stale) && !says(FlagKind::Unreachable) {
        let since = match &n.link {
            Link::Down { since_ms, .. } => n.last.as_ref().map_or(*since_ms, |l| l.time_ms),
            _ => n.last.as_ref().map_or(now_ms, |l| l.time_ms),
        };
        let f = crate::detect::flag(
            kind,
            severity,
            Subject::Node,
            since,
            detail.unwrap_or("no answer yet").to_string(),
            &[],
        );
        out.insert(0, flag_out(n, &f));
    }
    out
}

fn ray_node(ray: &crate::store::ray::RayState, i: usize) -> Option<RayNodeOut> {
    let r = ray.node(i)?;
    Some(RayNodeOut {
        node_id: r.id.clone(),
        name: r.name.clone(),
        ip: r.ip.clone(),
        head: r.head,
        status: r.status.word().into(),
        gpus_total: r.gpus_total,
        gpus_used: r.gpus_used,
        work: ray
            .work(i)
            .map(|w| RayWorkOut {
                kind: match w.kind {
                    crate::model::ray::RayWorkKind::Actor => "actor".into(),
                    crate::model::ray::RayWorkKind::Task => "task".into(),
                },
                job: w.job.clone(),
                entrypoint: ray.snap.job(&w.job).and_then(|j| j.entrypoint.clone()),
                what: w.what.clone(),
                pid: w.pid,
                gpus: w.gpus,
            })
            .collect(),
    })
}

fn gpu(n: &NodeState, g: &GpuDesc, ray: Option<&crate::store::ray::RayState>, node: usize) -> Gpu {
    let s = n.gpu(g.index);
    let pos = n
        .last
        .as_ref()
        .and_then(|l| l.gpus.iter().position(|x| x.index == g.index));
    let rates = pos.and_then(|p| n.derived.gpus.get(p));
    let r = |f: fn(&crate::model::sample::GpuReading) -> Option<u32>| s.and_then(f);
    Gpu {
        index: g.index,
        uuid: g.uuid.clone(),
        model: g.model.clone(),
        pci_bus_id: g.pci_bus_id.clone(),
        error: s.and_then(|s| s.error.as_ref()).map(|e| e.name().to_string()),
        util_pct: r(|s| s.util_pct),
        mem_util_pct: r(|s| s.mem_util_pct),
        mem_used_bytes: s.and_then(|s| s.mem_used_bytes),
        mem_total_bytes: g.mem_total_bytes,
        temp_c: r(|s| s.temp_c),
        hbm_temp_c: r(|s| s.hbm_temp_c),
        slowdown_temp_c: g.slowdown_temp_c,
        power_w: s.and_then(|s| s.power_w),
        power_limit_w: s.and_then(|s| s.power_limit_w).or(g.power_limit_w),
        energy_j: s.and_then(|s| s.energy_mj).map(|mj| mj as f64 / 1000.0),
        sm_clock_mhz: r(|s| s.sm_clock_mhz),
        sm_clock_max_mhz: g.max_sm_clock_mhz,
        mem_clock_mhz: r(|s| s.mem_clock_mhz),
        throttle_reasons: s.and_then(|s| s.throttle_mask).map(throttle::names).unwrap_or_default(),
        throttle_mask: s.and_then(|s| s.throttle_mask),
        pcie_tx_bytes_per_s: s.and_then(|s| s.pcie_tx_bytes_per_s),
        pcie_rx_bytes_per_s: s.and_then(|s| s.pcie_rx_bytes_per_s),
        pcie_replay_count: s.and_then(|s| s.pcie_replay_count),
        ecc_corrected_volatile: s.and_then(|s| s.ecc_corrected_volatile),
        ecc_uncorrected_volatile: s.and_then(|s| s.ecc_uncorrected_volatile),
        retired_pages: r(|s| s.retired_pages),
        remapped_rows_correctable: r(|s| s.remapped_rows_correctable),
        remapped_rows_uncorrectable: r(|s| s.remapped_rows_uncorrectable),
        remap_pending: s.and_then(|s| s.remap_pending),
        remap_failed: s.and_then(|s| s.remap_failed),
        xids: n.xid_codes(g.index),
        pcie_link_gen: s.and_then(|s| s.pcie_link).map(|l| l.gen_),
        pcie_link_width: s.and_then(|s| s.pcie_link).map(|l| l.width),
        pcie_link_max_gen: g.pcie_max.map(|l| l.gen_),
        pcie_link_max_width: g.pcie_max.map(|l| l.width),
        persistence_mode: s.and_then(|s| s.persistence),
        fabric_state: s.and_then(|s| s.fabric).map(|f| {
            match f {
                Fabric::NotSupported => "not_supported",
                Fabric::NotStarted => "not_started",
                Fabric::InProgress => "in_progress",
                Fabric::Completed { status: 0 } => "registered",
                Fabric::Completed { .. } => "failed",
            }
            .to_string()
        }),
        vbios_version: g.vbios_version.clone(),
        sm_active_pct: s.and_then(|s| s.gpm).map(|m| m.sm_active_pct),
        sm_occupancy_pct: s.and_then(|s| s.gpm).map(|m| m.sm_occupancy_pct),
        tensor_active_pct: s.and_then(|s| s.gpm).map(|m| m.tensor_active_pct),
        dram_bw_pct: s.and_then(|s| s.gpm).map(|m| m.dram_bw_pct),
        mig: s
            .map(|s| {
                s.mig
                    .iter()
                    .map(|m| MigInstance {
                        gpu_instance_id: m.gpu_instance_id,
                        profile: m.profile.clone(),
                        uuid: m.uuid.clone(),
                        mem_used_bytes: m.mem_used_bytes,
                        mem_total_bytes: m.mem_total_bytes,
                        sm_active_pct: m.gpm.map(|x| x.sm_active_pct),
                        sm_occupancy_pct: m.gpm.map(|x| x.sm_occupancy_pct),
                        tensor_active_pct: m.gpm.map(|x| x.tensor_active_pct),
                        dram_bw_pct: m.gpm.map(|x| x.dram_bw_pct),
                        util_pct: m.util_pct,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        nvlink: g
            .nvlinks
            .iter()
            .enumerate()
            .map(|(i, l)| NvLink {
                link: l.link,
                active: s.and_then(|s| s.nvlink_up(i)),
                peer_pci_bus_id: l.peer_pci_bus_id.as_deref().map(str::to_string),
                inactive_at_start: l.inactive_at_start,
                tx_bytes_per_s: rates.and_then(|r| r.tx(i)),
                rx_bytes_per_s: rates.and_then(|r| r.rx(i)),
            })
            .collect(),
        processes: s
            .map(|s| {
                s.processes
                    .iter()
                    .map(|p| Process {
                        pid: p.pid,
                        used_mem_bytes: p.used_mem_bytes,
                        job_id: p.job_id,
                        user: p.job_id.and_then(|j| n.job_user(j)).map(String::from),
                        owner: p.owner.as_deref().map(str::to_string),
                        command: p.command.as_deref().map(str::to_string),
                        ray_job: ray.and_then(|r| r.work_of_pid(node, p.pid)).map(|w| w.job.clone()),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        pods: s
            .map(|s| {
                s.pods
                    .iter()
                    .map(|p| Pod {
                        namespace: p.namespace.clone(),
                        pod: p.pod.clone(),
                        container: p.container.clone(),
                        mig_uuid: p.mig_uuid.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn ib_port(n: &NodeState, k: usize, p: &IbPortDesc) -> IbPort {
    let s = n
        .last
        .as_ref()
        .and_then(|l| l.ib_ports.iter().find(|x| x.port as usize == k));
    let r = n.derived.ib.get(k);
    let mut errors = BTreeMap::new();
    let mut saturated = Vec::new();
    for (i, d) in r.map(|r| r.errors.as_slice()).unwrap_or(&[]).iter().enumerate() {
        let name = ib::counter_name(i).to_string();
        match d {
            Some(Delta::Exact(v)) => {
                errors.insert(name, *v);
            }
            Some(Delta::Saturated(v)) => {
                errors.insert(name.clone(), *v);
                saturated.push(name);
            }
            Some(Delta::Reset) | None => {}
        }
    }
    IbPort {
        device: p.device.clone(),
        port: p.port,
        link_layer: p.link_layer.clone(),
        state: s.and_then(|s| s.state.as_deref().map(str::to_string)),
        phys_state: s.and_then(|s| s.phys_state.as_deref().map(str::to_string)),
        rate_gbps: s.and_then(|s| s.rate_gbps),
        tx_bytes_per_s: r.and_then(|r| r.tx_bytes_per_s),
        rx_bytes_per_s: r.and_then(|r| r.rx_bytes_per_s),
        errors,
        saturated,
    }
}

fn flag_out(n: &NodeState, f: &Flag) -> FlagOut {
    FlagOut {
        kind: f.kind,
        severity: f.severity,
        gpu: match f.subject {
            Subject::Gpu(g) => Some(g),
            _ => None,
        },
        ib_port: match f.subject {
            Subject::IbPort(p) => Some(n.ib_port_name(p)),
            _ => None,
        },
        since: rfc3339(f.since_ms),
        detail: f.detail.clone(),
        evidence: f.evidence.clone(),
        action: f.action,
        action_detail: f.action_detail(),
        escalation: f.escalation.clone(),
        runbook: fleetop_catalog::runbook(f.kind.name()),
    }
}
