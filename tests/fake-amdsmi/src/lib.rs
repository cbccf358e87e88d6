//! A fake `libamd_smi.so` for tests: AMD SMI's C symbols, signatures, struct
//! layouts and status codes (the shared `fleetop-amdsmi-abi` crate, after
//! AMD's `amdsmi` 7.0.2), answering from a TOML profile
//! (`FAKE_AMDSMI_PROFILE`, a path).
//!
//! Time: seconds since the first `amdsmi_init`, or frozen at
//! `FAKE_AMDSMI_TIME_S` so that two programs (the agent and AMD's `amdsmi`)
//! read the same values.
//!
//! It exports all 184 symbols `amdsmi` 7.0.2 binds when imported (an import
//! fails on a missing one); those fleetop does not read answer
//! AMDSMI_STATUS_NOT_SUPPORTED (`stubs.rs`).
//!
//! Handles: a socket is a physical GPU; its processors are its compute
//! partitions (1 in SPX, 8 in CPX on MI300X), in order, so processor index
//! `gpu * partitions + partition` is amd-smi's GPU index. Handles are the
//! addresses of bytes in two static arrays: stable, distinct, never read.
//!
//! Every exported function checks its pointers and handles and never panics
//! across the C boundary: a bad argument is AMDSMI_STATUS_INVAL, a call
//! before `amdsmi_init` AMDSMI_STATUS_NOT_INIT.

// The exported functions are C entry points whose contract is amdsmi.h's:
// callers pass pointers AMD SMI documents, and each is null-checked before use.
#![allow(clippy::missing_safety_doc, clippy::not_unsafe_ptr_arg_deref)]

mod profile;
mod stubs;

