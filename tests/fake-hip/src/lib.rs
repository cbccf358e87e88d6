//! A fake `libamdhip64.so` for tests, and `libhipblas.so` in the same file
//! (tests link both names to it, so both are one loaded library with one
//! state): the HIP runtime and hipBLAS calls the agent's AMD burn-in makes
//! (agent/src/bench/hip.rs), with their C signatures and return codes,
//! answering from a TOML profile (`FAKE_HIP_PROFILE`, a path).
//!
//! Device memory is never real: hipMalloc hands out addresses nobody may
//! dereference, and every call that takes one checks that it lies in an
//! allocation of the right device with room for the bytes asked. Pinned
//! host memory (hipHostMalloc) is real. A copy or a GEMM does no work: it
//! "takes" bytes / rate (or 2mnk / rate) of the profile on a virtual clock
//! per stream, which events stamp and hipEventElapsedTime reads, so the
//! figures a benchmark computes are the profile's. Waiting for a stream or
//! an event sleeps that long, times the profile's `time_scale`.
//!
//! `FAKE_HIP_FAIL=<call>[=<code>][@<n>]` makes one call fail with `code`
//! (default hipErrorUnknown, or HIPBLAS_STATUS_INTERNAL_ERROR for hipBLAS)
//! from its n-th invocation on (default the first).
//! `FAKE_HIP_ERROR_TEXT` is what hipGetErrorString and hipblasStatusToString
//! say for any error (the bytes as given: the caller must make it printable).
//!
//! Every exported function checks its pointers and handles and never
//! unwinds across the C boundary.

// The exported functions are C entry points whose contract is HIP's:
// callers pass pointers HIP documents, and each is null-checked before use.
#![allow(clippy::missing_safety_doc, clippy::not_unsafe_ptr_arg_deref)]

mod profile;

use std::alloc::Layout;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use profile::Profile;

type HipError = c_int;
type Stream = *mut c_void;
type Event = *mut c_void;
type BlasHandle = *mut c_void;

const SUCCESS: HipError = 0;
const INVALID_VALUE: HipError = 1;
const OUT_OF_MEMORY: HipError = 2;
const NO_DEVICE: HipError = 100;
const INVALID_DEVICE: HipError = 101;
const PEER_UNSUPPORTED: HipError = 217;
const INVALID_HANDLE: HipError = 400;
const NOT_READY: HipError = 600;
const PEER_ALREADY_ENABLED: HipError = 704;
const UNKNOWN: HipError = 999;

/// hip_runtime_api.h's codes, names and texts (those the fake answers).
const ERRORS: &[(HipError, &str, &str)] = &[
    (SUCCESS, "hipSuccess", "no error"),
    (INVALID_VALUE, "hipErrorInvalidValue", "invalid argument"),
    (OUT_OF_MEMORY, "hipErrorOutOfMemory", "out of memory"),
    (3, "hipErrorNotInitialized", "initialization error"),
    (
        35,
        "hipErrorInsufficientDriver",
        "driver version is insufficient for runtime version",
    ),
    (NO_DEVICE, "hipErrorNoDevice", "no ROCm-capable device is detected"),
    (INVALID_DEVICE, "hipErrorInvalidDevice", "invalid device ordinal"),
    (
        PEER_UNSUPPORTED,
        "hipErrorPeerAccessUnsupported",
        "peer access is not supported between these two devices",
    ),
    (INVALID_HANDLE, "hipErrorInvalidHandle", "invalid resource handle"),
    (NOT_READY, "hipErrorNotReady", "device not ready"),
    (
        PEER_ALREADY_ENABLED,
        "hipErrorPeerAccessAlreadyEnabled",
        "peer access is already enabled",
    ),
    (719, "hipErrorLaunchFailure", "unspecified launch failure"),
    (UNKNOWN, "hipErrorUnknown", "unknown error"),
];

