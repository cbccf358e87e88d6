//! `fleetop node drain|resume|undrain NODES` and `fleetop job cancel JOBID`:
//! the headless actions. The plan
//! (exact commands) goes to stderr, confirmation is asked on a terminal
//! unless `--yes`, results go to stdout (text or JSON), and the exit status
//! is non-zero if any node failed.

use std::io::Write;

use crate::cli::{ActionFormat, JobAction, JobCmd, NodeCmd};
use crate::config::Config;
use crate::ingest::{hostlist, targets};
use crate::model::action::{self, ActionReport};
use crate::ops::{audit, slurm};

pub fn run(args: NodeCmd, cfg: &Config, read_only: bool) -> anyhow::Result<()> {
    let nodes = hostlist::expand(&args.nodes)?;
    let plan = action::plan(args.action, nodes, args.reason.clone()).map_err(|e| anyhow::anyhow!(e))?;
    run_plan(plan, &args.nodes, args.yes, args.format, cfg, read_only)
}

/// `fleetop job cancel JOBID`: `scancel JOBID`, confirmed, logged, read back.
pub fn run_job(args: JobCmd, cfg: &Config, read_only: bool) -> anyhow::Result<()> {
    let JobAction::Cancel = args.action;
    // The nodes it runs on, for the log and the question; none if Slurm cannot say.
    let nodes = targets::slurm(cfg)
        .query()
        .ok()
        .and_then(|s| s.jobs.into_iter().find(|j| j.id == args.job))
        .map(|j| (j.nodes, j.user));
    let (nodes, user) = nodes.unwrap_or_default();
    let user = (!user.is_empty()).then_some(user);
    let what = format!("job {}", args.job);
    let plan = action::scancel_plan(args.job, user.as_deref(), nodes);
    run_plan(plan, &what, args.yes, args.format, cfg, read_only)
}

fn run_plan(
    plan: action::Plan,
    what: &str,
    yes: bool,
    format: ActionFormat,
    cfg: &Config,
    read_only: bool,
) -> anyhow::Result<()> {
    let verb = plan.action.verb();
    if read_only {
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: {verb} refused (nothing was run)");
    }
    let mut err = std::io::stderr().lock();
    writeln!(err, "{verb} {} node(s): {what}", plan.nodes.len())?;
    for c in &plan.commands {
        writeln!(err, "  {}", action::shell_words(c))?;
    }
    drop(err);
    if !yes {
        super::confirm(&plan, "Run these commands?")?;
    }
    audit::started(&plan)?;
    let report = slurm::execute(&targets::slurm(cfg), &plan);
    let logged = audit::append(&report);
    print_report(&report, format)?;
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
