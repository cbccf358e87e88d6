//! dcgm-exporter's series, mapped once into the console's domain model: a
//! node's description (`NodeDesc`) and one sample (`NodeSample`). Both the
//! `--dcgm-exporter` scraper (parsed text) and the `--prometheus` reader
//! (query results) hand their series to this one module.
//!
//! What a series does not give stays `None`: dcgm-exporter has no host
//! readings, processes, per-link NVLink counters or InfiniBand ports, so
//! those are absent, never 0. DCGM marks a value it could not read with a
//! "blank" sentinel (`DCGM_INT32_BLANK` 0x7ffffff0 and the 15 above it,
//! `DCGM_INT64_BLANK` 0x7ffffffffffffff0 and above, `DCGM_FP64_BLANK` 2^47
//! and above): those read as absent too, never as a temperature.

use std::collections::{BTreeMap, HashMap};

use crate::ingest::promtext::Sample;
use crate::model::sample::{Gpm, GpuDesc, GpuReading, MigReading, NodeDesc, NodeSample, Xid};

/// Every series this module reads, with what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Field {
    GpuUtil,
    MemCopyUtil,
    FbUsed,
    FbFree,
    FbTotal,
    FbReserved,
    GpuTemp,
    MemoryTemp,
    PowerUsage,
    PowerLimit,
    Energy,
    SmClock,
    MemClock,
    MaxSmClock,
    MaxMemClock,
    SlowdownTemp,
    ShutdownTemp,
    Xid,
    PcieReplay,
    PcieTx,
    PcieRx,
    EccSbeVol,
    EccDbeVol,
    RetiredSbe,
    RetiredDbe,
    RemapCorrectable,
    RemapUncorrectable,
    RemapFailure,
    RemapPending,
    ThrottleReasons,
    SmActive,
    SmOccupancy,
    TensorActive,
    DramActive,
}

/// Series name -> field. Names are dcgm-exporter's (DCGM field names);
/// a fleetop agent's /metrics serves the same names.
const FIELDS: &[(&str, Field)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", Field::GpuUtil),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", Field::MemCopyUtil),
    ("DCGM_FI_DEV_FB_USED", Field::FbUsed),
    ("DCGM_FI_DEV_FB_FREE", Field::FbFree),
    ("DCGM_FI_DEV_FB_TOTAL", Field::FbTotal),
    ("DCGM_FI_DEV_FB_RESERVED", Field::FbReserved),
    ("DCGM_FI_DEV_GPU_TEMP", Field::GpuTemp),
    ("DCGM_FI_DEV_MEMORY_TEMP", Field::MemoryTemp),
    ("DCGM_FI_DEV_POWER_USAGE", Field::PowerUsage),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", Field::PowerLimit),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Field::Energy),
    ("DCGM_FI_DEV_SM_CLOCK", Field::SmClock),
    ("DCGM_FI_DEV_MEM_CLOCK", Field::MemClock),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", Field::MaxSmClock),
    ("DCGM_FI_DEV_MAX_MEM_CLOCK", Field::MaxMemClock),
    ("DCGM_FI_DEV_SLOWDOWN_TEMP", Field::SlowdownTemp),
    ("DCGM_FI_DEV_SHUTDOWN_TEMP", Field::ShutdownTemp),
    ("DCGM_FI_DEV_XID_ERRORS", Field::Xid),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", Field::PcieReplay),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", Field::PcieTx),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", Field::PcieRx),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", Field::EccSbeVol),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", Field::EccDbeVol),
    ("DCGM_FI_DEV_RETIRED_SBE", Field::RetiredSbe),
    ("DCGM_FI_DEV_RETIRED_DBE", Field::RetiredDbe),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", Field::RemapCorrectable),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", Field::RemapUncorrectable),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", Field::RemapFailure),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", Field::RemapPending),
    // The NVML clocks-event (throttle) bitmask; renamed in DCGM 3.3.
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", Field::ThrottleReasons),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", Field::ThrottleReasons),
    ("DCGM_FI_PROF_SM_ACTIVE", Field::SmActive),
    ("DCGM_FI_PROF_SM_OCCUPANCY", Field::SmOccupancy),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Field::TensorActive),
    ("DCGM_FI_PROF_DRAM_ACTIVE", Field::DramActive),
];

