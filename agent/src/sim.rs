//! A simulated GPU node for demos and tests: seeded and deterministic (the same
//! seed, scenario and time give the same sample), with realistic models and
//! named scenarios that produce every kind of flag the console raises.
//!
//! Every reading is a pure function of (seed, GPU, time step), so history can
//! be generated for past times and a restarted simulated agent continues
//! where the old one was.

use crate::proto::{
    GpuInfo, GpuProcess, GpuSample, HostSample, IbPortInfo, IbSample, NodeInfo, NvLinkInfo, Sample, SxidEvent, XidEvent,
};
use crate::sampler::Sampler;
use crate::{ib, throttle};

/// What goes on on a simulated node. `fleetop-agent --help` lists these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Scenario {
    /// Busy training job on every GPU; nothing wrong.
    Training,
    /// No jobs: GPUs idle and empty; nothing wrong either.
    Quiet,
    /// A job holds every GPU but leaves them at 0% (the waste SREs hunt).
    Idle,
    /// One GPU overheats and throttles (HW and SW thermal slowdown).
    ThermalThrottle,
    /// One GPU runs close to its slowdown temperature, not yet throttling.
    Hot,
    /// One GPU's clocks are cut by the power brake (HW power brake slowdown).
    PowerBrake,
    /// One GPU sits at its software power cap for minutes (informational).
    PowerCap,
    /// One GPU falls off the bus: XID 79, then every reading fails.
    Xid79,
    /// One GPU reports uncorrectable ECC errors (XID 94, a row pending remap,
    /// an earlier remap failed).
    EccUncorrectable,
    /// One NVLink link of one GPU goes down.
    NvlinkDown,
    /// One InfiniBand port goes down.
    IbDown,
    /// One InfiniBand port's symbol errors keep rising.
    IbErrors,
    /// The agent's sampling hangs (as when a driver call blocks): the node goes stale.
    Hang,
    /// One GPU is busy by utilization but few of its SMs work (an input-bound
    /// job): what GPM shows and util % hides.
    Underused,
    /// One GPU's NVML calls stop returning: it is reported stuck while the
    /// other GPUs keep reporting.
    NvmlStuck,
    /// One busy GPU's PCIe link trains to half its width (x8 of x16).
    PcieDegraded,
    /// One GPU's NVLink fabric registration fails (completed, with an
    /// error): on an NVSwitch system CUDA will not start on it.
    FabricFailed,
    /// Persistence mode is off on every GPU of the node.
    PersistenceOff,
    /// One GPU is on the PCI bus but not in NVML (as after a bad reboot):
    /// the node lists one GPU fewer than it should have.
    GpuMissing,
    /// An NVSwitch reports a fatal SXid (kernel log).
    SxidFatal,
    /// nvidia_peermem is not loaded on this node with InfiniBand.
    NoPeermem,
    /// The node runs an older driver and VBIOS than the rest of the fleet.
    OldDriver,
}

impl Scenario {
    /// Scenario name as written on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    pub fn all() -> &'static [Scenario] {
        <Scenario as clap::ValueEnum>::value_variants()
    }
}

/// GPU models the simulation knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// NVIDIA H100 80GB HBM3 (SXM5, 700 W, 18 NVLink4 links, NDR InfiniBand).
    H100,
    /// NVIDIA H200 141GB HBM3e (SXM, 700 W, 18 NVLink4 links, NDR InfiniBand).
    H200,
    /// NVIDIA A100-SXM4-80GB (400 W, 12 NVLink3 links, HDR InfiniBand).
    A100,
}

