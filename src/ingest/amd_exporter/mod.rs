//! AMD device-metrics-exporter's series (and a fleetop agent's /metrics on
//! an AMD node, which serves the same names) mapped into the console's
//! domain model, for `--amd-exporter`. The HTTP read, its bounds and the
//! text parser are the dcgm-exporter source's (`scrape`, `promtext`); so is
//! the accumulator: each AMD series is said again in the terms `dcgm`
//! reads (its name, in AMD's unit turned into the one `dcgm` expects, and
//! its labels: `gpu_id` as `gpu`, `gpu_uuid` as `UUID`, ...), and what only
//! AMD has (the vendor, partition modes, RAS blocks, the edge sensor,
//! XGMI errors, AMD's throttle words) is set on the result after.
//!
//! What a series does not give stays `None`, never 0. AMD's exporter
//! writes 0 for the socket's power on a GPU's compute partitions other
//! than the first (they have no sensor of their own): those read as absent
//! too. Names may carry the exporter's `MetricsFieldPrefix` ("amd_").

use std::collections::{BTreeMap, HashSet};

use fleetop_proto::input::printable;

use crate::ingest::dcgm::{Labels, MAX_GPUS_PER_NODE, Mapped, NodeAcc};
use crate::ingest::promtext::Sample;
use crate::model::sample::{Partition, RasCount, Vendor};

#[cfg(test)]
mod tests;

/// The node's backend as its description names it.
pub const BACKEND: &str = "amd-exporter";

/// AMD's RAS blocks as AMD SMI names them, and the exporter's word for
/// each in its ECC families (`gpu_ecc_correct_<word>`, ...), in AMD's order.
const RAS_BLOCKS: [(&str, &str); 19] = [
    ("UMC", "umc"),
    ("SDMA", "sdma"),
    ("GFX", "gfx"),
    ("MMHUB", "mmhub"),
    ("ATHUB", "athub"),
    ("PCIE_BIF", "bif"),
    ("HDP", "hdp"),
    ("XGMI_WAFL", "xgmi_wafl"),
    ("DF", "df"),
    ("SMN", "smn"),
    ("SEM", "sem"),
    ("MP0", "mp0"),
    ("MP1", "mp1"),
    ("FUSE", "fuse"),
    ("MCA", "mca"),
    ("VCN", "vcn"),
    ("JPEG", "jpeg"),
    ("IH", "ih"),
    ("MPIO", "mpio"),
];

