//! `fleetop-agent`: the per-node sampler and gRPC server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fleetop_agent::backend::{self, Backend, BackendOptions, StateDir};
use fleetop_agent::config::{self, Loaded, RunAs};
use fleetop_agent::serve::server::{self, AgentOptions};
use fleetop_agent::sim::{Model, Scenario, SimConfig};

/// fleetop's node agent: samples GPUs (NVML), InfiniBand ports and the host,
/// and streams them to fleetop consoles over gRPC.
#[derive(Debug, Parser)]
#[command(version = fleetop_agent::VERSION_LONG, after_help = scenario_help(), args_override_self = true)]
struct Cli {
    /// Settings as TOML, one key per flag named as the flag (`--state-dir`
    /// is `state_dir`), then its drop-ins (agent.d/*.toml beside
    /// agent.toml, in order; a later file wins); a flag given here wins.
    /// Default: /etc/fleetop/agent.toml where it exists (one that cannot
    /// be read stops the start); "none" reads no file.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log lines as text or as JSON objects (one a line, for log shippers).
    /// Colour only when stderr is a terminal.
    #[arg(long, value_enum, global = true, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Address to serve gRPC on.
    #[arg(long, default_value = "0.0.0.0:50051")]
    listen: SocketAddr,
    #[command(flatten)]
    node: NodeArgs,
    /// Serve Prometheus metrics (dcgm-exporter's names) at http://ADDR/metrics;
    /// off unless given. Plain HTTP; it asks for the --token-file token too.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Open connections to --metrics-listen at most; past it, a new one
    /// takes the place of the oldest still sending its request head, or is
    /// closed at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    metrics_max_connections: u32,
    /// How much history to keep for consoles that connect later (1s to 24h).
    #[arg(long, default_value = "10m", value_parser = history)]
    history: Duration,
    /// The most memory the history may take, in MiB (whatever --history
    /// and --interval say).
    #[arg(long, default_value_t = (server::DEFAULT_MAX_RING_BYTES >> 20) as u32,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    history_max_mib: u32,
    /// Simulation only: invent this much history at start (1s to 24h).
    #[arg(long, value_parser = history)]
    sim_history: Option<Duration>,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: only consoles with a certificate signed by this CA (PEM) may connect.
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Subscribers must present the token in this file (mode 0600).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Accept --bench-token-file on a plaintext listener (the token then crosses the network in clear).
    #[arg(long)]
    insecure: bool,
    /// The most consoles that may subscribe at once; more are refused.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_subscribers: u32,
    /// HTTP/2 streams one connection may open at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_streams_per_connection: u32,
    /// Open connections at most; past it a new one takes the place of the
    /// oldest that has not authenticated, or is closed at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_connections: u32,
    /// Open connections from one IP address at most; past it a new one
    /// takes the place of that address's oldest not authenticated, or is
    /// closed at once.
    #[arg(long, default_value_t = server::DEFAULT_MAX_CONNECTIONS_PER_PEER as u32,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_connections_per_peer: u32,
    /// Close a connection that has not sent its handshake within this, and
    /// a /metrics request whose head (request line and headers) has not
    /// arrived whole within this, however it trickles (100ms to 10m).
    #[arg(long, default_value = "10s", value_parser = handshake_timeout)]
    handshake_timeout: Duration,
    /// Close a connection from which nothing arrived, or that had no stream
    /// open, for this long; the agent pings at a third of it, so live
    /// consoles always answer (3s to 1h).
    #[arg(long, default_value = "60s", value_parser = idle_timeout)]
    idle_timeout: Duration,
    /// The kubelet's PodResources socket, asked every 10 s which pods hold
    /// which GPUs (sent to consoles, and /metrics' pod, namespace and
    /// container labels); "none" never asks. Without the socket (not a
    /// Kubernetes node) the agent runs on without pods.
    #[arg(long, value_name = "PATH", default_value = fleetop_agent::sources::pods::DEFAULT_SOCKET, value_parser = path_or_none)]
    kubelet_socket: PathOrNone,
    /// How often the kubelet is asked (tests).
    #[arg(long, default_value = "10s", value_parser = kubelet_poll, hide = true)]
    kubelet_poll: Duration,
    /// Simulation only: run the agent's clock this far ahead ("90s") or
    /// behind ("-90s") of this machine's, to test how consoles handle skew.
    #[arg(long, value_parser = parse_offset, allow_hyphen_values = true)]
    sim_clock_offset: Option<i64>,
    /// Run burn-in benchmarks for consoles that present the token in this file
    /// (without it, benchmarks are refused).
    #[arg(long, global = true)]
    bench_token_file: Option<PathBuf>,
    /// Expected minimums that replace the shipped ones, key by key (TOML).
    #[arg(long, global = true)]
    bench_expectations: Option<PathBuf>,
    /// The longest a suite may run, whatever a console asks (1s to 24h).
    #[arg(long, global = true, default_value = "30m", value_parser = history)]
    bench_max_duration: Duration,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Args)]