struct ModelSpec {
    name: &'static str,
    mem_bytes: u64,
    power_limit_w: u32,
    idle_power_w: u32,
    max_sm_mhz: u32,
    idle_sm_mhz: u32,
    max_mem_mhz: u32,
    slowdown_c: u32,
    shutdown_c: u32,
    nvlinks: u32,
    /// Data rate of one link in one direction, GB/s.
    nvlink_gbps: f64,
    ib_rate_gbps: u32,
    ib_rate_text: &'static str,
    /// The PCIe link the GPU trains to in its slot: generation and lanes.
    pcie_gen: u32,
    pcie_width: u32,
    vbios: &'static str,
}

impl Model {
    fn spec(self) -> ModelSpec {
        match self {
            Model::H100 => ModelSpec {
                name: "NVIDIA H100 80GB HBM3",
                mem_bytes: 81_559 * 1024 * 1024,
                power_limit_w: 700,
                idle_power_w: 72,
                max_sm_mhz: 1980,
                idle_sm_mhz: 345,
                max_mem_mhz: 2619,
                slowdown_c: 87,
                shutdown_c: 92,
                nvlinks: 18,
                nvlink_gbps: 25.0,
                ib_rate_gbps: 400,
                ib_rate_text: "4X NDR",
                pcie_gen: 5,
                pcie_width: 16,
                vbios: "96.00.99.00.01",
            },
            Model::H200 => ModelSpec {
                name: "NVIDIA H200",
                mem_bytes: 143_771 * 1024 * 1024,
                power_limit_w: 700,
                idle_power_w: 76,
                max_sm_mhz: 1980,
                idle_sm_mhz: 345,
                max_mem_mhz: 3201,
                slowdown_c: 87,
                shutdown_c: 92,
                nvlinks: 18,
                nvlink_gbps: 25.0,
                ib_rate_gbps: 400,
                ib_rate_text: "4X NDR",
                pcie_gen: 5,
                pcie_width: 16,
                vbios: "96.00.A5.00.01",
            },
            Model::A100 => ModelSpec {
                name: "NVIDIA A100-SXM4-80GB",
                mem_bytes: 81_920 * 1024 * 1024,
                power_limit_w: 400,
                idle_power_w: 60,
                max_sm_mhz: 1410,
                idle_sm_mhz: 210,
                max_mem_mhz: 1593,
                slowdown_c: 90,
                shutdown_c: 95,
                nvlinks: 12,
                nvlink_gbps: 25.0,
                ib_rate_gbps: 200,
                ib_rate_text: "4X HDR",
                pcie_gen: 4,
                pcie_width: 16,
                vbios: "92.00.45.00.06",
            },
        }
    }
}

/// How a simulated node is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub hostname: String,
    pub gpus: u32,
    pub ib_ports: u32,
    pub model: Model,
    pub scenario: Scenario,
    pub seed: u64,
    /// When the simulated node's story begins (ms since the epoch). Problems
    /// start `ONSET_MS` after this.
    pub start_ms: i64,
    pub interval_ms: u32,
    /// How long the problem lasts (ms from its onset); `None`: for good.
    /// A problem that ends lets tests see flags clear (and alerts resolve).
    pub problem_ms: Option<i64>,
}

impl SimConfig {
    /// Whether the scenario's problem is on at `now_ms` (from its onset, for
    /// `problem_ms` if that is set). The samples and the simulated burn-in
    /// (`bench::sim`) both ask this, so they tell the same story.
    pub fn problem_active(&self, now_ms: i64) -> bool {
        let onset = self.start_ms + ONSET_MS;
        now_ms >= onset && self.problem_ms.is_none_or(|d| now_ms < onset + d)
    }
}

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

/// Time from the start of the story to the scenario's problem.
pub const ONSET_MS: i64 = 20_000;

/// The GPU a scenario's problem happens to.
pub fn target_gpu(seed: u64, gpus: u32) -> u32 {
    (seed % u64::from(gpus.max(1))) as u32
}

/// The InfiniBand port a scenario's problem happens to.
pub fn target_ib_port(seed: u64, ports: u32) -> u32 {
    (seed.rotate_right(7) % u64::from(ports.max(1))) as u32
}

