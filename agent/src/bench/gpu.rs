//! GPU microbenchmarks: HBM, PCIe and peer-to-peer copy bandwidth, NCCL all-reduce and a sustained cuBLAS GEMM load.
//!
//! The agent must build and run where there is no CUDA, so cudarc is built with `dynamic-loading`: libcuda, libcublas
//! and libnccl are opened only when a benchmark runs. cudarc panics when a library or a symbol is missing, so every
//! entry point first probes its libraries with `libloading` (the usual "no driver" case becomes a plain error, with no
//! panic message on stderr), then runs under `catch_unwind`, so that an unexpected panic in the bindings (a symbol an
//! old driver lacks, say) becomes [`GpuBenchError::Cuda`]. That second guard needs `panic = "unwind"` (the default).
//! NCCL is called through a small libloading binding of our own (see `Nccl` below for why).

use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cudarc::cublas::{CudaBlas, result as blas, sys as blas_sys};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr, DevicePtrMut, DriverError};
use cudarc::driver::{result as drv, sys as drv_sys};

/// One figure a benchmark produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// "hbm_d2d", "pcie_h2d", "pcie_d2h", "nvlink_p2p", "nccl_allreduce_algbw", "nccl_allreduce_busbw", "gemm_tflops".
    pub name: String,
    /// The device (source device for p2p).
    pub gpu: Option<u32>,
    /// Destination device for p2p.
    pub peer: Option<u32>,
    /// Median over the timed iterations.
    pub value: f64,
    /// "GB/s" (1e9 bytes/s) or "TFLOP/s".
    pub unit: &'static str,
    /// How many timed iterations.
    pub samples: usize,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GpuBenchError {
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    #[error("{lib} not available: {why}")]
    NoLibrary { lib: &'static str, why: String },
    #[error("CUDA error: {0}")]
    Cuda(String),
}

#[derive(Debug, Clone)]
pub struct GpuBenchConfig {
    /// Bytes per copy or all-reduce buffer.
    pub bytes: usize,
    /// Untimed iterations first: they absorb lazy initialisation, clock ramp-up and NCCL connection setup.
    pub warmup: u32,
    /// Timed iterations; the reported value is their median.
    pub iterations: u32,
}

use GpuBenchError::{Cuda, NoDriver, NoLibrary};

/// Number of CUDA devices, or why there is none (never panics).
pub fn device_count() -> Result<u32, GpuBenchError> {
    guarded(&[], || Ok(drv::device::get_count().map_err(cu)?.max(0) as u32))
}

/// The PCI address (domain, bus, device) of CUDA device `ordinal`: CUDA's
/// order (and CUDA_VISIBLE_DEVICES) need not be NVML's, the address is the same.
pub fn pci_address(ordinal: u32) -> Result<(u32, u32, u32), GpuBenchError> {
    use drv_sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
    };
    guarded(&[], || {
        let ctx = CudaContext::new(ordinal as usize).map_err(cu)?;
        let a = |x| ctx.attribute(x).map(|v| v.max(0) as u32).map_err(cu);
        Ok((
            a(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            a(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            a(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
        ))
    })
}

/// Device-to-device copy within one GPU (HBM). Each byte is read once and written once but counted once (the
/// convention of timing `b.copy_(a)` in PyTorch), so the memory carries twice the reported figure.
pub fn hbm_copy(gpu: u32, cfg: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    guarded(&[], || {
        let (_ctx, s) = open(gpu)?;
        let a = s.alloc_zeros::<u8>(cfg.bytes).map_err(cu)?;
        let mut b = s.alloc_zeros::<u8>(cfg.bytes).map_err(cu)?;
        let secs = time_iters(&s, cfg, || s.memcpy_dtod(&a, &mut b).map_err(cu))?;
        bandwidth("hbm_d2d", Some(gpu), None, cfg, &secs)
    })
}

/// Pinned host -> device copy (PCIe). Pinned (page-locked) memory lets the copy engine DMA straight from the buffer;
/// pageable memory is staged through a driver bounce buffer, which would measure a host memcpy as much as the link.
pub fn pcie_h2d(gpu: u32, cfg: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    pcie(gpu, cfg, true)
}

/// Device -> pinned host copy (PCIe); see [`pcie_h2d`].
pub fn pcie_d2h(gpu: u32, cfg: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    pcie(gpu, cfg, false)
}

fn pcie(gpu: u32, cfg: &GpuBenchConfig, h2d: bool) -> Result<Measurement, GpuBenchError> {
    guarded(&[], || {
        let (ctx, s) = open(gpu)?;
        let mut dev = s.alloc_zeros::<u8>(cfg.bytes).map_err(cu)?;
        // SAFETY: filled right below, before any copy reads it. Flags 0 = plain pinned memory (cudarc's default,
        // write-combined, is meant for host-write-only buffers).
        let mut host = unsafe { ctx.alloc_pinned_with_flags::<u8>(cfg.bytes, 0) }.map_err(cu)?;
        host.as_mut_slice().map_err(cu)?.fill(0x5a);
        let secs = if h2d {
            time_iters(&s, cfg, || s.memcpy_htod(&host, &mut dev).map_err(cu))?
        } else {
            time_iters(&s, cfg, || s.memcpy_dtoh(&dev, &mut host).map_err(cu))?
        };
        bandwidth(if h2d { "pcie_h2d" } else { "pcie_d2h" }, Some(gpu), None, cfg, &secs)
    })
}

/// Peer-to-peer copy src -> dst (cuMemcpyPeerAsync on the source's stream). Peer access is enabled both ways where
/// the topology allows it; where it does not, the driver stages the copy through host memory, so a figure near the
/// PCIe one means there is no usable NVLink/P2P path between the two.
pub fn p2p_copy(src: u32, dst: u32, cfg: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    guarded(&[], || {
        if src == dst {
            return Err(Cuda(format!("p2p_copy needs two devices, got {src} twice")));
        }
        let ((sctx, s), (dctx, _)) = (open(src)?, open(dst)?);
        enable_peer(&sctx, &dctx)?;
        enable_peer(&dctx, &sctx)?;
        let (a, b) = (DevBuf::new(&sctx, cfg.bytes)?, DevBuf::new(&dctx, cfg.bytes)?);
        let (sc, dc, n) = (sctx.cu_ctx(), dctx.cu_ctx(), cfg.bytes);
        // SAFETY: both buffers hold n bytes and outlive the loop, which synchronizes on every iteration.
        let secs = time_iters(&s, cfg, || {
            unsafe { drv::memcpy_peer_async(dc, b.0, sc, a.0, n, s.cu_stream()) }.map_err(cu)
        })?;
        bandwidth("nvlink_p2p", Some(src), Some(dst), cfg, &secs)
    })
}

/// NCCL all-reduce (f32 sum, out of place) of cfg.bytes across `gpus`: one communicator per device from
/// `ncclCommInitAll`, all driven from this thread inside an NCCL group (one thread calling several communicators
/// outside a group deadlocks). An iteration takes as long as its slowest rank, timed with events on each rank's
/// stream. Returns [algbw, busbw] as nccl-tests defines them, with `gpu: None` (the figure belongs to the group).
pub fn nccl_allreduce(gpus: &[u32], cfg: &GpuBenchConfig) -> Result<[Measurement; 2], GpuBenchError> {
    guarded(&[], || {
        let count = cfg.bytes / size_of::<f32>();
        if gpus.is_empty() || count == 0 {
            return Err(Cuda("nccl_allreduce needs at least one GPU and 4 bytes".into()));
        }
        let nccl = Nccl::load()?;
        let (mut ranks, mut bufs) = (Vec::new(), Vec::new());
        for &g in gpus {
            let (ctx, s) = open(g)?;
            let (send, recv) = (
                s.alloc_zeros::<f32>(count).map_err(cu)?,
                s.alloc_zeros::<f32>(count).map_err(cu)?,
            );
            s.synchronize().map_err(cu)?;
            let ((sp, _), (rp, _)) = (send.device_ptr(&s), recv.device_ptr(&s)); // no-op guards: tracking is off
            ranks.push((sp, rp, timing_event(&ctx)?, timing_event(&ctx)?, s));
            bufs.push((send, recv)); // keeps the memory alive until after the communicators are destroyed
        }
        let devs: Vec<i32> = gpus.iter().map(|&g| g as i32).collect();
        let comms = nccl.init_all(&devs)?;
        let step = || -> Result<(), GpuBenchError> {
            // SAFETY (group_start, group_end): no arguments; every call in between is checked.
            nccl.check(unsafe { (nccl.group_start)() })?;
            let mut first_err = Ok(());
            for (comm, (sp, rp, _, _, s)) in comms.0.iter().zip(&ranks) {
                // SAFETY: sp and rp hold `count` f32 on the communicator's device and outlive the call's completion.
                let r = unsafe {
                    (nccl.all_reduce)(
                        *sp as _,
                        *rp as _,
                        count,
                        NCCL_FLOAT32,
                        NCCL_SUM,
                        *comm,
                        s.cu_stream() as _,
                    )
                };
                first_err = first_err.and(nccl.check(r));
            }
            nccl.check(unsafe { (nccl.group_end)() })?; // even after an error: else this thread stays in the group
            first_err
        };
        for _ in 0..cfg.warmup {
            step()?;
        }
        let mut secs = Vec::with_capacity(cfg.iterations as usize);
        for _ in 0..cfg.iterations {
            for (_, _, start, _, s) in &ranks {
                start.record(s).map_err(cu)?;
            }
            step()?;
            let mut slowest = 0.0_f64;
            for (_, _, start, end, s) in &ranks {
                end.record(s).map_err(cu)?;
                slowest = slowest.max(f64::from(start.elapsed_ms(end).map_err(cu)?) / 1e3);
            }
            secs.push(slowest);
        }
        for (.., s) in &ranks {
            s.synchronize().map_err(cu)?;
        }
        drop(comms);
        let alg = bandwidth("nccl_allreduce_algbw", None, None, cfg, &secs)?;
        let bus = Measurement {
            name: "nccl_allreduce_busbw".into(),
            value: busbw(alg.value, gpus.len() as u32),
            ..alg.clone()
        };
        Ok([alg, bus])
    })
}

/// Sustained bf16 GEMM load (8192^3, f32 accumulate, tensor cores) on one GPU for `duration`, stopping early when
/// `stop` becomes true (checked between batches of 16 GEMMs, ~30 ms on an H100). The operands are random, not zero:
/// tensor-core power, hence clocks and heat, depends on the bits fed in. One untimed batch first (cuBLAS heuristics,
/// clock ramp-up); value = median TFLOP/s over the timed batches, so a throttling GPU shows up as a low figure.
pub fn gemm_burn(gpu: u32, duration: Duration, stop: &AtomicBool) -> Result<Measurement, GpuBenchError> {
    const N: usize = 8192;
    const BATCH: u32 = 16;
    const CHUNK: usize = 1 << 20; // divides N * N
    guarded(&[Lib::Cublas], || {
        let deadline = Instant::now() + duration;
        let (ctx, s) = open(gpu)?;
        // A and B come from one small random chunk (B shifted by one element) rather than an N*N host buffer:
        // a burn runs on every GPU at once, and 128 MiB of host memory each adds up.
        let chunk = random_bf16(CHUNK + 1);
        let mut a = s.alloc_zeros::<u16>(N * N).map_err(cu)?;
        let mut b = s.alloc_zeros::<u16>(N * N).map_err(cu)?;
        for i in (0..N * N).step_by(CHUNK) {
            s.memcpy_htod(&chunk[..CHUNK], &mut a.slice_mut(i..i + CHUNK))
                .map_err(cu)?;
            s.memcpy_htod(&chunk[1..], &mut b.slice_mut(i..i + CHUNK)).map_err(cu)?;
        }
        let mut c = s.alloc_zeros::<u16>(N * N).map_err(cu)?;
        let handle = CudaBlas::new(s.clone()).map_err(|e| Cuda(format!("cuBLAS: {e}")))?;
        let ((ap, _ga), (bp, _gb), (cp, _gc)) = (a.device_ptr(&s), b.device_ptr(&s), c.device_ptr_mut(&s));
        let (alpha, beta, n) = (1.0_f32, 0.0_f32, N as i32);
        let (op, bf16) = (
            blas_sys::cublasOperation_t::CUBLAS_OP_N,
            blas_sys::cudaDataType_t::CUDA_R_16BF,
        );
        let batch = || -> Result<(), GpuBenchError> {
            for _ in 0..BATCH {
                // SAFETY: a, b and c hold N*N bf16 each (column-major, leading dimension N) and outlive every GEMM:
                // each batch is waited for before the next and before they are dropped.
                #[rustfmt::skip]
                let r = unsafe {
                    blas::gemm_ex(*handle.handle(), op, op, n, n, n, (&raw const alpha).cast(),
                        ap as *const _, bf16, n, bp as *const _, bf16, n,
                        (&raw const beta).cast(), cp as *mut _, bf16, n,
                        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT)
                };
                r.map_err(|e| Cuda(format!("cublasGemmEx: {e}")))?;
            }
            Ok(())
        };
        batch()?;
        s.synchronize().map_err(cu)?;
        let (start, end) = (timing_event(&ctx)?, timing_event(&ctx)?);
        let flops = 2.0 * (N * N * N) as f64 * f64::from(BATCH);
        let mut rates = Vec::new();
        while rates.is_empty() || (!stop.load(Ordering::Relaxed) && Instant::now() < deadline) {
            start.record(&s).map_err(cu)?;
            batch()?;
            end.record(&s).map_err(cu)?;
            let secs = f64::from(start.elapsed_ms(&end).map_err(cu)?) / 1e3;
            rates.push(flops / secs.max(1e-9) / 1e12);
        }
        let value = median(&rates).unwrap_or(0.0);
        Ok(Measurement {
            name: "gemm_tflops".into(),
            gpu: Some(gpu),
            peer: None,
            value,
            unit: "TFLOP/s",
            samples: rates.len(),
        })
    })
}

/// Median of the finite values in `xs` (None if there are none). The median rather than the mean, so that one slow
/// iteration (a context switch, a clock dip, someone else's kernel) does not move the figure.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[m]),
        _ => Some((v[m - 1] + v[m]) / 2.0),
    }
}

/// Bus bandwidth from algorithm bandwidth for n ranks (nccl-tests' all-reduce convention: each rank sends and
/// receives 2(n-1)/n of the buffer, so busbw is comparable with the per-GPU link speed).
pub fn busbw(algbw: f64, n: u32) -> f64 {
    if n == 0 {
        0.0
    } else {
        algbw * 2.0 * f64::from(n - 1) / f64::from(n)
    }
}

#[derive(Clone, Copy)]
enum Lib {
    Driver,
    Cublas,
}

/// Probes libcuda, then runs cuInit, the probes of the `extra` libraries and `f` under [`no_panic`]. cuInit comes
/// first so that a node without a usable GPU reports NoDriver whichever benchmark is asked for.
fn guarded<T>(extra: &[Lib], f: impl FnOnce() -> Result<T, GpuBenchError>) -> Result<T, GpuBenchError> {
    probe(Lib::Driver)?;
    no_panic(|| {
        init()?;
        extra.iter().try_for_each(|&l| probe(l))?;
        f()
    })
}

/// Runs `f`, turning a panic (cudarc's loader panics on a missing symbol) into an error.
fn no_panic<T>(f: impl FnOnce() -> Result<T, GpuBenchError>) -> Result<T, GpuBenchError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = (p.downcast_ref::<String>().map(String::as_str))
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        Err(Cuda(format!("CUDA bindings panicked: {msg}")))
    })
}

