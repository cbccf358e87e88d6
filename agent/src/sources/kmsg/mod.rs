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
//!
//! This file holds the queue of parsed events between the reader and the
//! sampler (`Pending`). The record and message parsers are in `parse`,
//! reading the device in `device`, following a file in `file`, the boot
//! time that record times count from in `boot`, and the `Sampler` that
//! opens the source and puts the events into samples in `sampler`.

mod boot;
mod device;
mod file;
mod parse;
mod sampler;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub use boot::boot_time_ms;
pub use parse::{Event, PciAddr, Record, parse_message, parse_record};
pub use sampler::KmsgSampler;

/// The kernel's log device.
pub const DEFAULT_PATH: &str = "/dev/kmsg";

/// `XidEvent.source` of an XID read from the kernel log.
pub const SOURCE_KMSG: u32 = 1;

/// Events waiting for the next sample, at most: a storm of XIDs between two
/// samples keeps its newest ones.
const MAX_PENDING: usize = 1024;
/// The longest record (or file line) looked at; the kernel's own limit for a
/// record is 8 KiB with its dictionary. A longer line in a file is skipped.
const MAX_LINE: usize = 16 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