use std::collections::{BTreeMap, HashSet};
use std::ffi::{CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use fleetop_amdsmi_abi::*;
use profile::{FaultKind, GpuSpec, Profile};

pub(crate) const MAX_GPUS: usize = 32;
const MAX_PARTS: usize = 8;
static SOCKETS: [u8; MAX_GPUS] = [0; MAX_GPUS];
static PROCESSORS: [u8; MAX_GPUS * MAX_PARTS] = [0; MAX_GPUS * MAX_PARTS];

/// The wall clock the fake's time zero maps to (reference timestamps).
const EPOCH_S: f64 = 1_767_225_600.0;
/// amdsmi_get_energy_count's resolution, µJ per count.
const ENERGY_RESOLUTION_UJ: f32 = 15.259;

const OK: amdsmi_status_t = AMDSMI_STATUS_SUCCESS;
const INVAL: amdsmi_status_t = AMDSMI_STATUS_INVAL;
const NOT_SUPPORTED: amdsmi_status_t = AMDSMI_STATUS_NOT_SUPPORTED;

struct Fake {
    p: Profile,
    parts: u32,
    start: Instant,
    frozen_s: Option<f64>,
    /// amdsmi_init calls not yet matched by amdsmi_shut_down.
    inits: u32,
    /// amdsmi_init asked for AMD GPUs.
    gpus: bool,
    /// Processors (logical index) initialised for events, with their masks.
    listening: BTreeMap<u32, u64>,
    /// Event faults delivered since their processor's listening began.
    delivered: HashSet<usize>,
}

static STATE: Mutex<Option<Fake>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<Fake>> {
    // A panic is caught inside the lock (see `guarded`); the state is still whole.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A processor: physical GPU, its partition, and amd-smi's index for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Proc {
    gpu: u32,
    part: u32,
    index: u32,
}

fn socket_handle(gpu: u32) -> amdsmi_socket_handle {
    SOCKETS[gpu as usize..].as_ptr() as amdsmi_socket_handle
}

fn processor_handle(gpu: u32, part: u32) -> amdsmi_processor_handle {
    PROCESSORS[gpu as usize * MAX_PARTS + part as usize..].as_ptr() as amdsmi_processor_handle
}

impl Fake {
    fn now_s(&self) -> f64 {
        self.frozen_s.unwrap_or_else(|| self.start.elapsed().as_secs_f64())
    }

    fn sockets(&self) -> u32 {
        if self.gpus { self.p.count } else { 0 }
    }

    fn proc_of(&self, gpu: u32, part: u32) -> Proc {
        Proc {
            gpu,
            part,
            index: gpu * self.parts + part,
        }
    }

    fn decode(&self, h: amdsmi_processor_handle) -> Option<Proc> {
        let a = h as usize;
        let base = PROCESSORS.as_ptr() as usize;
        if !(base..base + PROCESSORS.len()).contains(&a) {
            return None;
        }
        let (gpu, part) = ((a - base) / MAX_PARTS, (a - base) % MAX_PARTS);
        (gpu < self.sockets() as usize && part < self.parts as usize).then(|| self.proc_of(gpu as u32, part as u32))
    }

    fn decode_socket(&self, h: amdsmi_socket_handle) -> Option<u32> {
        let a = h as usize;
        let base = SOCKETS.as_ptr() as usize;
        (base..base + self.sockets() as usize)
            .contains(&a)
            .then(|| (a - base) as u32)
    }

    /// The faults of `kind` on `gpu` in effect now, with their indexes.
    fn active(&self, gpu: u32, kind: FaultKind) -> impl Iterator<Item = (usize, &profile::Fault)> {
        let now = self.now_s();
        self.p
            .fault
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.gpu == gpu && f.kind == kind && f.at_s <= now)
    }

    fn spec(&self, gpu: u32) -> &GpuSpec {
        &self.p.gpus[gpu as usize]
    }

    /// Where in its cycle a value is: -1..1, one step apart per `phase`.
    fn wave(&self, phase: u32) -> f64 {
        (self.now_s() / self.p.period_s * std::f64::consts::TAU + f64::from(phase)).sin()
    }

    fn gfx_activity(&self, p: Proc) -> u32 {
        let g = self.spec(p.gpu);
        let v = f64::from(g.gfx_activity_pct) + f64::from(g.gfx_activity_swing_pct) * self.wave(p.index);
        v.round().clamp(0.0, 100.0) as u32
    }

    /// The GPU's GFX activity: the mean of its partitions'.
    fn gpu_gfx_activity(&self, gpu: u32) -> u32 {
        let sum: u32 = (0..self.parts).map(|q| self.gfx_activity(self.proc_of(gpu, q))).sum();
        (f64::from(sum) / f64::from(self.parts)).round() as u32
    }

    fn umc_activity(&self, p: Proc) -> u32 {
        let g = self.spec(p.gpu);
        let swing = f64::from(g.gfx_activity_swing_pct) / 2.0;
        (f64::from(g.umc_activity_pct) + swing * self.wave(p.index))
            .round()
            .clamp(0.0, 100.0) as u32
    }

    fn power_w(&self, gpu: u32) -> u32 {
        let g = self.spec(gpu);
        (f64::from(g.power_w) + f64::from(g.power_swing_w) * self.wave(gpu))
            .round()
            .max(0.0) as u32
    }

    fn throttle(&self, gpu: u32) -> Option<&profile::Fault> {
        self.active(gpu, FaultKind::ThermalThrottle).map(|(_, f)| f).last()
    }

    fn hotspot_c(&self, gpu: u32) -> i64 {
        match self.throttle(gpu) {
            Some(f) => f.hotspot_temp_c.unwrap_or(self.spec(gpu).hotspot_critical_c + 2),
            None => self.spec(gpu).hotspot_temp_c + (3.0 * self.wave(gpu)).round() as i64,
        }
    }

    fn vram_temp_c(&self, gpu: u32) -> i64 {
        self.spec(gpu).vram_temp_c + (2.0 * self.wave(gpu)).round() as i64
    }

    fn edge_temp_c(&self, gpu: u32) -> Option<i64> {
        self.spec(gpu)
            .edge_temp_c
            .map(|t| t + (2.0 * self.wave(gpu)).round() as i64)
    }

    fn gfx_clock_mhz(&self, gpu: u32) -> u32 {
        match self.throttle(gpu) {
            Some(f) => f.gfx_clock_mhz.unwrap_or(self.spec(gpu).gfx_min_mhz),
            None => self.spec(gpu).gfx_clock_mhz,
        }
    }

    /// ms the GPU has spent thermally throttled.
    fn throttled_ms(&self, gpu: u32) -> u64 {
        let now = self.now_s();
        self.active(gpu, FaultKind::ThermalThrottle)
            .map(|(_, f)| f.at_s)
            .reduce(f64::min)
            .map_or(0, |at| ((now - at) * 1000.0) as u64)
    }

    fn processes(&self, p: Proc) -> impl Iterator<Item = &profile::Process> {
        self.spec(p.gpu)
            .processes
            .iter()
            .filter(move |pr| pr.partition == p.part)
    }

    fn vram_total(&self, p: Proc) -> u64 {
        self.spec(p.gpu).vram_total_bytes / u64::from(self.parts)
    }

    fn vram_used(&self, p: Proc) -> u64 {
        let base = self.spec(p.gpu).vram_base_used_bytes / u64::from(self.parts);
        base + self.processes(p).map(|pr| pr.vram_bytes).sum::<u64>()
    }

    fn gtt_used(&self, p: Proc) -> u64 {
        self.processes(p).map(|pr| pr.gtt_bytes).sum()
    }

    /// The physical GPU XGMI link `k` of `gpu` goes to: the others in order.
    fn peer_of(&self, gpu: u32, k: u32) -> Option<u32> {
        let peer = if k < gpu { k } else { k + 1 };
        (peer < self.p.count).then_some(peer)
    }

    /// When the link from `gpu` to `peer` went down (either end's fault).
    fn link_down_since(&self, gpu: u32, peer: u32) -> Option<f64> {
        let now = self.now_s();
        self.p
            .fault
            .iter()
            .filter(|f| f.kind == FaultKind::XgmiLinkDown && f.at_s <= now)
            .filter(|f| (f.gpu == gpu && f.peer == Some(peer)) || (f.gpu == peer && f.peer == Some(gpu)))
            .map(|f| f.at_s)
            .reduce(f64::min)
    }

    /// KB moved over the link to `peer` (each direction), frozen when it went down.
    fn xgmi_kb(&self, gpu: u32, peer: u32) -> u64 {
        let t = self
            .link_down_since(gpu, peer)
            .unwrap_or(self.now_s())
            .min(self.now_s());
        let rate = self.spec(gpu).xgmi_kb_per_s as f64;
        // A link apart from the next, so that counters differ.
        (rate * t) as u64 + u64::from(gpu) * 1_000 + u64::from(peer) * 10
    }

    fn xgmi_errors(&self, gpu: u32) -> u32 {
        let down = (0..self.p.count)
            .filter(|&q| q != gpu && self.link_down_since(gpu, q).is_some())
            .count();
        match down {
            0 => AMDSMI_XGMI_STATUS_NO_ERRORS,
            1 => AMDSMI_XGMI_STATUS_ERROR,
            _ => AMDSMI_XGMI_STATUS_MULTIPLE_ERRORS,
        }
    }

    /// [correctable, uncorrectable, deferred] of one RAS block.
    fn ecc(&self, gpu: u32, name: &str) -> [u64; 3] {
        let mut c = self.spec(gpu).ecc_counts.get(name).copied().unwrap_or_default();
        for (_, f) in self.active(gpu, FaultKind::RasError) {
            if f.block.as_deref() == Some(name) {
                c[0] += f.correctable;
                c[1] += f.uncorrectable;
                c[2] += f.deferred;
            }
        }
        c
    }

    fn ecc_enabled(&self, gpu: u32) -> u64 {
        self.spec(gpu)
            .ecc_blocks
            .iter()
            .filter_map(|b| profile::block_bit(b))
            .fold(0, |m, b| m | b)
    }

    fn block_name(block: u64) -> Option<&'static str> {
        GPU_BLOCKS.iter().find(|(b, _)| *b == block).map(|(_, n)| *n)
    }

    fn bad_pages(&self, gpu: u32) -> Vec<amdsmi_retired_page_record_t> {
        let mut out = Vec::new();
        for (n, f) in self.active(gpu, FaultKind::RasError) {
            let status = f
                .page_status
                .as_deref()
                .and_then(profile::page_status)
                .unwrap_or(AMDSMI_MEM_PAGE_STATUS_PENDING);
            for k in 0..f.retired_pages {
                let mut r = amdsmi_retired_page_record_t::zeroed();
                r.page_address = 0x1_2340_0000 + (n as u64) * 0x10_0000 + u64::from(k) * 0x1000;
                r.page_size = 4096;
                r.status = status;
                out.push(r);
            }
        }
        out
    }

    fn serial(&self, gpu: u32) -> u64 {
        self.spec(gpu).serial_base.wrapping_add(u64::from(gpu))
    }

    fn uuid(&self, p: Proc) -> String {
        let s = self.serial(p.gpu);
        let g = self.spec(p.gpu);
        format!(
            "{:02x}ff{:04x}-{:04x}-1000-80{:02x}-{:012x}",
            s & 0xFF,
            g.device_id & 0xFFFF,
            p.part,
            (s >> 8) & 0xFF,
            s & 0xFFFF_FFFF_FFFF
        )
    }

    fn bdf(&self, p: Proc) -> amdsmi_bdf_t {
        let b = amdsmi_bdf_t::parse(&self.p.bdfs[p.gpu as usize]).unwrap_or_default();
        // Partitions are not PCI functions; AMD SMI reports the partition
        // in the BDF's function number all the same.
        amdsmi_bdf_t::new(b.domain_number(), b.bus_number(), b.device_number(), p.part as u8)
    }

    /// The status a lost GPU answers, and how long it blocks first.
    fn lost(&self, gpu: u32) -> Option<(amdsmi_status_t, f64)> {
        self.active(gpu, FaultKind::GpuLost).map(|(_, f)| f).last().map(|f| {
            let status = f
                .status
                .as_deref()
                .and_then(profile::status_code)
                .unwrap_or(AMDSMI_STATUS_NOT_FOUND);
            (status, f.hang_s.unwrap_or(0.0).clamp(0.0, 30.0))
        })
    }
}

