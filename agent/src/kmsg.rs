//! The kernel log as a data source: NVIDIA XIDs (`NVRM: Xid ...`) and
//! NVSwitch SXids (`nvidia-nvswitchN: SXid ...`).
//!
//! NVML's event set misses XIDs of a GPU it cannot open or has lost, and
//! reports none at all where NVML does not load; the driver prints every one
//! to the kernel log. Records come from `/dev/kmsg` (one record per read, the
//! whole buffer first, then new ones on a background thread) or from a file in
//! the same format (one record per line, `--kmsg FILE`: tests, a saved log),
//! read whole at start and then followed as it grows.
//!
//! Record format (Documentation/ABI/testing/dev-kmsg):
//! `priority,seq,time_us,flags[,...];message` and then, optionally, lines
//! starting with a space (` SUBSYSTEM=pci`, ` DEVICE=+pci:0000:3b:00.0`) that
//! belong to the record before them.
//!
//! Only the records the parser recognises are queued, and the queue is
//! bounded: a kernel log full of noise costs no memory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::proto::{NodeInfo, Sample, SxidEvent, XidEvent};
use crate::sampler::Sampler;

/// The kernel's log device.
pub const DEFAULT_PATH: &str = "/dev/kmsg";

/// `XidEvent.source` of an XID read from the kernel log.
pub const SOURCE_KMSG: u32 = 1;

/// Events waiting for the next sample, at most: a storm of XIDs between two
/// samples keeps its newest ones.
const MAX_PENDING: usize = 1024;
/// XIDs held for a GPU the node lists but the sample lacks, at most.
const MAX_HELD: usize = 64;
/// `GPU at PCI:...: GPU-<uuid>` lines remembered, at most (one per GPU).
const MAX_SEEN_UUIDS: usize = 64;
/// The longest record (or file line) looked at; the kernel's own limit for a
/// record is 8 KiB with its dictionary. A longer line in a file is skipped.
const MAX_LINE: usize = 16 * 1024;
/// One read of /dev/kmsg returns one record and fails with EINVAL when the
/// buffer cannot hold it: twice the kernel's limit.
const READ_BUF: usize = 16 * 1024;
/// The most a followed file is read in one sample (the rest next sample), so
/// a large saved log cannot stall one sample for long.
const MAX_FILE_READ_PER_SAMPLE: u64 = 8 << 20;
/// Records read from /dev/kmsg at start before the rest is left to the
/// thread (the buffer is finite, but records may keep arriving).
const MAX_START_RECORDS: usize = 1 << 20;
/// SXid text kept for people, in characters.
const MAX_TEXT_CHARS: usize = 200;

/// A PCI device address without its function: the kernel names a GPU
/// `0000:3b:00` in XID lines where NVML says `00000000:3B:00.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciAddr {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
}

impl PciAddr {
    /// Reads `0000:3b:00`, `0000:3b:00.0`, `00000000:3B:00.0`, `3b:00.0`
    /// (domain 0) and any of them after `PCI:`. Hex, any case.
    pub fn parse(s: &str) -> Option<PciAddr> {
        let s = s.trim();
        let s = match s.get(..4) {
            Some(p) if p.eq_ignore_ascii_case("pci:") => &s[4..],
            _ => s,
        };
        // The function, if any, is not compared: the kernel's XID lines lack it.
        let s = match s.rsplit_once('.') {
            Some((head, func)) if (1..=2).contains(&func.len()) && hex(func, 2).is_some() => head,
            Some(_) => return None,
            None => s,
        };
        let parts: Vec<&str> = s.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (hex(d, 8)?, hex(b, 2)?, hex(v, 2)?),
            [b, v] => (0, hex(b, 2)?, hex(v, 2)?),
            _ => return None,
        };
        Some(PciAddr {
            domain,
            bus: u8::try_from(bus).ok()?,
            device: u8::try_from(device).ok()?,
        })
    }
}

/// Hex digits only (no sign, no prefix), at most `max_digits` of them.
fn hex(s: &str, max_digits: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// One kernel log record's header and first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub seq: u64,
    /// Microseconds since boot.
    pub time_us: u64,
    pub message: &'a str,
}

