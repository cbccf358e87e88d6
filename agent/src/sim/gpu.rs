//! One simulated GPU's readings at a time: a busy or idle GPU's figures
//! with their noise, its NVLink counters, and what each scenario's problem
//! does to the GPU it hits. Apart from the node's other readings: the bulk
//! of the simulation, and the part every scenario but a few touches.

use super::{DOWN_LINK, Model, ONSET_MS, Scenario, SimNode, noise, target_gpu};
use crate::proto::{GpuEvent, GpuProcess, GpuSample, RasCount, XidEvent};
use crate::throttle;

/// The RAS blocks with ECC on on a simulated MI300X, in AMD SMI's order.
const RAS_BLOCKS: [&str; 6] = ["UMC", "SDMA", "GFX", "MMHUB", "PCIE_BIF", "XGMI_WAFL"];

/// GPM metrics from percentages, as the wire carries them (hundredths).
fn gpm(sm: f64, occupancy: f64, tensor: f64, dram: f64) -> crate::proto::Gpm {
    let c = |p: f64| (p.clamp(0.0, 100.0) * 100.0).round() as u32;
    crate::proto::Gpm {
        sm_active_cpct: c(sm),
        sm_occupancy_cpct: c(occupancy),
        tensor_active_cpct: c(tensor),
        dram_bw_cpct: c(dram),
    }
}

/// GpuSample.fabric_state for NVML_GPU_FABRIC_STATE_COMPLETED (NVML's state plus one).
const FABRIC_COMPLETED: u32 = 4;

/// GpuSample.fabric_status of the failed registration in `fabric-failed`
/// (NVML_ERROR_UNKNOWN).
const FABRIC_FAILED_STATUS: u32 = 999;

