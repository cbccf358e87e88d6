//! One GPU as the families of a scrape see it: its readings as Options (a
//! reading the GPU did not give is `None`, never a 0) and its exporter's
//! labels for it, per pod and per MIG instance: dcgm-exporter's for an
//! NVIDIA GPU, AMD device-metrics-exporter's for an AMD GPU. Apart from the
//! families so that each of them reads a GPU, and labels it, the same way.

use fleetop_proto::absent as a;

use super::text::push_label;
use crate::proto::{GpuInfo, GpuSample, NodeInfo, Sample};

/// A GPU's readings as Options, decoded from the wire form once.
pub(super) struct Gpu<'a> {
    pub(super) s: &'a GpuSample,
    pub(super) info: Option<&'a GpuInfo>,
    /// An AMD GPU (`GpuInfo.vendor`): its series are AMD
    /// device-metrics-exporter's (`amd`), its labels AMD's.
    pub(super) amd: bool,
    /// The exporter's labels for this GPU, escaped, without braces: one
    /// label set per container holding the GPU (its pod, namespace and
    /// container), so each GPU series is written once per holder; one set
    /// without them when no pod holds it (AMD's: with them empty).
    pub(super) labels: Vec<String>,
    /// The same plus GPU_I_PROFILE and GPU_I_ID, per MIG instance, one set
    /// per container holding the instance (NVIDIA only).
    pub(super) mig_labels: Vec<Vec<String>>,
}

impl Gpu<'_> {
    /// The GPU answered (an error means no readings; XIDs still count).
    pub(super) fn answered(&self) -> bool {
        self.s.error.is_empty() || self.s.error == "not_supported"
    }

    pub(super) fn has(&self, bit: u32) -> bool {
        self.answered() && self.s.absent & bit == 0
    }

    pub(super) fn opt<T>(&self, bit: u32, v: T) -> Option<T> {
        self.has(bit).then_some(v)
    }

    pub(super) fn mem_total(&self) -> Option<u64> {
        self.info.map(|i| i.mem_total_bytes).filter(|&t| t > 0)
    }

    pub(super) fn in_mig_mode(&self) -> bool {
        !self.s.mig.is_empty()
    }

    /// Readings of the whole physical GPU are written here: an AMD GPU's
    /// compute partition 0, or any GPU that is not a partition. AMD SMI
    /// repeats the socket's power, temperatures, clocks, PCIe, XGMI and ECC
    /// on every partition; served once, a sum over series counts them once
    /// (AMD's exporter suppresses them on the other partitions too).
    pub(super) fn whole_socket(&self) -> bool {
        self.info.is_none_or(|i| i.partition_id == 0)
    }
}

/// The sample's GPUs, each with its description from `info` and its labels.
pub(super) fn gpus<'a>(info: &'a NodeInfo, s: &'a Sample) -> Vec<Gpu<'a>> {
    s.gpus
        .iter()
        .map(|g| {
            let gi = info.gpus.iter().find(|i| i.index == g.index);
            if gi.is_some_and(|i| i.vendor == "AMD") {
                return Gpu {
                    s: g,
                    info: gi,
                    amd: true,
                    labels: amd_labels(info, gi, g),
                    mig_labels: Vec::new(),
                };
            }
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
                amd: false,
                labels,
                mig_labels,
            }
        })
        .collect()
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

/// AMD device-metrics-exporter's labels for a GPU, its mandatory ones and
/// those of its example config, by name order as its client library writes
/// them: one set per container holding the GPU, the `pod`, `namespace` and
/// `container` labels empty where none does (AMD writes them so).
/// As AMD's exporter: `card_model` is the board's part number
/// (`102-G30211-0C`; the market name where the board gives none),
/// `card_series` the market name (`AMD Instinct MI300X`), `serial_number`
/// the board's serial (AMD SMI's board information); `deployment_mode` is
/// not read and empty; `job_id` is the Slurm job of the GPU's processes,
/// as `hpc_job` on NVIDIA.
fn amd_labels(node: &NodeInfo, info: Option<&GpuInfo>, g: &GpuSample) -> Vec<String> {
    let text = |f: fn(&GpuInfo) -> &str| info.map_or("", f);
    let (partition, compute, memory) = info.map_or((0, String::new(), String::new()), |i| {
        (
            i.partition_id,
            i.compute_partition.to_ascii_lowercase(),
            i.memory_partition.to_ascii_lowercase(),
        )
    });
    let job = jobs(g).unwrap_or_default();
    let before_pod: [(&str, &str); 13] = [
        (
            "card_model",
            text(|i| match i.board_part_number.as_str() {
                "" => &i.model,
                part => part,
            }),
        ),
        ("card_series", text(|i| &i.model)),
        ("card_vendor", text(|i| &i.vendor)),
        ("deployment_mode", ""),
        ("driver_version", &node.driver_version),
        ("gpu_compute_partition_type", &compute),
        ("gpu_id", &g.index.to_string()),
        ("gpu_memory_partition_type", &memory),
        ("gpu_partition_id", &partition.to_string()),
        ("gpu_uuid", text(|i| &i.uuid)),
        ("hostname", &node.hostname),
        ("job_id", &job),
        ("job_partition", ""),
    ];
    let mut holders: Vec<(&str, &str, &str)> = g
        .pods
        .iter()
        .map(|p| (p.namespace.as_str(), p.pod.as_str(), p.container.as_str()))
        .collect();
    holders.dedup();
    if holders.is_empty() {
        holders.push(("", "", ""));
    }
    holders
        .into_iter()
        .map(|(namespace, pod, container)| {
            let mut l = String::with_capacity(384);
            let mut put = |k: &str, v: &str| {
                if !l.is_empty() {
                    l.push(',');
                }
                push_label(&mut l, k, v);
            };
            // AMD's order is by name: container sorts among the card_* ones.
            for (k, v) in &before_pod[..3] {
                put(k, v);
            }
            put("container", container);
            for (k, v) in &before_pod[3..] {
                put(k, v);
            }
            put("job_user", "");
            put("namespace", namespace);
            put("pod", pod);
            put("serial_number", text(|i| &i.serial_number));
            put("vbios_version", text(|i| &i.vbios_version));
            l
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use fleetop_proto::{absent as a, throttle};

    use crate::proto::{GpuProcess, Sample};
    use crate::serve::metrics::tests::{gpu, info, lines, scrape};

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
}
