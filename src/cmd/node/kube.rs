//! `fleetop node cordon|drain|resume|return NODES --kubernetes`: the same
//! paths as Slurm's, the calls going to the API server (`ops::kube`).

use crate::cli::NodeCmd;
use crate::config::Config;
use crate::ingest::kube::{Kube, KubeOptions};
use crate::ingest::source::Source;
use crate::model::action::{self, NodeAction, Scheduler};
use crate::ops::{audit, return_to_service};

use super::{Reach, confirm_return, gates, overrides, run_plan};

/// `node cordon|drain|resume`: the same path as Slurm's (read-only
/// refusal, the calls shown, confirmation, the audit log, the exit
/// status). Read-only refuses before any client is made. `node return`
/// goes to `run_return`.
pub(super) fn run(
    nodes: Vec<String>,
    args: &NodeCmd,
    kube: &KubeOptions,
    source: &Source,
    cfg: &Config,
    read_only: bool,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let action = match args.action.action() {
        Some(NodeAction::Return) => {
            return rt.block_on(run_return(nodes, args, kube, source, cfg, read_only));
        }
        Some(a) => a,
        None => anyhow::bail!("{:?} has no Kubernetes action", args.action),
    };
    let mut plan = crate::model::kube::plan(action, nodes, args.reason.clone(), args.gpu_pods_only)
        .map_err(|e| anyhow::anyhow!(e))?;
    plan.force = args.force;
    let kube = if read_only {
        None
    } else {
        Some(rt.block_on(crate::ingest::kube::connect(kube))?)
    };
    // Who and when are known here: the calls shown are those sent.
    crate::ops::kube::stamp(&mut plan);
    run_plan(plan, &args.nodes, args.yes, args.format, read_only, |p| match &kube {
        Some(k) => rt.block_on(crate::ops::kube::execute(k, p)),
        None => audit::refused(p, "read-only mode"),
    })
}

/// `node return --kubernetes`: the gates and the burn-in of a return on
/// Slurm (`ops::return_to_service`), each node's state read from the API
/// server and its GPU pods standing for Slurm's jobs; the nodes that pass
/// are uncordoned, and what fleetop put on them removed, with an Event.
/// Read-only refuses before any client is made.
async fn run_return(
    nodes: Vec<String>,
    args: &NodeCmd,
    opts: &KubeOptions,
    source: &Source,
    cfg: &Config,
    read_only: bool,
) -> anyhow::Result<()> {
    if read_only {
        let mut plan = action::plan(NodeAction::Return, nodes, None).map_err(anyhow::Error::msg)?;
        plan.scheduler = Scheduler::Kubernetes;
        audit::log(&audit::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: return refused (nothing was run)");
    }
    let kube = crate::ingest::kube::connect(opts).await?;
    let held = read_nodes(&kube, &nodes).await?;
    let agents = Reach::new(&nodes, source, cfg).agents?;
    let token = super::bench_token(args, cfg)?;
    let gates = gates(&nodes, &agents, cfg, args.expect_gpus).await;
    let mut pods = std::collections::BTreeMap::new();
    for (name, node) in &held {
        if node.is_some() {
            let on = kube
                .gpu_pods_on(name)
                .await
                .map_err(|e| anyhow::anyhow!("return: cannot list the pods on {name}: {e}"))?;
            pods.insert(name.clone(), on);
        }
    }
    let gate = |n: &str| return_to_service::Gate {
        // The GPU pods on the node, as Slurm's jobs are: a burn-in would
        // take their GPUs.
        jobs: pods.get(n).cloned().unwrap_or_default(),
        ..gates.get(n).cloned().unwrap_or(return_to_service::Gate {
            expect_gpus: args.expect_gpus,
            ..Default::default()
        })
    };
    let prepared = return_to_service::prepare(
        &nodes,
        Scheduler::Kubernetes,
        |n| held.iter().find(|(name, _)| name == n).and_then(|(_, k)| k.as_ref()),
        gate,
        &agents.targets,
        args.suite,
        overrides(args),
    );
    confirm_return(
        prepared,
        return_to_service::Back::Kube(&kube),
        args,
        &agents,
        token,
        false,
    )
    .await
}

/// Each node as the API server has it now (`None`: it has no node of that
/// name); an API server that cannot be read stops the return in one line.
async fn read_nodes(
    kube: &Kube,
    nodes: &[String],
) -> anyhow::Result<Vec<(String, Option<crate::model::kube::KubeNode>)>> {
    let mut out = Vec::new();
    for n in nodes {
        let node = kube
            .node(n)
            .await
            .map_err(|e| anyhow::anyhow!("return: cannot read the node {n}: {e}"))?;
        out.push((n.clone(), node));
    }
    Ok(out)
}