/// Reads `priority,seq,time_us,flags[,...];message`; `None` for a
/// continuation line (` KEY=value`) or anything else that is not a record.
pub fn parse_record(line: &str) -> Option<Record<'_>> {
    if line.starts_with(' ') {
        return None;
    }
    let (header, message) = line.split_once(';')?;
    let mut fields = header.split(',');
    let _priority: u32 = fields.next()?.parse().ok()?;
    let seq = fields.next()?.parse().ok()?;
    let time_us = fields.next()?.parse().ok()?;
    // The record's own text ends at its first newline; what follows (on the
    // device) are its continuation lines.
    let message = message.split('\n').next().unwrap_or_default();
    Some(Record { seq, time_us, message })
}

/// What a kernel log message says that the agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `NVRM: Xid (PCI:0000:3b:00): 79, ...`
    Xid { pci: PciAddr, code: u32 },
    /// `nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Non-fatal, ...`:
    /// the first line of one; its detail lines are not events.
    Sxid {
        switch_pci: String,
        code: u32,
        fatal: bool,
        text: String,
    },
    /// `NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`, printed around an XID of a
    /// GPU that fell off the bus: ties the bus id to the GPU's UUID.
    GpuAt { pci: PciAddr, uuid: String },
}

/// The event a message carries, if any. Never panics, whatever the text.
pub fn parse_message(msg: &str) -> Option<Event> {
    if let Some(i) = msg.find("NVRM: Xid (") {
        let (inside, rest) = parenthesised(&msg[i + "NVRM: Xid (".len()..])?;
        let pci = PciAddr::parse(inside)?;
        let (code, _) = leading_code(rest)?;
        return Some(Event::Xid { pci, code });
    }
    if let Some(i) = msg.find("SXid (") {
        let (inside, rest) = parenthesised(&msg[i + "SXid (".len()..])?;
        let switch_pci = inside.trim();
        let switch_pci = match switch_pci.get(..4) {
            Some(p) if p.eq_ignore_ascii_case("pci:") => &switch_pci[4..],
            _ => switch_pci,
        };
        PciAddr::parse(switch_pci)?;
        let (code, after) = leading_code(rest)?;
        let after = after.trim_start().strip_prefix(',')?.trim_start();
        let (word, text) = after.split_once(',').unwrap_or((after, ""));
        // Only the first line of an SXid says how severe it is; its other
        // lines ("Severity 0 Engine instance ...", "Data {...}") repeat the
        // code with details and are not further events.
        let fatal = match word.trim() {
            w if w.eq_ignore_ascii_case("fatal") => true,
            w if w.eq_ignore_ascii_case("non-fatal") => false,
            _ => return None,
        };
        return Some(Event::Sxid {
            switch_pci: switch_pci.to_string(),
            code,
            fatal,
            text: fleetop_proto::input::printable(text.trim(), MAX_TEXT_CHARS),
        });
    }
    if let Some(i) = msg.find("NVRM: GPU at PCI:") {
        let rest = &msg[i + "NVRM: GPU at PCI:".len()..];
        let (addr, rest) = rest.split_once(": ")?;
        let pci = PciAddr::parse(addr)?;
        let uuid: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(96)
            .collect();
        if !uuid.starts_with("GPU-") || uuid.len() <= 4 {
            return None;
        }
        return Some(Event::GpuAt { pci, uuid });
    }
    None
}

/// `PCI:0000:3b:00): 79, ...` -> (`PCI:0000:3b:00`, `: 79, ...`).
fn parenthesised(s: &str) -> Option<(&str, &str)> {
    let end = s.find(')')?;
    Some((&s[..end], &s[end + 1..]))
}

/// `: 79, ...` -> (79, `, ...`): the code after the colon.
fn leading_code(s: &str) -> Option<(u32, &str)> {
    let s = s.trim_start().strip_prefix(':')?.trim_start();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    Some((s[..digits].parse().ok()?, &s[digits..]))
}

/// An event with the time of its record, microseconds since boot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Timed {
    time_us: u64,
    event: Event,
}

/// Events parsed and not yet taken by a sample (shared with the thread that
/// follows /dev/kmsg).
#[derive(Debug, Default)]
struct Pending {
    events: VecDeque<Timed>,
    /// Dropped because the queue was full, not yet reported.
    dropped: u64,
}

impl Pending {
    fn push(&mut self, t: Timed) {
        if self.events.len() >= MAX_PENDING {
            self.events.pop_front();
            self.dropped += 1;
        }
        self.events.push_back(t);
    }

