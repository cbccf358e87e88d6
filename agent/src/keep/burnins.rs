//! The burn-in journal: the verdict of each burn-in this node ran, kept by
//! the agent that ran it, beside the fault journal in its state directory,
//! across restarts. It is the evidence a return to service is decided on:
//! every console reads it from here (`NodeInfo.burn_ins`, and each new
//! record live on every Subscribe stream), so no console's own files, and
//! no demo, can stand in for a burn-in this node did not pass.
//!
//! Each record names the node as the agent knew it then (host name,
//! machine id, boot, GPU UUIDs and serials): a console matches a pass to
//! the node it would return by that identity, never by a name alone.
//!
//! Bounded (MAX_RECORDS, MAX_AGE_MS, MAX_CHECKS a record); written whole
//! and atomically on each new record (`keep::file`). Without a state
//! directory (the demo's in-process agents, a state directory that cannot
//! be used) the journal lives in memory: it is served, and lost on restart.
//! A file that cannot be read is a warning and an empty journal.

use std::path::{Path, PathBuf};

use prost::Message;

use crate::proto::{BenchResult, BurnInRecord, Verdict};

/// The journal's file name in the state directory.
pub const FILE_NAME: &str = "burnins.pb";
/// Records kept, newest kept.
pub const MAX_RECORDS: usize = 64;
/// Records older than this are dropped (a node drained for a quarter is
/// burned in again before it returns).
pub const MAX_AGE_MS: i64 = 90 * 24 * 3600 * 1000;
/// Checks kept a record (a full suite on 8 GPUs sends about a hundred).
pub const MAX_CHECKS: usize = 512;
/// The file's first bytes: what it is, and its version.
const MAGIC: &[u8] = b"fleetop-burnins 1\n";
/// The most the file may hold.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Text fields are cut to this many characters.
const MAX_TEXT: usize = 200;

pub struct BurnIns {
    /// The state directory; `None`: kept in memory only.
    dir: Option<PathBuf>,
    records: Vec<BurnInRecord>,
    /// A failed write was reported: the next failure is not (until one works).
    write_failed: bool,
}

impl BurnIns {
    /// A journal kept in memory only.
    pub fn in_memory() -> BurnIns {
        BurnIns {
            dir: None,
            records: Vec::new(),
            write_failed: false,
        }
    }

    /// The journal in `dir`, a state directory `keep::journal::Journal::open`
    /// has checked (ours, 0700, not a link).
    pub fn open(dir: &Path, now_ms: i64) -> BurnIns {
        let mut j = BurnIns {
            dir: Some(dir.to_path_buf()),
            ..BurnIns::in_memory()
        };
        let path = dir.join(FILE_NAME);
        match read_file(&path) {
            Ok(records) => j.records = records,
            Err(e) => tracing::warn!(
                "burn-in journal {}: {e}; starting an empty one (it replaces the file on the next burn-in)",
                path.display()
            ),
        }
        j.prune(now_ms);
        j
    }

    /// The records, oldest first.
    pub fn records(&self) -> &[BurnInRecord] {
        &self.records
    }

    /// Keeps `r` (made bounded and printable), and writes the journal.
    pub fn add(&mut self, mut r: BurnInRecord, now_ms: i64) -> BurnInRecord {
        bound(&mut r);
        self.records.push(r.clone());
        self.prune(now_ms);
        self.save();
        r
    }

    fn prune(&mut self, now_ms: i64) {
        let oldest = now_ms.saturating_sub(MAX_AGE_MS);
        self.records.retain(|r| r.ended_ms >= oldest);
        self.records.sort_by_key(|r| r.ended_ms);
        if self.records.len() > MAX_RECORDS {
            let extra = self.records.len() - MAX_RECORDS;
            self.records.drain(..extra);
        }
    }

