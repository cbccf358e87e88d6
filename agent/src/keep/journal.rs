//! The fault journal: the XIDs this node's GPUs had, kept in the agent's
//! state directory across agent restarts and reboots, so a console can see
//! that a GPU faults again (a second XID 79 in a week) and not only now.
//!
//! Bounded (per GPU, and in age); written only when it changed, atomically
//! (a temporary file in the same directory, then a rename), mode 0600 in a
//! 0700 directory. A journal that cannot be read is a warning and an empty
//! journal, never a failed start.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::proto::FaultRecord;

/// The state directory when none is given.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/fleetop-agent";
/// The journal's file name in the state directory.
pub const FILE_NAME: &str = "faults.json";
/// Records kept per GPU, newest kept.
pub const MAX_PER_GPU: usize = 64;
/// All records, at most (a node has at most 64 GPUs; a file edited by hand
/// may name more).
const MAX_RECORDS: usize = 64 * MAX_PER_GPU;
/// Records older than this are dropped.
pub const MAX_AGE_MS: i64 = 30 * 24 * 3600 * 1000;
/// Two reports of one fault: NVML's event time and the kernel log's record
/// time (from the boot time, whole seconds) differ by up to a few seconds,
/// and a kernel log replayed after an agent restart gives the record it
/// gave before. One record per GPU and code within this window.
pub const SAME_FAULT_MS: i64 = 10_000;
/// The most the journal file may hold.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Field lengths a record may have (longer ones are not ours).
const MAX_FIELD: usize = 128;

/// The journal's file: a version, then records oldest first.
#[derive(Debug, Serialize, Deserialize)]
struct FileForm {
    version: u32,
    records: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    gpu_uuid: String,
    kind: String,
    code: u32,
    time_ms: i64,
    #[serde(default)]
    boot_id: String,
}

/// Why the state directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error("--state-dir {0}: a symbolic link; refusing it (give the directory it points to)")]
    Symlink(String),
    #[error("--state-dir {0}: not a directory")]
    NotADirectory(String),
    #[error("--state-dir {0}: {1}; refusing it (chmod 700, owned by the agent's user)")]
    Unsafe(String, String),
    #[error("--state-dir {0}: {1}")]
    Io(String, std::io::Error),
}

pub struct Journal {
    dir: PathBuf,
    /// This boot (`NodeInfo.boot_id`), stamped on new records.
    boot_id: String,
    records: Vec<FaultRecord>,
    /// A failed write was reported: the next failure is not (until one works).
    write_failed: bool,
}

/// Whether `dir` may be the state directory of an agent running as `uid`
/// (the start, and `config check` for the unit's user): `Ok(true)` where it
/// is there and safe, `Ok(false)` where it is missing (the start makes it,
/// 0700). A link, a non-directory, a directory others may write to or one
/// owned by another user is refused.
pub fn check_dir(dir: &Path, uid: u32) -> Result<bool, StateDirError> {
    let shown = dir.display().to_string();
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(StateDirError::Symlink(shown)),
        Ok(m) if !m.is_dir() => Err(StateDirError::NotADirectory(shown)),
        // Anyone who may write there could plant a FIFO or a forged
        // journal that escalates XIDs and feeds the remediation policy.
        Ok(m) if m.mode() & 0o022 != 0 => {
            let why = format!("others may write to it (mode {:o})", m.mode() & 0o7777);
            Err(StateDirError::Unsafe(shown, why))
        }
        Ok(m) if m.uid() != uid => {
            let why = format!("owned by uid {}, not the agent's (uid {uid})", m.uid());
            Err(StateDirError::Unsafe(shown, why))
        }
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StateDirError::Io(shown, e)),
    }
}

