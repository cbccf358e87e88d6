//! HIP (`libamdhip64.so`) and hipBLAS (`libhipblas.so`), loaded at run time
//! for the AMD burn-in (`amd`): nothing of ROCm is needed to build the agent,
//! and a node without ROCm gets a clear "not available", never a panic.
//!
//! Bound here with libloading rather than through a crate (docs/burn-in.md
//! says which were looked at): the burn-in needs about twenty-five calls of
//! which none takes a struct whose layout moved between ROCm releases
//! (hipDeviceProp_t did in ROCm 6, so the PCI address is read with
//! hipDeviceGetPCIBusId instead), a missing library or symbol must be an
//! error and not a panic, hipBLAS must be optional, and the library must
//! be found where ROCm's own tools find it, `$ROCM_PATH/lib` first.
//!
//! hipBLAS's GEMM with `hipDataType` and `hipblasComputeType_t` is
//! `hipblasGemmEx_v2` in hipBLAS 2 (ROCm 6) and `hipblasGemmEx` in hipBLAS 3
//! (ROCm 7, where the old types were removed): the first that is exported
//! is used. MI300X needs ROCm 6 or later, so the hipBLAS 1 `hipblasGemmEx`
//! (old types) is never meant.

use std::ffi::{CStr, OsString, c_char, c_int, c_uint, c_void};
use std::sync::Mutex;

use libloading::Library;

pub type Stream = *mut c_void;
pub type Event = *mut c_void;
pub type BlasHandle = *mut c_void;

pub const SUCCESS: c_int = 0;
/// hipErrorPeerAccessAlreadyEnabled: enabling twice is no failure.
pub const PEER_ACCESS_ALREADY_ENABLED: c_int = 704;
/// hipMemcpyKind.
pub const HOST_TO_DEVICE: c_int = 1;
pub const DEVICE_TO_HOST: c_int = 2;
pub const DEVICE_TO_DEVICE: c_int = 3;
/// hipblasOperation_t, hipDataType, hipblasComputeType_t, hipblasGemmAlgo_t.
pub const BLAS_OP_N: c_int = 111;
pub const HIP_R_16BF: c_int = 14;
pub const BLAS_COMPUTE_32F: c_int = 2;
pub const BLAS_GEMM_DEFAULT: c_int = 160;

/// Why an AMD check could not run.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum AmdBenchError {
    /// No HIP runtime, or none that sees a GPU.
    #[error("no HIP runtime: {0}")]
    NoRuntime(String),
    #[error("{lib} not available: {why}")]
    NoLibrary { lib: &'static str, why: String },
    #[error("HIP error: {0}")]
    Hip(String),
}

use AmdBenchError::{Hip as HipErr, NoLibrary, NoRuntime};

/// Where ROCm's tools look for a library, in order: `$ROCM_PATH/lib`, the
/// loader's search path (the unversioned name, then `versions`), ROCm's
/// default install.
pub fn candidates(rocm_path: Option<OsString>, file: &str, versions: &[&str]) -> Vec<OsString> {
    let mut out = Vec::new();
    if let Some(root) = rocm_path.filter(|r| !r.is_empty()) {
        let mut p = std::path::PathBuf::from(root);
        p.push("lib");
        p.push(file);
        out.push(p.into_os_string());
    }
    out.push(file.into());
    out.extend(versions.iter().map(|v| OsString::from(format!("{file}.{v}"))));
    out.push(format!("/opt/rocm/lib/{file}").into());
    out
}

/// The first candidate that loads, or every candidate's reason on one line.
fn load(file: &str, versions: &[&str]) -> Result<(Library, String), String> {
    let mut tried = Vec::new();
    for path in candidates(std::env::var_os("ROCM_PATH"), file, versions) {
        // SAFETY: loading runs the library's initialisers: ROCm's own, from
        // where ROCm's tools load them.
        match unsafe { Library::new(&path) } {
            Ok(lib) => return Ok((lib, path.to_string_lossy().into_owned())),
            Err(e) => tried.push(dl_error(&e)),
        }
    }
    Err(format!(
        "{file} could not be loaded ({}); is ROCm installed (or ROCM_PATH set)?",
        tried.join("; ")
    ))
}

