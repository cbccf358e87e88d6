//! Wire to domain, once. Everything the console holds about a node passes
//! through here: prost's "0 or empty means unknown" becomes `None`, the
//! agent's clock becomes the console's, and the per-stream delta encoding is
//! undone. No other module reads a wire type's fields.

use std::borrow::Cow;
use std::sync::Arc;

use fleetop_proto::pb;
use fleetop_proto::wire::{self, BadDelta};

use crate::model::sample::{
    Fabric, FaultRecord, Gpm, GpuDesc, GpuError, GpuProcess, GpuReading, HostReading, IbPortDesc, IbReading,
    MigReading, NodeDesc, NodeHealth, NodeSample, NvLinkDesc, PcieLink, PodRef, Sxid, Xid,
};

fn text(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn nz<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

/// A list at its length. A description is held for as long as its node
/// is, and a list collected from the wire's in place keeps the wire's
/// allocation: 32 NVLink entries' room a GPU for 18 links.
fn exact<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

/// An agent's description of its node.
pub fn node_desc(info: pb::NodeInfo) -> NodeDesc {
    // What a node's NVLinks connect to is a few NVSwitches, named on every
    // link of every GPU (144 times on an HGX H100): one copy of each name.
    let mut peers: Vec<Arc<str>> = Vec::new();
    let desc = NodeDesc {
        hostname: info.hostname,
        agent_version: info.agent_version,
        backend: info.backend,
        driver_version: text(info.driver_version),
        cuda_version: text(info.cuda_version),
        interval_ms: nz(i64::from(info.sample_interval_ms)).unwrap_or(1000),
        gpus: exact(info.gpus.into_iter().map(|g| gpu_desc(g, &mut peers)).collect()),
        ib_ports: exact(
            info.ib_ports
                .into_iter()
                .map(|p| IbPortDesc {
                    device: p.device,
                    port: p.port,
                    link_layer: p.link_layer,
                })
                .collect(),
        ),
        gpu_note: text(info.gpu_backend_note),
        instance: info.agent_instance,
        health: NodeHealth {
            gpus_missing_pci: info.gpus_missing_pci,
            expect_gpus: nz(info.expect_gpus),
            peermem: match info.peermem {
                1 => Some(false),
                2 => Some(true),
                _ => None,
            },
            fault_journal: info
                .fault_journal
                .into_iter()
                .map(|r| FaultRecord {
                    gpu_uuid: r.gpu_uuid,
                    kind: r.kind,
                    code: r.code,
                    time_ms: r.time_ms,
                    boot_id: text(r.boot_id),
                })
                .collect(),
            boot_id: text(info.boot_id),
        },
    };
    desc.printable()
}

/// `name` as the copy in `names`, added there if it is new.
fn shared_name(names: &mut Vec<Arc<str>>, name: String) -> Arc<str> {
    if let Some(n) = names.iter().find(|n| n.as_ref() == name.as_str()) {
        return n.clone();
    }
    let n: Arc<str> = name.into();
    names.push(n.clone());
    n
}

/// A PCIe link from a generation and a width, both known or neither.
fn pcie_link(gen_: u32, width: u32) -> Option<PcieLink> {
    (gen_ != 0 && width != 0).then_some(PcieLink { gen_, width })
}

fn gpu_desc(g: pb::GpuInfo, peers: &mut Vec<Arc<str>>) -> GpuDesc {
    GpuDesc {
        index: g.index,
        uuid: g.uuid,
        model: g.model,
        pci_bus_id: g.pci_bus_id,
        mem_total_bytes: nz(g.mem_total_bytes),
        power_limit_w: nz(g.power_limit_mw).map(|mw| f64::from(mw) / 1000.0),
        max_sm_clock_mhz: nz(g.max_sm_clock_mhz),
        max_mem_clock_mhz: nz(g.max_mem_clock_mhz),
        slowdown_temp_c: nz(g.slowdown_temp_c),
        shutdown_temp_c: nz(g.shutdown_temp_c),
        nvlinks: exact(
            g.nvlinks
                .into_iter()
                .map(|l| NvLinkDesc {
                    link: l.link,
                    peer_pci_bus_id: text(l.peer_pci_bus_id).map(|p| shared_name(peers, p)),
                    inactive_at_start: l.inactive_at_start,
                })
                .collect(),
        ),
        vbios_version: text(g.vbios_version),
        pcie_max: pcie_link(g.pcie_max_gen, g.pcie_max_width),
    }
}

/// A whole wire sample (delta already undone), its times moved to the
/// console's clock by subtracting `skew_ms` (agent clock minus console clock).
pub fn sample(s: &pb::Sample, skew_ms: i64) -> NodeSample {
    sample_with(s, skew_ms, &mut LastProcesses::new(), &[])
}

/// As `sample`, sharing the processes of the stream's previous sample
/// (`last`) where they did not change: without a look where the wire says
/// so (`kept`, per GPU), by comparing them otherwise.
fn sample_with(s: &pb::Sample, skew_ms: i64, last: &mut LastProcesses, kept: &[bool]) -> NodeSample {
    last.resize_with(s.gpus.len(), Default::default);
    NodeSample {
        seq: s.seq,
        time_ms: s.time_ms - skew_ms,
        host: s.host.as_ref().map(|h| HostReading {
            cpu_pct: f64::from(h.cpu_permille) / 10.0,
            mem_used_bytes: h.mem_used_bytes,
            mem_total_bytes: h.mem_total_bytes,
            load1: f64::from(h.load1_x100) / 100.0,
            uptime_s: h.uptime_s,
        }),
        gpus: s
            .gpus
            .iter()
            .zip(last.iter_mut())
            .enumerate()
            .map(|(i, (g, was))| gpu_reading(g, skew_ms, was, kept.get(i) == Some(&true)))
            .collect(),
        ib_ports: s.ib_ports.iter().map(ib_reading).collect(),
        sxids: s
            .sxids
            .iter()
            .map(|x| Sxid {
                sxid: x.sxid,
                time_ms: x.time_ms - skew_ms,
                // The kernel log's words: escaped (controls, bidi
                // overrides) before anything shows them.
                switch_pci: fleetop_proto::input::printable(&x.switch_pci, 64),
                fatal: x.fatal,
                text: fleetop_proto::input::printable(&x.text, 500),
            })
            .collect(),
    }
}

/// Per GPU position, the processes of a stream's last sample.
///
/// The same processes run for hours and every sample lists them: a list
/// that is what it was is the last sample's list itself (`Arc`), and a list
/// that changed shares the names of the pids it had, rather than names made
/// printable, copied and freed again every second for every process of
/// every node (a tenth of a large console's CPU, in `perf`, and the list's
/// own allocation and freeing as much again). Where the wire says a list
/// did not change (`wire::Decoder::processes_kept`) it is not even compared:
/// its names, a second cold, were still 7% of that CPU.
type LastProcesses = Vec<Arc<[GpuProcess]>>;

/// Bounds of a process's names on screen, in characters.
const OWNER_MAX: usize = 64;
const COMMAND_MAX: usize = 200;

/// The processes on a GPU, given what its last sample had (`was`, which
/// becomes what this one has), and whether the wire says they are those
/// (`kept`).
fn processes(got: &[pb::GpuProcess], was: &mut Arc<[GpuProcess]>, kept: bool) -> Arc<[GpuProcess]> {
    if kept {
        return Arc::clone(was);
    }
    let same = |w: &GpuProcess, p: &pb::GpuProcess| {
        w.pid == p.pid
            && w.used_mem_bytes == p.used_mem_bytes
            && w.job_id == nz(p.job_id)
            && same_name(w.owner.as_ref(), &p.user, OWNER_MAX)
            && same_name(w.command.as_ref(), &p.command, COMMAND_MAX)
    };
    if was.len() != got.len() || !was.iter().zip(got).all(|(w, p)| same(w, p)) {
        let now: Arc<[GpuProcess]> = got
            .iter()
            .map(|p| {
                let w = was.iter().find(|w| w.pid == p.pid);
                GpuProcess {
                    pid: p.pid,
                    used_mem_bytes: p.used_mem_bytes,
                    job_id: nz(p.job_id),
                    owner: shared(w.and_then(|w| w.owner.as_ref()), &p.user, OWNER_MAX),
                    command: shared(w.and_then(|w| w.command.as_ref()), &p.command, COMMAND_MAX),
                }
            })
            .collect();
        *was = now;
    }
    Arc::clone(was)
}

/// Whether `raw` made printable (at most `max` characters) gives `was`: a
/// name no longer than `max` bytes that equals a printable result needs no
/// escape, so it prints as itself.
fn same_name(was: Option<&Arc<str>>, raw: &str, max: usize) -> bool {
    match was {
        None => raw.is_empty(),
        Some(w) => raw.len() <= max && **w == *raw,
    }
}

/// `raw` made printable (at most `max` characters), or `was` where that is
/// what it gives.
fn shared(was: Option<&Arc<str>>, raw: &str, max: usize) -> Option<Arc<str>> {
    match was {
        _ if raw.is_empty() => None,
        Some(w) if same_name(Some(w), raw, max) => Some(Arc::clone(w)),
        _ => Some(Arc::from(fleetop_proto::input::printable(raw, max))),
    }
}

fn gpu_reading(g: &pb::GpuSample, skew_ms: i64, was: &mut Arc<[GpuProcess]>, kept: bool) -> GpuReading {
    use fleetop_proto::absent as a;
    // Taken even from a GPU that did not answer, whose reading shows none:
    // `was` must stay what the wire's base holds, for the next `kept`.
    let processes = processes(&g.processes, was, kept);
    let xids = g
        .xids
        .iter()
        .map(|x| Xid {
            xid: x.xid,
            time_ms: x.time_ms - skew_ms,
        })
        .collect();
    let error = match g.error.as_str() {
        "" => None,
        "gpu_lost" => Some(GpuError::Lost),
        // An agent before `absent` said this for a MIG GPU's utilization
        // alone; it is no reading, not a GPU that failed.
        "not_supported" => None,
        s if s.starts_with("nvml_stuck") => Some(GpuError::Stuck {
            text: s.to_string(),
            // How long, for the flag's severity; 0 if worded otherwise.
            for_ms: s
                .rsplit_once("no answer for ")
                .and_then(|(_, n)| n.strip_suffix(" ms")?.parse().ok())
                .unwrap_or(0),
        }),
        s => Some(GpuError::Other(fleetop_proto::input::printable(s, 200))),
    };
    if error.is_some() {
        // No readings from a GPU that did not answer; XIDs still count.
        return GpuReading {
            index: g.index,
            error,
            xids,
            pods: pods(&g.pods),
            ..Default::default()
        };
    }
    let ab = g.absent;
    let nvlinks_down = if g.nvlink_state.is_empty() {
        // Older agents: the mask (32 links at most).
        (0..32).filter(|b| g.nvlink_down_mask & (1 << b) != 0).collect()
    } else {
        // NVML_NVLINK_STATE: only 0 is inactive; 2 (sleep) is up.
        g.nvlink_state
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == 0)
            .map(|(i, _)| i)
            .collect()
    };
    GpuReading {
        index: g.index,
        error: None,
        util_pct: opt(ab, a::UTIL, g.util_pct),
        mem_util_pct: opt(ab, a::MEM_UTIL, g.mem_util_pct),
        mem_used_bytes: opt(ab, a::MEM_USED, g.mem_used_bytes),
        temp_c: opt(ab, a::TEMP, g.temp_c),
        // NVML reports no HBM temperature as 0: no memory is at 0 °C.
        hbm_temp_c: opt(ab, a::HBM_TEMP, g.hbm_temp_c).and_then(nz),
        power_w: opt(ab, a::POWER, f64::from(g.power_mw) / 1000.0),
        power_limit_w: opt(ab, a::POWER_LIMIT, g.power_limit_mw)
            .and_then(nz)
            .map(|mw| f64::from(mw) / 1000.0),
        energy_mj: opt(ab, a::ENERGY, g.energy_mj),
        sm_clock_mhz: opt(ab, a::SM_CLOCK, g.sm_clock_mhz),
        mem_clock_mhz: opt(ab, a::MEM_CLOCK, g.mem_clock_mhz),
        throttle_mask: opt(ab, a::THROTTLE, g.throttle_reasons),
        pcie_tx_bytes_per_s: opt(ab, a::PCIE_THROUGHPUT, f64::from(g.pcie_tx_kbps) * 1000.0),
        pcie_rx_bytes_per_s: opt(ab, a::PCIE_THROUGHPUT, f64::from(g.pcie_rx_kbps) * 1000.0),
        pcie_replay_count: opt(ab, a::PCIE_REPLAY, g.pcie_replay_count),
        ecc_corrected_volatile: opt(ab, a::ECC, g.ecc_corrected_volatile),
        ecc_uncorrected_volatile: opt(ab, a::ECC, g.ecc_uncorrected_volatile),
        retired_pages: Some(g.retired_pages),
        remapped_rows_correctable: opt(ab, a::REMAPPED_ROWS, g.remapped_rows_correctable),
        remapped_rows_uncorrectable: opt(ab, a::REMAPPED_ROWS, g.remapped_rows_uncorrectable),
        remap_pending: opt(ab, a::REMAPPED_ROWS, g.remapped_rows_pending != 0),
        remap_failed: opt(ab, a::REMAPPED_ROWS, g.remapped_rows_failed != 0),
        xids,
        nvlinks_down,
        nvlink_tx_kib: g.nvlink_tx_kib.clone(),
        nvlink_rx_kib: g.nvlink_rx_kib.clone(),
        processes,
        mig: g
            .mig
            .iter()
            .map(|m| MigReading {
                gpu_instance_id: m.gpu_instance_id,
                profile: fleetop_proto::input::printable(&m.profile, 32),
                uuid: fleetop_proto::input::printable(&m.uuid, 96),
                mem_used_bytes: nz(m.mem_total_bytes).map(|_| m.mem_used_bytes),
                mem_total_bytes: nz(m.mem_total_bytes),
                gpm: m.gpm.as_ref().map(gpm),
                // NVML gives no utilization per MIG instance.
                util_pct: None,
            })
            .collect(),
        gpm: g.gpm.as_ref().map(gpm),
        pcie_link: pcie_link(g.pcie_gen, g.pcie_width),
        fabric: match g.fabric_state {
            1 => Some(Fabric::NotSupported),
            2 => Some(Fabric::NotStarted),
            3 => Some(Fabric::InProgress),
            4 => Some(Fabric::Completed {
                status: g.fabric_status,
            }),
            _ => None,
        },
        persistence: match g.persistence {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        },
        pods: pods(&g.pods),
    }
}

