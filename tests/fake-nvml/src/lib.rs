//! A fake `libnvidia-ml.so.1` for tests: NVML's C symbols, signatures, struct
//! layouts and return codes (from nvml-wrapper-sys's bindgen of nvml.h),
//! answering from a TOML profile (`FAKE_NVML_PROFILE`).
//!
//! Time: seconds since `nvmlInit`, or frozen at `FAKE_NVML_TIME_S` so that
//! two programs (the agent and pynvml) read the same values.
//!
//! Symbols not exported here are missing from the library: nvml-wrapper and
//! pynvml both resolve each symbol when it is first called and turn a missing
//! one into `NVML_ERROR_FUNCTION_NOT_FOUND` (nvml-wrapper: `FailedToLoadSymbol`),
//! which is what a real driver too old for the call does. The two symbols
//! nvml-wrapper calls unchecked in `Drop` (`nvmlShutdown`, `nvmlEventSetFree`)
//! are exported.
//!
//! Every exported function checks its pointers and handles and never panics
//! across the C boundary: a bad argument is `NVML_ERROR_INVALID_ARGUMENT`.

// The exported functions are C entry points whose contract is nvml.h's:
// callers pass pointers NVML documents, and each is null-checked before use.
// bindgen's names for nvml.h's constants are kept as they are.
#![allow(
    non_snake_case,
    non_upper_case_globals,
    clippy::missing_safety_doc,
    clippy::not_unsafe_ptr_arg_deref
)]

mod profile;

use std::collections::HashSet;
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::*;
use profile::{FaultKind, GpuSpec, Profile};

const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
const UNINIT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
const INVALID: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
const NOT_SUPPORTED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
const NO_PERMISSION: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NO_PERMISSION;
const INSUFFICIENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
const TIMEOUT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_TIMEOUT;
const LOST: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
const DRIVER_NOT_LOADED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED;

/// nvmlEventTypeXidCriticalError.
const EVENT_XID: u64 = 0x8;

/// Addresses used as device handles: NVML's handles are opaque pointers, and
/// these are distinct, stable and never dereferenced.
const MAX_GPUS: usize = 64;
const MAX_MIG: usize = 8;
static DEVICES: [u8; MAX_GPUS] = [0; MAX_GPUS];
static MIG_DEVICES: [u8; MAX_GPUS * MAX_MIG] = [0; MAX_GPUS * MAX_MIG];
/// Event sets: handles are addresses in here too.
const MAX_SETS: usize = 64;
static SETS: [u8; MAX_SETS] = [0; MAX_SETS];

struct Fake {
    p: Profile,
    /// GPM samples allocated and not freed: handle number -> (GPU, MIG
    /// instance index where taken with nvmlGpmMigSampleGet, time taken).
    gpm: std::collections::HashMap<usize, Option<(u32, Option<u32>, f64)>>,
    gpm_next: usize,
    start: Instant,
    frozen_s: Option<f64>,
    calls: u64,
    /// Hang faults already served (each blocks once).
    hung: HashSet<usize>,
    sets: Vec<EventSet>,
}

#[derive(Default)]
struct EventSet {
    gpus: Vec<u32>,
    /// Faults (XIDs) delivered and GPUs whose loss was reported, on this set.
    delivered: HashSet<usize>,
    lost_reported: HashSet<u32>,
}

static STATE: Mutex<Option<Fake>> = Mutex::new(None);

/// Which device a handle is: (GPU index, MIG instance).
#[derive(Clone, Copy)]
enum Dev {
    Gpu(u32),
    Mig(u32, u32),
}

fn handle_of(i: u32) -> nvmlDevice_t {
    DEVICES[i as usize..].as_ptr() as nvmlDevice_t
}

fn mig_handle_of(i: u32, k: u32) -> nvmlDevice_t {
    MIG_DEVICES[i as usize * MAX_MIG + k as usize..].as_ptr() as nvmlDevice_t
}

fn decode(h: nvmlDevice_t) -> Option<Dev> {
    let a = h as usize;
    let d = DEVICES.as_ptr() as usize;
    let m = MIG_DEVICES.as_ptr() as usize;
    if (d..d + MAX_GPUS).contains(&a) {
        Some(Dev::Gpu((a - d) as u32))
    } else if (m..m + MAX_GPUS * MAX_MIG).contains(&a) {
        let o = a - m;
        Some(Dev::Mig((o / MAX_MIG) as u32, (o % MAX_MIG) as u32))
    } else {
        None
    }
}

impl Fake {
    fn now_s(&self) -> f64 {
        self.frozen_s.unwrap_or_else(|| self.start.elapsed().as_secs_f64())
    }