/// dlerror()'s text, which libloading keeps in `source`, on one line.
fn dl_error(e: &libloading::Error) -> String {
    let text = std::error::Error::source(e).map_or(e.to_string(), |s| s.to_string());
    printable(text.as_bytes())
}

/// Text from a library, fit for a one-line reason: not trusted to be
/// UTF-8, printable or short.
pub fn printable(bytes: &[u8]) -> String {
    fleetop_proto::input::printable(String::from_utf8_lossy(bytes).trim(), 200)
}

/// Resolves `name` as `T`. Caller's duty (SAFETY): T is the symbol's true type.
unsafe fn sym<T: Copy>(lib: &Library, path: &str, name: &str) -> Result<T, String> {
    // SAFETY: the caller's.
    match unsafe { lib.get::<T>(name.as_bytes()) } {
        Ok(s) => Ok(*s),
        Err(_) => Err(format!("{path} lacks {name}")),
    }
}

type HipPtrFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The HIP runtime's calls the burn-in makes.
pub struct Hip {
    init: unsafe extern "C" fn(c_uint) -> c_int,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    set_device: unsafe extern "C" fn(c_int) -> c_int,
    device_get_pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    free: HipPtrFn,
    host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int,
    host_free: HipPtrFn,
    memcpy_async: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, Stream) -> c_int,
    memcpy_peer_async: unsafe extern "C" fn(*mut c_void, c_int, *const c_void, c_int, usize, Stream) -> c_int,
    device_can_access_peer: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int,
    device_enable_peer_access: unsafe extern "C" fn(c_int, c_uint) -> c_int,
    stream_create: unsafe extern "C" fn(*mut Stream) -> c_int,
    stream_synchronize: unsafe extern "C" fn(Stream) -> c_int,
    stream_destroy: unsafe extern "C" fn(Stream) -> c_int,
    event_create: unsafe extern "C" fn(*mut Event) -> c_int,
    event_record: unsafe extern "C" fn(Event, Stream) -> c_int,
    event_synchronize: unsafe extern "C" fn(Event) -> c_int,
    event_elapsed_time: unsafe extern "C" fn(*mut f32, Event, Event) -> c_int,
    event_destroy: unsafe extern "C" fn(Event) -> c_int,
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    get_error_name: Option<unsafe extern "C" fn(c_int) -> *const c_char>,
    /// Where it was loaded from.
    pub path: String,
    /// Held, never unloaded: the pointers above are into it.
    _lib: Library,
}

/// hipBLAS's calls the burn-in makes.
pub struct Blas {
    create: unsafe extern "C" fn(*mut BlasHandle) -> c_int,
    destroy: unsafe extern "C" fn(BlasHandle) -> c_int,
    set_stream: unsafe extern "C" fn(BlasHandle, Stream) -> c_int,
    /// hipblasGemmEx_v2 (hipBLAS 2) or hipblasGemmEx (hipBLAS 3).
    gemm_ex: GemmEx,
    gemm_name: &'static str,
    status_to_string: Option<unsafe extern "C" fn(c_int) -> *const c_char>,
    pub path: String,
    _lib: Library,
}

