//! The scheduler's view of the fleet (node state, drain reasons, jobs), read
//! from Slurm's client tools. Commands are run with argument vectors, never
//! through a shell, and never for longer than a timeout: a hung `slurmctld`
//! makes its clients hang, and nothing the console does may hang with them.

pub mod json;

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::config::{DEFAULT_SLURM_TIMEOUT as DEFAULT_TIMEOUT, SlurmFormat as Format};
use crate::ingest::hostlist;
use crate::model::sched::{Job, SchedNode, Snapshot};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchedError {
    #[error("cannot run {0}: {1}")]
    Spawn(String, String),
    #[error("{0} failed: {1}")]
    Failed(String, String),
    #[error("cannot read {0}'s output: {1}")]
    Parse(String, String),
    #[error("{0} did not answer within {1} s (killed)")]
    Timeout(String, u64),
}

/// Slurm through its client tools (sinfo, squeue, scontrol) on this machine.
#[derive(Debug, Clone)]
pub struct Slurm {
    pub format: Format,
    /// Every command is killed past this.
    pub timeout: Duration,
}

impl Default for Slurm {
    fn default() -> Self {
        Slurm {
            format: Format::Auto,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Runs a program with arguments (no shell) for at most `timeout` and
/// returns its stdout, or the first line of its complaint. Past the timeout
/// the program is killed and reaped.
pub fn run(program: &str, args: &[String], timeout: Duration) -> Result<String, SchedError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| SchedError::Spawn(program.into(), e.to_string()))?;
    // Pipes are drained on threads of their own, so a big output cannot
    // block the child while it is waited for.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SchedError::Timeout(program.into(), timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(SchedError::Spawn(program.into(), e.to_string())),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if status.success() {
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    } else {
        let line = fleetop_proto::util::first_line(&stderr, "no message");
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
/// The end of a record in the text formats (ASCII's record separator).
const END: char = '\u{1e}';

/// The most characters of a reason, a user or a job name kept.
const MAX_TEXT_CHARS: usize = 1000;

/// `snap` with the text anyone may have set escaped (control and
/// reordering characters) and bounded: a reason set with `scontrol` by
/// anyone reaches every console that shows the node.
fn escaped(mut snap: Snapshot) -> Snapshot {
    let esc = |s: &mut String| *s = fleetop_proto::input::printable(s, MAX_TEXT_CHARS);
    for n in snap.nodes.values_mut() {
        n.reason.as_mut().map(esc);
        n.reason_user.as_mut().map(esc);
    }
    for j in &mut snap.jobs {
        esc(&mut j.user);
        esc(&mut j.name);
    }
    snap
}

/// The records of a text read: ended by `END` (and the newline after it),
/// or, from an older format or a test, one a line.
fn records(out: &str) -> Vec<&str> {
    if out.contains(END) {
        out.split(END)
            .map(|r| r.strip_prefix('\n').unwrap_or(r))
            .filter(|r| !r.trim().is_empty())
            .collect()
    } else {
        out.lines().filter(|l| !l.trim().is_empty()).collect()
    }
}

impl Slurm {
    /// Runs one Slurm client with this reader's timeout.
    pub fn run(&self, program: &str, args: &[String]) -> Result<String, SchedError> {
        run(program, args, self.timeout)
    }

    /// Reads node states and running jobs; what anyone may have written
    /// (reasons, users, job names) escaped once, here, before anything
    /// shows it.
    pub fn query(&self) -> Result<Snapshot, SchedError> {
        self.query_raw().map(escaped)
    }

    fn query_raw(&self) -> Result<Snapshot, SchedError> {
        if self.format != Format::Text {
            match self.query_json() {
                Ok(s) => return Ok(s),
                Err(e) if self.format == Format::Json => return Err(e),
                // A controller that does not answer is not a format problem.
                Err(e @ SchedError::Timeout(..)) => return Err(e),
                Err(e) => tracing::debug!("slurm --json unavailable, using text: {e}"),
            }
        }
        self.query_text()
    }

    /// The state Slurm gives job `job` (`RUNNING`, `PENDING`, `COMPLETED`
    /// while it still keeps an ended job), or `None` where it lists no such
    /// job. Pending and ended jobs included, unlike `query`'s running ones.
    pub fn job_state(&self, job: &str) -> Result<Option<String>, SchedError> {
        match self.run("squeue", &args(&["-h", "-t", "all", "-j", job, "-o", "%T"])) {
            Ok(out) => Ok(out
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(|s| fleetop_proto::input::printable(s, 64))),
            // Slurm 22.05 and before: an id it does not know is an error.
            Err(SchedError::Failed(_, why)) if why.contains("Invalid job id") => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn query_text(&self) -> Result<Snapshot, SchedError> {
        // Each record ends in `END`: a reason or a job name holding a
        // newline stays inside its record instead of breaking the read.
        let fmt = format!("%N{SEP}%T{SEP}%u{SEP}%H{SEP}%P{SEP}%E{END}");
        let nodes = parse_sinfo_text(&self.run("sinfo", &args(&["-h", "-N", "-o", &fmt]))?)?;
        let fmt = format!("%i{SEP}%u{SEP}%M{SEP}%N{SEP}%b{SEP}%j{END}");
        let jobs = parse_squeue_text(&self.run("squeue", &args(&["-h", "-t", "RUNNING,COMPLETING", "-o", &fmt]))?)?;
        Ok(Snapshot { nodes, jobs })
    }

    fn query_json(&self) -> Result<Snapshot, SchedError> {
        let nodes = json::parse_sinfo(&self.run("sinfo", &args(&["--json"]))?)?;
        let jobs = json::parse_squeue(&self.run("squeue", &args(&["--json"]))?)?;
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

/// Nodes from sinfo's text. A record that cannot be read is that node's
/// problem (logged, left out), not the fleet's: only output with no
/// readable record at all is an error.
pub fn parse_sinfo_text(out: &str) -> Result<BTreeMap<String, SchedNode>, SchedError> {
    let mut nodes: BTreeMap<String, SchedNode> = BTreeMap::new();
    let mut unreadable = Vec::new();
    for line in records(out) {
        let f: Vec<&str> = line.splitn(6, SEP).collect();
        let [name, state, user, time, partition, reason] = f[..] else {
            unreadable.push(line);
            continue;
        };
        let (state, not_responding) = parse_state(state);
        // A node in several partitions is listed once per partition: the
        // first line gives its state, every line one partition.
        let node = nodes.entry(name.trim().to_string()).or_insert(SchedNode {
            state,
            not_responding,
            reason: some(reason),
            reason_user: some(user),
            reason_time: some(time).and_then(|t| local_to_utc(&t)),
            partitions: Vec::new(),
        });
        add_partition(&mut node.partitions, partition);
    }
    if let Some(first) = unreadable.first() {
        let first = fleetop_proto::input::printable(first, 200);
        if nodes.is_empty() {
            return Err(SchedError::Parse("sinfo".into(), format!("unexpected record {first}")));
        }
        tracing::warn!("sinfo: {} record(s) unreadable, left out: {first}", unreadable.len());
    }
    Ok(nodes)
}

/// Adds a partition name as sinfo prints it ("gpu*" for the default one:
/// the star is not part of the name), keeping the list sorted and unique.
pub fn add_partition(list: &mut Vec<String>, name: &str) {
    let name = name.trim().trim_end_matches('*');
    if name.is_empty() || matches!(name, "N/A" | "(null)") {
        return;
    }
    if let Err(at) = list.binary_search_by(|p| p.as_str().cmp(name)) {
        list.insert(at, name.to_string());
    }
}

/// sinfo's text times ("2026-11-21T09:00:00") are local time with no zone
/// (the zone of the process that ran sinfo, which is this one): as RFC 3339
/// in UTC, like the JSON format's epoch seconds. `None` if unreadable.
pub fn local_to_utc(t: &str) -> Option<String> {
    use chrono::TimeZone;
    let naive = chrono::NaiveDateTime::parse_from_str(t.trim(), "%Y-%m-%dT%H:%M:%S").ok()?;
    let local = chrono::Local.from_local_datetime(&naive).earliest()?;
    Some(crate::model::time::rfc3339(local.timestamp_millis()))
}

/// "1-02:03:04", "02:03:04", "3:04" -> seconds.
pub fn parse_elapsed(s: &str) -> u64 {
    let (days, rest) = s.trim().split_once('-').unwrap_or(("0", s.trim()));
    // Saturating: a garbled field must not overflow (found by fuzzing).
    let mut secs = 0u64;
    for part in rest.split(':') {
        secs = secs.saturating_mul(60).saturating_add(part.parse::<u64>().unwrap_or(0));
    }
    days.parse::<u64>()
        .unwrap_or(0)
        .saturating_mul(86_400)
        .saturating_add(secs)
}

/// GPUs in a GRES string: "gres/gpu:2", "gres:gpu:a100:4", "gpu:8" -> the count.
pub fn parse_gpus(gres: &str) -> u32 {
    gres.split(',')
        .filter(|g| g.contains("gpu"))
        .filter_map(|g| g.rsplit(':').next()?.split('(').next()?.parse::<u32>().ok())
        .sum()
}

/// Whether `piece` begins a squeue record: a job id (`4411`, an array
/// task's `4411_7`, a heterogeneous job's component `103+0`) then `SEP`.
fn starts_job_record(piece: &str) -> bool {
    piece.split_once(SEP).is_some_and(|(id, _)| job_id(id).is_some())
}

/// The job of an id as squeue's `%i` prints it: `4411`, `4411_7` (an array
/// task) and `103+0` (a heterogeneous job's component) -> 4411, 4411, 103.
fn job_id(field: &str) -> Option<u64> {
    let field = field.trim();
    let end = field.find(|c: char| !c.is_ascii_digit()).unwrap_or(field.len());
    let (digits, rest) = field.split_at(end);
    if !(rest.is_empty() || rest.starts_with('_') || rest.starts_with('+')) {
        return None;
    }
    digits.parse().ok()
}

/// The records of squeue's text: split at `END`, where a piece that does
/// not begin like a record (a job id, then `SEP`) is the rest of the job
/// name before it, which held an `END` of its own.
fn job_records(out: &str) -> Vec<String> {
    if !out.contains(END) {
        return records(out).into_iter().map(str::to_string).collect();
    }
    let mut recs: Vec<String> = Vec::new();
    for piece in out.split(END) {
        let body = piece.strip_prefix('\n').unwrap_or(piece);
        match recs.last_mut() {
            Some(last) if !starts_job_record(body) => {
                last.push(END);
                last.push_str(piece);
            }
            _ => recs.push(body.to_string()),
        }
    }
    // The last piece is the newline after the last `END`.
    for r in &mut recs {
        if let Some(t) = r.strip_suffix(&format!("{END}\n")) {
            *r = t.to_string();
        }
    }
    recs.retain(|r| !r.trim().is_empty());
    recs
}

/// One squeue record, or why it cannot be read.
fn parse_job(line: &str) -> Result<Job, String> {
    let f: Vec<&str> = line.splitn(6, SEP).collect();
    let [id, user, elapsed, nodes, gres, name] = f[..] else {
        return Err("unexpected record".into());
    };
    let id = job_id(id).ok_or_else(|| format!("bad job id {id:?}"))?;
    let nodes = hostlist::expand(nodes.trim()).map_err(|e| e.to_string())?;
    Ok(Job {
        id,
        user: user.trim().to_string(),
        name: name.trim().to_string(),
        elapsed_s: parse_elapsed(elapsed),
        gpus_per_node: parse_gpus(gres),
        nodes,
    })
}

/// Running jobs from squeue's text. A record that cannot be read is that
/// job's problem (left out, logged once while it lasts), never the
/// fleet's: a job named with an `END` or a heterogeneous job's `103+0`
/// must not fail every read, and with it every drain's check.
pub fn parse_squeue_text(out: &str) -> Result<Vec<Job>, SchedError> {
    static LAST_LOGGED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let mut jobs = Vec::new();
    let mut unreadable: Vec<(String, String)> = Vec::new();
    for rec in job_records(out) {
        match parse_job(&rec) {
            Ok(j) => jobs.push(j),
            Err(why) => unreadable.push((rec, why)),
        }
    }
    if let Some((rec, why)) = unreadable.first() {
        let first = fleetop_proto::input::printable(rec, 200);
        let msg = format!(
            "squeue: {} record(s) unreadable, left out: {why}: {first}",
            unreadable.len()
        );
        let mut last = LAST_LOGGED.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_deref() != Some(msg.as_str()) {
            tracing::warn!("{msg}");
            *last = Some(msg);
        }
    }
    Ok(jobs)
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
            line(&["gpu01", "idle", "Unknown", "Unknown", "gpu*", "none"]),
            line(&[
                "gpu02",
                "drained",
                "root",
                "2026-11-21T09:00:00",
                "gpu*",
                "it's \"bad\" | really",
            ]),
            line(&["gpu03", "idle*", "Unknown", "Unknown", "gpu*", "Not responding"]),
            line(&["gpu01", "idle", "Unknown", "Unknown", "debug", "none"]),
        ]
        .join("\n");
        let n = parse_sinfo_text(&out).expect("parses");
        assert_eq!(n.len(), 3);
        assert_eq!(n["gpu01"].reason, None);
        // Listed once per partition: one node in both, no default star.
        assert_eq!(n["gpu01"].partitions, ["debug", "gpu"]);
        assert_eq!(n["gpu02"].partitions, ["gpu"]);
        let g2 = &n["gpu02"];
        assert!(g2.is_drained());
        assert_eq!(g2.reason.as_deref(), Some("it's \"bad\" | really"));
        assert_eq!(g2.reason_user.as_deref(), Some("root"));
        assert!(n["gpu03"].not_responding && n["gpu03"].state == "idle");
        assert!(parse_sinfo_text("garbage").is_err());
    }

    #[test]
    fn a_newline_or_a_terminal_escape_in_a_reason_breaks_nothing() {
        let rec = |f: &[&str]| format!("{}{END}\n", line(f));
        let out = [
            rec(&["gpu01", "idle", "Unknown", "Unknown", "gpu*", "none"]),
            rec(&["gpu02", "drained", "eve", "2026-11-21T09:00:00", "gpu*", "one\ntwo"]),
            rec(&[
                "gpu03",
                "drained",
                "eve",
                "2026-11-21T09:00:00",
                "gpu*",
                "\u{1b}]0;T\u{7}\u{1b}[2J",
            ]),
            "garbage without separators".to_string() + &END.to_string() + "\n",
            rec(&["gpu04", "idle", "Unknown", "Unknown", "gpu*", "none"]),
        ]
        .concat();
        let n = parse_sinfo_text(&out).expect("the readable nodes");
        assert_eq!(n.keys().collect::<Vec<_>>(), ["gpu01", "gpu02", "gpu03", "gpu04"]);
        assert_eq!(n["gpu02"].reason.as_deref(), Some("one\ntwo"));
        let snap = escaped(Snapshot {
            nodes: n,
            jobs: parse_squeue_text(&rec(&["7", "bob", "1:00", "gpu01", "gpu:1", "a\nb\u{202e}"])).expect("job"),
        });
        assert_eq!(snap.nodes["gpu02"].reason.as_deref(), Some("one\\ntwo"));
        assert!(
            !snap.nodes["gpu03"]
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains('\u{1b}')
        );
        assert_eq!(snap.jobs[0].name, "a\\nb\\u{202e}");
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
    fn a_job_named_with_a_record_separator_or_a_het_job_is_read_and_a_bad_record_costs_only_its_job() {
        let rec = |f: &[&str]| format!("{}{END}\n", line(f));
        let out = [
            rec(&["101", "alice", "1:00", "gpu01", "gpu:1", "plain"]),
            rec(&["102", "eve", "1:00", "gpu02", "gpu:2", "a\u{1e}b\u{1e}\n\u{1e}"]),
            rec(&["103+0", "bob", "2:00", "gpu03", "gpu:4", "het"]),
            rec(&["103+1", "bob", "2:00", "gpu04", "gpu:1", "het"]),
            rec(&["104_7", "carol", "3:00", "gpu05", "gpu:1", "array"]),
            rec(&["105", "dave", "1:00", "gpu[", "gpu:1", "bad nodes"]),
            rec(&["106", "erin", "1:00", "gpu06", "gpu:8", "last"]),
        ]
        .concat();
        let jobs = parse_squeue_text(&out).expect("the readable jobs");
        let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids, [101, 102, 103, 103, 104, 106]);
        assert_eq!(jobs[1].name, "a\u{1e}b\u{1e}\n\u{1e}");
        assert_eq!(jobs[1].nodes, ["gpu02"]);
        assert_eq!(jobs[2].nodes, ["gpu03"]);
        assert_eq!(jobs[3].nodes, ["gpu04"]);
        assert_eq!(jobs[5].name, "last");
        assert_eq!(jobs[5].gpus_per_node, 8);
        // Nothing readable is no job, not an error that fails every drain.
        assert!(parse_squeue_text("garbage").expect("no jobs").is_empty());
        assert_eq!(job_id("103+0"), Some(103));
        assert_eq!(job_id("12x"), None);
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
