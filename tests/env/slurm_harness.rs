//! A real, throw-away Slurm cluster for integration tests: munged, slurmctld and one
//! slurmd per node, all children of the test process, all state under one temp dir, all
//! on loopback ports picked at runtime. Nothing touches /etc/slurm or the system munged.
//!
//! Why real daemons instead of fake `sinfo`/`scontrol` scripts: the point of these tests
//! is the exact text, JSON and error behaviour of the installed Slurm, which fakes drift from.

// Not every test uses every helper.
#![allow(dead_code)]

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Set on every daemon (slurmstepd and the jobs inherit it through slurmd / sbatch), so Drop
/// can find and kill strays of *this* cluster only, without touching anything else.
const MARKER: &str = "FLEETOP_SLURM_HARNESS";
const DAEMONS: [&str; 3] = ["munged", "slurmctld", "slurmd"];

pub struct SlurmCluster {
    dir: tempfile::TempDir,
    /// Started first to last (munged, slurmctld, slurmd...); stopped in reverse.
    children: Vec<(String, Child)>,
    nodes: Vec<String>,
}

/// Whether Slurm and munge are installed; these tests are reported ignored without them.
pub fn installed() -> bool {
    DAEMONS
        .iter()
        .chain(&["sinfo", "scontrol"])
        .all(|b| find_bin(b).is_some())
}

impl SlurmCluster {
    /// Starts munged, slurmctld and one `slurmd -N <name>` per node of the hostlist `nodes`
    /// (CPUs=2, RealMemory=1000, Gres=gpu:8, partition `gpu`; the first also in `debug`), then waits until all are idle.
    /// Ok(None) (with a reason on stderr) when Slurm/munge are not installed; Err with the
    /// daemons' log tails when they are installed but the cluster does not come up.
    pub fn start(nodes: &str) -> Result<Option<SlurmCluster>, String> {
        let mut bins = Vec::new();
        for b in DAEMONS.iter().chain(&["sinfo", "scontrol"]) {
            match find_bin(b) {
                Some(p) => bins.push(p),
                None => {
                    eprintln!(
                        "slurm harness: `{b}` not installed (apt-get install slurmctld slurmd slurm-client munge)"
                    );
                    return Ok(None);
                }
            }
        }
        let names = fleetop::ingest::hostlist::expand(nodes).map_err(|e| e.to_string())?;
        let dir = tempfile::Builder::new()
            .prefix("fleetop-slurm-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let mut c = SlurmCluster {
            dir,
            children: Vec::new(),
            nodes: names,
        };
        c.write_config()?;
        let d = c.dir.path().to_path_buf();
        let p = |f: &str| d.join(f).display().to_string();
        // -F: foreground, so it is our child and Drop can stop it; --force: needed as root.
        c.spawn(
            "munged",
            &bins[0],
            &[
                "-F",
                "--force",
                &format!("--socket={}", p("munge.sock")),
                &format!("--key-file={}", p("munge.key")),
                &format!("--pid-file={}", p("munged.pid")),
                &format!("--log-file={}", p("log/munged.log")),
                &format!("--seed-file={}", p("munged.seed")),
            ],
        )?;
        c.wait_until(Duration::from_secs(10), "munged socket", |c| {
            Ok(c.dir.path().join("munge.sock").exists())
        })?;
        // -D: foreground child; -c: ignore any saved state (there is none, but be explicit).
        c.spawn("slurmctld", &bins[1], &["-D", "-c", "-f", &p("slurm.conf")])?;
        for n in c.nodes.clone() {
            c.spawn(
                &format!("slurmd-{n}"),
                &bins[2],
                &["-D", "-f", &p("slurm.conf"), "-N", &n],
            )?;
        }
        c.wait_until(Duration::from_secs(60), "all nodes idle", |c| {
            let out = c
                .command("sinfo")
                .args(["-h", "-N", "-o", "%N %T"])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(c.nodes.iter().all(|n| text.lines().any(|l| l == format!("{n} idle"))))
        })?;
        Ok(Some(c))
    }

