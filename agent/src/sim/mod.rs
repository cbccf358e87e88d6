//! A simulated GPU node for demos and tests: seeded and deterministic (the same
//! seed, scenario and time give the same sample), with realistic models and
//! named scenarios that produce every kind of flag the console raises.
//!
//! Every reading is a pure function of (seed, GPU, time step), so history can
//! be generated for past times and a restarted simulated agent continues
//! where the old one was.
//!
//! This file holds the node's setup (`SimConfig`), its story's timing and
//! targets, the deterministic noise everything is drawn from, and `SimNode`
//! itself. The scenarios are in `scenario`, the GPU models in `model`, each
//! GPU's readings in `gpu`, the InfiniBand ports' in `ib`, and the node as a
//! `Sampler` (its description and whole samples) in `sampler`.

mod gpu;
mod ib;
mod model;
mod sampler;
mod scenario;

pub use model::Model;
use model::ModelSpec;
pub use scenario::Scenario;

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

    /// The GPU-to-GPU links of each GPU: NVIDIA's go to the NVSwitches,
    /// every one; AMD's XGMI mesh has a link to each other GPU of the node
    /// (the model's count at most), the unused ones not listed.
    fn links(&self) -> u32 {
        if self.spec.amd() {
            self.spec.nvlinks.min(self.cfg.gpus.saturating_sub(1))
        } else {
            self.spec.nvlinks
        }
    }

    /// A GPU's PCI bus id, as its vendor's library writes it.
    fn bus(&self, i: u32) -> String {
        if self.spec.amd() {
            format!("0000:{:02x}:00.0", 0x18 + i * 0x10)
        } else {
            format!("00000000:{:02X}:00.0", 0x18 + i * 0x10)
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Sample;
    use crate::sources::Sampler;
    use crate::throttle;

    pub(super) fn node(scenario: Scenario, seed: u64) -> SimNode {
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

    pub(super) fn at(n: &mut SimNode, t_ms: i64) -> Sample {
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
}