/// Runs `f` with a panic turned into a status.
fn guarded(f: impl FnOnce() -> amdsmi_status_t) -> amdsmi_status_t {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(AMDSMI_STATUS_INTERNAL_EXCEPTION)
}

/// The prologue of a call on a processor: initialised, a known handle, and
/// the GPU not lost (unless `cached`: what AMD SMI keeps from init, such as
/// the BDF and the processor type, still answers on a lost GPU).
fn on_proc(
    h: amdsmi_processor_handle,
    cached: bool,
    f: impl FnOnce(&Fake, Proc) -> amdsmi_status_t,
) -> amdsmi_status_t {
    let hang;
    {
        let st = state();
        let Some(fake) = st.as_ref().filter(|f| f.inits > 0) else {
            return AMDSMI_STATUS_NOT_INIT;
        };
        let Some(p) = fake.decode(h) else { return INVAL };
        match fake.lost(p.gpu).filter(|_| !cached) {
            None => return guarded(|| f(fake, p)),
            Some(lost) => hang = lost,
        }
    }
    if hang.1 > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(hang.1));
    }
    hang.0
}

/// The prologue of a call that takes no processor.
fn on_lib(f: impl FnOnce(&mut Fake) -> amdsmi_status_t) -> amdsmi_status_t {
    let mut st = state();
    match st.as_mut().filter(|f| f.inits > 0) {
        Some(fake) => guarded(|| f(fake)),
        None => AMDSMI_STATUS_NOT_INIT,
    }
}

/// Writes a value through an out pointer, refusing null.
fn put<T>(p: *mut T, v: T) -> amdsmi_status_t {
    if p.is_null() {
        return INVAL;
    }
    // SAFETY: non-null, and amdsmi.h's contract makes it point to a T.
    unsafe { p.write(v) };
    OK
}

/// Copies text into a caller's buffer of `len` bytes, NUL-terminated.
fn put_str(buf: *mut c_char, len: usize, s: &str) -> amdsmi_status_t {
    if buf.is_null() || len == 0 {
        return INVAL;
    }
    if s.len() + 1 > len {
        return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller gave `len` writable bytes; we write s.len() + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, s.len());
        *buf.add(s.len()) = 0;
    }
    OK
}

/// Writes up to `*count` items into `out` (a null `out` asks for the count)
/// and sets `*count` to how many there are, or were written.
fn put_list<T: Copy>(count: *mut u32, out: *mut T, items: &[T], short: amdsmi_status_t) -> amdsmi_status_t {
    if count.is_null() {
        return INVAL;
    }
    // SAFETY: non-null, a u32 by contract.
    let room = unsafe { *count } as usize;
    if out.is_null() {
        // SAFETY: as above.
        unsafe { *count = items.len() as u32 };
        return OK;
    }
    let n = room.min(items.len());
    // SAFETY: the caller gave room for `room` items; we write n <= room.
    unsafe {
        std::ptr::copy_nonoverlapping(items.as_ptr(), out, n);
        *count = n as u32;
    }
    if n < items.len() { short } else { OK }
}

// ---- init and the library ----------------------------------------------------

