//! Actions that change the cluster: drain, resume, undrain. Each is planned
//! (the exact commands, shown before anything runs), confirmed by the caller,
//! run node by node, re-read from the scheduler, reported per node, and
//! appended to the audit log. Read-only mode refuses them, and says so in the
//! log too.

use std::io::Write;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sched::{self, SchedNode, Slurm};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum NodeAction {
    /// Stop scheduling new jobs on the nodes (running jobs finish).
    Drain,
    /// Return the nodes to service (clears DRAIN and DOWN).
    Resume,
    /// Clear DRAIN only; a node that is DOWN stays DOWN.
    Undrain,
    /// A burn-in suite (`fleetop bench`): logged like the others.
    #[value(skip)]
    Bench,
}

impl NodeAction {
    pub fn verb(self) -> &'static str {
        match self {
            NodeAction::Drain => "drain",
            NodeAction::Resume => "resume",
            NodeAction::Undrain => "undrain",
            NodeAction::Bench => "bench",
        }
    }
}

/// What will run, before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub action: NodeAction,
    pub nodes: Vec<String>,
    pub reason: Option<String>,
    /// One argument vector per node, exactly as it will be executed.
    pub commands: Vec<Vec<String>>,
}

/// The command for one node.
pub fn command(action: NodeAction, node: &str, reason: Option<&str>) -> Vec<String> {
    let mut argv = vec!["scontrol".to_string(), "update".into(), format!("NodeName={node}")];
    match action {
        NodeAction::Drain => {
            argv.push("State=DRAIN".into());
            argv.push(format!("Reason={}", reason.unwrap_or_default()));
        }
        NodeAction::Resume => argv.push("State=RESUME".into()),
        NodeAction::Undrain => argv.push("State=UNDRAIN".into()),
        NodeAction::Bench => {}
    }
    argv
}

/// Plans an action; a drain needs a reason (the next person needs to know why).
pub fn plan(action: NodeAction, nodes: Vec<String>, reason: Option<String>) -> Result<Plan, String> {
    if nodes.is_empty() {
        return Err("no nodes given".into());
    }
    let reason = reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    if action == NodeAction::Drain && reason.is_none() {
        return Err("a drain needs a reason (--reason TEXT)".into());
    }
    let commands = nodes.iter().map(|n| command(action, n, reason.as_deref())).collect();
    Ok(Plan {
        action,
        nodes,
        reason,
        commands,
    })
}

/// A command as a person would type it (for display and the audit log; it
/// is never run through a shell).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./:[],".contains(c)) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeResult {
    pub node: String,
    pub ok: bool,
    /// What happened, in words: Slurm's error, or the state it is in now.
    pub message: String,
    pub state_before: Option<String>,
    pub state_after: Option<String>,
}

/// Everything about one attempt, as reported and as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionReport {
    /// RFC 3339.
    pub time: String,
    pub user: String,
    pub action: NodeAction,
    pub nodes: Vec<String>,
    pub reason: Option<String>,
    /// The exact commands, as argument vectors.
    pub commands: Vec<Vec<String>>,
    /// Why it did not run (read-only mode, not confirmed) or was stopped
    /// (a burn-in cancelled from the console), if so.
    pub refused: Option<String>,
    pub results: Vec<NodeResult>,
}

impl ActionReport {
    pub fn ok(&self) -> bool {
        self.refused.is_none() && self.results.iter().all(|r| r.ok)
    }

    /// A report of an action that was not run.
    pub fn refused(plan: &Plan, why: &str) -> Self {
        ActionReport {
            time: crate::export::rfc3339(fleetop_agent::now_ms()),
            user: user(),
            action: plan.action,
            nodes: plan.nodes.clone(),
            reason: plan.reason.clone(),
            commands: plan.commands.clone(),
            refused: Some(why.into()),
            results: Vec::new(),
        }
    }
}

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

/// Whether the node is now where the action should have put it.
fn reached(action: NodeAction, after: &SchedNode) -> bool {
    match action {
        NodeAction::Drain => after.is_drained() || after.state.contains("drain"),
        NodeAction::Resume => !after.is_drained() && !after.is_down() && !after.state.contains("drain"),
        NodeAction::Undrain => !after.state.contains("drain"),
        NodeAction::Bench => true,
    }
}

fn describe(n: &SchedNode) -> String {
    let mut s = n.label();
    if let Some(r) = &n.reason {
        s.push_str(&format!(" ({r}"));
        if let Some(u) = &n.reason_user {
            s.push_str(&format!(", by {u}"));
        }
        if let Some(t) = &n.reason_time {
            s.push_str(&format!(", {t}"));
        }
        s.push(')');
    }
    s
}