    fn save(&mut self) {
        let Some(dir) = &self.dir else { return };
        let mut bytes = MAGIC.to_vec();
        for r in &self.records {
            // Into a Vec: cannot fail.
            let _ = r.encode_length_delimited(&mut bytes);
        }
        match super::file::write_atomic(dir, FILE_NAME, &bytes) {
            Ok(()) => self.write_failed = false,
            Err(e) => {
                if !self.write_failed {
                    tracing::warn!(
                        "burn-in journal {}: cannot write it: {e}",
                        dir.join(FILE_NAME).display()
                    );
                }
                self.write_failed = true;
            }
        }
    }
}

/// Whether a suite that ran passed: no error, no failed check, and every
/// GPU the node should have (`expect_gpus`) measured by a GPU check (a
/// suite that measured fewer proved nothing about the others).
pub fn passed(checks: &[BenchResult], error: &str, expect_gpus: usize) -> bool {
    let failed = checks.iter().any(|c| c.verdict == Verdict::Fail as i32);
    let measured: std::collections::BTreeSet<i32> = checks
        .iter()
        .filter(|c| {
            c.gpu >= 0
                && fleetop_proto::bench::GPU_CHECKS.contains(&c.name.as_str())
                && matches!(Verdict::try_from(c.verdict), Ok(Verdict::Pass | Verdict::Warn))
        })
        .map(|c| c.gpu)
        .collect();
    error.is_empty() && !failed && measured.len() >= expect_gpus
}

/// This machine's id (`/etc/machine-id`, else D-Bus's copy), empty if
/// unknown or not one.
pub fn machine_id(root: &Path) -> String {
    for p in ["etc/machine-id", "var/lib/dbus/machine-id"] {
        let text = fleetop_proto::input::read_capped(&root.join(p), 4096).unwrap_or_default();
        let id = text.trim();
        if (16..=64).contains(&id.len()) && id.chars().all(|c| c.is_ascii_hexdigit()) {
            return id.to_string();
        }
    }
    String::new()
}

/// Cuts a record's text and checks to their bounds, made printable.
fn bound(r: &mut BurnInRecord) {
    let line = |s: &mut String| {
        if s.chars().count() > MAX_TEXT || fleetop_proto::input::has_unprintable(s) {
            *s = fleetop_proto::input::printable(s, MAX_TEXT);
        }
    };
    for s in [
        &mut r.suite,
        &mut r.requested_by,
        &mut r.hostname,
        &mut r.machine_id,
        &mut r.boot_id,
        &mut r.error,
    ] {
        line(s);
    }
    r.gpu_uuids.truncate(MAX_CHECKS);
    r.gpu_serials.truncate(MAX_CHECKS);
    r.gpu_uuids.iter_mut().chain(r.gpu_serials.iter_mut()).for_each(line);
    r.checks.truncate(MAX_CHECKS);
    for c in &mut r.checks {
        for s in [&mut c.name, &mut c.unit, &mut c.expected_source, &mut c.reason] {
            line(s);
        }
    }
}