// hipblas-common.h's statuses and the enum values the fake accepts.
const BLAS_SUCCESS: c_int = 0;
const BLAS_NOT_INITIALIZED: c_int = 1;
const BLAS_INVALID_VALUE: c_int = 3;
const BLAS_INTERNAL_ERROR: c_int = 6;
const BLAS_HANDLE_IS_NULLPTR: c_int = 9;
const BLAS_INVALID_ENUM: c_int = 10;
const BLAS_STATUSES: &[&str] = &[
    "HIPBLAS_STATUS_SUCCESS",
    "HIPBLAS_STATUS_NOT_INITIALIZED",
    "HIPBLAS_STATUS_ALLOC_FAILED",
    "HIPBLAS_STATUS_INVALID_VALUE",
    "HIPBLAS_STATUS_MAPPING_ERROR",
    "HIPBLAS_STATUS_EXECUTION_FAILED",
    "HIPBLAS_STATUS_INTERNAL_ERROR",
    "HIPBLAS_STATUS_NOT_SUPPORTED",
    "HIPBLAS_STATUS_ARCH_MISMATCH",
    "HIPBLAS_STATUS_HANDLE_IS_NULLPTR",
    "HIPBLAS_STATUS_INVALID_ENUM",
    "HIPBLAS_STATUS_UNKNOWN",
];
const OP_N: c_int = 111;
const OP_T: c_int = 112;
const HIP_R_32F: c_int = 0;
const HIP_R_16F: c_int = 2;
const HIP_R_16BF: c_int = 14;
const COMPUTE_32F: c_int = 2;
const GEMM_DEFAULT: c_int = 160;

/// hipMemcpyKind.
const H2H: c_int = 0;
const H2D: c_int = 1;
const D2H: c_int = 2;
const D2D: c_int = 3;
const DEFAULT_KIND: c_int = 4;

/// Where device allocations and handles live: addresses in ranges no real
/// mapping has (above the canonical user-space half), never dereferenced.
const DEVICE_BASE: usize = 0x4000_0000_0000_0000;
const HANDLE_BASE: usize = 0x6000_0000_0000_0000;

thread_local! {
    /// hipSetDevice: per thread, as in HIP.
    static CURRENT: Cell<c_int> = const { Cell::new(0) };
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Device(c_int),
    /// Pinned (hipHostMalloc).
    Host,
    /// Host memory HIP did not allocate (pageable).
    Pageable,
}

struct Alloc {
    len: usize,
    device: Option<c_int>,
    /// Pinned host memory: the layout to free it with.
    layout: Option<Layout>,
}

#[derive(Clone)]
struct StreamState {
    device: c_int,
    /// Virtual seconds of work queued on the stream since it was made.
    t: f64,
    /// When that work would be done, in real time.
    ready: Instant,
}

#[derive(Clone)]
struct EventState {
    device: c_int,
    /// (virtual time, real time) of the work before it, once recorded.
    at: Option<(f64, Instant)>,
}

struct BlasState {
    device: c_int,
    stream: usize,
}

enum Handle {
    Stream(StreamState),
    Event(EventState),
    Blas(BlasState),
}

struct Fault {
    call: String,
    code: c_int,
    from: u64,
}

struct Fake {
    p: Profile,
    scale: f64,
    allocs: BTreeMap<usize, Alloc>,
    next_device_addr: usize,
    handles: HashMap<usize, Handle>,
    next_handle: usize,
    /// Each device's null stream (handle 0).
    null_streams: Vec<StreamState>,
    /// (device, peer): the device may address the peer's memory.
    peers: HashSet<(c_int, c_int)>,
    calls: HashMap<&'static str, u64>,
    fault: Option<Fault>,
}

static STATE: Mutex<Option<Fake>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<Fake>> {
    // Panics are caught inside the lock (see `call`); the state stays whole.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn parse_fault(s: &str) -> Option<Fault> {
    let (rest, from) = match s.split_once('@') {
        Some((r, n)) => (r, n.trim().parse().ok()?),
        None => (s, 1),
    };
    let (call, code) = match rest.split_once('=') {
        Some((c, code)) => (c.trim(), Some(code.trim().parse().ok()?)),
        None => (rest.trim(), None),
    };
    let default = if call.starts_with("hipblas") {
        BLAS_INTERNAL_ERROR
    } else {
        UNKNOWN
    };
    Some(Fault {
        call: call.to_string(),
        code: code.unwrap_or(default),
        from,
    })
}

