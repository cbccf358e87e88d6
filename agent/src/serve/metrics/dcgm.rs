//! dcgm-exporter's families (`DCGM_FI_*`): the series a Grafana dashboard
//! or an alert rule written for dcgm-exporter reads, under its names, types,
//! units and help. Apart from the agent's own GPU families (`fleetop_gpu`)
//! because these must match another exporter's, series for series.

use fleetop_proto::absent as a;

use super::Snapshot;
use super::gpu::Gpu;
use super::text::{Kind, Writer};

const MIB: u64 = 1 << 20;

/// dcgm-exporter's series: names, types, units and help as its
/// etc/default-counters.csv (and DCGM's field list) give them.
pub(super) fn dcgm(w: &mut Writer, gpus: &[Gpu], snap: &Snapshot) {
    // Per GPU, not per instance (DCGM gives these for the whole GPU).
    type Field = fn(&Gpu) -> Option<f64>;
    let whole: [(&'static str, Kind, &'static str, Field); 15] = [
        (
            "DCGM_FI_DEV_SM_CLOCK",
            Kind::Gauge,
            "SM clock frequency (in MHz).",
            |g| g.opt(a::SM_CLOCK, f64::from(g.s.sm_clock_mhz)),
        ),
        (
            "DCGM_FI_DEV_MEM_CLOCK",
            Kind::Gauge,
            "Memory clock frequency (in MHz).",
            |g| g.opt(a::MEM_CLOCK, f64::from(g.s.mem_clock_mhz)),
        ),
        // NVML reports no HBM sensor as 0: no memory is at 0 °C.
        (
            "DCGM_FI_DEV_MEMORY_TEMP",
            Kind::Gauge,
            "Memory temperature (in C).",
            |g| g.opt(a::HBM_TEMP, g.s.hbm_temp_c).filter(|&t| t > 0).map(f64::from),
        ),
        ("DCGM_FI_DEV_GPU_TEMP", Kind::Gauge, "GPU temperature (in C).", |g| {
            g.opt(a::TEMP, f64::from(g.s.temp_c))
        }),
        ("DCGM_FI_DEV_POWER_USAGE", Kind::Gauge, "Power draw (in W).", |g| {
            g.opt(a::POWER, f64::from(g.s.power_mw) / 1000.0)
        }),
        (
            "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            Kind::Gauge,
            "Power management limit (in W).",
            |g| {
                g.opt(a::POWER_LIMIT, g.s.power_limit_mw)
                    .filter(|&p| p > 0)
                    .map(|p| f64::from(p) / 1000.0)
            },
        ),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            Kind::Counter,
            "Total energy consumption since boot (in mJ).",
            |g| g.opt(a::ENERGY, g.s.energy_mj as f64),
        ),
        (
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            Kind::Counter,
            "Total number of PCIe retries.",
            |g| g.opt(a::PCIE_REPLAY, g.s.pcie_replay_count as f64),
        ),
        ("DCGM_FI_DEV_GPU_UTIL", Kind::Gauge, "GPU utilization (in %).", |g| {
            g.opt(a::UTIL, f64::from(g.s.util_pct))
        }),
        (
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            Kind::Gauge,
            "Memory utilization (in %).",
            |g| g.opt(a::MEM_UTIL, f64::from(g.s.mem_util_pct)),
        ),
        (
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            Kind::Counter,
            "Total number of single-bit volatile ECC errors.",
            |g| g.opt(a::ECC, g.s.ecc_corrected_volatile as f64),
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            Kind::Counter,
            "Total number of double-bit volatile ECC errors.",
            |g| g.opt(a::ECC, g.s.ecc_uncorrected_volatile as f64),
        ),
        (
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            Kind::Counter,
            "Number of remapped rows for uncorrectable errors",
            |g| g.opt(a::REMAPPED_ROWS, f64::from(g.s.remapped_rows_uncorrectable)),
        ),
        (
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
            Kind::Counter,
            "Number of remapped rows for correctable errors",
            |g| g.opt(a::REMAPPED_ROWS, f64::from(g.s.remapped_rows_correctable)),
        ),
        (
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            Kind::Gauge,
            "Whether remapping of rows has failed",
            |g| g.opt(a::REMAPPED_ROWS, f64::from(u8::from(g.s.remapped_rows_failed != 0))),
        ),
    ];
    for (name, kind, help, field) in whole {
        w.family(name, kind, help);
        for g in gpus {
            if let Some(v) = field(g) {
                w.each(&g.labels, &[], v);
            }
        }
    }
    w.family(
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        Kind::Gauge,
        "Whether remapping of rows is pending",
    );
    for g in gpus {
        if let Some(v) = g.opt(a::REMAPPED_ROWS, u8::from(g.s.remapped_rows_pending != 0)) {
            w.each(&g.labels, &[], v);
        }
    }
    // DCGM reads 0 until the first XID, and then the last one.
    w.family(
        "DCGM_FI_DEV_XID_ERRORS",
        Kind::Gauge,
        "Value of the last XID error encountered.",
    );
    for g in gpus {
        w.each(&g.labels, &[], snap.last_xid.get(&g.s.index).copied().unwrap_or(0));
    }
    w.family(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        Kind::Counter,
        "Total number of NVLink bandwidth counters for all lanes (in KiB, sent and received).",
    );
    for g in gpus {
        if let Some(c) = snap.nvlink.get(&g.s.index) {
            let total: u64 = c.tx_kib.iter().chain(&c.rx_kib).fold(0u64, |t, v| t.wrapping_add(*v));
            w.each(&g.labels, &[], total);
        }
    }
    // Framebuffer: per MIG instance on a GPU in MIG mode (as dcgm-exporter
    // gives it), per GPU otherwise, so a sum over series never counts twice.
    for (name, help, used) in [
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", false),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", true),
    ] {
        w.family(name, Kind::Gauge, help);
        for g in gpus {
            if g.in_mig_mode() {
                if !g.answered() {
                    continue;
                }
                for (m, l) in g.s.mig.iter().zip(&g.mig_labels) {
                    if m.mem_total_bytes == 0 {
                        continue;
                    }
                    let v = if used {
                        m.mem_used_bytes
                    } else {
                        m.mem_total_bytes.saturating_sub(m.mem_used_bytes)
                    };
                    w.each(l, &[], v / MIB);
                }
            } else if let Some(u) = g.opt(a::MEM_USED, g.s.mem_used_bytes) {
                let v = if used {
                    Some(u)
                } else {
                    g.mem_total().map(|t| t.saturating_sub(u))
                };
                if let Some(v) = v {
                    w.each(&g.labels, &[], v / MIB);
                }
            }
        }
    }
    // DCGM's profiling ratios (0-1) from NVML GPM, per GPU and per MIG
    // instance. GR_ENGINE_ACTIVE (which NVIDIA's dashboard plots) comes
    // from NVML's utilization, the same "some kernel was running" share.
    w.family(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        Kind::Gauge,
        "Ratio of time the graphics engine is active.",
    );
    for g in gpus {
        if let Some(u) = g.opt(a::UTIL, g.s.util_pct) {
            w.each(&g.labels, &[], f64::from(u) / 100.0);
        }
    }
    type Prof = fn(&crate::proto::Gpm) -> u32;
    let prof: [(&'static str, &'static str, Prof); 4] = [
        (
            "DCGM_FI_PROF_SM_ACTIVE",
            "The ratio of cycles an SM has at least 1 warp assigned.",
            |m| m.sm_active_cpct,
        ),
        (
            "DCGM_FI_PROF_SM_OCCUPANCY",
            "The ratio of number of warps resident on an SM.",
            |m| m.sm_occupancy_cpct,
        ),
        (
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "Ratio of cycles the tensor (HMMA) pipe is active.",
            |m| m.tensor_active_cpct,
        ),
        (
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            |m| m.dram_bw_cpct,
        ),
    ];
    for (name, help, field) in prof {
        w.family(name, Kind::Gauge, help);
        for g in gpus.iter().filter(|g| g.answered()) {
            if let Some(m) = &g.s.gpm {
                w.each(&g.labels, &[], f64::from(field(m)) / 10_000.0);
            }
            for (m, l) in g.s.mig.iter().zip(&g.mig_labels) {
                if let Some(m) = &m.gpm {
                    w.each(l, &[], f64::from(field(m)) / 10_000.0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use fleetop_proto::absent as a;

    use crate::proto::{Gpm, MigInstance, Sample};
    use crate::serve::metrics::tests::{gpu, info, lines, scrape};

    #[test]
    fn mig_instances_carry_their_profile_and_id() {
        let mut g = gpu(0);
        g.absent = a::UTIL;
        g.mig = vec![
            MigInstance {
                gpu_instance_id: 1,
                profile: "3g.40gb".into(),
                mem_used_bytes: 1 << 30,
                mem_total_bytes: 40 << 30,
                gpm: Some(Gpm {
                    sm_active_cpct: 5000,
                    ..Default::default()
                }),
                ..Default::default()
            },
            MigInstance {
                gpu_instance_id: 2,
                profile: "3g.40gb".into(),
                mem_used_bytes: 2 << 30,
                mem_total_bytes: 40 << 30,
                ..Default::default()
            },
        ];
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![g],
            ..Default::default()
        };
        let t = scrape(&info(1), &[s], 10_100);
        let fb = lines(&t, "DCGM_FI_DEV_FB_USED");
        assert_eq!(fb.len(), 2, "per instance, not per GPU: {fb:?}");
        assert!(fb[0].contains("GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\"") && fb[0].ends_with(" 1024"));
        assert!(fb[1].contains("GPU_I_ID=\"2\"") && fb[1].ends_with(" 2048"));
        assert!(lines(&t, "DCGM_FI_DEV_FB_FREE")[1].ends_with(" 38912"));
        let sm = lines(&t, "DCGM_FI_PROF_SM_ACTIVE");
        assert_eq!(sm.len(), 1);
        assert!(sm[0].contains("GPU_I_ID=\"1\"") && sm[0].ends_with(" 0.5"));
        assert!(lines(&t, "DCGM_FI_DEV_GPU_UTIL").is_empty());
    }
}