type GemmEx = unsafe extern "C" fn(
    BlasHandle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// The libraries, once loaded (a failed load is tried again next time:
/// ROCm may be installed while the agent runs).
static HIP: Mutex<Option<&'static Hip>> = Mutex::new(None);
static BLAS: Mutex<Option<&'static Blas>> = Mutex::new(None);

impl Hip {
    /// The HIP runtime, loaded, with hipInit done: an error where it cannot
    /// be loaded or sees no GPU.
    pub fn open() -> Result<&'static Hip, AmdBenchError> {
        let hip = Self::loaded()?;
        // SAFETY: hipInit takes its flags (0) by value.
        let rc = unsafe { (hip.init)(0) };
        if rc != SUCCESS {
            return Err(NoRuntime(format!("hipInit: {}", hip.describe(rc))));
        }
        Ok(hip)
    }

    fn loaded() -> Result<&'static Hip, AmdBenchError> {
        let mut slot = HIP.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = *slot {
            return Ok(h);
        }
        let (lib, path) = load("libamdhip64.so", &["7", "6"]).map_err(NoRuntime)?;
        // SAFETY: each type below is the symbol's in hip_runtime_api.h (ROCm 6 and 7).
        let hip = unsafe {
            let p = path.as_str();
            HipBuild {
                init: sym(&lib, p, "hipInit"),
                get_device_count: sym(&lib, p, "hipGetDeviceCount"),
                set_device: sym(&lib, p, "hipSetDevice"),
                device_get_pci_bus_id: sym(&lib, p, "hipDeviceGetPCIBusId"),
                malloc: sym(&lib, p, "hipMalloc"),
                free: sym(&lib, p, "hipFree"),
                host_malloc: sym(&lib, p, "hipHostMalloc"),
                host_free: sym(&lib, p, "hipHostFree"),
                memcpy_async: sym(&lib, p, "hipMemcpyAsync"),
                memcpy_peer_async: sym(&lib, p, "hipMemcpyPeerAsync"),
                device_can_access_peer: sym(&lib, p, "hipDeviceCanAccessPeer"),
                device_enable_peer_access: sym(&lib, p, "hipDeviceEnablePeerAccess"),
                stream_create: sym(&lib, p, "hipStreamCreate"),
                stream_synchronize: sym(&lib, p, "hipStreamSynchronize"),
                stream_destroy: sym(&lib, p, "hipStreamDestroy"),
                event_create: sym(&lib, p, "hipEventCreate"),
                event_record: sym(&lib, p, "hipEventRecord"),
                event_synchronize: sym(&lib, p, "hipEventSynchronize"),
                event_elapsed_time: sym(&lib, p, "hipEventElapsedTime"),
                event_destroy: sym(&lib, p, "hipEventDestroy"),
                get_error_string: sym(&lib, p, "hipGetErrorString"),
                get_error_name: sym(&lib, p, "hipGetErrorName").ok(),
                path: path.clone(),
                _lib: lib,
            }
        };
        let hip = hip.finish()?;
        let hip: &'static Hip = Box::leak(Box::new(hip));
        *slot = Some(hip);
        Ok(hip)
    }

    /// "hipErrorNoDevice (100): no ROCm-capable device is detected".
    pub fn describe(&self, rc: c_int) -> String {
        // SAFETY: both return a static string for any code (or null).
        let text = |p: *const c_char| (!p.is_null()).then(|| printable(unsafe { CStr::from_ptr(p) }.to_bytes()));
        let name = self.get_error_name.and_then(|f| text(unsafe { f(rc) }));
        let what = text(unsafe { (self.get_error_string)(rc) }).filter(|s| !s.is_empty());
        match (name, what) {
            (Some(n), Some(w)) if n != w => format!("{n} ({rc}): {w}"),
            (Some(n), _) => format!("{n} ({rc})"),
            (None, Some(w)) => format!("error {rc}: {w}"),
            (None, None) => format!("error {rc}"),
        }
    }

    /// A call's return code as a result: `call` names it in the error.
    pub fn check(&self, call: &str, rc: c_int) -> Result<(), AmdBenchError> {
        if rc == SUCCESS {
            Ok(())
        } else {
            Err(HipErr(format!("{call}: {}", self.describe(rc))))
        }
    }

    pub fn device_count(&self) -> Result<u32, AmdBenchError> {
        let mut n: c_int = 0;
        // SAFETY: an out pointer to a live int.
        let rc = unsafe { (self.get_device_count)(&mut n) };
        if rc != SUCCESS {
            return Err(NoRuntime(format!("hipGetDeviceCount: {}", self.describe(rc))));
        }
        Ok(n.max(0) as u32)
    }

    /// Makes `gpu` this thread's device (HIP's current device is per thread).
    pub fn set_device(&self, gpu: u32) -> Result<(), AmdBenchError> {
        // SAFETY: by value.
        self.check("hipSetDevice", unsafe { (self.set_device)(gpu as c_int) })
    }

    /// "0000:05:00.0".
    pub fn pci_bus_id(&self, gpu: u32) -> Result<String, AmdBenchError> {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer holds 64 bytes, as said; HIP NUL-terminates.
        let rc = unsafe { (self.device_get_pci_bus_id)(buf.as_mut_ptr(), buf.len() as c_int, gpu as c_int) };
        self.check("hipDeviceGetPCIBusId", rc)?;
        buf[buf.len() - 1] = 0;
        // SAFETY: NUL-terminated within the buffer (the last byte at least).
        Ok(printable(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_bytes()))
    }

    /// Whether `gpu` can address `peer`'s memory directly (XGMI).
    pub fn can_access_peer(&self, gpu: u32, peer: u32) -> Result<bool, AmdBenchError> {
        let mut can: c_int = 0;
        // SAFETY: an out pointer to a live int.
        let rc = unsafe { (self.device_can_access_peer)(&mut can, gpu as c_int, peer as c_int) };
        self.check("hipDeviceCanAccessPeer", rc)?;
        Ok(can != 0)
    }

    /// Lets the current device address `peer`'s memory (already done is fine).
    pub fn enable_peer_access(&self, peer: u32) -> Result<(), AmdBenchError> {
        // SAFETY: by value; flags must be 0.
        match unsafe { (self.device_enable_peer_access)(peer as c_int, 0) } {
            PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            rc => self.check("hipDeviceEnablePeerAccess", rc),
        }
    }

    /// Device memory of the current device.
    pub fn malloc(&'static self, bytes: usize) -> Result<DevMem, AmdBenchError> {
        let mut p = std::ptr::null_mut();
        // SAFETY: an out pointer; the memory is freed once, in Drop.
        self.check("hipMalloc", unsafe { (self.malloc)(&mut p, bytes) })?;
        Ok(DevMem { p, bytes, hip: self })
    }

    /// Pinned host memory (hipHostMallocDefault), filled with `fill`.
    pub fn host_malloc(&'static self, bytes: usize, fill: u8) -> Result<HostMem, AmdBenchError> {
        let mut p = std::ptr::null_mut();
        // SAFETY: an out pointer; the memory is freed once, in Drop.
        self.check("hipHostMalloc", unsafe { (self.host_malloc)(&mut p, bytes, 0) })?;
        if p.is_null() && bytes > 0 {
            return Err(HipErr("hipHostMalloc returned no memory".into()));
        }
        let m = HostMem { p, bytes, hip: self };
        if bytes > 0 {
            // SAFETY: `bytes` writable bytes of pinned host memory, just allocated.
            unsafe { std::ptr::write_bytes(m.p as *mut u8, fill, bytes) };
        }
        Ok(m)
    }

    /// `dst` <- `src`, `bytes` of them, queued on `s`.
    ///
    /// # Safety
    /// Both hold `bytes` and outlive the copy's completion.
    pub unsafe fn memcpy_async(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
        kind: c_int,
        s: &HipStream,
    ) -> Result<(), AmdBenchError> {
        // SAFETY: the caller's.
        self.check("hipMemcpyAsync", unsafe {
            (self.memcpy_async)(dst, src, bytes, kind, s.0)
        })
    }

    /// A copy from `src` on device `from` to `dst` on device `to`, queued
    /// on `s`.
    ///
    /// # Safety
    /// Both outlive the copy's completion.
    pub unsafe fn memcpy_peer_async(
        &self,
        dst: &DevMem,
        to: u32,
        src: &DevMem,
        from: u32,
        s: &HipStream,
    ) -> Result<(), AmdBenchError> {
        let n = dst.bytes.min(src.bytes);
        // SAFETY: both buffers hold n bytes; the caller keeps them alive.
        let rc = unsafe { (self.memcpy_peer_async)(dst.p, to as c_int, src.p, from as c_int, n, s.0) };
        self.check("hipMemcpyPeerAsync", rc)
    }

    /// A stream on the current device.
    pub fn stream(&'static self) -> Result<HipStream, AmdBenchError> {
        let mut s = std::ptr::null_mut();
        // SAFETY: an out pointer; destroyed once, in Drop.
        self.check("hipStreamCreate", unsafe { (self.stream_create)(&mut s) })?;
        Ok(HipStream(s, self))
    }

    /// A timing event on the current device.
    pub fn event(&'static self) -> Result<HipEvent, AmdBenchError> {
        let mut e = std::ptr::null_mut();
        // SAFETY: an out pointer; destroyed once, in Drop.
        self.check("hipEventCreate", unsafe { (self.event_create)(&mut e) })?;
        Ok(HipEvent(e, self))
    }
}

