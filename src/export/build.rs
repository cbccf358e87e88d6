//! A snapshot made from the store: every node, GPU, link and flag as the
//! console holds them, in the export's types.

use std::collections::BTreeMap;

use fleetop_proto::{ib, throttle};
use serde::Serialize;

use super::document::*;
use crate::model::flag::{Flag, FlagKind, Severity, Subject};
use crate::model::rates::Delta;
use crate::model::sample::{Fabric, GpuDesc, IbPortDesc};
use crate::model::time::rfc3339;
use crate::store::{Link, NodeState, NodeStatus, Store};

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
        (NodeStatus::Connecting, Link::Connected { .. }) if !n.caught_up => Some("reading its history".into()),
        (NodeStatus::Connecting, Link::Connected { .. }) => Some("connected, no sample yet".into()),
        (NodeStatus::Connecting, _) => Some("no answer yet".into()),
        _ => n.sample_age_ms(now_ms).map(|a| format!("no sample for {} s", a / 1000)),
    };
    let info = n.info.as_ref();
    let last = n.last.as_ref();
    let gpus = info
        .map(|d| {
            (d.gpus.iter().enumerate())
                .map(|(k, g)| gpu(n, g, k, store.ray.as_ref(), i))
                .collect()
        })
        .unwrap_or_default();
    let ib_ports = info
        .map(|i| i.ib_ports.iter().enumerate().map(|(k, p)| ib_port(n, k, p)).collect())
        .unwrap_or_default();
    let flags = flags_out(n, status, status_detail.as_deref(), now_ms);
    Node {
        name: n.target.name.clone(),
        address: n.target.address(),
        status: exported(n, status),
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
        last_burn_in: info
            .and_then(|i| i.health.burn_ins.iter().max_by_key(|b| b.ended_ms))
            .map(|b| BurnInOut {
                suite: b.suite.map_or("?", crate::model::bench::Suite::name).into(),
                passed: b.passed,
                ended_at: rfc3339(b.ended_ms),
                requested_by: b.requested_by.clone(),
                failure: (!b.passed).then(|| b.failure()),
            }),
        gpus,
        ib_ports,
        flags,
    }
}

/// Whether a node has answered for a document: its agent described it and
/// sent data that says how it is now (`ok` or `stale`). A node still
/// connecting, still reading its history, or described with no sample yet
/// has not (`export --once` fails when no node has).
pub fn answered(n: &NodeState, now_ms: i64, th: &crate::detect::Thresholds) -> bool {
    n.info.is_some() && matches!(n.status(now_ms, th), NodeStatus::Ok | NodeStatus::Stale)
}

/// The status a document gives a node of status `status`. A node the
/// console is still connecting to is `connecting` while its agent has
/// neither answered nor failed, or answered and is still sending its
/// history (a node caught mid-backfill is not unreachable, and its oldest
/// history says nothing of when it went silent). One whose attempts failed
/// is `unreachable`, with why, whether or not `unreachable_after` has
/// passed: a document is read once, and the attempt did fail.
pub(super) fn exported(n: &NodeState, status: NodeStatus) -> Status {
    match (status, &n.link) {
        (NodeStatus::Ok, _) => Status::Ok,
        (NodeStatus::Stale, _) => Status::Stale,
        (NodeStatus::Unreachable, _) | (NodeStatus::Connecting, Link::Down { .. }) => Status::Unreachable,
        (NodeStatus::Connecting, _) => Status::Connecting,
    }
}

/// The node's active flags; a node whose status is not `ok` and that the
/// detectors have not flagged yet (the console waits `unreachable_after`
/// before it raises an alert, so a fleet starting up pages no one) carries
/// its `stale` or `unreachable` flag all the same: a script reading one
/// document must not take a silent node for a healthy one.
fn flags_out(n: &NodeState, status: NodeStatus, detail: Option<&str>, now_ms: i64) -> Vec<FlagOut> {
    let mut out: Vec<FlagOut> = n.detector.active().map(|f| flag_out(n, f)).collect();
    // A node still connecting has no alert: it is not silent, only not
    // there yet (its status and `unknown` health say so).
    let (kind, severity) = match exported(n, status) {
        Status::Ok | Status::Connecting => return out,
        Status::Stale => (FlagKind::Stale, Severity::Warn),
        Status::Unreachable => (FlagKind::Unreachable, Severity::Crit),
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

/// `Some` of a word that is not empty.
fn text(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// GPU `g`, the `k`th of the node's description: its reading is nearly
/// always the `k`th of the sample, found without a search per GPU (which
/// made a node's export quadratic in its GPUs).
fn gpu(n: &NodeState, g: &GpuDesc, k: usize, ray: Option<&crate::store::ray::RayState>, node: usize) -> Gpu {
    let pos = (n.last.as_ref()).and_then(|l| crate::model::sample::position_of(&l.gpus, g.index, Some(k), |x| x.index));
    let s = pos.and_then(|p| n.last.as_ref().and_then(|l| l.gpus.get(p)));
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
        vendor: match g.vendor {
            crate::model::sample::Vendor::Nvidia => super::document::GpuVendor::Nvidia,
            crate::model::sample::Vendor::Amd => super::document::GpuVendor::Amd,
        },
        compute_partition: g.partition.as_ref().and_then(|p| text(&p.compute)),
        memory_partition: g.partition.as_ref().and_then(|p| text(&p.memory)),
        partition_id: g.partition.as_ref().map(|p| p.id),
        firmware: g.firmware.iter().map(|f| (f.name.clone(), f.version.clone())).collect(),
        hbm_slowdown_temp_c: g.hbm_slowdown_temp_c,
        serial_number: g.serial_number.clone(),
        board_part_number: g.board_part_number.clone(),
        edge_temp_c: r(|s| s.edge_temp_c),
        ras: s
            .map(|s| {
                s.ras
                    .iter()
                    .map(|b| super::document::RasBlock {
                        block: b.block.to_string(),
                        correctable: b.correctable,
                        uncorrectable: b.uncorrectable,
                        deferred: b.deferred,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        xgmi_error_status: r(|s| s.xgmi_error_status),
        events: n.event_codes(g.index).into_iter().map(str::to_string).collect(),
        throttle_detail: s
            .map(|s| s.throttle_detail.iter().map(|w| w.to_string()).collect())
            .unwrap_or_default(),
        retired_pages_pending: r(|s| s.retired_pages_pending),
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
    let s = n.last.as_ref().and_then(|l| match l.ib_ports.get(k) {
        // Nearly always where it is numbered: no search per port.
        Some(x) if x.port as usize == k => Some(x),
        _ => l.ib_ports.iter().find(|x| x.port as usize == k),
    });
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
        detail: f.words(),
        evidence: f.evidence.clone(),
        action: f.action,
        action_detail: f.action_detail(),
        escalation: f.escalation.clone(),
        runbook: fleetop_catalog::runbook(f.kind.name()),
    }
}

impl Health {
    /// The node's health at `status`: what its flags say only while its
    /// data is fresh.
    pub(super) fn of(n: &NodeState, status: NodeStatus) -> Health {
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
