//! `fleetop-agent`: the per-node sampler and gRPC server.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fleetop_agent::backend::{self, Backend};
use fleetop_agent::config::{self, Loaded, RunAs};
use fleetop_agent::serve::server::{self, AgentOptions};

#[path = "main/cli.rs"]
mod cli;
#[path = "main/swarm.rs"]
mod swarm;

use cli::*;
use swarm::{SwarmFiles, sample_once, swarm};

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

/// Waits for Ctrl-C or SIGTERM.
async fn stop_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}