/// A field of `Hip` while it is being built: the symbol or why not.
type Sym<T> = Result<T, String>;

impl HipBuild {
    /// The functions, or the first symbol missing (a HIP too old or not HIP).
    fn finish(self) -> Result<Hip, AmdBenchError> {
        let (h, e) = (self, NoRuntime);
        Ok(Hip {
            init: h.init.map_err(e)?,
            get_device_count: h.get_device_count.map_err(e)?,
            set_device: h.set_device.map_err(e)?,
            device_get_pci_bus_id: h.device_get_pci_bus_id.map_err(e)?,
            malloc: h.malloc.map_err(e)?,
            free: h.free.map_err(e)?,
            host_malloc: h.host_malloc.map_err(e)?,
            host_free: h.host_free.map_err(e)?,
            memcpy_async: h.memcpy_async.map_err(e)?,
            memcpy_peer_async: h.memcpy_peer_async.map_err(e)?,
            device_can_access_peer: h.device_can_access_peer.map_err(e)?,
            device_enable_peer_access: h.device_enable_peer_access.map_err(e)?,
            stream_create: h.stream_create.map_err(e)?,
            stream_synchronize: h.stream_synchronize.map_err(e)?,
            stream_destroy: h.stream_destroy.map_err(e)?,
            event_create: h.event_create.map_err(e)?,
            event_record: h.event_record.map_err(e)?,
            event_synchronize: h.event_synchronize.map_err(e)?,
            event_elapsed_time: h.event_elapsed_time.map_err(e)?,
            event_destroy: h.event_destroy.map_err(e)?,
            get_error_string: h.get_error_string.map_err(e)?,
            get_error_name: h.get_error_name,
            path: h.path,
            _lib: h._lib,
        })
    }
}