/// The records of the file at `path`, oldest first; none when there is no
/// file yet.
fn read_file(path: &Path) -> std::io::Result<Vec<BurnInRecord>> {
    let Some(buf) = super::file::read_own(path, MAX_FILE_BYTES)? else {
        return Ok(Vec::new());
    };
    let Some(mut rest) = buf.strip_prefix(MAGIC) else {
        return Err(std::io::Error::other("not a burn-in journal (or another version)"));
    };
    let mut records = Vec::new();
    while !rest.is_empty() {
        let mut r = BurnInRecord::decode_length_delimited(&mut rest)
            .map_err(|e| std::io::Error::other(format!("not a burn-in journal ({e})")))?;
        bound(&mut r);
        records.push(r);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOW: i64 = 1_800_000_000_000;

    fn record(ended_ms: i64, passed: bool) -> BurnInRecord {
        BurnInRecord {
            started_ms: ended_ms - 30_000,
            ended_ms,
            suite: "quick".into(),
            passed,
            requested_by: "alice@console1".into(),
            hostname: "gpu07".into(),
            machine_id: "0123456789abcdef0123456789abcdef".into(),
            boot_id: "b".into(),
            gpu_uuids: vec!["GPU-1".into()],
            gpu_serials: vec!["1650".into()],
            checks: vec![BenchResult {
                name: "hbm_d2d".into(),
                gpu: 0,
                verdict: Verdict::Pass as i32,
                ..Default::default()
            }],
            error: String::new(),
        }
    }

    #[test]
    fn survives_a_restart_bounded_and_oldest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = BurnIns::open(dir.path(), NOW);
        assert!(j.records().is_empty());
        for i in 0..(MAX_RECORDS as i64 + 5) {
            j.add(record(NOW - 1_000_000 + i * 1000, i % 2 == 0), NOW);
        }
        let file = dir.path().join(FILE_NAME);
        assert_eq!(
            std::fs::metadata(&file).expect("file").permissions().mode() & 0o777,
            0o600
        );
        let again = BurnIns::open(dir.path(), NOW + 1000);
        assert_eq!(again.records().len(), MAX_RECORDS, "bounded");
        assert_eq!(again.records(), j.records(), "the same records after a restart");
        assert_eq!(
            again.records()[0].ended_ms,
            NOW - 1_000_000 + 5 * 1000,
            "the oldest went"
        );
        // A quarter later, all of it is too old.
        let later = BurnIns::open(dir.path(), NOW + MAX_AGE_MS + 10_000_000);
        assert!(later.records().is_empty());
    }

    #[test]
    fn text_from_a_caller_is_kept_printable_and_bounded() {
        let mut j = BurnIns::in_memory();
        let mut r = record(NOW, true);
        r.requested_by = format!("\x1b]0;pwned\x07{}", "x".repeat(5000));
        let kept = j.add(r, NOW);
        assert!(!kept.requested_by.contains('\x1b'));
        assert!(
            kept.requested_by.chars().count() < MAX_TEXT + 40,
            "{}",
            kept.requested_by
        );
    }

    #[test]
    fn a_damaged_or_foreign_file_is_an_empty_journal_replaced_on_the_next_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        for junk in [&b"{ not ours"[..], b"fleetop-burnins 1\n\xff\xff\xff\xff", b""] {
            std::fs::write(dir.path().join(FILE_NAME), junk).expect("w");
            let mut j = BurnIns::open(dir.path(), NOW);
            assert!(j.records().is_empty());
            j.add(record(NOW, true), NOW);
            assert_eq!(BurnIns::open(dir.path(), NOW).records().len(), 1, "rewritten whole");
        }
    }

    #[test]
    fn a_pass_needs_a_measured_gpu_no_failure_and_no_error() {
        let pass = record(NOW, true).checks;
        assert!(passed(&pass, "", 1));
        assert!(!passed(&pass, "timed out after 60 s", 1));
        assert!(!passed(&pass, "", 2), "one GPU of two measured");
        assert!(!passed(&[], "", 1), "no GPU measured on a node with GPUs");
        assert!(passed(&[], "", 0), "a node without GPUs has none to measure");
        let mut failed = pass.clone();
        failed.push(BenchResult {
            name: "gemm".into(),
            gpu: 1,
            verdict: Verdict::Fail as i32,
            ..Default::default()
        });
        assert!(!passed(&failed, "", 1));
    }

    #[test]
    fn machine_id_reads_the_file_and_refuses_what_is_not_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(machine_id(dir.path()), "");
        std::fs::create_dir_all(dir.path().join("etc")).expect("mkdir");
        std::fs::write(dir.path().join("etc/machine-id"), "not an id\n").expect("w");
        assert_eq!(machine_id(dir.path()), "");
        std::fs::write(dir.path().join("etc/machine-id"), "0123456789abcdef0123456789abcdef\n").expect("w");
        assert_eq!(machine_id(dir.path()), "0123456789abcdef0123456789abcdef");
    }
}
