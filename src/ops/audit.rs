//! The audit log: one JSON line per attempt to change the cluster, refused
//! ones included, so the next shift can see who did what and why.

use std::path::PathBuf;

use crate::model::action::{ActionReport, Actor, AuditLine, NodeResult, Plan, Stage};
use crate::model::time::{now_ms, rfc3339};

/// Who is acting: the OS account (uid and its name from the password
/// database), with what `SUDO_USER` and `USER` claim as extra fields only:
/// the environment is the caller's to set.
pub fn actor() -> Actor {
    let uid = nix::unistd::getuid();
    let name = nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name);
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Actor {
        uid: uid.as_raw(),
        env_user: var("USER").filter(|u| Some(u) != name.as_ref()),
        name,
        sudo_user: var("SUDO_USER"),
    }
}

/// This machine's host name, for the agents told who asked for a burn-in.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "?".into())
}

/// The report of `plan` at `stage`, by this user, now.
pub fn report(plan: &Plan, stage: Stage, refused: Option<String>, results: Vec<NodeResult>) -> ActionReport {
    ActionReport {
        time: rfc3339(now_ms()),
        stage,
        actor: actor(),
        action: plan.action,
        nodes: plan.nodes.clone(),
        reason: plan.reason.clone(),
        commands: plan.commands.clone(),
        refused,
        results,
        forced: plan.force,
        policy: plan.policy.clone(),
        scheduler: plan.scheduler,
        overrides: plan.overrides.clone(),
    }
}

/// The report of an attempt that was not run, and why.
pub fn refused(plan: &Plan, why: &str) -> ActionReport {
    report(plan, Stage::Refused, Some(why.into()), Vec::new())
}

/// Logs that `plan` is about to run; an action that cannot be logged does
/// not run.
pub fn started(plan: &Plan) -> anyhow::Result<()> {
    log(&report(plan, Stage::Started, None, Vec::new())).map(|_| ())
}

/// Runs a confirmed plan as every scheduler's actions must: logged before
/// it runs (not run if it cannot be logged: the report then says why), run,
/// logged with its results.
pub async fn run_logged<F, R>(plan: &Plan, run: F) -> ActionReport
where
    F: FnOnce() -> R,
    R: std::future::Future<Output = ActionReport>,
{
    if let Err(e) = started(plan) {
        return refused(plan, &e.to_string());
    }
    let report = run().await;
    if let Err(e) = log(&report) {
        tracing::error!("{e}");
    }
    report
}

/// The audit log: `$FLEETOP_AUDIT_LOG`, or `$XDG_STATE_HOME/fleetop/audit.jsonl`;
/// a demo's own (`logging::enter_sandbox`) whatever those say.
pub fn audit_path() -> PathBuf {
    if let Some(dir) = crate::logging::sandbox() {
        return dir.join("audit.jsonl");
    }
    if let Some(p) = std::env::var_os("FLEETOP_AUDIT_LOG") {
        return PathBuf::from(p);
    }
    crate::logging::log_path().with_file_name("audit.jsonl")
}

/// Appends one JSON line, flushed to disk before this returns. The file
/// (0600) and its directory (0700) get their modes whatever the umask, and
/// a symbolic link in the log's place is refused: the log is evidence. A log
/// that cannot be written is an error: an action that cannot be audited
/// should be noticed.
pub fn append(report: &ActionReport) -> std::io::Result<PathBuf> {
    let path = audit_path();
    let mut line = serde_json::to_string(&AuditLine::new(report)).map_err(std::io::Error::other)?;
    line.push('\n');
    super::state_file::append(&path, line.as_bytes())?;
    Ok(path)
}

/// Appends `report`, with the error in one line for people.
pub fn log(report: &ActionReport) -> anyhow::Result<PathBuf> {
    append(report).map_err(|e| anyhow::anyhow!("cannot write the audit log: {e}"))
}
