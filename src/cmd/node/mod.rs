//! `fleetop node drain|resume|undrain|return NODES`, `fleetop node history
//! NODES` and `fleetop job cancel JOBID`: the headless actions. The plan
//! (exact commands) goes to stderr, confirmation is asked on a terminal
//! unless `--yes`, results go to stdout (text or JSON), and the exit status
//! is non-zero if any node failed (for a return: if any node stays drained).

use std::collections::BTreeSet;
use std::io::Write;

use crate::cli::{ActionFormat, JobAction, JobCmd, NodeCmd, SourceArgs, resolve};
use crate::config::Config;
use crate::ingest::agent::Access;
use crate::ingest::slurm::Slurm;
use crate::ingest::source::Source;
use crate::ingest::{hostlist, targets};
use crate::model::action::{self, ActionReport, NodeAction};
use crate::model::target::Target;
use crate::model::time::{now_ms, rfc3339};
use crate::ops::{audit, return_to_service, slurm, timeline};

mod kube;
mod ray;

pub fn run(
    args: NodeCmd,
    source: &SourceArgs,
    cfg: &Config,
    read_only: bool,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let nodes = hostlist::expand(&args.nodes)?;
    // The agents' options work after `node` as before it.
    let source_args = source.with_agents(&args.agents);
    if let Some(kube) = resolve::kube(&args.kube)
        && args.action.action().is_some()
    {
        return kube::run(
            nodes,
            &args,
            &kube,
            &resolve::source(&source_args, cfg),
            cfg,
            read_only,
            rt,
        );
    }
    // --ray after `node drain`, or before `node` as for the console.
    let ray_args = if args.ray.ray.is_some() {
        &args.ray
    } else {
        &source_args.ray
    };
    let ray = resolve::ray(ray_args);
    let reach = Reach::new(&nodes, &resolve::source(&source_args, cfg), cfg);
    let action = match args.action.action() {
        None => return history(&nodes, &args, &reach, rt),
        Some(NodeAction::Return) if ray.asked() => {
            return rt.block_on(ray::run_return(nodes, &args, &ray, reach, cfg, read_only));
        }
        Some(NodeAction::Return) => return rt.block_on(run_return(nodes, &args, reach, cfg, read_only)),
        Some(NodeAction::Cordon) => anyhow::bail!("cordon is a Kubernetes action: add --kubernetes"),
        Some(a) => a,
    };
    if ray.asked() {
        return ray::run(action, nodes, &args, &ray, cfg, read_only, rt);
    }
    let mut plan = action::plan(action, nodes, args.reason.clone()).map_err(|e| anyhow::anyhow!(e))?;
    plan.force = args.force;
    if matches!(action, NodeAction::Resume | NodeAction::Undrain) {
        // What the nodes' agents say now: a node with a fault that keeps
        // it out of service is not put back unless forced.
        match &reach.agents {
            Ok(agents) => {
                let g = rt.block_on(gates(&plan.nodes, agents, cfg, None));
                plan.faults = g.into_iter().filter_map(|(n, g)| Some((n, g.faults?))).collect();
            }
            Err(e) => tracing::warn!("the nodes' flags could not be read: {e}"),
        }
    }
    if plan.force {
        forced_past(&mut plan, &reach.slurm);
    }
    run_plan(plan, &args.nodes, args.yes, args.format, read_only, |p| {
        slurm::execute(&reach.slurm, p)
    })
}

/// How a node command reaches its nodes, resolved once per command:
/// Slurm, and the nodes' agents with their TLS and token.
struct Reach {
    slurm: Slurm,
    /// An error where the agents cannot be named or their access files
    /// read: each command decides whether that stops it.
    agents: anyhow::Result<Agents>,
}

/// The agents of a command's nodes: those the source names (--hosts),
/// else the nodes at the addresses the config maps them to.
struct Agents {
    targets: Vec<Target>,
    access: Access,
}

impl Reach {
    fn new(nodes: &[String], source: &Source, cfg: &Config) -> Reach {
        let agents = targets::agents_of(nodes, source, cfg).and_then(|targets| {
            Ok(Agents {
                targets,
                access: source.access.load()?,
            })
        });
        Reach {
            slurm: targets::slurm(cfg),
            agents,
        }
    }
}