/// GpuSample.fabric_state for NVML_GPU_FABRIC_STATE_COMPLETED (NVML's state plus one).
const FABRIC_COMPLETED: u32 = 4;

/// GpuSample.fabric_status of the failed registration in `fabric-failed`
/// (NVML_ERROR_UNKNOWN).
const FABRIC_FAILED_STATUS: u32 = 999;

/// The NVLink link that goes down in `nvlink-down`.
pub const DOWN_LINK: u32 = 3;

/// SplitMix64: a tiny, well-known mixer. Owning it (rather than a general RNG
/// crate) guarantees the same seed gives the same cluster across upgrades.
/// (The simulated burn-in draws its figures from it too.)
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A deterministic number in [0, 1) for this seed, GPU, step and purpose.
fn noise(seed: u64, gpu: u32, step: i64, salt: u64) -> f64 {
    let h = mix(seed ^ mix(u64::from(gpu) ^ mix(step as u64 ^ mix(salt))));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

pub struct SimNode {
    cfg: SimConfig,
    spec: ModelSpec,
    /// Time of the previous sample: XIDs are events, reported once, in the
    /// first sample after the problem starts.
    last_ms: Option<i64>,
}

impl SimNode {
    pub fn new(cfg: SimConfig) -> Self {
        let spec = cfg.model.spec();
        SimNode {
            cfg,
            spec,
            last_ms: None,
        }
    }

    fn problem_active(&self, now_ms: i64) -> bool {
        self.cfg.problem_active(now_ms)
    }

    fn step(&self, now_ms: i64) -> i64 {
        now_ms / i64::from(self.cfg.interval_ms.max(1))
    }

    fn job_id(&self) -> u64 {
        4000 + self.cfg.seed % 997
    }

    /// The GPUs NVML lists: all but the last where one is missing.
    fn listed_gpus(&self) -> u32 {
        match self.cfg.scenario {
            Scenario::GpuMissing => self.cfg.gpus.saturating_sub(1),
            _ => self.cfg.gpus,
        }
    }

    /// True for the first sample at or after the problem's onset.
    fn first_after_onset(&self, now_ms: i64) -> bool {
        let onset = self.cfg.start_ms + ONSET_MS;
        now_ms >= onset
            && match self.last_ms {
                Some(last) => last < onset,
                None => now_ms - onset < i64::from(self.cfg.interval_ms),
            }
    }

    fn gpu_sample(&self, gpu: u32, now_ms: i64) -> GpuSample {
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
        }
        // GPM (Hopper and later): how much of the GPU the work really uses.
        if self.cfg.model != Model::A100 {
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
        s.pcie_tx_kbps = if busy { (2_000_000.0 * n(9)) as u32 } else { 0 };
        s.pcie_rx_kbps = if busy { (3_000_000.0 * n(10)) as u32 } else { 0 };
        s.pcie_replay_count = 0;
        // An idle link trains down to Gen1 to save power; its width stays.
        s.pcie_gen = if busy { sp.pcie_gen } else { 1 };
        s.pcie_width = sp.pcie_width;
        s.persistence = 2;
        // Registered with the NVLink fabric (Hopper HGX: completed, success;
        // NVML gives A100s no fabric state, so not reported).
        if self.cfg.model != Model::A100 {
            s.fabric_state = FABRIC_COMPLETED;
        }
        // The node's persistence daemon is not running: every GPU, not one.
        if c.scenario == Scenario::PersistenceOff && self.problem_active(now_ms) {
            s.persistence = 1;
        }
        s.ecc_corrected_volatile = noise(c.seed, gpu, 0, 11).lt(&0.2) as u64;

        // NVLink counters, in KiB: a steady share of link bandwidth while busy.
        let link_share = if busy {
            0.25 + 0.1 * noise(c.seed, gpu, 0, 12)
        } else {
            0.0
        };
        let kib_per_s = sp.nvlink_gbps * 1e9 / 1024.0 * link_share;
        // Sized once: a demo invents hundreds of thousands of these at start.
        let links = sp.nvlinks as usize;
        s.nvlink_state.reserve_exact(links);
        s.nvlink_tx_kib.reserve_exact(links);
        s.nvlink_rx_kib.reserve_exact(links);
        for l in 0..sp.nvlinks {
            let mut t = elapsed_s;
            let mut state = 1;
            if c.scenario == Scenario::NvlinkDown && target && l == DOWN_LINK {
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
        match self.cfg.scenario {
            Scenario::ThermalThrottle => {
                s.temp_c = sp.slowdown_c + 2 + (step % 3) as u32;
                s.hbm_temp_c = s.temp_c + 6;
                s.throttle_reasons |= throttle::HW_THERMAL_SLOWDOWN | throttle::SW_THERMAL_SLOWDOWN;
                s.sm_clock_mhz = sp.max_sm_mhz * 6 / 10;
            }
            Scenario::Hot => {
                s.temp_c = sp.slowdown_c - 3;
                s.hbm_temp_c = s.temp_c + 5;
            }
            Scenario::PowerBrake => {
                s.throttle_reasons |= throttle::HW_POWER_BRAKE_SLOWDOWN;
                s.sm_clock_mhz = sp.max_sm_mhz * 3 / 10;
                s.power_mw = sp.power_limit_w * 1000 * 35 / 100;
            }
            Scenario::PowerCap => {
                s.throttle_reasons |= throttle::SW_POWER_CAP;
                s.power_mw = sp.power_limit_w * 1000 - 2_000;
                s.sm_clock_mhz = sp.max_sm_mhz * 85 / 100;
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
                // As the NVML sampler words it, the call stuck since onset.
                let stuck_ms = now_ms - (self.cfg.start_ms + ONSET_MS);
                *s = GpuSample {
                    index: s.index,
                    error: format!("nvml_stuck: nvmlDeviceGetPowerUsage: no answer for {stuck_ms} ms"),
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
            Scenario::EccUncorrectable => {
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

    fn ib_sample(&self, port: u32, now_ms: i64) -> IbSample {
        let c = &self.cfg;
        let elapsed_s = ((now_ms - c.start_ms).max(0) as f64) / 1000.0;
        let target = port == target_ib_port(c.seed, c.ib_ports);
        let busy = !matches!(c.scenario, Scenario::Quiet | Scenario::Idle);
        let mut s = IbSample {
            port,
            state: "ACTIVE".into(),
            phys_state: "LinkUp".into(),
            rate_gbps: self.spec.ib_rate_gbps,
            errors: vec![0; ib::ERROR_COUNTERS.len()],
            errors_present_mask: (1 << ib::ERROR_COUNTERS.len()) - 1,
            ..Default::default()
        };
        let share = if busy { 0.3 } else { 0.001 };
        let bytes_per_s = f64::from(self.spec.ib_rate_gbps) * 1e9 / 8.0 * share;
        let mut t = elapsed_s;
        let onset_s = ONSET_MS as f64 / 1000.0;
        if target && c.scenario == Scenario::IbDown {
            t = t.min(onset_s);
            if self.problem_active(now_ms) {
                s.state = "DOWN".into();
                s.phys_state = "Polling".into();
                s.errors[2] = 1; // link_downed
            }
        }
        if target && c.scenario == Scenario::IbErrors && self.problem_active(now_ms) {
            // symbol_error climbs a few per second (a 16-bit counter: saturates).
            let since = elapsed_s - onset_s;
            s.errors[0] = ((since * 4.0) as u64).min(0xFFFF);
            s.errors[1] = (since / 30.0) as u64; // link_error_recovery
        }
        s.tx_bytes = (bytes_per_s * t) as u64 / 4 * 4;
        s.rx_bytes = (bytes_per_s * 0.97 * t) as u64 / 4 * 4;
        s.tx_packets = s.tx_bytes / 4096;
        s.rx_packets = s.rx_bytes / 4096;
        s
    }
}

impl Sampler for SimNode {
    fn describe(&mut self, info: &mut NodeInfo) {
        let c = &self.cfg;
        let sp = &self.spec;
        info.hostname = c.hostname.clone();
        info.backend = format!("sim:{}", c.scenario.name());
        let old = c.scenario == Scenario::OldDriver;
        info.driver_version = if old { "535.161.08" } else { "570.172.08" }.into();
        info.cuda_version = "12.8".into();
        let bus = |i: u32| format!("00000000:{:02X}:00.0", 0x18 + i * 0x10);
        if c.scenario == Scenario::GpuMissing {
            // The last GPU: the kernel sees it, NVML does not.
            info.expect_gpus = c.gpus;
            info.gpus_missing_pci.push(bus(c.gpus.saturating_sub(1)));
        }
        if c.ib_ports > 0 {
            info.peermem = if c.scenario == Scenario::NoPeermem { 1 } else { 2 };
        }
        for g in 0..self.listed_gpus() {
            let bus = |i: u32| format!("00000000:{:02X}:00.0", 0x18 + i * 0x10);
            info.gpus.push(GpuInfo {
                index: g,
                uuid: format!(
                    "GPU-{:08x}-{:04x}-sim0-{:012x}",
                    mix(c.seed) as u32,
                    g,
                    mix(c.seed ^ u64::from(g)) >> 16
                ),
                model: sp.name.into(),
                pci_bus_id: bus(g),
                mem_total_bytes: sp.mem_bytes,
                power_limit_mw: sp.power_limit_w * 1000,
                max_sm_clock_mhz: sp.max_sm_mhz,
                max_mem_clock_mhz: sp.max_mem_mhz,
                slowdown_temp_c: sp.slowdown_c,
                shutdown_temp_c: sp.shutdown_c,
                vbios_version: if old { "96.00.61.00.01" } else { sp.vbios }.into(),
                pcie_max_gen: sp.pcie_gen,
                pcie_max_width: sp.pcie_width,
                // Links go to the NVSwitches, as on an HGX board.
                nvlinks: (0..sp.nvlinks)
                    .map(|l| NvLinkInfo {
                        link: l,
                        peer_pci_bus_id: format!("00000000:{:02X}:00.0", 0xA0 + l % 4),
                        inactive_at_start: false,
                    })
                    .collect(),
            });
        }
        for p in 0..c.ib_ports {
            info.ib_ports.push(IbPortInfo {
                device: format!("mlx5_{p}"),
                port: 1,
                link_layer: "InfiniBand".into(),
            });
        }
        info.gpu_backend_note = format!(
            "simulated {} x{} ({} Gb/s {})",
            sp.name, c.gpus, sp.ib_rate_gbps, sp.ib_rate_text
        );
    }

    fn sample(&mut self, now_ms: i64, out: &mut Sample) {
        let c = &self.cfg;
        let busy = !matches!(c.scenario, Scenario::Quiet | Scenario::Idle);
        let step = self.step(now_ms);
        out.host = Some(HostSample {
            cpu_permille: if busy {
                (400.0 + 200.0 * noise(c.seed, 999, step, 20)) as u32
            } else {
                (10.0 + 20.0 * noise(c.seed, 999, step, 20)) as u32
            },
            mem_used_bytes: if busy { 900 << 30 } else { 60 << 30 },
            mem_total_bytes: 2048 << 30,
            load1_x100: if busy { 9_600 } else { 40 },
            uptime_s: 3_000_000 + ((now_ms - c.start_ms).max(0) / 1000) as u64,
        });
        out.gpus.reserve_exact(c.gpus as usize);
        for g in 0..self.listed_gpus() {
            out.gpus.push(self.gpu_sample(g, now_ms));
        }
        if c.scenario == Scenario::SxidFatal && self.first_after_onset(now_ms) {
            out.sxids.push(SxidEvent {
                sxid: 20034,
                time_ms: now_ms,
                switch_pci: "0000:c8:00.0".into(),
                fatal: true,
                text: "Link 30 LTSSM Fault Up".into(),
            });
        }
        out.ib_ports.reserve_exact(c.ib_ports as usize);
        for p in 0..c.ib_ports {
            out.ib_ports.push(self.ib_sample(p, now_ms));
        }
        self.last_ms = Some(now_ms);
    }

    fn is_hung(&self, now_ms: i64) -> bool {
        self.cfg.scenario == Scenario::Hang && self.problem_active(now_ms)
    }

    fn simulation(&self) -> Option<&SimConfig> {
        Some(&self.cfg)
    }

    /// Only arithmetic: a simulated hang is a missing sample, never a wait.
    fn blocks(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(scenario: Scenario, seed: u64) -> SimNode {
        SimNode::new(SimConfig {
            hostname: "sim01".into(),
            gpus: 8,
            ib_ports: 4,
            model: Model::H100,
            scenario,
            seed,
            start_ms: 0,
            interval_ms: 1000,
            problem_ms: None,
        })
    }

    fn at(n: &mut SimNode, t_ms: i64) -> Sample {
        let mut s = Sample::default();
        n.sample(t_ms, &mut s);
        s
    }

    #[test]
    fn same_seed_same_samples() {
        let (mut a, mut b) = (node(Scenario::Training, 7), node(Scenario::Training, 7));
        assert_eq!(at(&mut a, 42_000), at(&mut b, 42_000));
        let mut c = node(Scenario::Training, 8);
        assert_ne!(at(&mut a, 42_000), at(&mut c, 42_000));
    }

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
    fn a_problem_with_a_duration_ends() {
        let seed = 3;
        let mut n = node(Scenario::ThermalThrottle, seed);
        n.cfg.problem_ms = Some(10_000);
        let t = target_gpu(seed, 8) as usize;
        let throttled = |s: &Sample| s.gpus[t].throttle_reasons & throttle::HW_THERMAL_SLOWDOWN != 0;
        assert!(throttled(&at(&mut n, ONSET_MS + 9_000)));
        assert!(!throttled(&at(&mut n, ONSET_MS + 10_000)));
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
    fn counters_never_go_backwards() {
        let mut n = node(Scenario::IbErrors, 5);
        let mut prev = at(&mut n, 0);
        for t in (1_000..120_000).step_by(1000) {
            let s = at(&mut n, t);
            for (a, b) in prev.gpus.iter().zip(&s.gpus) {
                assert!(b.energy_mj >= a.energy_mj);
                for (x, y) in a.nvlink_tx_kib.iter().zip(&b.nvlink_tx_kib) {
                    assert!(y >= x);
                }
            }
            for (a, b) in prev.ib_ports.iter().zip(&s.ib_ports) {
                assert!(b.tx_bytes >= a.tx_bytes);
                assert!(b.errors[0] >= a.errors[0]);
            }
            prev = s;
        }
        let p = target_ib_port(5, 4) as usize;
        assert!(prev.ib_ports[p].errors[0] > 100, "symbol errors rise");
    }

    #[test]
    fn hang_stops_sampling_after_onset() {
        let n = node(Scenario::Hang, 1);
        assert!(!n.is_hung(ONSET_MS - 1));
        assert!(n.is_hung(ONSET_MS));
    }

    #[test]
    fn every_scenario_has_a_cli_name() {
        let names: Vec<String> = Scenario::all().iter().map(|s| s.name()).collect();
        assert!(names.contains(&"thermal-throttle".to_string()));
        assert!(names.contains(&"xid79".to_string()));
        assert_eq!(names.len(), 22);
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
}
