//! Node timelines on disk. The detectors' flag events go to
//! `timeline.jsonl` beside the audit log (one JSON event per line, 0600,
//! bounded: past `MAX_BYTES` the older half goes); actions are read back
//! from the audit log itself, so nothing is kept twice. A console that starts
//! rebuilds its timelines from both, and from the agents' fault journals as
//! they connect.

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::model::action::AuditLine;
use crate::model::timeline::{self, Event, What};
use crate::ops::{audit, state_file};

/// `timeline.jsonl` beside the audit log.
pub fn path() -> PathBuf {
    audit::audit_path().with_file_name("timeline.jsonl")
}

/// The timeline file is cut to its newer half past this size.
pub const MAX_BYTES: u64 = 4 << 20;

/// How much of the end of the audit log is read back (the log itself is
/// evidence and is never cut).
const AUDIT_TAIL_BYTES: u64 = 8 << 20;

/// Appends flag events (actions are in the audit log already).
pub fn append(events: &[Event]) -> std::io::Result<()> {
    append_to(&path(), events, MAX_BYTES)
}

fn append_to(p: &Path, events: &[Event], max: u64) -> std::io::Result<()> {
    let mut out = String::new();
    for e in events
        .iter()
        .filter(|e| matches!(e.what, What::FlagRaised { .. } | What::FlagCleared { .. }))
    {
        out.push_str(&serde_json::to_string(e).map_err(std::io::Error::other)?);
        out.push('\n');
    }
    if out.is_empty() {
        return Ok(());
    }
    state_file::append(p, out.as_bytes())?;
    if std::fs::metadata(p)?.len() > max {
        // Keep the newer half, whole lines only.
        let text = tail(p, max / 2)?;
        state_file::replace(p, text.as_bytes())?;
    }
    Ok(())
}

/// Saves on a blocking thread, so the screen never waits on the disk; a
/// failure is logged (the timeline is a convenience, the audit log is the
/// record).
pub fn save_in_background(events: Vec<Event>) {
    if events.is_empty() {
        return;
    }
    let save = move || {
        if let Err(e) = append(&events) {
            tracing::warn!("{}: timeline not saved: {e}", path().display());
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => drop(h.spawn_blocking(save)),
        Err(_) => save(),
    }
}

/// The last `bytes` of a file, from its first whole line.
fn tail(p: &Path, bytes: u64) -> std::io::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a planted link, never hanging on a FIFO.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(p)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let len = meta.len();
    let start = len.saturating_sub(bytes);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(bytes).read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(match (start, text.find('\n')) {
        (0, _) => text,
        (_, Some(i)) => text[i + 1..].to_string(),
        (_, None) => String::new(),
    })
}

/// Every event since `since_ms` of the nodes in `nodes` (all nodes when
/// `None`), from the timeline file and the audit log, in time order, each
/// once. Unreadable lines are skipped; a missing file is no events.
pub fn load(nodes: Option<&BTreeSet<String>>, since_ms: i64) -> Vec<Event> {
    load_from(&path(), &audit::audit_path(), nodes, since_ms)
}