struct NodeArgs {
    /// Where GPU data comes from.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// The NVML library to load (default: the system's libnvidia-ml.so.1).
    #[arg(long, value_name = "PATH")]
    nvml_lib: Option<PathBuf>,
    /// Sampling interval (10ms to 1h).
    #[arg(long, default_value = "1s", value_parser = interval)]
    interval: Duration,
    /// Root of the InfiniBand sysfs tree.
    #[arg(long, default_value = fleetop_agent::sources::ib::DEFAULT_ROOT)]
    ib_sysfs: PathBuf,
    /// Send per-link NVLink counters in every N-th sample (link state is in every one).
    #[arg(long, default_value_t = fleetop_agent::collector::NVLINK_COUNTERS_EVERY, value_parser = clap::value_parser!(u32).range(1..))]
    nvlink_counters_every: u32,
    /// Root of procfs, where GPU processes' Slurm jobs are looked up.
    #[arg(long, default_value = "/proc", hide = true)]
    proc_root: PathBuf,
    /// The kernel log, for XIDs NVML misses and NVSwitch SXids: /dev/kmsg
    /// (the default with --backend nvml, amd or auto), a file in its record
    /// format (read whole, then followed), or "none".
    #[arg(long, value_name = "PATH", value_parser = path_or_none)]
    kmsg: Option<PathOrNone>,
    /// Where the agent keeps its fault journal (created 0700 if missing;
    /// default /var/lib/fleetop-agent when serving a real node; `sample`
    /// and the simulation keep one only with this flag), or "none" for no
    /// journal.
    #[arg(long, value_name = "DIR", value_parser = path_or_none)]
    state_dir: Option<PathOrNone>,
    /// How many GPUs this node should have (1 to 64), for consoles to check.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    expect_gpus: Option<u32>,
    /// Root of sysfs, where the PCI bus and kernel modules are looked at.
    #[arg(long, value_name = "DIR", default_value = fleetop_agent::sources::pci::DEFAULT_SYSFS, hide = true)]
    sysfs_root: PathBuf,
    /// Simulation: number of GPUs (1 to 64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    sim_gpus: u32,
    /// Simulation: number of InfiniBand ports (0 to 64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=64))]
    sim_ib_ports: u32,
    /// Simulation: GPU model.
    #[arg(long, value_enum, default_value_t = Model::H100)]
    sim_model: Model,
    /// Simulation: what happens on the node (listed below).
    #[arg(long, value_enum, default_value_t = Scenario::Training)]
    sim_scenario: Scenario,
    /// Simulation: seed; the same seed gives the same node.
    #[arg(long, default_value_t = 1)]
    sim_seed: u64,
    /// Simulation: host name to report (default: this machine's).
    #[arg(long)]
    sim_hostname: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
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
enum Command {
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
enum Format {
    Json,
}

fn scenario_help() -> String {
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
enum PathOrNone {
    None,
    Path(PathBuf),
}

fn path_or_none(s: &str) -> Result<PathOrNone, String> {
    match s {
        "" => Err("empty: give a path, or \"none\"".into()),
        "none" => Ok(PathOrNone::None),
        p => Ok(PathOrNone::Path(p.into())),
    }
}

/// What the agent is started to do: some defaults differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
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
    fn libraries_trusted(&self, uid: u32) -> anyhow::Result<()> {
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

    fn options(&self, start_ms: i64, mode: Mode) -> BackendOptions {
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

// The same allocator as the console (many small samples across threads).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let (cli, config, run_as) = match parse_with_config(std::env::args_os().collect()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fleetop-agent: {}", fleetop_proto::input::printable(&e, 2000));
            return ExitCode::from(2);
        }
    };
    // Logs go to stderr; stdout is kept for `sample --format json`. Colour
    // only on a terminal: a file or the journal gets plain text.
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLEETOP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
    if let Some(loaded) = &config {
        let files: Vec<String> = loaded.files.iter().map(|f| f.display().to_string()).collect();
        tracing::info!("config {}", files.join(", "));
    }
    match run(cli, config.as_ref(), &run_as) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let line = fleetop_proto::input::error_line(e.as_ref());
            eprintln!("fleetop-agent: {}", fleetop_proto::input::printable(&line, 2000));
            ExitCode::FAILURE
        }
    }
}