impl Journal {
    /// Opens the journal in `dir`, created (0700) if missing. A symlinked or
    /// unusable directory is an error; a journal file that cannot be read or
    /// parsed is a warning and an empty journal.
    pub fn open(dir: &Path, boot_id: String, now_ms: i64) -> Result<Journal, StateDirError> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if !check_dir(dir, unsafe { libc::geteuid() })? {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| StateDirError::Io(dir.display().to_string(), e))?;
        }
        let mut j = Journal {
            dir: dir.to_path_buf(),
            boot_id,
            records: Vec::new(),
            write_failed: false,
        };
        let path = j.path();
        match read_file(&path) {
            Ok(Some(records)) => j.records = records,
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "fault journal {}: {e}; starting an empty one (it replaces the file on the next fault)",
                path.display()
            ),
        }
        j.prune(now_ms);
        Ok(j)
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// The records, oldest first.
    pub fn records(&self) -> &[FaultRecord] {
        &self.records
    }

    /// Adds an XID of the GPU `gpu_uuid` at `time_ms` unless the journal has
    /// it already (the same GPU and code within SAME_FAULT_MS); true if it
    /// was added. Call `save` after a batch.
    pub fn add_xid(&mut self, gpu_uuid: &str, code: u32, time_ms: i64, now_ms: i64) -> bool {
        if gpu_uuid.is_empty() || gpu_uuid.len() > MAX_FIELD || time_ms < now_ms.saturating_sub(MAX_AGE_MS) {
            return false;
        }
        let known = self.records.iter().any(|r| {
            r.kind == "xid"
                && r.code == code
                && r.gpu_uuid == gpu_uuid
                && r.time_ms.abs_diff(time_ms) <= SAME_FAULT_MS as u64
                && (r.boot_id == self.boot_id || r.boot_id.is_empty() || self.boot_id.is_empty())
        });
        if known {
            return false;
        }
        let at = self.records.partition_point(|r| r.time_ms <= time_ms);
        self.records.insert(
            at,
            FaultRecord {
                gpu_uuid: gpu_uuid.to_string(),
                kind: "xid".into(),
                code,
                time_ms,
                boot_id: self.boot_id.clone(),
            },
        );
        self.prune(now_ms);
        true
    }

    /// Drops what is too old, then the oldest of a GPU beyond MAX_PER_GPU,
    /// then the oldest beyond MAX_RECORDS. Records stay oldest first.
    fn prune(&mut self, now_ms: i64) {
        let oldest = now_ms.saturating_sub(MAX_AGE_MS);
        self.records.retain(|r| r.time_ms >= oldest);
        self.records.sort_by_key(|r| r.time_ms);
        // Newest first, counting per GPU.
        let mut counts: std::collections::HashMap<String, usize> = Default::default();
        let mut keep = vec![true; self.records.len()];
        for (i, r) in self.records.iter().enumerate().rev() {
            let n = counts.entry(r.gpu_uuid.clone()).or_default();
            *n += 1;
            keep[i] = *n <= MAX_PER_GPU;
        }
        let mut k = keep.into_iter();
        self.records.retain(|_| k.next().unwrap_or(true));
        if self.records.len() > MAX_RECORDS {
            let extra = self.records.len() - MAX_RECORDS;
            self.records.drain(..extra);
        }
    }

    /// Writes the journal: a new file beside the old one (0600, never through
    /// a link), synced, then renamed over it, so a crash leaves the old
    /// journal or the new one, never half of one. A failure is reported once
    /// (until a write works again).
    pub fn save(&mut self) {
        match self.write() {
            Ok(()) => self.write_failed = false,
            Err(e) => {
                if !self.write_failed {
                    tracing::warn!("fault journal {}: cannot write it: {e}", self.path().display());
                }
                self.write_failed = true;
            }
        }
    }

    fn write(&self) -> std::io::Result<()> {
        let form = FileForm {
            version: 1,
            records: self
                .records
                .iter()
                .map(|r| Entry {
                    gpu_uuid: r.gpu_uuid.clone(),
                    kind: r.kind.clone(),
                    code: r.code,
                    time_ms: r.time_ms,
                    boot_id: r.boot_id.clone(),
                })
                .collect(),
        };
        let mut text = serde_json::to_vec_pretty(&form).map_err(std::io::Error::other)?;
        text.push(b'\n');
        super::file::write_atomic(&self.dir, FILE_NAME, &text)
    }
}