    /// Parses one record (a device read, or a file line) and queues its event.
    fn record(&mut self, text: &str) {
        if text.len() > MAX_LINE {
            return;
        }
        let Some(r) = parse_record(text) else {
            return;
        };
        if let Some(event) = parse_message(r.message) {
            self.push(Timed {
                time_us: r.time_us,
                event,
            });
        }
    }
}

type Shared = Arc<Mutex<Pending>>;

fn lock(p: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    // A panic elsewhere while holding it leaves plain data: use it.
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// A regular file in the record format, read whole and then followed.
struct FileFollower {
    path: PathBuf,
    file: File,
    /// Bytes consumed so far.
    offset: u64,
    /// A line not yet ended by a newline (the writer is mid-line).
    partial: Vec<u8>,
    /// Skipping the rest of a line longer than MAX_LINE.
    skipping: bool,
}

impl FileFollower {
    /// Reads what was appended since the last call (at most a bound; the rest
    /// next time). A file that shrank was replaced or truncated: read again
    /// from its start.
    fn poll(&mut self, pending: &mut Pending) {
        let len = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(_) => return,
        };
        if len < self.offset {
            match File::open(&self.path) {
                Ok(f) => self.file = f,
                Err(_) => return,
            }
            self.offset = 0;
            self.partial.clear();
            self.skipping = false;
        }
        if len == self.offset || self.file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut chunk = Vec::new();
        let want = (len - self.offset).min(MAX_FILE_READ_PER_SAMPLE);
        if (&mut self.file).take(want).read_to_end(&mut chunk).is_err() {
            return;
        }
        self.offset += chunk.len() as u64;
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let ended = piece.last() == Some(&b'\n');
            if self.skipping {
                self.skipping = !ended;
                continue;
            }
            self.partial.extend_from_slice(piece);
            if self.partial.len() > MAX_LINE {
                self.partial.clear();
                self.skipping = !ended;
                continue;
            }
            if ended {
                let line = String::from_utf8_lossy(&self.partial);
                pending.record(line.trim_end_matches(['\n', '\r']));
                self.partial.clear();
            }
        }
    }
}

/// Where the records come from.
enum Source {
    /// The kernel's device, followed by a thread that fills the queue.
    Device,
    File(FileFollower),
}

/// The kernel log as a `Sampler`: XIDs go into their GPU's sample (by PCI bus
/// id), SXids into the sample's `sxids`.
pub struct KmsgSampler {
    source: Source,
    pending: Shared,
    /// Wall-clock milliseconds at boot: a record's time is this plus its
    /// microseconds since boot.
    boot_ms: i64,
    /// The node's GPUs by bus id (from the NVML sampler's description).
    gpus_by_pci: Vec<(PciAddr, u32)>,
    gpus_by_uuid: Vec<(String, u32)>,
    /// Bus id -> UUID from `GPU at PCI:` lines, for a GPU whose bus id the
    /// node description lacks.
    seen_uuids: VecDeque<(PciAddr, String)>,
    /// XIDs of a GPU the node lists but that was missing from a sample.
    held: VecDeque<(u32, XidEvent)>,
}

/// How far past now a kernel-log record's time may be (the boot time is
/// read to the second, the clocks drift).
const RECORD_TIME_SLACK_MS: i64 = 60_000;

/// Whether a character device number is the kernel log's (`/dev/kmsg`:
/// major 1, minor 11 on Linux).
fn is_kmsg_device(rdev: u64) -> bool {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (major, minor) == (1, 11)
}