fn load_from(timeline: &Path, audit_log: &Path, nodes: Option<&BTreeSet<String>>, since_ms: i64) -> Vec<Event> {
    let wanted = |e: &Event| e.time_ms >= since_ms && nodes.is_none_or(|n| n.contains(&e.node));
    let mut all: Vec<Event> = Vec::new();
    match tail(timeline, MAX_BYTES) {
        Ok(text) => all.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Event>(l).ok())
                .filter(|e| wanted(e)),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("{}: {e}", timeline.display()),
    }
    match tail(audit_log, AUDIT_TAIL_BYTES) {
        Ok(text) => {
            let lines = text.lines().filter_map(|l| serde_json::from_str::<AuditLine>(l).ok());
            for r in lines.map(AuditLine::into_report) {
                let Some(t) = parse_time(&r.time) else { continue };
                all.extend(timeline::from_report(&r, t).into_iter().filter(|e| wanted(e)));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("{}: {e}", audit_log.display()),
    }
    all.sort_by_key(|e| e.time_ms);
    let mut out: Vec<Event> = Vec::with_capacity(all.len());
    for e in all {
        let dup = out
            .iter()
            .rev()
            .take_while(|o| e.time_ms - o.time_ms <= timeline::SAME_EVENT_MS)
            .any(|o| o.same_as(&e));
        if !dup {
            out.push(e);
        }
    }
    out
}

/// Follows the audit log as it grows, for a console that shows actions
/// taken elsewhere (the CLI, another console, the policy of a `watch`)
/// after it started: each call reads what was appended since the last
/// (at most `AUDIT_TAIL_BYTES` at a time, whole lines only).
pub struct AuditFollower {
    path: std::path::PathBuf,
    offset: u64,
    /// Whether a refusal was logged (once, not on every tick).
    warned: bool,
}

impl AuditFollower {
    /// From the log's end now: what is already there was read at start.
    pub fn from_end() -> AuditFollower {
        AuditFollower::at_end(audit::audit_path())
    }

    fn at_end(path: std::path::PathBuf) -> AuditFollower {
        let offset = std::fs::metadata(&path).map_or(0, |m| m.len());
        AuditFollower {
            path,
            offset,
            warned: false,
        }
    }

    /// The events of the lines appended since the last call, of `nodes`.
    pub fn new_events(&mut self, nodes: &BTreeSet<String>) -> Vec<Event> {
        match self.read_new() {
            Ok(text) => text
                .lines()
                .filter_map(|l| serde_json::from_str::<AuditLine>(l).ok())
                .map(AuditLine::into_report)
                .filter_map(|r| parse_time(&r.time).map(|t| timeline::from_report(&r, t)))
                .flatten()
                .filter(|e| nodes.contains(&e.node))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                if !self.warned {
                    self.warned = true;
                    tracing::warn!("{e}");
                }
                Vec::new()
            }
        }
    }

    fn read_new(&mut self) -> std::io::Result<String> {
        // A FIFO, a link or someone else's file planted at the log is
        // refused, never waited on.
        let mut f = state_file::open(&self.path)?;
        let len = f.metadata()?.len();
        if len < self.offset {
            // Replaced by a shorter file: read it from its start.
            self.offset = 0;
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = Vec::new();
        f.take(AUDIT_TAIL_BYTES).read_to_end(&mut buf)?;
        // Whole lines only: a line being written is read next time.
        let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        buf.truncate(end);
        self.offset += end as u64;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

/// RFC 3339 to ms since the epoch.
pub fn parse_time(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::flag::{Action, FlagKind, Severity};

    fn raised(node: &str, t: i64) -> Event {
        Event {
            time_ms: t,
            node: node.into(),
            what: What::FlagRaised {
                kind: FlagKind::Xid,
                subject: "gpu3".into(),
                severity: Severity::Crit,
                action: Action::ResetGpu,
                detail: "XID 79".into(),
            },
            by: "fleetop".into(),
        }
    }

    #[test]
    fn flag_events_and_the_audit_log_make_one_timeline_that_stays_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tl = dir.path().join("timeline.jsonl");
        let log = dir.path().join("audit.jsonl");
        append_to(&tl, &[raised("gpu01", 1_000), raised("gpu02", 2_000)], MAX_BYTES).expect("saved");
        // The same flag again (a second console, or a restart seeing the
        // agent's history): kept once.
        append_to(&tl, &[raised("gpu01", 1_400)], MAX_BYTES).expect("saved");
        let drain = r#"{"time":"1970-01-01T00:00:05Z","stage":"done","actor":{"uid":0,"name":"alice","sudo_user":null,"env_user":null},"action":"drain","nodes":["gpu01"],"reason":"fleetop: xid","commands":[],"refused":null,"results":[{"node":"gpu01","ok":true,"message":"now drained","state_before":"idle","state_after":"drained"}]}"#;
        let started = drain.replace(r#""stage":"done""#, r#""stage":"started""#);
        std::fs::write(&log, format!("{started}\n{drain}\nnot json\n")).expect("log");
        let only = BTreeSet::from(["gpu01".to_string()]);
        let got = load_from(&tl, &log, Some(&only), 0);
        let lines: Vec<String> = got.iter().map(Event::line).collect();
        assert_eq!(got.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("crit xid on gpu3 raised (reset_gpu"), "{lines:?}");
        assert_eq!(lines[1], "drain ok (fleetop: xid): now drained by alice");
        assert_eq!(got[1].time_ms, 5_000);
        // --since leaves the older out.
        assert_eq!(load_from(&tl, &log, Some(&only), 2_000).len(), 1);
        // Bounded: past the limit the older half goes, whole lines only.
        let many: Vec<Event> = (0..400).map(|i| raised("gpu09", 10_000 + i * 10_000)).collect();
        append_to(&tl, &many, 16 << 10).expect("saved");
        let len = std::fs::metadata(&tl).expect("meta").len();
        assert!(len <= 16 << 10, "{len}");
        let kept = load_from(&tl, &log, None, 0);
        assert!(kept.iter().all(|e| e.node == "gpu09" || e.node == "gpu01"));
        assert_eq!(
            kept.iter().rfind(|e| e.node == "gpu09").map(|e| e.time_ms),
            Some(10_000 + 399 * 10_000)
        );
        assert!(
            kept.iter().all(|e| e.time_ms != 1_000 || e.node != "gpu02"),
            "the oldest went"
        );
    }

    #[test]
    fn a_follower_reads_the_actions_appended_since_whole_lines_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("audit.jsonl");
        let drain = |node: &str, by: &str| {
            format!(
                r#"{{"time":"1970-01-01T00:00:05Z","stage":"done","actor":{{"uid":0,"name":"{by}","sudo_user":null,"env_user":null}},"action":"drain","nodes":["{node}"],"reason":"fleetop: xid","commands":[],"refused":null,"results":[{{"node":"{node}","ok":true,"message":"now drained","state_before":"idle","state_after":"drained"}}]}}"#
            )
        };
        std::fs::write(&log, format!("{}\n", drain("gpu01", "old"))).expect("log");
        let mut f = AuditFollower::at_end(log.clone());
        let nodes = BTreeSet::from(["gpu01".to_string(), "gpu02".to_string()]);
        assert!(f.new_events(&nodes).is_empty(), "what was there at start is not new");
        // Another console drains gpu02, and a third node not ours; a line
        // half written waits for its end.
        let more = format!("{}\n{}\n", drain("gpu02", "bob"), drain("gpu09", "eve"));
        let half = drain("gpu01", "carol");
        let mut text = std::fs::read_to_string(&log).expect("log");
        text.push_str(&more);
        text.push_str(&half[..40]);
        std::fs::write(&log, &text).expect("log");
        let got: Vec<(String, String)> = f.new_events(&nodes).into_iter().map(|e| (e.node, e.by)).collect();
        assert_eq!(got, [("gpu02".to_string(), "bob".to_string())]);
        text.push_str(&half[40..]);
        text.push('\n');
        std::fs::write(&log, &text).expect("log");
        let got: Vec<String> = f.new_events(&nodes).into_iter().map(|e| e.by).collect();
        assert_eq!(got, ["carol"]);
        assert!(f.new_events(&nodes).is_empty());
    }
    #[test]
    fn a_follower_refuses_a_fifo_or_a_foreign_file_at_the_log_and_never_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("audit.jsonl");
        let mut f = AuditFollower::at_end(log.clone());
        let c = std::ffi::CString::new(log.as_os_str().as_encoded_bytes()).expect("path");
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let nodes = BTreeSet::from(["gpu01".to_string()]);
            let got = f.new_events(&nodes).len();
            let err = f.read_new().expect_err("refused").to_string();
            let _ = tx.send((got, err));
        });
        let (got, err) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a FIFO at the audit log is refused at once, not waited on");
        assert_eq!(got, 0);
        assert!(err.contains("not a regular file: refused"), "{err}");
    }
}
