//! The series of one scrape, rendered from the latest published snapshot.
//!
//! A reading the GPU did not give (its `absent` bit, or a GPU that did not
//! answer) is no sample at all, never a 0: a dashboard then shows a gap,
//! and an alert on `DCGM_FI_DEV_MEMORY_TEMP > 90` never sees a fake 0.

use fleetop_catalog::{Action, Severity};
use fleetop_proto::{absent as a, throttle};

use super::Snapshot;
use super::text::{Kind, Writer, push_label};
use crate::proto::{GpuInfo, GpuSample, IbSample, NodeInfo, Sample};

const MIB: u64 = 1 << 20;

/// A GPU's readings as Options, decoded from the wire form once.
struct Gpu<'a> {
    s: &'a GpuSample,
    info: Option<&'a GpuInfo>,
    /// dcgm-exporter's labels for this GPU, escaped, without braces: one
    /// label set per container holding the GPU (its pod, namespace and
    /// container), so each GPU series is written once per holder; one set
    /// without them when no pod holds it.
    labels: Vec<String>,
    /// The same plus GPU_I_PROFILE and GPU_I_ID, per MIG instance, one set
    /// per container holding the instance.
    mig_labels: Vec<Vec<String>>,
}

impl Gpu<'_> {
    /// The GPU answered (an error means no readings; XIDs still count).
    fn answered(&self) -> bool {
        self.s.error.is_empty() || self.s.error == "not_supported"
    }

    fn has(&self, bit: u32) -> bool {
        self.answered() && self.s.absent & bit == 0
    }

    fn opt<T>(&self, bit: u32, v: T) -> Option<T> {
        self.has(bit).then_some(v)
    }

    fn mem_total(&self) -> Option<u64> {
        self.info.map(|i| i.mem_total_bytes).filter(|&t| t > 0)
    }

    fn in_mig_mode(&self) -> bool {
        !self.s.mig.is_empty()
    }
}

fn gpu_labels(info: Option<&GpuInfo>, index: u32, host: &str, job: Option<&str>) -> String {
    let mut l = String::with_capacity(192);
    push_label(&mut l, "gpu", &index.to_string());
    l.push(',');
    push_label(&mut l, "UUID", info.map_or("", |i| &i.uuid));
    l.push(',');
    push_label(&mut l, "pci_bus_id", info.map_or("", |i| &i.pci_bus_id));
    l.push(',');
    push_label(&mut l, "device", &format!("nvidia{index}"));
    l.push(',');
    push_label(&mut l, "modelName", info.map_or("", |i| &i.model));
    l.push(',');
    push_label(&mut l, "Hostname", host);
    if let Some(job) = job {
        l.push(',');
        push_label(&mut l, "hpc_job", job);
    }
    l
}

/// `labels` once per container holding the device (`mig_uuid` empty: the
/// whole GPU or a replica of it; else that MIG instance), with
/// dcgm-exporter's `pod`, `namespace` and `container` labels; `labels`
/// alone when none holds it. A GPU shared by several pods (time-slicing
/// replicas) has its series once per pod, as dcgm-exporter's
/// `--kubernetes-virtual-gpus` gives them (without its `vgpu` label: one
/// container holding two replicas of the GPU is one series).
fn with_pods(labels: &str, g: &GpuSample, mig_uuid: &str) -> Vec<String> {
    let mut out: Vec<String> = g
        .pods
        .iter()
        .filter(|p| p.mig_uuid == mig_uuid)
        .map(|p| {
            let mut l = String::with_capacity(labels.len() + 64);
            l.push_str(labels);
            for (k, v) in [
                ("pod", &p.pod),
                ("namespace", &p.namespace),
                ("container", &p.container),
            ] {
                l.push(',');
                push_label(&mut l, k, v);
            }
            l
        })
        .collect();
    out.dedup();
    if out.is_empty() {
        out.push(labels.to_string());
    }
    out
}

