//! The command line (the contract scripts and tests rely on; see DESIGN.md).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use fleetop_proto::util::parse_interval;

use crate::model::action::NodeAction;
use crate::model::bench::Suite;

/// fleetop: a terminal console for GPU clusters.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Config file (default: $XDG_CONFIG_HOME/fleetop/config.toml).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Colour theme: default, light, high-contrast, colorblind, mono, a user
    /// theme in $XDG_CONFIG_HOME/fleetop/themes, or a path. NO_COLOR forces mono.
    #[arg(long, global = true)]
    pub theme: Option<String>,
    /// Refuse every action that changes the cluster (also `read_only = true` in the config).
    #[arg(long, global = true)]
    pub read_only: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
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
    /// Read the whole fleet from this Prometheus (or Prometheus-compatible) HTTP API,
    /// e.g. http://prometheus:9090: the series of dcgm-exporters (or fleetop agents) it scrapes.
    #[arg(long, value_name = "URL", conflicts_with_all = ["hosts", "hostfile", "demo", "slurm"])]
    pub prometheus: Option<String>,
    /// With --prometheus: label matchers added to every query, to pick jobs or
    /// instances ('job="dcgm"' or '{job="dcgm",instance=~"gpu0.*"}').
    #[arg(long, value_name = "SELECTOR", requires = "prometheus")]
    pub prometheus_match: Option<String>,
    /// How often --dcgm-exporter endpoints or --prometheus are read.
    #[arg(long, default_value = "5s", value_parser = parse_interval)]
    pub refresh: Duration,
    /// The longest one read of a --dcgm-exporter endpoint or a --prometheus query may take.
    #[arg(long, default_value = "5s", value_parser = parse_interval)]
    pub scrape_timeout: Duration,
    /// Agent port where a host gives none.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Demo: number of nodes.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nodes: u32,
    /// Demo: GPUs per node.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub gpus: u32,
    /// Demo: seed; the same seed gives the same cluster.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
    },
    /// Print snapshots of the fleet as JSON on stdout (logs go to stderr).
    Export(ExportArgs),
    /// Drain, resume or undrain nodes in Slurm (asks first on a terminal).
    Node(NodeCmd),
    /// Run a burn-in suite on the agents of SOURCE (asks first on a terminal).
    Bench(BenchArgs),
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
    pub action: NodeAction,
    /// Nodes, as a Slurm hostlist ("gpu[01-04],gpu09").
    pub nodes: String,
    /// Why (required to drain; shown to everyone in sinfo).
    #[arg(long)]
    pub reason: Option<String>,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    #[arg(long, value_enum, default_value_t = ActionFormat::Text)]
    pub format: ActionFormat,
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
    /// How long to wait for nodes to answer before the first snapshot.
    #[arg(long, default_value = "10s", value_parser = parse_interval)]
    pub timeout: Duration,
    /// Print the JSON Schema of a snapshot and exit.
    #[arg(long)]
    pub print_schema: bool,
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
