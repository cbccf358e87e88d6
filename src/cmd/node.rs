//! `fleetop node drain|resume|undrain NODES`: the headless actions. The plan
//! (exact commands) goes to stderr, confirmation is asked on a terminal
//! unless `--yes`, results go to stdout (text or JSON), and the exit status
//! is non-zero if any node failed.

use std::io::Write;

use crate::cli::{ActionFormat, NodeCmd};
use crate::config::Config;
use crate::ingest::{hostlist, targets};
use crate::model::action::{self, ActionReport};
use crate::ops::{audit, slurm};

pub fn run(args: NodeCmd, cfg: &Config, read_only: bool) -> anyhow::Result<()> {
    let nodes = hostlist::expand(&args.nodes)?;
    let plan = action::plan(args.action, nodes, args.reason.clone()).map_err(|e| anyhow::anyhow!(e))?;
    let verb = plan.action.verb();
    if read_only {
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: {verb} refused (nothing was run)");
    }
    let mut err = std::io::stderr().lock();
    writeln!(err, "{verb} {} node(s): {}", plan.nodes.len(), args.nodes)?;
    for c in &plan.commands {
        writeln!(err, "  {}", action::shell_words(c))?;
    }
    drop(err);
    if !args.yes {
        super::confirm(&plan, "Run these commands?")?;
    }
    audit::started(&plan)?;
    let report = slurm::execute(&targets::slurm(cfg), &plan);
    let logged = audit::append(&report);
    print_report(&report, args.format)?;
    let path = logged.map_err(|e| anyhow::anyhow!("{verb} ran, but the audit log could not be written: {e}"))?;
    tracing::info!("audit log: {}", path.display());
    let failed: Vec<&str> = report
        .results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| r.node.as_str())
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "{verb} failed on {} of {} node(s): {}",
            failed.len(),
            report.results.len(),
            failed.join(",")
        );
    }
    Ok(())
}

fn print_report(report: &ActionReport, format: ActionFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        ActionFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(report)?)?,
        ActionFormat::Text => {
            let w = report.results.iter().map(|r| r.node.len()).max().unwrap_or(4);
            for r in &report.results {
                writeln!(
                    out,
                    "{:<w$}  {}  {}",
                    r.node,
                    if r.ok { "ok  " } else { "FAIL" },
                    r.message
                )?;
            }
        }
    }
    Ok(())
}
