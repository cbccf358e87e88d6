//! The scheduler's view of the fleet (node state, drain reasons, jobs), read
//! from Slurm's client tools. Commands are run with argument vectors, never
//! through a shell.

use std::collections::BTreeMap;
use std::process::Command;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hostlist;

/// One node as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SchedNode {
    /// Slurm's state word: idle, allocated, mixed, drained, draining, down, ...
    pub state: String,
    /// Slurm marks the node not responding (`*`).
    pub not_responding: bool,
    /// Why it is drained or down, who said so and when.
    pub reason: Option<String>,
    pub reason_user: Option<String>,
    pub reason_time: Option<String>,
}

impl SchedNode {
    pub fn is_drained(&self) -> bool {
        self.state.starts_with("drain")
    }

    pub fn is_down(&self) -> bool {
        self.state.starts_with("down")
    }

    /// "drained*": the state as Slurm prints it.
    pub fn label(&self) -> String {
        format!("{}{}", self.state, if self.not_responding { "*" } else { "" })
    }
}

/// A running job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Job {
    pub id: u64,
    pub user: String,
    pub name: String,
    pub elapsed_s: u64,
    /// GPUs the job holds on each of its nodes (from its GRES).
    pub gpus_per_node: u32,
    pub nodes: Vec<String>,
}

/// Everything read from the scheduler at one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub nodes: BTreeMap<String, SchedNode>,
    pub jobs: Vec<Job>,
}

/// What the console keeps per node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub node: SchedNode,
    pub jobs: Vec<Job>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchedError {
    #[error("cannot run {0}: {1}")]
    Spawn(String, String),
    #[error("{0} failed: {1}")]
    Failed(String, String),
    #[error("cannot read {0}'s output: {1}")]
    Parse(String, String),
}

/// Which output format to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `--json` where the installed Slurm has it, the text formats otherwise.
    #[default]
    Auto,
    Json,
    Text,
}

/// Slurm through its client tools (sinfo, squeue, scontrol) on this machine.
#[derive(Debug, Clone, Default)]
pub struct Slurm {
    pub format: Format,
}

/// Runs a program with arguments (no shell) and returns its stdout, or the
/// first line of its complaint.
pub fn run(program: &str, args: &[String]) -> Result<String, SchedError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| SchedError::Spawn(program.into(), e.to_string()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let line = fleetop_agent::first_line(&out.stderr, "no message");
        Err(SchedError::Failed(program.into(), line))
    }
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_string()).collect()
}

/// The field separator of the text formats: a character Slurm never puts in
/// node names, states or user names (reasons and job names come last, so they
/// may contain anything).
const SEP: char = '\u{1f}';

impl Slurm {
    /// Reads node states and running jobs.
    pub fn query(&self) -> Result<Snapshot, SchedError> {
        if self.format != Format::Text {
            match self.query_json() {
                Ok(s) => return Ok(s),
                Err(e) if self.format == Format::Json => return Err(e),
                Err(e) => tracing::debug!("slurm --json unavailable, using text: {e}"),
            }
        }
        self.query_text()
    }

    fn query_text(&self) -> Result<Snapshot, SchedError> {
        let fmt = format!("%N{SEP}%T{SEP}%u{SEP}%H{SEP}%E");
        let nodes = parse_sinfo_text(&run("sinfo", &args(&["-h", "-N", "-o", &fmt]))?)?;
        let fmt = format!("%i{SEP}%u{SEP}%M{SEP}%N{SEP}%b{SEP}%j");
        let jobs = parse_squeue_text(&run("squeue", &args(&["-h", "-t", "RUNNING,COMPLETING", "-o", &fmt]))?)?;
        Ok(Snapshot { nodes, jobs })
    }

    fn query_json(&self) -> Result<Snapshot, SchedError> {
        let nodes = crate::sched_json::parse_sinfo(&run("sinfo", &args(&["--json"]))?)?;
        let jobs = crate::sched_json::parse_squeue(&run("squeue", &args(&["--json"]))?)?;
        Ok(Snapshot { nodes, jobs })
    }
}

/// "Unknown", "N/A", "(null)" and "" all mean nothing.
fn some(s: &str) -> Option<String> {
    let s = s.trim();
    (!matches!(s, "" | "Unknown" | "N/A" | "(null)" | "none")).then(|| s.to_string())
}

/// A state word from sinfo: "idle*" -> ("idle", not responding), lower case,
/// other flag characters (`~#%$@^-!`) dropped.
pub fn parse_state(word: &str) -> (String, bool) {
    let w = word.trim().to_lowercase();
    let not_responding = w.ends_with('*');
    let state: String = w
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '+' || *c == '_')
        .collect();
    (state, not_responding)
}

