//! The command line (the contract scripts and tests rely on; see DESIGN.md),
//! and `resolve`, which turns it and the config into the values the layers
//! below take. Only the front ends (`cmd`, `tui`, `main`) import this.

pub mod resolve;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use fleetop_proto::util::parse_interval;

use crate::model::action::NodeAction;
use crate::model::bench::Suite;

/// fleetop: a terminal console for GPU clusters.
#[derive(Debug, Parser)]
#[command(version = crate::VERSION, about)]
pub struct Cli {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Config file (default: $XDG_CONFIG_HOME/fleetop/config.toml).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Refuse every action that changes the cluster (also `read_only = true` in the config).
    #[arg(long, global = true)]
    pub read_only: bool,
    /// Headless commands' log on stderr: text, or one JSON object a line
    /// (for log shippers). Colour only when stderr is a terminal.
    #[arg(long, global = true, value_enum, default_value_t = crate::logging::LogFormat::Text)]
    pub log_format: crate::logging::LogFormat,
    #[command(flatten)]
    pub screen: ScreenArgs,
    #[command(flatten)]
    pub record: RecordFlags,
    #[command(flatten)]
    pub notify: NotifyFlags,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// How the console looks and takes input: before the subcommand, or after
/// `demo` and `replay` (the commands with a screen); only those list them.
#[derive(Debug, Clone, Default, Args)]
pub struct ScreenArgs {
    /// Colour theme: default, light, high-contrast, colorblind, mono, a user
    /// theme in $XDG_CONFIG_HOME/fleetop/themes, or a path. NO_COLOR forces mono.
    #[arg(long)]
    pub theme: Option<String>,
    /// How often the console redraws at most, 50ms to 10s (also `refresh` in
    /// the config; default 200ms): raise it on a slow SSH link.
    #[arg(long, value_parser = crate::model::time::parse_refresh)]
    pub refresh: Option<Duration>,
    /// No mouse: clicks and the wheel go to the terminal (text selection
    /// without Shift); also `mouse = false` in the config.
    #[arg(long)]
    pub no_mouse: bool,
}

impl ScreenArgs {
    /// These, each given one winning over `before` (the options given
    /// before the subcommand).
    pub fn over(self, before: ScreenArgs) -> ScreenArgs {
        ScreenArgs {
            theme: self.theme.or(before.theme),
            refresh: self.refresh.or(before.refresh),
            no_mouse: self.no_mouse || before.no_mouse,
        }
    }
}

/// How `fleetop node` reaches the nodes' agents (their flags, a burn-in):
/// after the subcommand, as before it.
#[derive(Debug, Clone, Default, Args)]
pub struct AgentArgs {
    /// The nodes' agents as a hostlist with optional :port, where the
    /// config's Slurm mapping does not give them.
    #[arg(long, conflicts_with = "hostfile")]
    pub hosts: Option<String>,
    /// A file with one hostlist expression per line.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// Agent port where a host gives none.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    #[command(flatten)]
    pub access: AccessArgs,
}

/// How the console and the agents trust each other: TLS, the telemetry
/// token, and whether the bench token may cross without TLS. Declared once
/// for the SOURCE and for `fleetop node`, so the two cannot drift apart.
#[derive(Debug, Clone, Default, Args)]
pub struct AccessArgs {
    /// Connect to the agents over TLS, trusting this CA (PEM); also `tls_ca` in the config.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// This console's certificate (PEM), for agents that require one; with --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The agents' telemetry token (their --token-file); also `telemetry_token_file` in the config.
    #[arg(long)]
    pub telemetry_token_file: Option<PathBuf>,
    /// Send the bench token to agents without TLS (it then crosses the network in clear).
    #[arg(long)]
    pub insecure: bool,
}

impl AccessArgs {
    /// These, each given one winning over `before` (given before `node`);
    /// a certificate goes with its key.
    pub fn over(&self, before: &AccessArgs) -> AccessArgs {
        let (tls_cert, tls_key) = match self.tls_cert.is_some() {
            true => (self.tls_cert.clone(), self.tls_key.clone()),
            false => (before.tls_cert.clone(), before.tls_key.clone()),
        };
        AccessArgs {
            tls_ca: self.tls_ca.clone().or_else(|| before.tls_ca.clone()),
            tls_cert,
            tls_key,
            telemetry_token_file: self
                .telemetry_token_file
                .clone()
                .or_else(|| before.telemetry_token_file.clone()),
            insecure: self.insecure || before.insecure,
        }
    }
}

impl SourceArgs {
    /// The first flag given that names where data comes from, for refusing
    /// it where it would be ignored (before a subcommand that has its own).
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.hosts.is_some(), "--hosts"),
            (self.hostfile.is_some(), "--hostfile"),
            (self.slurm, "--slurm"),
            (self.demo, "--demo"),
            (self.dcgm_exporter.is_some(), "--dcgm-exporter"),
            (self.amd_exporter.is_some(), "--amd-exporter"),
            (self.prometheus.is_some(), "--prometheus"),
            (self.port.is_some(), "--port"),
            (self.access.tls_ca.is_some(), "--tls-ca"),
            (self.access.tls_cert.is_some(), "--tls-cert"),
            (self.access.telemetry_token_file.is_some(), "--telemetry-token-file"),
            (self.kube.kubernetes, "--kubernetes"),
            (self.ray.ray.is_some(), "--ray"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// The source with what was given after `node` winning.
    pub fn with_agents(&self, a: &AgentArgs) -> SourceArgs {
        let mut s = self.clone();
        if a.hosts.is_some() || a.hostfile.is_some() {
            s.hosts = a.hosts.clone();
            s.hostfile = a.hostfile.clone();
        }
        s.port = a.port.or(s.port);
        s.access = a.access.over(&self.access);
        s
    }
}

/// Where alerts are sent, by the console and by `fleetop watch`.
#[derive(Debug, Clone, Default, Args)]
pub struct NotifyFlags {
    /// Post active flags to this Alertmanager ("http://am:9093"; its
    /// /api/v2/alerts is added). Also `[notify] alertmanager` in the config.
    #[arg(long, value_name = "URL")]
    pub alertmanager: Option<String>,
    /// POST each raised and resolved alert to this URL, as JSON (see
    /// docs/NOTIFY.md). Also `[notify] webhook` in the config.
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
}

/// Recording what the console sees, beside the TUI.
#[derive(Debug, Clone, Default, Args)]
pub struct RecordFlags {
    /// Also record every update to FILE (a new file), for `fleetop replay`.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// With --record: start a new segment (FILE.1, FILE.2, ...) past this size (100MB, 1GiB, bytes).
    #[arg(long, value_name = "SIZE", requires = "record", value_parser = parse_size)]
    pub rotate_size: Option<u64>,
}

/// Where the nodes come from. With none, the config's hosts, or the local node.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Agents to watch, as a Slurm hostlist with optional :port ("gpu[01-64],login1:6000").
    #[arg(long, conflicts_with_all = ["hostfile", "demo"])]
    pub hosts: Option<String>,
    /// A file with one hostlist expression per line.
    #[arg(long, conflicts_with = "demo")]
    pub hostfile: Option<PathBuf>,
    /// A simulated cluster: real agents on loopback with the simulated backend.
    #[arg(long, conflicts_with = "slurm")]
    pub demo: bool,
    /// The nodes Slurm knows (sinfo), at the agent address the config maps them to.
    #[arg(long, conflicts_with_all = ["hosts", "hostfile"])]
    pub slurm: bool,
    /// dcgm-exporter endpoints to read instead of agents, as a hostlist with
    /// optional :port (default 9400): "gpu[01-64]" reads http://gpu01:9400/metrics, ...
    #[arg(long, value_name = "HOSTS", conflicts_with_all = ["hosts", "hostfile", "demo", "slurm", "prometheus"])]
    pub dcgm_exporter: Option<String>,
    /// AMD device-metrics-exporter endpoints (or fleetop agents' /metrics on
    /// AMD nodes) to read instead of agents, as a hostlist with optional
    /// :port (default 5000): "mi[01-16]" reads http://mi01:5000/metrics, ...
    #[arg(long, value_name = "HOSTS", conflicts_with_all = ["hosts", "hostfile", "demo", "slurm", "prometheus", "dcgm_exporter"])]
    pub amd_exporter: Option<String>,
    /// Read the whole fleet from this Prometheus (or Prometheus-compatible) HTTP API,
    /// e.g. http://prometheus:9090: the series of dcgm-exporters (or fleetop agents) it scrapes.
    #[arg(long, value_name = "URL", conflicts_with_all = ["hosts", "hostfile", "demo", "slurm"])]
    pub prometheus: Option<String>,
    /// With --prometheus: label matchers added to every query, to pick jobs or
    /// instances ('job="dcgm"' or '{job="dcgm",instance=~"gpu0.*"}').
    #[arg(long, value_name = "SELECTOR", requires = "prometheus")]
    pub prometheus_match: Option<String>,
    /// How often --dcgm-exporter or --amd-exporter endpoints or --prometheus are read.
    #[arg(long, default_value = "5s", value_parser = parse_interval)]
    pub scrape_interval: Duration,
    /// The longest one read of a --dcgm-exporter or --amd-exporter endpoint
    /// or a --prometheus query may take, the first included (default 5s, and up to 120s for the
    /// first read of a large fleet through --prometheus).
    #[arg(long, value_parser = parse_interval)]
    pub scrape_timeout: Option<Duration>,
    /// Agent port where a host gives none.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// How much of each agent's history to read on connect (default: all it
    /// holds, ten minutes, up to 416 nodes; past that about 250,000 samples
    /// for the whole fleet, 25 s at 10,000 nodes, and for a one-shot export
    /// about 100,000, at least 10 s). Less starts a large fleet sooner;
    /// flags that need a window of history (idle, power-capped, underused:
    /// five minutes) are judged on what was read until the console has run
    /// that long.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub backfill: Option<Duration>,
    /// Demo: number of nodes.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nodes: u32,
    /// Demo: GPUs per node.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub gpus: u32,
    /// Demo: seed; the same seed gives the same cluster.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub access: AccessArgs,
    /// Demo, for tests (hidden): one node per simulated scenario named here
    /// ("xid79,thermal-throttle"), instead of the seeded mix.
    #[arg(long, hide = true, value_delimiter = ',', requires = "demo")]
    pub demo_scenarios: Vec<String>,
    /// Demo, for tests (hidden): the problems of --demo-scenarios begin this
    /// long after the demo starts (default: long before, in its history)...
    #[arg(long, hide = true, value_parser = parse_interval, requires = "demo_scenarios")]
    pub demo_fault_after: Option<Duration>,
    /// ...and end after this long (default: never), so flags clear.
    #[arg(long, hide = true, value_parser = parse_interval, requires = "demo_scenarios")]
    pub demo_fault_for: Option<Duration>,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub ray: RayArgs,
}

