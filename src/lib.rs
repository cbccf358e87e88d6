//! fleetop, the console. Layers, each importing only those above it:
//!
//! - `model`: the domain (decoded samples, flags, scheduler view, actions,
//!   burn-in, updates); imports nothing of the console.
//! - `config`, `logging`: the config file, logs.
//! - `ingest`: where data comes from (agent streams, Slurm, the demo, SOURCE).
//! - `detect`: one function per flag kind; `store`: node state fed by updates.
//! - `ops`: what changes a cluster (Slurm actions, burn-in, the audit log)
//!   and what goes out of it (notifications);
//!   `record`: recordings of the update stream, and their player.
//! - `session`: the tasks and the one update channel tying them together.
//! - `export`: the JSON documents; `cli`: the command line, and its
//!   resolving into the plain values the layers below take.
//! - `cmd`, `tui`: the front ends; nothing imports them.
//!
//! Data flows one way: sampler -> stream -> ingest -> store -> detectors ->
//! view. `tests/it/layers.rs` fails if a module imports against this order.

pub mod cli;
pub mod cmd;
pub mod config;
pub mod detect;
pub mod export;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod ingest;
pub mod logging;
pub mod model;
pub mod ops;
pub mod record;
pub mod session;
pub mod store;
pub mod tui;

/// `--version`: the version and the commit built from (build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("FLEETOP_COMMIT"), ")");

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command, SourceArgs};

/// Runs the command line; errors are printed as one line on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, causes not repeated, nothing from outside sent raw
            // to the terminal.
            let line = fleetop_proto::input::error_line(e.as_ref());
            eprintln!("fleetop: {}", fleetop_proto::input::printable(&line, 2000));
            if e.downcast_ref::<tui::NoTerminal>().is_some() || e.downcast_ref::<tui::TerminalSetup>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut cfg = config::load(cli.config.as_deref())?;
    // The screen's options, given before the subcommand or after `demo`
    // and `replay` (the commands that have a screen).
    let screen = match &cli.command {
        Some(Command::Demo { screen, .. }) => screen.clone().over(cli.screen.clone()),
        Some(Command::Replay(a)) => a.screen.clone().over(cli.screen.clone()),
        _ => cli.screen.clone(),
    };
    cfg.refresh = screen.refresh.or(cfg.refresh);
    if screen.no_mouse {
        cfg.mouse = Some(false);
    }
    let notify_flags = cli.notify.alertmanager.is_some() || cli.notify.webhook.is_some();
    if notify_flags && cli.command.is_some() {
        anyhow::bail!(
            "--alertmanager and --webhook go after the subcommand (`fleetop demo --alertmanager URL`, `fleetop watch SOURCE --alertmanager URL`)"
        );
    }
    // `fleetop --hosts X export` would read the export's own source (the
    // default, localhost) and say nothing: a burn-in or an export of the
    // wrong nodes. Only `node` and `demo` take the source given before them.
    let own_source = !matches!(cli.command, None | Some(Command::Node(_) | Command::Demo { .. }));
    if own_source && let Some(flag) = cli.source.first_given() {
        anyhow::bail!(
            "{flag} goes after the subcommand (`fleetop export {flag} ...`); given before it, it would be ignored"
        );
    }
    if cli.record.record.is_some() && cli.command.is_some() {
        anyhow::bail!(
            "--record goes with the console (`fleetop --record FILE`, `fleetop demo --record FILE`); to record without it: `fleetop record SOURCE --out FILE`"
        );
    }
    // A theme is checked wherever it is given, so `export --theme nosuch` is
    // refused as the console would refuse it, not ignored.
    if let Some(spec) = screen.theme.as_deref().or(cfg.theme.as_deref()) {
        let dir = tui::theme::Theme::user_dir();
        tui::theme::Theme::load(spec, dir.as_deref(), tui::theme::ColorDepth::TrueColor)?;
    }
    // A demo is a sandbox: it writes nothing into the user's audit log,
    // timeline or state, so nothing it does can stand for a real node.
    let demo = match &cli.command {
        Some(Command::Demo { .. }) => true,
        Some(Command::Export(a)) => a.source.demo,
        Some(Command::Bench(a)) => a.source.demo,
        Some(Command::Record(a)) => a.source.demo,
        Some(Command::Watch(a)) => a.source.demo,
        _ => false,
    };
    let sandbox = match demo {
        true => Some(logging::enter_sandbox().map_err(|e| anyhow::anyhow!("the demo's state directory: {e}"))?),
        false => None,
    };
    let rt = runtime()?;
    let done = dispatch(cli, cfg, &rt, screen.theme.as_deref());
    if let Some(dir) = sandbox {
        let _ = std::fs::remove_dir_all(dir);
    }
    // Whatever a command left running (a blocking Slurm read, a sampling
    // task of the demo's agents) must not hold the exit: a dropped runtime
    // waits for its blocking tasks without end.
    rt.shutdown_timeout(SHUTDOWN_GRACE);
    done
}

