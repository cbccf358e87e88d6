//! Series to the domain: each series' value goes into its GPU's, MIG
//! instance's or port's accumulator (`NodeAcc::add`), and a node's whole
//! set becomes one `NodeDesc` and one `NodeSample` (`NodeAcc::finish`);
//! `Xids` makes one XID one event across reads.

use std::collections::{BTreeMap, HashMap};

use fleetop_proto::{ib, throttle};

use super::fields::Field as F;
use super::fields::*;
use crate::ingest::promtext::Sample;
use crate::model::sample::{
    Gpm, GpuDesc, GpuError, GpuReading, IbPortDesc, IbReading, MigReading, NodeDesc, NodeSample, PodRef, Xid,
};

/// The most GPUs one node's series may describe, as the agent bounds
/// them: past it, a GPU's series are dropped (counted in
/// `Mapped::dropped_gpus`, warned once per node by the reader), so a
/// hostile page costs a bounded node, not memory and time that grow with it.
pub const MAX_GPUS_PER_NODE: usize = 64;

/// The most InfiniBand ports one node's series may describe (a node has a
/// few; past it, dropped and counted like GPUs).
pub const MAX_PORTS_PER_NODE: usize = 64;

/// The most MIG instances kept per GPU (NVIDIA's GPUs have 7 at most).
const MAX_MIG_PER_GPU: usize = 16;

/// The most bytes of a label kept as text (a UUID, a model, a host name, a
/// driver version): a label of megabytes is cut, not held per GPU.
pub const MAX_LABEL_BYTES: usize = 256;

/// `v` cut to `MAX_LABEL_BYTES` (at a character's boundary), owned.
pub(super) fn cut(v: &str) -> String {
    if v.len() <= MAX_LABEL_BYTES {
        return v.to_string();
    }
    let mut end = MAX_LABEL_BYTES;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    v[..end].to_string()
}

/// The most pods and inactive links kept per GPU (each checked for a
/// duplicate on every series: a bound keeps that linear).
const MAX_PER_GPU: usize = 64;

/// One GPU's (or one MIG instance's) values: a short list, searched in
/// place (a GPU has a few dozen fields at most).
#[derive(Debug, Default, Clone)]
pub(super) struct Acc {
    vals: Vec<(Field, f64)>,
}

impl Acc {
    fn set(&mut self, f: Field, v: f64) {
        let Some(v) = real(f, v) else { return };
        match self.vals.iter_mut().find(|(x, _)| *x == f) {
            Some(slot) => slot.1 = v,
            None => self.vals.push((f, v)),
        }
    }

    fn get(&self, f: Field) -> Option<f64> {
        self.vals.iter().find(|(x, _)| *x == f).map(|(_, v)| *v)
    }

    fn u32(&self, f: Field) -> Option<u32> {
        self.get(f).map(|v| v.round().min(f64::from(u32::MAX)) as u32)
    }

    fn u64(&self, f: Field) -> Option<u64> {
        self.get(f).map(|v| v.round() as u64)
    }

    fn mib(&self, f: Field) -> Option<u64> {
        self.u64(f).map(|m| m.saturating_mul(1 << 20))
    }

    /// DCGM's profiling ratios (0-1) as percent; all four or none, since
    /// the model's GPM figures are read together.
    fn gpm(&self) -> Option<Gpm> {
        let pct = |f| self.get(f).map(|r| (r * 100.0).clamp(0.0, 100.0));
        Some(Gpm {
            sm_active_pct: pct(F::SmActive)?,
            sm_occupancy_pct: pct(F::SmOccupancy)?,
            tensor_active_pct: pct(F::TensorActive)?,
            dram_bw_pct: pct(F::DramActive)?,
        })
    }

    /// Keeps what the slow reads give; the framebuffer total is fixed from
    /// this read's used + free, so the next fast reads (used only) keep it.
    fn keep_slow(&mut self) {
        if self.get(F::FbTotal).is_none()
            && let Some(t) = fb_total_mib(self)
        {
            self.set(F::FbTotal, t as f64);
        }
        self.vals
            .retain(|(f, _)| !is_fast(*f) && !matches!(f, F::FbFree | F::FbReserved));
    }
}