/// Loads a profile and starts the clock (tests call this directly).
fn start(path: &Path, frozen_s: Option<f64>, flags: u64) -> amdsmi_status_t {
    let mut st = state();
    if let Some(fake) = st.as_mut() {
        fake.inits += 1;
        fake.gpus |= flags & AMDSMI_INIT_AMD_GPUS != 0;
        return OK;
    }
    let p = match profile::load(path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake AMD SMI: {e}");
            return AMDSMI_STATUS_INIT_ERROR;
        }
    };
    *st = Some(Fake {
        parts: p.partitions(),
        p,
        start: Instant::now(),
        frozen_s,
        inits: 1,
        gpus: flags & AMDSMI_INIT_AMD_GPUS != 0,
        listening: BTreeMap::new(),
        delivered: HashSet::new(),
    });
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_init(flags: u64) -> amdsmi_status_t {
    guarded(|| {
        let Some(path) = std::env::var_os("FAKE_AMDSMI_PROFILE") else {
            eprintln!("fake AMD SMI: FAKE_AMDSMI_PROFILE is not set");
            return AMDSMI_STATUS_DRIVER_NOT_LOADED;
        };
        let frozen = std::env::var("FAKE_AMDSMI_TIME_S").ok().and_then(|s| s.parse().ok());
        start(Path::new(&path), frozen, flags)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_shut_down() -> amdsmi_status_t {
    // The state (and its clock) stays for the life of the process, so that
    // a second init sees the same time; calls between answer NOT_INIT.
    on_lib(|f| {
        f.inits -= 1;
        if f.inits == 0 {
            f.listening.clear();
        }
        OK
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_status_code_to_string(status: amdsmi_status_t, out: *mut *const c_char) -> amdsmi_status_t {
    static NAMES: OnceLock<BTreeMap<u32, CString>> = OnceLock::new();
    guarded(|| {
        let names = NAMES.get_or_init(|| {
            (0..=60u32)
                .chain([AMDSMI_STATUS_MAP_ERROR, AMDSMI_STATUS_UNKNOWN_ERROR])
                .filter_map(|s| Some((s, CString::new(status_name(s)?).ok()?)))
                .collect()
        });
        match names.get(&status) {
            Some(s) => put(out, s.as_ptr()),
            None => INVAL,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_lib_version(out: *mut amdsmi_version_t) -> amdsmi_status_t {
    static BUILD: &std::ffi::CStr = c"fleetop fake";
    on_lib(|f| {
        let mut v = amdsmi_version_t::zeroed();
        [v.major, v.minor, v.release] = f.p.lib_version;
        v.build = BUILD.as_ptr();
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_free_name_value_pairs(_p: *mut c_void) {
    // The fake never hands out name-value pairs (the calls that would are
    // NOT_SUPPORTED), so there is nothing to free.
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_socket_handles(count: *mut u32, out: *mut amdsmi_socket_handle) -> amdsmi_status_t {
    on_lib(|f| {
        let handles: Vec<_> = (0..f.sockets()).map(socket_handle).collect();
        put_list(count, out, &handles, OK)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_socket_info(socket: amdsmi_socket_handle, len: u64, name: *mut c_char) -> amdsmi_status_t {
    on_lib(|f| match f.decode_socket(socket) {
        Some(g) => {
            let bdf = f.p.bdfs[g as usize].rsplit_once('.').map_or("", |(b, _)| b).to_string();
            put_str(name, len as usize, &bdf)
        }
        None => INVAL,
    })
}

fn processors_of(f: &Fake, socket: amdsmi_socket_handle) -> Option<Vec<amdsmi_processor_handle>> {
    let g = f.decode_socket(socket)?;
    Some((0..f.parts).map(|q| processor_handle(g, q)).collect())
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_handles(
    socket: amdsmi_socket_handle,
    count: *mut u32,
    out: *mut amdsmi_processor_handle,
) -> amdsmi_status_t {
    on_lib(|f| match processors_of(f, socket) {
        Some(h) => put_list(count, out, &h, OK),
        None => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_handles_by_type(
    socket: amdsmi_socket_handle,
    kind: processor_type_t,
    out: *mut amdsmi_processor_handle,
    count: *mut u32,
) -> amdsmi_status_t {
    on_lib(|f| match processors_of(f, socket) {
        Some(h) if kind == AMDSMI_PROCESSOR_TYPE_AMD_GPU => put_list(count, out, &h, OK),
        Some(_) => put_list(count, out, &[], OK),
        None => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_handle_from_bdf(bdf: u64, out: *mut amdsmi_processor_handle) -> amdsmi_status_t {
    on_lib(|f| {
        let want = amdsmi_bdf_t { as_uint: bdf };
        for g in 0..f.sockets() {
            for q in 0..f.parts {
                if f.bdf(f.proc_of(g, q)) == want {
                    return put(out, processor_handle(g, q));
                }
            }
        }
        AMDSMI_STATUS_NOT_FOUND
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_type(h: amdsmi_processor_handle, out: *mut processor_type_t) -> amdsmi_status_t {
    on_proc(h, true, |_, _| put(out, AMDSMI_PROCESSOR_TYPE_AMD_GPU))
}

// ---- identity ------------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_device_bdf(h: amdsmi_processor_handle, out: *mut amdsmi_bdf_t) -> amdsmi_status_t {
    on_proc(h, true, |f, p| put(out, f.bdf(p)))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_device_uuid(
    h: amdsmi_processor_handle,
    len: *mut u32,
    out: *mut c_char,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if len.is_null() {
            return INVAL;
        }
        let uuid = f.uuid(p);
        // SAFETY: non-null, a u32 by contract.
        let room = unsafe { *len } as usize;
        let r = put_str(out, room, &uuid);
        if r == OK {
            // SAFETY: as above.
            unsafe { *len = uuid.len() as u32 + 1 };
        }
        r
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_id(h: amdsmi_processor_handle, out: *mut u16) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.spec(p.gpu).device_id as u16))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_asic_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_asic_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_asic_info_t::zeroed();
        set_c_str(&mut v.market_name, &g.market_name);
        v.vendor_id = g.vendor_id;
        set_c_str(&mut v.vendor_name, "Advanced Micro Devices Inc. [AMD/ATI]");
        v.subvendor_id = g.subvendor_id;
        v.device_id = g.device_id;
        v.rev_id = g.rev_id;
        set_c_str(&mut v.asic_serial, &format!("{:016X}", f.serial(p.gpu)));
        v.oam_id = p.gpu;
        v.num_of_compute_units = g.compute_units / f.parts;
        v.target_graphics_version = g.gfx_target;
        v.subsystem_id = g.subsystem_id;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_board_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_board_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_board_info_t::zeroed();
        set_c_str(&mut v.model_number, &g.model_number);
        set_c_str(&mut v.product_serial, &format!("{:016X}", f.serial(p.gpu)));
        set_c_str(&mut v.fru_id, &format!("FRU-{:04}", 1000 + p.gpu));
        set_c_str(&mut v.product_name, &g.product_name);
        set_c_str(&mut v.manufacturer_name, &g.manufacturer);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_driver_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_driver_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, _| {
        let mut v = amdsmi_driver_info_t::zeroed();
        set_c_str(&mut v.driver_version, &f.p.driver_version);
        set_c_str(&mut v.driver_date, &f.p.driver_date);
        set_c_str(&mut v.driver_name, &f.p.driver_name);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_vbios_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_vbios_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_vbios_info_t::zeroed();
        set_c_str(&mut v.name, &g.vbios_name);
        set_c_str(&mut v.build_date, &g.vbios_build_date);
        set_c_str(&mut v.part_number, &g.vbios_part_number);
        set_c_str(&mut v.version, &g.vbios_version);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_fw_info(h: amdsmi_processor_handle, out: *mut amdsmi_fw_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut fw: Vec<(u32, u64)> = f
            .spec(p.gpu)
            .firmware
            .iter()
            .filter_map(|(n, v)| Some((profile::fw_id(n)?, *v)))
            .collect();
        fw.sort_unstable();
        let mut v = amdsmi_fw_info_t::zeroed();
        for (slot, (id, ver)) in v.fw_info_list.iter_mut().zip(&fw) {
            slot.fw_id = *id;
            slot.fw_version = *ver;
        }
        v.num_fw_info = fw.len().min(AMDSMI_FW_ID__MAX) as u8;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_kfd_info(h: amdsmi_processor_handle, out: *mut amdsmi_kfd_info_t) -> amdsmi_status_t {
    on_proc(h, false, |_, p| {
        let mut v = amdsmi_kfd_info_t::zeroed();
        v.kfd_id = 0x1_0000 + u64::from(p.index) * 0x111;
        // KFD numbers the CPU NUMA nodes first (two sockets here).
        v.node_id = 2 + p.index;
        v.current_partition_id = p.part;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_enumeration_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_enumeration_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_enumeration_info_t::zeroed();
        v.drm_render = 128 + p.index;
        v.drm_card = 1 + p.index;
        v.hsa_id = 2 + p.index;
        v.hip_id = p.index;
        set_c_str(
            &mut v.hip_uuid,
            &format!("GPU-{:016x}", f.serial(p.gpu) ^ u64::from(p.part)),
        );
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_compute_partition(
    h: amdsmi_processor_handle,
    out: *mut c_char,
    len: u32,
) -> amdsmi_status_t {
    on_proc(h, false, |f, _| put_str(out, len as usize, &f.p.compute_partition))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_memory_partition(
    h: amdsmi_processor_handle,
    out: *mut c_char,
    len: u32,
) -> amdsmi_status_t {
    on_proc(h, false, |f, _| put_str(out, len as usize, &f.p.memory_partition))
}

// ---- activity, memory, processes -----------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_activity(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_engine_usage_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_engine_usage_t::zeroed();
        v.gfx_activity = f.gfx_activity(p);
        v.umc_activity = f.umc_activity(p);
        v.mm_activity = f.spec(p.gpu).mm_activity_pct.unwrap_or(0xFFFF);
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_memory_total(h: amdsmi_processor_handle, kind: u32, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| match kind {
        AMDSMI_MEM_TYPE_VRAM | AMDSMI_MEM_TYPE_VIS_VRAM => put(out, f.vram_total(p)),
        AMDSMI_MEM_TYPE_GTT => put(out, f.spec(p.gpu).gtt_total_bytes),
        _ => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_memory_usage(h: amdsmi_processor_handle, kind: u32, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| match kind {
        AMDSMI_MEM_TYPE_VRAM | AMDSMI_MEM_TYPE_VIS_VRAM => put(out, f.vram_used(p)),
        AMDSMI_MEM_TYPE_GTT => put(out, f.gtt_used(p)),
        _ => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_vram_usage(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_vram_usage_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_vram_usage_t::zeroed();
        v.vram_total = (f.vram_total(p) >> 20) as u32;
        v.vram_used = (f.vram_used(p) >> 20) as u32;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_vram_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_vram_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_vram_info_t::zeroed();
        v.vram_type = AMDSMI_VRAM_TYPE_HBM3;
        set_c_str(&mut v.vram_vendor, &g.vram_vendor);
        v.vram_size = f.vram_total(p) >> 20;
        v.vram_bit_width = g.vram_bit_width;
        v.vram_max_bandwidth = g.vram_max_bandwidth;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_process_list(
    h: amdsmi_processor_handle,
    count: *mut u32,
    out: *mut amdsmi_proc_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let util = f64::from(f.gfx_activity(p)) / 100.0;
        let list: Vec<amdsmi_proc_info_t> = f
            .processes(p)
            .map(|pr| {
                let mut v = amdsmi_proc_info_t::zeroed();
                set_c_str(&mut v.name, &pr.name);
                v.pid = pr.pid;
                v.mem = pr.vram_bytes + pr.gtt_bytes;
                v.engine_usage.gfx = (f.now_s() * 1e9 * util) as u64;
                v.memory_usage.gtt_mem = pr.gtt_bytes;
                v.memory_usage.vram_mem = pr.vram_bytes;
                v.cu_occupancy = pr.cu_occupancy.unwrap_or(u32::MAX);
                v
            })
            .collect();
        put_list(count, out, &list, AMDSMI_STATUS_OUT_OF_RESOURCES)
    })
}

// ---- temperature, power, clocks ---------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_temp_metric(
    h: amdsmi_processor_handle,
    sensor: amdsmi_temperature_type_t,
    metric: amdsmi_temperature_metric_t,
    out: *mut i64,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let v = match (sensor, metric) {
            (AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CURRENT) => f.edge_temp_c(p.gpu),
            (AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CRITICAL) => g.edge_temp_c.and(g.edge_critical_c),
            (AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_EMERGENCY) => g.edge_temp_c.and(g.edge_emergency_c),
            (AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CURRENT) => Some(f.hotspot_c(p.gpu)),
            (AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CRITICAL) => Some(g.hotspot_critical_c),
            (AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_EMERGENCY) => Some(g.hotspot_emergency_c),
            (AMDSMI_TEMPERATURE_TYPE_VRAM, AMDSMI_TEMP_CURRENT) => Some(f.vram_temp_c(p.gpu)),
            (AMDSMI_TEMPERATURE_TYPE_VRAM, AMDSMI_TEMP_CRITICAL) => Some(g.vram_critical_c),
            (AMDSMI_TEMPERATURE_TYPE_VRAM, AMDSMI_TEMP_EMERGENCY) => Some(g.vram_emergency_c),
            _ => None,
        };
        match v {
            Some(t) => put(out, t),
            None if out.is_null() => INVAL,
            None => NOT_SUPPORTED,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_power_info(h: amdsmi_processor_handle, out: *mut amdsmi_power_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let w = f.power_w(p.gpu);
        let mut v = amdsmi_power_info_t::zeroed();
        v.socket_power = u64::from(w);
        v.current_socket_power = w;
        // MI300 reports the current socket power, not the average.
        v.average_socket_power = u32::MAX;
        v.gfx_voltage = u64::MAX;
        v.soc_voltage = u64::MAX;
        v.mem_voltage = u64::MAX;
        v.power_limit = f.spec(p.gpu).power_cap_w;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_power_cap_info(
    h: amdsmi_processor_handle,
    sensor: u32,
    out: *mut amdsmi_power_cap_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if sensor != 0 {
            return if out.is_null() { INVAL } else { NOT_SUPPORTED };
        }
        let g = f.spec(p.gpu);
        let mut v = amdsmi_power_cap_info_t::zeroed();
        v.power_cap = u64::from(g.power_cap_w) * 1_000_000;
        v.default_power_cap = u64::from(g.default_power_cap_w) * 1_000_000;
        v.dpm_cap = u64::from(g.gfx_max_mhz);
        v.min_power_cap = u64::from(g.min_power_cap_w) * 1_000_000;
        v.max_power_cap = u64::from(g.max_power_cap_w) * 1_000_000;
        put(out, v)
    })
}

/// µJ used since time zero.
fn energy_uj(f: &Fake, gpu: u32) -> f64 {
    let g = f.spec(gpu);
    (g.energy_base_j as f64 + f64::from(g.power_w) * f.now_s()) * 1e6
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_energy_count(
    h: amdsmi_processor_handle,
    acc: *mut u64,
    resolution: *mut f32,
    timestamp: *mut u64,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if acc.is_null() || resolution.is_null() || timestamp.is_null() {
            return INVAL;
        }
        put(acc, (energy_uj(f, p.gpu) / f64::from(ENERGY_RESOLUTION_UJ)) as u64);
        put(resolution, ENERGY_RESOLUTION_UJ);
        put(timestamp, (f.now_s() * 1e9) as u64)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_clock_info(
    h: amdsmi_processor_handle,
    clk: amdsmi_clk_type_t,
    out: *mut amdsmi_clk_info_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_clk_info_t::zeroed();
        match clk {
            AMDSMI_CLK_TYPE_GFX => {
                [v.clk, v.min_clk, v.max_clk] = [f.gfx_clock_mhz(p.gpu), g.gfx_min_mhz, g.gfx_max_mhz]
            }
            AMDSMI_CLK_TYPE_MEM => [v.clk, v.min_clk, v.max_clk] = [g.mem_clock_mhz, g.mem_min_mhz, g.mem_max_mhz],
            _ if out.is_null() => return INVAL,
            _ => return NOT_SUPPORTED,
        }
        put(out, v)
    })
}

// ---- metrics and throttling -----------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_metrics_info(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_gpu_metrics_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if out.is_null() {
            return INVAL;
        }
        put(out, metrics(f, p.gpu))
    })
}

fn metrics(f: &Fake, gpu: u32) -> amdsmi_gpu_metrics_t {
    let g = f.spec(gpu);
    let now = f.now_s();
    let na16 = u16::MAX;
    let mut m = amdsmi_gpu_metrics_t::zeroed();
    m.common_header = amd_metrics_table_header_t {
        structure_size: std::mem::size_of::<amdsmi_gpu_metrics_t>() as u16,
        format_revision: 1,
        content_revision: 8,
    };
    m.temperature_edge = f.edge_temp_c(gpu).map_or(na16, |t| t as u16);
    m.temperature_hotspot = f.hotspot_c(gpu) as u16;
    m.temperature_mem = f.vram_temp_c(gpu) as u16;
    [m.temperature_vrgfx, m.temperature_vrsoc, m.temperature_vrmem] = [na16; 3];
    let gfx = f.gpu_gfx_activity(gpu);
    m.average_gfx_activity = gfx as u16;
    let umc: u32 = (0..f.parts).map(|q| f.umc_activity(f.proc_of(gpu, q))).sum::<u32>() / f.parts;
    m.average_umc_activity = umc as u16;
    m.average_mm_activity = g.mm_activity_pct.map_or(na16, |a| a as u16);
    m.average_socket_power = na16;
    m.energy_accumulator = (energy_uj(f, gpu) / f64::from(ENERGY_RESOLUTION_UJ)) as u64;
    m.system_clock_counter = (now * 1e9) as u64;
    [
        m.average_gfxclk_frequency,
        m.average_socclk_frequency,
        m.average_uclk_frequency,
        m.average_vclk0_frequency,
        m.average_dclk0_frequency,
        m.average_vclk1_frequency,
        m.average_dclk1_frequency,
    ] = [na16; 7];
    m.current_gfxclk = f.gfx_clock_mhz(gpu) as u16;
    m.current_uclk = g.mem_clock_mhz as u16;
    [
        m.current_socclk,
        m.current_vclk0,
        m.current_dclk0,
        m.current_vclk1,
        m.current_dclk1,
    ] = [na16; 5];
    // MI300's table leaves the ASIC-specific field unset; the
    // ASIC-independent bits and the violation counters carry throttling.
    m.throttle_status = u32::MAX;
    m.indep_throttle_status = if f.throttle(gpu).is_some() {
        (1 << throttler::TEMP_HOTSPOT) | (1 << throttler::TEMP_GPU)
    } else {
        0
    };
    m.current_fan_speed = na16;
    m.pcie_link_width = g.pcie_width;
    m.pcie_link_speed = pcie_gts_x10(g.pcie_gen);
    m.gfx_activity_acc = (f64::from(gfx) * now) as u32;
    m.mem_activity_acc = (f64::from(umc) * now) as u32;
    m.temperature_hbm = [na16; AMDSMI_NUM_HBM_INSTANCES];
    m.firmware_timestamp = (now * 1e8) as u64;
    [m.voltage_soc, m.voltage_gfx, m.voltage_mem] = [na16; 3];
    m.current_socket_power = f.power_w(gpu) as u16;
    m.vcn_activity = [na16; AMDSMI_MAX_NUM_VCN];
    m.xgmi_link_width = u16::from(g.xgmi_lanes);
    m.xgmi_link_speed = g.xgmi_bit_rate_gbps as u16;
    let pcie_gbs = f64::from(g.pcie_bandwidth_mbps) / 8000.0;
    m.pcie_bandwidth_acc = (pcie_gbs * now) as u64;
    m.pcie_bandwidth_inst = pcie_gbs.round() as u64;
    m.pcie_replay_count_acc = g.pcie_replay_count;
    for k in 0..AMDSMI_MAX_NUM_XGMI_LINKS as u32 {
        let i = k as usize;
        match f.peer_of(gpu, k).filter(|_| k < g.xgmi_links) {
            Some(peer) => {
                m.xgmi_read_data_acc[i] = f.xgmi_kb(peer, gpu);
                m.xgmi_write_data_acc[i] = f.xgmi_kb(gpu, peer);
                m.xgmi_link_status[i] = u16::from(f.link_down_since(gpu, peer).is_none());
            }
            None => {
                m.xgmi_read_data_acc[i] = u64::MAX;
                m.xgmi_write_data_acc[i] = u64::MAX;
                m.xgmi_link_status[i] = na16;
            }
        }
    }
    m.current_gfxclks = [na16; AMDSMI_MAX_NUM_GFX_CLKS];
    for c in m.current_gfxclks.iter_mut().take(g.xccs as usize) {
        *c = f.gfx_clock_mhz(gpu) as u16;
    }
    m.current_socclks = [na16; AMDSMI_MAX_NUM_CLKS];
    m.current_vclk0s = [na16; AMDSMI_MAX_NUM_CLKS];
    m.current_dclk0s = [na16; AMDSMI_MAX_NUM_CLKS];
    m.jpeg_activity = [na16; AMDSMI_MAX_NUM_JPEG];
    m.accumulation_counter = (now * 1000.0) as u64;
    m.socket_thm_residency_acc = f.throttled_ms(gpu);
    m.num_partition = f.parts as u16;
    let per_part = (g.xccs / f.parts) as usize;
    for (q, x) in m.xcp_stats.iter_mut().enumerate() {
        x.gfx_busy_inst = [u32::MAX; AMDSMI_MAX_NUM_XCC];
        x.jpeg_busy = [na16; AMDSMI_MAX_NUM_JPEG_ENG_V1];
        x.vcn_busy = [na16; AMDSMI_MAX_NUM_VCN];
        for a in [
            &mut x.gfx_busy_acc,
            &mut x.gfx_below_host_limit_acc,
            &mut x.gfx_below_host_limit_ppt_acc,
            &mut x.gfx_below_host_limit_thm_acc,
            &mut x.gfx_low_utilization_acc,
            &mut x.gfx_below_host_limit_total_acc,
        ] {
            *a = [u64::MAX; AMDSMI_MAX_NUM_XCC];
        }
        if q as u32 >= f.parts {
            continue;
        }
        let busy = f.gfx_activity(f.proc_of(gpu, q as u32));
        for c in 0..per_part {
            x.gfx_busy_inst[c] = xcc_busy(busy, c, per_part);
            x.gfx_busy_acc[c] = (f64::from(busy) * now) as u64;
            x.gfx_below_host_limit_thm_acc[c] = f.throttled_ms(gpu);
            x.gfx_below_host_limit_ppt_acc[c] = 0;
            x.gfx_below_host_limit_acc[c] = f.throttled_ms(gpu);
            x.gfx_below_host_limit_total_acc[c] = f.throttled_ms(gpu);
            x.gfx_low_utilization_acc[c] = 0;
        }
    }
    m.vram_max_bandwidth = g.vram_max_bandwidth;
    m
}

/// XCC `c` of a partition's `n`: its activity spread by -1, +1, -2, +2
/// (repeating), so the XCCs differ and their mean is the partition's
/// `gfx_activity` (a whole number of such runs, and nothing past 0-100).
fn xcc_busy(busy: u32, c: usize, n: usize) -> u32 {
    if !n.is_multiple_of(4) || !(2..=98).contains(&busy) {
        return busy;
    }
    let d = [1u32, 1, 2, 2][c % 4];
    if c.is_multiple_of(2) { busy - d } else { busy + d }
}

/// PCIe generation to the metrics table's 0.1 GT/s.
fn pcie_gts_x10(gen_: u32) -> u16 {
    match gen_ {
        1 => 25,
        2 => 50,
        3 => 80,
        4 => 160,
        5 => 320,
        6 => 640,
        _ => u16::MAX,
    }
}

/// PCIe generation to MT/s.
fn pcie_mts(gen_: u32) -> u32 {
    match pcie_gts_x10(gen_) {
        u16::MAX => u32::MAX,
        x => u32::from(x) * 100,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_violation_status(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_violation_status_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if out.is_null() {
            return INVAL;
        }
        let now = f.now_s();
        let hot = f.throttle(p.gpu).is_some();
        let mut v = amdsmi_violation_status_t::zeroed();
        v.reference_timestamp = ((EPOCH_S + now) * 1e6) as u64;
        v.violation_timestamp = (now * 1000.0) as u64;
        v.acc_counter = (now * 1000.0) as u64;
        v.acc_socket_thrm = f.throttled_ms(p.gpu);
        v.acc_gfx_clk_below_host_limit = f.throttled_ms(p.gpu);
        v.per_socket_thrm = if hot { 100 } else { 0 };
        v.per_gfx_clk_below_host_limit = v.per_socket_thrm;
        v.active_socket_thrm = u8::from(hot);
        v.active_gfx_clk_below_host_limit = u8::from(hot);
        for a in [
            &mut v.acc_gfx_clk_below_host_limit_pwr,
            &mut v.acc_gfx_clk_below_host_limit_thm,
            &mut v.acc_low_utilization,
            &mut v.acc_gfx_clk_below_host_limit_total,
            &mut v.per_gfx_clk_below_host_limit_pwr,
            &mut v.per_gfx_clk_below_host_limit_thm,
            &mut v.per_low_utilization,
            &mut v.per_gfx_clk_below_host_limit_total,
        ] {
            *a = [[u64::MAX; 8]; 8];
        }
        for a in [
            &mut v.active_gfx_clk_below_host_limit_pwr,
            &mut v.active_gfx_clk_below_host_limit_thm,
            &mut v.active_low_utilization,
            &mut v.active_gfx_clk_below_host_limit_total,
        ] {
            *a = [[u8::MAX; 8]; 8];
        }
        put(out, v)
    })
}

// ---- RAS -------------------------------------------------------------------------

fn error_count(c: [u64; 3]) -> amdsmi_error_count_t {
    let mut v = amdsmi_error_count_t::zeroed();
    [v.correctable_count, v.uncorrectable_count, v.deferred_count] = c;
    v
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_ecc_count(
    h: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    out: *mut amdsmi_error_count_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let Some(name) = Fake::block_name(block) else {
            return INVAL;
        };
        if f.ecc_enabled(p.gpu) & block == 0 {
            return if out.is_null() { INVAL } else { NOT_SUPPORTED };
        }
        put(out, error_count(f.ecc(p.gpu, name)))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_total_ecc_count(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_error_count_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut sum = [0u64; 3];
        for (bit, name) in GPU_BLOCKS {
            if f.ecc_enabled(p.gpu) & bit != 0 {
                let c = f.ecc(p.gpu, name);
                for k in 0..3 {
                    sum[k] += c[k];
                }
            }
        }
        put(out, error_count(sum))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_ecc_enabled(h: amdsmi_processor_handle, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.ecc_enabled(p.gpu)))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_ecc_status(
    h: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    out: *mut amdsmi_ras_err_state_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let Some(name) = Fake::block_name(block) else {
            return INVAL;
        };
        let state = if f.ecc_enabled(p.gpu) & block == 0 {
            AMDSMI_RAS_ERR_STATE_DISABLED
        } else {
            match f.ecc(p.gpu, name) {
                [_, u, _] if u > 0 => AMDSMI_RAS_ERR_STATE_MULT_UC,
                [c, _, _] if c > 0 => AMDSMI_RAS_ERR_STATE_SING_C,
                _ => AMDSMI_RAS_ERR_STATE_ENABLED,
            }
        };
        put(out, state)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_bad_page_info(
    h: amdsmi_processor_handle,
    count: *mut u32,
    out: *mut amdsmi_retired_page_record_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put_list(count, out, &f.bad_pages(p.gpu), OK))
}

// ---- PCIe and XGMI -----------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_pcie_info(h: amdsmi_processor_handle, out: *mut amdsmi_pcie_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_pcie_info_t::zeroed();
        v.pcie_static.max_pcie_width = g.pcie_max_width;
        v.pcie_static.max_pcie_speed = pcie_mts(g.pcie_max_gen);
        v.pcie_static.pcie_interface_version = g.pcie_gen;
        v.pcie_static.slot_type = profile::slot_type(&g.slot_type).unwrap_or(AMDSMI_CARD_FORM_FACTOR_UNKNOWN);
        v.pcie_static.max_pcie_interface_version = g.pcie_max_gen;
        v.pcie_metric.pcie_width = g.pcie_width;
        v.pcie_metric.pcie_speed = pcie_mts(g.pcie_gen);
        v.pcie_metric.pcie_bandwidth = g.pcie_bandwidth_mbps;
        v.pcie_metric.pcie_replay_count = g.pcie_replay_count;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_pci_replay_counter(h: amdsmi_processor_handle, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.spec(p.gpu).pcie_replay_count))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_link_metrics(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_link_metrics_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if out.is_null() {
            return INVAL;
        }
        let g = f.spec(p.gpu);
        let mut v = amdsmi_link_metrics_t::zeroed();
        let peers: Vec<u32> = (0..g.xgmi_links).filter_map(|k| f.peer_of(p.gpu, k)).collect();
        for (slot, &peer) in v.links.iter_mut().zip(&peers) {
            slot.bdf = f.bdf(f.proc_of(peer, 0));
            let up = f.link_down_since(p.gpu, peer).is_none();
            slot.bit_rate = if up { g.xgmi_bit_rate_gbps } else { 0 };
            slot.max_bandwidth = g.xgmi_max_bandwidth_gbs;
            slot.link_type = AMDSMI_LINK_TYPE_XGMI;
            slot.read = f.xgmi_kb(peer, p.gpu);
            slot.write = f.xgmi_kb(p.gpu, peer);
        }
        v.num_links = peers.len() as u32;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_xgmi_link_status(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_xgmi_link_status_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_xgmi_link_status_t::zeroed();
        v.total_links = g.xgmi_links;
        for k in 0..g.xgmi_links {
            v.status[k as usize] = match f.peer_of(p.gpu, k) {
                None => AMDSMI_XGMI_LINK_DISABLE,
                Some(peer) if f.link_down_since(p.gpu, peer).is_some() => AMDSMI_XGMI_LINK_DOWN,
                Some(_) => AMDSMI_XGMI_LINK_UP,
            };
        }
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_xgmi_info(h: amdsmi_processor_handle, out: *mut amdsmi_xgmi_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_xgmi_info_t::zeroed();
        v.xgmi_lanes = f.spec(p.gpu).xgmi_lanes;
        v.xgmi_hive_id = f.p.xgmi_hive_id;
        v.xgmi_node_id = f.p.xgmi_hive_id.wrapping_add(u64::from(p.gpu) + 1);
        v.index = p.gpu;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_gpu_xgmi_error_status(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_xgmi_status_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.xgmi_errors(p.gpu)))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_topo_get_link_type(
    src: amdsmi_processor_handle,
    dst: amdsmi_processor_handle,
    hops: *mut u64,
    kind: *mut amdsmi_link_type_t,
) -> amdsmi_status_t {
    let dst_gpu = {
        let st = state();
        match st.as_ref().filter(|f| f.inits > 0) {
            None => return AMDSMI_STATUS_NOT_INIT,
            Some(f) => match f.decode(dst) {
                Some(d) => d.gpu,
                None => return INVAL,
            },
        }
    };
    on_proc(src, true, |_, s| {
        if hops.is_null() || kind.is_null() {
            return INVAL;
        }
        // Partitions of one GPU share its dies: no link between them. The
        // topology is KFD's, fixed at boot: a link that went down stays XGMI.
        let (h, k) = if s.gpu == dst_gpu {
            (0, AMDSMI_LINK_TYPE_INTERNAL)
        } else {
            (1, AMDSMI_LINK_TYPE_XGMI)
        };
        put(hops, h);
        put(kind, k)
    })
}

// ---- events --------------------------------------------------------------------------

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_init_gpu_event_notification(h: amdsmi_processor_handle) -> amdsmi_status_t {
    let index = match with_index(h) {
        Ok(i) => i,
        Err(s) => return s,
    };
    on_lib(|f| {
        f.listening.insert(index, 0);
        let mine: Vec<usize> = event_faults(f).filter(|(_, l)| *l == index).map(|(n, _)| n).collect();
        for n in mine {
            f.delivered.remove(&n);
        }
        OK
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_set_gpu_event_notification_mask(h: amdsmi_processor_handle, mask: u64) -> amdsmi_status_t {
    let index = match with_index(h) {
        Ok(i) => i,
        Err(s) => return s,
    };
    on_lib(|f| match f.listening.get_mut(&index) {
        Some(m) => {
            *m = mask;
            OK
        }
        None => AMDSMI_STATUS_NOT_INIT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_stop_gpu_event_notification(h: amdsmi_processor_handle) -> amdsmi_status_t {
    let index = match with_index(h) {
        Ok(i) => i,
        Err(s) => return s,
    };
    on_lib(|f| match f.listening.remove(&index) {
        Some(_) => OK,
        None => AMDSMI_STATUS_NOT_INIT,
    })
}

/// A processor's index for the event calls (which answer on a lost GPU too:
/// the reset events of a GPU that fell off are how one learns of it).
fn with_index(h: amdsmi_processor_handle) -> Result<u32, amdsmi_status_t> {
    let mut index = Err(INVAL);
    let r = on_proc(h, true, |_, p| {
        index = Ok(p.index);
        OK
    });
    if r != OK { Err(r) } else { index }
}

/// The event faults with the processor (index) that reports each.
fn event_faults(f: &Fake) -> impl Iterator<Item = (usize, u32)> + '_ {
    f.p.fault
        .iter()
        .enumerate()
        .filter(|(_, x)| x.kind == FaultKind::Event)
        .map(|(n, x)| (n, f.proc_of(x.gpu, x.partition.unwrap_or(0)).index))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_event_notification(
    timeout_ms: i32,
    count: *mut u32,
    out: *mut amdsmi_evt_notification_data_t,
) -> amdsmi_status_t {
    if count.is_null() || out.is_null() {
        return if state().as_ref().is_some_and(|f| f.inits > 0) {
            INVAL
        } else {
            AMDSMI_STATUS_NOT_INIT
        };
    }
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.clamp(0, 60_000) as u64);
    loop {
        let mut frozen = false;
        let r = on_lib(|f| {
            frozen = f.frozen_s.is_some();
            // SAFETY: non-null, a u32 by contract.
            let room = unsafe { *count } as usize;
            let now = f.now_s();
            let due: Vec<(usize, u32)> = event_faults(f)
                .filter(|(n, l)| {
                    let x = &f.p.fault[*n];
                    let kind = x.event.as_deref().and_then(profile::event_type).unwrap_or(0);
                    x.at_s <= now
                        && !f.delivered.contains(n)
                        && f.listening.get(l).is_some_and(|m| m & event_mask_bit(kind) != 0)
                })
                .take(room)
                .collect();
            for (k, (n, _)) in due.iter().enumerate() {
                let x = &f.p.fault[*n];
                let mut v = amdsmi_evt_notification_data_t::zeroed();
                v.processor_handle = processor_handle(x.gpu, x.partition.unwrap_or(0));
                v.event = x.event.as_deref().and_then(profile::event_type).unwrap_or(0);
                set_c_str(&mut v.message, x.message.as_deref().unwrap_or(""));
                // SAFETY: the caller gave room for `room` entries; k < room.
                unsafe { out.add(k).write(v) };
                f.delivered.insert(*n);
            }
            // SAFETY: as above.
            unsafe { *count = due.len() as u32 };
            if due.is_empty() { AMDSMI_STATUS_NO_DATA } else { OK }
        });
        if r != AMDSMI_STATUS_NO_DATA || frozen || Instant::now() >= deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests;
