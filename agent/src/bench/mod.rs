//! Burn-in suites run by the agent on request: GPU (HBM, PCIe, NVLink peer
//! copies, NCCL all-reduce, a sustained GEMM burn watched for throttling,
//! XIDs and ECC errors), host memory, and the network to a peer agent. Each
//! result carries its value, unit, expected minimum and verdict. The GPU
//! checks go through CUDA (`gpu`) or, on a node whose GPUs the agent reads
//! through AMD SMI, through HIP (`amd`, `hip`); on a simulated node they are
//! answered by the simulation (`sim`).

pub mod amd;
pub mod expect;
pub mod gpu;
pub mod hip;
pub mod host;
pub mod net;
pub mod sim;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::proto::bench_event::Kind;
use crate::proto::{BenchDone, BenchEvent, BenchProgress, BenchResult, NodeInfo, Sample};
use crate::throttle;
use expect::{Expectations, Verdict, judge};
use gpu::{GpuBenchConfig, Measurement};

/// Medians everywhere: one slow run (a clock change, a page fault) does not
/// move the figure.
pub use gpu::median;

pub use fleetop_proto::bench::Suite;

/// How big each check of a suite is.
fn sizes(suite: Suite) -> Sizes {
    match suite {
        Suite::Quick => Sizes {
            host_bytes: 64 << 20,
            host_runs: 5,
            net: Duration::from_secs(3),
            hbm: GpuBenchConfig {
                bytes: 1 << 30,
                warmup: 3,
                iterations: 20,
            },
            pcie: GpuBenchConfig {
                bytes: 256 << 20,
                warmup: 3,
                iterations: 20,
            },
            burn: Duration::from_secs(20),
            all_pairs: false,
        },
        Suite::Full => Sizes {
            host_bytes: 256 << 20,
            host_runs: 10,
            net: Duration::from_secs(15),
            hbm: GpuBenchConfig {
                bytes: 2 << 30,
                warmup: 5,
                iterations: 50,
            },
            pcie: GpuBenchConfig {
                bytes: 1 << 30,
                warmup: 5,
                iterations: 50,
            },
            burn: Duration::from_secs(300),
            all_pairs: true,
        },
    }
}

struct Sizes {
    host_bytes: usize,
    host_runs: u32,
    net: Duration,
    hbm: GpuBenchConfig,
    pcie: GpuBenchConfig,
    burn: Duration,
    all_pairs: bool,
}

/// Which library the GPU checks call: the vendor's whose library the agent
/// reads the GPUs through (`--backend`; with `auto`, the one it found).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuApi {
    /// CUDA, cuBLAS and NCCL (NVML, or no GPU library at all).
    #[default]
    Cuda,
    /// HIP and hipBLAS (AMD SMI). `partitioned`: the GPUs are split into
    /// compute or memory partitions (CPX, NPS4, ...), each a device of its
    /// own, which the floors (a whole GPU's) do not fit.
    Hip { partitioned: bool },
}

impl GpuApi {
    /// The API for the node the agent describes.
    pub fn of(info: &NodeInfo) -> GpuApi {
        if info.backend != "amdsmi" {
            return GpuApi::Cuda;
        }
        let split = |mode: &str, whole: &str| !mode.is_empty() && mode != whole;
        GpuApi::Hip {
            partitioned: info
                .gpus
                .iter()
                .any(|g| split(&g.compute_partition, "SPX") || split(&g.memory_partition, "NPS1")),
        }
    }
}

/// In the reason of a partition's figures, which are not judged.
pub const PARTITIONED: &str =
    "a partition of its GPU (compute or memory partition mode): the floors are a whole GPU's; figure reported only";

/// What the runner knows about the node.
pub struct BenchContext {
    pub expectations: Expectations,
    /// GPU models by index (NVML's names).
    pub gpu_models: Vec<String>,
    /// (NVML index, PCI bus id) of each GPU the agent samples.
    pub gpu_pci_bus_ids: Vec<(u32, String)>,
    /// The latest sample, to watch the GPUs during the burn.
    pub latest: Arc<dyn Fn() -> Option<Arc<Sample>> + Send + Sync>,
    /// The agent serves a simulated node: its GPU checks (the GPUs of
    /// `gpu_models`) come from the simulation, not CUDA. `None`: real GPUs.
    pub simulated: Option<sim::SimBench>,
    /// The GPU library of real GPUs.
    pub gpu_api: GpuApi,
}

impl BenchContext {
    fn ib_link(&self) -> Option<&'static str> {
        let s = (self.latest)()?;
        match s.ib_ports.iter().map(|p| p.rate_gbps).max()? {
            r if r >= 400 => Some("ndr"),
            r if r >= 200 => Some("hdr"),
            _ => None,
        }
    }
}