/// The plan on stderr: what will run, exactly.
fn show_plan(plan: &action::Plan, what: &str) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "{} {} node(s): {what}", plan.action.verb(), plan.nodes.len())?;
    write_commands(&mut err, plan)?;
    for (node, fault) in &plan.faults {
        if !plan.force {
            writeln!(
                err,
                "  {node}: {fault} still active: left out of service (--force to put it back)"
            )?;
        }
    }
    for (node, lifted) in &plan.overrides {
        writeln!(
            err,
            "  {node}: FORCED past: {}",
            fleetop_proto::input::printable(&lifted.join("; "), 2000)
        )?;
    }
    Ok(())
}

/// The plan's commands, one a line, escaped.
fn write_commands(err: &mut impl Write, plan: &action::Plan) -> std::io::Result<()> {
    for c in &plan.commands {
        writeln!(
            err,
            "  {}",
            fleetop_proto::input::printable(&action::shell_words(c), 4000)
        )?;
    }
    Ok(())
}

/// What a return's flags lift: `--force`, `--beside-jobs`.
fn overrides(args: &NodeCmd) -> return_to_service::Overrides {
    return_to_service::Overrides {
        force: args.force,
        beside_jobs: args.beside_jobs,
    }
}

/// What a forced resume or undrain overrides, node by node: a fault that
/// keeps it out, someone else's drain (from Slurm, read now).
fn forced_past(plan: &mut action::Plan, slurm: &crate::ingest::slurm::Slurm) {
    let snap = slurm.query().ok();
    for node in &plan.nodes {
        let mut lifted = Vec::new();
        if let Some(f) = plan.faults.get(node) {
            lifted.push(format!("{f} still active"));
        }
        let held = snap.as_ref().and_then(|s| s.nodes.get(node));
        if let Some(s) = held.filter(|s| s.hold() == crate::model::sched::Hold::Other) {
            lifted.push(format!("{}, not by fleetop", s.held_by()));
        }
        if !lifted.is_empty() {
            plan.overrides.insert(node.clone(), lifted);
        }
    }
}

/// `fleetop node history NODES`: the nodes' timelines from the state
/// directory and the audit log, with the fault journals of their agents
/// where they answer, oldest first.
fn history(nodes: &[String], args: &NodeCmd, reach: &Reach, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let since = now_ms() - args.since.as_millis() as i64;
    let names: BTreeSet<String> = nodes.iter().cloned().collect();
    let mut events = timeline::load(Some(&names), since);
    let journals = match &reach.agents {
        Ok(agents) => rt.block_on(fault_journals(nodes, agents)),
        Err(_) => Vec::new(),
    };
    events.extend(journals.into_iter().filter(|e| e.time_ms >= since));
    events.sort_by_key(|e| e.time_ms);
    let mut out = std::io::stdout().lock();
    match args.format {
        ActionFormat::Json => {
            #[derive(serde::Serialize)]
            struct Line<'a> {
                time: String,
                #[serde(flatten)]
                event: &'a crate::model::timeline::Event,
                text: String,
            }
            let lines: Vec<Line> = events
                .iter()
                .map(|e| Line {
                    time: rfc3339(e.time_ms),
                    event: e,
                    text: e.line(),
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&lines)?)?;
        }
        ActionFormat::Text => {
            if events.is_empty() {
                writeln!(out, "nothing recorded for {} since {}", args.nodes, rfc3339(since))?;
            }
            for e in &events {
                writeln!(out, "{}  {}  {}", rfc3339(e.time_ms), e.node, e.line())?;
            }
        }
    }
    Ok(())
}

/// What each node's agent has journaled (XIDs per GPU, across restarts
/// and reboots, and the burn-ins it ran), asked of all at once; an agent that does not answer is
/// named on stderr and its journal left out.
async fn fault_journals(nodes: &[String], agents: &Agents) -> Vec<crate::model::timeline::Event> {
    let mut asks = tokio::task::JoinSet::new();
    for t in agents.targets.clone() {
        let access = agents.access.clone();
        asks.spawn(async move {
            let got = crate::ingest::agent::describe(&t, &access, std::time::Duration::from_secs(5)).await;
            (t, got)
        });
    }
    let mut out = Vec::new();
    while let Some(Ok((t, got))) = asks.join_next().await {
        match got {
            // The node as asked for: by its target's name, or by the host
            // name its agent reports (a node given by address).
            Ok(desc) => {
                if let Some(name) = [&t.name, &desc.hostname].into_iter().find(|n| nodes.contains(n)) {
                    out.extend(crate::model::timeline::from_journal(name, &desc.health.fault_journal));
                    out.extend(crate::model::timeline::from_burn_ins(name, &desc.health.burn_ins));
                }
            }
            Err(e) => eprintln!(
                "fleetop: {}: the agent at {} did not answer ({}): its fault journal is left out",
                t.name,
                t.address(),
                fleetop_proto::input::printable(&e.to_string(), 500)
            ),
        }
    }
    out
}

