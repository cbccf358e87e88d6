//! Actions that change the cluster (drain, resume, undrain, return, burn-in,
//! ...): the plan shown before anything runs, and the report that comes back
//! and goes in the audit log. (What carries a plan from the screen to `ops`
//! is `model::request`.)

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeAction {
    /// Stop scheduling new jobs on the nodes (running jobs finish).
    Drain,
    /// Return the nodes to service (clears DRAIN and DOWN).
    Resume,
    /// Clear DRAIN only; a node that is DOWN stays DOWN.
    Undrain,
    /// A burn-in suite (`fleetop bench`): logged like the others.
    Bench,
    /// An alert acknowledged or silenced in the console: changes nothing on
    /// the cluster, but who hid what from the screen is evidence too.
    Silence,
    /// Cancel a Slurm job (`scancel JOBID`): from a GPU's processes in the
    /// console, or `fleetop job cancel`.
    Scancel,
    /// SIGTERM or SIGKILL to a GPU's processes, through the node's agent.
    Signal,
    /// Return to service (`fleetop node return`): resume the drained nodes
    /// that passed a burn-in since their drain began; the rest stay drained
    /// with the failing check in their reason.
    Return,
    /// A person re-armed the remediation policy's tripped breaker
    /// (`fleetop remediate reset`): it changes no node, but it lets
    /// automation act again, so who did it and when is evidence.
    RemediateReset,
    /// Kubernetes only: mark the node unschedulable without evicting
    /// anything (a drain there is a cordon, then evictions).
    Cordon,
}

/// Which scheduler an action goes to. Slurm's are `scontrol`/`scancel`
/// argument vectors; Ray's a call to its GCS; Kubernetes' API requests.
/// Each plan's `commands` hold the exact calls, in words a person can check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    #[default]
    Slurm,
    Ray,
    Kubernetes,
}

impl Scheduler {
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Slurm => "slurm",
            Scheduler::Ray => "ray",
            Scheduler::Kubernetes => "kubernetes",
        }
    }

    /// "Slurm", "Ray", "Kubernetes": its name in a sentence.
    pub fn title(self) -> &'static str {
        match self {
            Scheduler::Slurm => "Slurm",
            Scheduler::Ray => "Ray",
            Scheduler::Kubernetes => "Kubernetes",
        }
    }

    fn is_slurm(&self) -> bool {
        *self == Scheduler::Slurm
    }
}

impl NodeAction {
    pub fn verb(self) -> &'static str {
        match self {
            NodeAction::Drain => "drain",
            NodeAction::Resume => "resume",
            NodeAction::Undrain => "undrain",
            NodeAction::Bench => "bench",
            NodeAction::Silence => "silence",
            NodeAction::Scancel => "scancel",
            NodeAction::Signal => "signal",
            NodeAction::Return => "return",
            NodeAction::RemediateReset => "remediate-reset",
            NodeAction::Cordon => "cordon",
        }
    }
}

/// What starts every drain reason fleetop sets, as LBNL NHC's start with
/// `NHC:`: a reason without it is someone else's (a person, a maintenance
/// tool, Slurm itself), and fleetop never resumes such a node unless told
/// to (`--force`).
pub const REASON_PREFIX: &str = "fleetop:";

/// The reason fleetop gives Slurm: the prefix, then the person's words
/// verbatim (words that already carry the prefix are kept as they are).
pub fn owned_reason(words: &str) -> String {
    if words.starts_with(REASON_PREFIX) {
        words.to_string()
    } else {
        format!("{REASON_PREFIX} {words}")
    }
}

/// The words of a reason fleetop set (the reason without its prefix): a
/// person's after `fleetop:`, or the remediation policy's after its mark
/// (`remediation::POLICY_MARK`); `None` for someone else's reason.
pub fn own_words(reason: &str) -> Option<&str> {
    reason
        .strip_prefix(REASON_PREFIX)
        .map(str::trim_start)
        .or_else(|| crate::model::remediation::policy_words(reason))
}

