//! AMD device-metrics-exporter's families (`gpu_*`, `pcie_*`) for AMD GPUs:
//! the series AMD's Grafana dashboards and alert rules read, under AMD's
//! names, labels and units, as `dcgm` serves dcgm-exporter's for NVIDIA
//! GPUs; and the agent's own AMD series (`fleetop_gpu_xgmi_*`,
//! `fleetop_gpu_throttle_detail`) for what AMD's exporter does not serve.
//! docs/metrics.md lists which of AMD's are served, and which are not.
//!
//! AMD's exporter types every family a gauge, counters too; so does this.
//! Readings of the whole physical GPU (power, energy, temperatures, clocks,
//! PCIe, XGMI, ECC) are written on its compute partition 0 only
//! (`Gpu::whole_socket`), as AMD's exporter suppresses them on the others.

use fleetop_catalog::Severity;
use fleetop_proto::absent as a;

use super::Snapshot;
use super::flags::gpu_flags;
use super::gpu::Gpu;
use super::text::{Kind, Writer, push_label};
use crate::proto::NodeInfo;

const MIB: u64 = 1 << 20;

/// AMD SMI's RAS block names (`RasCount.block`) and the exporter's ECC
/// families for each: correctable, uncorrectable, deferred.
const ECC_BLOCKS: [(&str, [&str; 3]); 19] = [
    (
        "UMC",
        ["gpu_ecc_correct_umc", "gpu_ecc_uncorrect_umc", "gpu_ecc_deferred_umc"],
    ),
    (
        "SDMA",
        [
            "gpu_ecc_correct_sdma",
            "gpu_ecc_uncorrect_sdma",
            "gpu_ecc_deferred_sdma",
        ],
    ),
    (
        "GFX",
        ["gpu_ecc_correct_gfx", "gpu_ecc_uncorrect_gfx", "gpu_ecc_deferred_gfx"],
    ),
    (
        "MMHUB",
        [
            "gpu_ecc_correct_mmhub",
            "gpu_ecc_uncorrect_mmhub",
            "gpu_ecc_deferred_mmhub",
        ],
    ),
    (
        "ATHUB",
        [
            "gpu_ecc_correct_athub",
            "gpu_ecc_uncorrect_athub",
            "gpu_ecc_deferred_athub",
        ],
    ),
    (
        "PCIE_BIF",
        ["gpu_ecc_correct_bif", "gpu_ecc_uncorrect_bif", "gpu_ecc_deferred_bif"],
    ),
    (
        "HDP",
        ["gpu_ecc_correct_hdp", "gpu_ecc_uncorrect_hdp", "gpu_ecc_deferred_hdp"],
    ),
    (
        "XGMI_WAFL",
        [
            "gpu_ecc_correct_xgmi_wafl",
            "gpu_ecc_uncorrect_xgmi_wafl",
            "gpu_ecc_deferred_xgmi_wafl",
        ],
    ),
    (
        "DF",
        ["gpu_ecc_correct_df", "gpu_ecc_uncorrect_df", "gpu_ecc_deferred_df"],
    ),
    (
        "SMN",
        ["gpu_ecc_correct_smn", "gpu_ecc_uncorrect_smn", "gpu_ecc_deferred_smn"],
    ),
    (
        "SEM",
        ["gpu_ecc_correct_sem", "gpu_ecc_uncorrect_sem", "gpu_ecc_deferred_sem"],
    ),
    (
        "MP0",
        ["gpu_ecc_correct_mp0", "gpu_ecc_uncorrect_mp0", "gpu_ecc_deferred_mp0"],
    ),
    (
        "MP1",
        ["gpu_ecc_correct_mp1", "gpu_ecc_uncorrect_mp1", "gpu_ecc_deferred_mp1"],
    ),
    (
        "FUSE",
        [
            "gpu_ecc_correct_fuse",
            "gpu_ecc_uncorrect_fuse",
            "gpu_ecc_deferred_fuse",
        ],
    ),
    (
        "MCA",
        ["gpu_ecc_correct_mca", "gpu_ecc_uncorrect_mca", "gpu_ecc_deferred_mca"],
    ),
    (
        "VCN",
        ["gpu_ecc_correct_vcn", "gpu_ecc_uncorrect_vcn", "gpu_ecc_deferred_vcn"],
    ),
    (
        "JPEG",
        [
            "gpu_ecc_correct_jpeg",
            "gpu_ecc_uncorrect_jpeg",
            "gpu_ecc_deferred_jpeg",
        ],
    ),
    (
        "IH",
        ["gpu_ecc_correct_ih", "gpu_ecc_uncorrect_ih", "gpu_ecc_deferred_ih"],
    ),
    (
        "MPIO",
        [
            "gpu_ecc_correct_mpio",
            "gpu_ecc_uncorrect_mpio",
            "gpu_ecc_deferred_mpio",
        ],
    ),
];