/// Opens the library under the names cudarc will try (the usual soname first, for the error message), so that a
/// success here means cudarc's loader will not panic. The handle is closed again; cudarc reopens the library.
fn probe(lib: Lib) -> Result<(), GpuBenchError> {
    let (stem, first) = match lib {
        Lib::Driver => ("cuda", "libcuda.so.1"),
        Lib::Cublas => ("cublas", "libcublas.so.12"),
    };
    let mut why = String::new();
    for name in std::iter::once(first.to_string()).chain(cudarc::get_lib_name_candidates(stem)) {
        // SAFETY: loading runs the library's initialisers; these are NVIDIA's own libraries.
        match unsafe { libloading::Library::new(&name) } {
            Ok(_) => return Ok(()),
            Err(e) if why.is_empty() => why = dl_error(&e),
            Err(_) => {}
        }
    }
    Err(match lib {
        Lib::Driver => NoDriver(format!("{why} (is the NVIDIA driver installed?)")),
        Lib::Cublas => NoLibrary { lib: "libcublas", why },
    })
}

/// dlerror()'s text ("libcuda.so.1: cannot open shared object file: ..."), which libloading keeps in `source`.
fn dl_error(e: &libloading::Error) -> String {
    std::error::Error::source(e).map_or(e.to_string(), |s| s.to_string())
}

