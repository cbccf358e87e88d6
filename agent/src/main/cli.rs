//! The agent's command line: its flags, subcommands and their parsers;
//! every duration through one bounded parser.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fleetop_agent::backend::{Backend, BackendOptions, StateDir};
use fleetop_agent::config;
use fleetop_agent::serve::server;
use fleetop_agent::sim::{Model, Scenario, SimConfig};

/// fleetop's node agent: samples GPUs (NVML), InfiniBand ports and the host,
/// and streams them to fleetop consoles over gRPC.
#[derive(Debug, Parser)]
#[command(version = fleetop_agent::VERSION_LONG, after_help = scenario_help(), args_override_self = true)]
pub(crate) struct Cli {
    /// Settings as TOML, one key per flag named as the flag (`--state-dir`
    /// is `state_dir`), then its drop-ins (agent.d/*.toml beside
    /// agent.toml, in order; a later file wins); a flag given here wins.
    /// Default: /etc/fleetop/agent.toml where it exists (one that cannot
    /// be read stops the start); "none" reads no file.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Log lines as text or as JSON objects (one a line, for log shippers).
    /// Colour only when stderr is a terminal.
    #[arg(long, value_enum, global = true, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// Address to serve gRPC on.
    #[arg(long, default_value = "0.0.0.0:50051")]
    pub(crate) listen: SocketAddr,
    #[command(flatten)]
    pub(crate) node: NodeArgs,
    /// Serve Prometheus metrics (dcgm-exporter's names) at http://ADDR/metrics;
    /// off unless given. Plain HTTP; it asks for the --token-file token too.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// Open connections to --metrics-listen at most; past it, a new one
    /// takes the place of the oldest still sending its request head, or is
    /// closed at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) metrics_max_connections: u32,
    /// How much history to keep for consoles that connect later (1s to 24h).
    #[arg(long, default_value = "10m", value_parser = history)]
    pub(crate) history: Duration,
    /// The most memory the history may take, in MiB (whatever --history
    /// and --interval say).
    #[arg(long, default_value_t = (server::DEFAULT_MAX_RING_BYTES >> 20) as u32,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) history_max_mib: u32,
    /// Simulation only: invent this much history at start (1s to 24h).
    #[arg(long, value_parser = history)]
    pub(crate) sim_history: Option<Duration>,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Mutual TLS: only consoles with a certificate signed by this CA (PEM) may connect.
    #[arg(long, requires = "tls_cert")]
    pub(crate) tls_client_ca: Option<PathBuf>,
    /// Subscribers must present the token in this file (mode 0600).
    #[arg(long)]
    pub(crate) token_file: Option<PathBuf>,
    /// Accept --bench-token-file on a plaintext listener (the token then crosses the network in clear).
    #[arg(long)]
    pub(crate) insecure: bool,
    /// The most consoles that may subscribe at once; more are refused.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) max_subscribers: u32,
    /// HTTP/2 streams one connection may open at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) max_streams_per_connection: u32,
    /// Open connections at most; past it a new one takes the place of the
    /// oldest that has not authenticated, or is closed at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) max_connections: u32,
    /// Open connections from one IP address at most; past it a new one
    /// takes the place of that address's oldest not authenticated, or is
    /// closed at once.
    #[arg(long, default_value_t = server::DEFAULT_MAX_CONNECTIONS_PER_PEER as u32,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) max_connections_per_peer: u32,
    /// Close a connection that has not sent its handshake within this, and
    /// a /metrics request whose head (request line and headers) has not
    /// arrived whole within this, however it trickles (100ms to 10m).
    #[arg(long, default_value = "10s", value_parser = handshake_timeout)]
    pub(crate) handshake_timeout: Duration,
    /// Close a connection from which nothing arrived, or that had no stream
    /// open, for this long; the agent pings at a third of it, so live
    /// consoles always answer (3s to 1h).
    #[arg(long, default_value = "60s", value_parser = idle_timeout)]
    pub(crate) idle_timeout: Duration,
    /// The kubelet's PodResources socket, asked every 10 s which pods hold
    /// which GPUs (sent to consoles, and /metrics' pod, namespace and
    /// container labels); "none" never asks. Without the socket (not a
    /// Kubernetes node) the agent runs on without pods.
    #[arg(long, value_name = "PATH", default_value = fleetop_agent::sources::pods::DEFAULT_SOCKET, value_parser = path_or_none)]
    pub(crate) kubelet_socket: PathOrNone,
    /// How often the kubelet is asked (tests).
    #[arg(long, default_value = "10s", value_parser = kubelet_poll, hide = true)]
    pub(crate) kubelet_poll: Duration,
    /// Simulation only: run the agent's clock this far ahead ("90s") or
    /// behind ("-90s") of this machine's, to test how consoles handle skew.
    #[arg(long, value_parser = parse_offset, allow_hyphen_values = true)]
    pub(crate) sim_clock_offset: Option<i64>,
    /// Run burn-in benchmarks for consoles that present the token in this file
    /// (without it, benchmarks are refused).
    #[arg(long, global = true)]
    pub(crate) bench_token_file: Option<PathBuf>,
    /// Expected minimums that replace the shipped ones, key by key (TOML).
    #[arg(long, global = true)]
    pub(crate) bench_expectations: Option<PathBuf>,
    /// The longest a suite may run, whatever a console asks (1s to 24h).
    #[arg(long, global = true, default_value = "30m", value_parser = history)]
    pub(crate) bench_max_duration: Duration,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct NodeArgs {
    /// Where GPU data comes from.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub(crate) backend: Backend,
    /// The NVML library to load (default: the system's libnvidia-ml.so.1).
    #[arg(long, value_name = "PATH")]
    pub(crate) nvml_lib: Option<PathBuf>,
    /// Sampling interval (10ms to 1h).
    #[arg(long, default_value = "1s", value_parser = interval)]
    pub(crate) interval: Duration,
    /// Root of the InfiniBand sysfs tree.
    #[arg(long, default_value = fleetop_agent::sources::ib::DEFAULT_ROOT)]
    pub(crate) ib_sysfs: PathBuf,
    /// Send per-link NVLink counters in every N-th sample (link state is in every one).
    #[arg(long, default_value_t = fleetop_agent::collector::NVLINK_COUNTERS_EVERY, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) nvlink_counters_every: u32,
    /// Root of procfs, where GPU processes' Slurm jobs are looked up.
    #[arg(long, default_value = "/proc", hide = true)]
    pub(crate) proc_root: PathBuf,
    /// The kernel log, for XIDs NVML misses and NVSwitch SXids: /dev/kmsg
    /// (the default with --backend nvml, amd or auto), a file in its record
    /// format (read whole, then followed), or "none".
    #[arg(long, value_name = "PATH", value_parser = path_or_none)]
    pub(crate) kmsg: Option<PathOrNone>,
    /// Where the agent keeps its fault journal (created 0700 if missing;
    /// default /var/lib/fleetop-agent when serving a real node; `sample`
    /// and the simulation keep one only with this flag), or "none" for no
    /// journal.
    #[arg(long, value_name = "DIR", value_parser = path_or_none)]
    pub(crate) state_dir: Option<PathOrNone>,
    /// How many GPUs this node should have (1 to 64), for consoles to check.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) expect_gpus: Option<u32>,
    /// Root of sysfs, where the PCI bus and kernel modules are looked at.
    #[arg(long, value_name = "DIR", default_value = fleetop_agent::sources::pci::DEFAULT_SYSFS, hide = true)]
    pub(crate) sysfs_root: PathBuf,
    /// Simulation: number of GPUs (1 to 64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) sim_gpus: u32,
    /// Simulation: number of InfiniBand ports (0 to 64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub(crate) sim_ib_ports: u32,
    /// Simulation: GPU model.
    #[arg(long, value_enum, default_value_t = Model::H100)]
    pub(crate) sim_model: Model,
    /// Simulation: what happens on the node (listed below).
    #[arg(long, value_enum, default_value_t = Scenario::Training)]
    pub(crate) sim_scenario: Scenario,
    /// Simulation: seed; the same seed gives the same node.
    #[arg(long, default_value_t = 1)]
    pub(crate) sim_seed: u64,
    /// Simulation: host name to report (default: this machine's).
    #[arg(long)]
    pub(crate) sim_hostname: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Reads the config file, its drop-ins and the flags as a start would
    /// (TLS and token files, the state directory and the libraries
    /// included), without serving: for config management to run before a
    /// restart. Prints each setting and the file it came from, and exits 0
    /// with "ok" when the agent would start.
    Check {
        /// Check for this user (name or uid): who may own what the agent
        /// trusts, and whether it can read its files. Default, run as root:
        /// the unit's user, fleetop-agent, where it exists.
        #[arg(long, value_name = "USER")]
        as_user: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print the shell completions for SHELL (bash, zsh, fish, ...).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (fleetop-agent.1 and one per subcommand) into DIR.
    Man {
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// The config file (--config).
    Config {
        #[command(subcommand)]
        what: ConfigCommand,
    },
    /// Run many simulated agents in this one process, for load tests: writes
    /// their addresses to a hostfile and, on exit, what they sent to stderr.
    #[command(hide = true)]
    Swarm {
        /// Agents in the swarm: up to 16,384 (each listens on a loopback
        /// port of its own; a console's connections take as many again from
        /// the same ephemeral range).
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=16384))]
        count: u32,
        /// The number in the first agent's host name (sim0001, ...): several
        /// swarms, each under the per-process limit of open files, make one
        /// fleet with names of their own.
        #[arg(long, default_value_t = 1)]
        first: u32,
        /// Where to write the agents' addresses, one per line.
        #[arg(long)]
        hostfile: PathBuf,
        /// Each agent also serves /metrics on a loopback port of its own;
        /// their addresses go to this file, one per line (for Prometheus).
        #[arg(long)]
        metrics_hostfile: Option<PathBuf>,
        #[command(flatten)]
        node: NodeArgs,
    },
    /// Take one sample of this node and print it, without a server.
    Sample {
        /// Take exactly one sample (the only mode).
        #[arg(long, required = true)]
        once: bool,
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        #[command(flatten)]
        node: NodeArgs,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Json,
}

pub(crate) fn scenario_help() -> String {
    use clap::ValueEnum;
    let mut s = String::from("Simulation scenarios (--sim-scenario):\n");
    for sc in Scenario::all() {
        if let Some(v) = sc.to_possible_value() {
            let help = v.get_help().map(|h| h.to_string()).unwrap_or_default();
            s.push_str(&format!("  {:<18} {help}\n", v.get_name()));
        }
    }
    s
}

/// `--kmsg`, `--state-dir`: a path, or none at all.
#[derive(Debug, Clone)]
pub(crate) enum PathOrNone {
    None,
    Path(PathBuf),
}

pub(crate) fn path_or_none(s: &str) -> Result<PathOrNone, String> {
    match s {
        "" => Err("empty: give a path, or \"none\"".into()),
        "none" => Ok(PathOrNone::None),
        p => Ok(PathOrNone::Path(p.into())),
    }
}

/// What the agent is started to do: some defaults differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Serving consoles: the default state directory keeps the journal.
    Serve,
    /// One sample printed: writes no state unless told where.
    Once,
}