impl KmsgSampler {
    /// Opens `path`: the kernel's log device (a character device) or a file
    /// in its record format. `proc_root` gives the boot time for record
    /// times. Fails only when the path cannot be opened.
    pub fn open(path: &Path, proc_root: &Path) -> std::io::Result<KmsgSampler> {
        let boot_ms = boot_time_ms(proc_root);
        let pending: Shared = Arc::default();
        // Non-blocking, and the type checked on what was opened: a FIFO
        // would hang a blocking open for ever, and any other device
        // (/dev/zero) would be read for ever. Only the kernel's log device
        // or a regular file in its format is read.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        let meta = file.metadata()?;
        let kernel_log = meta.file_type().is_char_device() && is_kmsg_device(meta.rdev());
        if !kernel_log && !meta.is_file() {
            return Err(std::io::Error::other(
                "neither the kernel log device (/dev/kmsg) nor a regular file",
            ));
        }
        let source = if kernel_log {
            // The buffer is read until EAGAIN (a fresh open starts at the
            // oldest record), and the thread never hangs in a read it
            // cannot leave.
            let mut buf = vec![0u8; READ_BUF];
            {
                let mut p = lock(&pending);
                if let DeviceRead::Failed(e) = read_device(&mut file, &mut buf, &mut p, MAX_START_RECORDS) {
                    return Err(e);
                }
            }
            spawn_follower(file, buf, Arc::downgrade(&pending), path.to_path_buf());
            Source::Device
        } else {
            let mut f = FileFollower {
                path: path.to_path_buf(),
                file,
                offset: 0,
                partial: Vec::new(),
                skipping: false,
            };
            // The whole file now, so the first sample has what it says
            // (beyond the per-sample bound, the rest comes in later samples).
            f.poll(&mut lock(&pending));
            Source::File(f)
        };
        Ok(KmsgSampler {
            source,
            pending,
            boot_ms,
            gpus_by_pci: Vec::new(),
            gpus_by_uuid: Vec::new(),
            seen_uuids: VecDeque::new(),
            held: VecDeque::new(),
        })
    }

    /// A record's time on the wall clock, bounded to the boot it belongs
    /// to: a record can be no later than now (a little slack for the
    /// clocks); a later one (`u64::MAX`: an XID in the year 586,000) is
    /// `None`, and dropped.
    fn wall_ms(&self, time_us: u64, now_ms: i64) -> Option<i64> {
        let wall = self
            .boot_ms
            .saturating_add(i64::try_from(time_us / 1000).unwrap_or(i64::MAX));
        (wall <= now_ms.saturating_add(RECORD_TIME_SLACK_MS)).then_some(wall)
    }

    /// The GPU index of an XID's bus id: by the node's GPUs' bus ids, else
    /// through a `GPU at PCI:` line's UUID.
    fn gpu_of(&self, pci: PciAddr) -> Option<u32> {
        if let Some((_, i)) = self.gpus_by_pci.iter().find(|(p, _)| *p == pci) {
            return Some(*i);
        }
        let (_, uuid) = self.seen_uuids.iter().rev().find(|(p, _)| *p == pci)?;
        self.gpus_by_uuid
            .iter()
            .find(|(u, _)| u.eq_ignore_ascii_case(uuid))
            .map(|(_, i)| *i)
    }
}

/// Wall-clock milliseconds at boot: `btime` of `<proc_root>/stat` (whole
/// seconds, the same on every start, so a record always gets the same time);
/// without it, now less the time since boot.
pub fn boot_time_ms(proc_root: &Path) -> i64 {
    let stat = fleetop_proto::input::read_capped(&proc_root.join("stat"), 1 << 20).unwrap_or_default();
    let btime = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<i64>().ok());
    match btime {
        Some(s) => s.saturating_mul(1000),
        None => crate::now_ms() - since_boot_ms(),
    }
}

/// CLOCK_BOOTTIME in milliseconds (0 if unreadable).
// time_t and c_long are i64 here but i32 on 32-bit targets.
#[allow(clippy::useless_conversion)]
fn since_boot_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return 0;
    }
    i64::from(ts.tv_sec) * 1000 + i64::from(ts.tv_nsec) / 1_000_000
}

/// How a run of reads on the device ended.
enum DeviceRead {
    /// Nothing more for now (EAGAIN), or the bound was reached.
    Drained,
    Failed(std::io::Error),
}

/// Reads records from the non-blocking device until none is left (or
/// `max` records), queueing their events.
fn read_device(file: &mut File, buf: &mut [u8], pending: &mut Pending, max: usize) -> DeviceRead {
    for _ in 0..max {
        match file.read(buf) {
            Ok(0) => return DeviceRead::Drained,
            Ok(n) => pending.record(&String::from_utf8_lossy(&buf[..n])),
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock => return DeviceRead::Drained,
                std::io::ErrorKind::Interrupted => {}
                // EPIPE: records were overwritten before they were read; the
                // next read returns the oldest one left.
                std::io::ErrorKind::BrokenPipe => {}
                _ => return DeviceRead::Failed(e),
            },
        }
    }
    DeviceRead::Drained
}