/// Sends events; false once nobody listens (then the suite stops).
pub type Emit<'a> = &'a mut dyn FnMut(BenchEvent) -> bool;

struct Run<'a> {
    ctx: &'a BenchContext,
    stop: &'a AtomicBool,
    emit: Emit<'a>,
    step: u32,
    steps: u32,
}

impl<'a> Run<'a> {
    fn send(&mut self, kind: Kind) {
        if !(self.emit)(BenchEvent { kind: Some(kind) }) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    fn progress(&mut self, step: &str) {
        self.step += 1;
        let (done, total) = (self.step, self.steps);
        self.send(Kind::Progress(BenchProgress {
            step: step.into(),
            done,
            total,
        }));
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The expected minimum of a check on `gpu` (or the node's first GPU).
    fn expectation(&self, name: &str, gpu: Option<u32>) -> Option<&'a expect::Expectation> {
        let ctx = self.ctx;
        if self.partitioned(name) {
            return None;
        }
        let model = gpu.and_then(|g| ctx.gpu_models.get(g as usize)).map(String::as_str);
        let model = model.or(ctx.gpu_models.first().map(String::as_str));
        ctx.expectations.find(name, model, ctx.ib_link())
    }

    /// A GPU check on a partitioned GPU: no floor fits it.
    fn partitioned(&self, name: &str) -> bool {
        self.ctx.simulated.is_none()
            && self.ctx.gpu_api == (GpuApi::Hip { partitioned: true })
            && fleetop_proto::bench::GPU_CHECKS.contains(&name)
    }

    /// Judges and sends one figure.
    fn result(&mut self, name: &str, gpu: Option<u32>, peer: Option<u32>, value: f64, unit: &str) {
        let exp = self.expectation(name, gpu);
        let (verdict, mut reason) = judge(value, unit, exp);
        if self.partitioned(name) {
            reason = PARTITIONED.into();
        }
        self.send_result(name, gpu, peer, value, unit, verdict, reason, exp);
    }

    fn skipped(&mut self, name: &str, gpu: Option<u32>, reason: String) {
        self.send_result(name, gpu, None, 0.0, "", Verdict::Skipped, reason, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn send_result(
        &mut self,
        name: &str,
        gpu: Option<u32>,
        peer: Option<u32>,
        value: f64,
        unit: &str,
        verdict: Verdict,
        reason: String,
        exp: Option<&expect::Expectation>,
    ) {
        let r = BenchResult {
            name: name.into(),
            gpu: gpu.map(|g| g as i32).unwrap_or(-1),
            peer: peer.map(|g| g as i32).unwrap_or(-1),
            value,
            unit: unit.into(),
            expected_min: exp.map(|e| e.min).unwrap_or(0.0),
            expected_source: exp.map(|e| e.source.clone()).unwrap_or_default(),
            verdict: verdict as i32,
            reason,
        };
        self.send(Kind::Result(r));
    }

    fn measured<E: std::fmt::Display>(&mut self, m: Result<Measurement, E>, name: &str, gpu: Option<u32>) {
        match m {
            Ok(m) => self.result(&m.name, m.gpu, m.peer, m.value, m.unit),
            Err(e) => self.skipped(name, gpu, e.to_string()),
        }
    }
}

/// Runs `suite`; `net_target` is a peer's sink for the network test.
pub fn run(suite: Suite, net_target: Option<&str>, ctx: &BenchContext, stop: &AtomicBool, emit: Emit<'_>) {
    let z = sizes(suite);
    // A simulated node's GPUs are the ones it describes (no CUDA is asked).
    let gpus = match (&ctx.simulated, ctx.gpu_api) {
        (Some(_), _) => Ok(ctx.gpu_models.len() as u32),
        (None, GpuApi::Cuda) => gpu::device_count().map_err(|e| e.to_string()),
        (None, GpuApi::Hip { .. }) => amd::device_count().map_err(|e| e.to_string()),
    };
    let n = *gpus.as_ref().unwrap_or(&0);
    let pairs: Vec<(u32, u32)> = if z.all_pairs {
        (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .collect()
    } else if n > 1 {
        (0..n).map(|a| (a, (a + 1) % n)).collect()
    } else {
        Vec::new()
    };
    let steps = 3 + n * 3 + pairs.len() as u32 + u32::from(n > 1) + u32::from(n > 0);
    let mut r = Run {
        ctx,
        stop,
        emit,
        step: 0,
        steps,
    };

    r.progress("host memory copy");
    match host::memcpy_all_cores(z.host_bytes, z.host_runs, stop) {
        Some(v) => r.result("host_memcpy", None, None, v, "GB/s"),
        None => r.skipped("host_memcpy", None, "cancelled".into()),
    }

    match (&gpus, &ctx.simulated) {
        (Err(e), _) => {
            // One clear line per GPU check, so nobody mistakes "not run" for "passed".
            for &name in fleetop_proto::bench::GPU_CHECKS {
                r.skipped(name, None, e.clone());
            }
        }
        (Ok(_), Some(s)) => sim::gpu_checks(&mut r, s, n, &pairs),
        (Ok(_), None) if ctx.gpu_api != GpuApi::Cuda => amd::gpu_checks(&mut r, n, &pairs, &z),
        (Ok(_), None) => {
            for g in 0..n {
                if r.stopped() {
                    break;
                }
                r.progress(&format!("GPU {g} HBM copy"));
                r.measured(gpu::hbm_copy(g, &z.hbm), "hbm_d2d", Some(g));
                r.progress(&format!("GPU {g} host to device"));
                r.measured(gpu::pcie_h2d(g, &z.pcie), "pcie_h2d", Some(g));
                r.progress(&format!("GPU {g} device to host"));
                r.measured(gpu::pcie_d2h(g, &z.pcie), "pcie_d2h", Some(g));
            }
            for &(a, b) in &pairs {
                if r.stopped() {
                    break;
                }
                r.progress(&format!("GPU {a} to GPU {b}"));
                r.measured(gpu::p2p_copy(a, b, &z.hbm), "nvlink_p2p", Some(a));
            }
            if n > 1 && !r.stopped() {
                r.progress("NCCL all-reduce");
                let all: Vec<u32> = (0..n).collect();
                match gpu::nccl_allreduce(&all, &z.hbm) {
                    Ok([alg, bus]) => {
                        r.result(&alg.name, None, None, alg.value, alg.unit);
                        r.result(&bus.name, None, None, bus.value, bus.unit);
                    }
                    Err(e) => r.skipped("nccl_allreduce_busbw", None, e.to_string()),
                }
            }
            if n > 0 && !r.stopped() {
                r.progress(&format!("GEMM burn, {} s", z.burn.as_secs()));
                burn(&mut r, n, z.burn);
            }
        }
    }

    r.progress("network");
    match net_target {
        None => r.skipped("tcp", None, "no peer: a network test needs two nodes".into()),
        Some(t) => match net::send(t, 4, z.net, stop) {
            Ok(v) => r.result("tcp", None, None, v, "Gb/s"),
            Err(e) => r.skipped("tcp", None, e),
        },
    }
    r.progress("InfiniBand");
    ib_write_bw(&mut r, net_target, z.net);

    let cancelled = r.stopped();
    r.send(Kind::Done(BenchDone {
        record: None,
        cancelled,
        error: String::new(),
    }));
}

/// GEMM on every GPU at once for `dur`, while the agent's samples are
/// watched: a throttle that matters, an XID or a new uncorrectable ECC error
/// during the burn fails that GPU whatever its TFLOP/s.
/// The NVML index of each CUDA ordinal, matched by PCI address ("DDDDDDDD:BB:DD.F"
/// on NVML's side); `None` where there is no match (then nothing the
/// samples say is blamed on that burn: better than blaming the wrong GPU).
pub fn nvml_index_of_ordinals(cuda: &[Option<(u32, u32, u32)>], nvml: &[(u32, String)]) -> Vec<Option<u32>> {
    let parse = |s: &str| {
        let p: Vec<u32> = s
            .split([':', '.'])
            .map(|x| u32::from_str_radix(x, 16))
            .collect::<Result<_, _>>()
            .ok()?;
        (p.len() == 4).then(|| (p[0], p[1], p[2]))
    };
    cuda.iter()
        .map(|c| {
            let c = (*c)?;
            nvml.iter().find(|(_, b)| parse(b) == Some(c)).map(|(i, _)| *i)
        })
        .collect()
}

fn burn(r: &mut Run<'_>, n: u32, dur: Duration) {
    let stop = r.stop;
    let latest = r.ctx.latest.clone();
    let hip = r.ctx.gpu_api != GpuApi::Cuda;
    // The vendor library's devices, by PCI address (the name says CUDA's,
    // HIP's are matched the same way).
    let cuda: Vec<_> = (0..n)
        .map(|g| {
            if hip {
                amd::pci_address(g).ok()
            } else {
                gpu::pci_address(g).ok()
            }
        })
        .collect();
    let nvml_of = nvml_index_of_ordinals(&cuda, &r.ctx.gpu_pci_bus_ids);
    let ordinal_of = |index: u32| nvml_of.iter().position(|&i| i == Some(index));
    // Uncorrectable ECC counts before the burn, by NVML index.
    let ecc_before: Vec<(u32, u64)> = latest()
        .map(|s| s.gpus.iter().map(|g| (g.index, g.ecc_uncorrected_volatile)).collect())
        .unwrap_or_default();
    let trouble: Vec<std::sync::Mutex<Vec<String>>> = (0..n).map(|_| std::sync::Mutex::new(Vec::new())).collect();
    let done = AtomicBool::new(false);
    let results: Vec<Result<Measurement, String>> = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            while !done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                if let Some(smp) = latest() {
                    for g in &smp.gpus {
                        let Some(t) = ordinal_of(g.index).and_then(|o| trouble.get(o)) else {
                            continue;
                        };
                        let mut seen = t.lock().unwrap_or_else(|e| e.into_inner());
                        let mut note = |what: String| {
                            if !seen.contains(&what) {
                                seen.push(what);
                            }
                        };
                        for name in throttle::names(g.throttle_reasons & throttle::TROUBLE) {
                            note(name);
                        }
                        for x in &g.xids {
                            note(format!("XID {}", x.xid));
                        }
                        // AMD SMI's events (resets, throttling, VM faults).
                        for e in &g.events {
                            note(format!("AMD event {}", e.kind));
                        }
                        let before = ecc_before.iter().find(|(i, _)| *i == g.index).map(|(_, e)| *e);
                        if g.ecc_uncorrected_volatile > before.unwrap_or(0) {
                            note("uncorrectable ECC".into());
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let burners: Vec<_> = (0..n)
            .map(|g| {
                s.spawn(move || match hip {
                    true => amd::gemm_burn(g, dur, stop).map_err(|e| e.to_string()),
                    false => gpu::gemm_burn(g, dur, stop).map_err(|e| e.to_string()),
                })
            })
            .collect();
        let out = burners
            .into_iter()
            .map(|h| h.join().unwrap_or(Err("burn thread panicked".into())))
            .collect();
        done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        out
    });
    for (g, m) in results.into_iter().enumerate() {
        let seen = trouble[g].lock().map(|v| v.clone()).unwrap_or_default();
        // Reported under NVML's index where the PCI address matched.
        let m = m.map(|mut m| {
            m.gpu = nvml_of.get(g).copied().flatten().or(m.gpu);
            m
        });
        match m {
            Ok(m) if !seen.is_empty() => {
                let exp = r.expectation(&m.name, Some(g as u32));
                let why = format!("during the burn: {}", seen.join(", "));
                r.send_result(&m.name, m.gpu, None, m.value, m.unit, Verdict::Fail, why, exp);
            }
            other => r.measured(other, "gemm_tflops", Some(g as u32)),
        }
    }
}

/// perftest's RDMA write bandwidth to the peer, where perftest is installed
/// (the peer's sink runs the server side for as long as it is open).
fn ib_write_bw(r: &mut Run<'_>, target: Option<&str>, dur: Duration) {
    let Some(host) = target
        .and_then(|t| t.rsplit_once(':'))
        .map(|(h, _)| h.trim_matches(['[', ']']))
    else {
        r.skipped("ib_write_bw", None, "no peer: an RDMA test needs two nodes".into());
        return;
    };
    let secs = dur.as_secs().max(1).to_string();
    let out = std::process::Command::new("ib_write_bw")
        .args(["--report_gbits", "-D", &secs, host])
        .output();
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            r.skipped("ib_write_bw", None, "perftest (ib_write_bw) is not installed".into())
        }
        Err(e) => r.skipped("ib_write_bw", None, format!("cannot run ib_write_bw: {e}")),
        Ok(o) => match net::parse_ib_write_bw(&String::from_utf8_lossy(&o.stdout)) {
            Some(v) if o.status.success() => r.result("ib_write_bw", None, None, v, "Gb/s"),
            _ => {
                let line = crate::first_line(&o.stderr, "no output");
                r.skipped("ib_write_bw", None, format!("ib_write_bw failed: {line}"));
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_ins_blame_the_gpu_at_the_same_pci_address_not_the_same_number() {
        // CUDA_VISIBLE_DEVICES=3,1 and an unknown device: CUDA's 0 is NVML's 3.
        let nvml: Vec<(u32, String)> = [(1, "00000000:2A:00.0"), (3, "00000000:5D:00.0")]
            .into_iter()
            .map(|(i, b)| (i, b.to_string()))
            .collect();
        let cuda = [Some((0, 0x5d, 0)), Some((0, 0x2a, 0)), Some((0, 0x99, 0)), None];
        assert_eq!(nvml_index_of_ordinals(&cuda, &nvml), vec![Some(3), Some(1), None, None]);
    }

    #[test]
    fn the_gpu_library_follows_the_backend_and_partitions_are_seen() {
        use crate::proto::GpuInfo;
        let node = |backend: &str, modes: &[(&str, &str)]| NodeInfo {
            backend: backend.into(),
            gpus: modes
                .iter()
                .map(|(c, m)| GpuInfo {
                    compute_partition: c.to_string(),
                    memory_partition: m.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        for backend in ["nvml", "none", "sim:training", ""] {
            assert_eq!(GpuApi::of(&node(backend, &[])), GpuApi::Cuda, "{backend}");
        }
        let whole = GpuApi::Hip { partitioned: false };
        assert_eq!(GpuApi::of(&node("amdsmi", &[("SPX", "NPS1"), ("", "")])), whole);
        let split = GpuApi::Hip { partitioned: true };
        assert_eq!(GpuApi::of(&node("amdsmi", &[("CPX", "NPS4")])), split);
        assert_eq!(GpuApi::of(&node("amdsmi", &[("SPX", "NPS1"), ("SPX", "NPS4")])), split);
    }

    #[test]
    fn a_partitions_figure_is_reported_not_judged_against_a_whole_gpus_floor() {
        let model = "AMD Instinct MI300X".to_string();
        let ctx = |gpu_api| BenchContext {
            expectations: Expectations::load(None).expect("shipped"),
            gpu_models: vec![model.clone()],
            gpu_pci_bus_ids: vec![],
            latest: Arc::new(|| None),
            simulated: None,
            gpu_api,
        };
        let judged = |gpu_api, name: &str, value| {
            let (c, stop) = (ctx(gpu_api), AtomicBool::new(false));
            let mut out = Vec::new();
            let mut emit = |e: BenchEvent| {
                out.push(e);
                true
            };
            let mut r = Run {
                ctx: &c,
                stop: &stop,
                emit: &mut emit,
                step: 0,
                steps: 1,
            };
            r.result(name, Some(0), None, value, "GB/s");
            match out.pop().and_then(|e| e.kind) {
                Some(Kind::Result(r)) => r,
                other => panic!("{other:?}"),
            }
        };
        // A whole MI300X: 300 GB/s of HBM copy is far below its floor.
        let r = judged(GpuApi::Hip { partitioned: false }, "hbm_d2d", 300.0);
        assert_eq!((r.verdict(), r.expected_min), (Verdict::Fail, 1250.0), "{r:?}");
        // An eighth of one (CPX): reported, not judged.
        let r = judged(GpuApi::Hip { partitioned: true }, "hbm_d2d", 300.0);
        assert_eq!((r.verdict(), r.expected_min), (Verdict::Pass, 0.0), "{r:?}");
        assert_eq!(r.reason, PARTITIONED);
        // The host is no partition.
        let r = judged(GpuApi::Hip { partitioned: true }, "host_memcpy", 1.0);
        assert_eq!(r.verdict(), Verdict::Fail, "{r:?}");
    }

    #[test]
    fn without_cuda_every_gpu_check_says_why_and_host_runs() {
        let ctx = BenchContext {
            expectations: Expectations::load(None).expect("shipped"),
            gpu_models: vec![],
            gpu_pci_bus_ids: vec![],
            latest: Arc::new(|| None),
            simulated: None,
            gpu_api: GpuApi::Cuda,
        };
        let mut events = Vec::new();
        run(Suite::Quick, None, &ctx, &AtomicBool::new(false), &mut |e| {
            events.push(e);
            true
        });
        let results: Vec<&BenchResult> = events
            .iter()
            .filter_map(|e| match &e.kind {
                Some(Kind::Result(r)) => Some(r),
                _ => None,
            })
            .collect();
        let host = results.iter().find(|r| r.name == "host_memcpy").expect("host result");
        assert!(host.value > 0.0 && host.unit == "GB/s" && host.expected_min > 0.0);
        let hbm = results.iter().find(|r| r.name == "hbm_d2d").expect("hbm result");
        assert_eq!(hbm.verdict(), Verdict::Skipped);
        assert!(hbm.reason.contains("no CUDA driver"), "{}", hbm.reason);
        assert!(
            results
                .iter()
                .any(|r| r.name == "tcp" && r.verdict() == Verdict::Skipped)
        );
        assert!(matches!(events.last().and_then(|e| e.kind.as_ref()), Some(Kind::Done(d)) if !d.cancelled));
    }
}