/// What will run, before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub action: NodeAction,
    pub nodes: Vec<String>,
    pub reason: Option<String>,
    /// One argument vector per node, exactly as it will be executed.
    pub commands: Vec<Vec<String>>,
    /// Resume (or return) a node even though someone else drained it
    /// (`--force`; in the console, the node's name typed to confirm).
    pub force: bool,
    /// Set when a remediation policy acts rather than a person at a
    /// keyboard ("remediate"): the audit log says so beside the user who
    /// started it.
    pub policy: Option<String>,
    /// Where the commands go (Slurm unless said otherwise).
    pub scheduler: Scheduler,
    /// A Kubernetes drain evicts only the pods that hold GPUs
    /// (`--gpu-pods-only`); its eviction call says so in words.
    pub gpu_pods_only: bool,
    /// Per node, the active flags that keep it out of service, in words, as
    /// known when the plan was made: a resume, undrain or return of such a
    /// node is refused unless the plan is forced.
    pub faults: std::collections::BTreeMap<String, String>,
    /// Per node, each refusal a forced plan lifts, in words ("xid 79 on
    /// gpu3 still active", "drained by root: RMA, not by fleetop", "job 4411
    /// (alice, train) still running"): shown before the confirmation, and
    /// in the audit log and the timeline.
    pub overrides: std::collections::BTreeMap<String, Vec<String>>,
}

impl Plan {
    /// A plan a person asked for, not forced.
    pub fn new(action: NodeAction, nodes: Vec<String>, reason: Option<String>, commands: Vec<Vec<String>>) -> Plan {
        Plan {
            action,
            nodes,
            reason,
            commands,
            force: false,
            policy: None,
            scheduler: Scheduler::Slurm,
            gpu_pods_only: false,
            faults: Default::default(),
            overrides: Default::default(),
        }
    }
}

/// The command for one node.
pub fn command(action: NodeAction, node: &str, reason: Option<&str>) -> Vec<String> {
    let mut argv = vec!["scontrol".to_string(), "update".into(), format!("NodeName={node}")];
    match action {
        NodeAction::Drain => {
            argv.push("State=DRAIN".into());
            argv.push(format!("Reason={}", reason.unwrap_or_default()));
        }
        NodeAction::Resume | NodeAction::Return => argv.push("State=RESUME".into()),
        NodeAction::Undrain => argv.push("State=UNDRAIN".into()),
        NodeAction::Bench
        | NodeAction::Silence
        | NodeAction::Scancel
        | NodeAction::Signal
        | NodeAction::RemediateReset
        | NodeAction::Cordon => {}
    }
    argv
}

/// Plans an action; a drain needs a reason (the next person needs to know
/// why), which Slurm is given with fleetop's prefix.
/// The most bytes a reason given to fleetop may have: Slurm shows a line,
/// and a reason is read by people in sinfo and the console.
pub const MAX_REASON_BYTES: usize = 1000;

/// A reason given to fleetop, checked before any plan: no control or
/// reordering characters (they would reach every terminal that shows the
/// reason, and a newline broke Slurm's text output), and a bound on length.
pub fn check_reason(reason: &str) -> Result<(), String> {
    if fleetop_proto::input::has_unprintable(reason) {
        return Err(format!(
            "the reason holds a control character: {} (type it without)",
            fleetop_proto::input::printable(reason, 80)
        ));
    }
    if reason.len() > MAX_REASON_BYTES {
        return Err(format!(
            "the reason is {} bytes: at most {MAX_REASON_BYTES}",
            reason.len()
        ));
    }
    Ok(())
}

pub fn plan(action: NodeAction, nodes: Vec<String>, reason: Option<String>) -> Result<Plan, String> {
    if nodes.is_empty() {
        return Err("no nodes given".into());
    }
    if let Some(r) = &reason {
        check_reason(r)?;
    }
    let reason = reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    if action == NodeAction::Drain && reason.as_deref().and_then(own_words).is_some_and(str::is_empty) {
        return Err(format!("a drain needs a reason after '{REASON_PREFIX}'"));
    }
    let reason = match (action, reason) {
        (NodeAction::Drain, None) => return Err("a drain needs a reason (--reason TEXT)".into()),
        (NodeAction::Drain, Some(r)) => Some(owned_reason(&r)),
        (_, r) => r,
    };
    let commands = nodes.iter().map(|n| command(action, n, reason.as_deref())).collect();
    Ok(Plan::new(action, nodes, reason, commands))
}