/// The state, made on the first call (HIP initialises itself on the first
/// call too); an error where there is no profile or no device.
fn ensure(st: &mut Option<Fake>) -> Result<&mut Fake, HipError> {
    if st.is_none() {
        let Some(path) = std::env::var_os("FAKE_HIP_PROFILE") else {
            eprintln!("fake HIP: FAKE_HIP_PROFILE is not set");
            return Err(NO_DEVICE);
        };
        let p = profile::load(std::path::Path::new(&path)).map_err(|e| {
            eprintln!("fake HIP: {e}");
            NO_DEVICE
        })?;
        let fault = match std::env::var("FAKE_HIP_FAIL") {
            Ok(s) if !s.is_empty() => match parse_fault(&s) {
                Some(f) => Some(f),
                None => {
                    eprintln!("fake HIP: FAKE_HIP_FAIL={s}: expected <call>[=<code>][@<n>]");
                    return Err(NO_DEVICE);
                }
            },
            _ => None,
        };
        let scale = std::env::var("FAKE_HIP_TIME_SCALE")
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|s: &f64| *s >= 0.0 && s.is_finite())
            .unwrap_or(p.time_scale);
        let now = Instant::now();
        let null_streams = (0..p.count as c_int)
            .map(|device| StreamState {
                device,
                t: 0.0,
                ready: now,
            })
            .collect();
        *st = Some(Fake {
            p,
            scale,
            allocs: BTreeMap::new(),
            next_device_addr: DEVICE_BASE,
            handles: HashMap::new(),
            next_handle: 1,
            null_streams,
            peers: HashSet::new(),
            calls: HashMap::new(),
            fault,
        });
    }
    let fake = st.as_mut().ok_or(UNKNOWN)?;
    if fake.p.count == 0 {
        return Err(NO_DEVICE);
    }
    Ok(fake)
}

/// One HIP call: the state (made if need be), the call counted, the fault
/// answered if it is this call's; never unwinds into the caller.
fn call(name: &'static str, f: impl FnOnce(&mut Fake) -> c_int) -> c_int {
    let blas = name.starts_with("hipblas");
    catch_unwind(AssertUnwindSafe(|| {
        let mut st = state();
        let fake = match ensure(&mut st) {
            Ok(f) => f,
            Err(_) if blas => return BLAS_NOT_INITIALIZED,
            Err(e) => return e,
        };
        let n = fake.calls.entry(name).or_default();
        *n += 1;
        let n = *n;
        if let Some(fault) = &fake.fault
            && fault.call == name
            && n >= fault.from
        {
            return fault.code;
        }
        f(fake)
    }))
    .unwrap_or(if blas { BLAS_INTERNAL_ERROR } else { UNKNOWN })
}

/// Waits for real time to reach `until`, computed under the lock by `f`.
fn wait(name: &'static str, f: impl FnOnce(&mut Fake) -> Result<Instant, HipError>) -> HipError {
    let mut until = None;
    let rc = call(name, |fake| match f(fake) {
        Ok(t) => {
            until = Some(t);
            SUCCESS
        }
        Err(e) => e,
    });
    if let Some(t) = until {
        let now = Instant::now();
        if t > now {
            std::thread::sleep(t - now);
        }
    }
    rc
}

/// Writes through an out pointer, refusing null.
macro_rules! out {
    ($p:expr, $v:expr) => {{
        if $p.is_null() {
            return INVALID_VALUE;
        }
        // SAFETY: non-null, and HIP's contract makes it point to the type.
        unsafe { *$p = $v };
    }};
}

fn current() -> c_int {
    CURRENT.with(|c| c.get())
}

fn handle_addr(id: usize) -> *mut c_void {
    (HANDLE_BASE + id * 16) as *mut c_void
}

fn handle_id(p: *mut c_void) -> Option<usize> {
    let a = p as usize;
    (a > HANDLE_BASE && (a - HANDLE_BASE).is_multiple_of(16)).then(|| (a - HANDLE_BASE) / 16)
}

impl Fake {
    fn device_ok(&self, d: c_int) -> bool {
        d >= 0 && (d as u32) < self.p.count
    }

    fn gpu(&self, d: c_int) -> &profile::GpuSpec {
        &self.p.gpus[d as usize]
    }

    fn new_handle(&mut self, h: Handle) -> *mut c_void {
        let id = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(id, h);
        handle_addr(id)
    }

    /// Where `n` bytes at `p` are: in a HIP allocation with room for them,
    /// or host memory HIP does not know. An address inside an allocation
    /// without room for `n` bytes is an error, and so is null.
    fn place(&self, p: *const c_void, n: usize) -> Result<Place, HipError> {
        let a = p as usize;
        if a == 0 {
            return Err(INVALID_VALUE);
        }
        match self.allocs.range(..=a).next_back() {
            Some((&base, al)) if a < base + al.len.max(1) => {
                if a - base + n > al.len {
                    return Err(INVALID_VALUE);
                }
                Ok(al.device.map_or(Place::Host, Place::Device))
            }
            _ if a >= DEVICE_BASE => Err(INVALID_VALUE),
            _ => Ok(Place::Pageable),
        }
    }