fn cu(e: DriverError) -> GpuBenchError {
    Cuda(describe(e))
}

/// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected".
fn describe(e: DriverError) -> String {
    match e.error_string() {
        Ok(s) => format!("{:?}: {}", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

/// cuInit fails when libcuda loads but no GPU is usable (none present, a stub libcuda, a driver/kernel-module
/// mismatch): that is "no driver" too, not a benchmark failure.
fn init() -> Result<(), GpuBenchError> {
    drv::init().map_err(|e| NoDriver(format!("cuInit failed: {}", describe(e))))
}

/// The device's primary context (the one the CUDA runtime and NCCL use too) and a stream of our own. cudarc's event
/// tracking is off: each benchmark keeps its work on one stream and synchronizes where it crosses devices, and the
/// per-use events would otherwise add work inside the timed window.
fn open(gpu: u32) -> Result<(Arc<CudaContext>, Arc<CudaStream>), GpuBenchError> {
    let ctx = CudaContext::new(gpu as usize).map_err(cu)?;
    // SAFETY: see above: no buffer is used from two streams without a synchronization in between.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(cu)?;
    Ok((ctx, stream))
}

/// Lets `from` address `to`'s memory directly (NVLink or PCIe P2P); false where the topology does not allow it.
fn enable_peer(from: &Arc<CudaContext>, to: &Arc<CudaContext>) -> Result<bool, GpuBenchError> {
    let mut can = 0;
    // SAFETY: a query on two valid device handles.
    unsafe { drv_sys::cuDeviceCanAccessPeer(&mut can, from.cu_device(), to.cu_device()) }
        .result()
        .map_err(cu)?;
    if can == 0 {
        return Ok(false);
    }
    from.bind_to_thread().map_err(cu)?;
    // SAFETY: `to` is a live primary context; enabling access twice is reported, not harmful.
    match unsafe { drv_sys::cuCtxEnablePeerAccess(to.cu_ctx(), 0) }.result() {
        Ok(()) | Err(DriverError(drv_sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)) => Ok(true),
        Err(e) => Err(cu(e)),
    }
}

/// Plain cuMemAlloc memory, for the peer copy: cuCtxEnablePeerAccess covers it, whereas cudarc's own allocations come
/// from the stream-ordered pool (cuMemAllocAsync), whose peer mappings are governed by cuMemPoolSetAccess instead.
struct DevBuf(drv_sys::CUdeviceptr, Arc<CudaContext>);

impl DevBuf {
    fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self, GpuBenchError> {
        ctx.bind_to_thread().map_err(cu)?;
        // SAFETY: a plain allocation, freed once in Drop. Its contents do not matter for a copy benchmark.
        Ok(Self(unsafe { drv::malloc_sync(bytes) }.map_err(cu)?, ctx.clone()))
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.1.bind_to_thread().is_ok() {
            // SAFETY: allocated by malloc_sync in `new`; every copy using it was waited for.
            let _ = unsafe { drv::free_sync(self.0) };
        }
    }
}

const NCCL_FLOAT32: c_int = 7; // ncclFloat32, stable since NCCL 2.0
const NCCL_SUM: c_int = 0; // ncclSum

type NcclComm = *mut c_void;

/// NCCL's C API, loaded here rather than through cudarc: cudarc 0.19's loader tries libnccl.so, libnccl.so.12, .11, ...
/// but never libnccl.so.2, the only name the runtime package (libnccl2, without -dev) installs. Six symbols suffice.
struct Nccl {
    init_all: unsafe extern "C" fn(*mut NcclComm, c_int, *const c_int) -> c_int,
    all_reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, *mut c_void) -> c_int,
    group_start: unsafe extern "C" fn() -> c_int,
    group_end: unsafe extern "C" fn() -> c_int,
    destroy: unsafe extern "C" fn(NcclComm) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    _lib: libloading::Library, // keeps the function pointers above valid
}

impl Nccl {
    fn load() -> Result<Self, GpuBenchError> {
        let no = |e: libloading::Error| NoLibrary {
            lib: "libnccl",
            why: dl_error(&e),
        };
        // Caller's duty (SAFETY): T is the symbol's true type.
        unsafe fn sym<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Result<T, libloading::Error> {
            Ok(*unsafe { lib.get::<T>(name) }?)
        }
        // SAFETY: loading runs NCCL's initialisers; the symbol types below match nccl.h (2.x).
        unsafe {
            let lib = libloading::Library::new("libnccl.so.2")
                .or_else(|e| libloading::Library::new("libnccl.so").map_err(|_| e))
                .map_err(no)?;
            Ok(Nccl {
                init_all: sym(&lib, b"ncclCommInitAll").map_err(no)?,
                all_reduce: sym(&lib, b"ncclAllReduce").map_err(no)?,
                group_start: sym(&lib, b"ncclGroupStart").map_err(no)?,
                group_end: sym(&lib, b"ncclGroupEnd").map_err(no)?,
                destroy: sym(&lib, b"ncclCommDestroy").map_err(no)?,
                error_string: sym(&lib, b"ncclGetErrorString").map_err(no)?,
                _lib: lib,
            })
        }
    }

    fn check(&self, r: c_int) -> Result<(), GpuBenchError> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static string for any code.
        let msg = unsafe { std::ffi::CStr::from_ptr((self.error_string)(r)) };
        Err(Cuda(format!("NCCL error {r}: {}", msg.to_string_lossy())))
    }

    fn init_all(&self, devs: &[i32]) -> Result<NcclComms<'_>, GpuBenchError> {
        let mut comms = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: `comms` has room for one communicator per device in `devs`.
        self.check(unsafe { (self.init_all)(comms.as_mut_ptr(), devs.len() as c_int, devs.as_ptr()) })?;
        Ok(NcclComms(comms, self))
    }
}