/// The command line, with the config files' settings before its own flags
/// (so a flag given wins), the files read, if any, and who the checks are
/// for (this process; for `config check`, the unit's user where it can).
/// `sample` and `swarm` take flags only. A bad command line prints clap's
/// message and exits; a bad file is one line naming it.
fn parse_with_config(argv: Vec<std::ffi::OsString>) -> Result<(Cli, Option<Loaded>, RunAs), String> {
    use clap::CommandFactory;
    let first = Cli::try_parse_from(&argv).unwrap_or_else(|e| e.exit());
    let run_as = match &first.command {
        Some(Command::Config {
            what: ConfigCommand::Check { as_user },
        }) => RunAs::for_check(as_user.as_deref())?,
        _ => RunAs::current(),
    };
    if matches!(
        first.command,
        Some(Command::Sample { .. } | Command::Swarm { .. } | Command::Completions { .. } | Command::Man { .. })
    ) {
        return Ok((first, None, run_as));
    }
    let source = match &first.config {
        Some(p) if p.as_os_str() == "none" => config::Source::None,
        Some(p) => config::Source::Given(p.clone()),
        None => config::Source::Default(config::DEFAULT_PATH.into()),
    };
    let given = matches!(source, config::Source::Given(_));
    let loaded = config::load(&Cli::command(), &source, run_as.uid).map_err(|e| {
        if given {
            format!("--config {e}")
        } else {
            format!("config {e}")
        }
    })?;
    let Some(loaded) = loaded else {
        return Ok((first, None, run_as));
    };
    let mut full = vec![argv.first().cloned().unwrap_or_else(|| "fleetop-agent".into())];
    full.extend(loaded.args().into_iter().map(Into::into));
    full.extend(argv.into_iter().skip(1));
    Ok((
        Cli::try_parse_from(full).unwrap_or_else(|e| e.exit()),
        Some(loaded),
        run_as,
    ))
}

