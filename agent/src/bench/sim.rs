//! The GPU checks of a burn-in on a simulated node (`--backend sim`, the
//! demo, `swarm`): there is no GPU to measure, yet the console's burn-in
//! workflow (pass, fail, return to service) must be testable and demoable on
//! simulated agents. So each check gets a figure from the simulation: the
//! level a healthy GPU of that model clears (its expectation) times a
//! deterministic factor a little above 1, judged by the same `judge` as a
//! real measurement. The node's scenario breaks the checks that its fault
//! would break on real hardware, on the GPU the simulation faults, while the
//! fault is on. Every result says it is simulated, so nobody takes it for a
//! hardware figure. Host memory and the network are measured for real
//! elsewhere; nothing here touches CUDA.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::Run;
use super::expect::{Expectation, Verdict, judge};
use crate::sim::{DOWN_LINK, Scenario, SimConfig, mix, target_gpu};
use crate::throttle;

/// In the reason of every simulated result.
pub const SIMULATED: &str = "simulated (sim backend): no GPU was measured";

/// A simulated node, as its burn-in needs it.
#[derive(Debug, Clone)]
pub struct SimBench {
    pub cfg: SimConfig,
    /// Added to this machine's clock, as for the agent's samples: the
    /// simulation is sampled on the agent's clock, and its fault is judged
    /// on or off by the same one.
    pub clock_offset_ms: i64,
}

/// A scenario's problem while it is on, and the GPU it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub scenario: Scenario,
    pub gpu: u32,
}

/// What one simulated check gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub value: f64,
    pub unit: &'static str,
    pub verdict: Verdict,
    pub reason: String,
}

/// How a fault changes one check.
enum Effect {
    Healthy,
    /// The GPU is gone: the check has no figure.
    Lost(u32),
    /// The figure falls to about half the floor, for this reason.
    Halved(String),
    /// The burn ran, at `scale` of its healthy rate, but this was seen
    /// during it (worded as the real burn's watcher words it).
    Troubled {
        scale: f64,
        seen: String,
    },
}

/// Figures, an H100's, for a check with no expectation for the node's model
/// (the shipped file covers every simulated model, so this is a fallback).
fn nominal(name: &str) -> f64 {
    match name {
        "hbm_d2d" => 1400.0,
        "pcie_h2d" | "pcie_d2h" => 50.0,
        "nvlink_p2p" => 350.0,
        "nccl_allreduce_busbw" => 400.0,
        "gemm_tflops" => 650.0,
        _ => 100.0,
    }
}