#[derive(Debug, Default, Clone)]
pub(super) struct GpuAcc {
    uuid: String,
    model: String,
    pci_bus_id: String,
    gpu: Acc,
    /// By GPU instance id: (profile, values).
    mig: BTreeMap<u32, (String, Acc)>,
    /// Bits of the set throttle reasons (`fleetop_gpu_throttle_reason`).
    reasons: u64,
    /// Some reason series seen: the GPU has a throttle reading.
    reasons_seen: bool,
    /// `fleetop_gpu_error`'s kind.
    error: Option<String>,
    /// NVLink links reported inactive (`fleetop_gpu_nvlink_state` 0).
    links_inactive: Vec<u32>,
    /// The agent flags a link that went down (not one unused by design).
    nvlink_down: bool,
    /// The pods dcgm-exporter names on this GPU's series (`pod`,
    /// `namespace`, `container`), each once.
    pods: Vec<PodRef>,
}

impl GpuAcc {
    fn keep_slow(&mut self) {
        self.gpu.keep_slow();
        for (_, m) in self.mig.values_mut() {
            m.keep_slow();
        }
        self.reasons = 0;
        self.reasons_seen = false;
        self.error = None;
        self.links_inactive.clear();
        self.nvlink_down = false;
        self.pods.clear();
    }
}

/// One InfiniBand port being put together.
#[derive(Debug, Default, Clone)]
pub(super) struct PortAcc {
    state: Option<f64>,
    phys: Option<f64>,
    rate: Option<f64>,
    tx_bytes: Option<f64>,
    rx_bytes: Option<f64>,
    tx_packets: Option<f64>,
    rx_packets: Option<f64>,
    errors: [Option<f64>; ib::ERROR_COUNTERS.len()],
}

/// One node being put together from its series, in any order.
#[derive(Debug, Default, Clone)]
pub struct NodeAcc {
    hostname: Option<String>,
    driver: Option<String>,
    agent_version: Option<String>,
    gpus: BTreeMap<u32, GpuAcc>,
    /// By (device, port).
    ports: BTreeMap<(String, u32), PortAcc>,
    skipped: usize,
    /// Series of GPUs past `MAX_GPUS_PER_NODE`, dropped.
    dropped_gpus: usize,
    /// Series of InfiniBand ports past `MAX_PORTS_PER_NODE`, dropped.
    dropped_ports: usize,
    /// MIG instances and pods held, all GPUs together (see `entities`).
    migs: usize,
    pods: usize,
}

/// What one node's series say.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    pub desc: NodeDesc,
    pub sample: NodeSample,
    /// Series that named a known field but no GPU (`gpu` label missing or
    /// not a number): counted, so a strange exporter is noticed in the log.
    pub skipped: usize,
    /// Series of GPUs past `MAX_GPUS_PER_NODE`, dropped.
    pub dropped_gpus: usize,
    /// Series of InfiniBand ports past `MAX_PORTS_PER_NODE`, dropped.
    pub dropped_ports: usize,
}

/// NVIDIA's InfiniBand state numbers (sysfs "4: ACTIVE"), as node_exporter serves them.
pub(super) fn state_word(id: f64) -> Option<&'static str> {
    fleetop_proto::ib::PORT_STATES.get(usize::from(id as u8)).copied()
}

pub(super) fn phys_state_word(id: f64) -> Option<&'static str> {
    let i = (id as u8).checked_sub(1)?;
    fleetop_proto::ib::PHYS_STATES.get(usize::from(i)).copied()
}

/// The throttle bit of a `reason` label (`unknown_0x…` for bits NVML adds later).
pub(super) fn reason_bit(name: &str) -> Option<u64> {
    if let Some(hex) = name.strip_prefix("unknown_0x") {
        return u64::from_str_radix(hex, 16).ok();
    }
    (0..64)
        .map(|b| 1u64 << b)
        .find(|&b| throttle::names(b).first().is_some_and(|n| n == name))
}