/// `Hip` with each symbol still a result.
struct HipBuild {
    init: Sym<unsafe extern "C" fn(c_uint) -> c_int>,
    get_device_count: Sym<unsafe extern "C" fn(*mut c_int) -> c_int>,
    set_device: Sym<unsafe extern "C" fn(c_int) -> c_int>,
    device_get_pci_bus_id: Sym<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int>,
    malloc: Sym<unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int>,
    free: Sym<HipPtrFn>,
    host_malloc: Sym<unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int>,
    host_free: Sym<HipPtrFn>,
    memcpy_async: Sym<unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, Stream) -> c_int>,
    memcpy_peer_async: Sym<unsafe extern "C" fn(*mut c_void, c_int, *const c_void, c_int, usize, Stream) -> c_int>,
    device_can_access_peer: Sym<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int>,
    device_enable_peer_access: Sym<unsafe extern "C" fn(c_int, c_uint) -> c_int>,
    stream_create: Sym<unsafe extern "C" fn(*mut Stream) -> c_int>,
    stream_synchronize: Sym<unsafe extern "C" fn(Stream) -> c_int>,
    stream_destroy: Sym<unsafe extern "C" fn(Stream) -> c_int>,
    event_create: Sym<unsafe extern "C" fn(*mut Event) -> c_int>,
    event_record: Sym<unsafe extern "C" fn(Event, Stream) -> c_int>,
    event_synchronize: Sym<unsafe extern "C" fn(Event) -> c_int>,
    event_elapsed_time: Sym<unsafe extern "C" fn(*mut f32, Event, Event) -> c_int>,
    event_destroy: Sym<unsafe extern "C" fn(Event) -> c_int>,
    get_error_string: Sym<unsafe extern "C" fn(c_int) -> *const c_char>,
    get_error_name: Option<unsafe extern "C" fn(c_int) -> *const c_char>,
    path: String,
    _lib: Library,
}