/// Every series name the mapping reads (what `--prometheus` asks for).
pub fn series_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|(n, _)| *n)
}

fn field(name: &str) -> Option<Field> {
    FIELDS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

const INT32_BLANK: f64 = 2_147_483_632.0; // 0x7ffffff0
const INT32_BLANK_END: f64 = 2_147_483_647.0; // 0x7fffffff
/// DCGM_FP64_BLANK (2^47); every DCGM_INT64_BLANK (near 2^63) is above it.
const FP64_BLANK: f64 = 140_737_488_355_328.0;

impl Field {
    /// DCGM keeps these as 64-bit integers: a value in the 32-bit blank
    /// range is a real count (energy in mJ passes 2^31 within hours).
    fn is_wide(self) -> bool {
        matches!(
            self,
            Field::Energy | Field::PcieReplay | Field::PcieTx | Field::PcieRx | Field::EccSbeVol | Field::EccDbeVol
        )
    }
}

/// The value, or `None` for a DCGM blank, NaN, infinity or a negative
/// number (no field read here can be negative).
fn real(f: Field, v: f64) -> Option<f64> {
    if !(0.0..FP64_BLANK).contains(&v) {
        return None;
    }
    if !f.is_wide() && (INT32_BLANK..=INT32_BLANK_END).contains(&v) {
        return None;
    }
    Some(v)
}

/// The node a series belongs to: its `Hostname` label (dcgm-exporter's),
/// `hostname` (some deployments relabel), else Prometheus' `instance`
/// without its port.
pub fn host_of(s: &Sample) -> Option<String> {
    for l in ["Hostname", "hostname"] {
        if let Some(h) = s.label(l).filter(|h| !h.is_empty()) {
            return Some(h.to_string());
        }
    }
    let inst = s.label("instance").filter(|h| !h.is_empty())?;
    Some(strip_port(inst).to_string())
}

/// "gpu01:9400" -> "gpu01"; "[::1]:9400" -> "::1"; a bare IPv6 address stays.
fn strip_port(inst: &str) -> &str {
    if let Some(rest) = inst.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match inst.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => inst,
    }
}

/// One GPU (or one MIG instance) being put together from its series.
#[derive(Debug, Default)]
struct Acc {
    vals: HashMap<Field, f64>,
}

impl Acc {
    fn set(&mut self, f: Field, v: f64) {
        if let Some(v) = real(f, v) {
            self.vals.insert(f, v);
        }
    }

    fn get(&self, f: Field) -> Option<f64> {
        self.vals.get(&f).copied()
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
            sm_active_pct: pct(Field::SmActive)?,
            sm_occupancy_pct: pct(Field::SmOccupancy)?,
            tensor_active_pct: pct(Field::TensorActive)?,
            dram_bw_pct: pct(Field::DramActive)?,
        })
    }
}

#[derive(Debug, Default)]
struct GpuAcc {
    uuid: String,
    model: String,
    pci_bus_id: String,
    gpu: Acc,
    /// By GPU instance id: (profile, values).
    mig: BTreeMap<u32, (String, Acc)>,
}

/// What one node's series say.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    pub desc: NodeDesc,
    pub sample: NodeSample,
    /// Series that named a known field but no GPU (`gpu` label missing or
    /// not a number): counted, so a strange exporter is noticed in the log.
    pub skipped: usize,
}