impl SimNode {
    pub(super) fn gpu_sample(&self, gpu: u32, now_ms: i64) -> GpuSample {
        let c = &self.cfg;
        let sp = &self.spec;
        let step = self.step(now_ms);
        let n = |salt| noise(c.seed, gpu, step, salt);
        let elapsed_s = ((now_ms - c.start_ms).max(0) as f64) / 1000.0;
        let target = gpu == target_gpu(c.seed, c.gpus);
        let problem = target && self.problem_active(now_ms);
        let busy = !matches!(c.scenario, Scenario::Quiet | Scenario::Idle);

        let mut s = GpuSample {
            index: gpu,
            power_limit_mw: sp.power_limit_w * 1000,
            mem_clock_mhz: sp.max_mem_mhz,
            ..Default::default()
        };
        let (util, power_frac, temp) = if busy {
            (92.0 + 8.0 * n(1), 0.72 + 0.2 * n(2), 60.0 + 10.0 * n(3))
        } else {
            (0.0, 0.0, 31.0 + 4.0 * n(3))
        };
        s.util_pct = util.min(100.0) as u32;
        s.mem_util_pct = if busy { (35.0 + 25.0 * n(4)) as u32 } else { 0 };
        let idle_w = f64::from(sp.idle_power_w);
        let power_w = idle_w + power_frac * (f64::from(sp.power_limit_w) - idle_w);
        s.power_mw = ((power_w + 6.0 * n(5)) * 1000.0) as u32;
        s.temp_c = temp as u32;
        s.hbm_temp_c = s.temp_c + 4 + (3.0 * n(6)) as u32;
        let amd = sp.amd();
        if amd {
            // An MI300X's hotspot runs hotter than its HBM; it has no edge
            // sensor (edge_temp_c absent).
            s.temp_c += 8;
            s.hbm_temp_c = s.temp_c.saturating_sub(10) + (3.0 * n(6)) as u32;
        }
        s.sm_clock_mhz = if busy {
            sp.max_sm_mhz - (120.0 * n(7)) as u32
        } else {
            sp.idle_sm_mhz
        };
        if !busy {
            s.throttle_reasons = throttle::GPU_IDLE;
        }
        // Near the limit the firmware caps power now and then: normal at full load.
        if busy && power_frac > 0.88 {
            s.throttle_reasons |= throttle::SW_POWER_CAP;
            if amd {
                s.throttle_detail = vec!["ppt_pwr".into(), "PPT0".into()];
            }
        }
        // GPM (Hopper and later): how much of the GPU the work really uses.
        if !amd && self.cfg.model != Model::A100 {
            s.gpm = Some(if !busy {
                crate::proto::Gpm::default()
            } else if c.scenario == Scenario::Underused && problem {
                gpm(
                    8.0 + 6.0 * n(13),
                    3.0 + 3.0 * n(14),
                    1.0 + 2.0 * n(15),
                    4.0 + 4.0 * n(16),
                )
            } else {
                gpm(
                    70.0 + 20.0 * n(13),
                    35.0 + 15.0 * n(14),
                    45.0 + 25.0 * n(15),
                    50.0 + 20.0 * n(16),
                )
            });
        }
        // Energy grows with the node's mean draw; a pure function of time keeps it monotonic.
        let mean_w = if busy {
            idle_w + 0.82 * (f64::from(sp.power_limit_w) - idle_w)
        } else {
            idle_w
        };
        s.energy_mj = (mean_w * elapsed_s * 1000.0) as u64 + 1_000_000 * u64::from(gpu);

        let has_job = busy || c.scenario == Scenario::Idle;
        let mem_used = if has_job {
            (sp.mem_bytes as f64 * (0.78 + 0.15 * noise(c.seed, gpu, 0, 8))) as u64
        } else {
            530 * 1024 * 1024
        };
        s.mem_used_bytes = mem_used;
        if has_job {
            s.processes.push(GpuProcess {
                pid: 20_000 + (c.seed % 9_000) as u32 * 8 + gpu,
                used_mem_bytes: mem_used - 530 * 1024 * 1024,
                job_id: self.job_id(),
                // Invented, as the pids are: the demo shows what a real
                // node's /proc gives.
                user: ["alice", "bob", "chen", "dana"][(c.seed % 4) as usize].into(),
                command: format!("python train.py --rank {gpu}"),
            });
        }
        if amd {
            // AMD gives one bidirectional PCIe figure and no row remapping
            // (its bad pages instead): not carried.
            s.absent |= fleetop_proto::absent::PCIE_THROUGHPUT | fleetop_proto::absent::REMAPPED_ROWS;
        } else {
            s.pcie_tx_kbps = if busy { (2_000_000.0 * n(9)) as u32 } else { 0 };
            s.pcie_rx_kbps = if busy { (3_000_000.0 * n(10)) as u32 } else { 0 };
        }
        s.pcie_replay_count = 0;
        // An idle link trains down to Gen1 to save power; its width stays.
        s.pcie_gen = if busy { sp.pcie_gen } else { 1 };
        s.pcie_width = sp.pcie_width;
        // AMD has neither persistence mode nor an NVLink fabric: unknown.
        s.persistence = if amd { 0 } else { 2 };
        // Registered with the NVLink fabric (Hopper HGX: completed, success;
        // NVML gives A100s no fabric state, so not reported).
        if !amd && self.cfg.model != Model::A100 {
            s.fabric_state = FABRIC_COMPLETED;
        }
        // The node's persistence daemon is not running: every GPU, not one.
        if c.scenario == Scenario::PersistenceOff && self.problem_active(now_ms) {
            s.persistence = 1;
        }
        s.ecc_corrected_volatile = noise(c.seed, gpu, 0, 11).lt(&0.2) as u64;
        if amd {
            // Per RAS block; the sums are the ECC counts above.
            s.ras = RAS_BLOCKS
                .iter()
                .map(|b| RasCount {
                    block: (*b).into(),
                    correctable: if *b == "UMC" { s.ecc_corrected_volatile } else { 0 },
                    ..Default::default()
                })
                .collect();
            s.xgmi_error_status = Some(0);
        }

        // NVLink counters, in KiB: a steady share of link bandwidth while busy.
        let link_share = if busy {
            0.25 + 0.1 * noise(c.seed, gpu, 0, 12)
        } else {
            0.0
        };
        let kib_per_s = sp.nvlink_gbps * 1e9 / 1024.0 * link_share;
        // Sized once: a demo invents hundreds of thousands of these at start.
        let links = self.links() as usize;
        s.nvlink_state.reserve_exact(links);
        s.nvlink_tx_kib.reserve_exact(links);
        s.nvlink_rx_kib.reserve_exact(links);
        // The link that goes down: the 4th, or the last of fewer.
        let down_link = DOWN_LINK.min(self.links().saturating_sub(1));
        for l in 0..self.links() {
            let mut t = elapsed_s;
            let mut state = 1;
            if c.scenario == Scenario::NvlinkDown && target && l == down_link {
                // The counters stop where the link went down.
                t = t.min(ONSET_MS as f64 / 1000.0);
                if problem {
                    s.nvlink_down_mask |= 1 << l;
                    state = 0;
                }
            }
            s.nvlink_state.push(state);
            let base = 1_000_000 * u64::from(l);
            s.nvlink_tx_kib.push(base + (kib_per_s * t) as u64);
            s.nvlink_rx_kib.push(base + (kib_per_s * 0.98 * t) as u64);
        }
        // As the NVML sampler: all links active travels as no states.
        if s.nvlink_state.iter().all(|&st| st == 1) {
            s.nvlink_state.clear();
        }

        if problem {
            self.apply_problem(&mut s, now_ms, step);
        }
        s
    }

