//! Job control against a real Slurm (munged, slurmctld, several slurmd, all
//! on loopback in a temp dir), through the real binaries: discovery, state
//! and reason display, drain with a hostile reason, resume, undrain, a
//! partly invalid multi-node drain, a job on its node, read-only, the audit
//! log, a hung and a dead controller. Without Slurm installed the harness
//! reports these ignored; in CI they must run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetop::export::Snapshot;
use fleetop::model::action::{ActionReport, Stage};

use crate::slurm_harness::SlurmCluster;

const REASON: &str = "it's \"bad\" — ünïcode; $(rm -rf /) `x`";

struct Env {
    cluster: SlurmCluster,
    swarm: Child,
    dir: tempfile::TempDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.swarm.kill();
        let _ = self.swarm.wait();
    }
}

/// A cluster of gpu[01-04] with an agent for each node.
fn setup() -> Env {
    let cluster = match SlurmCluster::start("gpu[01-04]") {
        Ok(Some(c)) => c,
        Ok(None) => panic!("Slurm is not installed (the harness reports this test ignored then)"),
        Err(e) => panic!("Slurm is installed but did not start: {e}"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let hosts = dir.path().join("agents");
    let swarm = Command::new(crate::agent_bin())
        .args(["swarm", "--count", "4", "--sim-gpus", "2", "--hostfile"])
        .arg(&hosts)
        .stderr(Stdio::null())
        .spawn()
        .expect("agents start");
    let start = Instant::now();
    while !hosts.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "agents did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let addrs = std::fs::read_to_string(&hosts).expect("agent addresses");
    let mut cfg = String::from("[slurm]\nrefresh = \"1s\"\n[slurm.agents]\n");
    for (i, a) in addrs.lines().enumerate() {
        cfg.push_str(&format!("gpu{:02} = \"{a}\"\n", i + 1));
    }
    std::fs::write(dir.path().join("config.toml"), cfg).expect("config");
    Env { cluster, swarm, dir }
}

impl Env {
    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn audit(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    fn fleetop(&self) -> assert_cmd::Command {
        let mut c = crate::fleetop();
        // Not UTC, so a local time taken for UTC would show.
        c.env("TZ", "IST-5:30")
            .envs(self.cluster.env())
            .env("FLEETOP_AUDIT_LOG", self.audit())
            .arg("--config")
            .arg(self.config());
        c
    }

    fn export(&self) -> Snapshot {
        let out = self
            .fleetop()
            .args(["export", "--slurm", "--once", "--timeout", "10s"])
            .output()
            .expect("runs");
        assert!(out.status.success(), "export: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("a snapshot")
    }

    /// `fleetop node ACTION NODES --yes`; NODES may carry extra flags after
    /// a comma (`"gpu04,--force"`).
    fn node(&self, action: &str, nodes: &str, reason: Option<&str>) -> (bool, String, String) {
        let mut c = self.fleetop();
        let mut parts = nodes.split(",--");
        c.args(["node", action, parts.next().unwrap_or_default(), "--yes"]);
        for flag in parts {
            c.arg(format!("--{flag}"));
        }
        if let Some(r) = reason {
            c.args(["--reason", r]);
        }
        let out = c.output().expect("runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    fn audit_lines(&self) -> Vec<ActionReport> {
        std::fs::read_to_string(self.audit())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("each audit line is a report"))
            .collect()
    }

    fn sinfo_reason(&self, node: &str) -> String {
        self.cluster.node_reason(node)
    }

    fn wait(&self, node: &str, state: &str) {
        self.cluster
            .wait_state(node, state, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

pub fn discover_drain_resume_undrain_with_state_and_reason_shown() {
    let env = setup();
    // Discovery: every Slurm node, idle, at its agent.
    let snap = env.export();
    let names: Vec<&str> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu01", "gpu02", "gpu03", "gpu04"]);
    for n in &snap.nodes {
        let s = n.scheduler.as_ref().expect("scheduler state");
        assert_eq!((s.state.as_str(), &s.reason), ("idle", &None), "{}", n.name);
        assert_eq!(n.gpus.len(), 2, "{} has its agent's GPUs", n.name);
    }

    // Drain with a reason full of quotes, unicode and shell syntax: it arrives intact.
    let out = env
        .fleetop()
        .args([
            "node", "drain", "gpu02", "--yes", "--format", "json", "--reason", REASON,
        ])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: ActionReport = serde_json::from_slice(&out.stdout).expect("json report");
    assert!(report.results[0].ok, "{report:?}");
    assert_eq!(report.results[0].state_after.as_deref(), Some("drained"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("scontrol update NodeName=gpu02 State=DRAIN"),
        "the exact command is shown"
    );
    // fleetop's prefix, then the words verbatim.
    let owned = format!("fleetop: {REASON}");
    assert_eq!(env.sinfo_reason("gpu02"), owned);
    let g2 = env
        .export()
        .nodes
        .into_iter()
        .find(|n| n.name == "gpu02")
        .expect("gpu02");
    let s = g2.scheduler.expect("scheduler");
    assert_eq!(
        (s.state.as_str(), s.reason.as_deref(), s.reason_user.as_deref()),
        ("drained", Some(owned.as_str()), Some("root"))
    );

    // Draining it again keeps the first reason and says so.
    let (ok, stdout, _) = env.node("drain", "gpu02", Some("another reason"));
    assert!(ok && stdout.contains("already drained"), "{stdout}");
    assert_eq!(env.sinfo_reason("gpu02"), owned);

    let (ok, stdout, err) = env.node("resume", "gpu02", None);
    assert!(ok, "{stdout}{err}");
    env.wait("gpu02", "idle");
    // Resuming a node in service is not an error, just nothing to do.
    let (ok, stdout, _) = env.node("resume", "gpu02", None);
    assert!(ok && stdout.contains("nothing to resume"), "{stdout}");

    assert!(env.node("drain", "gpu03", Some("fan")).0);
    let (ok, stdout, _) = env.node("undrain", "gpu03", None);
    assert!(ok, "{stdout}");
    env.wait("gpu03", "idle");

    // A node someone else took down: resume leaves it, saying by whom and
    // why; --force brings it back once it answers.
    let down = env
        .cluster
        .command("scontrol")
        .args(["update", "NodeName=gpu04", "State=DOWN", "Reason=test"])
        .status()
        .expect("scontrol");
    assert!(down.success());
    env.wait("gpu04", "down");
    let (ok, stdout, _) = env.node("resume", "gpu04", None);
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains("by root") && stdout.contains(": test") && stdout.contains("--force"),
        "{stdout}"
    );
    assert_eq!(env.cluster.node_state("gpu04"), "down");
    let (ok, stdout, _) = env.node("resume", "gpu04,--force", None);
    assert!(ok, "{stdout}");
    env.wait("gpu04", "idle");

    // Every attempt is in the audit log, with its exact commands and results:
    // a line before it runs, and one with the results.
    let all = env.audit_lines();
    let (started, log): (Vec<ActionReport>, Vec<ActionReport>) =
        all.iter().cloned().partition(|r| r.stage == Stage::Started);
    assert_eq!(started.len(), log.len(), "each attempt logged before it ran");
    for pair in all.chunks(2) {
        assert_eq!(
            (pair[0].stage, pair[1].stage, &pair[0].nodes),
            (Stage::Started, Stage::Done, &pair[1].nodes)
        );
    }
    let actions: Vec<&str> = log.iter().map(|r| r.action.verb()).collect();
    assert_eq!(
        actions,
        [
            "drain", "drain", "resume", "resume", "drain", "undrain", "resume", "resume"
        ]
    );
    assert_eq!(log[0].reason.as_deref(), Some(owned.as_str()));
    assert_eq!(
        log[0].commands[0].last().map(String::as_str),
        Some(format!("Reason={owned}").as_str())
    );
    assert!(!log[6].ok() && log[7].ok(), "refused, then forced");
    assert!(log[0].actor.name.is_some() && log[0].results[0].ok);
}

pub fn text_format_reads_the_same_as_json() {
    let env = setup();
    assert!(env.node("drain", "gpu01", Some(REASON)).0);
    let json = env.export();
    let cfg = std::fs::read_to_string(env.config())
        .expect("config")
        .replace("[slurm]\n", "[slurm]\nformat = \"text\"\n");
    std::fs::write(env.config(), cfg).expect("config");
    let text = env.export();
    let sched = |s: &Snapshot| s.nodes.iter().map(|n| n.scheduler.clone()).collect::<Vec<_>>();
    // Reason times included: the text format's local time, read in the zone
    // sinfo printed it in, is the same instant as the JSON's epoch seconds.
    assert_eq!(sched(&json), sched(&text));
    assert!(
        text.nodes[0]
            .scheduler
            .as_ref()
            .and_then(|s| s.reason_time.as_deref())
            .is_some_and(|t| t.ends_with('Z')),
        "{:?}",
        text.nodes[0].scheduler
    );
    assert_eq!(
        text.nodes[0].scheduler.as_ref().and_then(|s| s.reason.as_deref()),
        Some(format!("fleetop: {REASON}").as_str())
    );
    // Partitions, from both formats alike (compared above): gpu01 is in two.
    let parts = |i: usize| json.nodes[i].scheduler.as_ref().map(|s| s.partitions.clone());
    assert_eq!(parts(0), Some(vec!["debug".to_string(), "gpu".to_string()]));
    assert_eq!(parts(1), Some(vec!["gpu".to_string()]));
}

/// A reason someone set with scontrol holding a newline and terminal
/// escapes: every later read of Slurm still works, in both formats, for
/// every other node's actions; nothing of it reaches the terminal raw; and
/// fleetop refuses such a reason given to it, before anything runs.
pub fn a_hostile_reason_set_by_anyone_breaks_no_read_and_reaches_no_terminal() {
    let env = setup();
    let hostile = "line one\nNodeName=gpu03 State=DOWN \u{1b}]0;TITLE\u{7}\u{1b}[2J \u{202e}drowkcab";
    let ok = env
        .cluster
        .command("scontrol")
        .args(["update", "NodeName=gpu02", "State=DRAIN", &format!("Reason={hostile}")])
        .status()
        .expect("scontrol");
    assert!(ok.success());
    env.cluster
        .wait_state("gpu02", "drained", Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    for format in ["json", "text"] {
        let cfg = std::fs::read_to_string(env.config()).expect("config");
        let cfg = match cfg.find("format = ") {
            Some(_) => cfg.replace("format = \"json\"", &format!("format = \"{format}\"")),
            None => cfg.replace("[slurm]\n", &format!("[slurm]\nformat = \"{format}\"\n")),
        };
        std::fs::write(env.config(), cfg).expect("config");
        // Another node's drain and resume work.
        let (ok, out, err) = env.node("drain", "gpu01", Some("fan"));
        assert!(ok, "{format}: {out}{err}");
        let (ok, out, err) = env.node("resume", "gpu01", None);
        assert!(ok, "{format}: {out}{err}");
        // The hostile node's own lines: its reason shown, escaped.
        let (ok, out, err) = env.node("resume", "gpu02", None);
        assert!(!ok, "someone else's drain: {out}{err}");
        for text in [&out, &err] {
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
                "{format}: {text:?}"
            );
        }
        assert!(out.contains("line one\\nNodeName=gpu03"), "{format}: {out}");
        let snap = env.export();
        let r = snap.nodes[1]
            .scheduler
            .as_ref()
            .and_then(|s| s.reason.clone())
            .unwrap_or_default();
        assert!(r.starts_with("line one\\n") && !r.contains('\u{1b}'), "{format}: {r:?}");
        assert_eq!(
            snap.nodes[2].scheduler.as_ref().map(|s| s.state.as_str()),
            Some("idle"),
            "{format}"
        );
    }
    // Given to fleetop: refused in one line, nothing run.
    let (ok, out, err) = env.node("drain", "gpu03", Some("bad\u{1b}[2J"));
    assert!(
        !ok && err.contains("control character") && !err.contains('\u{1b}'),
        "{out}{err}"
    );
    let (ok, _, err) = env.node("drain", "gpu03", Some(&"x".repeat(100_000)));
    assert!(!ok && err.contains("at most 1000"), "{}", &err[..err.len().min(300)]);
    assert_eq!(env.cluster.node_state("gpu03"), "idle");
}

pub fn a_multi_node_drain_with_an_invalid_name_reports_each_node() {
    let env = setup();
    let (ok, stdout, stderr) = env.node("drain", "gpu01,nosuch", Some("maintenance"));
    assert!(!ok, "one node failed: non-zero exit");
    let line = |n: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(n))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("gpu01").contains("ok") && line("gpu01").contains("drained"),
        "{stdout}"
    );
    assert!(
        line("nosuch").contains("FAIL") && line("nosuch").contains("Invalid node name specified"),
        "{stdout}"
    );
    assert!(stderr.contains("drain failed on 1 of 2 node(s): nosuch"), "{stderr}");
    env.wait("gpu01", "drained");
}

pub fn a_job_shows_on_its_node_and_a_drain_waits_for_it() {
    let env = setup();
    let out = env
        .cluster
        .command("sbatch")
        .args(["-w", "gpu03", "--gres=gpu:2", "-J", "train-job", "--wrap", "sleep 8"])
        .output()
        .expect("sbatch");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let start = Instant::now();
    let job = loop {
        let snap = env.export();
        let g3 = snap.nodes.into_iter().find(|n| n.name == "gpu03").expect("gpu03");
        if let Some(j) = g3.scheduler.and_then(|s| s.jobs.into_iter().next()) {
            break j;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the job never showed on gpu03"
        );
    };
    assert_eq!(
        (job.name.as_str(), job.gpus_per_node, job.nodes.as_slice()),
        ("train-job", 2, &["gpu03".to_string()][..])
    );
    assert_eq!(job.user, "root");

    let out = env
        .fleetop()
        .args([
            "node",
            "drain",
            "gpu03",
            "--yes",
            "--format",
            "json",
            "--reason",
            "after the job",
        ])
        .output()
        .expect("runs");
    let report: ActionReport = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(report.results[0].state_after.as_deref(), Some("draining"), "{report:?}");
    env.wait("gpu03", "drained");
}

/// A user's job named with ASCII RS (the text format's record end) and a
/// heterogeneous job (`103+0`, `103+1`): the text format still reads every
/// job, and a drain of another node reports what it did, not a FAIL.
pub fn a_job_named_with_a_record_separator_or_a_het_job_breaks_no_text_read() {
    let env = setup();
    let cfg = std::fs::read_to_string(env.config())
        .expect("config")
        .replace("[slurm]\n", "[slurm]\nformat = \"text\"\n");
    std::fs::write(env.config(), cfg).expect("config");
    let out = env
        .cluster
        .command("sbatch")
        .args(["-w", "gpu02", "-J", "evil\u{1e}\nname\u{1e}", "--wrap", "sleep 60"])
        .output()
        .expect("sbatch");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let script = env.dir.path().join("het.sh");
    std::fs::write(&script, "#!/bin/sh\nsleep 60\n").expect("script");
    let het = env
        .cluster
        .command("sbatch")
        .args(["-J", "het", "-w", "gpu03", ":", "-w", "gpu04"])
        .arg(&script)
        .output()
        .expect("sbatch");
    let het_ok = het.status.success();
    if !het_ok {
        eprintln!(
            "this cluster refuses heterogeneous jobs, checked by the parser's tests only: {}",
            String::from_utf8_lossy(&het.stderr)
        );
    }
    let start = Instant::now();
    let jobs = |snap: &Snapshot, node: &str| {
        snap.nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.scheduler.as_ref())
            .map(|s| s.jobs.clone())
            .unwrap_or_default()
    };
    loop {
        let snap = env.export();
        let g2 = jobs(&snap, "gpu02");
        let het_seen = !het_ok || (!jobs(&snap, "gpu03").is_empty() && !jobs(&snap, "gpu04").is_empty());
        if !g2.is_empty() && het_seen {
            assert!(g2[0].name.starts_with("evil"), "{:?}", g2[0].name);
            assert!(!g2[0].name.contains('\u{1e}'), "escaped: {:?}", g2[0].name);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the jobs never showed: {:?}",
            snap.nodes.iter().map(|n| (&n.name, &n.scheduler)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let (ok, out, err) = env.node("drain", "gpu01", Some("after evil names"));
    assert!(ok, "the drain ran and says so: {out}{err}");
    env.wait("gpu01", "drained");
    let _ = env.cluster.command("scancel").args(["-u", "root"]).output();
}

pub fn read_only_refuses_and_logs_the_attempt() {
    let env = setup();
    let out = env
        .fleetop()
        .args(["--read-only", "node", "drain", "gpu01", "--reason", "x", "--yes"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only mode: drain refused"));
    let cfg = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(env.config(), format!("read_only = true\n{cfg}")).expect("config");
    let (ok, _, stderr) = env.node("resume", "gpu01", None);
    assert!(!ok && stderr.contains("read-only mode"), "{stderr}");
    assert_eq!(env.cluster.node_state("gpu01"), "idle", "nothing ran");
    let log = env.audit_lines();
    assert_eq!(log.len(), 2);
    assert!(
        log.iter()
            .all(|r| r.refused.as_deref() == Some("read-only mode") && r.results.is_empty())
    );

    // Not on a terminal and no --yes: refused, nothing runs.
    std::fs::write(env.config(), cfg).expect("config");
    let out = env
        .fleetop()
        .args(["node", "drain", "gpu01", "--reason", "x"])
        .write_stdin("")
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --yes"));
    assert_eq!(env.cluster.node_state("gpu01"), "idle");
}

/// `fleetop job cancel JOBID` runs `scancel JOBID` on a real job: refused in
/// read-only mode, then confirmed with --yes, read back from Slurm (the job
/// is gone), and logged.
pub fn job_cancel_scancels_a_real_job_and_read_only_refuses_it() {
    let env = setup();
    let out = env
        .cluster
        .command("sbatch")
        .args([
            "--parsable",
            "-w",
            "gpu02",
            "--gres=gpu:1",
            "-J",
            "long-job",
            "--wrap",
            "sleep 300",
        ])
        .output()
        .expect("sbatch");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("a job id");
    let in_state = |states: &str| {
        let out = env
            .cluster
            .command("squeue")
            .args(["-h", "-t", states, "-j", &job.to_string(), "-o", "%i"])
            .output();
        out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == job.to_string())
    };
    let listed = || in_state("all");
    let start = Instant::now();
    while !in_state("R") {
        assert!(start.elapsed() < Duration::from_secs(20), "the job never ran");
        std::thread::sleep(Duration::from_millis(200));
    }

    let out = env
        .fleetop()
        .args(["--read-only", "job", "cancel", &job.to_string(), "--yes"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only mode: scancel refused"));
    assert!(listed(), "nothing ran");

    let out = env
        .fleetop()
        .args(["job", "cancel", &job.to_string(), "--yes", "--format", "json"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("scancel {job}")),
        "the exact command first: {stderr}"
    );
    let report: ActionReport = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(report.commands, [["scancel".to_string(), job.to_string()]]);
    assert_eq!(report.nodes, ["gpu02"], "the job's node, for the log");
    assert!(report.results[0].ok, "{report:?}");
    let start = Instant::now();
    while listed() {
        assert!(start.elapsed() < Duration::from_secs(30), "the job is still there");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Cancelled once: a second cancel has nothing to cancel, and says so.
    let out = env
        .fleetop()
        .args(["job", "cancel", &job.to_string(), "--yes"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("nothing to cancel"), "{stderr}");
    let log = env.audit_lines();
    assert!(
        log.iter()
            .any(|r| r.refused.as_deref() == Some("read-only mode") && r.action.verb() == "scancel")
    );
    assert!(
        log.iter()
            .any(|r| r.refused.is_none() && r.action.verb() == "scancel" && !r.results.is_empty())
    );
}

/// `fleetop job cancel` of a job Slurm does not list fails: exit 1, one
/// line that says there is nothing to cancel, nothing asked or run, and
/// the audit log says it failed. With `--format json` the report says so.
pub fn job_cancel_of_a_job_slurm_does_not_list_fails_in_one_line() {
    let env = setup();
    let out = env
        .fleetop()
        .args(["job", "cancel", "999999", "--yes"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "fleetop: nothing to cancel: Slurm lists no job 999999",
        "one line"
    );
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let log = env.audit_lines();
    let [r] = &log[..] else {
        panic!("one audit line: {log:?}")
    };
    assert_eq!(
        (r.action.verb(), r.stage, r.refused.as_deref()),
        ("scancel", Stage::Done, None)
    );
    assert!(
        r.results.len() == 1 && !r.results[0].ok && r.results[0].message.contains("Slurm lists no job 999999"),
        "audited as failed: {r:?}"
    );

    let out = env
        .fleetop()
        .args(["job", "cancel", "999999", "--yes", "--format", "json"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let report: ActionReport = serde_json::from_slice(&out.stdout).expect("report");
    assert!(!report.results[0].ok, "{report:?}");
}

/// Reads ndjson snapshots from `lines` until one satisfies `want`, or fails
/// after `within` lines.
fn until_snapshot(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    within: usize,
    what: &str,
    want: impl Fn(&Snapshot) -> bool,
) -> Snapshot {
    for _ in 0..within {
        let line = lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("export ended before {what}"));
        let snap: Snapshot = serde_json::from_str(&line).expect("a snapshot per line");
        if want(&snap) {
            return snap;
        }
    }
    panic!("no snapshot showed {what} in {within} lines");
}

pub fn a_hung_then_dead_controller_is_shown_and_never_hangs_an_action() {
    use std::io::BufRead;
    let env = setup();
    let cfg = std::fs::read_to_string(env.config())
        .expect("config")
        .replace("[slurm]\n", "[slurm]\ntimeout = \"2s\"\n");
    std::fs::write(env.config(), cfg).expect("config");
    let mut export = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .envs(env.cluster.env())
        .arg("--config")
        .arg(env.config())
        .args([
            "export",
            "--slurm",
            "--format",
            "ndjson",
            "--interval",
            "1s",
            "--count",
            "90",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("export starts");
    let mut lines = std::io::BufReader::new(export.stdout.take().expect("stdout")).lines();
    let first = until_snapshot(&mut lines, 1, "a first snapshot", |_| true);
    assert!(
        first.scheduler_read_at.is_some() && first.scheduler_error.is_none(),
        "{first:?}"
    );

    // Hung: every client call times out; the export goes on and says so.
    env.cluster.signal_ctld("STOP");
    let hung = until_snapshot(&mut lines, 20, "the hang", |s| {
        s.scheduler_error
            .as_deref()
            .is_some_and(|e| e.contains("did not answer within 2 s"))
    });
    assert!(
        hung.scheduler_read_at.as_deref() < Some(hung.generated_at.as_str()),
        "the state shown is as old as the last good read: {hung:?}"
    );
    assert_eq!(
        hung.nodes[0].scheduler.as_ref().map(|s| s.state.as_str()),
        Some("idle"),
        "the last known state is kept, marked old by scheduler_read_at"
    );
    // An action against the hung controller ends, with a per-node error.
    let (ok, stdout, stderr) = env.node("drain", "gpu01,gpu02", Some("maintenance"));
    assert!(!ok, "{stdout}{stderr}");
    for n in ["gpu01", "gpu02"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(n))
            .unwrap_or_else(|| panic!("{n} in {stdout}"));
        assert!(
            line.contains("FAIL") && line.contains("did not answer within 2 s"),
            "{line}"
        );
    }
    let log = env.audit_lines();
    assert!(
        log.last().is_some_and(|r| r.results.iter().all(|r| !r.ok)),
        "logged as failed"
    );
    // A one-shot export started now: Slurm cannot name the nodes, the
    // config's [slurm.agents] does; every agent is read, and the document
    // says why Slurm's fields are missing (exit 0).
    let out = crate::fleetop()
        .envs(env.cluster.env())
        .arg("--config")
        .arg(env.config())
        .args(["export", "--slurm", "--once", "--timeout", "5s"])
        .timeout(Duration::from_secs(120))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let once: fleetop::export::Snapshot = serde_json::from_slice(&out.stdout).expect("a document");
    assert_eq!(once.nodes.len(), 4);
    assert!(
        once.nodes.iter().all(|n| n.status == fleetop::export::Status::Ok),
        "{once:?}"
    );
    assert!(
        once.scheduler_error
            .as_deref()
            .is_some_and(|e| e.contains("did not answer") || e.contains("within")),
        "{:?}",
        once.scheduler_error
    );

    // Back: the error clears.
    env.cluster.signal_ctld("CONT");
    until_snapshot(&mut lines, 20, "the recovery", |s| s.scheduler_error.is_none());
    // Dead: refused connections or timeouts, but an error, not silence.
    env.cluster.signal_ctld("KILL");
    let dead = until_snapshot(&mut lines, 30, "the dead controller", |s| s.scheduler_error.is_some());
    assert!(
        dead.nodes.iter().all(|n| n.status == fleetop::export::Status::Ok),
        "agents are fine: {dead:?}"
    );
    let _ = export.kill();
    let _ = export.wait();
}