/// Maps one node's series. `backend` names the source ("dcgm-exporter",
/// "prometheus"); `name` is the node's name where no series gives a
/// hostname; `interval_ms` is how often the source is read.
pub fn map_node<'a>(
    series: impl IntoIterator<Item = &'a Sample>,
    name: &str,
    backend: &str,
    interval_ms: i64,
    now_ms: i64,
) -> Mapped {
    let mut gpus: BTreeMap<u32, GpuAcc> = BTreeMap::new();
    let mut hostname = None;
    let mut driver = None;
    let mut skipped = 0;
    for s in series {
        let Some(f) = field(&s.name) else { continue };
        let Some(idx) = s.label("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            skipped += 1;
            continue;
        };
        if hostname.is_none() {
            hostname = ["Hostname", "hostname"]
                .iter()
                .find_map(|l| s.label(l).filter(|h| !h.is_empty()))
                .map(str::to_string);
        }
        if driver.is_none() {
            driver = s
                .label("DCGM_FI_DRIVER_VERSION")
                .filter(|d| !d.is_empty())
                .map(str::to_string);
        }
        let g = gpus.entry(idx).or_default();
        for (l, slot) in [
            ("UUID", &mut g.uuid),
            ("modelName", &mut g.model),
            ("pci_bus_id", &mut g.pci_bus_id),
        ] {
            if slot.is_empty()
                && let Some(v) = s.label(l)
            {
                *slot = v.to_string();
            }
        }
        let gi = s
            .label("GPU_I_ID")
            .filter(|v| !v.is_empty())
            .and_then(|v| v.parse::<u32>().ok());
        match gi {
            // Memory and profiling figures are per instance in MIG mode;
            // the rest are the GPU's, repeated on each instance's series.
            Some(gi) if is_per_instance(f) => {
                let (profile, acc) = g.mig.entry(gi).or_default();
                if profile.is_empty() {
                    *profile = s.label("GPU_I_PROFILE").unwrap_or_default().to_string();
                }
                acc.set(f, s.value);
            }
            Some(gi) => {
                let (profile, _) = g.mig.entry(gi).or_default();
                if profile.is_empty() {
                    *profile = s.label("GPU_I_PROFILE").unwrap_or_default().to_string();
                }
                g.gpu.set(f, s.value);
            }
            None => g.gpu.set(f, s.value),
        }
    }
    let mut desc = NodeDesc {
        hostname: hostname.unwrap_or_else(|| name.to_string()),
        agent_version: backend.to_string(),
        backend: backend.to_string(),
        driver_version: driver,
        cuda_version: None,
        interval_ms: interval_ms.max(1),
        gpus: Vec::new(),
        ib_ports: Vec::new(),
        gpu_note: None,
        instance: 1,
    };
    if gpus.is_empty() {
        desc.gpu_note = Some(format!("no GPU series in the {backend} answer"));
    }
    let mut sample = NodeSample {
        seq: 0,
        time_ms: now_ms,
        ..NodeSample::default()
    };
    for (idx, g) in gpus {
        let (d, r) = gpu(idx, g, now_ms);
        desc.gpus.push(d);
        sample.gpus.push(r);
    }
    Mapped { desc, sample, skipped }
}

fn is_per_instance(f: Field) -> bool {
    matches!(
        f,
        Field::FbUsed
            | Field::FbFree
            | Field::FbTotal
            | Field::FbReserved
            | Field::SmActive
            | Field::SmOccupancy
            | Field::TensorActive
            | Field::DramActive
    )
}

/// Framebuffer total: DCGM's FB_TOTAL, else used + free (+ reserved).
fn fb_total_mib(a: &Acc) -> Option<u64> {
    a.u64(Field::FbTotal).or_else(|| {
        let used = a.u64(Field::FbUsed)?;
        let free = a.u64(Field::FbFree)?;
        Some(used + free + a.u64(Field::FbReserved).unwrap_or(0))
    })
}