/// Ray (docs/ray.md): with the console, each node's Ray state and the Ray
/// jobs on its GPUs; with `fleetop node drain`, the drain goes to Ray.
#[derive(Debug, Clone, Default, Args)]
pub struct RayArgs {
    /// The Ray cluster the nodes are in: its dashboard's HTTP address
    /// ("http://ray-head:8265"; alone, the config's `[ray] dashboard`).
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub ray: Option<String>,
    /// With --ray: the GCS's host:port, where it is not the dashboard's host at 6379.
    #[arg(long, value_name = "HOST:PORT", requires = "ray")]
    pub ray_gcs: Option<String>,
}

/// Kubernetes (docs/kubernetes.md): with the console, each node's
/// Kubernetes state beside its GPUs and cordon/drain from the dialogs; with
/// `fleetop node`, the actions go to the API server instead of Slurm.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeArgs {
    /// Read (and act on) the GPU nodes through the Kubernetes API: the
    /// kubeconfig ($KUBECONFIG, ~/.kube/config) or, inside a pod, its service account.
    #[arg(long)]
    pub kubernetes: bool,
    /// With --kubernetes: this kubeconfig instead of $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "FILE", requires = "kubernetes")]
    pub kubeconfig: Option<PathBuf>,
    /// With --kubernetes: this kubeconfig context instead of the current one.
    #[arg(long, value_name = "NAME", requires = "kubernetes")]
    pub kube_context: Option<String>,
    /// With --kubernetes in the console: how often the nodes are read (default 10s).
    #[arg(long, value_name = "INTERVAL", requires = "kubernetes", value_parser = parse_interval)]
    pub kube_refresh: Option<Duration>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the console on a simulated cluster (real agents on loopback).
    Demo {
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
        nodes: u32,
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=16))]
        gpus: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        record: RecordFlags,
        #[command(flatten)]
        notify: NotifyFlags,
        #[command(flatten)]
        screen: ScreenArgs,
    },
    /// Print snapshots of the fleet as JSON on stdout (logs go to stderr).
    Export(ExportArgs),
    /// Drain, resume, undrain or return nodes in Slurm, or cordon, drain or
    /// resume (uncordon) them in Kubernetes with --kubernetes (asks first
    /// on a terminal), or show a node's history.
    Node(NodeCmd),
    /// Cancel a Slurm job (`fleetop job cancel JOBID`; asks first on a terminal).
    Job(JobCmd),
    /// Run a burn-in suite on the agents of SOURCE (asks first on a terminal).
    Bench(BenchArgs),
    /// Headless notifier: post SOURCE's flags to Alertmanager and/or a
    /// webhook until SIGTERM or Ctrl-C (logs on stderr; no terminal needed).
    Watch(WatchArgs),
    /// The remediation policy's state: `status`, or `reset` its tripped breaker.
    Remediate(RemediateCmd),
    /// Record the update stream of SOURCE to a file, for `fleetop replay` (until Ctrl-C or --duration).
    Record(RecordArgs),
    /// The console on a recording, with a time cursor (read-only).
    Replay(ReplayArgs),
    /// Print the shell completions for SHELL (bash, zsh, fish, ...).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (fleetop.1 and one per subcommand) into DIR.
    Man {
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub notify: NotifyFlags,
    /// How often the fleet's flags are judged.
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    /// The remediation policy (`[remediate]` in the config; this wins):
    /// dry-run says what it would drain, drain drains (needs --slurm, or
    /// --kubernetes to quarantine: cordon, taint, evict).
    #[arg(long, value_enum, value_name = "MODE")]
    pub remediate: Option<crate::model::remediation::Mode>,
}