/// A stable hash of a check's name (FNV-1a): the same figures on every
/// build, unlike std's hasher, whose algorithm may change.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl SimBench {
    /// A number in [0, 1) for this node, check, GPU and peer (and purpose).
    fn unit(&self, name: &str, gpu: Option<u32>, peer: Option<u32>, salt: u64) -> f64 {
        let id = |g: Option<u32>| g.map_or(0, |g| u64::from(g) + 1);
        let h = mix(self.cfg.seed ^ mix(name_hash(name) ^ mix(id(gpu) << 32 | id(peer)) ^ mix(salt)));
        (h >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The fault at `now_ms` (the agent's clock), if the scenario's problem
    /// is on then.
    pub fn fault_at(&self, now_ms: i64) -> Option<Fault> {
        let c = &self.cfg;
        c.problem_active(now_ms).then(|| Fault {
            scenario: c.scenario,
            gpu: target_gpu(c.seed, c.gpus),
        })
    }

    fn fault_now(&self) -> Option<Fault> {
        self.fault_at(crate::now_ms() + self.clock_offset_ms)
    }

    /// A healthy GPU's figure: the level that passes without a warning (the
    /// warning level where there is one, else the minimum) times 1.05 to
    /// 1.2, fixed by the node's seed, the check and the GPUs.
    pub fn healthy(&self, name: &str, gpu: Option<u32>, peer: Option<u32>, exp: Option<&Expectation>) -> f64 {
        let base = exp.map_or(nominal(name), |e| e.warn.unwrap_or(e.min).max(e.min));
        base * (1.05 + 0.15 * self.unit(name, gpu, peer, 1))
    }

    fn effect(&self, fault: Option<Fault>, name: &str, gpu: Option<u32>, peer: Option<u32>) -> Effect {
        let Some(Fault { scenario, gpu: t }) = fault else {
            return Effect::Healthy;
        };
        let on_target = gpu == Some(t);
        let burn = name == "gemm_tflops";
        let why = |what: String| format!("{what} (scenario {})", scenario.name());
        match scenario {
            // Every check that needs the GPU: its own, a copy to it, and
            // the all-reduce across the node.
            Scenario::Xid79 if on_target || peer == Some(t) || name.starts_with("nccl_") => Effect::Lost(t),
            Scenario::PcieDegraded if on_target && matches!(name, "pcie_h2d" | "pcie_d2h") => {
                Effect::Halved(why(format!("GPU {t}'s PCIe link trained at half its width")))
            }
            Scenario::NvlinkDown if on_target && name == "nvlink_p2p" => {
                Effect::Halved(why(format!("NVLink link {DOWN_LINK} of GPU {t} is down")))
            }
            // Clocks cut to 60%, as the simulation's samples show.
            Scenario::ThermalThrottle if on_target && burn => Effect::Troubled {
                scale: 0.6,
                seen: why(throttle::names(throttle::HW_THERMAL_SLOWDOWN | throttle::SW_THERMAL_SLOWDOWN).join(", ")),
            },
            Scenario::EccUncorrectable if on_target && burn => Effect::Troubled {
                scale: 1.0,
                seen: why("uncorrectable ECC, XID 94".into()),
            },
            _ => Effect::Healthy,
        }
    }

    /// The result of check `name` on `gpu` (to `peer`) under `fault`, with
    /// `healthy` the figure it has without one.
    pub fn outcome(
        &self,
        fault: Option<Fault>,
        name: &str,
        gpu: Option<u32>,
        peer: Option<u32>,
        healthy: f64,
        exp: Option<&Expectation>,
    ) -> Outcome {
        let unit = if name == "gemm_tflops" { "TFLOP/s" } else { "GB/s" };
        let said = |detail: String| {
            if detail.is_empty() {
                SIMULATED.to_string()
            } else {
                format!("{detail}; {SIMULATED}")
            }
        };
        match self.effect(fault, name, gpu, peer) {
            Effect::Healthy => {
                let (verdict, reason) = judge(healthy, unit, exp);
                Outcome {
                    value: healthy,
                    unit,
                    verdict,
                    reason: said(reason),
                }
            }
            Effect::Lost(t) => Outcome {
                value: 0.0,
                unit: "",
                verdict: Verdict::Fail,
                reason: said(format!("GPU {t} fell off the bus (XID 79, scenario xid79)")),
            },
            Effect::Halved(why) => {
                let value = exp.map_or(healthy * 0.5, |e| e.min * (0.45 + 0.1 * self.unit(name, gpu, peer, 2)));
                // Fails whatever the floor: the fault is the point (as a
                // real burn fails on trouble whatever its figure).
                let (_, judged) = judge(value, unit, exp);
                Outcome {
                    value,
                    unit,
                    verdict: Verdict::Fail,
                    reason: said(format!("{why}: {judged}")),
                }
            }
            Effect::Troubled { scale, seen } => Outcome {
                value: healthy * scale,
                unit,
                verdict: Verdict::Fail,
                reason: said(format!("during the burn: {seen}")),
            },
        }
    }

    /// A simulated check's short wait (50 to 200 ms), so that a suite's
    /// progress reads as one; false when `stop` ends it.
    fn pause(&self, name: &str, gpu: Option<u32>, peer: Option<u32>, stop: &AtomicBool) -> bool {
        let until = Instant::now() + Duration::from_millis(50 + (150.0 * self.unit(name, gpu, peer, 3)) as u64);
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        !stop.load(Ordering::Relaxed)
    }
}

/// One check: a short wait, then its simulated result.
fn one(r: &mut Run<'_>, sim: &SimBench, name: &str, gpu: Option<u32>, peer: Option<u32>) {
    if !sim.pause(name, gpu, peer, r.stop) {
        r.skipped(name, gpu, "cancelled".into());
        return;
    }
    let exp = r.expectation(name, gpu);
    let healthy = sim.healthy(name, gpu, peer, exp);
    let o = sim.outcome(sim.fault_now(), name, gpu, peer, healthy, exp);
    r.send_result(name, gpu, peer, o.value, o.unit, o.verdict, o.reason, exp);
}

/// The GPU checks of a suite on a simulated node with `n` GPUs, in the
/// order and with the progress steps of the real ones.
pub(super) fn gpu_checks(r: &mut Run<'_>, sim: &SimBench, n: u32, pairs: &[(u32, u32)]) {
    for g in 0..n {
        for (step, name) in [
            ("HBM copy", "hbm_d2d"),
            ("host to device", "pcie_h2d"),
            ("device to host", "pcie_d2h"),
        ] {
            if r.stopped() {
                return;
            }
            r.progress(&format!("GPU {g} {step}"));
            one(r, sim, name, Some(g), None);
        }
    }
    for &(a, b) in pairs {
        if r.stopped() {
            return;
        }
        r.progress(&format!("GPU {a} to GPU {b}"));
        one(r, sim, "nvlink_p2p", Some(a), Some(b));
    }
    if n > 1 && !r.stopped() {
        r.progress("NCCL all-reduce");
        let bus = "nccl_allreduce_busbw";
        if !sim.pause(bus, None, None, r.stop) {
            r.skipped(bus, None, "cancelled".into());
            return;
        }
        let fault = sim.fault_now();
        let bus_exp = r.expectation(bus, None);
        let bus_healthy = sim.healthy(bus, None, None, bus_exp);
        // nccl-tests' relation between the two (see `gpu::busbw`).
        let alg = "nccl_allreduce_algbw";
        let alg_exp = r.expectation(alg, None);
        let alg_healthy = bus_healthy / super::gpu::busbw(1.0, n);
        for (name, healthy, exp) in [(alg, alg_healthy, alg_exp), (bus, bus_healthy, bus_exp)] {
            let o = sim.outcome(fault, name, None, None, healthy, exp);
            r.send_result(name, None, None, o.value, o.unit, o.verdict, o.reason, exp);
        }
    }
    if n > 0 && !r.stopped() {
        // One wait for all: the real burn runs on every GPU at once.
        r.progress("GEMM burn (simulated)");
        let name = "gemm_tflops";
        if !sim.pause(name, None, None, r.stop) {
            for g in 0..n {
                r.skipped(name, Some(g), "cancelled".into());
            }
            return;
        }
        let fault = sim.fault_now();
        for g in 0..n {
            let exp = r.expectation(name, Some(g));
            let healthy = sim.healthy(name, Some(g), None, exp);
            let o = sim.outcome(fault, name, Some(g), None, healthy, exp);
            r.send_result(name, Some(g), None, o.value, o.unit, o.verdict, o.reason, exp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::expect::Expectations;
    use super::super::{BenchContext, Suite, run};
    use super::*;
    use crate::proto::BenchResult;
    use crate::proto::bench_event::Kind;
    use crate::sim::{Model, ONSET_MS};

    const GPUS: u32 = 4;
    const H100: &str = "NVIDIA H100 80GB HBM3";

    /// A simulated H100 node whose problem has been on for a minute.
    fn sim(scenario: Scenario, seed: u64) -> SimBench {
        SimBench {
            cfg: SimConfig {
                hostname: "sim01".into(),
                gpus: GPUS,
                ib_ports: 1,
                model: Model::H100,
                scenario,
                seed,
                start_ms: crate::now_ms() - ONSET_MS - 60_000,
                interval_ms: 1000,
                problem_ms: None,
            },
            clock_offset_ms: 0,
        }
    }

    fn quick(s: SimBench) -> Vec<BenchResult> {
        let ctx = BenchContext {
            expectations: Expectations::load(None).expect("shipped"),
            gpu_models: vec![H100.to_string(); GPUS as usize],
            gpu_pci_bus_ids: vec![],
            latest: Arc::new(|| None),
            simulated: Some(s),
            gpu_api: Default::default(),
        };
        let mut events = Vec::new();
        run(Suite::Quick, None, &ctx, &AtomicBool::new(false), &mut |e| {
            events.push(e);
            true
        });
        assert!(matches!(events.last().and_then(|e| e.kind.as_ref()), Some(Kind::Done(d)) if !d.cancelled));
        events
            .into_iter()
            .filter_map(|e| match e.kind {
                Some(Kind::Result(r)) => Some(r),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_healthy_sim_node_passes_every_gpu_check_and_says_it_is_simulated() {
        let results = quick(sim(Scenario::Training, 11));
        let gpu: Vec<&BenchResult> = results
            .iter()
            .filter(|r| fleetop_proto::bench::GPU_CHECKS.contains(&r.name.as_str()))
            .collect();
        // hbm, h2d, d2h and the burn per GPU, a copy to the next GPU from
        // each, and the all-reduce's two figures.
        assert_eq!(gpu.len(), (GPUS * 5 + 2) as usize, "{gpu:#?}");
        for &name in fleetop_proto::bench::GPU_CHECKS {
            assert!(gpu.iter().any(|r| r.name == name), "{name} missing");
        }
        for r in &gpu {
            assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
            assert!(r.reason.contains(SIMULATED), "{r:?}");
            assert!(r.value > r.expected_min && !r.unit.is_empty(), "{r:?}");
        }
        assert!(
            gpu.iter()
                .filter(|r| r.name != "nccl_allreduce_algbw")
                .all(|r| r.expected_min > 0.0),
            "judged against the shipped floors"
        );
        // The host is measured for real: not called simulated.
        let host = results.iter().find(|r| r.name == "host_memcpy").expect("host");
        assert!(host.value > 0.0 && !host.reason.contains("simulated"), "{host:?}");
    }

    #[test]
    fn a_degraded_pcie_link_fails_that_gpus_pcie_checks_only() {
        let s = sim(Scenario::PcieDegraded, 6);
        let t = target_gpu(6, GPUS) as i32;
        for r in quick(s) {
            if !fleetop_proto::bench::GPU_CHECKS.contains(&r.name.as_str()) {
                continue;
            }
            let pcie = r.name.starts_with("pcie_");
            if pcie && r.gpu == t {
                assert_eq!(r.verdict(), Verdict::Fail, "{r:?}");
                assert!(
                    r.value < r.expected_min * 0.6 && r.value > 0.0,
                    "about half the floor: {r:?}"
                );
                assert!(
                    r.reason.contains("pcie-degraded") && r.reason.contains(SIMULATED),
                    "{r:?}"
                );
            } else {
                assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
            }
        }
    }

    #[test]
    fn a_lost_gpu_fails_every_check_that_needs_it() {
        let s = sim(Scenario::Xid79, 9);
        let t = target_gpu(9, GPUS) as i32;
        let results = quick(s);
        for r in &results {
            if !fleetop_proto::bench::GPU_CHECKS.contains(&r.name.as_str()) {
                continue;
            }
            let needs_it = r.gpu == t || r.peer == t || r.name.starts_with("nccl_");
            if needs_it {
                assert_eq!(r.verdict(), Verdict::Fail, "{r:?}");
                assert_eq!(r.value, 0.0, "no figure: {r:?}");
                assert!(r.reason.contains("fell off the bus"), "{r:?}");
            } else {
                assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
            }
        }
        let own: Vec<&str> = results.iter().filter(|r| r.gpu == t).map(|r| r.name.as_str()).collect();
        for name in ["hbm_d2d", "pcie_h2d", "pcie_d2h", "nvlink_p2p", "gemm_tflops"] {
            assert!(own.contains(&name), "{name} for the lost GPU: {own:?}");
        }
    }

    /// Every check of a node of 4, as (name, gpu, peer).
    fn checks() -> Vec<(&'static str, Option<u32>, Option<u32>)> {
        let mut v = Vec::new();
        for g in 0..GPUS {
            for name in ["hbm_d2d", "pcie_h2d", "pcie_d2h", "gemm_tflops"] {
                v.push((name, Some(g), None));
            }
            v.push(("nvlink_p2p", Some(g), Some((g + 1) % GPUS)));
        }
        v.push(("nccl_allreduce_algbw", None, None));
        v.push(("nccl_allreduce_busbw", None, None));
        v
    }

    #[test]
    fn each_scenario_fails_the_checks_its_fault_breaks_and_no_others() {
        let e = Expectations::load(None).expect("shipped");
        for &scenario in Scenario::all() {
            let s = sim(scenario, 5);
            let t = target_gpu(5, GPUS);
            let fault = s.fault_at(crate::now_ms());
            assert_eq!(fault, Some(Fault { scenario, gpu: t }));
            for (name, gpu, peer) in checks() {
                let exp = e.find(name, Some(H100), None);
                let o = s.outcome(fault, name, gpu, peer, s.healthy(name, gpu, peer, exp), exp);
                let on_t = gpu == Some(t);
                let (fails, says) = match scenario {
                    Scenario::Xid79 => (on_t || peer == Some(t) || name.starts_with("nccl_"), "fell off the bus"),
                    Scenario::PcieDegraded => (on_t && name.starts_with("pcie_"), "pcie-degraded"),
                    Scenario::NvlinkDown => (on_t && name == "nvlink_p2p", "nvlink-down"),
                    Scenario::ThermalThrottle => (on_t && name == "gemm_tflops", "thermal"),
                    Scenario::EccUncorrectable => (on_t && name == "gemm_tflops", "uncorrectable ECC"),
                    _ => (false, ""),
                };
                let want = if fails { Verdict::Fail } else { Verdict::Pass };
                assert_eq!(o.verdict, want, "{scenario:?} {name} {gpu:?}: {o:?}");
                assert!(o.reason.contains(SIMULATED), "{o:?}");
                assert!(!fails || o.reason.contains(says), "the reason names the fault: {o:?}");
            }
        }
    }

    #[test]
    fn figures_are_fixed_by_the_node_and_a_little_above_the_passing_level() {
        let e = Expectations::load(None).expect("shipped");
        let (a, b) = (sim(Scenario::Training, 1), sim(Scenario::Training, 2));
        let mut differ = false;
        for (name, gpu, peer) in checks().into_iter().filter(|c| c.0 != "nccl_allreduce_algbw") {
            let exp = e.find(name, Some(H100), None).expect("a floor");
            let level = exp.warn.unwrap_or(exp.min);
            let v = a.healthy(name, gpu, peer, Some(exp));
            assert_eq!(v, sim(Scenario::Quiet, 1).healthy(name, gpu, peer, Some(exp)));
            assert!((1.05 * level..1.2 * level).contains(&v), "{name}: {v} against {level}");
            assert_eq!(judge(v, "GB/s", Some(exp)).0, Verdict::Pass);
            differ |= v != b.healthy(name, gpu, peer, Some(exp));
        }
        assert!(differ, "another node, other figures");
    }

    #[test]
    fn a_fault_counts_only_while_it_is_on() {
        let mut s = sim(Scenario::PcieDegraded, 3);
        s.cfg.start_ms = 0;
        s.cfg.problem_ms = Some(10_000);
        assert_eq!(s.fault_at(ONSET_MS - 1), None);
        assert!(s.fault_at(ONSET_MS + 9_999).is_some());
        assert_eq!(s.fault_at(ONSET_MS + 10_000), None);
        // The agent's clock, offset as its samples are: a node whose clock
        // is far behind is still before its problem.
        s.cfg.start_ms = crate::now_ms() - ONSET_MS - 1_000;
        s.cfg.problem_ms = None;
        assert!(s.fault_now().is_some());
        s.clock_offset_ms = -60_000;
        assert_eq!(s.fault_now(), None);
    }

    #[test]
    fn a_stop_ends_a_simulated_check() {
        let stop = AtomicBool::new(true);
        assert!(!sim(Scenario::Training, 1).pause("hbm_d2d", Some(0), None, &stop));
    }
}
