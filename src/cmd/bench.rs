//! `fleetop bench`: burn-in suites on the agents of SOURCE. A control
//! action: read-only refuses it, a terminal is asked first unless `--yes`,
//! and it goes in the audit log. Progress goes to stderr, results to stdout;
//! the exit status is non-zero when any node fails.

use std::io::Write;

use crate::cli::{BenchArgs, Format, resolve};
use crate::config::Config;
use crate::ingest::targets;
use crate::model::bench::BenchUpdate;
use crate::ops::{audit, bench};

pub async fn run(args: BenchArgs, cfg: Config, read_only: bool) -> anyhow::Result<()> {
    let suite = args.suite.name();
    let source = resolve::source(&args.source, &cfg);
    let resolved = targets::resolve(&source, &cfg).await?;
    let mut targets = resolved.targets.clone();
    if !resolved.feed.is_agents() {
        // The nodes an exporter or Prometheus names run their agents at the agent port.
        for t in &mut targets {
            t.port = source.port;
        }
    }
    let targets = &targets;
    let token = match (&resolved.bench_token, &args.token_file) {
        // A token given on the command line wins over the config's.
        (_, Some(p)) if !args.source.demo => fleetop_proto::util::read_token_file(p)?,
        (Some(t), _) => t.clone(),
        (None, _) => anyhow::bail!(
            "bench needs the agents' token: --token-file FILE (the file given to fleetop-agent --bench-token-file)"
        ),
    };
    let plan = bench::plan(suite, targets);
    if read_only {
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: bench refused (nothing was run)");
    }
    {
        let mut err = std::io::stderr().lock();
        writeln!(err, "bench {suite} on {} node(s):", targets.len())?;
        for c in &plan.commands {
            writeln!(err, "  {}", c.join(" "))?;
        }
    }
    if !args.yes {
        super::confirm(&plan, &format!("Run the {suite} suite on these nodes?"))?;
    }
    let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    let progress = |i: usize, u: &BenchUpdate| {
        if let BenchUpdate::Progress { step, done, total } = u {
            eprintln!(
                "{} [{done}/{total}] {}",
                names[i],
                fleetop_proto::input::printable(step, 200)
            );
        }
    };
    audit::started(&plan)?;
    let report = bench::run_suites(targets, suite, &token, &resolved.access, args.timeout, &progress).await;
    bench::audit_report(&report, targets)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Format::Ndjson => writeln!(out, "{}", serde_json::to_string(&report)?)?,
    }
    // A node that measured no GPU did not pass either: it is named as such.
    let failed: Vec<String> = report
        .nodes
        .iter()
        .filter(|n| !n.ok)
        .map(|n| match (n.refused, n.error.is_none() && n.incomplete()) {
            (true, _) => format!("{} (not run: {})", n.name, n.error.as_deref().unwrap_or("refused")),
            (false, true) => format!("{} (incomplete: no GPU check ran)", n.name),
            (false, false) => n.name.clone(),
        })
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "bench did not pass on {} of {} node(s): {}",
            failed.len(),
            report.nodes.len(),
            failed.join(", ")
        );
    }
    Ok(())
}