impl NodeAcc {
    /// Adds one series (its name, the labels the mapping reads, its value).
    /// Names the mapping does not know are ignored.
    pub fn add(&mut self, name: &str, l: &Labels, value: f64) {
        if name.is_empty() {
            // The inventory (`--prometheus`): a GPU's descriptive labels.
            if let Some(idx) = l.get("gpu").and_then(|g| g.parse::<u32>().ok()) {
                self.describe(l);
                if let Some(g) = gpu_acc(&mut self.gpus, &mut self.dropped_gpus, idx) {
                    fill_desc(g, l);
                }
            }
            return;
        }
        let Some(f) = field(name) else { return };
        match f {
            F::AgentInfo => {
                self.describe(l);
                if let Some(v) = l.get("version").filter(|v| !v.is_empty()) {
                    self.agent_version = Some(cut(v));
                }
                if self.driver.is_none() {
                    self.driver = l.get("driver_version").filter(|d| !d.is_empty()).map(cut);
                }
                return;
            }
            F::IbState
            | F::IbPhysState
            | F::IbRate
            | F::IbTxBytes
            | F::IbRxBytes
            | F::IbTxPackets
            | F::IbRxPackets
            | F::IbError(_)
            | F::IbOtherErrors => {
                self.port(f, l, value);
                return;
            }
            _ => {}
        }
        let Some(idx) = l.get("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            // The agent's node-wide flags (stale) have no GPU: not a strange series.
            if f != F::AgentFlag {
                self.skipped += 1;
            }
            return;
        };
        self.describe(l);
        let Some(g) = gpu_acc(&mut self.gpus, &mut self.dropped_gpus, idx) else {
            return;
        };
        fill_desc(g, l);
        if let (Some(pod), Some(namespace)) = (
            l.get("pod").filter(|p| !p.is_empty()),
            l.get("namespace").filter(|n| !n.is_empty()),
        ) {
            // Made printable as the agent's pods are: they reach the screen.
            let p = PodRef::printable(namespace, pod, l.get("container").unwrap_or_default(), "");
            if g.pods.len() < MAX_PER_GPU && !g.pods.contains(&p) {
                g.pods.push(p);
                self.pods += 1;
            }
        }
        match f {
            // Known to be there, nothing more.
            F::OtherDcgm => return,
            F::ThrottleReason => {
                if value.is_nan() {
                    return;
                }
                g.reasons_seen = true;
                if value > 0.0
                    && let Some(bit) = l.get("reason").and_then(reason_bit)
                {
                    g.reasons |= bit;
                }
                return;
            }
            F::GpuErrorKind => {
                if value > 0.0 {
                    g.error = Some(cut(l.get("error").unwrap_or("error")));
                }
                return;
            }
            F::NvlinkState => {
                if value == 0.0
                    && let Some(link) = l.get("link").and_then(|v| v.parse::<u32>().ok())
                    && g.links_inactive.len() < MAX_PER_GPU
                    && !g.links_inactive.contains(&link)
                {
                    g.links_inactive.push(link);
                }
                return;
            }
            F::AgentFlag => {
                if value > 0.0 && l.get("kind") == Some("nvlink_down") {
                    g.nvlink_down = true;
                }
                return;
            }
            _ => {}
        }
        let gi = l
            .get("GPU_I_ID")
            .filter(|v| !v.is_empty())
            .and_then(|v| v.parse::<u32>().ok());
        match gi {
            // Memory and profiling figures are per instance in MIG mode;
            // the rest are the GPU's, repeated on each instance's series.
            Some(gi) => {
                if !g.mig.contains_key(&gi) {
                    if g.mig.len() >= MAX_MIG_PER_GPU {
                        return;
                    }
                    self.migs += 1;
                }
                let (profile, acc) = g.mig.entry(gi).or_default();
                if profile.is_empty() {
                    *profile = fleetop_proto::input::printable(l.get("GPU_I_PROFILE").unwrap_or_default(), 32);
                }
                if is_per_instance(f) {
                    acc.set(f, value);
                } else {
                    g.gpu.set(f, value);
                }
            }
            None => g.gpu.set(f, value),
        }
    }

