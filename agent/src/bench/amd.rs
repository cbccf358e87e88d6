//! The GPU checks on AMD GPUs, through HIP and hipBLAS loaded at run time
//! (`hip`): the same checks as on NVIDIA (`gpu`), timed the same way (a
//! pair of events around each call on one stream, the median after
//! warm-up), under the same result names where they mean the same, so the
//! console shows both vendors alike: `hbm_d2d`, `pcie_h2d`, `pcie_d2h`,
//! `gemm_tflops`, and `nvlink_p2p` for the peer copy over XGMI (the wire's
//! NVLink fields carry XGMI on AMD too). RCCL's all-reduce is not run.
//!
//! Never run on a real AMD GPU: checked against a fake HIP
//! (tests/fake-hip) up to the library calls; scripts/amd-gpu-check.sh is the
//! check for a real MI300X node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::gpu::{GpuBenchConfig, Measurement, median};
pub use super::hip::AmdBenchError;
use super::hip::{Blas, DEVICE_TO_DEVICE, DEVICE_TO_HOST, HOST_TO_DEVICE, Hip, HipStream};
use super::{Run, Sizes};
use AmdBenchError::Hip as HipErr;

/// In the reason of the all-reduce's result on AMD.
pub const NO_RCCL: &str = "not run on AMD GPUs: fleetop does not call RCCL yet";

/// Number of HIP devices, or why there is none.
pub fn device_count() -> Result<u32, AmdBenchError> {
    Hip::open()?.device_count()
}

/// The PCI address (domain, bus, device) of HIP device `ordinal`:
/// HIP_VISIBLE_DEVICES may renumber them, the address stays.
pub fn pci_address(ordinal: u32) -> Result<(u32, u32, u32), AmdBenchError> {
    let id = Hip::open()?.pci_bus_id(ordinal)?;
    parse_bus_id(&id).ok_or_else(|| HipErr(format!("hipDeviceGetPCIBusId: cannot read '{id}'")))
}