/// `config check`: the checks a start makes ([`preflight`]), without
/// serving; then each setting, the file it came from, and "ok".
fn config_check(cli: &Cli, config: Option<&Loaded>, run_as: &RunAs) -> anyhow::Result<()> {
    preflight(cli, config, run_as, Stage::Check)?;
    let Some(loaded) = config else {
        println!("no config file; the flags: ok");
        return Ok(());
    };
    // Which flags the command line gave: they win over every file.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let given = {
        use clap::CommandFactory;
        Cli::command().ignore_errors(true).get_matches_from(argv)
    };
    for (s, overrode) in loaded.winners() {
        let at = |s: &config::Setting| {
            let line = s.line.map(|l| format!(":{l}")).unwrap_or_default();
            format!("{}{line}", s.path.display())
        };
        let mut line = format!("{} = {}  # {}", s.key, s.value, at(s));
        if !overrode.is_empty() {
            let o: Vec<String> = overrode.iter().map(|o| at(o)).collect();
            line.push_str(&format!(", over {}", o.join(", ")));
        }
        if given.value_source(&s.id) == Some(clap::parser::ValueSource::CommandLine) {
            line.push_str("; the command line's flag wins");
        }
        println!("{}", fleetop_proto::input::printable(&line, 2000));
    }
    for f in &loaded.files {
        println!("{}: ok", f.display());
    }
    Ok(())
}

/// Who runs [`preflight`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    Check,
}

/// What a start checks before it serves, and `config check` with it (one
/// code, so the check cannot say ok where the start fails): the TLS and
/// token files, the benchmarks' settings, the libraries the agent would
/// load, the state directory, and that `run_as` may read every file named.
fn preflight(
    cli: &Cli,
    config: Option<&Loaded>,
    run_as: &RunAs,
    stage: Stage,
) -> anyhow::Result<(Security, Option<server::BenchSettings>)> {
    let sec = security(cli)?;
    let bench = bench_settings(cli)?;
    cli.node.libraries_trusted(run_as.uid)?;
    if let Some(d) = cli.node.options(0, Mode::Serve).state_dir {
        match fleetop_agent::keep::journal::check_dir(&d.path, run_as.uid) {
            Ok(_) => {}
            // The default one is a warning, which the start gives itself
            // when it opens the journal.
            Err(e) if !d.given => {
                if stage == Stage::Check {
                    tracing::warn!("{e}; no fault journal (give --state-dir to keep one elsewhere)");
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    if *run_as != RunAs::current() {
        let files = config.map(|l| l.files.clone()).unwrap_or_default();
        let named = [
            ("--tls-cert", &cli.tls_cert),
            ("--tls-key", &cli.tls_key),
            ("--tls-client-ca", &cli.tls_client_ca),
            ("--token-file", &cli.token_file),
            ("--bench-token-file", &cli.bench_token_file),
            ("--bench-expectations", &cli.bench_expectations),
            ("--nvml-lib", &cli.node.nvml_lib),
        ];
        let each = files
            .iter()
            .map(|f| ("--config", f))
            .chain(named.iter().filter_map(|(flag, p)| p.as_ref().map(|p| (*flag, p))));
        for (flag, path) in each {
            run_as.can_read(path).map_err(|e| {
                anyhow::anyhow!("{flag} {}: {e}, and the agent runs as {}", path.display(), run_as.name)
            })?;
        }
    }
    Ok((sec, bench))
}

fn run(cli: Cli, config: Option<&Loaded>, run_as: &RunAs) -> anyhow::Result<()> {
    match &cli.command {
        Some(Command::Config {
            what: ConfigCommand::Check { .. },
        }) => return config_check(&cli, config, run_as),
        // Made from the command line's own definitions, so they cannot
        // drift from the flags (the packages write them at build time).
        Some(Command::Completions { shell }) => {
            use clap::CommandFactory;
            use std::io::Write;
            // Made whole first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "fleetop-agent", &mut script);
            std::io::stdout().write_all(&script)?;
            return Ok(());
        }
        Some(Command::Man { out }) => {
            use clap::CommandFactory;
            fleetop_agent::manual::man_pages(Cli::command(), out)?;
            return Ok(());
        }
        Some(Command::Sample { node, .. }) => return sample_once(node),
        Some(Command::Swarm {
            count,
            first,
            hostfile,
            metrics_hostfile,
            node,
        }) => {
            let sec = security(&cli)?;
            let files = SwarmFiles {
                grpc: hostfile,
                metrics: metrics_hostfile.as_deref(),
            };
            let numbers = *first..first.saturating_add(*count);
            return swarm(numbers, files, node, bench_settings(&cli)?, sec, &cli);
        }
        None => {}
    }
    let clock_offset_ms = match (cli.node.backend, cli.sim_clock_offset) {
        (_, None) => 0,
        (Backend::Sim, Some(ms)) => ms,
        (_, Some(_)) => anyhow::bail!("--sim-clock-offset needs --backend sim"),
    };
    let now = fleetop_agent::now_ms() + clock_offset_ms;
    let history_ms = cli.sim_history.map(|d| d.as_millis() as i64).unwrap_or(0);
    let start_ms = now - history_ms;
    let (sec, bench) = preflight(&cli, config, run_as, Stage::Start)?;
    // Bound first: a taken port fails the start at once, and consoles that
    // connect while the GPUs are opened wait in the backlog, not refused.
    let listener =
        std::net::TcpListener::bind(cli.listen).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cli.listen))?;
    listener.set_nonblocking(true)?;
    let (collector, note) = backend::build(&cli.node.options(start_ms, Mode::Serve))?;
    if let Some(note) = note {
        eprintln!("fleetop-agent: {note}");
    }
    let has_token = sec.telemetry_token.is_some();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let opts = AgentOptions {
            interval: cli.node.interval,
            history: cli.history,
            backfill_from_ms: (cli.node.backend == Backend::Sim && history_ms > 0).then_some(start_ms),
            bench,
            clock_offset_ms,
            tls: sec.tls,
            telemetry_token: sec.telemetry_token,
            insecure: cli.insecure,
            limits: cli.limits(),
            max_ring_bytes: (cli.history_max_mib as usize) << 20,
            pods: match &cli.kubelet_socket {
                PathOrNone::None => None,
                PathOrNone::Path(p) => Some(fleetop_agent::sources::pods::PodsOptions {
                    socket: p.clone(),
                    every: cli.kubelet_poll,
                }),
            },
        };
        // Bound before serving, so a taken port fails the start, not later.
        let metrics = match cli.metrics_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on --metrics-listen {addr}: {e}"))?,
            ),
            None => None,
        };
        let mut handle = server::serve(collector, opts, listener).await?;
        log_listening(format_args!("serving on {}", handle.addr));
        if let Some(l) = metrics {
            let limits = fleetop_agent::serve::metrics::http::Limits {
                max_connections: cli.metrics_max_connections as usize,
                idle_timeout: cli.idle_timeout,
                head_timeout: cli.handshake_timeout,
            };
            let addr = handle.serve_metrics(l, limits)?;
            if has_token && !addr.ip().is_loopback() {
                tracing::warn!("--metrics-listen {addr} is plain HTTP: scrapers send the telemetry token in clear");
            }
            log_listening(format_args!("metrics on http://{addr}/metrics"));
        }
        stop_signal().await?;
        tracing::info!("stopping");
        handle.stop().await;
        Ok(())
    })
}