    /// What this node holds that grows with what a source sends: its GPUs,
    /// ports, MIG instances and pods (each a few hundred bytes at most,
    /// its text bounded). A reader that gathers many nodes bounds their
    /// sum, which bounds its memory whatever the source sends.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    pub fn entities(&self) -> usize {
        self.gpus.len() + self.ports.len() + self.migs + self.pods
    }

    /// The node's host name and driver, from the first series that gives them.
    fn describe(&mut self, l: &Labels) {
        if self.hostname.is_none() {
            self.hostname = [l.get("Hostname"), l.get("hostname")]
                .into_iter()
                .flatten()
                .find(|h| !h.is_empty())
                .map(cut);
        }
        if self.driver.is_none() {
            self.driver = l.get("DCGM_FI_DRIVER_VERSION").filter(|d| !d.is_empty()).map(cut);
        }
    }

    fn port(&mut self, f: Field, l: &Labels, value: f64) {
        let (Some(dev), Some(port)) = (l.get("device"), l.get("port").and_then(|p| p.parse::<u32>().ok())) else {
            self.skipped += 1;
            return;
        };
        self.describe(l);
        // Counters and states are never negative, NaN or infinite.
        let v = (value.is_finite() && value >= 0.0).then_some(value);
        let key = (dev.to_string(), port);
        if self.ports.len() >= MAX_PORTS_PER_NODE && !self.ports.contains_key(&key) {
            self.dropped_ports += 1;
            return;
        }
        let p = self.ports.entry(key).or_default();
        match f {
            F::IbState => p.state = v,
            F::IbPhysState => p.phys = v,
            F::IbRate => p.rate = v,
            F::IbTxBytes => p.tx_bytes = v,
            F::IbRxBytes => p.rx_bytes = v,
            F::IbTxPackets => p.tx_packets = v,
            F::IbRxPackets => p.rx_packets = v,
            F::IbError(i) => p.errors[usize::from(i)] = v,
            F::IbOtherErrors => {
                let i = l
                    .get("counter")
                    .and_then(|c| (0..ib::ERROR_COUNTERS.len()).find(|&i| ib::counter_name(i) == c));
                if let Some(i) = i {
                    p.errors[i] = v;
                }
            }
            _ => {}
        }
    }

    /// What the slower reads give, kept for the fast reads in between: the
    /// same accumulator minus every field read each refresh.
    pub fn keep_slow(&mut self) {
        for g in self.gpus.values_mut() {
            g.keep_slow();
        }
        for p in self.ports.values_mut() {
            p.state = None;
        }
        self.pods = 0;
    }

    /// The node's description and sample. `backend` names the source
    /// ("dcgm-exporter", "prometheus"); `name` is the node's name where no
    /// series gives a hostname; `interval_ms` is how often the source is read.
    pub fn finish(self, name: &str, backend: &str, interval_ms: i64, now_ms: i64) -> Mapped {
        let mut desc = NodeDesc {
            hostname: self.hostname.unwrap_or_else(|| name.to_string()),
            agent_version: self.agent_version.unwrap_or_else(|| backend.to_string()),
            backend: backend.to_string(),
            driver_version: self.driver,
            cuda_version: None,
            interval_ms: interval_ms.max(1),
            gpus: Vec::with_capacity(self.gpus.len()),
            ib_ports: Vec::with_capacity(self.ports.len()),
            gpu_note: None,
            instance: 1,
            ..Default::default()
        };
        if self.gpus.is_empty() {
            desc.gpu_note = Some(format!("no GPU series in the {backend} answer"));
        }
        let mut sample = NodeSample {
            seq: 0,
            time_ms: now_ms,
            gpus: Vec::with_capacity(self.gpus.len()),
            ..NodeSample::default()
        };
        for (idx, g) in self.gpus {
            let (d, r) = gpu(idx, g, now_ms);
            desc.gpus.push(d);
            sample.gpus.push(r);
        }
        for (k, ((device, port), p)) in self.ports.into_iter().enumerate() {
            desc.ib_ports.push(IbPortDesc {
                device,
                port,
                link_layer: String::new(),
            });
            let n = |v: Option<f64>| v.map_or(0, |v| v as u64);
            sample.ib_ports.push(IbReading {
                port: k as u32,
                state: p.state.and_then(state_word).map(std::borrow::Cow::Borrowed),
                phys_state: p.phys.and_then(phys_state_word).map(std::borrow::Cow::Borrowed),
                // B/s -> Gb/s, as sysfs gives it.
                rate_gbps: p.rate.map(|r| (r * 8.0 / 1e9).round() as u32).filter(|&r| r > 0),
                tx_bytes: n(p.tx_bytes),
                rx_bytes: n(p.rx_bytes),
                tx_packets: n(p.tx_packets),
                rx_packets: n(p.rx_packets),
                errors: p.errors.map(|e| e.map(|v| v as u64)),
            });
        }
        Mapped {
            desc: desc.printable(),
            sample,
            skipped: self.skipped,
            dropped_gpus: self.dropped_gpus,
            dropped_ports: self.dropped_ports,
        }
    }
}