    /// The stream a handle names: 0 is the current device's null stream.
    fn stream_mut(&mut self, s: Stream) -> Result<&mut StreamState, HipError> {
        if s.is_null() {
            let d = current();
            return self.null_streams.get_mut(d as usize).ok_or(INVALID_DEVICE);
        }
        match handle_id(s).and_then(|id| self.handles.get_mut(&id)) {
            Some(Handle::Stream(st)) => Ok(st),
            _ => Err(INVALID_HANDLE),
        }
    }

    /// Queues `secs` of work on a stream.
    fn enqueue(&mut self, s: Stream, secs: f64) -> Result<(), HipError> {
        let scale = self.scale;
        let st = self.stream_mut(s)?;
        st.t += secs;
        st.ready = st.ready.max(Instant::now()) + Duration::from_secs_f64(secs * scale);
        Ok(())
    }

    /// How long a copy of `n` bytes takes between two places.
    fn copy_secs(&self, dst: Place, src: Place, n: usize) -> Result<f64, HipError> {
        let gbps = match (src, dst) {
            (Place::Device(a), Place::Device(b)) if a == b => self.gpu(a).hbm_copy_gbps,
            (Place::Device(a), Place::Device(b)) => self.peer_gbps(a, b),
            (Place::Host, Place::Device(d)) => self.gpu(d).h2d_gbps,
            (Place::Pageable, Place::Device(d)) => self.gpu(d).h2d_gbps / 2.0,
            (Place::Device(d), Place::Host) => self.gpu(d).d2h_gbps,
            (Place::Device(d), Place::Pageable) => self.gpu(d).d2h_gbps / 2.0,
            // Host to host: a memcpy on the CPU, fast enough not to matter.
            _ => 10.0,
        };
        Ok(n as f64 / (gbps * 1e9))
    }

    /// A peer copy's rate: XGMI, or staged through host memory without it.
    fn peer_gbps(&self, src: c_int, dst: c_int) -> f64 {
        if self.p.xgmi {
            self.gpu(src).peer_gbps
        } else {
            self.gpu(src).d2h_gbps.min(self.gpu(dst).h2d_gbps) / 2.0
        }
    }
}