/// The exporter's `clock_index` of the GFX clock it writes first (its
/// eight GFX clocks are 0-7) and of the memory clock (8, after them).
const GFX_CLOCK_INDEX: &str = "0";
const MEM_CLOCK_INDEX: &str = "8";

/// PCIe generation to AMD's `pcie_speed` unit, GT/s.
fn gts(generation: u32) -> Option<f64> {
    Some(match generation {
        1 => 2.5,
        2 => 5.0,
        3 => 8.0,
        4 => 16.0,
        5 => 32.0,
        6 => 64.0,
        _ => return None,
    })
}

type Field = fn(&Gpu) -> Option<f64>;

/// AMD's families, AMD GPUs only (`gpus` holds no other).
pub(super) fn amd(w: &mut Writer, info: &NodeInfo, gpus: &[Gpu], snap: &Snapshot) {
    if gpus.is_empty() {
        return;
    }
    // Node-wide: how many GPUs (partitions count, as AMD counts them).
    let mut host = String::new();
    push_label(&mut host, "hostname", &info.hostname);
    w.family(
        "gpu_nodes_total",
        Kind::Gauge,
        "GPUs on the node (each compute partition is one).",
    );
    w.sample(&host, &[], gpus.len());

    // Per GPU: every partition its own.
    let own: [(&'static str, &'static str, Field); 5] = [
        (
            "gpu_gfx_activity",
            "GFX engine activity (in %, 0-100; AMD SMI's gfx_activity).",
            |g| g.opt(a::UTIL, f64::from(g.s.util_pct)),
        ),
        (
            "gpu_umc_activity",
            "Memory controller (UMC) activity (in %, 0-100).",
            |g| g.opt(a::MEM_UTIL, f64::from(g.s.mem_util_pct)),
        ),
        ("gpu_used_vram", "VRAM in use (in MB, 2^20 bytes).", |g| {
            g.opt(a::MEM_USED, (g.s.mem_used_bytes / MIB) as f64)
        }),
        ("gpu_total_vram", "VRAM in all (in MB, 2^20 bytes).", |g| {
            g.answered().then(|| g.mem_total()).flatten().map(|t| (t / MIB) as f64)
        }),
        (
            "gpu_free_vram",
            "VRAM free: total less used (in MB, 2^20 bytes).",
            |g| {
                let used = g.opt(a::MEM_USED, g.s.mem_used_bytes)?;
                g.mem_total().map(|t| (t.saturating_sub(used) / MIB) as f64)
            },
        ),
    ];
    for (name, help, field) in own {
        w.family(name, Kind::Gauge, help);
        for g in gpus {
            if let Some(v) = field(g) {
                w.each(&g.labels, &[], v);
            }
        }
    }
    // MI300: GFX busy per XCC of the GPU (each partition its own XCCs),
    // by AMD's xcc_index.
    w.family(
        "gpu_gfx_busy_instantaneous",
        Kind::Gauge,
        "GFX busy now per compute core (XCC) of the GPU or partition (in %; AMD SMI's gfx_busy_inst).",
    );
    for g in gpus.iter().filter(|g| g.answered()) {
        for (k, v) in g.s.xcc_gfx_busy_pct.iter().enumerate() {
            w.each(&g.labels, &[("xcc_index", &k.to_string())], v);
        }
    }
    // AMD's health: 0 where the agent raises a crit flag on the GPU (lost,
    // uncorrectable ECC, a link down, HW throttling, ...), 1 otherwise.
    w.family(
        "gpu_health",
        Kind::Gauge,
        "1 healthy, 0 unhealthy: a crit fleetop_flag on the GPU (lost, uncorrectable ECC, XGMI link down, ...).",
    );
    for g in gpus {
        let sick = gpu_flags(g).iter().any(|(_, sev, _)| *sev == Severity::Crit);
        w.each(&g.labels, &[], u8::from(!sick));
    }

    // The whole physical GPU, on partition 0.
    let socket: Vec<&Gpu> = gpus.iter().filter(|g| g.whole_socket()).collect();
    let whole: [(&'static str, &'static str, Field); 10] = [
        (
            "gpu_package_power",
            "Socket power now (in W; the average where the GPU gives no current figure).",
            |g| g.opt(a::POWER, f64::from(g.s.power_mw) / 1000.0),
        ),
        (
            "gpu_power_usage",
            "Socket power now (in W), as gpu_package_power.",
            |g| g.opt(a::POWER, f64::from(g.s.power_mw) / 1000.0),
        ),
        (
            "gpu_energy_consumed",
            "Energy since the driver loaded (in uJ; read in mJ).",
            |g| g.opt(a::ENERGY, g.s.energy_mj as f64 * 1000.0),
        ),
        (
            "gpu_junction_temperature",
            "Junction (hotspot) temperature (in C).",
            |g| g.opt(a::TEMP, f64::from(g.s.temp_c)),
        ),
        (
            "gpu_edge_temperature",
            "Edge temperature (in C); MI300 has no edge sensor.",
            |g| g.answered().then_some(g.s.edge_temp_c).flatten().map(f64::from),
        ),
        // No memory is at 0 C: a sensor that reads 0 is none.
        (
            "gpu_memory_temperature",
            "Memory (HBM) temperature, the hottest stack (in C).",
            |g| g.opt(a::HBM_TEMP, g.s.hbm_temp_c).filter(|&t| t > 0).map(f64::from),
        ),
        ("pcie_speed", "PCIe link speed trained now (in GT/s).", |g| {
            let generation = g.answered().then_some(g.s.pcie_gen)?;
            gts(generation)
        }),
        (
            "pcie_max_speed",
            "PCIe link speed the GPU and slot can train to (in GT/s).",
            |g| gts(g.info?.pcie_max_gen).filter(|_| g.answered()),
        ),
        ("pcie_replay_count", "PCIe replays since the driver loaded.", |g| {
            g.opt(a::PCIE_REPLAY, g.s.pcie_replay_count as f64)
        }),
        ("gpu_ecc_deferred_total", "Deferred ECC errors, all RAS blocks.", |g| {
            let ras = g.opt(a::ECC, &g.s.ras).filter(|r| !r.is_empty())?;
            Some(ras.iter().fold(0u64, |t, r| t.saturating_add(r.deferred)) as f64)
        }),
    ];
    for (name, help, field) in whole {
        w.family(name, Kind::Gauge, help);
        for g in &socket {
            if let Some(v) = field(g) {
                w.each(&g.labels, &[], v);
            }
        }
    }
    for (name, help, uncorrected) in [
        (
            "gpu_ecc_correct_total",
            "Correctable ECC errors, all RAS blocks, since the driver loaded.",
            false,
        ),
        (
            "gpu_ecc_uncorrect_total",
            "Uncorrectable ECC errors, all RAS blocks, since the driver loaded.",
            true,
        ),
    ] {
        w.family(name, Kind::Gauge, help);
        for g in &socket {
            let v = if uncorrected {
                g.s.ecc_uncorrected_volatile
            } else {
                g.s.ecc_corrected_volatile
            };
            if let Some(v) = g.opt(a::ECC, v) {
                w.each(&g.labels, &[], v);
            }
        }
    }
    // Per RAS block, every block AMD SMI reports with ECC on.
    for (k, help) in [
        "Correctable ECC errors in this RAS block since the driver loaded.",
        "Uncorrectable ECC errors in this RAS block since the driver loaded.",
        "Deferred ECC errors in this RAS block since the driver loaded.",
    ]
    .into_iter()
    .enumerate()
    {
        for (block, names) in ECC_BLOCKS {
            w.family(names[k], Kind::Gauge, help);
            for g in &socket {
                if !g.has(a::ECC) {
                    continue;
                }
                if let Some(r) = g.s.ras.iter().find(|r| r.block == block) {
                    let v = [r.correctable, r.uncorrectable, r.deferred][k];
                    w.each(&g.labels, &[], v);
                }
            }
        }
    }
    // Clocks, by AMD's clock_type and clock_index: the GFX clock as its
    // first "system" clock, the memory clock.
    type Clock = fn(&Gpu) -> Option<u32>;
    /// A clock's `clock_type`, its `clock_index`, and how it is read.
    type ClockKind = (&'static str, &'static str, Clock);
    let clocks: [(&'static str, &'static str, [ClockKind; 2]); 2] = [
        (
            "gpu_clock",
            "Clock frequency now (in MHz), by clock_type (system: GFX, memory).",
            [
                ("system", GFX_CLOCK_INDEX, |g| g.opt(a::SM_CLOCK, g.s.sm_clock_mhz)),
                ("memory", MEM_CLOCK_INDEX, |g| g.opt(a::MEM_CLOCK, g.s.mem_clock_mhz)),
            ],
        ),
        (
            "gpu_max_clock",
            "Highest clock frequency (in MHz), by clock_type (system: GFX, memory).",
            [
                ("system", GFX_CLOCK_INDEX, |g| g.info.map(|i| i.max_sm_clock_mhz)),
                ("memory", MEM_CLOCK_INDEX, |g| g.info.map(|i| i.max_mem_clock_mhz)),
            ],
        ),
    ];
    for (name, help, kinds) in clocks {
        w.family(name, Kind::Gauge, help);
        for g in socket.iter().filter(|g| g.answered()) {
            for (ty, index, f) in kinds {
                if let Some(mhz) = f(g).filter(|&m| m > 0) {
                    w.each(&g.labels, &[("clock_index", index), ("clock_type", ty)], mhz);
                }
            }
        }
    }
    // XGMI data counters per link (AMD's "KB", as AMD SMI counts them),
    // the newest the agent read (every `nvlink_counters_every`-th sample).
    for (name, help, rx) in [
        (
            "gpu_xgmi_link_rx",
            "XGMI data read from the link's peer since the driver loaded (in KB, as AMD SMI counts).",
            true,
        ),
        (
            "gpu_xgmi_link_tx",
            "XGMI data written to the link's peer since the driver loaded (in KB, as AMD SMI counts).",
            false,
        ),
    ] {
        w.family(name, Kind::Gauge, help);
        for g in &socket {
            let (Some(c), Some(info)) = (snap.nvlink.get(&g.s.index), g.info) else {
                continue;
            };
            let values = if rx { &c.rx_kib } else { &c.tx_kib };
            for (v, link) in values.iter().zip(&info.nvlinks) {
                w.each(&g.labels, &[("link_index", &link.link.to_string())], v);
            }
        }
    }

    // The agent's own, for what AMD's exporter does not serve.
    w.family(
        "fleetop_gpu_xgmi_link_state",
        Kind::Gauge,
        "Per XGMI link AMD SMI lists up or down: 1 up, 0 down (a link unused by design is not listed).",
    );
    for g in socket.iter().filter(|g| g.has(a::LINKS)) {
        let Some(info) = g.info else { continue };
        for (pos, link) in info.nvlinks.iter().enumerate() {
            // An empty list means every link is up (the usual case).
            let up = g.s.nvlink_state.get(pos).copied().unwrap_or(1);
            w.each(&g.labels, &[("link_index", &link.link.to_string())], up);
        }
    }
    w.family(
        "fleetop_gpu_xgmi_error_status",
        Kind::Gauge,
        "AMD SMI's XGMI error status: 0 no errors, 1 an error, 2 several.",
    );
    for g in socket.iter().filter(|g| g.answered()) {
        if let Some(v) = g.s.xgmi_error_status {
            w.each(&g.labels, &[], v);
        }
    }
    w.family(
        "fleetop_gpu_throttle_detail",
        Kind::Gauge,
        "1 for each throttle or violation reason AMD SMI reports active now, in AMD's words.",
    );
    for g in gpus.iter().filter(|g| g.has(a::THROTTLE)) {
        for word in &g.s.throttle_detail {
            w.each(&g.labels, &[("reason", word)], 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use fleetop_proto::absent as a;

    use crate::proto::{GpuInfo, GpuSample, NodeInfo, NvLinkInfo, PodRef, RasCount, Sample};
    use crate::serve::metrics::tests::{gpu, info, lines, scrape};

    /// An MI300X node as the AMD reader describes it: `gpus` GPUs, each its
    /// own physical GPU (SPX) unless `cpx`, where each physical GPU is
    /// two partitions.
    fn mi300x(gpus: u32, cpx: bool) -> NodeInfo {
        NodeInfo {
            hostname: "mi1".into(),
            sample_interval_ms: 1000,
            backend: "amdsmi".into(),
            driver_version: "6.10.5".into(),
            gpus: (0..gpus)
                .map(|i| GpuInfo {
                    index: i,
                    vendor: "AMD".into(),
                    uuid: format!("d3ff74a1-0000-1000-80{i:02x}-000000000000"),
                    model: "AMD Instinct MI300X".into(),
                    board_part_number: "102-G30211-0C".into(),
                    serial_number: format!("692351000{i}"),
                    pci_bus_id: if cpx {
                        format!("0000:{:02x}:00.{}", 0x11 + i / 2, i % 2)
                    } else {
                        format!("0000:{:02x}:00.0", 0x11 + i)
                    },
                    mem_total_bytes: if cpx { 96 << 30 } else { 192 << 30 },
                    max_sm_clock_mhz: 2100,
                    max_mem_clock_mhz: 1300,
                    vbios_version: "113-M3000100-102".into(),
                    pcie_max_gen: 5,
                    compute_partition: if cpx { "CPX" } else { "SPX" }.into(),
                    memory_partition: if cpx { "NPS4" } else { "NPS1" }.into(),
                    partition_id: if cpx { i % 2 } else { 0 },
                    nvlinks: (0..7)
                        .map(|k| NvLinkInfo {
                            link: k,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn amd_gpu(i: u32) -> GpuSample {
        GpuSample {
            index: i,
            util_pct: 87,
            mem_util_pct: 40,
            mem_used_bytes: 4 << 30,
            temp_c: 61,
            hbm_temp_c: 52,
            power_mw: 712_000,
            sm_clock_mhz: 2089,
            mem_clock_mhz: 1300,
            energy_mj: 5_000,
            pcie_gen: 5,
            pcie_replay_count: 3,
            ecc_corrected_volatile: 7,
            ecc_uncorrected_volatile: 0,
            ras: vec![
                RasCount {
                    block: "UMC".into(),
                    correctable: 5,
                    uncorrectable: 0,
                    deferred: 1,
                },
                RasCount {
                    block: "PCIE_BIF".into(),
                    correctable: 2,
                    uncorrectable: 0,
                    deferred: 0,
                },
            ],
            xgmi_error_status: Some(0),
            nvlink_tx_kib: (0..7).map(|k| 1000 + k).collect(),
            nvlink_rx_kib: (0..7).map(|k| 2000 + k).collect(),
            throttle_detail: vec!["ppt_pwr".into(), "PPT0".into()],
            xcc_gfx_busy_pct: vec![86, 88, 87, 85, 89, 90, 84, 87],
            ..Default::default()
        }
    }

    fn sample(gpus: Vec<GpuSample>) -> Sample {
        Sample {
            time_ms: 10_000,
            gpus,
            ..Default::default()
        }
    }

    #[test]
    fn an_amd_gpu_is_served_under_amds_names_labels_and_units() {
        let mut g0 = amd_gpu(0);
        g0.pods = vec![PodRef {
            namespace: "ml".into(),
            pod: "train-0".into(),
            container: "trainer".into(),
            ..Default::default()
        }];
        let t = scrape(&mi300x(2, false), &[sample(vec![g0, amd_gpu(1)])], 10_100);
        let want = "gpu_junction_temperature{card_model=\"102-G30211-0C\",card_series=\"AMD Instinct MI300X\",\
                    card_vendor=\"AMD\",container=\"\",deployment_mode=\"\",driver_version=\"6.10.5\",\
                    gpu_compute_partition_type=\"spx\",gpu_id=\"1\",gpu_memory_partition_type=\"nps1\",\
                    gpu_partition_id=\"0\",gpu_uuid=\"d3ff74a1-0000-1000-8001-000000000000\",hostname=\"mi1\",\
                    job_id=\"\",job_partition=\"\",job_user=\"\",namespace=\"\",pod=\"\",serial_number=\"6923510001\",\
                    vbios_version=\"113-M3000100-102\"} 61";
        assert!(t.lines().any(|l| l == want), "{t}");
        // The pod holding GPU 0, in AMD's pod labels.
        let temp0 = lines(&t, "gpu_junction_temperature")[0];
        assert!(
            temp0.contains("container=\"trainer\"") && temp0.contains("namespace=\"ml\",pod=\"train-0\""),
            "{temp0}"
        );
        let one = |name: &str, gpu: &str| -> String {
            let l = lines(&t, name);
            let hit: Vec<_> = l.iter().filter(|l| l.contains(&format!("gpu_id=\"{gpu}\""))).collect();
            assert_eq!(hit.len(), 1, "{name} {gpu}: {l:?}");
            hit[0].rsplit(' ').next().unwrap_or_default().to_string()
        };
        assert_eq!(one("gpu_gfx_activity", "0"), "87");
        assert_eq!(one("gpu_umc_activity", "0"), "40");
        // MB as AMD SMI counts them: 2^20 bytes.
        assert_eq!(one("gpu_used_vram", "0"), "4096");
        assert_eq!(one("gpu_total_vram", "0"), "196608");
        assert_eq!(one("gpu_free_vram", "0"), "192512");
        assert_eq!(one("gpu_package_power", "0"), "712");
        assert_eq!(one("gpu_power_usage", "0"), "712");
        // µJ.
        assert_eq!(one("gpu_energy_consumed", "0"), "5000000");
        assert_eq!(one("gpu_memory_temperature", "0"), "52");
        assert_eq!(one("pcie_speed", "0"), "32");
        assert_eq!(one("pcie_max_speed", "0"), "32");
        assert_eq!(one("pcie_replay_count", "0"), "3");
        assert_eq!(one("gpu_ecc_correct_total", "0"), "7");
        assert_eq!(one("gpu_ecc_uncorrect_total", "0"), "0");
        assert_eq!(one("gpu_ecc_deferred_total", "0"), "1");
        assert_eq!(one("gpu_ecc_correct_umc", "0"), "5");
        assert_eq!(one("gpu_ecc_correct_bif", "0"), "2");
        assert_eq!(one("gpu_ecc_deferred_umc", "0"), "1");
        assert_eq!(one("gpu_health", "0"), "1");
        // GFX busy per XCC, by AMD's xcc_index.
        let busy = lines(&t, "gpu_gfx_busy_instantaneous");
        assert_eq!(busy.len(), 16, "{busy:?}");
        assert!(
            busy.iter()
                .any(|l| l.contains("gpu_id=\"1\"") && l.ends_with(",xcc_index=\"5\"} 90")),
            "{busy:?}"
        );
        // A block without ECC on is no series.
        assert!(lines(&t, "gpu_ecc_correct_gfx").is_empty());
        // MI300X has no edge sensor.
        assert!(!t.contains("gpu_edge_temperature"), "{t}");
        // Clocks by AMD's type and index.
        let clk = lines(&t, "gpu_clock");
        assert!(
            clk.iter()
                .any(|l| l.contains("gpu_id=\"0\"") && l.ends_with(",clock_index=\"0\",clock_type=\"system\"} 2089")),
            "{clk:?}"
        );
        assert!(
            clk.iter()
                .any(|l| l.ends_with(",clock_index=\"8\",clock_type=\"memory\"} 1300"))
        );
        assert!(
            lines(&t, "gpu_max_clock")
                .iter()
                .any(|l| l.ends_with("clock_type=\"system\"} 2100"))
        );
        // XGMI per link, by AMD's link_index.
        let tx = lines(&t, "gpu_xgmi_link_tx");
        assert_eq!(tx.len(), 14, "{tx:?}");
        assert!(
            tx.iter()
                .any(|l| l.contains("gpu_id=\"1\"") && l.ends_with(",link_index=\"6\"} 1006"))
        );
        assert!(
            lines(&t, "gpu_xgmi_link_rx")
                .iter()
                .any(|l| l.ends_with(",link_index=\"0\"} 2000"))
        );
        assert_eq!(lines(&t, "gpu_nodes_total"), ["{hostname=\"mi1\"} 2"]);
        // AMD's words for the throttle, and the flags in AMD's labels.
        assert!(
            lines(&t, "fleetop_gpu_throttle_detail")
                .iter()
                .any(|l| l.contains("gpu_id=\"0\"") && l.ends_with(",reason=\"ppt_pwr\"} 1"))
        );
        assert_eq!(lines(&t, "fleetop_gpu_xgmi_link_state").len(), 14);
        // No dcgm-exporter series, no NVIDIA label on an AMD node.
        assert!(!t.contains("DCGM_FI_"), "{t}");
        assert!(!t.contains("modelName="), "{t}");
        assert!(!t.contains("fleetop_gpu_nvlink"), "{t}");
        // Every family once: a HELP line each.
        let mut helps: Vec<&str> = t.lines().filter(|l| l.starts_with("# HELP ")).collect();
        let n = helps.len();
        helps.sort_unstable();
        helps.dedup();
        assert_eq!(helps.len(), n, "a family written twice");
    }

    #[test]
    fn partitions_carry_their_own_readings_and_the_socket_once() {
        let node = mi300x(4, true);
        let t = scrape(&node, &[sample((0..4).map(amd_gpu).collect())], 10_100);
        // Each partition is a GPU of its own.
        assert_eq!(lines(&t, "gpu_gfx_activity").len(), 4);
        assert_eq!(lines(&t, "gpu_used_vram").len(), 4);
        let p1 = lines(&t, "gpu_used_vram")
            .into_iter()
            .find(|l| l.contains("gpu_id=\"1\""))
            .expect("GPU 1");
        assert!(
            p1.contains("gpu_compute_partition_type=\"cpx\"")
                && p1.contains("gpu_memory_partition_type=\"nps4\"")
                && p1.contains("gpu_partition_id=\"1\""),
            "{p1}"
        );
        // The socket's readings once per physical GPU: on partition 0.
        for name in [
            "gpu_package_power",
            "gpu_junction_temperature",
            "gpu_energy_consumed",
            "gpu_ecc_correct_total",
        ] {
            let l = lines(&t, name);
            assert_eq!(l.len(), 2, "{name}: {l:?}");
            assert!(l.iter().all(|l| l.contains("gpu_partition_id=\"0\"")), "{l:?}");
        }
        assert_eq!(lines(&t, "gpu_xgmi_link_tx").len(), 14);
    }

    #[test]
    fn an_absent_or_lost_amd_gpu_is_no_series_and_unhealthy() {
        let mut g0 = amd_gpu(0);
        g0.absent = a::POWER | a::ECC;
        g0.edge_temp_c = Some(45);
        let lost = GpuSample {
            index: 1,
            error: "gpu_lost".into(),
            ..Default::default()
        };
        let mut g2 = amd_gpu(2);
        g2.ecc_uncorrected_volatile = 1;
        // A board that gave no part number nor serial: the market name in
        // card_model, as AMD's exporter falls back to, and no serial.
        let mut node = mi300x(3, false);
        node.gpus[2].board_part_number.clear();
        node.gpus[2].serial_number.clear();
        let t = scrape(&node, &[sample(vec![g0, lost, g2])], 10_100);
        let power = lines(&t, "gpu_package_power");
        assert_eq!(power.len(), 1, "{power:?}");
        assert!(power[0].contains("gpu_id=\"2\""));
        assert!(
            power[0].starts_with("{card_model=\"AMD Instinct MI300X\",card_series=\"AMD Instinct MI300X\",")
                && power[0].contains(",serial_number=\"\","),
            "{}",
            power[0]
        );
        // The lost GPU has no per-XCC busy.
        assert!(
            lines(&t, "gpu_gfx_busy_instantaneous")
                .iter()
                .all(|l| !l.contains("gpu_id=\"1\""))
        );
        assert!(
            lines(&t, "gpu_ecc_correct_umc")
                .iter()
                .all(|l| !l.contains("gpu_id=\"0\""))
        );
        assert_eq!(lines(&t, "gpu_edge_temperature").len(), 1);
        // The lost GPU: no readings, its error and an unhealthy verdict.
        for name in [
            "gpu_gfx_activity",
            "gpu_total_vram",
            "gpu_clock",
            "gpu_junction_temperature",
        ] {
            assert!(lines(&t, name).iter().all(|l| !l.contains("gpu_id=\"1\"")), "{name}");
        }
        let health: Vec<&str> = lines(&t, "gpu_health");
        let of = |i: u32| {
            health
                .iter()
                .find(|l| l.contains(&format!("gpu_id=\"{i}\"")))
                .map(|l| l.ends_with(" 1"))
        };
        assert_eq!((of(0), of(1), of(2)), (Some(true), Some(false), Some(false)));
        assert!(
            lines(&t, "fleetop_gpu_error")
                .iter()
                .any(|l| l.contains("gpu_id=\"1\"") && l.contains("error=\"gpu_lost\""))
        );
        assert!(
            lines(&t, "fleetop_flag")
                .iter()
                .any(|l| l.contains("gpu_id=\"2\"") && l.contains("kind=\"ecc_uncorrected\""))
        );
    }

    #[test]
    fn an_nvidia_gpu_beside_keeps_dcgm_exporters_names() {
        let mut node = mi300x(1, false);
        let nv = info(2).gpus.remove(1);
        node.gpus.push(nv);
        let t = scrape(&node, &[sample(vec![amd_gpu(0), gpu(1)])], 10_100);
        assert_eq!(lines(&t, "DCGM_FI_DEV_GPU_TEMP").len(), 1);
        assert!(lines(&t, "DCGM_FI_DEV_GPU_TEMP")[0].contains("gpu=\"1\""));
        assert_eq!(lines(&t, "gpu_junction_temperature").len(), 1);
        assert!(lines(&t, "gpu_junction_temperature")[0].contains("gpu_id=\"0\""));
    }
}