#[derive(Debug, Clone, Args)]
pub struct RemediateCmd {
    #[arg(value_enum)]
    pub action: RemediateVerb,
    /// reset: do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// status: count the policy's quarantines Kubernetes shows (with
    /// --kubernetes), and name the holder of its Lease.
    #[command(flatten)]
    pub kube: KubeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RemediateVerb {
    /// What the policy holds drained, its recent drains, and whether its breaker tripped.
    Status,
    /// Lift a tripped breaker's stop (a person has looked at why it
    /// tripped); the drains in its window still count.
    Reset,
}

#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The recording (a new file; rotated segments are FILE.1, FILE.2, ...).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Start a new segment past this size (100MB, 1GiB, bytes).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub rotate_size: Option<u64>,
    /// Stop after this long (default: until interrupted).
    #[arg(long, value_parser = parse_interval)]
    pub duration: Option<Duration>,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The recording (its first segment, or any FILE.n to start there).
    pub file: PathBuf,
    /// Where the cursor starts: RFC 3339 or an offset from the start (+5m); default the start.
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    #[command(flatten)]
    pub screen: ScreenArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// quick (a few minutes) or full (longer copies, a five-minute burn, every GPU pair).
    #[arg(long, default_value = "quick", value_parser = parse_suite)]
    pub suite: Suite,
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// The agents' bench token (the file given to `fleetop-agent --bench-token-file`).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// The longest the suite may run on any node.
    #[arg(long, default_value = "30m", value_parser = parse_interval)]
    pub timeout: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct NodeCmd {
    #[arg(value_enum)]
    pub action: NodeVerb,
    /// Nodes, as a Slurm hostlist ("gpu[01-04],gpu09").
    pub nodes: String,
    /// Why (required to drain; shown to everyone in sinfo, after "fleetop: ").
    #[arg(long)]
    pub reason: Option<String>,
    /// Override the refusals of a resume or return: a node someone else
    /// drained (a reason without the "fleetop:" prefix), or one with an
    /// active fault that keeps it out of service. Each refusal it lifts is
    /// named before the confirmation and in the audit log. It does not run
    /// a burn-in beside running jobs: that is --beside-jobs.
    #[arg(long)]
    pub force: bool,
    /// Return: run the burn-in while Slurm still lists jobs on the node, or
    /// pods that hold a GPU run there (it takes their GPUs). Named before
    /// the confirmation and in the audit log.
    #[arg(long)]
    pub beside_jobs: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    #[arg(long, value_enum, default_value_t = ActionFormat::Text)]
    pub format: ActionFormat,
    /// return: the burn-in suite a node must pass (quick or full).
    #[arg(long, default_value = "quick", value_parser = parse_suite)]
    pub suite: Suite,
    /// return: the agents' bench token (else `bench_token_file` in the config).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// return: the longest the burn-in may run on any node.
    #[arg(long, default_value = "30m", value_parser = parse_interval)]
    pub timeout: Duration,
    /// drain --ray: tell Ray the node will go this long from now (none by default).
    #[arg(long, value_parser = parse_interval)]
    pub deadline: Option<Duration>,
    /// drain --ray: only where nothing runs (Ray refuses the drain otherwise).
    #[arg(long)]
    pub if_idle: bool,
    /// history: how far back (7d, 12h, 30m).
    #[arg(long, default_value = "7d", value_parser = parse_interval)]
    pub since: Duration,
    /// return: how many GPUs each node's burn-in must measure (else the
    /// agent's count, `[thresholds] expect_gpus`, or the most it listed).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub expect_gpus: Option<u32>,
    /// With --kubernetes, drain: evict only the pods that hold GPUs
    /// (nvidia.com/gpu or nvidia.com/mig-*); the others stay.
    #[arg(long, requires = "kubernetes")]
    pub gpu_pods_only: bool,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub ray: RayArgs,
    #[command(flatten)]
    pub agents: AgentArgs,
}

/// What `fleetop node` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NodeVerb {
    /// Stop scheduling new jobs on the nodes (running jobs finish).
    Drain,
    /// Return the nodes to service (clears DRAIN and DOWN); only nodes
    /// fleetop drained, unless --force.
    Resume,
    /// Clear DRAIN only; a node that is DOWN stays DOWN.
    Undrain,
    /// Return to service: resume each drained node that passed a burn-in
    /// since its drain began (running one where none has) and has no
    /// active fault that keeps it out; the rest stay drained, their Slurm
    /// reason untouched. With --kubernetes: the same, then uncordon and
    /// remove fleetop's taint, condition and annotations, with an Event.
    /// With --ray: the burn-in only (Ray has no undrain; it says to start
    /// the raylet again).
    Return,
    /// The node's timeline: flags, drains, resumes, burn-ins, who and when.
    History,
    /// Kubernetes only (--kubernetes): mark the nodes unschedulable, evicting nothing.
    Cordon,
}