/// "0000:05:00.0" (any width of domain) to (domain, bus, device).
pub fn parse_bus_id(s: &str) -> Option<(u32, u32, u32)> {
    let p: Vec<u32> = s
        .trim()
        .split([':', '.'])
        .map(|x| u32::from_str_radix(x, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    (p.len() == 4).then(|| (p[0], p[1], p[2]))
}

/// Device-to-device copy within one GPU (HBM), bytes counted once, as on
/// NVIDIA (`gpu::hbm_copy`).
pub fn hbm_copy(gpu: u32, cfg: &GpuBenchConfig) -> Result<Measurement, AmdBenchError> {
    let hip = Hip::open()?;
    hip.set_device(gpu)?;
    let (a, b, s) = (hip.malloc(cfg.bytes)?, hip.malloc(cfg.bytes)?, hip.stream()?);
    let secs = time_iters(hip, &s, cfg, || {
        // SAFETY: both hold cfg.bytes and outlive the loop, which waits for each copy.
        unsafe { hip.memcpy_async(b.p, a.p, cfg.bytes, DEVICE_TO_DEVICE, &s) }
    })?;
    bandwidth("hbm_d2d", Some(gpu), None, cfg, &secs)
}

/// Pinned host -> device copy (PCIe); pinned so the copy engine reads the
/// buffer itself, as on NVIDIA.
pub fn pcie_h2d(gpu: u32, cfg: &GpuBenchConfig) -> Result<Measurement, AmdBenchError> {
    pcie(gpu, cfg, true)
}

/// Device -> pinned host copy (PCIe).
pub fn pcie_d2h(gpu: u32, cfg: &GpuBenchConfig) -> Result<Measurement, AmdBenchError> {
    pcie(gpu, cfg, false)
}

fn pcie(gpu: u32, cfg: &GpuBenchConfig, h2d: bool) -> Result<Measurement, AmdBenchError> {
    let hip = Hip::open()?;
    hip.set_device(gpu)?;
    let (dev, s) = (hip.malloc(cfg.bytes)?, hip.stream()?);
    let host = hip.host_malloc(cfg.bytes, 0x5a)?;
    let secs = time_iters(hip, &s, cfg, || {
        // SAFETY: both hold cfg.bytes and outlive the loop, which waits for each copy.
        unsafe {
            if h2d {
                hip.memcpy_async(dev.p, host.p, cfg.bytes, HOST_TO_DEVICE, &s)
            } else {
                hip.memcpy_async(host.p, dev.p, cfg.bytes, DEVICE_TO_HOST, &s)
            }
        }
    })?;
    bandwidth(if h2d { "pcie_h2d" } else { "pcie_d2h" }, Some(gpu), None, cfg, &secs)
}

/// Peer copy src -> dst (hipMemcpyPeerAsync on the source's stream), after
/// enabling peer access both ways where the GPUs allow it; where they do
/// not, HIP stages the copy through host memory, and the figure shows it.
/// Named `nvlink_p2p` as NVIDIA's: the GPU-to-GPU link, XGMI here.
pub fn p2p_copy(src: u32, dst: u32, cfg: &GpuBenchConfig) -> Result<Measurement, AmdBenchError> {
    let hip = Hip::open()?;
    if src == dst {
        return Err(HipErr(format!("p2p_copy needs two devices, got {src} twice")));
    }
    for (from, to) in [(src, dst), (dst, src)] {
        if hip.can_access_peer(from, to)? {
            hip.set_device(from)?;
            hip.enable_peer_access(to)?;
        }
    }
    hip.set_device(dst)?;
    let b = hip.malloc(cfg.bytes)?;
    hip.set_device(src)?;
    let (a, s) = (hip.malloc(cfg.bytes)?, hip.stream()?);
    let secs = time_iters(hip, &s, cfg, || {
        // SAFETY: both hold cfg.bytes and outlive the loop, which waits for each copy.
        unsafe { hip.memcpy_peer_async(&b, dst, &a, src, &s) }
    })?;
    bandwidth("nvlink_p2p", Some(src), Some(dst), cfg, &secs)
}

/// Sustained BF16 GEMM (8192^3, FP32 accumulation, through hipBLAS) on one
/// GPU for `duration`, as on NVIDIA (`gpu::gemm_burn`): random operands,
/// one untimed batch, then the median TFLOP/s of batches of 16.
pub fn gemm_burn(gpu: u32, duration: Duration, stop: &AtomicBool) -> Result<Measurement, AmdBenchError> {
    const N: usize = 8192;
    const BATCH: u32 = 16;
    const CHUNK: usize = 1 << 20; // divides N * N
    let hip = Hip::open()?;
    let blas = Blas::open()?;
    let deadline = Instant::now() + duration;
    hip.set_device(gpu)?;
    let s = hip.stream()?;
    let bytes = N * N * 2;
    let (a, b, c) = (hip.malloc(bytes)?, hip.malloc(bytes)?, hip.malloc(bytes)?);
    // A and B from one random chunk (B shifted by one element), as on NVIDIA.
    let chunk = super::gpu::random_bf16(CHUNK + 1);
    let host = hip.host_malloc((CHUNK + 1) * 2, 0)?;
    // SAFETY: `host` holds CHUNK + 1 u16, just allocated; chunk has as many.
    unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), host.p as *mut u16, CHUNK + 1) };
    for i in (0..N * N).step_by(CHUNK) {
        // SAFETY: offsets within a and b (i + CHUNK <= N * N, in u16), and
        // CHUNK u16 from `host` (from element 0 and 1); all outlive the copies,
        // which are waited for below.
        unsafe {
            let (ap, bp) = (
                (a.p as *mut u16).wrapping_add(i).cast(),
                (b.p as *mut u16).wrapping_add(i).cast(),
            );
            hip.memcpy_async(ap, host.p, CHUNK * 2, HOST_TO_DEVICE, &s)?;
            hip.memcpy_async(bp, (host.p as *const u16).add(1).cast(), CHUNK * 2, HOST_TO_DEVICE, &s)?;
        }
    }
    s.synchronize()?;
    let handle = blas.handle(&s)?;
    let batch = || -> Result<(), AmdBenchError> {
        for _ in 0..BATCH {
            blas.gemm_bf16(&handle, N, &a, &b, &c)?;
        }
        Ok(())
    };
    batch()?;
    s.synchronize()?;
    let (start, end) = (hip.event()?, hip.event()?);
    let flops = 2.0 * (N * N * N) as f64 * f64::from(BATCH);
    let mut rates = Vec::new();
    while rates.is_empty() || (!stop.load(Ordering::Relaxed) && Instant::now() < deadline) {
        start.record(&s)?;
        batch()?;
        end.record(&s)?;
        let secs = f64::from(start.elapsed_ms(&end)?) / 1e3;
        rates.push(flops / secs.max(1e-9) / 1e12);
    }
    s.synchronize()?;
    Ok(Measurement {
        name: "gemm_tflops".into(),
        gpu: Some(gpu),
        peer: None,
        value: median(&rates).unwrap_or(0.0),
        unit: "TFLOP/s",
        samples: rates.len(),
    })
}