/// The containers holding a GPU, as the agent read them from the kubelet:
/// names made printable (they reach the screen) and bounded (Kubernetes
/// allows 253 characters for a pod's name, 63 for a namespace or container).
fn pods(got: &[pb::PodRef]) -> Vec<PodRef> {
    let mut v: Vec<PodRef> = got
        .iter()
        .map(|p| PodRef {
            namespace: fleetop_proto::input::printable(&p.namespace, 63),
            pod: fleetop_proto::input::printable(&p.pod, 253),
            container: fleetop_proto::input::printable(&p.container, 63),
            mig_uuid: (!p.mig_uuid.is_empty()).then(|| fleetop_proto::input::printable(&p.mig_uuid, 64)),
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// GPM metrics: hundredths of a percent on the wire.
fn gpm(m: &pb::Gpm) -> Gpm {
    Gpm {
        sm_active_pct: f64::from(m.sm_active_cpct) / 100.0,
        sm_occupancy_pct: f64::from(m.sm_occupancy_cpct) / 100.0,
        tensor_active_pct: f64::from(m.tensor_active_cpct) / 100.0,
        dram_bw_pct: f64::from(m.dram_bw_cpct) / 100.0,
    }
}

/// A reading, unless the agent said (in `absent`) the GPU did not give it.
fn opt<T>(absent: u32, bit: u32, v: T) -> Option<T> {
    (absent & bit == 0).then_some(v)
}

fn ib_reading(p: &pb::IbSample) -> IbReading {
    let present = |i: usize| i < 32 && p.errors_present_mask & (1 << i) != 0;
    let errors = std::array::from_fn(|i| present(i).then(|| p.errors.get(i).copied()).flatten());
    IbReading {
        port: p.port,
        state: port_word(&p.state),
        phys_state: port_word(&p.phys_state),
        rate_gbps: nz(p.rate_gbps),
        tx_bytes: p.tx_bytes,
        rx_bytes: p.rx_bytes,
        tx_packets: p.tx_packets,
        rx_packets: p.rx_packets,
        errors,
    }
}

/// A port state word as the agent read it from sysfs; `None` for none.
fn port_word(s: &str) -> Option<Cow<'static, str>> {
    use fleetop_proto::ib::{PHYS_STATES, PORT_STATES};
    match PORT_STATES.iter().chain(&PHYS_STATES).find(|w| **w == s) {
        Some(w) => Some(Cow::Borrowed(*w)),
        None => text(s.to_string()).map(Cow::Owned),
    }
}

/// Why part of a stream's history could not be taken in.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HistoryError {
    #[error("a history entry is not a sample: {0}")]
    Undecodable(#[from] prost::DecodeError),
    #[error(transparent)]
    BadDelta(#[from] BadDelta),
}

/// How far ahead of the console a live sample may seem before the agent's
/// clock is taken to have stepped: more than network delay ever explains.
const STEP_MS: i64 = 2000;

/// The decoding state of one connection to one agent: the wire's (the last
/// whole sample, the base of the next delta) and the clock skew.
#[derive(Debug, Default)]
pub struct Stream {
    wire: wire::Decoder,
    /// Agent clock minus console clock, measured on this connection.
    skew_ms: i64,
    /// The history has arrived: samples now come as they are taken, so
    /// their time can be checked against the console's.
    live: bool,
    processes: LastProcesses,
}

impl Stream {
    /// The node description that opens the connection; measures the skew
    /// from the agent's clock reading in it (`now_ms`: when it arrived).
    pub fn info(&mut self, info: pb::NodeInfo, now_ms: i64) -> NodeDesc {
        self.skew_ms = info.agent_time_ms - now_ms;
        self.wire = wire::Decoder::default();
        self.live = false;
        node_desc(info)
    }

    /// The state a second stream from the same agent process starts with,
    /// when that stream does not describe the node again: the clock skew
    /// measured on this one (the same clock), nothing of its samples.
    pub fn rejoining(&self) -> Stream {
        Stream {
            skew_ms: self.skew_ms,
            ..Stream::default()
        }
    }

    pub fn caught_up(&mut self) {
        self.live = true;
    }

    /// One sample as it arrived (perhaps a delta), at console time `now_ms`.
    ///
    /// An agent whose clock steps while connected would otherwise have its
    /// samples dated wrongly for as long as the connection lasts: a live
    /// sample dated before the previous one, or in the future, re-measures
    /// the skew from itself (it was taken just now).
    pub fn sample(&mut self, got: pb::Sample, now_ms: i64) -> Result<NodeSample, BadDelta> {
        let last_ms = self.wire.base().map(|p| p.time_ms);
        let (whole, kept) = self.wire.decode_kept(got)?;
        if self.live {
            let went_back = last_ms.is_some_and(|t| whole.time_ms <= t);
            let ahead = whole.time_ms - self.skew_ms - now_ms > STEP_MS;
            if went_back || ahead {
                self.skew_ms = whole.time_ms - now_ms;
            }
        }
        // Converted from the kept base rather than from a copy of it.
        Ok(sample_with(whole, self.skew_ms, &mut self.processes, kept))
    }

    /// Part of the history, many samples in one message (each entry an
    /// encoded sample, a delta against the one before as on the live
    /// stream), at console time `now_ms`.
    pub fn history(&mut self, h: pb::History, now_ms: i64) -> Result<Vec<NodeSample>, HistoryError> {
        h.samples
            .iter()
            .map(|bytes| self.history_sample(bytes, now_ms))
            .collect()
    }

    /// One entry of a `History` message. A source hands each on before it
    /// decodes the next: a batch decoded whole, in every node's task at
    /// once, was most of a large console's memory at start.
    pub fn history_sample(&mut self, bytes: &[u8], now_ms: i64) -> Result<NodeSample, HistoryError> {
        use prost::Message;
        Ok(self.sample(pb::Sample::decode(bytes)?, now_ms)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sxids_kernel_log_text_is_escaped_once_decoded() {
        let s = pb::Sample {
            sxids: vec![pb::SxidEvent {
                sxid: 12028,
                text: "Non-fatal \u{202e}lortnoc \u{1b}[2J".into(),
                switch_pci: "0000:05:00.0\u{7}".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let d = sample(&s, 0);
        assert_eq!(d.sxids[0].text, "Non-fatal \\u{202e}lortnoc \\u{1b}[2J");
        assert_eq!(d.sxids[0].switch_pci, "0000:05:00.0\\u{7}");
    }

    #[test]
    fn an_agents_description_and_errors_are_made_printable_once_decoded() {
        // A hostile agent (or a GPU's firmware) names its node, GPUs and
        // MIG profiles: none of it reaches the screen raw, and a name of a
        // megabyte is cut.
        let evil = "x\u{1b}]0;t\u{7}\u{202e}";
        let d = node_desc(pb::NodeInfo {
            hostname: format!("{evil}{}", "h".repeat(1 << 20)),
            driver_version: evil.into(),
            gpus: vec![pb::GpuInfo {
                model: evil.into(),
                uuid: evil.into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let escaped = "x\\u{1b}]0;t\\u{7}\\u{202e}";
        assert!(
            d.hostname.starts_with(escaped) && d.hostname.len() < 400,
            "{}",
            &d.hostname[..60]
        );
        assert_eq!(d.driver_version.as_deref(), Some(escaped));
        assert_eq!((d.gpus[0].model.as_str(), d.gpus[0].uuid.as_str()), (escaped, escaped));
        let s = sample(
            &pb::Sample {
                gpus: vec![pb::GpuSample {
                    error: format!("nvml: {evil}"),
                    mig: vec![pb::MigInstance {
                        profile: evil.into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
            0,
        );
        assert_eq!(s.gpus[0].error, Some(GpuError::Other(format!("nvml: {escaped}"))));
        let ok = sample(
            &pb::Sample {
                gpus: vec![pb::GpuSample {
                    mig: vec![pb::MigInstance {
                        profile: evil.into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
            0,
        );
        assert_eq!(ok.gpus[0].mig[0].profile, escaped);
    }

    #[test]
    fn a_second_stream_from_the_same_process_keeps_the_clock_skew() {
        // The agent's clock an hour ahead, measured from its description.
        let hour = 3_600_000;
        let mut first = Stream::default();
        first.info(
            pb::NodeInfo {
                agent_time_ms: hour + 1_000,
                ..Default::default()
            },
            1_000,
        );
        // The live stream that follows is not described again.
        let mut second = first.rejoining();
        let s = second
            .sample(
                pb::Sample {
                    seq: 7,
                    time_ms: hour + 2_000,
                    ..Default::default()
                },
                2_000,
            )
            .expect("a whole sample");
        assert_eq!(s.time_ms, 2_000, "on the console's clock");
    }

    #[test]
    fn a_description_holds_one_copy_of_each_nvlink_peer_and_no_spare_room() {
        use prost::Message;
        let switch = |l: u32| format!("00000000:{:02X}:00.0", 0xA0 + l % 4);
        let gpu = |index: u32| pb::GpuInfo {
            index,
            nvlinks: (0..18)
                .map(|l| pb::NvLinkInfo {
                    link: l,
                    // Link 17 of GPU 1 does not say what it connects to.
                    peer_pci_bus_id: if index == 1 && l == 17 {
                        String::new()
                    } else {
                        switch(l)
                    },
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let info = pb::NodeInfo {
            gpus: vec![gpu(0), gpu(1)],
            ..Default::default()
        };
        // As it arrives: prost grows each list as it reads it (room for 32 links).
        let desc = node_desc(pb::NodeInfo::decode(info.encode_to_vec().as_slice()).expect("decodes"));
        let peer = |g: usize, l: usize| desc.gpus[g].nvlinks[l].peer_pci_bus_id.clone();
        assert_eq!(peer(0, 5).as_deref(), Some("00000000:A1:00.0"));
        assert_eq!(peer(1, 17), None, "unknown stays unknown");
        let (a, b) = (peer(0, 1).expect("named"), peer(1, 5).expect("named"));
        assert!(Arc::ptr_eq(&a, &b), "links to one switch share its name");
        assert!(
            !Arc::ptr_eq(&a, &peer(0, 2).expect("named")),
            "another switch, another name"
        );
        for g in &desc.gpus {
            assert_eq!(g.nvlinks.capacity(), g.nvlinks.len(), "GPU {}: no spare room", g.index);
        }
        assert_eq!(desc.gpus.capacity(), desc.gpus.len());
    }

    #[test]
    fn pods_are_decoded_once_printable_and_kept_on_a_gpu_that_did_not_answer() {
        let p = |pod: &str, mig: &str| pb::PodRef {
            namespace: "ml".into(),
            pod: pod.into(),
            container: "c".into(),
            mig_uuid: mig.into(),
        };
        let g = pb::GpuSample {
            error: "gpu_lost".into(),
            pods: vec![p("b\x1b[2J", ""), p("a", "MIG-1")],
            ..Default::default()
        };
        let r = gpu_reading(&g, 0, &mut Default::default(), false);
        let got: Vec<(String, Option<String>)> = r.pods.iter().map(|x| (x.pod.clone(), x.mig_uuid.clone())).collect();
        assert_eq!(
            got,
            [("a".into(), Some("MIG-1".into())), ("b\\u{1b}[2J".into(), None)],
            "sorted, MIG instance kept, no escape sequence reaches the screen"
        );
    }

    #[test]
    fn zero_means_unknown_only_where_the_wire_says_so() {
        let g = pb::GpuSample {
            util_pct: 0,
            hbm_temp_c: 0,
            power_limit_mw: 0,
            ..Default::default()
        };
        let r = gpu_reading(&g, 0, &mut Default::default(), false);
        assert_eq!(r.util_pct, Some(0), "0% busy is a reading");
        assert_eq!(r.hbm_temp_c, None);
        assert_eq!(r.power_limit_w, None);
        let lost = gpu_reading(
            &pb::GpuSample {
                error: "gpu_lost".into(),
                xids: vec![pb::XidEvent {
                    xid: 79,
                    time_ms: 5000,
                    source: 0,
                }],
                ..Default::default()
            },
            1000,
            &mut Default::default(),
            false,
        );
        assert!(lost.is_lost());
        assert_eq!((lost.util_pct, lost.temp_c), (None, None));
        assert_eq!(lost.xids, [Xid { xid: 79, time_ms: 4000 }], "XIDs on the console clock");
    }

    #[test]
    fn a_stuck_gpu_keeps_the_agents_words_and_how_long() {
        let stuck = |e: &str| {
            gpu_reading(
                &pb::GpuSample {
                    error: e.into(),
                    ..Default::default()
                },
                0,
                &mut Default::default(),
                false,
            )
            .error
        };
        let text = "nvml_stuck: nvmlDeviceGetPowerUsage: no answer for 2400 ms";
        assert_eq!(
            stuck(text),
            Some(GpuError::Stuck {
                text: text.into(),
                for_ms: 2400
            })
        );
        assert_eq!(
            stuck("nvml_stuck: something else"),
            Some(GpuError::Stuck {
                text: "nvml_stuck: something else".into(),
                for_ms: 0
            })
        );
    }

    #[test]
    fn ib_counters_that_cannot_be_read_are_none() {
        let r = ib_reading(&pb::IbSample {
            errors: vec![3; fleetop_proto::ib::ERROR_COUNTERS.len()],
            errors_present_mask: 0b101,
            ..Default::default()
        });
        assert_eq!(&r.errors[..3], [Some(3), None, Some(3)]);
        assert_eq!((r.state, r.rate_gbps), (None, None));
    }

    /// Process names carried from one sample to the next are the same
    /// names, shared; a name that changed, a new process on a known pid and
    /// a name that needs escaping are each what the sample says.
    #[test]
    fn process_names_are_shared_while_they_last_and_never_stale() {
        let mut st = Stream::default();
        let proc_ = |pid, user: &str, command: &str| pb::GpuProcess {
            pid,
            user: user.into(),
            command: command.into(),
            ..Default::default()
        };
        let s = |seq, procs: Vec<pb::GpuProcess>| pb::Sample {
            seq,
            gpus: vec![pb::GpuSample {
                processes: procs,
                ..Default::default()
            }],
            ..Default::default()
        };
        let names = |x: &NodeSample| -> Vec<(Option<String>, Option<String>)> {
            x.gpus[0]
                .processes
                .iter()
                .map(|p| {
                    (
                        p.owner.as_deref().map(str::to_string),
                        p.command.as_deref().map(str::to_string),
                    )
                })
                .collect()
        };
        let pair = |o: &str, c: &str| (Some(o.to_string()), Some(c.to_string()));
        let a = st
            .sample(
                s(
                    1,
                    vec![proc_(7, "alice", "python train.py"), proc_(8, "bob", "evil\x1b[2J")],
                ),
                0,
            )
            .expect("whole");
        let b = st
            .sample(
                s(
                    2,
                    vec![proc_(7, "alice", "python train.py"), proc_(8, "bob", "evil\x1b[2J")],
                ),
                0,
            )
            .expect("whole");
        assert_eq!(
            names(&b),
            [pair("alice", "python train.py"), pair("bob", "evil\\u{1b}[2J")]
        );
        assert_eq!(names(&a), names(&b));
        let (pa, pb_) = (&a.gpus[0].processes[0], &b.gpus[0].processes[0]);
        assert!(
            Arc::ptr_eq(
                pa.command.as_ref().expect("a command"),
                pb_.command.as_ref().expect("a command")
            ),
            "shared"
        );
        // pid 7 is now another process; pid 8 is gone and comes back.
        let c = st.sample(s(3, vec![proc_(7, "carol", "./bench")]), 0).expect("whole");
        assert_eq!(names(&c), [pair("carol", "./bench")]);
        // A list as it was is the last sample's list itself.
        let same = st.sample(s(3, vec![proc_(7, "carol", "./bench")]), 0).expect("whole");
        assert!(Arc::ptr_eq(&c.gpus[0].processes, &same.gpus[0].processes));
        // The memory a process holds moves: its new figure, in a new list
        // (the last sample's stays as it was), the names still shared.
        let mut more = proc_(7, "carol", "./bench");
        more.used_mem_bytes = 5 << 30;
        let moved = st.sample(s(3, vec![more]), 0).expect("whole");
        let (now, was) = (&moved.gpus[0].processes[0], &c.gpus[0].processes[0]);
        assert_eq!((now.used_mem_bytes, was.used_mem_bytes), (5 << 30, 0));
        assert!(Arc::ptr_eq(
            now.command.as_ref().expect("a command"),
            was.command.as_ref().expect("a command")
        ));
        let d = st
            .sample(
                s(4, vec![proc_(7, "carol", "./bench"), proc_(8, "bob", "evil\x1b[2J")]),
                0,
            )
            .expect("whole");
        assert_eq!(names(&d), [pair("carol", "./bench"), pair("bob", "evil\\u{1b}[2J")]);
        // A name that reads as the escaped form of the last one (backslash
        // is printable) prints as itself, as it would without the last.
        let e = st
            .sample(s(5, vec![proc_(8, "bob", "evil\\u{1b}[2J")]), 0)
            .expect("whole");
        assert_eq!(names(&e), [pair("bob", "evil\\u{1b}[2J")]);
        assert_eq!(
            names(&e),
            names(&sample(&s(5, vec![proc_(8, "bob", "evil\\u{1b}[2J")]), 0))
        );
    }

    /// Where the wire says a GPU's processes did not change, the console
    /// takes its last list without looking; every sample still shows the
    /// processes the agent had, through a name changed on the same pid and
    /// a sample in which the GPU did not answer, in plain and column deltas.
    #[test]
    fn processes_the_wire_says_are_unchanged_are_the_agents_in_every_sample() {
        use fleetop_proto::wire;
        let proc_ = |pid, command: &str| pb::GpuProcess {
            pid,
            used_mem_bytes: 1 << 30,
            user: "alice".into(),
            command: command.into(),
            ..Default::default()
        };
        let gpu = |error: &str, procs: Vec<pb::GpuProcess>| pb::GpuSample {
            error: error.into(),
            processes: procs,
            util_pct: 90,
            ..Default::default()
        };
        // What the agent had, sample by sample: GPU 0 changes, GPU 1 stays.
        let train = || vec![proc_(7, "python train.py")];
        let eval = || vec![proc_(7, "python eval.py")];
        let timeline = [
            (train(), ""),
            (train(), ""),
            (eval(), ""),
            (eval(), ""),
            (vec![proc_(9, "python serve.py")], "gpu_lost"),
            (vec![proc_(9, "python serve.py")], ""),
            (vec![proc_(9, "python serve.py")], ""),
            (train(), ""),
        ];
        let commands = |x: &NodeSample, i: usize| -> Vec<String> {
            x.gpus[i]
                .processes
                .iter()
                .map(|p| p.command.as_deref().unwrap_or("").to_string())
                .collect()
        };
        for columns in [false, true] {
            let (mut st, mut prev) = (Stream::default(), None::<pb::Sample>);
            let mut kept = 0;
            for (seq, (procs, error)) in (1..).zip(timeline.clone()) {
                let cur = pb::Sample {
                    seq,
                    time_ms: 1000 * seq as i64,
                    gpus: vec![gpu(error, procs.clone()), gpu("", train())],
                    ..Default::default()
                };
                let sent = match columns {
                    true => wire::encode_columns(prev.as_ref(), None, &cur),
                    false => wire::encode(prev.as_ref(), &cur),
                };
                let got = st.sample(sent, 0).expect("decodes");
                kept += st.wire.processes_kept().iter().filter(|k| **k).count();
                let want = match error {
                    "" => procs.iter().map(|p| p.command.clone()).collect(),
                    _ => vec![],
                };
                assert_eq!(commands(&got, 0), want, "sample {seq}, columns {columns}");
                assert_eq!(commands(&got, 1), ["python train.py"], "sample {seq}");
                prev = Some(cur);
            }
            // Else the case this is about was never on the wire.
            assert!(kept >= 6, "lists said unchanged: {kept}, columns {columns}");
        }
    }

    #[test]
    fn agent_time_becomes_console_time_and_follows_a_clock_step() {
        let mut st = Stream::default();
        // The agent's clock is 90 s ahead.
        let desc = st.info(
            pb::NodeInfo {
                agent_time_ms: 190_000,
                ..Default::default()
            },
            100_000,
        );
        assert_eq!(desc.interval_ms, 1000, "no interval means the default, never 0");
        let s = |seq, t| pb::Sample {
            seq,
            time_ms: t,
            ..Default::default()
        };
        assert_eq!(st.sample(s(1, 189_000), 100_000).map(|x| x.time_ms), Ok(99_000));
        st.caught_up();
        assert_eq!(st.sample(s(2, 191_000), 101_000).map(|x| x.time_ms), Ok(101_000));
        // The agent's clock steps back by 90 s: the sample is still "now".
        assert_eq!(st.sample(s(3, 102_000), 102_000).map(|x| x.time_ms), Ok(102_000));
        assert_eq!(st.sample(s(4, 103_000), 103_000).map(|x| x.time_ms), Ok(103_000));
    }
}