impl NodeVerb {
    /// The Slurm action of a verb that is one.
    pub fn action(self) -> Option<NodeAction> {
        match self {
            NodeVerb::Drain => Some(NodeAction::Drain),
            NodeVerb::Resume => Some(NodeAction::Resume),
            NodeVerb::Undrain => Some(NodeAction::Undrain),
            NodeVerb::Return => Some(NodeAction::Return),
            NodeVerb::History => None,
            NodeVerb::Cordon => Some(NodeAction::Cordon),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct JobCmd {
    #[arg(value_enum)]
    pub action: JobAction,
    /// The Slurm job id.
    pub job: u64,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    #[arg(long, value_enum, default_value_t = ActionFormat::Text)]
    pub format: ActionFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JobAction {
    /// scancel: the job ends on every node it runs on.
    Cancel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ActionFormat {
    /// One line per node.
    Text,
    /// The whole report, as JSON.
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// One snapshot, then exit.
    #[arg(long, conflicts_with = "count")]
    pub once: bool,
    /// This many snapshots, then exit (default: until interrupted).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Time between snapshots.
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// full: every reading (the schema's Snapshot); summary: per node and
    /// GPU the headline figures and the flags, about a tenth of the size.
    #[arg(long, value_enum, default_value_t = View::Full)]
    pub view: View,
    /// How long to wait for nodes to answer before the first snapshot.
    #[arg(long, default_value = "10s", value_parser = parse_interval)]
    pub timeout: Duration,
    /// Print the JSON Schema of a snapshot and exit.
    #[arg(long)]
    pub print_schema: bool,
    /// Not live: the fleet as a recording saw it (one snapshot, at --at).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["hosts", "hostfile", "demo", "slurm", "count"])]
    pub replay: Option<PathBuf>,
    /// With --replay: when, as RFC 3339 (2026-11-22T03:12:00Z) or an offset
    /// from the recording's start (+5m, +90s); default its end.
    #[arg(long, value_name = "TIME", requires = "replay")]
    pub at: Option<String>,
}

/// A size in bytes: `100MB`, `1GiB`, `512k`, `4096` (k/M/G are powers of 1000, Ki/Mi/Gi of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size like 100MB or 1GiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().trim_end_matches('b') {
        "" => 1,
        "k" => 1000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        _ => return Err(format!("'{s}': unknown unit (k, M, G, Ki, Mi, Gi)")),
    };
    match n.checked_mul(mult) {
        Some(0) | None => Err(format!("'{s}' is not a size above 0")),
        Some(v) => Ok(v),
    }
}

fn parse_suite(s: &str) -> Result<Suite, String> {
    Suite::parse(s).ok_or_else(|| format!("'{s}' is not a suite: quick or full"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One pretty document per snapshot.
    Json,
    /// One compact document per line.
    Ndjson,
}

/// Which export document: both are in docs/export.schema.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum View {
    /// Every reading: the Snapshot document.
    Full,
    /// Headline figures and flags per node and GPU: the Summary document.
    Summary,
}