fn gpu(index: u32, g: GpuAcc, now_ms: i64) -> (GpuDesc, GpuReading) {
    let a = &g.gpu;
    let mig: Vec<MigReading> = g
        .mig
        .iter()
        .map(|(&gi, (profile, m))| MigReading {
            gpu_instance_id: gi,
            profile: profile.clone(),
            uuid: String::new(),
            mem_used_bytes: m.mib(Field::FbUsed),
            mem_total_bytes: fb_total_mib(m).map(|t| t << 20),
            gpm: m.gpm(),
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
    let mem_used_bytes = a.mib(Field::FbUsed).or_else(|| sum(|m| m.mem_used_bytes));
    let retired = match (a.u32(Field::RetiredSbe), a.u32(Field::RetiredDbe)) {
        (None, None) => None,
        (s, d) => Some(s.unwrap_or(0).saturating_add(d.unwrap_or(0))),
    };
    let desc = GpuDesc {
        index,
        uuid: g.uuid,
        model: g.model,
        pci_bus_id: g.pci_bus_id,
        mem_total_bytes,
        power_limit_w: a.get(Field::PowerLimit),
        max_sm_clock_mhz: a.u32(Field::MaxSmClock),
        max_mem_clock_mhz: a.u32(Field::MaxMemClock),
        slowdown_temp_c: a.u32(Field::SlowdownTemp),
        shutdown_temp_c: a.u32(Field::ShutdownTemp),
        nvlinks: Vec::new(),
    };
    let reading = GpuReading {
        index,
        error: None,
        util_pct: a.u32(Field::GpuUtil),
        mem_util_pct: a.u32(Field::MemCopyUtil),
        mem_used_bytes,
        temp_c: a.u32(Field::GpuTemp),
        hbm_temp_c: a.u32(Field::MemoryTemp),
        power_w: a.get(Field::PowerUsage),
        power_limit_w: a.get(Field::PowerLimit),
        energy_mj: a.u64(Field::Energy),
        sm_clock_mhz: a.u32(Field::SmClock),
        mem_clock_mhz: a.u32(Field::MemClock),
        throttle_mask: a.u64(Field::ThrottleReasons),
        pcie_tx_bytes_per_s: a.get(Field::PcieTx),
        pcie_rx_bytes_per_s: a.get(Field::PcieRx),
        pcie_replay_count: a.u64(Field::PcieReplay),
        ecc_corrected_volatile: a.u64(Field::EccSbeVol),
        ecc_uncorrected_volatile: a.u64(Field::EccDbeVol),
        retired_pages: retired,
        remapped_rows_correctable: a.u32(Field::RemapCorrectable),
        remapped_rows_uncorrectable: a.u32(Field::RemapUncorrectable),
        remap_pending: a.get(Field::RemapPending).map(|v| v > 0.0),
        remap_failed: a.get(Field::RemapFailure).map(|v| v > 0.0),
        // DCGM's XID field holds the last XID seen (0: none); `Xids` keeps
        // it from being reported again on every read.
        xids: a
            .u32(Field::Xid)
            .filter(|&x| x > 0)
            .map(|xid| Xid { xid, time_ms: now_ms })
            .into_iter()
            .collect(),
        nvlinks_down: Vec::new(),
        nvlink_tx_kib: Vec::new(),
        nvlink_rx_kib: Vec::new(),
        processes: Vec::new(),
        gpm: a.gpm(),
        mig,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::promtext::{Limits, parse};

    fn map(text: &str) -> Mapped {
        let e = parse(text, &Limits::default()).expect("a value");
        map_node(&e.samples, "fallback", "dcgm-exporter", 5000, 1_000)
    }

    const L0: &str = r#"gpu="0",UUID="GPU-aaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu07",DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod="""#;

    #[test]
    fn a_gpu_maps_with_units() {
        let m = map(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{{L0}}} 87\n\
             DCGM_FI_DEV_MEM_COPY_UTIL{{{L0}}} 40\n\
             DCGM_FI_DEV_FB_USED{{{L0}}} 1024\n\
             DCGM_FI_DEV_FB_FREE{{{L0}}} 80000\n\
             DCGM_FI_DEV_FB_RESERVED{{{L0}}} 535\n\
             DCGM_FI_DEV_GPU_TEMP{{{L0}}} 61\n\
             DCGM_FI_DEV_POWER_USAGE{{{L0}}} 412.5\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 2147483640\n\
             DCGM_FI_DEV_SM_CLOCK{{{L0}}} 1980\n\
             DCGM_FI_DEV_XID_ERRORS{{{L0}}} 79\n\
             DCGM_FI_PROF_SM_ACTIVE{{{L0}}} 0.5\n\
             DCGM_FI_PROF_SM_OCCUPANCY{{{L0}}} 0.25\n\
             DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{L0}}} 0.1\n\
             DCGM_FI_PROF_DRAM_ACTIVE{{{L0}}} 0.75\n"
        ));
        assert_eq!(m.desc.hostname, "gpu07");
        assert_eq!(m.desc.driver_version.as_deref(), Some("550.54.15"));
        let d = &m.desc.gpus[0];
        assert_eq!(
            (d.uuid.as_str(), d.model.as_str()),
            ("GPU-aaa", "NVIDIA H100 80GB HBM3")
        );
        assert_eq!(d.mem_total_bytes, Some((1024 + 80000 + 535) << 20));
        let g = &m.sample.gpus[0];
        assert_eq!(g.util_pct, Some(87));
        assert_eq!(g.mem_util_pct, Some(40));
        assert_eq!(g.mem_used_bytes, Some(1024 << 20));
        assert_eq!(g.power_w, Some(412.5));
        // A 64-bit counter in the 32-bit blank range is a real count.
        assert_eq!(g.energy_mj, Some(2_147_483_640));
        assert_eq!(
            g.xids,
            vec![Xid {
                xid: 79,
                time_ms: 1_000
            }]
        );
        let gpm = g.gpm.expect("a value");
        assert_eq!((gpm.sm_active_pct, gpm.dram_bw_pct), (50.0, 75.0));
        // What dcgm-exporter did not give is absent, never 0.
        assert_eq!(g.hbm_temp_c, None);
        assert_eq!(g.mem_clock_mhz, None);
        assert_eq!(g.throttle_mask, None);
        assert_eq!(g.ecc_uncorrected_volatile, None);
        assert!(m.sample.host.is_none());
    }

    #[test]
    fn blank_sentinels_read_as_absent() {
        let m = map(&format!(
            "DCGM_FI_DEV_MEMORY_TEMP{{{L0}}} 9223372036854775794\n\
             DCGM_FI_DEV_GPU_TEMP{{{L0}}} 2147483632\n\
             DCGM_FI_DEV_SM_CLOCK{{{L0}}} 2147483646\n\
             DCGM_FI_DEV_POWER_USAGE{{{L0}}} 140737488355328\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 9223372036854775792\n\
             DCGM_FI_DEV_GPU_UTIL{{{L0}}} NaN\n\
             DCGM_FI_DEV_MEM_CLOCK{{{L0}}} 1593\n"
        ));
        let g = &m.sample.gpus[0];
        assert_eq!(g.hbm_temp_c, None);
        assert_eq!(g.temp_c, None);
        assert_eq!(g.sm_clock_mhz, None);
        assert_eq!(g.power_w, None);
        assert_eq!(g.energy_mj, None);
        assert_eq!(g.util_pct, None);
        assert_eq!(g.mem_clock_mhz, Some(1593));
    }

    #[test]
    fn mig_instances_become_per_instance_readings() {
        let mig = |gi: u32, prof: &str| {
            format!(
                r#"gpu="1",UUID="GPU-bbb",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu07",GPU_I_PROFILE="{prof}",GPU_I_ID="{gi}""#
            )
        };
        let (a, b) = (mig(1, "3g.40gb"), mig(2, "1g.10gb"));
        let m = map(&format!(
            "DCGM_FI_DEV_FB_USED{{{a}}} 100\nDCGM_FI_DEV_FB_FREE{{{a}}} 40000\n\
             DCGM_FI_DEV_FB_USED{{{b}}} 50\nDCGM_FI_DEV_FB_FREE{{{b}}} 9000\n\
             DCGM_FI_DEV_GPU_TEMP{{{a}}} 44\nDCGM_FI_DEV_GPU_TEMP{{{b}}} 44\n\
             DCGM_FI_DEV_GPU_UTIL{{{L0}}} 3\n"
        ));
        assert_eq!(m.sample.gpus.len(), 2);
        let g = m.sample.gpu(1).expect("a value");
        assert_eq!(g.mig.len(), 2);
        assert_eq!(g.mig[0].gpu_instance_id, 1);
        assert_eq!(g.mig[0].profile, "3g.40gb");
        assert_eq!(g.mig[0].mem_used_bytes, Some(100 << 20));
        assert_eq!(g.mig[1].mem_total_bytes, Some(9050 << 20));
        assert_eq!(g.mem_used_bytes, Some(150 << 20));
        assert_eq!(g.temp_c, Some(44));
        assert_eq!(g.util_pct, None);
        assert_eq!(m.desc.gpu(1).expect("a value").mem_total_bytes, Some(49150 << 20));
        // Two models on one node.
        assert_eq!(m.desc.gpu(0).expect("a value").model, "NVIDIA H100 80GB HBM3");
        assert_eq!(m.desc.gpu(1).expect("a value").model, "NVIDIA A100-SXM4-80GB");
        assert!(m.sample.gpu(0).expect("a value").mig.is_empty());
    }

    #[test]
    fn hostname_label_variants() {
        let e = parse(
            "a{Hostname=\"n1\",hostname=\"x\"} 1\nb{hostname=\"n2\"} 1\nc{instance=\"n3:9400\"} 1\n\
             d{instance=\"[::1]:9400\"} 1\ne{instance=\"n5\"} 1\nf{gpu=\"0\"} 1\n",
            &Limits::default(),
        )
        .expect("a value");
        let hosts: Vec<Option<String>> = e.samples.iter().map(host_of).collect();
        let want = [Some("n1"), Some("n2"), Some("n3"), Some("::1"), Some("n5"), None];
        assert_eq!(hosts, want.map(|h| h.map(str::to_string)));
        let m = map("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",hostname=\"lower\"} 30\n");
        assert_eq!(m.desc.hostname, "lower");
        let m = map("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 30\nDCGM_FI_DEV_GPU_TEMP{UUID=\"x\"} 30\n");
        assert_eq!(m.desc.hostname, "fallback");
        assert_eq!(m.skipped, 1);
    }

    #[test]
    fn pod_labels_do_not_split_a_gpu() {
        let m = map("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=\"train-1\",namespace=\"ml\"} 90\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",pod=\"train-1\",namespace=\"ml\"} 50\n");
        assert_eq!(m.sample.gpus.len(), 1);
        assert_eq!(m.sample.gpus[0].util_pct, Some(90));
    }

    #[test]
    fn an_xid_is_reported_once() {
        let mut x = Xids::default();
        let text = "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 48\n";
        let mut first = map(text).sample;
        x.dedup(&mut first);
        assert_eq!(first.gpus[0].xids.len(), 1);
        let mut again = map(text).sample;
        x.dedup(&mut again);
        assert!(again.gpus[0].xids.is_empty());
        let mut cleared = map("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 0\n").sample;
        x.dedup(&mut cleared);
        let mut back = map(text).sample;
        x.dedup(&mut back);
        assert_eq!(back.gpus[0].xids.len(), 1);
    }
}