/// The journal file's records; `None` when there is no file yet.
fn read_file(path: &Path) -> std::io::Result<Option<Vec<FaultRecord>>> {
    let Some(buf) = super::file::read_own(path, MAX_FILE_BYTES)? else {
        return Ok(None);
    };
    let form: FileForm = serde_json::from_slice(&buf).map_err(|e| {
        std::io::Error::other(format!(
            "not a fault journal ({})",
            fleetop_proto::input::printable(&e.to_string(), 200)
        ))
    })?;
    if form.version != 1 {
        return Err(std::io::Error::other(format!("version {}, not 1", form.version)));
    }
    let ok = |s: &str| s.len() <= MAX_FIELD && s.chars().all(|c| c.is_ascii_graphic());
    Ok(Some(
        form.records
            .into_iter()
            .filter(|e| !e.gpu_uuid.is_empty() && ok(&e.gpu_uuid) && ok(&e.kind) && ok(&e.boot_id))
            .map(|e| FaultRecord {
                gpu_uuid: e.gpu_uuid,
                kind: e.kind,
                code: e.code,
                time_ms: e.time_ms,
                boot_id: e.boot_id,
            })
            .collect(),
    ))
}

/// This boot's id (`<proc_root>/sys/kernel/random/boot_id`), empty if unknown.
pub fn boot_id(proc_root: &Path) -> String {
    let text =
        fleetop_proto::input::read_capped(&proc_root.join("sys/kernel/random/boot_id"), 4096).unwrap_or_default();
    let id = text.trim();
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return String::new();
    }
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn survives_a_restart_once_and_dedupes_a_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state/sub");
        let mut j = Journal::open(&state, "boot-a".into(), NOW).expect("opens");
        assert_eq!(
            std::fs::metadata(&state).expect("dir").permissions().mode() & 0o777,
            0o700
        );
        assert!(j.add_xid("GPU-1", 79, NOW - 5000, NOW));
        assert!(!j.add_xid("GPU-1", 79, NOW - 5000, NOW), "the same record");
        assert!(
            !j.add_xid("GPU-1", 79, NOW - 3000, NOW),
            "the same fault, another source"
        );
        assert!(j.add_xid("GPU-1", 48, NOW - 5000, NOW), "another code");
        assert!(j.add_xid("GPU-2", 79, NOW - 5000, NOW), "another GPU");
        assert!(!j.add_xid("", 79, NOW, NOW), "no GPU");
        j.save();
        let file = state.join(FILE_NAME);
        assert_eq!(
            std::fs::metadata(&file).expect("file").permissions().mode() & 0o777,
            0o600
        );
        let leftovers: Vec<_> = std::fs::read_dir(&state).expect("dir").flatten().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");

        // The agent restarts, the kernel log is replayed: nothing new.
        let mut j = Journal::open(&state, "boot-a".into(), NOW + 60_000).expect("opens");
        assert_eq!(j.records().len(), 3);
        assert!(!j.add_xid("GPU-1", 79, NOW - 5000, NOW + 60_000));
        // A reboot, and the GPU falls off the bus again.
        let mut j = Journal::open(&state, "boot-b".into(), NOW + 60_000).expect("opens");
        assert!(j.add_xid("GPU-1", 79, NOW + 50_000, NOW + 60_000));
        let r = j.records().last().expect("record");
        assert_eq!((r.code, r.boot_id.as_str(), r.kind.as_str()), (79, "boot-b", "xid"));
        assert!(
            j.records().windows(2).all(|w| w[0].time_ms <= w[1].time_ms),
            "oldest first"
        );
    }

    #[test]
    fn bounded_per_gpu_and_in_age() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = Journal::open(dir.path(), String::new(), NOW).expect("opens");
        assert!(!j.add_xid("GPU-1", 13, NOW - MAX_AGE_MS - 1, NOW), "too old");
        for i in 0..(MAX_PER_GPU as i64 + 10) {
            assert!(j.add_xid("GPU-1", 13, NOW - 1_000_000 + i * 20_000, NOW));
        }
        j.add_xid("GPU-2", 13, NOW - 1_000_000, NOW);
        assert_eq!(
            j.records().iter().filter(|r| r.gpu_uuid == "GPU-1").count(),
            MAX_PER_GPU
        );
        assert_eq!(j.records().len(), MAX_PER_GPU + 1);
        // The oldest of GPU-1 went.
        let first = j.records().iter().find(|r| r.gpu_uuid == "GPU-1").expect("one");
        assert_eq!(first.time_ms, NOW - 1_000_000 + 10 * 20_000);
        // A month later, all of it is too old.
        j.prune(NOW + MAX_AGE_MS + 10_000_000);
        assert!(j.records().is_empty());
    }

    #[test]
    fn a_corrupt_journal_is_a_warning_and_an_empty_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        for junk in [
            &b"{ not json"[..],
            b"",
            b"\xff\xfe\x00",
            br#"{"version":7,"records":[]}"#,
        ] {
            std::fs::write(dir.path().join(FILE_NAME), junk).expect("w");
            let mut j = Journal::open(dir.path(), "b".into(), NOW).expect("opens");
            assert!(j.records().is_empty());
            assert!(j.add_xid("GPU-1", 79, NOW, NOW));
            j.save();
            let j = Journal::open(dir.path(), "b".into(), NOW).expect("opens");
            assert_eq!(j.records().len(), 1, "rewritten whole");
        }
    }

    #[test]
    fn a_symlinked_state_dir_is_refused_in_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let err = Journal::open(&link, String::new(), NOW)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("symbolic link") && !err.contains('\n'), "{err}");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").expect("w");
        assert!(Journal::open(&file, String::new(), NOW).is_err());
    }

    #[test]
    fn a_state_dir_others_may_write_to_is_refused_and_a_planted_fifo_never_hangs() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = Journal::open(&state, String::new(), NOW)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("others may write to it (mode 777)"), "{err}");
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        // A FIFO in the journal's place: refused at once, an empty journal.
        let fifo = std::ffi::CString::new(state.join(FILE_NAME).as_os_str().as_encoded_bytes()).expect("path");
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let j = Journal::open(&state, String::new(), NOW).expect("opens without hanging");
        assert!(j.records().is_empty());
        // A hard link to a file elsewhere is not the agent's own.
        std::fs::remove_file(state.join(FILE_NAME)).expect("rm");
        let forged = dir.path().join("forged.json");
        std::fs::write(
            &forged,
            r#"{"version":1,"records":[{"gpu_uuid":"GPU-1","kind":"xid","code":79,"time_ms":1,"boot_id":""}]}"#,
        )
        .expect("w");
        std::fs::hard_link(&forged, state.join(FILE_NAME)).expect("link");
        assert!(read_file(&state.join(FILE_NAME)).is_err());
    }

    #[test]
    fn a_symlinked_journal_file_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"version":1,"records":[]}"#).expect("w");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, state.join(FILE_NAME)).expect("symlink");
        let mut j = Journal::open(&state, String::new(), NOW).expect("opens");
        assert!(j.add_xid("GPU-1", 79, NOW, NOW));
        j.save();
        // The rename replaced the link with the journal; the target is untouched.
        assert_eq!(
            std::fs::read_to_string(&elsewhere).expect("r"),
            r#"{"version":1,"records":[]}"#
        );
        assert!(
            !std::fs::symlink_metadata(state.join(FILE_NAME))
                .expect("m")
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn boot_id_is_read_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sys/kernel/random");
        std::fs::create_dir_all(&p).expect("mkdir");
        std::fs::write(p.join("boot_id"), "a5897d42-f6ef-4a43-b9b4-2aed3d9e2c64\n").expect("w");
        assert_eq!(boot_id(dir.path()), "a5897d42-f6ef-4a43-b9b4-2aed3d9e2c64");
        std::fs::write(p.join("boot_id"), "\x1b[31mevil").expect("w");
        assert_eq!(boot_id(dir.path()), "");
        assert_eq!(boot_id(Path::new("/nonexistent/fleetop")), "");
    }
}
