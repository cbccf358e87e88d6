//! The kernel log as a `Sampler`: opens the device or a file, and puts the
//! queued events into samples, XIDs on their GPU (by PCI bus id, or through
//! a `GPU at PCI:` line's UUID) and SXids on the node. Apart from the
//! parsing and the reading: this is where events meet the node's GPUs.

use std::collections::VecDeque;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use super::boot::boot_time_ms;
use super::device::{DeviceRead, MAX_START_RECORDS, READ_BUF, is_kmsg_device, read_device, spawn_follower};
use super::file::FileFollower;
use super::parse::{Event, PciAddr};
use super::{MAX_PENDING, SOURCE_KMSG, Shared, lock};
use crate::proto::{NodeInfo, Sample, SxidEvent, XidEvent};
use crate::sources::Sampler;

/// XIDs held for a GPU the node lists but the sample lacks, at most.
const MAX_HELD: usize = 64;
/// `GPU at PCI:...: GPU-<uuid>` lines remembered, at most (one per GPU).
const MAX_SEEN_UUIDS: usize = 64;

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
    use crate::sources::kmsg::MAX_LINE;

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