/// Logs an address the agent listens on, as bound: `--listen 127.0.0.1:0`
/// shows the port the kernel gave. Its own target lets a caller see these
/// lines at any level (`FLEETOP_LOG=warn,fleetop_agent::listen=info`): the
/// tests start agents on port 0 and read the port here (docs/testing.md).
fn log_listening(line: std::fmt::Arguments<'_>) {
    tracing::info!(target: "fleetop_agent::listen", "{line}");
}

/// Benchmarks are on only with a token file; its content is the token.
fn bench_settings(cli: &Cli) -> anyhow::Result<Option<server::BenchSettings>> {
    let Some(path) = &cli.bench_token_file else {
        return Ok(None);
    };
    let token = fleetop_proto::util::read_token_file(path).map_err(|e| anyhow::anyhow!("--bench-token-file: {e}"))?;
    let expectations = fleetop_agent::bench::expect::Expectations::load(cli.bench_expectations.as_deref())
        .map_err(|e| anyhow::anyhow!("--bench-expectations: {e}"))?;
    Ok(Some(server::BenchSettings {
        token,
        expectations,
        max_duration: cli.bench_max_duration,
    }))
}

const HOUR: Duration = Duration::from_secs(3600);

/// Every duration flag goes through the one bounded parser, so none can
/// overflow later arithmetic or size a buffer without bound.
fn bounded(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    fleetop_proto::util::parse_bounded_duration(s, min, max)
}