/// The agents' bench token for a return's burn-in: `--token-file`, else
/// the config's `bench_token_file`, else none (the burn-in is then not run).
fn bench_token(args: &NodeCmd, cfg: &Config) -> anyhow::Result<Option<String>> {
    Ok(match (&args.token_file, &cfg.bench_token_file) {
        (Some(p), _) => Some(fleetop_proto::util::read_token_file(p)?),
        (None, Some(p)) => {
            Some(fleetop_proto::util::read_token_file(p).map_err(|e| anyhow::anyhow!("bench_token_file: {e}"))?)
        }
        (None, None) => None,
    })
}

/// `fleetop node return NODES`: see `ops::return_to_service`.
async fn run_return(
    nodes: Vec<String>,
    args: &NodeCmd,
    reach: Reach,
    cfg: &Config,
    read_only: bool,
) -> anyhow::Result<()> {
    let slurm = reach.slurm;
    let s = slurm.clone();
    let snap = tokio::task::spawn_blocking(move || s.query())
        .await?
        .map_err(|e| anyhow::anyhow!("return: cannot read Slurm: {e}"))?;
    // The agents at the addresses the source or the config gives (Slurm
    // was read just above: not again).
    let agents = reach.agents?;
    let token = bench_token(args, cfg)?;
    let gates = gates(&nodes, &agents, cfg, args.expect_gpus).await;
    let gate = |n: &str| {
        let mut g = gates.get(n).cloned().unwrap_or(return_to_service::Gate {
            expect_gpus: args.expect_gpus,
            ..Default::default()
        });
        // Slurm was read just now: its jobs on the node.
        g.jobs = snap
            .jobs
            .iter()
            .filter(|j| j.nodes.iter().any(|x| x == n))
            .map(crate::model::sched::Job::words)
            .collect();
        g
    };
    let prepared = return_to_service::prepare(
        &nodes,
        action::Scheduler::Slurm,
        |n| snap.nodes.get(n),
        gate,
        &agents.targets,
        args.suite,
        overrides(args),
    );
    let back = return_to_service::Back::Slurm(&slurm);
    confirm_return(prepared, back, args, &agents, token, read_only).await
}

/// A prepared return, from here the same on every scheduler: refused in
/// read-only mode, shown, confirmed, logged, run, its report printed and
/// logged; an error naming the nodes that stay out of service.
async fn confirm_return(
    prepared: return_to_service::Prepared,
    back: return_to_service::Back<'_>,
    args: &NodeCmd,
    agents: &Agents,
    token: Option<String>,
    read_only: bool,
) -> anyhow::Result<()> {
    let plan = prepared.plan.clone();
    if read_only {
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: return refused (nothing was run)");
    }
    {
        let mut err = std::io::stderr().lock();
        writeln!(err, "return {} node(s): {}", prepared.nodes.len(), args.nodes)?;
        for line in prepared.describe() {
            writeln!(err, "  {}", fleetop_proto::input::printable(&line, 2000))?;
        }
        write_commands(&mut err, &plan)?;
    }
    if !args.yes {
        super::confirm(&plan, "Run the burn-in where needed and resume the nodes that pass?")?;
    }
    audit::started(&plan)?;
    let report = return_to_service::run(
        &prepared,
        back,
        token.as_deref(),
        &agents.access,
        args.timeout,
        &burn_in_progress,
    )
    .await;
    let logged = audit::append(&report);
    print_report(&report, args.format)?;
    logged.map_err(|e| anyhow::anyhow!("return ran, but the audit log could not be written: {e}"))?;
    let left = return_to_service::still_drained(&report);
    if !left.is_empty() {
        let left: Vec<String> = left.into_iter().collect();
        anyhow::bail!(
            "{} of {} node(s) not returned to service: {}",
            left.len(),
            report.results.len(),
            hostlist::compress(&left)
        );
    }
    Ok(())
}