    /// Environment for Slurm clients: the config path is all they need (it names the munge socket).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![(
            "SLURM_CONF".into(),
            self.dir.path().join("slurm.conf").display().to_string(),
        )]
    }

    /// A client command bound to this cluster. Runs in the temp dir so `slurm-N.out` files land
    /// there, and drops user format overrides that would change the output under test.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.dir.path())
            .envs(self.env())
            .env(MARKER, self.dir.path());
        for v in [
            "SINFO_FORMAT",
            "SQUEUE_FORMAT",
            "SQUEUE_FORMAT2",
            "SLURM_TIME_FORMAT",
            "SLURM_CLUSTERS",
        ] {
            cmd.env_remove(v);
        }
        cmd
    }

    /// `sinfo -h -N -n NAME -o %T`, trimmed: "idle", "drained", "draining", "allocated", and
    /// also "idle*" (not responding) for about a second after a RESUME/UNDRAIN.
    pub fn node_state(&self, name: &str) -> String {
        match self
            .command("sinfo")
            .args(["-h", "-N", "-n", name, "-o", "%T"])
            .output()
        {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
            Ok(o) => format!("<sinfo failed: {}>", String::from_utf8_lossy(&o.stderr).trim()),
            Err(e) => format!("<sinfo failed: {e}>"),
        }
    }

    /// `sinfo -h -N -n NAME -o %E`: the node's reason ("none" when it has
    /// none), once (a node in two partitions is listed twice).
    pub fn node_reason(&self, name: &str) -> String {
        let out = self
            .command("sinfo")
            .args(["-h", "-N", "-n", name, "-o", "%E"])
            .output()
            .expect("sinfo");
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().next().unwrap_or_default().trim().to_string()
    }

    /// Polls node_state until it equals `want` exactly.
    pub fn wait_state(&self, name: &str, want: &str, timeout: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let got = self.node_state(name);
            if got == want {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "node {name}: wanted state {want:?}, still {got:?} after {timeout:?}"
                ));
            }
            sleep(Duration::from_millis(200));
        }
    }

    /// The temp dir holding config, state, logs (`log/`) and job output files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn write_config(&self) -> Result<(), String> {
        let d = self.dir.path();
        for sub in ["state", "spool", "log", "dev"] {
            fs::create_dir_all(d.join(sub)).map_err(|e| format!("mkdir {sub}: {e}"))?;
        }
        // A fresh key: our munged must not share credentials with any system munged.
        let mut key = [0u8; 1024];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| format!("urandom: {e}"))?;
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(d.join("munge.key"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, &key))
            .map_err(|e| format!("munge.key: {e}"))?;
        // gres/gpu in 22.05 silently drops GPUs without File= ("Removing file-less GPU"), and the
        // node then goes INVAL; plain empty files are enough with task/none (no device cgroup).
        for i in 0..8 {
            fs::write(d.join(format!("dev/gpu{i}")), "").map_err(|e| format!("dev/gpu{i}: {e}"))?;
        }
        // slurm.conf names every daemon's port before it starts, and Slurm
        // cannot bind port 0 and say which it got: so ports below the
        // ephemeral range, which no other test's server (all on port 0)
        // can take (tests/support/ports.rs).
        let ports = crate::ports::below_ephemeral(self.nodes.len() + 1);
        // SlurmUser as a uid: works as root and, in principle, as whoever runs the tests.
        let uid = fs::metadata(d.join("munge.key")).map_err(|e| e.to_string())?.uid();
        let dd = d.display();
        let mut conf = format!(
            "ClusterName=fleetoptest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ctld}\n\
             SlurmUser={uid}\nSlurmdUser={uid}\nAuthType=auth/munge\nAuthInfo=socket={dd}/munge.sock\n\
             CredType=cred/munge\nStateSaveLocation={dd}/state\nSlurmdSpoolDir={dd}/spool/%n\n\
             SlurmctldPidFile={dd}/slurmctld.pid\nSlurmdPidFile={dd}/slurmd-%n.pid\n\
             SlurmctldLogFile={dd}/log/slurmctld.log\nSlurmdLogFile={dd}/log/slurmd-%n.log\n\
             # No systemd/cgroups in containers: linuxproc tracking, no task plugin, no accounting.\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nMpiDefault=none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nGresTypes=gpu\nReturnToService=2\n\
             # Use the configured CPUs/memory whatever the CI machine has, instead of draining nodes.\n\
             SlurmdParameters=config_overrides\n\
             # Short timers so drain->drained and job cleanup take seconds, not minutes.\n\
             SlurmctldTimeout=30\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=2\nMinJobAge=2\n",
            ctld = ports[0]
        );
        let mut gres = String::new();
        for (n, port) in self.nodes.iter().zip(&ports[1..]) {
            conf += &format!(
                "NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=2 RealMemory=1000 Gres=gpu:8 State=UNKNOWN\n"
            );
            gres += &format!("NodeName={n} Name=gpu Count=8 File={dd}/dev/gpu[0-7]\n");
        }
        conf += "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
        // The first node is in a second partition too (a node in several is read whole).
        if let Some(first) = self.nodes.first() {
            conf += &format!("PartitionName=debug Nodes={first} MaxTime=INFINITE State=UP\n");
        }
        fs::write(d.join("slurm.conf"), conf).map_err(|e| format!("slurm.conf: {e}"))?;
        fs::write(d.join("gres.conf"), gres).map_err(|e| format!("gres.conf: {e}"))
    }

    fn spawn(&mut self, name: &str, bin: &Path, args: &[&str]) -> Result<(), String> {
        let log = |ext: &str| fs::File::create(self.dir.path().join(format!("log/{name}.{ext}")));
        let (out, err) = (
            log("out").map_err(|e| e.to_string())?,
            log("err").map_err(|e| e.to_string())?,
        );
        let child = Command::new(bin)
            .args(args)
            .env(MARKER, self.dir.path())
            .env("SLURM_CONF", self.dir.path().join("slurm.conf"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        self.children.push((name.to_string(), child));
        Ok(())
    }

    /// Polls `ready`; fails fast with the log tails when a daemon exits or time runs out.
    fn wait_until(
        &mut self,
        timeout: Duration,
        what: &str,
        ready: impl Fn(&Self) -> Result<bool, String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if ready(self)? {
                return Ok(());
            }
            let exited = self
                .children
                .iter_mut()
                .find_map(|(n, c)| c.try_wait().ok().flatten().map(|st| format!("{n} exited ({st})")));
            if let Some(exited) = exited {
                return Err(format!("{exited} while waiting for {what}\n{}", self.log_tails()));
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "timed out after {timeout:?} waiting for {what}\n{}",
                    self.log_tails()
                ));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// Sends `signal` ("STOP", "CONT", "KILL") to slurmctld: a hung or dead
    /// controller, as the console must survive it.
    pub fn signal_ctld(&self, signal: &str) {
        let pid = self
            .children
            .iter()
            .find(|(n, _)| n == "slurmctld")
            .map(|(_, c)| c.id())
            .expect("slurmctld runs");
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} slurmctld");
    }

    /// The last lines of every log file, for error messages.
    pub fn log_tails(&self) -> String {
        let mut files: Vec<PathBuf> = fs::read_dir(self.dir.path().join("log"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        let mut s = String::new();
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                s += &format!(
                    "--- {}\n{}\n",
                    f.display(),
                    lines[lines.len().saturating_sub(15)..].join("\n")
                );
            }
        }
        s
    }
}