/// GPU `idx`'s accumulator in `gpus`; `None` (the series dropped,
/// counted in `dropped`) for a GPU past the node's first `MAX_GPUS_PER_NODE`.
fn gpu_acc<'a>(gpus: &'a mut BTreeMap<u32, GpuAcc>, dropped: &mut usize, idx: u32) -> Option<&'a mut GpuAcc> {
    let full = gpus.len() >= MAX_GPUS_PER_NODE;
    match gpus.entry(idx) {
        std::collections::btree_map::Entry::Occupied(e) => Some(e.into_mut()),
        std::collections::btree_map::Entry::Vacant(_) if full => {
            *dropped += 1;
            None
        }
        std::collections::btree_map::Entry::Vacant(e) => Some(e.insert(GpuAcc::default())),
    }
}

/// The GPU's descriptive labels, from the first series that has them.
pub(super) fn fill_desc(g: &mut GpuAcc, l: &Labels) {
    for (k, slot) in [
        ("UUID", &mut g.uuid),
        ("modelName", &mut g.model),
        ("pci_bus_id", &mut g.pci_bus_id),
    ] {
        if slot.is_empty()
            && let Some(v) = l.get(k)
        {
            *slot = cut(v);
        }
    }
}

/// Maps one node's parsed series (`--dcgm-exporter`).
pub fn map_node<'a>(
    series: impl IntoIterator<Item = &'a Sample>,
    name: &str,
    backend: &str,
    interval_ms: i64,
    now_ms: i64,
) -> Mapped {
    let mut acc = NodeAcc::default();
    for s in series {
        acc.add(&s.name, &Labels::from_sample(s), s.value);
    }
    acc.finish(name, backend, interval_ms, now_ms)
}

pub(super) fn is_per_instance(f: Field) -> bool {
    matches!(
        f,
        F::FbUsed
            | F::FbFree
            | F::FbTotal
            | F::FbReserved
            | F::SmActive
            | F::SmOccupancy
            | F::TensorActive
            | F::DramActive
            | F::GrActive
    )
}

/// A profiling ratio (0-1) as a whole percent.
fn ratio_pct(r: f64) -> u32 {
    (r * 100.0).clamp(0.0, 100.0).round() as u32
}

/// Framebuffer total: DCGM's FB_TOTAL, else used + free (+ reserved).
pub(super) fn fb_total_mib(a: &Acc) -> Option<u64> {
    a.u64(F::FbTotal).or_else(|| {
        let used = a.u64(F::FbUsed)?;
        let free = a.u64(F::FbFree)?;
        Some(used + free + a.u64(F::FbReserved).unwrap_or(0))
    })
}

pub(super) fn gpu_error(kind: &str) -> GpuError {
    match kind {
        "gpu_lost" => GpuError::Lost,
        // The series names the kind only, not the call nor for how long.
        "nvml_stuck" => GpuError::Stuck {
            text: "nvml_stuck".into(),
            for_ms: 0,
        },
        other => GpuError::Other(other.to_string()),
    }
}