/// A burn-in's progress, on stderr.
fn burn_in_progress(_: usize, u: &crate::model::bench::BenchUpdate) {
    if let crate::model::bench::BenchUpdate::Progress { step, done, total } = u {
        eprintln!(
            "burn-in [{done}/{total}] {}",
            fleetop_proto::input::printable(step, 200)
        );
    }
}

/// How long `gates` waits for the nodes' agents.
const GATE_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the agents of `nodes` say now, for an action that puts nodes back
/// in service: per node read, its active flags that keep it out and its GPU
/// count (`NodeState::gate`). A node whose agent cannot be read is missing
/// from the map: its flags are unknown, and the log says so.
async fn gates(
    nodes: &[String],
    agents: &Agents,
    cfg: &Config,
    expect_gpus: Option<u32>,
) -> std::collections::BTreeMap<String, return_to_service::Gate> {
    let (targets, access) = (agents.targets.clone(), agents.access.clone());
    let mut session = crate::session::Session::of_agents(targets, access, cfg);
    session.settle(GATE_READ_TIMEOUT).await;
    let now = now_ms();
    let th = session.store.thresholds.clone();
    let mut out = std::collections::BTreeMap::new();
    for n in &session.store.nodes {
        if !nodes.contains(&n.target.name) {
            continue;
        }
        if n.status(now, &th) != crate::store::NodeStatus::Ok {
            tracing::warn!(
                "{}: its agent could not be read; its flags are not known",
                n.target.name
            );
            continue;
        }
        out.insert(n.target.name.clone(), n.gate(expect_gpus, &th));
    }
    session.stop().await;
    out
}

/// `fleetop job cancel JOBID`: `scancel JOBID`, confirmed, logged, read back.
pub fn run_job(args: JobCmd, cfg: &Config, read_only: bool) -> anyhow::Result<()> {
    let JobAction::Cancel = args.action;
    let slurm = targets::slurm(cfg);
    // The nodes it runs on, for the log and the question; none if Slurm cannot say.
    let nodes = slurm
        .query()
        .ok()
        .and_then(|s| s.jobs.into_iter().find(|j| j.id == args.job))
        .map(|j| (j.nodes, j.user));
    let (nodes, user) = nodes.unwrap_or_default();
    let user = (!user.is_empty()).then_some(user);
    let what = format!("job {}", args.job);
    let plan = action::scancel_plan(args.job, user.as_deref(), nodes);
    // A job Slurm does not list has nothing to cancel: no question asked,
    // one line, and the log says it failed.
    if !read_only && let Some(nothing) = slurm::nothing_to_cancel(&slurm, &args.job.to_string()) {
        let why = nothing.message.clone();
        let report = audit::report(&plan, action::Stage::Done, None, vec![nothing]);
        audit::log(&report)?;
        if args.format == ActionFormat::Json {
            print_report(&report, args.format)?;
        }
        anyhow::bail!(why);
    }
    run_plan(plan, &what, args.yes, args.format, read_only, |p| {
        slurm::execute(&slurm, p)
    })
}

/// Shows, confirms, logs and runs `plan` through `execute`, prints the
/// report; an error when any node failed.
fn run_plan(
    plan: action::Plan,
    what: &str,
    yes: bool,
    format: ActionFormat,
    read_only: bool,
    execute: impl FnOnce(&action::Plan) -> ActionReport,
) -> anyhow::Result<()> {
    let verb = plan.action.verb();
    if read_only {
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: {verb} refused (nothing was run)");
    }
    show_plan(&plan, what)?;
    if !yes {
        super::confirm(&plan, "Run these commands?")?;
    }
    audit::started(&plan)?;
    let report = execute(&plan);
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
        ActionFormat::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&action::AuditLine::new(report))?
        )?,
        ActionFormat::Text => {
            let w = report.results.iter().map(|r| r.node.len()).max().unwrap_or(4);
            for r in &report.results {
                // Slurm's and the API servers' words, and reasons anyone
                // set: escaped before the terminal sees them.
                writeln!(
                    out,
                    "{:<w$}  {}  {}",
                    fleetop_proto::input::printable(&r.node, 64),
                    if r.ok { "ok  " } else { "FAIL" },
                    fleetop_proto::input::printable(&r.message, 2000)
                )?;
            }
        }
    }
    Ok(())
}