/// How long an ending command waits for its runtime's leftover tasks.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

fn dispatch(
    cli: Cli,
    mut cfg: config::Config,
    rt: &tokio::runtime::Runtime,
    theme: Option<&str>,
) -> anyhow::Result<()> {
    // `--read-only` or the config's: every command that acts asks this.
    let read_only = cli.read_only || cfg.read_only;
    match cli.command {
        Some(Command::Export(args)) => {
            logging::to_stderr(cli.log_format);
            rt.block_on(cmd::export::run(args, cfg))
        }
        Some(Command::Bench(args)) => {
            logging::to_stderr(cli.log_format);
            rt.block_on(cmd::bench::run(args, cfg, read_only))
        }
        Some(Command::Node(args)) => {
            logging::to_stderr(cli.log_format);
            cmd::node::run(args, &cli.source, &cfg, read_only, rt)
        }
        Some(Command::Job(args)) => {
            logging::to_stderr(cli.log_format);
            cmd::node::run_job(args, &cfg, read_only)
        }
        Some(Command::Remediate(args)) => {
            logging::to_stderr(cli.log_format);
            cmd::watch::remediate(args, &cfg, read_only, rt)
        }
        Some(Command::Watch(args)) => {
            logging::to_stderr_at("info", cli.log_format);
            rt.block_on(cmd::watch::run(args, cfg, read_only))
        }
        Some(Command::Record(args)) => {
            logging::to_stderr(cli.log_format);
            rt.block_on(cmd::record::run(args, cfg))
        }
        Some(Command::Replay(args)) => tui::replay::run(rt, &args.file, args.at.as_deref(), theme, cfg),
        Some(Command::Completions { shell }) => {
            cmd::manual::completions(shell, &mut <Cli as clap::CommandFactory>::command(), "fleetop")
        }
        Some(Command::Man { out }) => cmd::manual::man_pages(<Cli as clap::CommandFactory>::command(), &out),
        Some(Command::Demo {
            nodes,
            gpus,
            seed,
            record,
            notify,
            ..
        }) => {
            cmd::apply_notify_flags(&notify, &mut cfg.notify);
            let source = SourceArgs {
                demo: true,
                nodes,
                gpus,
                seed,
                ..cli.source
            };
            let source = cli::resolve::source(&source, &cfg);
            tui::run(rt, source, cli::resolve::recording(&record), theme, read_only, cfg)
        }
        None => {
            cmd::apply_notify_flags(&cli.notify, &mut cfg.notify);
            let source = cli::resolve::source(&cli.source, &cfg);
            tui::run(rt, source, cli::resolve::recording(&cli.record), theme, read_only, cfg)
        }
    }
}

/// The runtime of the console and of every command: one worker thread,
/// beside the main thread that runs the screen and the store (or the
/// command), unless `TOKIO_WORKER_THREADS` asks for more.
///
/// What the workers do is read each node's stream: a message a second from
/// each, spread over the second. With a worker a core, each burst of
/// readiness woke a sibling to share it (work stealing), and the handoffs
/// cost more than the work: at 10,240 nodes on two cores, 8,000 context
/// switches a second, and 0.056 ms of CPU a node-sample against 0.046 with
/// one worker, which also showed every node sooner (12-14 s against
/// 18-20 s); at 1,024 nodes 0.186 ms against 0.148. One worker at 10,240
/// nodes is busy about a third of the time, and `export --once` reads
/// every node's history no slower on it, within the runs' spread (7.2,
/// 8.7 and 15.9 s against 6.6, 8.1, 9.1 and 13.0 s).
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(1);
    }
    builder.enable_all().build()
}
