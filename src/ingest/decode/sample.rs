//! One wire sample's readings, decoded once: absent is `None`, never 0;
//! times moved to the console's clock; text from outside made printable.

use std::borrow::Cow;
use std::sync::Arc;

use fleetop_proto::pb;

use super::processes::{LastProcesses, processes};
use super::{nz, pcie_link, text};
use crate::model::sample::{
    Fabric, Gpm, GpuError, GpuEvent, GpuProcess, GpuReading, HostReading, IbReading, MigReading, NodeSample, PodRef,
    RasCount, Sxid, Xid,
};

/// A whole wire sample (delta already undone), its times moved to the
/// console's clock by subtracting `skew_ms` (agent clock minus console clock).
pub fn sample(s: &pb::Sample, skew_ms: i64) -> NodeSample {
    sample_with(s, skew_ms, &mut LastProcesses::new(), &[])
}

/// As `sample`, sharing the processes of the stream's previous sample
/// (`last`) where they did not change: without a look where the wire says
/// so (`kept`, per GPU), by comparing them otherwise.
pub(super) fn sample_with(s: &pb::Sample, skew_ms: i64, last: &mut LastProcesses, kept: &[bool]) -> NodeSample {
    last.resize_with(s.gpus.len(), Default::default);
    NodeSample {
        seq: s.seq,
        time_ms: s.time_ms - skew_ms,
        // A host with no memory total was not read (an agent before 0.2
        // sent zeros then): absent, not an idle, empty machine.
        host: s.host.as_ref().filter(|h| h.mem_total_bytes > 0).map(|h| HostReading {
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

pub(super) fn gpu_reading(g: &pb::GpuSample, skew_ms: i64, was: &mut Arc<[GpuProcess]>, kept: bool) -> GpuReading {
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
    let events = events(&g.events, skew_ms);
    if error.is_some() {
        // No readings from a GPU that did not answer; XIDs (and AMD's
        // events: a reset) still count.
        return GpuReading {
            index: g.index,
            error,
            xids,
            events,
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
        links_unknown: ab & a::LINKS != 0,
        edge_temp_c: g.edge_temp_c,
        ras: g
            .ras
            .iter()
            .map(|r| RasCount {
                block: word(&r.block, RAS_BLOCKS, 32),
                correctable: r.correctable,
                uncorrectable: r.uncorrectable,
                deferred: r.deferred,
            })
            .collect(),
        xgmi_error_status: g.xgmi_error_status,
        events,
        throttle_detail: g.throttle_detail.iter().map(|w| word(w, THROTTLE_WORDS, 32)).collect(),
        // The agent reads pending bad pages where it reads no row remapping
        // (AMD); NVIDIA's like of it is the remap's pending flag.
        retired_pages_pending: (ab & a::REMAPPED_ROWS != 0).then_some(g.retired_pages_pending),
    }
}

/// AMD SMI's RAS block names (amdsmi_gpu_block_t), as the agent words them.
const RAS_BLOCKS: &[&str] = &[
    "UMC",
    "SDMA",
    "GFX",
    "MMHUB",
    "ATHUB",
    "PCIE_BIF",
    "HDP",
    "XGMI_WAFL",
    "DF",
    "SMN",
    "SEM",
    "MP0",
    "MP1",
    "FUSE",
    "MCA",
    "VCN",
    "JPEG",
    "IH",
    "MPIO",
];

/// AMD's throttle words the agent sends: the violation status's, then the
/// throttler bits'.
const THROTTLE_WORDS: &[&str] = &[
    "prochot_thrm",
    "ppt_pwr",
    "socket_thrm",
    "vr_thrm",
    "hbm_thrm",
    "gfx_clk_below_host_limit",
    "PPT0",
    "PPT1",
    "PPT2",
    "PPT3",
    "SPL",
    "FPPT",
    "SPPT",
    "SPPT_APU",
    "TDC_GFX",
    "TDC_SOC",
    "TDC_MEM",
    "TDC_VDD",
    "TDC_CVIP",
    "TEMP_GPU",
    "TEMP_CORE",
    "TEMP_MEM",
    "TEMP_EDGE",
    "TEMP_HOTSPOT",
    "TEMP_SOC",
    "TEMP_LIQUID0",
    "TEMP_LIQUID1",
    "TEMP_VR_GFX",
    "TEMP_VR_SOC",
    "TEMP_VR_MEM0",
    "TEMP_VR_MEM1",
    "VRHOT0",
    "VRHOT1",
    "PROCHOT_CPU",
    "PROCHOT_GFX",
    "EDC_CPU",
    "EDC_GFX",
    "APCC",
    "PPM",
    "FIT",
];

/// AMD's event kinds the agent sends.
const EVENT_KINDS: &[&str] = &["gpu_pre_reset", "gpu_post_reset", "thermal_throttle", "vmfault"];

/// A word from the vendor's library: the static copy of a known one (every
/// GPU says them every second), else made printable and cut to `max`.
fn word(s: &str, known: &[&'static str], max: usize) -> Cow<'static, str> {
    match known.iter().find(|w| **w == s) {
        Some(w) => Cow::Borrowed(*w),
        None => Cow::Owned(fleetop_proto::input::printable(s, max)),
    }
}

/// The library's events (AMD SMI), their times moved to the console's
/// clock and their text made printable.
fn events(got: &[pb::GpuEvent], skew_ms: i64) -> Vec<GpuEvent> {
    got.iter()
        .map(|e| GpuEvent {
            kind: word(&e.kind, EVENT_KINDS, 32),
            time_ms: e.time_ms - skew_ms,
            text: fleetop_proto::input::printable(&e.text, 200),
        })
        .collect()
}

/// The containers holding a GPU, as the agent read them from the kubelet:
/// names made printable (they reach the screen) and bounded (Kubernetes
/// allows 253 characters for a pod's name, 63 for a namespace or container).
pub(super) fn pods(got: &[pb::PodRef]) -> Vec<PodRef> {
    let mut v: Vec<PodRef> = got
        .iter()
        .map(|p| PodRef::printable(&p.namespace, &p.pod, &p.container, &p.mig_uuid))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// GPM metrics: hundredths of a percent on the wire.
pub(super) fn gpm(m: &pb::Gpm) -> Gpm {
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

pub(super) fn ib_reading(p: &pb::IbSample) -> IbReading {
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
