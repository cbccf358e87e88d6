//! `fleetop node drain|return NODES --ray`: Ray's drain, and what a
//! return can and cannot do on Ray.

use crate::cli::NodeCmd;
use crate::config::Config;
use crate::ingest::source::RayChoice;
use crate::ingest::{hostlist, targets};
use crate::model::action::{self, NodeAction};
use crate::model::time::now_ms;
use crate::ops::{audit, return_to_service};

use super::{Reach, bench_token, gates, print_report, run_plan};

/// `fleetop --ray URL node drain NODES`: Ray is read first, so that the
/// plan names each node's Ray id (a node Ray does not know is refused
/// before anything is asked); then the path every action takes.
pub(super) fn run(
    action: NodeAction,
    nodes: Vec<String>,
    args: &NodeCmd,
    ray: &RayChoice,
    cfg: &Config,
    read_only: bool,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    if action != NodeAction::Drain {
        anyhow::bail!("{} --ray: {}", action.verb(), crate::ops::ray::NO_RESUME);
    }
    let Some(ray) = targets::ray(ray, cfg)? else {
        anyhow::bail!("--ray: no Ray cluster given");
    };
    let snap = rt.block_on(ray.read())?;
    let how = crate::ops::ray::RayDrain {
        deadline: args.deadline,
        if_idle: args.if_idle,
    };
    let matched = nodes
        .iter()
        .map(|n| (n.clone(), snap.node_for(&[n.as_str()])))
        .collect();
    let plan = crate::ops::ray::drain_plan(&ray.gcs, matched, args.reason.clone(), &how, now_ms())
        .map_err(|e| anyhow::anyhow!(e))?;
    run_plan(plan, &args.nodes, args.yes, args.format, read_only, |p| {
        rt.block_on(crate::ops::ray::execute(&ray, p))
    })
}

/// `fleetop node return --ray NODES`: Ray has no undrain (a drained
/// raylet has left the cluster), so nothing is returned. What fleetop can
/// do it does: the same gates and burn-in on each node's own agent, its
/// verdict reported, with what Ray shows of the node and the `ray start`
/// that brings it back. Refused in read-only mode; logged as every action
/// is; the exit status is non-zero (nothing was returned), in one line.
pub(super) async fn run_return(
    nodes: Vec<String>,
    args: &NodeCmd,
    choice: &RayChoice,
    reach: Reach,
    cfg: &Config,
    read_only: bool,
) -> anyhow::Result<()> {
    let mut plan = action::plan(NodeAction::Return, nodes.clone(), args.reason.clone()).map_err(anyhow::Error::msg)?;
    plan.scheduler = crate::model::action::Scheduler::Ray;
    plan.force = args.force;
    let ray = targets::ray(choice, cfg)?.ok_or_else(|| anyhow::anyhow!("--ray: no Ray dashboard given"))?;
    if read_only {
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: return refused (nothing was run)");
    }
    let seen = ray.read().await.map_err(|e| e.to_string());
    let agents = reach.agents?;
    let token = bench_token(args, cfg)?;
    let gates = gates(&nodes, &agents, cfg, args.expect_gpus).await;
    let mut results: Vec<action::NodeResult> = Vec::new();
    let mut bench = Vec::new();
    let said = |n: &str| crate::ops::ray::return_words(seen.as_ref().map_err(String::as_str), n, &ray.gcs);
    let result = |node: &str, message: String| action::NodeResult {
        node: node.to_string(),
        ok: false,
        message,
        state_before: None,
        state_after: None,
    };
    for n in &nodes {
        let g = gates.get(n);
        let target = agents.targets.iter().find(|t| &t.name == n);
        let why = match (g, target, &token) {
            (None, _, _) | (_, None, _) => Some("no burn-in: its agent could not be read".to_string()),
            (Some(g), _, _) if g.faults.is_some() && !args.force => Some(format!(
                "no burn-in: {} still active (--force to run it anyway)",
                g.faults.as_deref().unwrap_or_default()
            )),
            (_, _, None) => {
                Some("no burn-in: it needs the agents' bench token (bench_token_file, --token-file)".into())
            }
            (Some(_), Some(t), Some(_)) => {
                bench.push(t.clone());
                None
            }
        };
        if let Some(why) = why {
            results.push(result(n, format!("not returned: {why}; {}", said(n))));
        }
    }
    eprintln!("return {} node(s) on Ray: {}", nodes.len(), args.nodes);
    eprintln!("  {}", crate::ops::ray::NO_RESUME);
    eprintln!(
        "  what fleetop can do: the burn-in ({}) on the agents of: {}",
        args.suite.name(),
        {
            let names: Vec<String> = bench.iter().map(|t| t.name.clone()).collect();
            if names.is_empty() {
                "none".into()
            } else {
                hostlist::compress(&names)
            }
        }
    );
    if !args.yes && !bench.is_empty() {
        crate::cmd::confirm(&plan, "Run the burn-in on these nodes' agents?")?;
    }
    audit::started(&plan)?;
    if let Some(token) = token.as_deref().filter(|_| !bench.is_empty()) {
        let suite = args.suite.name();
        audit::started(&crate::ops::bench::plan(suite, &bench))?;
        let progress = |_: usize, u: &crate::model::bench::BenchUpdate| {
            if let crate::model::bench::BenchUpdate::Progress { step, done, total } = u {
                eprintln!(
                    "burn-in [{done}/{total}] {}",
                    fleetop_proto::input::printable(step, 200)
                );
            }
        };
        let report = crate::ops::bench::run_suites(&bench, suite, token, &agents.access, args.timeout, &progress).await;
        if let Err(e) = crate::ops::bench::audit_report(&report, &bench) {
            eprintln!("fleetop: the burn-in ran, but the audit log could not be written: {e}");
        }
        for n in &report.nodes {
            let expect = gates.get(&n.name).and_then(|g| g.expect_gpus).or(args.expect_gpus);
            let verdict = match return_to_service::verdict(n, expect) {
                Ok(()) => format!("burn-in {suite} passed on its own agent"),
                Err(why) => format!("burn-in {suite} failed: {why}"),
            };
            results.push(result(&n.name, format!("not returned: {verdict}; {}", said(&n.name))));
        }
    }
    results.sort_by(|a, b| a.node.cmp(&b.node));
    let report = audit::report(&plan, crate::model::action::Stage::Done, None, results);
    let logged = audit::append(&report);
    print_report(&report, args.format)?;
    logged.map_err(|e| anyhow::anyhow!("the audit log could not be written: {e}"))?;
    anyhow::bail!(
        "{} node(s) not returned: Ray has no undrain; start each node's raylet again (ray start --address={})",
        nodes.len(),
        ray.gcs
    )
}