impl Blas {
    /// hipBLAS, loaded (once HIP is): `NoLibrary` where it is not installed.
    pub fn open() -> Result<&'static Blas, AmdBenchError> {
        let mut slot = BLAS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = *slot {
            return Ok(b);
        }
        let no = |why: String| NoLibrary { lib: "libhipblas", why };
        let (lib, path) = load("libhipblas.so", &["3", "2"]).map_err(no)?;
        let p = path.as_str();
        // SAFETY: each type below is the symbol's in hipblas.h (hipBLAS 2 and 3).
        let blas = unsafe {
            let (gemm_ex, gemm_name) = match sym::<GemmEx>(&lib, p, "hipblasGemmEx_v2") {
                Ok(f) => (f, "hipblasGemmEx_v2"),
                Err(_) => (sym::<GemmEx>(&lib, p, "hipblasGemmEx").map_err(no)?, "hipblasGemmEx"),
            };
            Blas {
                create: sym(&lib, p, "hipblasCreate").map_err(no)?,
                destroy: sym(&lib, p, "hipblasDestroy").map_err(no)?,
                set_stream: sym(&lib, p, "hipblasSetStream").map_err(no)?,
                gemm_ex,
                gemm_name,
                status_to_string: sym(&lib, p, "hipblasStatusToString").ok(),
                path: path.clone(),
                _lib: lib,
            }
        };
        let blas: &'static Blas = Box::leak(Box::new(blas));
        *slot = Some(blas);
        Ok(blas)
    }

    /// "HIPBLAS_STATUS_INVALID_VALUE (3)".
    pub fn describe(&self, rc: c_int) -> String {
        // SAFETY: returns a static string for any status (or null).
        let text = self
            .status_to_string
            .map(|f| unsafe { f(rc) })
            .filter(|p| !p.is_null())
            .map(|p| printable(unsafe { CStr::from_ptr(p) }.to_bytes()));
        match text {
            Some(t) if !t.is_empty() => format!("{t} ({rc})"),
            _ => format!("hipBLAS status {rc}"),
        }
    }

    pub fn check(&self, call: &str, rc: c_int) -> Result<(), AmdBenchError> {
        if rc == SUCCESS {
            Ok(())
        } else {
            Err(HipErr(format!("{call}: {}", self.describe(rc))))
        }
    }

    /// A handle on the current device, its work on `s`.
    pub fn handle(&'static self, s: &HipStream) -> Result<BlasHandleGuard, AmdBenchError> {
        let mut h = std::ptr::null_mut();
        // SAFETY: an out pointer; destroyed once, in Drop.
        self.check("hipblasCreate", unsafe { (self.create)(&mut h) })?;
        let g = BlasHandleGuard(h, self);
        // SAFETY: a live handle and a live stream of the same device.
        self.check("hipblasSetStream", unsafe { (self.set_stream)(h, s.0) })?;
        Ok(g)
    }

    /// C = A B, n x n, BF16 in and out, FP32 accumulation, column-major,
    /// queued on the handle's stream.
    pub fn gemm_bf16(
        &self,
        h: &BlasHandleGuard,
        n: usize,
        a: &DevMem,
        b: &DevMem,
        c: &DevMem,
    ) -> Result<(), AmdBenchError> {
        let need = n * n * 2;
        if [a, b, c].iter().any(|m| m.bytes < need) {
            return Err(HipErr(format!("{}: buffers smaller than {n} x {n}", self.gemm_name)));
        }
        let (alpha, beta, n) = (1.0_f32, 0.0_f32, n as c_int);
        // SAFETY: a, b and c hold n*n bf16 each on the handle's device and
        // outlive the GEMM (the caller waits for the stream before dropping
        // them); alpha and beta are host f32 (the default pointer mode).
        #[rustfmt::skip]
        let rc = unsafe {
            (self.gemm_ex)(h.0, BLAS_OP_N, BLAS_OP_N, n, n, n, (&raw const alpha).cast(),
                a.p, HIP_R_16BF, n, b.p, HIP_R_16BF, n,
                (&raw const beta).cast(), c.p, HIP_R_16BF, n,
                BLAS_COMPUTE_32F, BLAS_GEMM_DEFAULT)
        };
        self.check(self.gemm_name, rc)
    }
}