/// Communicators, destroyed on drop (after the caller has synchronized their streams).
struct NcclComms<'a>(Vec<NcclComm>, &'a Nccl);

impl Drop for NcclComms<'_> {
    fn drop(&mut self) {
        for &c in &self.0 {
            // SAFETY: created by ncclCommInitAll and destroyed once.
            unsafe { (self.1.destroy)(c) };
        }
    }
}

fn timing_event(ctx: &Arc<CudaContext>) -> Result<CudaEvent, GpuBenchError> {
    ctx.new_event(Some(drv_sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cu)
}

/// Times each call of `op` with a pair of CUDA events on `stream`, after cfg.warmup untimed calls. Events record when
/// the GPU ran the work, not when the host queued it, so launch latency and host jitter stay out of the figure.
fn time_iters(
    stream: &Arc<CudaStream>,
    cfg: &GpuBenchConfig,
    mut op: impl FnMut() -> Result<(), GpuBenchError>,
) -> Result<Vec<f64>, GpuBenchError> {
    let (start, end) = (timing_event(stream.context())?, timing_event(stream.context())?);
    for _ in 0..cfg.warmup {
        op()?;
    }
    stream.synchronize().map_err(cu)?;
    let mut secs = Vec::with_capacity(cfg.iterations as usize);
    for _ in 0..cfg.iterations {
        start.record(stream).map_err(cu)?;
        op()?;
        end.record(stream).map_err(cu)?;
        secs.push(f64::from(start.elapsed_ms(&end).map_err(cu)?) / 1e3);
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
) -> Result<Measurement, GpuBenchError> {
    let t =
        (median(secs).filter(|t| *t > 0.0)).ok_or_else(|| Cuda(format!("{name}: nothing timed (iterations = 0?)")))?;
    let value = cfg.bytes as f64 / t / 1e9;
    Ok(Measurement {
        name: name.into(),
        gpu,
        peer,
        value,
        unit: "GB/s",
        samples: secs.len(),
    })
}

/// bf16 values uniform in [-1, 1) from a xorshift generator (no rand dependency needed).
pub(super) fn random_bf16(len: usize) -> Vec<u16> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = (x >> 40) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0;
            (f.to_bits() >> 16) as u16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this machine can load the driver; the no-driver tests assert the exact error
    /// there and only "returns, does not panic" on GPU machines.
    fn no_driver() -> bool {
        probe(Lib::Driver).is_err()
    }

    fn assert_no_driver<T: std::fmt::Debug>(r: Result<T, GpuBenchError>) {
        if no_driver() {
            assert!(matches!(r, Err(NoDriver(_))), "expected NoDriver, got {r:?}");
        }
    }

    #[test]
    fn device_count_without_driver_is_a_clear_error() {
        let r = device_count();
        if no_driver() {
            let Err(e) = r else {
                panic!("expected an error, got {r:?}")
            };
            let msg = e.to_string();
            assert!(msg.starts_with("no CUDA driver: ") && msg.contains("libcuda"), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn benchmarks_without_driver_return_errors() {
        let cfg = GpuBenchConfig {
            bytes: 1 << 20,
            warmup: 1,
            iterations: 2,
        };
        assert_no_driver(hbm_copy(0, &cfg));
        assert_no_driver(pcie_h2d(0, &cfg));
        assert_no_driver(pcie_d2h(0, &cfg));
        assert_no_driver(p2p_copy(0, 1, &cfg));
        assert_no_driver(nccl_allreduce(&[0, 1], &cfg));
        let stop = AtomicBool::new(true);
        assert_no_driver(gemm_burn(0, Duration::from_millis(10), &stop));
    }

    #[test]
    fn no_panic_turns_a_panic_into_an_error() {
        let r: Result<(), _> = no_panic(|| panic!("Missing symbol cuFoo"));
        assert_eq!(r, Err(Cuda("CUDA bindings panicked: Missing symbol cuFoo".into())));
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[1.0, 100.0, 2.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(median(&[f64::NAN, 1.0, f64::INFINITY]), Some(1.0));
        assert_eq!(median(&[f64::NAN]), None);
    }

    #[test]
    fn busbw_follows_nccl_tests() {
        assert_eq!(busbw(100.0, 8), 175.0);
        assert_eq!(busbw(100.0, 2), 100.0);
        assert_eq!(busbw(42.0, 1), 0.0);
        assert_eq!(busbw(42.0, 0), 0.0);
    }

    #[test]
    fn random_bf16_is_in_range_and_not_constant() {
        let v = random_bf16(1000);
        let f: Vec<f32> = v.iter().map(|&b| f32::from_bits(u32::from(b) << 16)).collect();
        assert!(f.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(f.iter().any(|x| *x > 0.5) && f.iter().any(|x| *x < -0.5));
    }
}
