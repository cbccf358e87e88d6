//! Actions that change the cluster (drain, resume, undrain, burn-in): the
//! plan shown before anything runs, the request that carries it from the
//! screen to `ops`, and the report that comes back and goes in the audit log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::bench::Suite;

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
    /// An alert acknowledged or silenced in the console: changes nothing on
    /// the cluster, but who hid what from the screen is evidence too.
    #[value(skip)]
    Silence,
    /// Cancel a Slurm job (`scancel JOBID`): from a GPU's processes in the
    /// console, or `fleetop job cancel`.
    #[value(skip)]
    Scancel,
    /// SIGTERM or SIGKILL to a GPU's processes, through the node's agent.
    #[value(skip)]
    Signal,
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
        NodeAction::Bench | NodeAction::Silence | NodeAction::Scancel | NodeAction::Signal => {}
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

/// The plan to cancel job `job` (of `user`, seen on `nodes`): one command,
/// an argument vector, never a shell string.
pub fn scancel_plan(job: u64, user: Option<&str>, nodes: Vec<String>) -> Plan {
    Plan {
        action: NodeAction::Scancel,
        nodes,
        reason: Some(match user {
            Some(u) => format!("job {job} of {u}"),
            None => format!("job {job}"),
        }),
        commands: vec![vec!["scancel".into(), job.to_string()]],
    }
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
}

impl ActionReport {
    pub fn ok(&self) -> bool {
        self.refused.is_none() && self.results.iter().all(|r| r.ok)
    }
}

/// What the screen asks `ops` to do: the app decides, `ops` does the I/O
/// (running, logging) and answers on the update channel.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Run(Plan),
    /// An attempt refused before anything ran, for the audit log.
    Refused(Plan, String),
    /// A burn-in suite on these nodes (by index).
    Bench {
        nodes: Vec<usize>,
        suite: Suite,
    },
    /// Stop the running burn-in (the agents stop when their streams go).
    CancelBench,
    /// Keep these acknowledgements and silences (the whole list, saved in
    /// the state dir) and log the one just made.
    Silences {
        all: Vec<crate::model::flag::Silence>,
        made: crate::model::flag::Silence,
    },
    /// Signal these pids through node `node`'s agent (the plan says which
    /// signal and is what gets logged).
    Signal {
        node: usize,
        plan: Plan,
    },
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
}