/// What an AMD series means.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Amd {
    /// The same as this `dcgm` series, the value times this factor.
    As(&'static str, f64),
    /// Read only where the GPU has no `As` of the same target (a fallback:
    /// MI200's edge sensor and average power, the per-XCC busy share).
    Else(&'static str, Fallback),
    /// `gpu_clock` / `gpu_max_clock`: by `clock_type`, the lowest `clock_index`.
    Clock {
        max: bool,
    },
    /// `gpu_ecc_{correct,uncorrect,deferred}_<block>`: 0, 1, 2.
    Ecc(usize),
    /// The agent's own AMD series.
    XgmiLinkState,
    XgmiErrorStatus,
    ThrottleDetail,
    /// Any other AMD GPU series: the GPU is there.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fallback {
    EdgeTemp,
    AveragePower,
    BusyInstant,
}

/// AMD's names this reader knows, and what each is in `dcgm`'s terms.
const NAMES: &[(&str, Amd)] = &[
    ("gpu_gfx_activity", Amd::As("DCGM_FI_DEV_GPU_UTIL", 1.0)),
    ("gpu_umc_activity", Amd::As("DCGM_FI_DEV_MEM_COPY_UTIL", 1.0)),
    // MB as AMD SMI counts them, 2^20 bytes: dcgm's MiB.
    ("gpu_used_vram", Amd::As("DCGM_FI_DEV_FB_USED", 1.0)),
    ("gpu_total_vram", Amd::As("DCGM_FI_DEV_FB_TOTAL", 1.0)),
    ("gpu_free_vram", Amd::As("DCGM_FI_DEV_FB_FREE", 1.0)),
    // The junction (hotspot) is the temperature the flags judge.
    ("gpu_junction_temperature", Amd::As("DCGM_FI_DEV_GPU_TEMP", 1.0)),
    ("gpu_memory_temperature", Amd::As("DCGM_FI_DEV_MEMORY_TEMP", 1.0)),
    ("gpu_package_power", Amd::As("DCGM_FI_DEV_POWER_USAGE", 1.0)),
    ("gpu_power_usage", Amd::As("DCGM_FI_DEV_POWER_USAGE", 1.0)),
    // µJ to mJ.
    (
        "gpu_energy_consumed",
        Amd::As("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0.001),
    ),
    ("pcie_replay_count", Amd::As("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 1.0)),
    ("gpu_ecc_correct_total", Amd::As("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 1.0)),
    ("gpu_ecc_uncorrect_total", Amd::As("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1.0)),
    (
        "gpu_edge_temperature",
        Amd::Else("DCGM_FI_DEV_GPU_TEMP", Fallback::EdgeTemp),
    ),
    (
        "gpu_average_package_power",
        Amd::Else("DCGM_FI_DEV_POWER_USAGE", Fallback::AveragePower),
    ),
    (
        "gpu_gfx_busy_instantaneous",
        Amd::Else("DCGM_FI_DEV_GPU_UTIL", Fallback::BusyInstant),
    ),
    ("gpu_clock", Amd::Clock { max: false }),
    ("gpu_max_clock", Amd::Clock { max: true }),
    // The agent's own (fleetop's /metrics on an AMD node).
    ("fleetop_gpu_xgmi_link_state", Amd::XgmiLinkState),
    ("fleetop_gpu_xgmi_error_status", Amd::XgmiErrorStatus),
    ("fleetop_gpu_throttle_detail", Amd::ThrottleDetail),
];

/// Series passed to `dcgm` as they are, their labels said in its terms: a
/// fleetop agent's own, and the InfiniBand ports.
fn passed_through(name: &str) -> bool {
    matches!(
        name,
        "fleetop_gpu_throttle_reason" | "fleetop_gpu_error" | "fleetop_flag" | "fleetop_agent_info"
    ) || name.starts_with("node_infiniband_")
        || name.starts_with("fleetop_infiniband_")
}

/// What series `name` means: AMD's names with or without the exporter's
/// prefix ("amd_gpu_gfx_activity").
fn meaning(name: &str) -> Option<Amd> {
    let known = |n: &str| -> Option<Amd> {
        if let Some(m) = NAMES.iter().find(|(x, _)| *x == n).map(|(_, m)| *m) {
            return Some(m);
        }
        for (k, kind) in ["gpu_ecc_correct_", "gpu_ecc_uncorrect_", "gpu_ecc_deferred_"]
            .into_iter()
            .enumerate()
        {
            if let Some(word) = n.strip_prefix(kind)
                && RAS_BLOCKS.iter().any(|(_, w)| *w == word)
            {
                return Some(Amd::Ecc(k));
            }
        }
        (n.starts_with("gpu_") || n.starts_with("pcie_")).then_some(Amd::Other)
    };
    if name.starts_with("fleetop_") {
        return NAMES.iter().find(|(x, _)| *x == name).map(|(_, m)| *m);
    }
    if let Some(m) = known(name) {
        return Some(m);
    }
    // A prefix: the name from the first `gpu_` or `pcie_` on.
    let at = ["gpu_", "pcie_"].iter().filter_map(|p| name.find(p)).min()?;
    (at > 0 && name.as_bytes()[at - 1] == b'_')
        .then(|| known(&name[at..]))
        .flatten()
}

/// AMD's "not applicable" markers (all ones at 16, 32 or 64 bits), which
/// no reading of a temperature, a clock, a power or a share ever is.
fn applicable(v: f64) -> bool {
    v.is_finite() && v >= 0.0 && v != f64::from(u16::MAX) && v != f64::from(u32::MAX) && v < 1.8e19
}

/// What only AMD has, per GPU, set on the mapped node after `dcgm`'s.
#[derive(Debug, Default)]
struct Extra {
    vbios: Option<String>,
    compute: Option<String>,
    memory: Option<String>,
    partition_id: Option<u32>,
    edge_temp_c: Option<u32>,
    /// By block position in `RAS_BLOCKS`: correctable, uncorrectable, deferred.
    ras: BTreeMap<usize, [Option<u64>; 3]>,
    xgmi_error_status: Option<u32>,
    throttle_detail: Vec<String>,
    /// Fallbacks held until every series is read: (target, value).
    fallbacks: Vec<(&'static str, f64)>,
    busy: (f64, u32),
    /// The clock read per `(clock_type, max)`, with its `clock_index`.
    clocks: BTreeMap<(bool, bool), (u32, f64)>,
}

/// One AMD series' labels in `dcgm`'s terms: `gpu_id` as `gpu`,
/// `gpu_uuid` as `UUID`, the card's series (else its model) as
/// `modelName`, `driver_version` as dcgm's driver label too, `link_index`
/// as `link`; the rest by their own names.
fn labels(s: &Sample) -> Labels<'_> {
    fn set<'a>(l: &mut Labels<'a>, k: &str, v: &'a str) {
        if let Some(i) = Labels::key(k) {
            l.0[i] = Some(v);
        }
    }
    let mut l = Labels::default();
    let mut model = None;
    for (k, v) in &s.labels {
        match k.as_str() {
            "gpu_id" => set(&mut l, "gpu", v),
            "gpu_uuid" => set(&mut l, "UUID", v),
            "card_series" if !v.is_empty() => model = Some(v.as_str()),
            "card_model" if !v.is_empty() => {
                model.get_or_insert(v.as_str());
            }
            "driver_version" => {
                set(&mut l, "driver_version", v);
                set(&mut l, "DCGM_FI_DRIVER_VERSION", v);
            }
            "link_index" => set(&mut l, "link", v),
            other => set(&mut l, other, v),
        }
    }
    if let Some(m) = model {
        set(&mut l, "modelName", m);
    }
    l
}

fn label<'a>(s: &'a Sample, k: &str) -> Option<&'a str> {
    s.labels.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str())
}

/// Maps one node's parsed series (`--amd-exporter`).
pub fn map_node<'a>(series: impl IntoIterator<Item = &'a Sample>, name: &str, interval_ms: i64, now_ms: i64) -> Mapped {
    let mut acc = NodeAcc::default();
    let mut extra: BTreeMap<u32, Extra> = BTreeMap::new();
    // (GPU, dcgm name) read directly: a fallback does not override them.
    let mut direct: HashSet<(u32, &'static str)> = HashSet::new();
    // A GPU's first series for each fallback target, kept as its labels.
    let mut first: BTreeMap<u32, &'a Sample> = BTreeMap::new();
    let mut dropped = 0usize;
    for s in series {
        if passed_through(&s.name) {
            acc.add(&s.name, &labels(s), s.value);
            continue;
        }
        let Some(m) = meaning(&s.name) else { continue };
        let l = labels(s);
        let Some(gpu) = label(s, "gpu_id").and_then(|g| g.parse::<u32>().ok()) else {
            // A GPU series without its GPU: counted, as `dcgm` counts
            // them; a node-wide one (gpu_nodes_total) is not strange.
            if m != Amd::Other {
                acc.add("DCGM_FI_AMD_OTHER", &l, s.value);
            }
            continue;
        };
        // Bounded as the agent bounds a node: a page of 190,000 GPUs costs
        // 64 GPUs' work, the rest dropped (counted, warned once).
        if !extra.contains_key(&gpu) && extra.len() >= MAX_GPUS_PER_NODE {
            dropped += 1;
            continue;
        }
        first.entry(gpu).or_insert(s);
        // The GPU is there whatever the series says.
        acc.add("DCGM_FI_AMD_OTHER", &l, s.value);
        let x = extra.entry(gpu).or_default();
        describe(x, s);
        // A partition past the first has no sensor of the socket's: AMD
        // writes 0 there, which is no reading.
        let later_partition = x.partition_id.is_some_and(|p| p > 0);
        let v = s.value;
        match m {
            Amd::As(target, factor) => {
                if !applicable(v) || (later_partition && v == 0.0 && is_socket(target)) {
                    continue;
                }
                direct.insert((gpu, target));
                acc.add(target, &l, v * factor);
            }
            Amd::Else(_, Fallback::BusyInstant) => {
                if applicable(v) && v <= 100.0 {
                    x.busy.0 += v;
                    x.busy.1 += 1;
                }
            }
            Amd::Else(target, kind) => {
                if kind == Fallback::EdgeTemp && applicable(v) && v > 0.0 {
                    x.edge_temp_c = Some(v.round() as u32);
                }
                if applicable(v) && !(later_partition && v == 0.0) {
                    x.fallbacks.push((target, v));
                }
            }
            Amd::Clock { max } => {
                let ty = label(s, "clock_type").unwrap_or_default();
                let gfx = match ty {
                    "system" => true,
                    "memory" => false,
                    _ => continue,
                };
                let index = label(s, "clock_index")
                    .and_then(|i| i.parse::<u32>().ok())
                    .unwrap_or(u32::MAX);
                if !applicable(v) || v == 0.0 {
                    continue;
                }
                let slot = x.clocks.entry((gfx, max)).or_insert((index, v));
                if index < slot.0 {
                    *slot = (index, v);
                }
            }
            Amd::Ecc(k) => {
                let word = s.name.rsplit("_ecc_").next().unwrap_or_default();
                let word = ["correct_", "uncorrect_", "deferred_"]
                    .iter()
                    .find_map(|p| word.strip_prefix(p))
                    .unwrap_or_default();
                if let Some(b) = RAS_BLOCKS.iter().position(|(_, w)| *w == word)
                    && applicable(v)
                {
                    x.ras.entry(b).or_default()[k] = Some(v as u64);
                }
            }
            Amd::XgmiLinkState => {
                // The agent's link state, in `dcgm`'s words (0 inactive).
                acc.add("fleetop_gpu_nvlink_state", &l, v);
            }
            Amd::XgmiErrorStatus => {
                if applicable(v) && v <= 2.0 {
                    x.xgmi_error_status = Some(v as u32);
                }
            }
            Amd::ThrottleDetail => {
                if v > 0.0
                    && let Some(word) = label(s, "reason").filter(|w| !w.is_empty())
                    && x.throttle_detail.len() < 64
                {
                    x.throttle_detail.push(printable(word, 32));
                }
            }
            Amd::Other => {}
        }
    }
    // Fallbacks and clocks, in the GPU's own labels.
    for (gpu, x) in &extra {
        let Some(s) = first.get(gpu) else { continue };
        let l = labels(s);
        for (target, v) in &x.fallbacks {
            if !direct.contains(&(*gpu, *target)) {
                acc.add(target, &l, *v);
            }
        }
        if x.busy.1 > 0 && !direct.contains(&(*gpu, "DCGM_FI_DEV_GPU_UTIL")) {
            acc.add("DCGM_FI_DEV_GPU_UTIL", &l, x.busy.0 / f64::from(x.busy.1));
        }
        for (&(gfx, max), &(_, v)) in &x.clocks {
            let target = match (gfx, max) {
                (true, false) => "DCGM_FI_DEV_SM_CLOCK",
                (false, false) => "DCGM_FI_DEV_MEM_CLOCK",
                (true, true) => "DCGM_FI_DEV_MAX_SM_CLOCK",
                (false, true) => "DCGM_FI_DEV_MAX_MEM_CLOCK",
            };
            acc.add(target, &l, v);
        }
    }
    let mut m = acc.finish(name, BACKEND, interval_ms, now_ms);
    m.dropped_gpus += dropped;
    // Every GPU this reader maps is AMD's: an agent's stale or lost GPU too.
    for d in &mut m.desc.gpus {
        d.vendor = Vendor::Amd;
        let Some(x) = extra.get(&d.index) else { continue };
        d.vbios_version = x.vbios.as_deref().map(|v| printable(v, 64));
        if x.compute.is_some() || x.memory.is_some() || x.partition_id.is_some() {
            d.partition = Some(Partition {
                compute: printable(&x.compute.clone().unwrap_or_default().to_ascii_uppercase(), 16),
                memory: printable(&x.memory.clone().unwrap_or_default().to_ascii_uppercase(), 16),
                id: x.partition_id.unwrap_or(0),
            });
        }
    }
    for r in &mut m.sample.gpus {
        let Some(x) = extra.get(&r.index) else { continue };
        if r.error.is_some() {
            continue;
        }
        r.edge_temp_c = x.edge_temp_c;
        r.xgmi_error_status = x.xgmi_error_status;
        r.throttle_detail = x.throttle_detail.iter().cloned().map(Into::into).collect();
        r.ras = x
            .ras
            .iter()
            .map(|(&b, c)| RasCount {
                block: RAS_BLOCKS[b].0.into(),
                correctable: c[0].unwrap_or(0),
                uncorrectable: c[1].unwrap_or(0),
                deferred: c[2].unwrap_or(0),
            })
            .collect();
    }
    m
}

/// A reading of the whole physical GPU, which AMD's exporter writes as 0
/// on the partitions past the first.
fn is_socket(target: &str) -> bool {
    matches!(
        target,
        "DCGM_FI_DEV_POWER_USAGE"
            | "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
            | "DCGM_FI_DEV_GPU_TEMP"
            | "DCGM_FI_DEV_MEMORY_TEMP"
    )
}

/// The GPU's descriptive labels, from the first series that has them.
fn describe(x: &mut Extra, s: &Sample) {
    let take = |slot: &mut Option<String>, k: &str| {
        if slot.is_none()
            && let Some(v) = label(s, k).filter(|v| !v.is_empty())
        {
            *slot = Some(v.to_string());
        }
    };
    take(&mut x.vbios, "vbios_version");
    take(&mut x.compute, "gpu_compute_partition_type");
    take(&mut x.memory, "gpu_memory_partition_type");
    if x.partition_id.is_none() {
        // "NA" (a hypervisor's) is no partition number.
        x.partition_id = label(s, "gpu_partition_id").and_then(|p| p.parse().ok());
    }
}
