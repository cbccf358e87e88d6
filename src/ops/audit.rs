//! The audit log: one JSON line per attempt to change the cluster, refused
//! ones included, so the next shift can see who did what and why.

use std::io::Write;
use std::path::PathBuf;

use crate::model::action::{ActionReport, NodeResult, Plan};
use crate::model::time::{now_ms, rfc3339};

/// Who is acting: the login name, for the audit log.
pub fn user() -> String {
    std::env::var("SUDO_USER")
        .ok()
        .filter(|u| !u.is_empty())
        .map(|u| format!("{u} (via sudo)"))
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

/// The report of `plan`, by this user, now.
pub fn report(plan: &Plan, refused: Option<String>, results: Vec<NodeResult>) -> ActionReport {
    ActionReport {
        time: rfc3339(now_ms()),
        user: user(),
        action: plan.action,
        nodes: plan.nodes.clone(),
        reason: plan.reason.clone(),
        commands: plan.commands.clone(),
        refused,
        results,
    }
}

/// The report of an attempt that was not run, and why.
pub fn refused(plan: &Plan, why: &str) -> ActionReport {
    report(plan, Some(why.into()), Vec::new())
}

/// The audit log: `$FLEETOP_AUDIT_LOG`, or `$XDG_STATE_HOME/fleetop/audit.jsonl`.
pub fn audit_path() -> PathBuf {
    if let Some(p) = std::env::var_os("FLEETOP_AUDIT_LOG") {
        return PathBuf::from(p);
    }
    crate::logging::log_path().with_file_name("audit.jsonl")
}

/// Appends one JSON line. A log that cannot be written is an error: an
/// action that cannot be audited should be noticed.
pub fn append(report: &ActionReport) -> std::io::Result<PathBuf> {
    let path = audit_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = serde_json::to_string(report).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
    // One write per line, so concurrent consoles do not interleave lines.
    f.write_all(line.as_bytes())?;
    Ok(path)
}

/// Appends `report`, with the error in one line for people.
pub fn log(report: &ActionReport) -> anyhow::Result<PathBuf> {
    append(report).map_err(|e| anyhow::anyhow!("cannot write the audit log: {e}"))
}