/// Device memory, freed on drop.
pub struct DevMem {
    pub p: *mut c_void,
    pub bytes: usize,
    hip: &'static Hip,
}

impl Drop for DevMem {
    fn drop(&mut self) {
        // SAFETY: allocated by hipMalloc, freed once; every use was waited for.
        let _ = unsafe { (self.hip.free)(self.p) };
    }
}

/// Pinned host memory, freed on drop.
pub struct HostMem {
    pub p: *mut c_void,
    pub bytes: usize,
    hip: &'static Hip,
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // SAFETY: allocated by hipHostMalloc, freed once; every use was waited for.
        let _ = unsafe { (self.hip.host_free)(self.p) };
    }
}

pub struct HipStream(Stream, &'static Hip);

impl HipStream {
    pub fn synchronize(&self) -> Result<(), AmdBenchError> {
        // SAFETY: a live stream.
        self.1
            .check("hipStreamSynchronize", unsafe { (self.1.stream_synchronize)(self.0) })
    }
}

impl Drop for HipStream {
    fn drop(&mut self) {
        // SAFETY: created by hipStreamCreate, destroyed once.
        let _ = unsafe { (self.1.stream_destroy)(self.0) };
    }
}

pub struct HipEvent(Event, &'static Hip);

impl HipEvent {
    pub fn record(&self, s: &HipStream) -> Result<(), AmdBenchError> {
        // SAFETY: a live event and stream of the same device.
        self.1
            .check("hipEventRecord", unsafe { (self.1.event_record)(self.0, s.0) })
    }

    /// Milliseconds from `self` to `end`, once `end` has completed.
    pub fn elapsed_ms(&self, end: &HipEvent) -> Result<f32, AmdBenchError> {
        let hip = self.1;
        // SAFETY: live events.
        hip.check("hipEventSynchronize", unsafe { (hip.event_synchronize)(end.0) })?;
        let mut ms = 0.0_f32;
        // SAFETY: an out pointer to a live float; live, recorded events.
        hip.check("hipEventElapsedTime", unsafe {
            (hip.event_elapsed_time)(&mut ms, self.0, end.0)
        })?;
        Ok(ms)
    }
}

impl Drop for HipEvent {
    fn drop(&mut self) {
        // SAFETY: created by hipEventCreate, destroyed once.
        let _ = unsafe { (self.1.event_destroy)(self.0) };
    }
}

pub struct BlasHandleGuard(BlasHandle, &'static Blas);

impl Drop for BlasHandleGuard {
    fn drop(&mut self) {
        // SAFETY: created by hipblasCreate, destroyed once.
        let _ = unsafe { (self.1.destroy)(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_are_looked_for_where_rocms_tools_look() {
        let c = candidates(Some("/opt/rocm-7.0.2".into()), "libamdhip64.so", &["7", "6"]);
        let c: Vec<String> = c.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        assert_eq!(
            c,
            [
                "/opt/rocm-7.0.2/lib/libamdhip64.so",
                "libamdhip64.so",
                "libamdhip64.so.7",
                "libamdhip64.so.6",
                "/opt/rocm/lib/libamdhip64.so"
            ]
        );
        // An unset or empty ROCM_PATH: the loader's path, then ROCm's default.
        assert_eq!(candidates(Some("".into()), "libhipblas.so", &[]).len(), 2);
        assert_eq!(
            candidates(None, "libhipblas.so", &[])[0],
            OsString::from("libhipblas.so")
        );
    }

    #[test]
    fn text_from_a_library_is_made_one_printable_line() {
        let t = printable(b"bad\n\x1b[31mthing\xff  ");
        assert!(!t.chars().any(char::is_control), "{t:?}");
        assert!(
            t.starts_with("bad") && t.contains("thing") && t.contains('\u{fffd}'),
            "{t:?}"
        );
        assert!(printable(&[b'x'; 1000]).chars().count() < 260);
    }
}
