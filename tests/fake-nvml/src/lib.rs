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

// The exported functions live in one module per concern; the shared
// state, handles and pointer helpers stay here, in the crate root, which
// those modules reach with `use crate::*` (as in tests/fake-amdsmi). Declared
// last: they use the macros above, which are in scope from their definition on.
mod events;
mod fields;
mod gpm;
mod identity;
mod init;
mod links;
mod mig;
mod readings;

pub use events::*;
pub use fields::*;
pub use gpm::*;
pub use identity::*;
pub use init::*;
pub use links::*;
pub use mig::*;
pub use readings::*;
