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

// The exported functions live in one module per concern (init, identity,
// memory, power, metrics, ras, links, events); the shared state, handles and
// pointer helpers stay here, in the crate root, which those modules reach
// with `use crate::*`.
mod events;
mod identity;
mod init;
mod links;
mod memory;
mod metrics;
mod power;
mod profile;
mod ras;
mod stubs;

pub use events::*;
pub use identity::*;
pub use init::*;
pub use links::*;
pub use memory::*;
pub use metrics::*;
pub use power::*;
pub use ras::*;

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

#[cfg(test)]
mod tests;