/// Follows the device on a thread of its own: waits (poll, one second at a
/// time, so it notices the sampler is gone) and reads what arrived. The
/// sampler only ever takes the queue's lock, never waits on the device.
fn spawn_follower(mut file: File, mut buf: Vec<u8>, pending: Weak<Mutex<Pending>>, path: PathBuf) {
    let spawned = std::thread::Builder::new().name("kmsg".into()).spawn(move || {
        loop {
            let mut fds = libc::pollfd {
                fd: file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd we own, for a descriptor this thread owns.
            let r = unsafe { libc::poll(&mut fds, 1, 1000) };
            let Some(pending) = pending.upgrade() else {
                return;
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::warn!("{}: {e}; no more kernel log records", path.display());
                return;
            }
            if r == 0 {
                continue;
            }
            let mut p = lock(&pending);
            if let DeviceRead::Failed(e) = read_device(&mut file, &mut buf, &mut p, 4096) {
                tracing::warn!("{}: {e}; no more kernel log records", path.display());
                return;
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the kernel log thread: {e}; only the records at start are read");
    }
}

impl Sampler for KmsgSampler {
    fn describe(&mut self, info: &mut NodeInfo) {
        self.gpus_by_pci = info
            .gpus
            .iter()
            .filter_map(|g| Some((PciAddr::parse(&g.pci_bus_id)?, g.index)))
            .collect();
        self.gpus_by_uuid = info
            .gpus
            .iter()
            .filter(|g| !g.uuid.is_empty())
            .map(|g| (g.uuid.clone(), g.index))
            .collect();
    }

    fn sample(&mut self, now_ms: i64, out: &mut Sample) {
        let (events, dropped) = {
            let mut p = lock(&self.pending);
            if let Source::File(f) = &mut self.source {
                f.poll(&mut p);
            }
            (std::mem::take(&mut p.events), std::mem::take(&mut p.dropped))
        };
        if dropped > 0 {
            tracing::warn!("kernel log: {dropped} NVIDIA records dropped (more than {MAX_PENDING} between samples)");
        }
        let mut xids: Vec<(u32, XidEvent)> = self.held.drain(..).collect();
        for t in events {
            let Some(time_ms) = self.wall_ms(t.time_us, now_ms) else {
                tracing::debug!(
                    "kernel log: a record dated after now ({} µs since boot); dropped",
                    t.time_us
                );
                continue;
            };
            match t.event {
                Event::Xid { pci, code } => match self.gpu_of(pci) {
                    Some(gpu) => xids.push((
                        gpu,
                        XidEvent {
                            xid: code,
                            time_ms,
                            source: SOURCE_KMSG,
                        },
                    )),
                    None => tracing::debug!(
                        "kernel log: XID {code} on {:04x}:{:02x}:{:02x}, a bus id none of this node's GPUs has; dropped",
                        pci.domain,
                        pci.bus,
                        pci.device
                    ),
                },
                Event::Sxid {
                    switch_pci,
                    code,
                    fatal,
                    text,
                } => out.sxids.push(SxidEvent {
                    sxid: code,
                    time_ms,
                    switch_pci,
                    fatal,
                    text,
                }),
                Event::GpuAt { pci, uuid } => {
                    if self.seen_uuids.len() >= MAX_SEEN_UUIDS {
                        self.seen_uuids.pop_front();
                    }
                    self.seen_uuids.push_back((pci, uuid));
                }
            }
        }
        for (gpu, x) in xids {
            match out.gpus.iter_mut().find(|g| g.index == gpu) {
                Some(g) => g.xids.push(x),
                // The node lists the GPU, this sample does not (yet): keep
                // the XID for the next sample that does.
                None => {
                    if self.held.len() >= MAX_HELD {
                        self.held.pop_front();
                    }
                    self.held.push_back((gpu, x));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_compare_without_case_domain_width_or_function() {
        let nvml = PciAddr::parse("00000000:3B:00.0").expect("nvml form");
        assert_eq!(PciAddr::parse("0000:3b:00"), Some(nvml));
        assert_eq!(PciAddr::parse("PCI:0000:3b:00"), Some(nvml));
        assert_eq!(PciAddr::parse("pci:0000:3B:00.0"), Some(nvml));
        assert_eq!(PciAddr::parse("3b:00.0"), Some(nvml));
        assert_ne!(PciAddr::parse("0000:3c:00"), Some(nvml));
        assert_ne!(PciAddr::parse("0001:3b:00"), Some(nvml));
        for bad in [
            "",
            "3b",
            "zz:00.0",
            "0000:3b:00.",
            "0000:3b:00.0.0",
            "0000:100:00",
            ":::",
            "0000:3b:00)",
        ] {
            assert_eq!(PciAddr::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn records_and_their_continuation_lines() {
        let r = parse_record("3,1234,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
            .expect("record");
        assert_eq!(r.seq, 1234);
        assert_eq!(r.time_us, 5_678_901_234);
        assert!(r.message.starts_with("NVRM: Xid"));
        // As one read of the device returns it: the first line is the message.
        let r = parse_record("4,9,10,c,extra;hello\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n").expect("record");
        assert_eq!(r.message, "hello");
        assert_eq!(parse_record(" SUBSYSTEM=pci"), None);
        assert_eq!(parse_record(" DEVICE=+pci:0000:3b:00.0"), None);
        assert_eq!(parse_record("no header here"), None);
        assert_eq!(parse_record("x,1,2,-;msg"), None);
    }

    #[test]
    fn xid_lines_in_every_form() {
        let pci = PciAddr::parse("0000:3b:00").expect("pci");
        for msg in [
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00.0): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3B:00): 79",
        ] {
            assert_eq!(parse_message(msg), Some(Event::Xid { pci, code: 79 }), "{msg}");
        }
        assert_eq!(
            parse_message("NVRM: GPU at PCI:0000:3b:00: GPU-5f1a2b3c-0000-1111-2222-333344445555"),
            Some(Event::GpuAt {
                pci,
                uuid: "GPU-5f1a2b3c-0000-1111-2222-333344445555".into()
            })
        );
        for noise in [
            "NVRM: GPU Board Serial Number: 1654321012345",
            "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00): , no code",
            "NVRM: Xid (PCI:nonsense): 79, x",
            "NVRM: Xid (PCI:0000:3b:00: 79 unclosed",
            "NVRM: Xid (PCI:0000:3b:00): 99999999999, too big",
            "usb 1-1: new high-speed USB device number 2",
        ] {
            assert_eq!(parse_message(noise), None, "{noise}");
        }
    }

    #[test]
    fn sxid_first_lines_are_events_and_their_detail_lines_are_not() {
        assert_eq!(
            parse_message(
                "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Non-fatal, Link 47 egress non-posted PRIV error (First)"
            ),
            Some(Event::Sxid {
                switch_pci: "0000:c8:00.0".into(),
                code: 12028,
                fatal: false,
                text: "Link 47 egress non-posted PRIV error (First)".into()
            })
        );
        assert_eq!(
            parse_message("nvidia-nvswitch0: SXid (PCI:0000:c8:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"),
            Some(Event::Sxid {
                switch_pci: "0000:c8:00.0".into(),
                code: 20034,
                fatal: true,
                text: "Link 30 LTSSM Fault Up".into()
            })
        );
        for detail in [
            "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Severity 0 Engine instance 47 Sub-engine instance 00",
            "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Data {0x00000000, 0x00000000, 0x00000000}",
        ] {
            assert_eq!(parse_message(detail), None, "{detail}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        // A small xorshift: the same "random" bytes on every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pieces = [
            "NVRM: Xid (",
            "SXid (",
            "PCI:",
            "0000:3b:00",
            ".0",
            "): ",
            "79",
            ", ",
            "Fatal",
            "Non-fatal",
            ";",
            ",",
            "\n",
            " ",
            "NVRM: GPU at PCI:",
            ": GPU-",
            "é",
            "\u{0}",
            "ÿ",
            ")",
            "(",
        ];
        let mut pending = Pending::default();
        for _ in 0..20_000 {
            let mut bytes = Vec::new();
            for _ in 0..(next() % 24) {
                if next() % 3 == 0 {
                    bytes.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize].as_bytes());
                } else {
                    bytes.push(next() as u8);
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_record(&text);
            let _ = parse_message(&text);
            let _ = PciAddr::parse(&text);
            pending.record(&format!("3,1,2,-;{text}"));
            pending.record(&text);
        }
        assert!(pending.events.len() <= MAX_PENDING);
    }

    #[test]
    fn the_queue_keeps_the_newest_and_counts_the_rest() {
        let mut p = Pending::default();
        for i in 0..(MAX_PENDING as u64 + 10) {
            p.record(&format!("3,{i},{i},-;NVRM: Xid (PCI:0000:3b:00): 13, x"));
        }
        assert_eq!(p.events.len(), MAX_PENDING);
        assert_eq!(p.dropped, 10);
        assert_eq!(p.events.front().map(|t| t.time_us), Some(10));
    }

    #[test]
    fn boot_time_comes_from_btime() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("stat"), "cpu 1 2 3\nbtime 1700000000\nprocesses 5\n").expect("w");
        assert_eq!(boot_time_ms(dir.path()), 1_700_000_000_000);
        // Without it: about now less the uptime, in the past.
        let guess = boot_time_ms(Path::new("/nonexistent/fleetop"));
        assert!(guess <= crate::now_ms());
    }

    #[test]
    fn a_followed_file_gives_appended_records_and_skips_long_lines() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("kmsg");
        std::fs::write(
            &log,
            "3,1,1000000,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n SUBSYSTEM=pci\n3,2,2000",
        )
        .expect("w");
        let mut s = KmsgSampler::open(&log, dir.path()).expect("opens");
        assert_eq!(lock(&s.pending).events.len(), 1, "the half-written line waits");
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).expect("append");
        writeln!(f, "000,-;NVRM: Xid (PCI:0000:3b:00): 48, y").expect("w");
        f.write_all(&vec![b'a'; MAX_LINE * 2]).expect("w");
        writeln!(f, "\n3,3,3000000,-;NVRM: Xid (PCI:0000:3b:00): 94, z").expect("w");
        let mut out = Sample::default();
        s.sample(crate::now_ms(), &mut out);
        // No GPU matches: nothing lands, and nothing is held for a GPU the
        // node does not list.
        assert!(out.gpus.is_empty() && s.held.is_empty());
        let mut info = NodeInfo::default();
        info.gpus.push(crate::proto::GpuInfo {
            index: 2,
            pci_bus_id: "00000000:3B:00.0".into(),
            ..Default::default()
        });
        s.describe(&mut info);
        writeln!(f, "3,4,4000000,-;NVRM: Xid (PCI:0000:3b:00): 31, w").expect("w");
        let mut out = Sample::default();
        s.sample(crate::now_ms(), &mut out);
        assert!(out.gpus.is_empty());
        assert_eq!(s.held.len(), 1, "listed GPU, absent from the sample: held");
        let mut out = Sample::default();
        out.gpus.push(crate::proto::GpuSample {
            index: 2,
            ..Default::default()
        });
        s.sample(crate::now_ms(), &mut out);
        let codes: Vec<u32> = out.gpus[0].xids.iter().map(|x| x.xid).collect();
        assert_eq!(codes, [31]);
        assert_eq!(out.gpus[0].xids[0].source, SOURCE_KMSG);
    }

    #[test]
    fn a_fifo_or_a_device_that_is_not_the_kernel_log_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for p in [fifo.as_path(), Path::new("/dev/zero"), Path::new("/dev/null")] {
            let e = KmsgSampler::open(p, dir.path()).err().expect("refused");
            assert!(
                e.to_string().contains("neither the kernel log device"),
                "{}: {e}",
                p.display()
            );
        }
    }

    #[test]
    fn a_record_dated_after_now_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("kmsg");
        std::fs::write(
            &log,
            format!(
                "3,1,{},-;NVRM: Xid (PCI:0000:3b:00): 79, x\n3,2,1000,-;NVRM: Xid (PCI:0000:3b:00): 48, y\n",
                u64::MAX
            ),
        )
        .expect("w");
        let mut s = KmsgSampler::open(&log, dir.path()).expect("opens");
        let mut info = NodeInfo::default();
        info.gpus.push(crate::proto::GpuInfo {
            index: 0,
            pci_bus_id: "00000000:3B:00.0".into(),
            ..Default::default()
        });
        s.describe(&mut info);
        let mut out = Sample::default();
        out.gpus.push(crate::proto::GpuSample::default());
        s.sample(crate::now_ms(), &mut out);
        let codes: Vec<u32> = out.gpus[0].xids.iter().map(|x| x.xid).collect();
        assert_eq!(codes, [48], "the XID from the year 586,000 is dropped");
    }
}