pub fn parse_sinfo_text(out: &str) -> Result<BTreeMap<String, SchedNode>, SchedError> {
    let mut nodes = BTreeMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.splitn(5, SEP).collect();
        let [name, state, user, time, reason] = f[..] else {
            return Err(SchedError::Parse("sinfo".into(), format!("unexpected line {line:?}")));
        };
        let (state, not_responding) = parse_state(state);
        // A node in several partitions is listed once per partition.
        nodes.entry(name.trim().to_string()).or_insert(SchedNode {
            state,
            not_responding,
            reason: some(reason),
            reason_user: some(user),
            reason_time: some(time),
        });
    }
    Ok(nodes)
}

/// "1-02:03:04", "02:03:04", "3:04" -> seconds.
pub fn parse_elapsed(s: &str) -> u64 {
    let (days, rest) = s.trim().split_once('-').unwrap_or(("0", s.trim()));
    let mut secs = 0u64;
    for part in rest.split(':') {
        secs = secs * 60 + part.parse::<u64>().unwrap_or(0);
    }
    days.parse::<u64>().unwrap_or(0) * 86_400 + secs
}

/// GPUs in a GRES string: "gres/gpu:2", "gres:gpu:a100:4", "gpu:8" -> the count.
pub fn parse_gpus(gres: &str) -> u32 {
    gres.split(',')
        .filter(|g| g.contains("gpu"))
        .filter_map(|g| g.rsplit(':').next()?.split('(').next()?.parse::<u32>().ok())
        .sum()
}

pub fn parse_squeue_text(out: &str) -> Result<Vec<Job>, SchedError> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.splitn(6, SEP).collect();
            let [id, user, elapsed, nodes, gres, name] = f[..] else {
                return Err(SchedError::Parse("squeue".into(), format!("unexpected line {line:?}")));
            };
            let id = id
                .trim()
                .split('_')
                .next()
                .unwrap_or("")
                .parse()
                .map_err(|_| SchedError::Parse("squeue".into(), format!("bad job id {id:?}")))?;
            let nodes =
                hostlist::expand(nodes.trim()).map_err(|e| SchedError::Parse("squeue".into(), e.to_string()))?;
            Ok(Job {
                id,
                user: user.trim().to_string(),
                name: name.trim().to_string(),
                elapsed_s: parse_elapsed(elapsed),
                gpus_per_node: parse_gpus(gres),
                nodes,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(fields: &[&str]) -> String {
        fields.join(&SEP.to_string())
    }

    #[test]
    fn sinfo_text_states_reasons_and_duplicates() {
        let out = [
            line(&["gpu01", "idle", "Unknown", "Unknown", "none"]),
            line(&[
                "gpu02",
                "drained",
                "root",
                "2026-11-21T09:00:00",
                "it's \"bad\" | really",
            ]),
            line(&["gpu03", "idle*", "Unknown", "Unknown", "Not responding"]),
            line(&["gpu01", "idle", "Unknown", "Unknown", "none"]),
        ]
        .join("\n");
        let n = parse_sinfo_text(&out).expect("parses");
        assert_eq!(n.len(), 3);
        assert_eq!(n["gpu01"].reason, None);
        let g2 = &n["gpu02"];
        assert!(g2.is_drained());
        assert_eq!(g2.reason.as_deref(), Some("it's \"bad\" | really"));
        assert_eq!(g2.reason_user.as_deref(), Some("root"));
        assert!(n["gpu03"].not_responding && n["gpu03"].state == "idle");
        assert!(parse_sinfo_text("garbage").is_err());
    }

    #[test]
    fn squeue_text_jobs_nodes_and_gpus() {
        let out = line(&["4411", "alice", "1-00:20:05", "gpu[01-02]", "gres/gpu:8", "train | big"]);
        let jobs = parse_squeue_text(&out).expect("parses");
        assert_eq!(jobs[0].id, 4411);
        assert_eq!(jobs[0].nodes, ["gpu01", "gpu02"]);
        assert_eq!(jobs[0].gpus_per_node, 8);
        assert_eq!(jobs[0].elapsed_s, 86_400 + 20 * 60 + 5);
        assert_eq!(jobs[0].name, "train | big");
    }

    #[test]
    fn small_parsers() {
        assert_eq!(parse_state("DRAINING"), ("draining".into(), false));
        assert_eq!(parse_state("down*"), ("down".into(), true));
        assert_eq!(parse_state("mixed+drain"), ("mixed+drain".into(), false));
        assert_eq!(parse_gpus("gres:gpu:a100:4"), 4);
        assert_eq!(parse_gpus("N/A"), 0);
        assert_eq!(parse_elapsed("3:04"), 184);
    }
}