pub(super) fn gpu(index: u32, g: GpuAcc, now_ms: i64) -> (GpuDesc, GpuReading) {
    let a = &g.gpu;
    let mig: Vec<MigReading> = g
        .mig
        .iter()
        .map(|(&gi, (profile, m))| MigReading {
            gpu_instance_id: gi,
            profile: profile.clone(),
            uuid: String::new(),
            mem_used_bytes: m.mib(F::FbUsed),
            mem_total_bytes: fb_total_mib(m).map(|t| t << 20),
            gpm: m.gpm(),
            util_pct: m.get(F::GrActive).map(ratio_pct),
        })
        .collect();
    // In MIG mode the GPU's memory is its instances' sum, where only they give it.
    let sum = |f: fn(&MigReading) -> Option<u64>| -> Option<u64> {
        if mig.is_empty() {
            return None;
        }
        mig.iter().map(f).sum()
    };
    let mem_total_bytes = fb_total_mib(a).map(|t| t << 20).or_else(|| sum(|m| m.mem_total_bytes));
    let mem_used_bytes = a.mib(F::FbUsed).or_else(|| sum(|m| m.mem_used_bytes));
    let retired = match (a.u32(F::RetiredSbe), a.u32(F::RetiredDbe)) {
        (None, None) => None,
        (s, d) => Some(s.unwrap_or(0).saturating_add(d.unwrap_or(0))),
    };
    // DCGM's bitmask where exported, else fleetop's reasons one by one.
    let throttle_mask = a.u64(F::ThrottleReasons).or(g.reasons_seen.then_some(g.reasons));
    let desc = GpuDesc {
        index,
        uuid: g.uuid,
        model: g.model,
        pci_bus_id: g.pci_bus_id,
        mem_total_bytes,
        power_limit_w: a.get(F::PowerLimit),
        max_sm_clock_mhz: a.u32(F::MaxSmClock),
        max_mem_clock_mhz: a.u32(F::MaxMemClock),
        slowdown_temp_c: a.u32(F::SlowdownTemp),
        shutdown_temp_c: a.u32(F::ShutdownTemp),
        // One series per link is too many to ask each refresh: the links
        // are named by their NVML id where one is down (below).
        nvlinks: Vec::new(),
        ..Default::default()
    };
    // DCGM's XID field holds the last XID seen (0: none); `Xids` keeps
    // it from being reported again on every read.
    let xids: Vec<Xid> = a
        .u32(F::Xid)
        .filter(|&x| x > 0)
        .map(|xid| Xid { xid, time_ms: now_ms })
        .into_iter()
        .collect();
    if let Some(kind) = &g.error {
        // A GPU that did not answer has no readings (its XIDs still count),
        // whatever an earlier read left.
        let reading = GpuReading {
            index,
            error: Some(gpu_error(kind)),
            xids,
            ..GpuReading::default()
        };
        return (desc, reading);
    }
    // Only links the agent says went down (it knows which were unused by
    // design); with no link list, a link's position is its NVML id.
    let mut nvlinks_down: Vec<usize> = if g.nvlink_down {
        g.links_inactive.iter().map(|&l| l as usize).collect()
    } else {
        Vec::new()
    };
    nvlinks_down.sort_unstable();
    let reading = GpuReading {
        index,
        error: None,
        // DCGM's utilization, else the profiling module's (an exporter
        // with a profiling-only counters file).
        util_pct: a.u32(F::GpuUtil).or(a.get(F::GrActive).map(ratio_pct)),
        mem_util_pct: a.u32(F::MemCopyUtil),
        mem_used_bytes,
        temp_c: a.u32(F::GpuTemp),
        hbm_temp_c: a.u32(F::MemoryTemp),
        power_w: a.get(F::PowerUsage),
        power_limit_w: a.get(F::PowerLimit),
        energy_mj: a.u64(F::Energy),
        sm_clock_mhz: a.u32(F::SmClock),
        mem_clock_mhz: a.u32(F::MemClock),
        throttle_mask,
        pcie_tx_bytes_per_s: a.get(F::PcieTx),
        pcie_rx_bytes_per_s: a.get(F::PcieRx),
        pcie_replay_count: a.u64(F::PcieReplay),
        ecc_corrected_volatile: a.u64(F::EccSbeVol),
        ecc_uncorrected_volatile: a.u64(F::EccDbeVol),
        retired_pages: retired,
        remapped_rows_correctable: a.u32(F::RemapCorrectable),
        remapped_rows_uncorrectable: a.u32(F::RemapUncorrectable),
        remap_pending: a.get(F::RemapPending).map(|v| v > 0.0),
        remap_failed: a.get(F::RemapFailure).map(|v| v > 0.0),
        xids,
        nvlinks_down,
        nvlink_tx_kib: Vec::new(),
        nvlink_rx_kib: Vec::new(),
        processes: Default::default(),
        gpm: a.gpm(),
        mig,
        pods: g.pods,
        // dcgm-exporter's default counters carry no PCIe link, fabric or
        // persistence state.
        ..Default::default()
    };
    (desc, reading)
}

/// The last XID each GPU reported, so one XID is one event, not one per read.
#[derive(Debug, Default)]
pub struct Xids {
    last: HashMap<u32, u32>,
}

impl Xids {
    /// Drops from `sample` the XIDs already reported; forgets a GPU whose
    /// XID field went back to 0.
    pub fn dedup(&mut self, sample: &mut NodeSample) {
        for g in &mut sample.gpus {
            match g.xids.first().map(|x| x.xid) {
                Some(x) if self.last.get(&g.index) == Some(&x) => g.xids.clear(),
                Some(x) => {
                    self.last.insert(g.index, x);
                }
                None => {
                    self.last.remove(&g.index);
                }
            }
        }
    }
}