/// The plan to cancel job `job` (of `user`, seen on `nodes`): one command,
/// an argument vector, never a shell string.
pub fn scancel_plan(job: u64, user: Option<&str>, nodes: Vec<String>) -> Plan {
    let reason = match user {
        Some(u) => format!("job {job} of {u}"),
        None => format!("job {job}"),
    };
    let commands = vec![vec!["scancel".into(), job.to_string()]];
    Plan::new(NodeAction::Scancel, nodes, Some(reason), commands)
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

/// Where an attempt is: logged before it runs, and again when it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// About to run: written (and flushed) before the first command.
    Started,
    /// Ran; `results` say how each node went.
    Done,
    /// Not run; `refused` says why.
    Refused,
}

/// Who acted. The identity is the OS account the console runs as; what the
/// environment claims is kept beside it, never instead of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Actor {
    pub uid: u32,
    /// The account's name in the password database, where it has one.
    pub name: Option<String>,
    /// `$SUDO_USER`, when set: who ran sudo, as the environment says.
    pub sudo_user: Option<String>,
    /// `$USER`, when set and different from `name`.
    pub env_user: Option<String>,
}

impl Actor {
    /// The name people know the actor by: the account's name, else what
    /// sudo says, else the uid.
    pub fn display(&self) -> String {
        self.name
            .clone()
            .or_else(|| self.sudo_user.clone())
            .unwrap_or_else(|| format!("uid {}", self.uid))
    }
}

/// Everything about one attempt, as reported and as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionReport {
    /// RFC 3339.
    pub time: String,
    pub stage: Stage,
    pub actor: Actor,
    pub action: NodeAction,
    pub nodes: Vec<String>,
    pub reason: Option<String>,
    /// The exact commands, as argument vectors.
    pub commands: Vec<Vec<String>>,
    /// Why it did not run (read-only mode, not confirmed) or was stopped
    /// (a burn-in cancelled from the console), if so.
    pub refused: Option<String>,
    pub results: Vec<NodeResult>,
    /// Resumed though someone else drained it (`--force`). Not part of
    /// the positional (recorded) form, which predates it: the audit log
    /// carries it (see `AuditLine`).
    #[serde(skip)]
    pub forced: bool,
    /// The policy that acted for `actor` ("remediate"), when no person
    /// confirmed this one; in the audit log, like `forced`.
    #[serde(skip)]
    pub policy: Option<String>,
    /// Where it went; in the audit log (absent there means Slurm), not in
    /// the positional recorded form, like `forced`.
    #[serde(skip)]
    pub scheduler: Scheduler,
    /// Per node, the refusals a forced action lifted (`Plan::overrides`);
    /// in the audit log, like `forced`.
    #[serde(skip)]
    pub overrides: std::collections::BTreeMap<String, Vec<String>>,
}

/// One line of the audit log: the report, and what recordings of schema 2
/// cannot hold (`forced`, `policy`), beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditLine {
    #[serde(flatten)]
    pub report: ActionReport,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Scheduler::is_slurm")]
    pub scheduler: Scheduler,
    /// What a forced action overrode, per node.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub overrode: std::collections::BTreeMap<String, Vec<String>>,
}

impl AuditLine {
    pub fn new(report: &ActionReport) -> AuditLine {
        AuditLine {
            report: report.clone(),
            forced: report.forced,
            policy: report.policy.clone(),
            scheduler: report.scheduler,
            overrode: report.overrides.clone(),
        }
    }

    /// The report, with `forced` and `policy` back in it.
    pub fn into_report(self) -> ActionReport {
        ActionReport {
            forced: self.forced,
            policy: self.policy,
            scheduler: self.scheduler,
            overrides: self.overrode,
            ..self.report
        }
    }
}

impl ActionReport {
    pub fn ok(&self) -> bool {
        self.refused.is_none() && self.results.iter().all(|r| r.ok)
    }
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
                "Reason=fleetop: it's \"bad\"; rm -rf / ünï"
            ]
        );
        assert_eq!(
            shell_words(&p.commands[0]),
            r#"scontrol update NodeName=gpu01 State=DRAIN 'Reason=fleetop: it'\''s "bad"; rm -rf / ünï'"#
        );
        // The prefix is not doubled, and is not a reason on its own.
        let again = plan(NodeAction::Drain, vec!["gpu01".into()], Some("fleetop: fan".into())).expect("plan");
        assert_eq!(again.reason.as_deref(), Some("fleetop: fan"));
        assert!(plan(NodeAction::Drain, vec!["gpu01".into()], Some("fleetop:  ".into())).is_err());
        assert_eq!(own_words("fleetop: xid 79"), Some("xid 79"));
        assert_eq!(own_words("maintenance"), None);
    }
}