// ---- initialisation and devices --------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn hipInit(flags: c_uint) -> HipError {
    call("hipInit", |_| if flags == 0 { SUCCESS } else { INVALID_VALUE })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipGetDeviceCount(count: *mut c_int) -> HipError {
    if count.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: checked non-null; the caller's int.
    unsafe { *count = 0 };
    call("hipGetDeviceCount", |fake| {
        out!(count, fake.p.count as c_int);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipSetDevice(device: c_int) -> HipError {
    call("hipSetDevice", |fake| {
        if !fake.device_ok(device) {
            return INVALID_DEVICE;
        }
        CURRENT.with(|c| c.set(device));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipGetDevice(device: *mut c_int) -> HipError {
    call("hipGetDevice", |_| {
        out!(device, current());
        SUCCESS
    })
}

/// Copies `s` into a caller's buffer of `len` bytes, NUL-terminated.
fn write_str(buf: *mut c_char, len: c_int, s: &str) -> HipError {
    if buf.is_null() || len <= 0 || s.len() + 1 > len as usize {
        return INVALID_VALUE;
    }
    // SAFETY: the caller gave `len` writable bytes; we write s.len() + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, s.len());
        *buf.add(s.len()) = 0;
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceGetPCIBusId(buf: *mut c_char, len: c_int, device: c_int) -> HipError {
    call("hipDeviceGetPCIBusId", |fake| {
        if !fake.device_ok(device) {
            return INVALID_DEVICE;
        }
        write_str(buf, len, &fake.p.pci_bus_ids[device as usize])
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceGetName(buf: *mut c_char, len: c_int, device: c_int) -> HipError {
    call("hipDeviceGetName", |fake| {
        if !fake.device_ok(device) {
            return INVALID_DEVICE;
        }
        let name = fake.gpu(device).name.clone();
        write_str(buf, len, &name)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceCanAccessPeer(can: *mut c_int, device: c_int, peer: c_int) -> HipError {
    call("hipDeviceCanAccessPeer", |fake| {
        if !fake.device_ok(device) || !fake.device_ok(peer) {
            return INVALID_DEVICE;
        }
        out!(can, c_int::from(fake.p.xgmi && device != peer));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceEnablePeerAccess(peer: c_int, flags: c_uint) -> HipError {
    call("hipDeviceEnablePeerAccess", |fake| {
        let me = current();
        if !fake.device_ok(peer) || peer == me {
            return INVALID_DEVICE;
        }
        if flags != 0 {
            return INVALID_VALUE;
        }
        if !fake.p.xgmi {
            return PEER_UNSUPPORTED;
        }
        if fake.peers.insert((me, peer)) {
            SUCCESS
        } else {
            PEER_ALREADY_ENABLED
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceSynchronize() -> HipError {
    wait("hipDeviceSynchronize", |fake| {
        let me = current();
        let mut t = fake
            .null_streams
            .get(me as usize)
            .map_or_else(Instant::now, |s| s.ready);
        for h in fake.handles.values() {
            if let Handle::Stream(s) = h
                && s.device == me
            {
                t = t.max(s.ready);
            }
        }
        Ok(t)
    })
}

// ---- memory ---------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> HipError {
    call("hipMalloc", |fake| {
        let d = current();
        let used: u64 = fake
            .allocs
            .values()
            .filter(|a| a.device == Some(d))
            .map(|a| a.len as u64)
            .sum();
        if used + size as u64 > fake.gpu(d).vram_bytes {
            return OUT_OF_MEMORY;
        }
        if size == 0 {
            out!(ptr, std::ptr::null_mut());
            return SUCCESS;
        }
        let a = fake.next_device_addr;
        // 2 MiB apart and aligned, as HIP's allocations are.
        fake.next_device_addr += (size + (4 << 20)) & !((2 << 20) - 1);
        fake.allocs.insert(
            a,
            Alloc {
                len: size,
                device: Some(d),
                layout: None,
            },
        );
        out!(ptr, a as *mut c_void);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipFree(ptr: *mut c_void) -> HipError {
    call("hipFree", |fake| {
        if ptr.is_null() {
            return SUCCESS;
        }
        match fake.allocs.get(&(ptr as usize)) {
            Some(a) if a.device.is_some() => {
                fake.allocs.remove(&(ptr as usize));
                SUCCESS
            }
            _ => INVALID_VALUE,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> HipError {
    call("hipHostMalloc", |fake| {
        if ptr.is_null() {
            return INVALID_VALUE;
        }
        // hipHostMallocDefault, Portable, Mapped, WriteCombined, NumaUser,
        // Coherent, NonCoherent: the ones a caller may combine.
        if flags & !0x8000_003f != 0 {
            return INVALID_VALUE;
        }
        let Ok(layout) = Layout::from_size_align(size.max(1), 4096) else {
            return OUT_OF_MEMORY;
        };
        // SAFETY: a non-zero size; freed with the same layout in hipHostFree.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return OUT_OF_MEMORY;
        }
        fake.allocs.insert(
            p as usize,
            Alloc {
                len: size,
                device: None,
                layout: Some(layout),
            },
        );
        out!(ptr, p as *mut c_void);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipHostFree(ptr: *mut c_void) -> HipError {
    call("hipHostFree", |fake| {
        if ptr.is_null() {
            return SUCCESS;
        }
        match fake.allocs.get(&(ptr as usize)).and_then(|a| a.layout) {
            Some(layout) => {
                fake.allocs.remove(&(ptr as usize));
                // SAFETY: allocated in hipHostMalloc with this layout, freed once.
                unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
                SUCCESS
            }
            None => INVALID_VALUE,
        }
    })
}

fn memcpy(fake: &mut Fake, dst: *mut c_void, src: *const c_void, n: usize, kind: c_int, s: Stream) -> HipError {
    let (d, sp) = match (fake.place(dst, n), fake.place(src, n)) {
        (Ok(d), Ok(sp)) => (d, sp),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let host = |p: Place| matches!(p, Place::Host | Place::Pageable);
    let fits = match kind {
        H2H => host(sp) && host(d),
        H2D => host(sp) && !host(d),
        D2H => !host(sp) && host(d),
        D2D => !host(sp) && !host(d),
        DEFAULT_KIND => true,
        _ => false,
    };
    if !fits {
        return INVALID_VALUE;
    }
    match fake.copy_secs(d, sp, n).and_then(|secs| fake.enqueue(s, secs)) {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn hipMemcpyAsync(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int, s: Stream) -> HipError {
    call("hipMemcpyAsync", |fake| memcpy(fake, dst, src, n, kind, s))
}

#[unsafe(no_mangle)]
pub extern "C" fn hipMemcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> HipError {
    let rc = call("hipMemcpy", |fake| {
        memcpy(fake, dst, src, n, kind, std::ptr::null_mut())
    });
    if rc != SUCCESS {
        return rc;
    }
    // Synchronous: it returns once the copy is done.
    wait("hipStreamSynchronize", |fake| {
        Ok(fake.stream_mut(std::ptr::null_mut())?.ready)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipMemcpyPeerAsync(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    n: usize,
    s: Stream,
) -> HipError {
    call("hipMemcpyPeerAsync", |fake| {
        if !fake.device_ok(dst_device) || !fake.device_ok(src_device) {
            return INVALID_DEVICE;
        }
        match (fake.place(dst, n), fake.place(src, n)) {
            (Ok(Place::Device(d)), Ok(Place::Device(sd))) if d == dst_device && sd == src_device => {}
            (Err(e), _) | (_, Err(e)) => return e,
            _ => return INVALID_VALUE,
        }
        let secs = if src_device == dst_device {
            n as f64 / (fake.gpu(src_device).hbm_copy_gbps * 1e9)
        } else {
            n as f64 / (fake.peer_gbps(src_device, dst_device) * 1e9)
        };
        match fake.enqueue(s, secs) {
            Ok(()) => SUCCESS,
            Err(e) => e,
        }
    })
}

// ---- streams and events ---------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamCreate(s: *mut Stream) -> HipError {
    call("hipStreamCreate", |fake| {
        let st = StreamState {
            device: current(),
            t: 0.0,
            ready: Instant::now(),
        };
        out!(s, fake.new_handle(Handle::Stream(st)));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamSynchronize(s: Stream) -> HipError {
    wait("hipStreamSynchronize", |fake| Ok(fake.stream_mut(s)?.ready))
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamDestroy(s: Stream) -> HipError {
    call("hipStreamDestroy", |fake| {
        match handle_id(s).and_then(|id| fake.handles.get(&id).map(|h| (id, h))) {
            Some((id, Handle::Stream(_))) => {
                fake.handles.remove(&id);
                SUCCESS
            }
            _ => INVALID_HANDLE,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventCreate(e: *mut Event) -> HipError {
    call("hipEventCreate", |fake| {
        let ev = EventState {
            device: current(),
            at: None,
        };
        out!(e, fake.new_handle(Handle::Event(ev)));
        SUCCESS
    })
}

fn event(fake: &mut Fake, e: Event) -> Result<&mut EventState, HipError> {
    match handle_id(e).and_then(|id| fake.handles.get_mut(&id)) {
        Some(Handle::Event(ev)) => Ok(ev),
        _ => Err(INVALID_HANDLE),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventRecord(e: Event, s: Stream) -> HipError {
    call("hipEventRecord", |fake| {
        let (device, t, ready) = match fake.stream_mut(s) {
            Ok(st) => (st.device, st.t, st.ready),
            Err(err) => return err,
        };
        match event(fake, e) {
            // An event records work of its own device's streams only.
            Ok(ev) if ev.device == device => {
                ev.at = Some((t, ready));
                SUCCESS
            }
            Ok(_) => INVALID_HANDLE,
            Err(err) => err,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventSynchronize(e: Event) -> HipError {
    wait("hipEventSynchronize", |fake| {
        Ok(event(fake, e)?.at.map_or_else(Instant::now, |(_, ready)| ready))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventElapsedTime(ms: *mut f32, start: Event, stop: Event) -> HipError {
    call("hipEventElapsedTime", |fake| {
        let (a, b) = match (event(fake, start).cloned(), event(fake, stop).cloned()) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let (Some((ta, ra)), Some((tb, rb))) = (a.at, b.at) else {
            return INVALID_HANDLE;
        };
        // As HIP: both must have completed (the caller waits for them).
        let now = Instant::now();
        if ra > now || rb > now {
            return NOT_READY;
        }
        out!(ms, ((tb - ta) * 1e3) as f32);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventDestroy(e: Event) -> HipError {
    call("hipEventDestroy", |fake| {
        match handle_id(e).and_then(|id| fake.handles.get(&id).map(|h| (id, h))) {
            Some((id, Handle::Event(_))) => {
                fake.handles.remove(&id);
                SUCCESS
            }
            _ => INVALID_HANDLE,
        }
    })
}

// ---- errors ---------------------------------------------------------------

/// FAKE_HIP_ERROR_TEXT, as given (bytes, never checked for being printable).
fn error_text() -> Option<&'static CString> {
    static TEXT: OnceLock<Option<CString>> = OnceLock::new();
    TEXT.get_or_init(|| {
        use std::os::unix::ffi::OsStringExt;
        std::env::var_os("FAKE_HIP_ERROR_TEXT").and_then(|t| CString::new(t.into_vec()).ok())
    })
    .as_ref()
}

/// Static C strings for the names and texts of ERRORS.
fn c_texts() -> &'static [(HipError, CString, CString)] {
    static TEXTS: OnceLock<Vec<(HipError, CString, CString)>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        ERRORS
            .iter()
            .filter_map(|&(c, n, t)| Some((c, CString::new(n).ok()?, CString::new(t).ok()?)))
            .collect()
    })
}

fn unknown_entry() -> &'static (HipError, CString, CString) {
    let t = c_texts();
    t.iter().find(|e| e.0 == UNKNOWN).unwrap_or(&t[0])
}

#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorString(code: HipError) -> *const c_char {
    if code != SUCCESS
        && let Some(t) = error_text()
    {
        return t.as_ptr();
    }
    c_texts()
        .iter()
        .find(|e| e.0 == code)
        .unwrap_or_else(|| unknown_entry())
        .2
        .as_ptr()
}

#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorName(code: HipError) -> *const c_char {
    c_texts()
        .iter()
        .find(|e| e.0 == code)
        .unwrap_or_else(|| unknown_entry())
        .1
        .as_ptr()
}

// ---- hipBLAS ----------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn hipblasCreate(h: *mut BlasHandle) -> c_int {
    call("hipblasCreate", |fake| {
        if h.is_null() {
            return BLAS_HANDLE_IS_NULLPTR;
        }
        let b = BlasState {
            device: current(),
            stream: 0,
        };
        // SAFETY: checked non-null; the caller's handle.
        unsafe { *h = fake.new_handle(Handle::Blas(b)) };
        BLAS_SUCCESS
    })
}

fn blas(fake: &mut Fake, h: BlasHandle) -> Result<&mut BlasState, c_int> {
    if h.is_null() {
        return Err(BLAS_HANDLE_IS_NULLPTR);
    }
    match handle_id(h).and_then(|id| fake.handles.get_mut(&id)) {
        Some(Handle::Blas(b)) => Ok(b),
        _ => Err(BLAS_INVALID_VALUE),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn hipblasDestroy(h: BlasHandle) -> c_int {
    call("hipblasDestroy", |fake| match blas(fake, h) {
        Ok(_) => {
            if let Some(id) = handle_id(h) {
                fake.handles.remove(&id);
            }
            BLAS_SUCCESS
        }
        Err(e) => e,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipblasSetStream(h: BlasHandle, s: Stream) -> c_int {
    call("hipblasSetStream", |fake| {
        let device = match fake.stream_mut(s) {
            Ok(st) => st.device,
            Err(_) => return BLAS_INVALID_VALUE,
        };
        match blas(fake, h) {
            Ok(b) if b.device == device => {
                b.stream = s as usize;
                BLAS_SUCCESS
            }
            Ok(_) => BLAS_INVALID_VALUE,
            Err(e) => e,
        }
    })
}

/// hipblasGemmEx with hipDataType and hipblasComputeType_t (hipBLAS 2's
/// `hipblasGemmEx_v2`, hipBLAS 3's `hipblasGemmEx`): checks every argument
/// as rocBLAS would, then "takes" 2mnk / rate on the handle's stream.
#[allow(clippy::too_many_arguments)]
fn gemm_ex(
    fake: &mut Fake,
    h: BlasHandle,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    a_type: c_int,
    lda: c_int,
    b: *const c_void,
    b_type: c_int,
    ldb: c_int,
    beta: *const c_void,
    c: *mut c_void,
    c_type: c_int,
    ldc: c_int,
    compute: c_int,
    algo: c_int,
) -> c_int {
    let (device, stream) = match blas(fake, h) {
        Ok(bl) => (bl.device, bl.stream),
        Err(e) => return e,
    };
    if ![trans_a, trans_b].iter().all(|t| [OP_N, OP_T].contains(t))
        || compute != COMPUTE_32F
        || algo != GEMM_DEFAULT
        || a_type != b_type
        || ![HIP_R_16BF, HIP_R_16F, HIP_R_32F].contains(&a_type)
        || !(c_type == a_type || c_type == HIP_R_32F)
    {
        return BLAS_INVALID_ENUM;
    }
    if m < 0 || n < 0 || k < 0 || alpha.is_null() || beta.is_null() {
        return BLAS_INVALID_VALUE;
    }
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let size = |t: c_int| if t == HIP_R_32F { 4 } else { 2 };
    // Column-major: op(A) is m x k, op(B) k x n, C m x n.
    let (a_rows, a_cols) = if trans_a == OP_N { (m, k) } else { (k, m) };
    let (b_rows, b_cols) = if trans_b == OP_N { (k, n) } else { (n, k) };
    let fits = |p: *const c_void, ld: c_int, rows: usize, cols: usize, t: c_int| {
        let ld = ld.max(0) as usize;
        ld >= rows.max(1)
            && (cols == 0
                || matches!(fake.place(p, (ld * (cols - 1) + rows) * size(t)), Ok(Place::Device(d)) if d == device))
    };
    if !fits(a, lda, a_rows, a_cols, a_type) || !fits(b, ldb, b_rows, b_cols, b_type) || !fits(c, ldc, m, n, c_type) {
        return BLAS_INVALID_VALUE;
    }
    let tflops = fake.gpu(device).gemm_tflops / if a_type == HIP_R_32F { 8.0 } else { 1.0 };
    let secs = 2.0 * (m * n * k) as f64 / (tflops * 1e12);
    match fake.enqueue(stream as Stream, secs) {
        Ok(()) => BLAS_SUCCESS,
        Err(_) => BLAS_INVALID_VALUE,
    }
}

macro_rules! gemm_ex_export {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn $name(
            h: BlasHandle,
            trans_a: c_int,
            trans_b: c_int,
            m: c_int,
            n: c_int,
            k: c_int,
            alpha: *const c_void,
            a: *const c_void,
            a_type: c_int,
            lda: c_int,
            b: *const c_void,
            b_type: c_int,
            ldb: c_int,
            beta: *const c_void,
            c: *mut c_void,
            c_type: c_int,
            ldc: c_int,
            compute: c_int,
            algo: c_int,
        ) -> c_int {
            call(stringify!($name), |fake| {
                gemm_ex(
                    fake, h, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc,
                    compute, algo,
                )
            })
        }
    };
}

gemm_ex_export!(hipblasGemmEx_v2);
gemm_ex_export!(hipblasGemmEx);

#[unsafe(no_mangle)]
pub extern "C" fn hipblasStatusToString(status: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    if status != BLAS_SUCCESS
        && let Some(t) = error_text()
    {
        return t.as_ptr();
    }
    let names = NAMES.get_or_init(|| BLAS_STATUSES.iter().filter_map(|s| CString::new(*s).ok()).collect());
    let i = usize::try_from(status)
        .ok()
        .filter(|&i| i < names.len())
        .unwrap_or(names.len() - 1);
    names[i].as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_a_call_a_code_and_a_count() {
        let f = parse_fault("hipMemcpyPeerAsync=217@3").expect("parses");
        assert_eq!((f.call.as_str(), f.code, f.from), ("hipMemcpyPeerAsync", 217, 3));
        let f = parse_fault("hipblasGemmEx_v2").expect("parses");
        assert_eq!((f.code, f.from), (BLAS_INTERNAL_ERROR, 1));
        assert_eq!(parse_fault("hipInit").map(|f| f.code), Some(UNKNOWN));
        assert!(parse_fault("hipInit=x").is_none());
    }

    #[test]
    fn the_shipped_profiles_load() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
        for f in ["mi300x-oam.toml", "mi300x-slow-hbm.toml", "mi300x-2.toml"] {
            let p = profile::load(&dir.join(f)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.gpus.len(), p.count as usize, "{f}");
        }
        let slow = profile::load(&dir.join("mi300x-slow-hbm.toml")).expect("loads");
        assert_eq!(slow.gpus[1].hbm_copy_gbps, 640.0);
        assert_eq!(slow.gpus[0].hbm_copy_gbps, 1900.0);
        assert_eq!(profile::load(&dir.join("mi300x-2.toml")).expect("loads").count, 2);
    }
}