impl Drop for SlurmCluster {
    /// Cancels jobs, stops daemons (SIGTERM, then SIGKILL after 5 s), then kills any process
    /// still carrying this cluster's marker (slurmstepd and job processes outlive slurmd).
    fn drop(&mut self) {
        // Ask for jobs only while slurmctld lives: against a dead controller squeue hangs ~9 s.
        let ctld_up = self
            .children
            .iter_mut()
            .any(|(n, c)| n == "slurmctld" && matches!(c.try_wait(), Ok(None)));
        if let Some(o) = ctld_up
            .then(|| self.command("squeue").args(["-h", "-o", "%i"]).output().ok())
            .flatten()
        {
            let ids: Vec<String> = String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(String::from)
                .collect();
            if !ids.is_empty() {
                let _ = self.command("scancel").args(&ids).status();
                let _ = self.wait_until(Duration::from_secs(10), "jobs gone", |c| {
                    Ok(c.command("squeue")
                        .args(["-h", "-o", "%i"])
                        .output()
                        .map(|o| o.stdout.is_empty())
                        .unwrap_or(true))
                });
            }
        }
        for (_, child) in self.children.iter_mut().rev() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, child) in self.children.iter_mut().rev() {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let marker = format!("{MARKER}={}", self.dir.path().display());
        for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().to_string();
            if pid.parse::<u32>().ok().is_some_and(|p| p != std::process::id())
                && fs::read(entry.path().join("environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
            {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// Daemons live in sbin, which is often missing from a non-root PATH.
fn find_bin(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}
