//! The kernel's log device (`/dev/kmsg`): recognising it, draining the
//! records it holds, and following new ones on a thread of its own. Apart
//! from the file source: the device gives one record a read, and is waited
//! on off the sampler's path.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Mutex, Weak};

use super::{Pending, lock};

/// One read of /dev/kmsg returns one record and fails with EINVAL when the
/// buffer cannot hold it: twice the kernel's limit.
pub(super) const READ_BUF: usize = 16 * 1024;
/// Records read from /dev/kmsg at start before the rest is left to the
/// thread (the buffer is finite, but records may keep arriving).
pub(super) const MAX_START_RECORDS: usize = 1 << 20;

/// Whether a character device number is the kernel log's (`/dev/kmsg`:
/// major 1, minor 11 on Linux).
pub(super) fn is_kmsg_device(rdev: u64) -> bool {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (major, minor) == (1, 11)
}

/// How a run of reads on the device ended.
pub(super) enum DeviceRead {
    /// Nothing more for now (EAGAIN), or the bound was reached.
    Drained,
    Failed(std::io::Error),
}

/// Reads records from the non-blocking device until none is left (or
/// `max` records), queueing their events.
pub(super) fn read_device(file: &mut File, buf: &mut [u8], pending: &mut Pending, max: usize) -> DeviceRead {
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
pub(super) fn spawn_follower(mut file: File, mut buf: Vec<u8>, pending: Weak<Mutex<Pending>>, path: PathBuf) {
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