impl NodeArgs {
    /// The libraries this node would load run as the agent: each must be
    /// root's or `uid`'s and written by no one else (config::trusted):
    /// --nvml-lib, and AMD SMI under $ROCM_PATH/lib or /opt/rocm/lib where
    /// there is one. The loader's own path is the system's.
    pub(crate) fn libraries_trusted(&self, uid: u32) -> anyhow::Result<()> {
        if let Some(lib) = &self.nvml_lib {
            config::trusted(lib, uid)
                .map_err(|e| anyhow::anyhow!("--nvml-lib {}: {e}; refusing to load it", lib.display()))?;
        }
        if matches!(self.backend, Backend::Amd | Backend::Auto) {
            let mut roots = Vec::new();
            if let Some(r) = std::env::var_os("ROCM_PATH").filter(|r| !r.is_empty()) {
                roots.push(("ROCM_PATH", PathBuf::from(r).join("lib")));
            }
            roots.push(("ROCm's default", PathBuf::from("/opt/rocm/lib")));
            for (what, dir) in roots {
                let lib = dir.join("libamd_smi.so");
                if std::fs::symlink_metadata(&lib).is_ok() {
                    config::trusted(&lib, uid)
                        .map_err(|e| anyhow::anyhow!("AMD SMI {} ({what}): {e}; refusing to load it", lib.display()))?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn options(&self, start_ms: i64, mode: Mode) -> BackendOptions {
        let simulated = self.backend == Backend::Sim;
        let kmsg = match &self.kmsg {
            Some(PathOrNone::None) => None,
            Some(PathOrNone::Path(p)) => Some(p.clone()),
            // A simulated node's kernel log is not this machine's.
            None if simulated => None,
            None => Some(PathBuf::from(fleetop_agent::sources::kmsg::DEFAULT_PATH)),
        };
        let state_dir = match &self.state_dir {
            Some(PathOrNone::None) => None,
            Some(PathOrNone::Path(p)) => Some(StateDir {
                path: p.clone(),
                given: true,
            }),
            None if simulated || mode == Mode::Once => None,
            None => Some(StateDir {
                path: fleetop_agent::keep::journal::DEFAULT_STATE_DIR.into(),
                given: false,
            }),
        };
        BackendOptions {
            kmsg,
            state_dir,
            sysfs_root: self.sysfs_root.clone(),
            expect_gpus: self.expect_gpus.unwrap_or(0),
            backend: self.backend,
            ib_sysfs: self.ib_sysfs.clone(),
            proc_root: self.proc_root.clone(),
            nvml_lib: self.nvml_lib.clone(),
            nvlink_counters_every: self.nvlink_counters_every,
            interval: self.interval,
            sim: SimConfig {
                hostname: self
                    .sim_hostname
                    .clone()
                    .unwrap_or_else(|| sysinfo::System::host_name().unwrap_or_else(|| "sim".into())),
                gpus: self.sim_gpus,
                ib_ports: self.sim_ib_ports,
                model: self.sim_model,
                scenario: self.sim_scenario,
                seed: self.sim_seed,
                start_ms,
                problem_ms: None,
                interval_ms: self.interval.as_millis().max(1) as u32,
            },
        }
    }
}

pub(crate) const HOUR: Duration = Duration::from_secs(3600);

/// Every duration flag goes through the one bounded parser, so none can
/// overflow later arithmetic or size a buffer without bound.
pub(crate) fn bounded(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    fleetop_proto::util::parse_bounded_duration(s, min, max)
}

pub(crate) fn interval(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(10), HOUR)
}

pub(crate) fn history(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_secs(1), 24 * HOUR)
}

pub(crate) fn kubelet_poll(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(100), HOUR)
}

pub(crate) fn handshake_timeout(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(100), Duration::from_secs(600))
}

pub(crate) fn idle_timeout(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_secs(3), HOUR)
}

/// "90s" or "-90s" as signed milliseconds, within a day either way.
pub(crate) fn parse_offset(s: &str) -> Result<i64, String> {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s),
    };
    let d = bounded(rest, Duration::ZERO, 24 * HOUR)?;
    Ok(sign * d.as_millis() as i64)
}

impl Cli {
    pub(crate) fn limits(&self) -> server::Limits {
        server::Limits {
            max_subscribers: self.max_subscribers as usize,
            max_streams_per_connection: self.max_streams_per_connection,
            max_connections: self.max_connections as usize,
            max_connections_per_peer: self.max_connections_per_peer as usize,
            handshake_timeout: self.handshake_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}