/// Runs a confirmed plan node by node, then reads the nodes back from Slurm.
pub fn execute(slurm: &Slurm, plan: &Plan) -> ActionReport {
    let before = slurm.query().map(|s| s.nodes).unwrap_or_default();
    let mut results: Vec<NodeResult> = Vec::new();
    let mut ran: Vec<usize> = Vec::new();
    for (i, (node, argv)) in plan.nodes.iter().zip(&plan.commands).enumerate() {
        let was = before.get(node);
        // An already drained node keeps the reason it was drained for.
        if plan.action == NodeAction::Drain
            && let Some(b) = was.filter(|b| b.is_drained())
        {
            results.push(NodeResult {
                node: node.clone(),
                ok: true,
                message: format!("already {}; left as it is", describe(b)),
                state_before: Some(b.label()),
                state_after: Some(b.label()),
            });
            continue;
        }
        // Slurm refuses to resume a node that is in service ("Invalid node
        // state specified"): say plainly that there is nothing to do.
        if plan.action == NodeAction::Resume
            && let Some(b) = was.filter(|b| !b.is_drained() && !b.is_down() && !b.state.contains("drain"))
        {
            results.push(NodeResult {
                node: node.clone(),
                ok: true,
                message: format!("already in service ({}); nothing to resume", b.label()),
                state_before: Some(b.label()),
                state_after: Some(b.label()),
            });
            continue;
        }
        let outcome = sched::run(&argv[0], &argv[1..]);
        results.push(NodeResult {
            node: node.clone(),
            ok: outcome.is_ok(),
            message: match &outcome {
                Ok(_) => String::new(),
                Err(e) => e.to_string(),
            },
            state_before: was.map(|b| b.label()),
            state_after: None,
        });
        if outcome.is_ok() {
            ran.push(i);
        }
    }
    // The truth is what Slurm says now, not what the command returned.
    let after = slurm.query().map(|s| s.nodes);
    for i in ran {
        let r = &mut results[i];
        match after.as_ref().map(|a| a.get(&r.node)) {
            Ok(Some(a)) => {
                r.state_after = Some(a.label());
                r.ok = reached(plan.action, a);
                r.message = if r.ok {
                    format!("now {}", describe(a))
                } else if a.is_down() {
                    format!("still {}: Slurm keeps it down until it responds", describe(a))
                } else {
                    format!("Slurm accepted it, but the node is {}", describe(a))
                };
            }
            Ok(None) => {
                r.ok = false;
                r.message = "Slurm no longer lists this node".into();
            }
            Err(e) => {
                r.ok = false;
                r.message = format!("ran, but the result could not be read back: {e}");
            }
        }
    }
    ActionReport {
        time: crate::export::rfc3339(fleetop_agent::now_ms()),
        user: user(),
        action: plan.action,
        nodes: plan.nodes.clone(),
        reason: plan.reason.clone(),
        commands: plan.commands.clone(),
        refused: None,
        results,
    }
}

/// Asks on the terminal before `plan` runs; without a terminal, or without
/// a yes, refuses (and logs the refusal). The caller has shown the plan.
pub fn confirm(plan: &Plan, question: &str) -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal};
    let verb = plan.action.verb();
    let refuse = |why: &str| -> anyhow::Result<()> {
        audit(&ActionReport::refused(plan, why)).map_err(|e| anyhow::anyhow!("cannot write the audit log: {e}"))?;
        Ok(())
    };
    if !std::io::stdin().is_terminal() {
        refuse("not confirmed (no terminal, no --yes)")?;
        anyhow::bail!("not confirmed: stdin is not a terminal; pass --yes to {verb}");
    }
    let mut err = std::io::stderr().lock();
    write!(err, "{question} [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        refuse("not confirmed")?;
        anyhow::bail!("not confirmed: nothing was run");
    }
    Ok(())
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
pub fn audit(report: &ActionReport) -> std::io::Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_needs_a_reason_and_keeps_it_as_one_argument() {
        assert!(plan(NodeAction::Drain, vec!["gpu01".into()], None).is_err());
        assert!(plan(NodeAction::Drain, vec!["gpu01".into()], Some("  ".into())).is_err());
        assert!(plan(NodeAction::Resume, vec![], None).is_err());
        let p = plan(
            NodeAction::Drain,
            vec!["gpu01".into()],
            Some("it's \"bad\"; rm -rf / ünï".into()),
        )
        .expect("plan");
        assert_eq!(
            p.commands[0],
            [
                "scontrol",
                "update",
                "NodeName=gpu01",
                "State=DRAIN",
                "Reason=it's \"bad\"; rm -rf / ünï"
            ]
        );
        assert_eq!(
            shell_words(&p.commands[0]),
            r#"scontrol update NodeName=gpu01 State=DRAIN 'Reason=it'\''s "bad"; rm -rf / ünï'"#
        );
    }

    #[test]
    fn outcomes_are_judged_by_the_state_slurm_reports() {
        let n = |s: &str| SchedNode {
            state: s.into(),
            not_responding: false,
            reason: None,
            reason_user: None,
            reason_time: None,
        };
        assert!(reached(NodeAction::Drain, &n("draining")));
        assert!(reached(NodeAction::Drain, &n("drained")));
        assert!(!reached(NodeAction::Drain, &n("idle")));
        assert!(reached(NodeAction::Resume, &n("idle")));
        assert!(!reached(NodeAction::Resume, &n("down")));
        assert!(reached(NodeAction::Undrain, &n("down")));
    }
}