fn interval(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(10), HOUR)
}

fn history(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_secs(1), 24 * HOUR)
}

fn kubelet_poll(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(100), HOUR)
}

fn handshake_timeout(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(100), Duration::from_secs(600))
}

fn idle_timeout(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_secs(3), HOUR)
}

/// "90s" or "-90s" as signed milliseconds, within a day either way.
fn parse_offset(s: &str) -> Result<i64, String> {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s),
    };
    let d = bounded(rest, Duration::ZERO, 24 * HOUR)?;
    Ok(sign * d.as_millis() as i64)
}

/// TLS and tokens from the command line, read and checked before serving.
struct Security {
    tls: Option<server::TlsSettings>,
    telemetry_token: Option<String>,
}

fn security(cli: &Cli) -> anyhow::Result<Security> {
    // Regular files only, and capped: `--tls-cert /dev/zero` or a FIFO is
    // refused at once, in one line that names the flag and the file.
    let read = |p: &PathBuf, what: &str| {
        fleetop_proto::input::read_capped(p, fleetop_proto::input::MAX_FILE_BYTES)
            .map(String::into_bytes)
            .map_err(|e| anyhow::anyhow!("{what} {}: {e}", p.display()))
    };
    let tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(c), Some(k)) => Some(server::TlsSettings {
            cert_pem: read(c, "--tls-cert")?,
            // Refused where group or others may read it, as a token is.
            key_pem: fleetop_agent::serve::tls::read_private_key(k)
                .map_err(|e| anyhow::anyhow!("--tls-key {}: {e}", k.display()))?,
            client_ca_pem: cli
                .tls_client_ca
                .as_ref()
                .map(|p| read(p, "--tls-client-ca"))
                .transpose()?,
        }),
        _ => None,
    };
    // Parsed now, as the listener will: a garbage or mismatched key or a
    // garbage CA fails the start and `config check` alike, in one line.
    if let Some(t) = &tls {
        fleetop_agent::serve::tls::server_config(t).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let telemetry_token = cli
        .token_file
        .as_deref()
        .map(fleetop_proto::util::read_token_file)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--token-file: {e}"))?;
    if tls.is_none() && cli.bench_token_file.is_some() && !cli.insecure {
        anyhow::bail!(
            "--bench-token-file on a plaintext listener: the bench token would cross the network in clear; \
             give --tls-cert and --tls-key, or --insecure to accept that"
        );
    }
    if tls.is_none() && telemetry_token.is_some() {
        tracing::warn!("--token-file without TLS: the telemetry token crosses the network in clear");
    }
    Ok(Security { tls, telemetry_token })
}

impl Cli {
    fn limits(&self) -> server::Limits {
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

/// Waits for Ctrl-C or SIGTERM.
async fn stop_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}

/// Where a swarm writes its agents' addresses.
struct SwarmFiles<'a> {
    grpc: &'a std::path::Path,
    metrics: Option<&'a std::path::Path>,
}