/// Times each call of `op` with a pair of events on `s`, after the warm-up.
fn time_iters(
    hip: &'static Hip,
    s: &HipStream,
    cfg: &GpuBenchConfig,
    mut op: impl FnMut() -> Result<(), AmdBenchError>,
) -> Result<Vec<f64>, AmdBenchError> {
    let (start, end) = (hip.event()?, hip.event()?);
    for _ in 0..cfg.warmup {
        op()?;
    }
    s.synchronize()?;
    let mut secs = Vec::with_capacity(cfg.iterations as usize);
    for _ in 0..cfg.iterations {
        start.record(s)?;
        op()?;
        end.record(s)?;
        secs.push(f64::from(start.elapsed_ms(&end)?) / 1e3);
    }
    Ok(secs)
}

/// cfg.bytes over the median time, in GB/s.
fn bandwidth(
    name: &str,
    gpu: Option<u32>,
    peer: Option<u32>,
    cfg: &GpuBenchConfig,
    secs: &[f64],
) -> Result<Measurement, AmdBenchError> {
    let t = median(secs)
        .filter(|t| *t > 0.0)
        .ok_or_else(|| HipErr(format!("{name}: nothing timed (iterations = 0?)")))?;
    Ok(Measurement {
        name: name.into(),
        gpu,
        peer,
        value: cfg.bytes as f64 / t / 1e9,
        unit: "GB/s",
        samples: secs.len(),
    })
}

/// The GPU checks of a suite on an AMD node: per GPU the copies, then the
/// peer copies, then the burn (watched as on NVIDIA).
pub(super) fn gpu_checks(r: &mut Run<'_>, n: u32, pairs: &[(u32, u32)], z: &Sizes) {
    for g in 0..n {
        if r.stopped() {
            break;
        }
        r.progress(&format!("GPU {g} HBM copy"));
        r.measured(hbm_copy(g, &z.hbm), "hbm_d2d", Some(g));
        r.progress(&format!("GPU {g} host to device"));
        r.measured(pcie_h2d(g, &z.pcie), "pcie_h2d", Some(g));
        r.progress(&format!("GPU {g} device to host"));
        r.measured(pcie_d2h(g, &z.pcie), "pcie_d2h", Some(g));
    }
    for &(a, b) in pairs {
        if r.stopped() {
            break;
        }
        r.progress(&format!("GPU {a} to GPU {b} (XGMI)"));
        r.measured(p2p_copy(a, b, &z.hbm), "nvlink_p2p", Some(a));
    }
    if n > 1 && !r.stopped() {
        r.progress("RCCL all-reduce");
        r.skipped("nccl_allreduce_busbw", None, NO_RCCL.into());
    }
    if n > 0 && !r.stopped() {
        r.progress(&format!("GEMM burn, {} s", z.burn.as_secs()));
        super::burn(r, n, z.burn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hips_pci_bus_ids_are_read_as_nvmls_are() {
        assert_eq!(parse_bus_id("0000:c6:00.0"), Some((0, 0xc6, 0)));
        assert_eq!(parse_bus_id("00000001:05:1f.3\n"), Some((1, 5, 0x1f)));
        assert_eq!(parse_bus_id("c6:00.0"), None);
        assert_eq!(parse_bus_id("zz:00:00.0"), None);
    }
}
