//! One look of the remediation policy on Kubernetes (`watch --kubernetes
//! --remediate`): the steps of the Slurm policy (`watch::remediate_step`),
//! each node's hold read from Kubernetes, its quarantine `ops::kube`'s
//! drain, its lease a coordination.k8s.io/v1 Lease, and its window counted
//! from the policy's annotations and Events as well as the audit log.

use std::collections::BTreeSet;

use crate::ingest::kube::Kube;
use crate::model::sched::Hold;
use crate::ops::notify::Notifier;
use crate::ops::remediate::{self, Decision, KubeLeaseKeeper, LeaseNow, Loud, Policy, SaidOnce, State};
use crate::store::Store;

/// The policy's quarantines the store's Kubernetes view shows.
fn marked_in_store(store: &Store, now: i64) -> Vec<(String, i64)> {
    remediate::kube::marked_nodes((0..store.nodes.len()).filter_map(|i| store.kube.of(i)), now)
}

/// Reads what the cluster shows of the policy (annotations and Events)
/// into the window, and the nodes it holds out of service now; `None`
/// (said once) when it cannot be read.
pub async fn see_cluster(p: &mut Policy, kube: &Kube, said: &mut SaidOnce, now: i64) -> Option<BTreeSet<String>> {
    match remediate::kube::marked_in_cluster(kube, now).await {
        Ok((marks, held)) => {
            p.see_scheduler(marks);
            said.clear();
            Some(held)
        }
        Err(e) => {
            let what = format!("Kubernetes cannot be read for the policy's quarantines: {e}; nothing is quarantined");
            said.say(what.clone(), || what, Loud::Error);
            None
        }
    }
}

/// One look of the policy (see the module above). In drain mode, only
/// while this watch holds the Lease, and after the cluster is read again.
#[allow(clippy::too_many_arguments)]
pub async fn kube_step(
    p: &mut Policy,
    state: &mut State,
    mut lease: Option<&mut KubeLeaseKeeper>,
    store: &Store,
    kube: &Kube,
    said: &mut SaidOnce,
    notifier: &mut Notifier,
    own_alerts: &mut Option<BTreeSet<String>>,
    now: i64,
) {
    let Some(before) = remediate::begin_look(p, state, store.nodes.len()) else {
        return;
    };
    p.see_scheduler(marked_in_store(store, now));
    let mut acts = true;
    if let Some(k) = lease.as_deref_mut() {
        if k.checked_ms.is_none_or(|t| now - t >= k.check_every_ms()) {
            k.check(kube, now).await;
        }
        acts = k.may_act(now);
    }
    let mut decisions = if acts { p.decide(store, state, now) } else { Vec::new() };
    if !decisions.is_empty()
        && let Some(k) = lease
    {
        // About to act: what the cluster shows now (another watch's
        // quarantine a moment ago, a return), and the Lease once more.
        decisions = match see_cluster(p, kube, said, now).await {
            Some(held) if k.check(kube, now).await == LeaseNow::Mine && k.may_act(now) => {
                let mut d = p.decide(store, state, now);
                // A node held out of service now (by another watch, a
                // person) is not quarantined again.
                d.retain(|d| !matches!(d, Decision::Drain { node, .. } if held.contains(node)));
                d
            }
            _ => Vec::new(),
        };
    }
    for d in decisions {
        match d {
            Decision::Drain { node, kind, reason } => {
                if quarantine(p, kube, &node, &reason).await {
                    state.drained(&node, kind, &reason, now);
                    p.count_drain(&node, now);
                }
            }
            Decision::Trip { node, why } => remediate::trip(state, &node, why, now),
        }
    }
    remediate::end_look(state, &before, notifier, own_alerts, now);
}

/// Quarantines `node` (logged before it runs and after, as the policy
/// acting for this user); whether the node is quarantined after: a node
/// cordoned and tainted whose eviction a budget refused is (its incident
/// is open, it counts), and the refusal is logged.
async fn quarantine(p: &Policy, kube: &Kube, node: &str, reason: &str) -> bool {
    let plan = match remediate::kube::quarantine_plan(node, reason, p.cfg.gpu_pods_only) {
        Ok(plan) => plan,
        Err(e) => {
            tracing::error!("remediate: {node} not quarantined: {e}");
            return false;
        }
    };
    let report = crate::ops::kube::run_logged(kube, plan).await;
    let Some(r) = report.results.first() else {
        tracing::error!("remediate: {node} not quarantined");
        return false;
    };
    if r.ok {
        tracing::warn!("remediate: quarantined {node}: {reason} ({})", r.message);
        return true;
    }
    // Cordoned and tainted by the policy, whatever the evictions did?
    match kube.node(node).await {
        Ok(Some(n)) if matches!(n.hold(), Hold::Fleetop { .. }) && n.fleetop_taint().is_some() => {
            tracing::error!(
                "remediate: quarantined {node}: {reason}; but not every pod was evicted: {}",
                r.message
            );
            true
        }
        _ => {
            tracing::error!("remediate: {node} not quarantined: {}", r.message);
            false
        }
    }
}