    /// Indexes of the faults of `kind` on `gpu` that are in effect now.
    fn active(&self, gpu: u32, kind: FaultKind) -> impl Iterator<Item = (usize, &profile::Fault)> {
        let now = self.now_s();
        let calls = self.calls;
        self.p
            .fault
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.gpu == gpu && f.kind == kind && f.at_s <= now && f.at_call <= calls)
    }

    fn has(&self, gpu: u32, kind: FaultKind) -> bool {
        self.active(gpu, kind).next().is_some()
    }

    fn spec(&self, gpu: u32) -> &GpuSpec {
        &self.p.gpus[gpu as usize]
    }

    /// Where in its cycle a GPU's moving values are: -1..1, a GPU apart from the next.
    fn wave(&self, gpu: u32) -> f64 {
        (self.now_s() / self.p.period_s * std::f64::consts::TAU + f64::from(gpu)).sin()
    }

    fn util(&self, gpu: u32) -> u32 {
        let g = self.spec(gpu);
        let u = f64::from(g.util_pct) + f64::from(g.util_swing_pct) * self.wave(gpu);
        u.round().clamp(0.0, 100.0) as u32
    }

    fn power_mw(&self, gpu: u32) -> u32 {
        let g = self.spec(gpu);
        (f64::from(g.power_mw) + f64::from(g.power_swing_mw) * self.wave(gpu)).max(0.0) as u32
    }

    fn temp_c(&self, gpu: u32) -> u32 {
        let g = self.spec(gpu);
        (f64::from(g.temp_c) + 3.0 * self.wave(gpu)).round().max(0.0) as u32
    }

    /// The NVML_NVLINK_STATE of a link (0 inactive, 1 active, 2 sleep).
    fn link_state(&self, gpu: u32, link: u32) -> u32 {
        self.active(gpu, FaultKind::NvlinkState)
            .filter(|(_, f)| f.link == Some(link))
            .last()
            .and_then(|(_, f)| f.state)
            .unwrap_or(1)
    }

    fn mig_mode(&self, gpu: u32) -> bool {
        !self.spec(gpu).mig.is_empty()
    }
}

/// The call's prologue: the state, counted; a lost GPU answers GPU_IS_LOST.
/// A hang fault on `name` blocks here (with the state unlocked) once.
fn with<F>(name: &str, dev: Option<nvmlDevice_t>, f: F) -> nvmlReturn_t
where
    F: FnOnce(&mut Fake, Option<Dev>) -> nvmlReturn_t,
{
    let mut hang = None;
    {
        let Ok(mut st) = STATE.lock() else {
            return nvmlReturn_enum_NVML_ERROR_UNKNOWN;
        };
        let Some(fake) = st.as_mut() else { return UNINIT };
        // The event thread polls; its waits would make call counts drift.
        if name != "nvmlEventSetWait_v2" {
            fake.calls += 1;
        }
        let d = match dev {
            None => None,
            Some(h) => match decode(h) {
                Some(d @ Dev::Gpu(i)) | Some(d @ Dev::Mig(i, _)) if i < fake.p.count => Some(d),
                _ => return INVALID,
            },
        };
        if let Some(Dev::Gpu(i) | Dev::Mig(i, _)) = d {
            let hit = fake
                .active(i, FaultKind::Hang)
                .find(|(n, f)| f.call.as_deref() == Some(name) && !fake.hung.contains(n))
                .map(|(n, f)| (n, f.seconds.unwrap_or(3.0)));
            if let Some((n, secs)) = hit {
                fake.hung.insert(n);
                hang = Some(secs);
            }
        }
    }
    if let Some(secs) = hang {
        std::thread::sleep(Duration::from_secs_f64(secs));
    }
    let Ok(mut st) = STATE.lock() else {
        return nvmlReturn_enum_NVML_ERROR_UNKNOWN;
    };
    let Some(fake) = st.as_mut() else { return UNINIT };
    let d = dev.and_then(decode);
    if let Some(Dev::Gpu(i) | Dev::Mig(i, _)) = d
        && fake.has(i, FaultKind::GpuLost)
    {
        return LOST;
    }
    f(fake, d)
}

/// Writes through an out pointer, refusing null.
macro_rules! out {
    ($p:expr, $v:expr) => {{
        if $p.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, and NVML's contract makes it point to the type.
        unsafe { *$p = $v };
    }};
}

/// Copies text into a caller's buffer of `len` bytes, NUL-terminated.
fn write_str(buf: *mut c_char, len: c_uint, s: &str) -> nvmlReturn_t {
    if buf.is_null() {
        return INVALID;
    }
    if s.len() + 1 > len as usize {
        return INSUFFICIENT;
    }
    // SAFETY: the caller gave `len` writable bytes; we write s.len() + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, s.len());
        *buf.add(s.len()) = 0;
    }
    SUCCESS
}

fn gpu_of(d: Option<Dev>) -> Option<u32> {
    match d {
        Some(Dev::Gpu(i)) => Some(i),
        _ => None,
    }
}

// ---- init, system ---------------------------------------------------------