/// Each agent of a swarm holds a listener and its subscriber's connection
/// (and a /metrics listener and Prometheus' connection where asked): past
/// the limit of open files, agents would fail one by one, unseen, and a
/// console count them unreachable. Refused up front instead.
fn check_open_files(count: u32, metrics: bool) -> anyhow::Result<()> {
    let per_agent = if metrics { 4 } else { 2 };
    let need = u64::from(count) * per_agent + 64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    if lim.rlim_max >= need {
        let raised = libc::rlimit {
            rlim_cur: need,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    anyhow::bail!(
        "{count} agents need {need} open files and this process may have {}: run several swarms \
         (--count, --first) or raise the limit",
        lim.rlim_max
    )
}

fn swarm(
    numbers: std::ops::Range<u32>,
    files: SwarmFiles,
    node: &NodeArgs,
    bench: Option<server::BenchSettings>,
    sec: Security,
    cli: &Cli,
) -> anyhow::Result<()> {
    let count = numbers.len() as u32;
    check_open_files(count, files.metrics.is_some())?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let mut lines = String::new();
        let mut metrics_lines = String::new();
        let mut agents = Vec::new();
        for n in numbers {
            let mut opts = node.options(fleetop_agent::now_ms(), Mode::Serve);
            opts.backend = Backend::Sim;
            // Many simulated nodes in one process: no kernel log, no journal.
            opts.kmsg = None;
            opts.state_dir = None;
            opts.sim.hostname = format!("sim{n:04}");
            // As many seeds as names: sim0001 is the same node in any swarm.
            opts.sim.seed = node.sim_seed.wrapping_add(u64::from(n).wrapping_sub(1));
            let (collector, _) = backend::build(&opts)?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let opts = AgentOptions {
                interval: node.interval,
                bench: bench.clone(),
                tls: sec.tls.clone(),
                telemetry_token: sec.telemetry_token.clone(),
                insecure: cli.insecure,
                limits: cli.limits(),
                ..Default::default()
            };
            let mut h = server::serve(collector, opts, listener).await?;
            lines.push_str(&format!("{}\n", h.addr));
            if files.metrics.is_some() {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let limits = fleetop_agent::serve::metrics::http::Limits {
                    max_connections: cli.metrics_max_connections as usize,
                    idle_timeout: cli.idle_timeout,
                    head_timeout: cli.handshake_timeout,
                };
                metrics_lines.push_str(&format!("{}\n", h.serve_metrics(l, limits)?));
            }
            agents.push(h);
        }
        // The metrics file first: the gRPC hostfile's existence says both are whole.
        if let Some(path) = files.metrics {
            std::fs::write(path, metrics_lines)?;
        }
        std::fs::write(files.grpc, lines)?;
        // SIGUSR1 prints the running totals (for measurement windows); Ctrl-C
        // or SIGTERM prints them and ends.
        let report = || {
            let bytes: u64 = agents.iter().map(|a| a.bytes_sent()).sum();
            let samples: u64 = agents.iter().map(|a| a.samples_taken()).sum();
            eprintln!(
                "swarm: agents={count} samples={samples} gpu_samples={} protobuf_bytes_sent={bytes}",
                samples * u64::from(node.sim_gpus)
            );
        };
        let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())?;
        let stop = stop_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = usr1.recv() => report(),
                r = &mut stop => {
                    r?;
                    break;
                }
            }
        }
        report();
        Ok(())
    })
}

/// One sample, printed as JSON: the node description and the sample.
fn sample_once(node: &NodeArgs) -> anyhow::Result<()> {
    node.libraries_trusted(RunAs::current().uid)?;
    let now = fleetop_agent::now_ms();
    let (mut collector, note) = backend::build(&node.options(now - fleetop_agent::sim::ONSET_MS, Mode::Once))?;
    if let Some(note) = note {
        eprintln!("fleetop-agent: {note}");
    }
    // CPU usage is a difference of two readings: give it a moment.
    std::thread::sleep(Duration::from_millis(250));
    let sample = collector.sample(fleetop_agent::now_ms());
    let doc = serde_json::json!({ "info": collector.info(), "sample": sample });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_swarm_past_the_open_files_limit_is_refused_up_front() {
        let e = super::check_open_files(u32::MAX, true).expect_err("no process may hold that many files");
        let e = e.to_string();
        assert!(e.contains("run several swarms"), "{e}");
        assert!(super::check_open_files(1, false).is_ok(), "one agent fits anywhere");
    }
}
