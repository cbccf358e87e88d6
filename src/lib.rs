//! fleetop, the console: sources -> store -> detectors -> view, plus the
//! headless export. Data flows one way; drawing does no I/O.

pub mod actions;
pub mod bench_cmd;
pub mod cli;
pub mod config;
pub mod demo;
pub mod detect;
pub mod export;
pub mod export_cmd;
pub mod flags;
pub mod hostlist;
pub mod logging;
pub mod node_cmd;
pub mod sched;
pub mod sched_json;
pub mod session;
pub mod source;
pub mod store;
pub mod tui;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command, SourceArgs};

/// Runs the command line; errors are printed as one line on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleetop: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let cfg = config::load(cli.config.as_deref())?;
    let rt = tokio::runtime::Runtime::new()?;
    match cli.command {
        Some(Command::Export(args)) => {
            logging::to_stderr();
            rt.block_on(export_cmd::run(args, cfg))
        }
        Some(Command::Bench(args)) => {
            logging::to_stderr();
            let read_only = cli.read_only || cfg.read_only;
            rt.block_on(bench_cmd::run(args, cfg, read_only))
        }
        Some(Command::Node(args)) => {
            logging::to_stderr();
            let read_only = cli.read_only || cfg.read_only;
            node_cmd::run(args, &cfg, read_only)
        }
        Some(Command::Demo { nodes, gpus, seed }) => {
            let source = SourceArgs {
                demo: true,
                nodes,
                gpus,
                seed,
                ..cli.source
            };
            tui::run(&rt, source, cli.theme.as_deref(), cli.read_only || cfg.read_only, cfg)
        }
        None => {
            let read_only = cli.read_only || cfg.read_only;
            tui::run(&rt, cli.source, cli.theme.as_deref(), read_only, cfg)
        }
    }
}