    fn apply_problem(&self, s: &mut GpuSample, now_ms: i64, step: i64) {
        let sp = &self.spec;
        let onset = self.first_after_onset(now_ms);
        let amd = sp.amd();
        // AMD's words for a throttle, with the NVML bits they map to (as
        // the agent's AMD reader maps them).
        let words = |s: &mut GpuSample, w: &[&str], bits: u64| {
            s.throttle_reasons |= bits;
            s.throttle_detail = w.iter().map(|w| (*w).into()).collect();
        };
        match self.cfg.scenario {
            Scenario::ThermalThrottle if amd => {
                s.temp_c = sp.slowdown_c + 2 + (step % 3) as u32;
                s.hbm_temp_c = s.temp_c - 8;
                words(
                    s,
                    &["prochot_thrm", "socket_thrm", "TEMP_HOTSPOT"],
                    throttle::HW_SLOWDOWN | throttle::SW_THERMAL_SLOWDOWN,
                );
                s.sm_clock_mhz = sp.max_sm_mhz * 6 / 10;
            }
            Scenario::ThermalThrottle => {
                s.temp_c = sp.slowdown_c + 2 + (step % 3) as u32;
                s.hbm_temp_c = s.temp_c + 6;
                s.throttle_reasons |= throttle::HW_THERMAL_SLOWDOWN | throttle::SW_THERMAL_SLOWDOWN;
                s.sm_clock_mhz = sp.max_sm_mhz * 6 / 10;
            }
            Scenario::Hot => {
                s.temp_c = sp.slowdown_c - 3;
                s.hbm_temp_c = if amd { s.temp_c - 10 } else { s.temp_c + 5 };
            }
            Scenario::PowerBrake => {
                if amd {
                    words(s, &["vr_thrm", "VRHOT0"], throttle::HW_SLOWDOWN);
                } else {
                    s.throttle_reasons |= throttle::HW_POWER_BRAKE_SLOWDOWN;
                }
                s.sm_clock_mhz = sp.max_sm_mhz * 3 / 10;
                s.power_mw = sp.power_limit_w * 1000 * 35 / 100;
            }
            Scenario::PowerCap => {
                if amd {
                    words(s, &["ppt_pwr", "PPT0"], throttle::SW_POWER_CAP);
                } else {
                    s.throttle_reasons |= throttle::SW_POWER_CAP;
                }
                s.power_mw = sp.power_limit_w * 1000 - 2_000;
                s.sm_clock_mhz = sp.max_sm_mhz * 85 / 100;
            }
            Scenario::Xid79 if amd => {
                // No XIDs on AMD: the GPU just stops answering.
                *s = GpuSample {
                    index: s.index,
                    error: "gpu_lost".into(),
                    ..Default::default()
                };
            }
            Scenario::Xid79 => {
                let index = s.index;
                *s = GpuSample {
                    index,
                    error: "gpu_lost".into(),
                    ..Default::default()
                };
                if onset {
                    s.xids.push(XidEvent {
                        xid: 79,
                        time_ms: now_ms,
                        // As NVML's event set reports it.
                        source: 0,
                    });
                }
            }
            Scenario::NvmlStuck => {
                // As the NVML sampler words it, the call stuck since onset
                // (the AMD reader says the same of an AMD SMI call).
                let stuck_ms = now_ms - (self.cfg.start_ms + ONSET_MS);
                let call = if amd {
                    "amdsmi_get_power_info"
                } else {
                    "nvmlDeviceGetPowerUsage"
                };
                *s = GpuSample {
                    index: s.index,
                    error: format!("nvml_stuck: {call}: no answer for {stuck_ms} ms"),
                    ..Default::default()
                };
            }
            Scenario::PcieDegraded => {
                // Trained at full speed but on half its lanes (a riser, a lane
                // gone bad): the scenario's GPUs are busy, so it shows.
                s.pcie_width = sp.pcie_width / 2;
            }
            Scenario::FabricFailed => {
                // Shown on any model, A100 included, so that the demo shows
                // it wherever the scenario lands.
                s.fabric_state = FABRIC_COMPLETED;
                s.fabric_status = FABRIC_FAILED_STATUS;
            }
            Scenario::EccUncorrectable | Scenario::RasUncorrectable if amd => {
                // Uncorrectable errors in the HBM (UMC); with
                // ras-uncorrectable the driver resets the GPU at once and
                // retires the bad page, else the page waits for a reset.
                let reset = self.cfg.scenario == Scenario::RasUncorrectable;
                let n = if reset { 1 } else { 2 };
                if let Some(umc) = s.ras.iter_mut().find(|r| r.block == "UMC") {
                    umc.uncorrectable = n;
                }
                s.ecc_uncorrected_volatile = n;
                s.retired_pages = 1;
                s.retired_pages_pending = if reset { 0 } else { 1 };
                if reset && onset {
                    for kind in ["gpu_pre_reset", "gpu_post_reset"] {
                        s.events.push(GpuEvent {
                            kind: kind.into(),
                            time_ms: now_ms,
                            text: format!("{kind}: uncorrectable error in UMC"),
                        });
                    }
                }
            }
            Scenario::EccUncorrectable | Scenario::RasUncorrectable => {
                s.ecc_uncorrected_volatile = 2;
                s.remapped_rows_pending = 1;
                s.remapped_rows_uncorrectable = 1;
                // An earlier remap failed too: no spare rows left (RMA).
                s.remapped_rows_failed = 1;
                if onset {
                    s.xids.push(XidEvent {
                        xid: 94,
                        time_ms: now_ms,
                        // As NVML's event set reports it.
                        source: 0,
                    });
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::NodeInfo;
    use crate::sim::tests::{at, node};
    use crate::sources::Sampler;

    #[test]
    fn training_is_busy_and_clean() {
        let mut n = node(Scenario::Training, 1);
        let s = at(&mut n, 60_000);
        for g in &s.gpus {
            assert!(g.util_pct >= 90, "util {}", g.util_pct);
            assert_eq!(g.throttle_reasons & throttle::TROUBLE, 0);
            assert!(g.temp_c < 80);
            assert_eq!(g.processes.len(), 1);
            assert_eq!(g.nvlink_tx_kib.len(), 18);
        }
        assert!(s.ib_ports.iter().all(|p| p.state == "ACTIVE"));
    }

    #[test]
    fn thermal_throttle_hits_the_target_gpu_after_onset() {
        let seed = 13;
        let mut n = node(Scenario::ThermalThrottle, seed);
        let t = target_gpu(seed, 8) as usize;
        let before = at(&mut n, ONSET_MS - 1000);
        assert_eq!(before.gpus[t].throttle_reasons & throttle::TROUBLE, 0);
        let after = at(&mut n, ONSET_MS + 5000);
        assert_ne!(after.gpus[t].throttle_reasons & throttle::HW_THERMAL_SLOWDOWN, 0);
        assert!(after.gpus[t].temp_c > 87);
        let others = after.gpus.iter().filter(|g| g.index as usize != t);
        assert!(others.into_iter().all(|g| g.throttle_reasons & throttle::TROUBLE == 0));
    }

    #[test]
    fn xid79_loses_the_gpu_and_reports_the_xid_once() {
        let seed = 3;
        let mut n = node(Scenario::Xid79, seed);
        let t = target_gpu(seed, 8) as usize;
        at(&mut n, ONSET_MS - 600);
        let first = at(&mut n, ONSET_MS + 400);
        assert_eq!(first.gpus[t].error, "gpu_lost");
        assert_eq!(first.gpus[t].xids.len(), 1);
        assert_eq!(first.gpus[t].xids[0].xid, 79);
        let later = at(&mut n, ONSET_MS + 3000);
        assert_eq!(later.gpus[t].error, "gpu_lost");
        assert!(later.gpus[t].xids.is_empty());
    }

    #[test]
    fn links_train_down_when_idle_and_the_fabric_and_persistence_are_healthy() {
        let busy = at(&mut node(Scenario::Training, 4), 60_000);
        for g in &busy.gpus {
            let got = (g.pcie_gen, g.pcie_width, g.fabric_state, g.fabric_status, g.persistence);
            assert_eq!(got, (5, 16, FABRIC_COMPLETED, 0, 2), "GPU {}", g.index);
        }
        let quiet = at(&mut node(Scenario::Quiet, 4), 60_000);
        assert!(quiet.gpus.iter().all(|g| (g.pcie_gen, g.pcie_width) == (1, 16)));
        let mut n = node(Scenario::Training, 4);
        let mut info = NodeInfo::default();
        n.describe(&mut info);
        let g = &info.gpus[0];
        assert_eq!((g.pcie_max_gen, g.pcie_max_width), (5, 16));
        assert!(!g.vbios_version.is_empty());
    }

    #[test]
    fn pcie_fabric_and_persistence_faults_hit_after_onset() {
        let seed = 6;
        let t = target_gpu(seed, 8) as usize;
        let mut n = node(Scenario::PcieDegraded, seed);
        assert_eq!(at(&mut n, ONSET_MS - 1000).gpus[t].pcie_width, 16);
        let s = at(&mut n, ONSET_MS + 5000);
        assert_eq!((s.gpus[t].pcie_gen, s.gpus[t].pcie_width), (5, 8));
        assert!(s.gpus[t].util_pct >= 90, "busy while degraded");
        assert!(
            s.gpus
                .iter()
                .filter(|g| g.index as usize != t)
                .all(|g| g.pcie_width == 16)
        );

        let mut n = node(Scenario::FabricFailed, seed);
        let s = at(&mut n, ONSET_MS + 5000);
        assert_eq!(
            (s.gpus[t].fabric_state, s.gpus[t].fabric_status),
            (FABRIC_COMPLETED, 999)
        );
        assert!(
            s.gpus
                .iter()
                .filter(|g| g.index as usize != t)
                .all(|g| g.fabric_status == 0)
        );

        let mut n = node(Scenario::PersistenceOff, seed);
        assert!(at(&mut n, ONSET_MS - 1000).gpus.iter().all(|g| g.persistence == 2));
        assert!(at(&mut n, ONSET_MS + 5000).gpus.iter().all(|g| g.persistence == 1));
    }

    fn mi300x(scenario: Scenario, seed: u64) -> SimNode {
        let mut n = node(scenario, seed);
        n.cfg.model = Model::Mi300x;
        n.spec = Model::Mi300x.spec();
        n
    }

    #[test]
    fn an_mi300x_is_described_as_amd_with_its_xgmi_mesh_and_partition() {
        let mut n = mi300x(Scenario::Training, 2);
        let mut info = NodeInfo::default();
        n.describe(&mut info);
        assert_eq!(
            (info.driver_version.as_str(), info.cuda_version.as_str()),
            ("6.10.5", "")
        );
        let g = &info.gpus[2];
        assert_eq!((g.vendor.as_str(), g.model.as_str()), ("AMD", "AMD Instinct MI300X"));
        assert_eq!(
            (
                g.compute_partition.as_str(),
                g.memory_partition.as_str(),
                g.partition_id
            ),
            ("SPX", "NPS1", 0)
        );
        assert_eq!(
            (g.power_limit_mw, g.slowdown_temp_c, g.hbm_slowdown_temp_c),
            (750_000, 100, 95)
        );
        assert_eq!(g.mem_total_bytes >> 30, 191, "192 GB");
        assert!(!g.firmware.is_empty());
        // Seven links, one to each other GPU of the node, none to itself.
        assert_eq!(g.nvlinks.len(), 7);
        let mut peers: Vec<&str> = g.nvlinks.iter().map(|l| l.peer_pci_bus_id.as_str()).collect();
        peers.sort_unstable();
        peers.dedup();
        assert_eq!(peers.len(), 7);
        assert!(!peers.contains(&g.pci_bus_id.as_str()), "{peers:?}");
    }

    #[test]
    fn an_mi300x_samples_as_amd_smi_reads_one() {
        let mut n = mi300x(Scenario::Training, 2);
        let s = at(&mut n, 60_000);
        for g in &s.gpus {
            assert_eq!(g.ras.first().map(|r| r.block.as_str()), Some("UMC"));
            let corrected: u64 = g.ras.iter().map(|r| r.correctable).sum();
            assert_eq!(corrected, g.ecc_corrected_volatile, "the sums are the ECC counts");
            assert_eq!(g.xgmi_error_status, Some(0));
            assert_eq!(g.edge_temp_c, None, "MI300X has no edge sensor");
            assert!(g.gpm.is_none() && g.fabric_state == 0 && g.persistence == 0);
            assert_ne!(g.absent & fleetop_proto::absent::REMAPPED_ROWS, 0);
            assert_eq!(g.nvlink_tx_kib.len(), 7);
            assert!(g.temp_c > g.hbm_temp_c, "the hotspot runs hotter than the HBM");
        }
    }

    #[test]
    fn ras_uncorrectable_errs_in_umc_and_resets_the_gpu_once() {
        let seed = 3;
        let t = target_gpu(seed, 8) as usize;
        let mut n = mi300x(Scenario::RasUncorrectable, seed);
        at(&mut n, ONSET_MS - 600);
        let first = at(&mut n, ONSET_MS + 400);
        let g = &first.gpus[t];
        let kinds: Vec<&str> = g.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["gpu_pre_reset", "gpu_post_reset"]);
        let umc = g.ras.iter().find(|r| r.block == "UMC").expect("UMC");
        assert_eq!((umc.uncorrectable, g.ecc_uncorrected_volatile), (1, 1));
        let later = at(&mut n, ONSET_MS + 3000);
        assert!(later.gpus[t].events.is_empty(), "events are reported once");
        assert_eq!(later.gpus[t].ecc_uncorrected_volatile, 1);
        // On an NVIDIA model it plays ecc-uncorrectable.
        let mut h = node(Scenario::RasUncorrectable, seed);
        at(&mut h, ONSET_MS - 600);
        assert_eq!(at(&mut h, ONSET_MS + 400).gpus[t].xids[0].xid, 94);
    }

    #[test]
    fn an_xgmi_link_goes_down_and_amds_throttle_words_map_to_nvmls_bits() {
        let seed = 3;
        let t = target_gpu(seed, 8) as usize;
        let s = at(&mut mi300x(Scenario::NvlinkDown, seed), ONSET_MS + 5000);
        assert_eq!(s.gpus[t].nvlink_state[DOWN_LINK as usize], 0);
        let s = at(&mut mi300x(Scenario::ThermalThrottle, seed), ONSET_MS + 5000);
        let g = &s.gpus[t];
        assert!(g.throttle_detail.iter().any(|w| w == "socket_thrm"));
        assert_ne!(g.throttle_reasons & throttle::SW_THERMAL_SLOWDOWN, 0);
        assert!(g.temp_c > 100);
    }
}