/// The Slurm jobs of a GPU's processes, as dcgm-exporter's `hpc_job` label:
/// one job id, or several joined by commas when jobs share the GPU.
fn jobs(g: &GpuSample) -> Option<String> {
    if g.absent & a::PROCESSES != 0 {
        return None;
    }
    let mut ids: Vec<u64> = g.processes.iter().map(|p| p.job_id).filter(|&j| j != 0).collect();
    ids.sort_unstable();
    ids.dedup();
    (!ids.is_empty()).then(|| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
}

/// The sample is older than three intervals (the console's stale rule):
/// its readings are not served as current.
pub fn is_stale(info: &NodeInfo, s: &Sample, now_ms: i64) -> bool {
    let interval = i64::from(info.sample_interval_ms.max(1));
    now_ms - s.time_ms > (3 * interval).max(1000)
}

/// Renders the whole scrape into `out`.
pub fn render(info: &NodeInfo, snap: &Snapshot, now_ms: i64, out: &mut String) {
    let mut w = Writer::new(out);
    health(&mut w, info, snap, now_ms);
    let Some(s) = snap.sample.as_deref() else { return };
    let stale = is_stale(info, s, now_ms);
    if stale {
        let mut l = String::new();
        push_label(&mut l, "Hostname", &info.hostname);
        w.family("fleetop_flag", Kind::Gauge, FLAG_HELP);
        let action = fleetop_catalog::flag("stale").map_or(Action::None, |e| e.immediate);
        w.sample(
            &l,
            &[("kind", "stale"), ("severity", "warn"), ("action", action.name())],
            1,
        );
        node_health(&mut w, info, Severity::Warn);
        return;
    }
    let gpus: Vec<Gpu> = s
        .gpus
        .iter()
        .map(|g| {
            let gi = info.gpus.iter().find(|i| i.index == g.index);
            let bare = gpu_labels(gi, g.index, &info.hostname, jobs(g).as_deref());
            let labels = with_pods(&bare, g, "");
            let mig_labels = g
                .mig
                .iter()
                .map(|m| {
                    let mut l = bare.clone();
                    l.push(',');
                    push_label(&mut l, "GPU_I_PROFILE", &m.profile);
                    l.push(',');
                    push_label(&mut l, "GPU_I_ID", &m.gpu_instance_id.to_string());
                    with_pods(&l, g, &m.uuid)
                })
                .collect();
            Gpu {
                s: g,
                info: gi,
                labels,
                mig_labels,
            }
        })
        .collect();
    dcgm(&mut w, &gpus, snap);
    fleetop_gpu(&mut w, &gpus, snap);
    infiniband(&mut w, info, &s.ib_ports);
    let worst = flags(&mut w, info, &gpus, &s.ib_ports);
    node_health(&mut w, info, worst);
}

fn health(w: &mut Writer, info: &NodeInfo, snap: &Snapshot, now_ms: i64) {
    let mut host = String::new();
    push_label(&mut host, "Hostname", &info.hostname);
    w.family(
        "fleetop_agent_up",
        Kind::Gauge,
        "1: the agent answers (Prometheus' own `up` says whether it was reached).",
    );
    w.sample(&host, &[], 1);
    w.family(
        "fleetop_agent_info",
        Kind::Gauge,
        "The agent's version, GPU backend and driver, as labels; always 1.",
    );
    w.sample(
        &host,
        &[
            ("version", &info.agent_version),
            ("backend", &info.backend),
            ("driver_version", &info.driver_version),
        ],
        1,
    );
    w.family(
        "fleetop_agent_sample_interval_seconds",
        Kind::Gauge,
        "The agent's sampling interval (in s).",
    );
    w.sample(&host, &[], f64::from(info.sample_interval_ms) / 1000.0);
    w.family(
        "fleetop_agent_samples_total",
        Kind::Counter,
        "Samples taken since the agent started.",
    );
    w.sample(&host, &[], snap.samples_taken);
    w.family(
        "fleetop_agent_gpu_read_errors_total",
        Kind::Counter,
        "GPU readings that failed (a GPU that did not answer in a sample), since the agent started.",
    );
    w.sample(&host, &[], snap.gpu_read_errors);
    if let Some(s) = &snap.sample {
        w.family(
            "fleetop_agent_last_sample_age_seconds",
            Kind::Gauge,
            "Age of the newest sample when scraped (in s); the GPU series are left out once it passes three intervals.",
        );
        w.sample(&host, &[], (now_ms - s.time_ms).max(0) as f64 / 1000.0);
    }
}

/// dcgm-exporter's series: names, types, units and help as its
/// etc/default-counters.csv (and DCGM's field list) give them.
fn dcgm(w: &mut Writer, gpus: &[Gpu], snap: &Snapshot) {
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

/// What dcgm-exporter does not serve: throttle reasons one by one, PCIe
/// throughput, per-link NVLink, GPU errors.
fn fleetop_gpu(w: &mut Writer, gpus: &[Gpu], snap: &Snapshot) {
    const REASONS: [u64; 9] = [
        throttle::GPU_IDLE,
        throttle::APPLICATIONS_CLOCKS_SETTING,
        throttle::SW_POWER_CAP,
        throttle::HW_SLOWDOWN,
        throttle::SYNC_BOOST,
        throttle::SW_THERMAL_SLOWDOWN,
        throttle::HW_THERMAL_SLOWDOWN,
        throttle::HW_POWER_BRAKE_SLOWDOWN,
        throttle::DISPLAY_CLOCK_SETTING,
    ];
    w.family(
        "fleetop_gpu_throttle_reason",
        Kind::Gauge,
        "1 while NVML reports this clocks-event (throttle) reason, 0 otherwise; unknown bits are named by value.",
    );
    for g in gpus {
        let Some(mask) = g.opt(a::THROTTLE, g.s.throttle_reasons) else {
            continue;
        };
        for bit in REASONS {
            let name = throttle::names(bit);
            let name = name.first().map_or("", String::as_str);
            w.each(&g.labels, &[("reason", name)], u8::from(mask & bit != 0));
        }
        let known = REASONS.iter().fold(0, |m, b| m | b);
        for name in throttle::names(mask & !known) {
            w.each(&g.labels, &[("reason", &name)], 1);
        }
    }
    w.family(
        "fleetop_gpu_pcie_transmit_bytes_per_second",
        Kind::Gauge,
        "PCIe throughput out of the GPU over the last interval (in B/s).",
    );
    for g in gpus {
        if let Some(v) = g.opt(a::PCIE_THROUGHPUT, g.s.pcie_tx_kbps) {
            w.each(&g.labels, &[], u64::from(v) * 1000);
        }
    }
    w.family(
        "fleetop_gpu_pcie_receive_bytes_per_second",
        Kind::Gauge,
        "PCIe throughput into the GPU over the last interval (in B/s).",
    );
    for g in gpus {
        if let Some(v) = g.opt(a::PCIE_THROUGHPUT, g.s.pcie_rx_kbps) {
            w.each(&g.labels, &[], u64::from(v) * 1000);
        }
    }
    w.family(
        "fleetop_gpu_nvlink_state",
        Kind::Gauge,
        "Per NVLink link: 0 inactive, 1 active, 2 sleep (up, in low power).",
    );
    for g in gpus.iter().filter(|g| g.answered()) {
        let Some(info) = g.info else { continue };
        for (pos, link) in info.nvlinks.iter().enumerate() {
            // An empty list means every link is active (the common case).
            let state = g.s.nvlink_state.get(pos).copied().unwrap_or(1);
            w.each(&g.labels, &[("link", &link.link.to_string())], state);
        }
    }
    for (name, help, tx) in [
        (
            "fleetop_gpu_nvlink_transmitted_bytes_total",
            "Per NVLink link: bytes sent (NVML throughput counter, counted in KiB).",
            true,
        ),
        (
            "fleetop_gpu_nvlink_received_bytes_total",
            "Per NVLink link: bytes received (NVML throughput counter, counted in KiB).",
            false,
        ),
    ] {
        w.family(name, Kind::Counter, help);
        for g in gpus {
            let (Some(c), Some(info)) = (snap.nvlink.get(&g.s.index), g.info) else {
                continue;
            };
            let values = if tx { &c.tx_kib } else { &c.rx_kib };
            for (v, link) in values.iter().zip(&info.nvlinks) {
                w.each(&g.labels, &[("link", &link.link.to_string())], v.wrapping_mul(1024));
            }
        }
    }
    w.family(
        "fleetop_gpu_error",
        Kind::Gauge,
        "1 for a GPU that did not answer in the latest sample; `error` says how (gpu_lost, nvml_stuck, ...).",
    );
    for g in gpus.iter().filter(|g| !g.answered()) {
        let kind = g.s.error.split(':').next().unwrap_or_default();
        w.each(&g.labels, &[("error", kind)], 1);
    }
}

/// NVIDIA's InfiniBand state words and their numbers, as sysfs writes them
/// ("4: ACTIVE") and node_exporter serves them.
fn state_id(word: &str) -> Option<u8> {
    Some(match word {
        "NOP" => 0,
        "DOWN" => 1,
        "INIT" => 2,
        "ARMED" => 3,
        "ACTIVE" => 4,
        "ACTIVE_DEFER" => 5,
        _ => return None,
    })
}

fn phys_state_id(word: &str) -> Option<u8> {
    Some(match word {
        "Sleep" => 1,
        "Polling" => 2,
        "Disabled" => 3,
        "PortConfigurationTraining" => 4,
        "LinkUp" => 5,
        "LinkErrorRecovery" => 6,
        "Phy Test" => 7,
        _ => return None,
    })
}

/// node_exporter's name for an error counter the agent reads, where it has one.
fn node_exporter_name(counter: &str) -> Option<&'static str> {
    Some(match counter {
        "link_downed" => "node_infiniband_link_downed_total",
        "link_error_recovery" => "node_infiniband_link_error_recovery_total",
        "port_rcv_errors" => "node_infiniband_port_errors_received_total",
        "port_xmit_discards" => "node_infiniband_port_discards_transmitted_total",
        "port_rcv_constraint_errors" => "node_infiniband_port_constraint_errors_received_total",
        "port_xmit_constraint_errors" => "node_infiniband_port_constraint_errors_transmitted_total",
        _ => return None,
    })
}

fn infiniband(w: &mut Writer, info: &NodeInfo, ports: &[IbSample]) {
    let labels: Vec<Option<String>> = ports
        .iter()
        .map(|p| {
            let pi = info.ib_ports.get(p.port as usize)?;
            let mut l = String::new();
            push_label(&mut l, "device", &pi.device);
            l.push(',');
            push_label(&mut l, "port", &pi.port.to_string());
            // Beyond node_exporter's labels: joins a port to its node's GPUs.
            l.push(',');
            push_label(&mut l, "Hostname", &info.hostname);
            Some(l)
        })
        .collect();
    let each = |w: &mut Writer, f: &dyn Fn(&IbSample) -> Option<f64>| {
        for (p, l) in ports.iter().zip(&labels) {
            if let (Some(l), Some(v)) = (l, f(p)) {
                w.sample(l, &[], v);
            }
        }
    };
    w.family(
        "node_infiniband_state_id",
        Kind::Gauge,
        "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
    );
    each(w, &|p| state_id(&p.state).map(f64::from));
    w.family("node_infiniband_physical_state_id", Kind::Gauge, "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)");
    each(w, &|p| phys_state_id(&p.phys_state).map(f64::from));
    w.family(
        "node_infiniband_rate_bytes_per_second",
        Kind::Gauge,
        "Maximum signal transfer rate",
    );
    each(w, &|p| (p.rate_gbps > 0).then(|| f64::from(p.rate_gbps) * 1e9 / 8.0));
    w.family(
        "node_infiniband_port_data_transmitted_bytes_total",
        Kind::Counter,
        "Number of data octets transmitted on all links",
    );
    each(w, &|p| Some(p.tx_bytes as f64));
    w.family(
        "node_infiniband_port_data_received_bytes_total",
        Kind::Counter,
        "Number of data octets received on all links",
    );
    each(w, &|p| Some(p.rx_bytes as f64));
    w.family(
        "node_infiniband_port_packets_transmitted_total",
        Kind::Counter,
        "Number of packets transmitted on all VLs from this port (including errors)",
    );
    each(w, &|p| Some(p.tx_packets as f64));
    w.family(
        "node_infiniband_port_packets_received_total",
        Kind::Counter,
        "Number of packets received on all VLs by this port (including errors)",
    );
    each(w, &|p| Some(p.rx_packets as f64));
    let counter = |p: &IbSample, i: usize| -> Option<f64> {
        (i < 32 && p.errors_present_mask & (1 << i) != 0)
            .then(|| p.errors.get(i).map(|&v| v as f64))
            .flatten()
    };
    for (i, (full, _)) in fleetop_proto::ib::ERROR_COUNTERS.iter().enumerate() {
        if let Some(name) = node_exporter_name(full) {
            w.family(
                name,
                Kind::Counter,
                "InfiniBand port error counter (sysfs counters/, as node_exporter names it).",
            );
            each(w, &|p| counter(p, i));
        }
    }
    w.family("fleetop_infiniband_port_errors_total", Kind::Counter, "InfiniBand port error counters node_exporter has no name for (sysfs counters/ and hw_counters/); `counter` names the file. Small counters saturate: alert on increases.");
    for (i, (full, _)) in fleetop_proto::ib::ERROR_COUNTERS.iter().enumerate() {
        if node_exporter_name(full).is_some() {
            continue;
        }
        let short = fleetop_proto::ib::counter_name(i);
        for (p, l) in ports.iter().zip(&labels) {
            if let (Some(l), Some(v)) = (l, counter(p, i)) {
                w.sample(l, &[("counter", short)], v);
            }
        }
    }
}

const FLAG_HELP: &str = "1 for each condition the agent sees in its latest sample, by kind, severity and action (the fault catalog's, docs/faults.md; no debounce or time window: the console's detectors add those).";

const HEALTH_HELP: &str = "The node's health as the agent judges its latest sample: 0 ok, 1 warn, 2 crit (its worst fleetop_flag's severity; info counts as ok).";

/// `fleetop_node_health`: what `fleetop_flag` adds up to, one series a node,
/// so an alert rule or a dashboard needs no aggregation.
fn node_health(w: &mut Writer, info: &NodeInfo, worst: Severity) {
    let mut l = String::new();
    push_label(&mut l, "Hostname", &info.hostname);
    w.family("fleetop_node_health", Kind::Gauge, HEALTH_HELP);
    let v = match worst {
        Severity::Crit => 2,
        Severity::Warn => 1,
        Severity::Info => 0,
    };
    w.sample(&l, &[], v);
}

/// What the agent can tell from its latest sample alone. Flags that need a
/// window or thresholds held by the console (idle, underused, hot,
/// power_capped, ib_errors, stuck for long) are raised by the console only.
/// Returns the worst severity raised (`Info` for none).
fn flags(w: &mut Writer, info: &NodeInfo, gpus: &[Gpu], ports: &[IbSample]) -> Severity {
    w.family("fleetop_flag", Kind::Gauge, FLAG_HELP);
    let mut worst = Severity::Info;
    for g in gpus {
        // The action label is the fault catalog's, as on the console.
        let mut raise_as = |kind: &str, sev: &str, action: Action| {
            let level = match sev {
                "crit" => Severity::Crit,
                "warn" => Severity::Warn,
                _ => Severity::Info,
            };
            worst = worst.max(level);
            w.each(
                &g.labels,
                &[("kind", kind), ("severity", sev), ("action", action.name())],
                1,
            )
        };
        let catalog = |kind: &str| fleetop_catalog::flag(kind).map_or(Action::None, |e| e.immediate);
        if g.s.error == "gpu_lost" {
            raise_as("gpu_lost", "crit", catalog("gpu_lost"));
        } else if !g.answered() {
            // An NVML error on the GPU, in the agent's words: a reset is
            // the first thing to try (the console's detectors grade it).
            raise_as("gpu_error", "crit", Action::ResetGpu);
        }
        // XIDs graded by the catalog: the most urgent code decides.
        if let Some(a) =
            g.s.xids
                .iter()
                .map(|x| fleetop_catalog::xid_action(x.xid))
                .max_by_key(|a| a.urgency())
        {
            raise_as("xid", a.severity().name(), a);
        }
        let mut raise = |kind: &str, sev: &str| raise_as(kind, sev, catalog(kind));
        if let Some(mask) = g.opt(a::THROTTLE, g.s.throttle_reasons) {
            let trouble = mask & throttle::TROUBLE;
            let hw = throttle::HW_SLOWDOWN | throttle::HW_THERMAL_SLOWDOWN | throttle::HW_POWER_BRAKE_SLOWDOWN;
            if trouble & hw != 0 {
                raise("throttled", "crit");
            } else if trouble != 0 {
                raise("throttled", "warn");
            }
        }
        if g.opt(a::ECC, g.s.ecc_uncorrected_volatile).is_some_and(|n| n > 0) {
            raise("ecc_uncorrected", "crit");
        }
        if g.has(a::REMAPPED_ROWS) {
            if g.s.remapped_rows_failed != 0 {
                raise("remap_failed", "crit");
            }
            if g.s.remapped_rows_pending != 0 {
                raise("remap_pending", "warn");
            }
        }
        if g.answered()
            && let Some(gi) = g.info
        {
            let down =
                g.s.nvlink_state
                    .iter()
                    .zip(&gi.nvlinks)
                    .any(|(&st, l)| st == 0 && !l.inactive_at_start);
            if down {
                raise("nvlink_down", "crit");
            }
        }
    }
    for p in ports {
        let Some(pi) = info.ib_ports.get(p.port as usize) else {
            continue;
        };
        if p.state.is_empty() || p.state == "ACTIVE" {
            continue;
        }
        let mut l = String::new();
        push_label(&mut l, "device", &pi.device);
        l.push(',');
        push_label(&mut l, "port", &pi.port.to_string());
        l.push(',');
        push_label(&mut l, "Hostname", &info.hostname);
        let action = fleetop_catalog::flag("ib_down").map_or(Action::None, |e| e.immediate);
        w.sample(
            &l,
            &[("kind", "ib_down"), ("severity", "crit"), ("action", action.name())],
            1,
        );
        worst = Severity::Crit;
    }
    worst
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::Publisher;
    use crate::proto::{Gpm, GpuProcess, MigInstance, XidEvent};

    fn info(gpus: u32) -> NodeInfo {
        NodeInfo {
            hostname: "n1".into(),
            sample_interval_ms: 1000,
            gpus: (0..gpus)
                .map(|i| GpuInfo {
                    index: i,
                    uuid: format!("GPU-{i}"),
                    model: "NVIDIA H100 80GB HBM3".into(),
                    pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + i),
                    mem_total_bytes: 80 << 30,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn gpu(i: u32) -> GpuSample {
        GpuSample {
            index: i,
            util_pct: 50,
            temp_c: 60,
            hbm_temp_c: 70,
            power_mw: 300_500,
            mem_used_bytes: 10 << 30,
            ..Default::default()
        }
    }

    fn scrape(info: &NodeInfo, samples: &[Sample], now_ms: i64) -> String {
        let p = Publisher::default();
        for s in samples {
            p.publish(&Arc::new(s.clone()));
        }
        let mut out = String::new();
        render(info, &p.latest(), now_ms, &mut out);
        out
    }

    /// The sample lines of one family, without the family name.
    fn lines<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        text.lines()
            .filter_map(|l| l.strip_prefix(name))
            .filter(|rest| rest.starts_with('{') || rest.starts_with(' '))
            .collect()
    }

    #[test]
    fn an_absent_reading_is_no_series_and_the_gpus_other_readings_stay() {
        let mut g0 = gpu(0);
        g0.absent = a::HBM_TEMP | a::POWER;
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![g0, gpu(1)],
            ..Default::default()
        };
        let t = scrape(&info(2), &[s], 10_100);
        let hbm = lines(&t, "DCGM_FI_DEV_MEMORY_TEMP");
        assert_eq!(hbm.len(), 1, "{t}");
        assert!(hbm[0].contains("gpu=\"1\"") && hbm[0].ends_with(" 70"));
        let power = lines(&t, "DCGM_FI_DEV_POWER_USAGE");
        assert_eq!(power.len(), 1);
        assert!(power[0].ends_with(" 300.5"));
        assert_eq!(lines(&t, "DCGM_FI_DEV_GPU_TEMP").len(), 2);
        // No GPM on either GPU: no profiling series, and no family header.
        assert!(!t.contains("DCGM_FI_PROF_SM_ACTIVE"), "{t}");
        assert_eq!(lines(&t, "fleetop_node_health"), ["{Hostname=\"n1\"} 0"]);
    }

    #[test]
    fn a_gpu_that_did_not_answer_has_no_readings_but_its_xid_and_error() {
        let mut lost = gpu(0);
        lost.error = "gpu_lost".into();
        lost.xids = vec![XidEvent {
            xid: 79,
            time_ms: 9_000,
            source: 0,
        }];
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![lost, gpu(1)],
            ..Default::default()
        };
        let later = Sample {
            time_ms: 11_000,
            gpus: vec![
                GpuSample {
                    index: 0,
                    error: "gpu_lost".into(),
                    ..Default::default()
                },
                gpu(1),
            ],
            ..Default::default()
        };
        let t = scrape(&info(2), &[s, later], 11_100);
        assert_eq!(lines(&t, "DCGM_FI_DEV_GPU_TEMP").len(), 1);
        assert!(lines(&t, "DCGM_FI_DEV_GPU_TEMP")[0].contains("gpu=\"1\""));
        // The last XID stays, after the sample that carried it.
        let xid = lines(&t, "DCGM_FI_DEV_XID_ERRORS");
        assert!(
            xid.iter().any(|l| l.contains("gpu=\"0\"") && l.ends_with(" 79")),
            "{xid:?}"
        );
        assert!(xid.iter().any(|l| l.contains("gpu=\"1\"") && l.ends_with(" 0")));
        assert!(
            lines(&t, "fleetop_gpu_error")
                .iter()
                .any(|l| l.contains("error=\"gpu_lost\""))
        );
        assert!(
            lines(&t, "fleetop_flag")
                .iter()
                .any(|l| l.contains("kind=\"gpu_lost\""))
        );
        assert!(lines(&t, "fleetop_agent_gpu_read_errors_total")[0].ends_with(" 2"));
        // A lost GPU makes the node crit, in one series.
        assert_eq!(lines(&t, "fleetop_node_health"), ["{Hostname=\"n1\"} 2"]);
    }

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

    #[test]
    fn the_slurm_job_is_the_hpc_job_label_and_throttle_reasons_are_one_series_each() {
        let mut g = gpu(0);
        g.processes = vec![
            GpuProcess {
                pid: 1,
                job_id: 4411,
                ..Default::default()
            },
            GpuProcess {
                pid: 2,
                job_id: 4411,
                ..Default::default()
            },
        ];
        g.throttle_reasons = throttle::HW_THERMAL_SLOWDOWN | 0x1000;
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![g],
            ..Default::default()
        };
        let t = scrape(&info(1), &[s], 10_100);
        assert!(
            lines(&t, "DCGM_FI_DEV_GPU_TEMP")[0].ends_with(
                "{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",\
                 modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"n1\",hpc_job=\"4411\"} 60"
            ),
            "{t}"
        );
        let th = lines(&t, "fleetop_gpu_throttle_reason");
        assert_eq!(th.len(), 10);
        assert!(
            th.iter()
                .any(|l| l.contains("reason=\"hw_thermal_slowdown\"") && l.ends_with(" 1"))
        );
        assert!(
            th.iter()
                .any(|l| l.contains("reason=\"sw_power_cap\"") && l.ends_with(" 0"))
        );
        assert!(
            th.iter()
                .any(|l| l.contains("reason=\"unknown_0x1000\"") && l.ends_with(" 1"))
        );
        assert!(
            lines(&t, "fleetop_flag")
                .iter()
                .any(|l| l.contains("kind=\"throttled\",severity=\"crit\""))
        );
    }

    #[test]
    fn a_stale_sample_serves_health_and_the_stale_flag_only() {
        let s = Sample {
            time_ms: 10_000,
            gpus: vec![gpu(0)],
            ..Default::default()
        };
        let t = scrape(&info(1), &[s], 14_000);
        assert!(lines(&t, "DCGM_FI_DEV_GPU_TEMP").is_empty());
        assert!(lines(&t, "fleetop_agent_last_sample_age_seconds")[0].ends_with(" 4"));
        assert!(lines(&t, "fleetop_flag")[0].contains("kind=\"stale\""));
        assert!(lines(&t, "fleetop_node_health")[0].ends_with(" 1"), "{t}");
    }

    #[test]
    fn infiniband_ports_use_node_exporter_names_and_skip_unreadable_counters() {
        let mut i = info(0);
        i.ib_ports = vec![crate::proto::IbPortInfo {
            device: "mlx5_0".into(),
            port: 1,
            link_layer: "InfiniBand".into(),
        }];
        let s = Sample {
            time_ms: 10_000,
            ib_ports: vec![IbSample {
                port: 0,
                state: "DOWN".into(),
                phys_state: "Polling".into(),
                rate_gbps: 400,
                tx_bytes: 4096,
                errors: vec![7; fleetop_proto::ib::ERROR_COUNTERS.len()],
                // symbol_error (0) and link_downed (2) readable only.
                errors_present_mask: 0b101,
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = scrape(&i, &[s], 10_100);
        assert_eq!(
            lines(&t, "node_infiniband_state_id"),
            ["{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 1"]
        );
        assert_eq!(
            lines(&t, "node_infiniband_physical_state_id")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 2"
        );
        assert_eq!(
            lines(&t, "node_infiniband_rate_bytes_per_second")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 50000000000"
        );
        assert_eq!(
            lines(&t, "node_infiniband_port_data_transmitted_bytes_total")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 4096"
        );
        assert_eq!(
            lines(&t, "node_infiniband_link_downed_total")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 7"
        );
        assert!(lines(&t, "node_infiniband_link_error_recovery_total").is_empty());
        assert_eq!(
            lines(&t, "fleetop_infiniband_port_errors_total"),
            ["{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\",counter=\"symbol_error\"} 7"]
        );
        assert!(t.contains("# TYPE node_infiniband_link_downed_total counter"));
        assert!(lines(&t, "fleetop_flag")[0].contains("kind=\"ib_down\""));
        assert!(lines(&t, "fleetop_node_health")[0].ends_with(" 2"), "{t}");
    }
}