fn init() -> nvmlReturn_t {
    let Ok(mut st) = STATE.lock() else {
        return nvmlReturn_enum_NVML_ERROR_UNKNOWN;
    };
    if st.is_some() {
        return SUCCESS;
    }
    let Some(path) = std::env::var_os("FAKE_NVML_PROFILE") else {
        eprintln!("fake NVML: FAKE_NVML_PROFILE is not set");
        return DRIVER_NOT_LOADED;
    };
    let p = match profile::load(std::path::Path::new(&path)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake NVML: {e}");
            return DRIVER_NOT_LOADED;
        }
    };
    if p.count as usize > MAX_GPUS || p.gpus.iter().any(|g| g.mig.len() > MAX_MIG) {
        eprintln!("fake NVML: at most {MAX_GPUS} GPUs and {MAX_MIG} MIG instances each");
        return DRIVER_NOT_LOADED;
    }
    let frozen_s = std::env::var("FAKE_NVML_TIME_S").ok().and_then(|s| s.parse().ok());
    *st = Some(Fake {
        p,
        start: Instant::now(),
        frozen_s,
        calls: 0,
        hung: HashSet::new(),
        sets: Vec::new(),
        gpm: Default::default(),
        gpm_next: 1,
    });
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    // NVML counts inits; the fake keeps its state until the process ends so
    // that a second init in the same process sees the same clock.
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static CStr = match result {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        7 => c"Insufficient Size",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        13 => c"Function Not Found",
        15 => c"GPU is lost",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlSystemGetDriverVersion", None, |f, _| {
        write_str(buf, len, &f.p.driver_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetNVMLVersion(buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlSystemGetNVMLVersion", None, |f, _| {
        write_str(buf, len, &f.p.nvml_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(v: *mut c_int) -> nvmlReturn_t {
    with("nvmlSystemGetCudaDriverVersion_v2", None, |f, _| {
        out!(v, f.p.cuda_driver_version);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(v: *mut c_int) -> nvmlReturn_t {
    nvmlSystemGetCudaDriverVersion_v2(v)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount_v2(n: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetCount_v2", None, |f, _| {
        out!(n, f.p.count);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount(n: *mut c_uint) -> nvmlReturn_t {
    nvmlDeviceGetCount_v2(n)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex_v2(i: c_uint, h: *mut nvmlDevice_t) -> nvmlReturn_t {
    with("nvmlDeviceGetHandleByIndex_v2", None, |f, _| {
        if i >= f.p.count {
            return INVALID;
        }
        if f.has(i, FaultKind::GpuLost) {
            return LOST;
        }
        if f.has(i, FaultKind::NoPermission) {
            return NO_PERMISSION;
        }
        out!(h, handle_of(i));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex(i: c_uint, h: *mut nvmlDevice_t) -> nvmlReturn_t {
    nvmlDeviceGetHandleByIndex_v2(i, h)
}

// ---- identity -------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetIndex(d: nvmlDevice_t, i: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetIndex", Some(d), |_, d| match d {
        Some(Dev::Gpu(g)) => {
            out!(i, g);
            SUCCESS
        }
        _ => INVALID,
    })
}

fn uuid(gpu: u32, mig: Option<u32>) -> String {
    match mig {
        None => format!("GPU-fa4e0000-0000-4000-8000-{:012x}", 0xfa4e_0000 + gpu),
        Some(k) => format!("MIG-fa4e0000-0000-4000-9000-{:012x}", 0xfa4e_0000 + gpu * 16 + k),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetName(d: nvmlDevice_t, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetName", Some(d), |f, d| match d {
        Some(Dev::Gpu(g)) => write_str(buf, len, &f.spec(g).model),
        Some(Dev::Mig(g, k)) => {
            let s = f.spec(g);
            match s.mig.get(k as usize) {
                Some(m) => write_str(buf, len, &format!("{} MIG {}", s.model, m.profile)),
                None => INVALID,
            }
        }
        None => INVALID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUUID(d: nvmlDevice_t, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetUUID", Some(d), |_, d| match d {
        Some(Dev::Gpu(g)) => write_str(buf, len, &uuid(g, None)),
        Some(Dev::Mig(g, k)) => write_str(buf, len, &uuid(g, Some(k))),
        None => INVALID,
    })
}

/// nvmlPciInfo_t for a bus id "DDDDDDDD:BB:DD.F".
fn pci_info(bus_id: &str) -> nvmlPciInfo_t {
    // SAFETY: plain old data; all-zero is valid.
    let mut p: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
    let hex = |s: &str| u32::from_str_radix(s, 16).unwrap_or(0);
    let parts: Vec<&str> = bus_id.split([':', '.']).collect();
    if parts.len() == 4 {
        p.domain = hex(parts[0]);
        p.bus = hex(parts[1]);
        p.device = hex(parts[2]);
    }
    // 0x2330 is the H100 SXM5's PCI device id; the agent does not read it.
    p.pciDeviceId = 0x2330_10de;
    p.pciSubSystemId = 0x16c1_10de;
    for (dst, src) in p.busId.iter_mut().zip(bus_id.bytes().take(31)) {
        *dst = src as c_char;
    }
    let legacy = bus_id.get(4..).unwrap_or("");
    for (dst, src) in p.busIdLegacy.iter_mut().zip(legacy.bytes().take(15)) {
        *dst = src as c_char;
    }
    p
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(d: nvmlDevice_t, p: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    with("nvmlDeviceGetPciInfo_v3", Some(d), |f, d| match gpu_of(d) {
        Some(g) => {
            out!(p, pci_info(&f.p.pci_bus_ids[g as usize]));
            SUCCESS
        }
        None => INVALID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v2(d: nvmlDevice_t, p: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    nvmlDeviceGetPciInfo_v3(d, p)
}

// ---- readings -------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUtilizationRates(d: nvmlDevice_t, u: *mut nvmlUtilization_t) -> nvmlReturn_t {
    with("nvmlDeviceGetUtilizationRates", Some(d), |f, d| match gpu_of(d) {
        // As on real MIG-enabled GPUs: no whole-GPU utilization.
        Some(g) if f.mig_mode(g) => NOT_SUPPORTED,
        Some(g) => {
            out!(
                u,
                nvmlUtilization_t {
                    gpu: f.util(g),
                    memory: f.spec(g).mem_util_pct,
                }
            );
            SUCCESS
        }
        None => NOT_SUPPORTED,
    })
}

fn memory(f: &Fake, d: Option<Dev>) -> Option<(u64, u64, u64)> {
    match d? {
        Dev::Gpu(g) => {
            let s = f.spec(g);
            let used = if s.mig.is_empty() {
                s.mem_used_bytes
            } else {
                s.mig.iter().map(|m| m.mem_used_bytes).sum()
            };
            Some((s.mem_total_bytes, s.mem_reserved_bytes, used))
        }
        Dev::Mig(g, k) => {
            let m = f.spec(g).mig.get(k as usize)?;
            Some((m.mem_total_bytes, 0, m.mem_used_bytes))
        }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo_v2(d: nvmlDevice_t, m: *mut nvmlMemory_v2_t) -> nvmlReturn_t {
    with("nvmlDeviceGetMemoryInfo_v2", Some(d), |f, d| {
        let Some((total, reserved, used)) = memory(f, d) else {
            return INVALID;
        };
        out!(
            m,
            nvmlMemory_v2_t {
                // nvmlMemory_v2: the struct's size and version 2 in the top byte.
                version: (std::mem::size_of::<nvmlMemory_v2_t>() as u32) | (2 << 24),
                total,
                reserved,
                free: total.saturating_sub(reserved + used),
                used,
            }
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo(d: nvmlDevice_t, m: *mut nvmlMemory_t) -> nvmlReturn_t {
    with("nvmlDeviceGetMemoryInfo", Some(d), |f, d| {
        let Some((total, reserved, used)) = memory(f, d) else {
            return INVALID;
        };
        // The v1 struct counts reserved memory as used.
        out!(
            m,
            nvmlMemory_t {
                total,
                free: total.saturating_sub(reserved + used),
                used: used + reserved,
            }
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperature(d: nvmlDevice_t, sensor: c_uint, t: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetTemperature", Some(d), |f, d| match (gpu_of(d), sensor) {
        (Some(g), 0) => {
            out!(t, f.temp_c(g));
            SUCCESS
        }
        (Some(_), _) => INVALID,
        (None, _) => NOT_SUPPORTED,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperatureV(d: nvmlDevice_t, t: *mut nvmlTemperature_t) -> nvmlReturn_t {
    with("nvmlDeviceGetTemperatureV", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if t.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's nvmlTemperature_t.
        let t = unsafe { &mut *t };
        // nvmlTemperature_v1: size 12, version 1 in the top byte.
        if t.version != (std::mem::size_of::<nvmlTemperature_t>() as u32 | (1 << 24)) {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        if t.sensorType != 0 {
            return INVALID;
        }
        t.temperature = f.temp_c(g) as c_int;
        SUCCESS
    })
}

/// How far the GPU is below its maximum operating temperature (T.Limit), °C.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMarginTemperature(d: nvmlDevice_t, m: *mut nvmlMarginTemperature_t) -> nvmlReturn_t {
    with("nvmlDeviceGetMarginTemperature", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if !f.spec(g).tlimit {
            return NOT_SUPPORTED;
        }
        if m.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's nvmlMarginTemperature_t.
        let m = unsafe { &mut *m };
        // nvmlMarginTemperature_v1: size 8, version 1 in the top byte.
        if m.version != (std::mem::size_of::<nvmlMarginTemperature_t>() as u32 | (1 << 24)) {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        m.marginTemperature = f.spec(g).gpu_max_temp_c as c_int - f.temp_c(g) as c_int;
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperatureThreshold(d: nvmlDevice_t, kind: c_uint, t: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetTemperatureThreshold", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        if !s.legacy_thresholds {
            return NOT_SUPPORTED;
        }
        let v = match kind {
            0 => s.shutdown_temp_c,
            1 => s.slowdown_temp_c,
            2 => s.mem_max_temp_c,
            3 => s.gpu_max_temp_c,
            _ => return NOT_SUPPORTED,
        };
        out!(t, v);
        SUCCESS
    })
}

macro_rules! gpu_u32 {
    ($name:ident, $out:ty, |$f:ident, $g:ident| $e:expr) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(d: nvmlDevice_t, v: *mut $out) -> nvmlReturn_t {
            with(stringify!($name), Some(d), |$f, d| match gpu_of(d) {
                Some($g) => {
                    out!(v, $e);
                    SUCCESS
                }
                None => NOT_SUPPORTED,
            })
        }
    };
}

gpu_u32!(nvmlDeviceGetPowerUsage, c_uint, |f, g| f.power_mw(g));
gpu_u32!(nvmlDeviceGetEnforcedPowerLimit, c_uint, |f, g| f.spec(g).power_limit_mw);
gpu_u32!(nvmlDeviceGetPowerManagementLimit, c_uint, |f, g| f
    .spec(g)
    .power_limit_mw);
gpu_u32!(nvmlDeviceGetTotalEnergyConsumption, c_ulonglong, |f, g| {
    // Energy is the integral of the mean power: mW * s = mJ.
    f.spec(g).energy_base_mj + (f64::from(f.spec(g).power_mw) * f.now_s()) as u64
});
gpu_u32!(nvmlDeviceGetCurrentClocksEventReasons, c_ulonglong, |f, g| f
    .spec(g)
    .clocks_event_reasons);
gpu_u32!(nvmlDeviceGetCurrentClocksThrottleReasons, c_ulonglong, |f, g| f
    .spec(g)
    .clocks_event_reasons);
gpu_u32!(nvmlDeviceGetPcieReplayCounter, c_uint, |f, g| f.spec(g).pcie_replay);
gpu_u32!(nvmlDeviceGetMaxPcieLinkGeneration, c_uint, |f, g| f
    .spec(g)
    .pcie_max_gen);
gpu_u32!(nvmlDeviceGetMaxPcieLinkWidth, c_uint, |f, g| f.spec(g).pcie_max_width);
gpu_u32!(nvmlDeviceGetCurrPcieLinkGeneration, c_uint, |f, g| f.spec(g).pcie_gen);
gpu_u32!(nvmlDeviceGetCurrPcieLinkWidth, c_uint, |f, g| f.spec(g).pcie_width);
gpu_u32!(nvmlDeviceGetPersistenceMode, nvmlEnableState_t, |f, g| {
    if f.spec(g).persistence {
        nvmlEnableState_enum_NVML_FEATURE_ENABLED
    } else {
        nvmlEnableState_enum_NVML_FEATURE_DISABLED
    }
});

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetVbiosVersion(d: nvmlDevice_t, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetVbiosVersion", Some(d), |f, d| match gpu_of(d) {
        Some(g) => write_str(buf, len, &f.spec(g).vbios_version),
        None => NOT_SUPPORTED,
    })
}

// ---- NVLink fabric ----------------------------------------------------------

/// What every version of nvmlGpuFabricInfo says: (cluster UUID, status,
/// clique id, state, health summary); `None`: no fabric (NOT_SUPPORTED).
fn fabric(f: &Fake, g: u32) -> Option<([u8; 16], nvmlReturn_t, u32, u8, u8)> {
    let s = f.spec(g);
    let state = s.fabric_state?;
    let completed = state == profile::FabricState::Completed;
    // Status and cluster are only meaningful once registration completed.
    let status = if completed { s.fabric_status } else { SUCCESS };
    let mut uuid = [0u8; 16];
    if completed {
        uuid = *b"fake-nvml-clustr";
    }
    let summary = match (completed, status) {
        (true, 0) => NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
        (true, _) => NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY,
        (false, _) => NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED,
    } as u8;
    Some((uuid, status, u32::from(completed) * 0x7fff, state.nvml(), summary))
}

/// Deprecated (no version field), still exported by current drivers.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuFabricInfo(d: nvmlDevice_t, info: *mut nvmlGpuFabricInfo_t) -> nvmlReturn_t {
    with("nvmlDeviceGetGpuFabricInfo", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let Some((uuid, status, clique, state, _)) = fabric(f, g) else {
            return NOT_SUPPORTED;
        };
        if info.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's struct; zeroed first so that its
        // padding (after the one-byte state) reads 0, as it does from NVML
        // (pynvml declares the state as a 4-byte c_uint).
        unsafe {
            std::ptr::write_bytes(info, 0, 1);
            (*info).clusterUuid = uuid;
            (*info).status = status;
            (*info).cliqueId = clique;
            (*info).state = state;
        }
        SUCCESS
    })
}

/// The versioned call: nvmlGpuFabricInfo_v2 (size 36) or _v3 (size 40), the
/// version in the struct's first field (its size, the version in the top
/// byte); the caller's struct may be the smaller one, so nothing past the
/// version it names is written.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuFabricInfoV(d: nvmlDevice_t, info: *mut nvmlGpuFabricInfoV_t) -> nvmlReturn_t {
    const V2: c_uint = std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as c_uint | (2 << 24);
    const V3: c_uint = std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() as c_uint | (3 << 24);
    with("nvmlDeviceGetGpuFabricInfoV", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if info.is_null() {
            return INVALID;
        }
        // SAFETY: non-null; every version begins with the version field.
        let version = unsafe { *(info as *const c_uint) };
        if version != V2 && version != V3 {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        let Some((uuid, status, clique, state, summary)) = fabric(f, g) else {
            return NOT_SUPPORTED;
        };
        // Zeroed first, padding included (see nvmlDeviceGetGpuFabricInfo),
        // then field by field: v2 and v3 share every field but the last.
        let v2 = info as *mut nvmlGpuFabricInfo_v2_t;
        // SAFETY: non-null, and the caller's version says which struct it
        // is; only that struct's bytes are written.
        unsafe {
            if version == V2 {
                std::ptr::write_bytes(v2, 0, 1);
            } else {
                std::ptr::write_bytes(info, 0, 1);
                (*info).healthSummary = summary;
            }
            (*v2).version = version;
            (*v2).clusterUuid = uuid;
            (*v2).status = status;
            (*v2).cliqueId = clique;
            (*v2).state = state;
            (*v2).healthMask = 0;
        }
        SUCCESS
    })
}

fn clock(s: &GpuSpec, kind: c_uint, max: bool) -> Option<u32> {
    match (kind, max) {
        // Graphics and SM clocks are the same clock domain on these GPUs.
        (0 | 1, false) => Some(s.sm_clock_mhz),
        (0 | 1, true) => Some(s.max_sm_clock_mhz),
        (2, false) => Some(s.mem_clock_mhz),
        (2, true) => Some(s.max_mem_clock_mhz),
        _ => None,
    }
}

/// The current (`max` false) or maximum clock of `kind` into `c`.
fn clock_out(name: &str, d: nvmlDevice_t, kind: c_uint, max: bool, c: *mut c_uint) -> nvmlReturn_t {
    with(name, Some(d), |f, d| {
        match gpu_of(d).and_then(|g| clock(f.spec(g), kind, max)) {
            Some(v) => {
                out!(c, v);
                SUCCESS
            }
            None => NOT_SUPPORTED,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetClockInfo(d: nvmlDevice_t, kind: c_uint, c: *mut c_uint) -> nvmlReturn_t {
    clock_out("nvmlDeviceGetClockInfo", d, kind, false, c)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxClockInfo(d: nvmlDevice_t, kind: c_uint, c: *mut c_uint) -> nvmlReturn_t {
    clock_out("nvmlDeviceGetMaxClockInfo", d, kind, true, c)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPcieThroughput(d: nvmlDevice_t, counter: c_uint, v: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetPcieThroughput", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        // NVML looks at a 20 ms window: traffic comes in bursts, so one
        // window sees twice the mean or nothing (the byte counters give
        // the mean).
        let burst = ((f.now_s() * 50.0).floor() as i64) % 2 == 0;
        let w = |kbps: u32| if burst { kbps.saturating_mul(2) } else { 0 };
        match counter {
            0 => out!(v, w(s.pcie_tx_kbps)),
            1 => out!(v, w(s.pcie_rx_kbps)),
            _ => return INVALID,
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTotalEccErrors(
    d: nvmlDevice_t,
    error: c_uint,
    counter: c_uint,
    v: *mut c_ulonglong,
) -> nvmlReturn_t {
    with("nvmlDeviceGetTotalEccErrors", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        // Volatile and aggregate counts are the same: no reboot in a test.
        match (error, counter) {
            (0, 0 | 1) => out!(v, s.ecc_corrected),
            (1, 0 | 1) => out!(v, s.ecc_uncorrected),
            _ => return INVALID,
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetRemappedRows(
    d: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    with("nvmlDeviceGetRemappedRows", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        let p = f.has(g, FaultKind::RemapPending);
        let x = f.has(g, FaultKind::RemapFailure);
        // A pending remap is an uncorrectable row waiting for a reset.
        out!(corr, s.remap_correctable);
        out!(unc, s.remap_uncorrectable + u32::from(p));
        out!(pending, u32::from(p));
        out!(failure, u32::from(x));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    d: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetComputeRunningProcesses_v3", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if f.has(g, FaultKind::ProcessesNoPermission) {
            return NO_PERMISSION;
        }
        if count.is_null() {
            return INVALID;
        }
        let procs = &f.spec(g).processes;
        // SAFETY: non-null, points to the caller's capacity.
        let cap = unsafe { *count } as usize;
        // SAFETY: as above.
        unsafe { *count = procs.len() as c_uint };
        if procs.is_empty() {
            return SUCCESS;
        }
        if infos.is_null() || cap < procs.len() {
            return INSUFFICIENT;
        }
        for (i, p) in procs.iter().enumerate() {
            // SAFETY: the caller gave `cap` >= procs.len() entries.
            unsafe {
                *infos.add(i) = nvmlProcessInfo_t {
                    pid: p.pid,
                    usedGpuMemory: p.used_mem_bytes,
                    // 0xFFFFFFFF: not on a MIG instance.
                    gpuInstanceId: u32::MAX,
                    computeInstanceId: u32::MAX,
                }
            };
        }
        SUCCESS
    })
}

// ---- field values ---------------------------------------------------------

fn field(f: &Fake, g: u32, v: &mut nvmlFieldValue_t) {
    use field_id::*;
    let s = f.spec(g);
    let now = f.now_s();
    v.timestamp = (now * 1e6) as i64;
    v.latencyUsec = 0;
    let mut uint = |x: u32| {
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
        v.value.uiVal = x;
        SUCCESS
    };
    let links = s.nvlinks;
    let scope = v.scopeId;
    // T.Limit thresholds: degrees below the GPU's maximum operating
    // temperature (negative: above it), as nvidia-smi's "T.Limit" lines.
    let tlimit = |v: &mut nvmlFieldValue_t, limit: u32| {
        if !s.tlimit {
            return NOT_SUPPORTED;
        }
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT;
        v.value.siVal = s.gpu_max_temp_c as c_int - limit as c_int;
        SUCCESS
    };
    let rc = match v.fieldId {
        NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT => tlimit(v, s.shutdown_temp_c),
        NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT => tlimit(v, s.slowdown_temp_c),
        NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT => tlimit(v, s.mem_max_temp_c),
        NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT => tlimit(v, s.gpu_max_temp_c),
        NVML_FI_DEV_MEMORY_TEMP => match s.hbm_temp_c {
            Some(t) if !f.has(g, FaultKind::HbmTempNotSupported) => uint(t),
            _ => NOT_SUPPORTED,
        },
        NVML_FI_DEV_NVLINK_GET_STATE if scope < links => uint(f.link_state(g, scope)),
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX | NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX if scope < links => {
            // Counters, KiB; a link that is not active moves no data.
            let kib = if f.link_state(g, scope) == 1 {
                (s.nvlink_kib_per_s as f64 * now) as u64
            } else {
                0
            };
            v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            v.value.ullVal = kib;
            SUCCESS
        }
        NVML_FI_DEV_NVLINK_GET_STATE
        | NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
        | NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX => INVALID,
        NVML_FI_DEV_PCIE_COUNT_TX_BYTES | NVML_FI_DEV_PCIE_COUNT_RX_BYTES => {
            let kbps = if v.fieldId == NVML_FI_DEV_PCIE_COUNT_TX_BYTES {
                s.pcie_tx_kbps
            } else {
                s.pcie_rx_kbps
            };
            v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            v.value.ullVal = (f64::from(kbps) * 1000.0 * now) as u64;
            SUCCESS
        }
        _ => NOT_SUPPORTED,
    };
    v.nvmlReturn = rc;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    d: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetFieldValues", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if values.is_null() || count < 0 {
            return INVALID;
        }
        // SAFETY: the caller gave `count` field values.
        let vs = unsafe { std::slice::from_raw_parts_mut(values, count as usize) };
        for v in vs {
            field(f, g, v);
        }
        SUCCESS
    })
}

// ---- NVLink ---------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkState(d: nvmlDevice_t, link: c_uint, st: *mut nvmlEnableState_t) -> nvmlReturn_t {
    with("nvmlDeviceGetNvLinkState", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if link >= f.spec(g).nvlinks {
            return INVALID;
        }
        // Trained links, asleep or not, are enabled; only an inactive one is not.
        out!(st, u32::from(f.link_state(g, link) != 0));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    d: nvmlDevice_t,
    link: c_uint,
    p: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetNvLinkRemotePciInfo_v2", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if link >= f.spec(g).nvlinks {
            return INVALID;
        }
        // On an HGX board every link goes to one of the NVSwitches.
        let sw = link % 4;
        out!(p, pci_info(&format!("00000000:{:02X}:00.0", 0xc0 + sw)));
        SUCCESS
    })
}

// ---- MIG ------------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigMode(d: nvmlDevice_t, current: *mut c_uint, pending: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetMigMode", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        let m = u32::from(f.mig_mode(g));
        out!(current, m);
        out!(pending, m);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxMigDeviceCount(d: nvmlDevice_t, n: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetMaxMigDeviceCount", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        out!(n, if f.mig_mode(g) { 7 } else { 0 });
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    d: nvmlDevice_t,
    k: c_uint,
    h: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetMigDeviceHandleByIndex", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        if (k as usize) >= f.spec(g).mig.len() {
            return nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
        }
        out!(h, mig_handle_of(g, k));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceIsMigDeviceHandle(d: nvmlDevice_t, is: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceIsMigDeviceHandle", Some(d), |_, d| {
        out!(is, u32::from(matches!(d, Some(Dev::Mig(..)))));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceId(d: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetGpuInstanceId", Some(d), |_, d| match d {
        Some(Dev::Mig(_, k)) => {
            // NVML numbers GPU instances from 1 upwards in creation order here.
            out!(id, k + 1);
            SUCCESS
        }
        _ => INVALID,
    })
}

// ---- GPM ------------------------------------------------------------------

/// GPM sample handles are numbers dressed as pointers: never dereferenced.
fn gpm_key(s: nvmlGpmSample_t) -> usize {
    s as usize
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmQueryDeviceSupport(d: nvmlDevice_t, s: *mut nvmlGpmSupport_t) -> nvmlReturn_t {
    with("nvmlGpmQueryDeviceSupport", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        if s.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's struct.
        let s = unsafe { &mut *s };
        if s.version != NVML_GPM_SUPPORT_VERSION {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        s.isSupportedDevice = u32::from(f.spec(g).gpm.is_some());
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleAlloc(s: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmSampleAlloc", None, |f, _| {
        let k = f.gpm_next * 16;
        f.gpm_next += 1;
        f.gpm.insert(k, None);
        out!(s, k as nvmlGpmSample_t);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(s: nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmSampleFree", None, |f, _| match f.gpm.remove(&gpm_key(s)) {
        Some(_) => SUCCESS,
        None => INVALID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleGet(d: nvmlDevice_t, s: nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmSampleGet", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        if f.spec(g).gpm.is_none() {
            return NOT_SUPPORTED;
        }
        let now = f.now_s();
        match f.gpm.get_mut(&gpm_key(s)) {
            Some(slot) => {
                *slot = Some((g, None, now));
                SUCCESS
            }
            None => INVALID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMigSampleGet(d: nvmlDevice_t, gi: c_uint, s: nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmMigSampleGet", Some(d), |f, d| {
        // Asked of the parent GPU, by GPU instance id (1-based here, as
        // nvmlDeviceGetGpuInstanceId gives them).
        let Some(Dev::Gpu(g)) = d else { return INVALID };
        if f.spec(g).gpm.is_none() {
            return NOT_SUPPORTED;
        }
        let Some(k) = gi.checked_sub(1).filter(|&k| (k as usize) < f.spec(g).mig.len()) else {
            return nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
        };
        let now = f.now_s();
        match f.gpm.get_mut(&gpm_key(s)) {
            Some(slot) => {
                *slot = Some((g, Some(k), now));
                SUCCESS
            }
            None => INVALID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMetricsGet(m: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    with("nvmlGpmMetricsGet", None, |f, _| {
        if m.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's request.
        let m = unsafe { &mut *m };
        if m.version != NVML_GPM_METRICS_GET_VERSION || m.numMetrics as usize > m.metrics.len() {
            return INVALID;
        }
        let (Some(Some((g1, k1, _))), Some(Some((g2, k2, _)))) =
            (f.gpm.get(&gpm_key(m.sample1)), f.gpm.get(&gpm_key(m.sample2)))
        else {
            return INVALID;
        };
        // Both samples of one GPU, or of one MIG instance.
        if (g1, k1) != (g2, k2) {
            return INVALID;
        }
        let Some(gpu_spec) = f.spec(*g1).gpm else {
            return NOT_SUPPORTED;
        };
        // An instance's own figures where the profile gives them, else the GPU's.
        let spec = k1
            .and_then(|k| f.spec(*g1).mig.get(k as usize)?.gpm)
            .unwrap_or(gpu_spec);
        for x in &mut m.metrics[..m.numMetrics as usize] {
            let v = match x.metricId {
                nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL => Some(spec.sm_active_pct),
                nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY => Some(spec.sm_occupancy_pct),
                nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL => Some(spec.tensor_active_pct),
                nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL => Some(spec.dram_bw_pct),
                _ => None,
            };
            match v {
                Some(v) => {
                    x.nvmlReturn = SUCCESS;
                    x.value = v;
                }
                None => x.nvmlReturn = NOT_SUPPORTED,
            }
        }
        SUCCESS
    })
}

// ---- events ---------------------------------------------------------------

fn set_index(s: nvmlEventSet_t) -> Option<usize> {
    let a = s as usize;
    let b = SETS.as_ptr() as usize;
    (b..b + MAX_SETS).contains(&a).then(|| a - b)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetCreate(s: *mut nvmlEventSet_t) -> nvmlReturn_t {
    with("nvmlEventSetCreate", None, |f, _| {
        if f.sets.len() >= MAX_SETS {
            return nvmlReturn_enum_NVML_ERROR_MEMORY;
        }
        f.sets.push(EventSet::default());
        out!(s, SETS[f.sets.len() - 1..].as_ptr() as nvmlEventSet_t);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(s: nvmlEventSet_t) -> nvmlReturn_t {
    with("nvmlEventSetFree", None, |f, _| {
        match set_index(s).and_then(|i| f.sets.get_mut(i)) {
            Some(set) => {
                // Slots are not reused: a freed set just stops listening.
                set.gpus.clear();
                SUCCESS
            }
            None => INVALID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetSupportedEventTypes(d: nvmlDevice_t, types: *mut c_ulonglong) -> nvmlReturn_t {
    with("nvmlDeviceGetSupportedEventTypes", Some(d), |_, _| {
        out!(types, EVENT_XID);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(d: nvmlDevice_t, types: c_ulonglong, s: nvmlEventSet_t) -> nvmlReturn_t {
    with("nvmlDeviceRegisterEvents", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if types & !EVENT_XID != 0 {
            return NOT_SUPPORTED;
        }
        match set_index(s).and_then(|i| f.sets.get_mut(i)) {
            Some(set) => {
                if !set.gpus.contains(&g) {
                    set.gpus.push(g);
                }
                SUCCESS
            }
            None => INVALID,
        }
    })
}

/// The next event for a set, if one is due: an XID, or the loss of one of
/// its GPUs (reported once per set, as GPU_IS_LOST from the wait itself).
fn next_event(f: &mut Fake, si: usize, data: *mut nvmlEventData_t) -> Option<nvmlReturn_t> {
    let gpus = f.sets.get(si)?.gpus.clone();
    for &g in &gpus {
        let due: Vec<(usize, u64)> = f
            .active(g, FaultKind::Xid)
            .map(|(n, x)| (n, x.xid.unwrap_or(0)))
            .collect();
        for (n, xid) in due {
            let set = &mut f.sets[si];
            if set.delivered.insert(n) {
                if data.is_null() {
                    return Some(INVALID);
                }
                // SAFETY: non-null, an nvmlEventData_t of the caller's.
                unsafe {
                    *data = nvmlEventData_t {
                        device: handle_of(g),
                        eventType: EVENT_XID,
                        eventData: xid,
                        gpuInstanceId: u32::MAX,
                        computeInstanceId: u32::MAX,
                    }
                };
                return Some(SUCCESS);
            }
        }
    }
    for &g in &gpus {
        if f.has(g, FaultKind::GpuLost) && f.sets[si].lost_reported.insert(g) {
            return Some(LOST);
        }
    }
    None
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetWait_v2(
    s: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
    loop {
        let rc = with("nvmlEventSetWait_v2", None, |f, _| {
            let Some(si) = set_index(s).filter(|&i| i < f.sets.len()) else {
                return INVALID;
            };
            next_event(f, si, data).unwrap_or(TIMEOUT)
        });
        if rc != TIMEOUT || Instant::now() >= deadline {
            return rc;
        }
        std::thread::sleep(Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())));
    }
}
