//! Cordon, drain and uncordon in Kubernetes. The plan's calls (stamped
//! with who and when just before they are logged) are what is sent: each
//! node is read first, so that a cordon someone else made is never
//! overwritten nor its annotations touched, and read back after (the
//! PATCH's answer) for the report. A cordon quarantines: fleetop's taint
//! (a JSON patch that appends), its condition (a strategic merge patch of
//! `nodes/status`) and an Event follow the cordon; uncordon removes the
//! taint and condition (`unquarantine`) and nothing of anyone else's.
//! A drain cordons, then evicts the node's
//! pods through the Eviction subresource, which honours PodDisruptionBudgets:
//! an eviction refused is reported with the API server's own words and
//! makes the node's result a failure.

use kube::api::{Api, Patch, PatchParams, PostParams};

use k8s_openapi::api::core::v1::{Event, Node, Pod};

use crate::ingest::kube::{Kube, KubeError, decode_node};
use crate::model::action::{ActionReport, NodeAction, NodeResult, Plan, Stage};
use crate::model::kube::{self as km, KubeNode, KubePod};
use crate::model::sched::Hold;
use crate::model::time::{now_ms, rfc3339};
use crate::ops::audit;

/// The body the plan holds for `method path` (exactly what was logged).
fn planned_body(plan: &Plan, method: &str, path: &str) -> Option<serde_json::Value> {
    plan.commands
        .iter()
        .find(|c| c.len() >= 3 && c[0] == method && c[1] == path)
        .and_then(|c| serde_json::from_str(&c[2]).ok())
}

fn result(node: &str, ok: bool, message: String, before: Option<&KubeNode>, after: Option<&KubeNode>) -> NodeResult {
    NodeResult {
        node: node.to_string(),
        ok,
        message,
        state_before: before.map(|b| b.label().to_string()),
        state_after: after.map(|a| a.label().to_string()),
    }
}

/// Sends the planned merge patch for `node`; the node as it is after.
async fn patch(kube: &Kube, plan: &Plan, node: &str) -> Result<Node, String> {
    let path = km::node_path(node);
    let body = planned_body(plan, "PATCH", &path).ok_or_else(|| format!("the plan has no PATCH {path}"))?;
    let api: Api<Node> = Api::all(kube.client.clone());
    kube.bounded(api.patch(node, &PatchParams::default(), &Patch::Merge(&body)))
        .await
        .map_err(|e| kube.explain(&e, "patch", "nodes"))
}

/// Sends a JSON patch (RFC 6902) of `node`; kube's own `Patch::Json` needs
/// a crate more, and this is one request.
async fn json_patch(kube: &Kube, node: &str, body: &serde_json::Value) -> Result<Node, String> {
    let req = http::Request::patch(km::node_path(node))
        .header(http::header::CONTENT_TYPE, km::JSON_PATCH)
        .header(http::header::ACCEPT, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(|e| format!("PATCH {}: {e}", km::node_path(node)))?;
    kube.bounded(kube.client.request::<Node>(req))
        .await
        .map_err(|e| kube.explain(&e, "patch", "nodes"))
}

/// A strategic merge patch of `nodes/NAME/status` (the condition).
async fn status_patch(kube: &Kube, node: &str, body: &serde_json::Value) -> Result<Node, String> {
    let api: Api<Node> = Api::all(kube.client.clone());
    kube.bounded(api.patch_status(node, &PatchParams::default(), &Patch::Strategic(body)))
        .await
        .map_err(|e| kube.explain(&e, "patch", "nodes/status"))
}

/// Posts the Event the plan holds for `node` (its release); none planned
/// is none sent.
async fn post_planned_event(kube: &Kube, plan: &Plan, node: &str) -> Result<(), String> {
    let path = km::events_path();
    let body = plan.commands.iter().find_map(|c| {
        let body: serde_json::Value = serde_json::from_str(c.get(2)?).ok()?;
        (c[0] == "POST" && c[1] == path && body["involvedObject"]["name"] == node).then_some(body)
    });
    let Some(body) = body else {
        return Ok(());
    };
    let event: Event = serde_json::from_value(body).map_err(|e| format!("the Event: {e}"))?;
    let api: Api<Event> = Api::namespaced(kube.client.clone(), km::EVENT_NAMESPACE);
    kube.bounded(api.create(&PostParams::default(), &event))
        .await
        .map(|_| ())
        .map_err(|e| kube.explain(&e, "create", "events"))
}

/// Who and when, as the plan's cordon stamped them (the condition and
/// Event say the same).
fn stamped(plan: &Plan, node: &str) -> (String, String) {
    let body = planned_body(plan, "PATCH", &km::node_path(node)).unwrap_or_default();
    let a = &body["metadata"]["annotations"];
    let get = |k: &str| a[k].as_str().unwrap_or_default().to_string();
    (get(km::BY_ANNOTATION), get(km::AT_ANNOTATION))
}

/// What fleetop puts on a node after its cordon, in order: its taint, its
/// condition, an Event; what the node has already is not sent again (a
/// quarantine a refusal cut short is completed by the next cordon or
/// drain). The reason, holder and time are the cordon's annotations. The
/// first call refused ends it, in words.
async fn quarantine(kube: &Kube, plan: &Plan, node: &str, cordoned: &Node) -> Result<KubeNode, String> {
    let now = decode_node(cordoned);
    let (plan_by, plan_at) = stamped(plan, node);
    let noted = now.fleetop.clone();
    let reason = noted
        .as_ref()
        .map(|a| a.reason.clone())
        .unwrap_or_else(|| plan.reason.clone().unwrap_or_default());
    let by = noted.as_ref().and_then(|a| a.by.clone()).unwrap_or(plan_by);
    let at = noted.as_ref().and_then(|a| a.at.clone()).unwrap_or(plan_at);
    let reason = reason.as_str();
    if now.fleetop_taint().is_some() && now.has_fleetop_condition() {
        return Ok(now);
    }
    let tainted = if now.fleetop_taint().is_some() {
        now
    } else {
        let body = if now.taints.is_empty() {
            km::taint_first_body(cordoned.metadata.resource_version.as_deref().unwrap_or_default())
        } else {
            km::taint_append_body()
        };
        let n = json_patch(kube, node, &body)
            .await
            .map_err(|e| format!("not tainted: {e}"))?;
        decode_node(&n)
    };
    let after = if tainted.has_fleetop_condition() {
        tainted
    } else {
        let n = status_patch(kube, node, &km::condition_body(reason, &by, &at))
            .await
            .map_err(|e| format!("tainted {}, no condition set: {e}", km::TAINT_KEY))?;
        KubeNode {
            conditions: decode_node(&n).conditions,
            ..tainted
        }
    };
    let event: Event =
        serde_json::from_value(km::event_body(node, reason, &by, &at)).map_err(|e| format!("the Event: {e}"))?;
    let api: Api<Event> = Api::namespaced(kube.client.clone(), km::EVENT_NAMESPACE);
    kube.bounded(api.create(&PostParams::default(), &event))
        .await
        .map_err(|e| {
            format!(
                "tainted and {} set, no Event posted: {}",
                km::CONDITION_TYPE,
                kube.explain(&e, "create", "events")
            )
        })?;
    Ok(after)
}

/// Removes what fleetop put on `node` besides its cordon and annotations:
/// its taint (only if the taint at that index is still fleetop's) and its
/// condition. Others' taints and conditions stay.
pub async fn unquarantine(kube: &Kube, node: &KubeNode) -> Result<(), String> {
    if let Some(i) = node.fleetop_taint() {
        json_patch(kube, &node.name, &km::untaint_body(&i.to_string()))
            .await
            .map_err(|e| format!("{} not removed: {e}", km::TAINT_KEY))?;
    }
    if node.has_fleetop_condition() {
        status_patch(kube, &node.name, &km::uncondition_body())
            .await
            .map_err(|e| format!("{} not removed: {e}", km::CONDITION_TYPE))?;
    }
    Ok(())
}

/// Completes the quarantine of a node fleetop cordoned already, where its
/// taint or condition is missing; `None`: nothing was missing.
async fn complete(kube: &Kube, plan: &Plan, before: &KubeNode) -> Result<Option<KubeNode>, String> {
    if before.fleetop_taint().is_some() && before.has_fleetop_condition() {
        return Ok(None);
    }
    let api: Api<Node> = Api::all(kube.client.clone());
    let n = kube
        .bounded(api.get(&before.name))
        .await
        .map_err(|e| kube.explain(&e, "get", "nodes"))?;
    quarantine(kube, plan, &before.name, &n).await.map(Some)
}

/// Cordons (the planned merge patch) and quarantines `node`.
async fn cordon(kube: &Kube, plan: &Plan, node: &str) -> Result<KubeNode, String> {
    let n = patch(kube, plan, node).await?;
    let cordoned = decode_node(&n);
    if !matches!(cordoned.hold(), Hold::Fleetop { .. }) {
        return Err(format!(
            "the API server accepted it, but the node is {}",
            cordoned.held_by()
        ));
    }
    quarantine(kube, plan, node, &n)
        .await
        .map_err(|e| format!("cordoned; {e}"))
}

/// How the evictions on one node went.
#[derive(Default)]
struct Evictions {
    evicted: Vec<String>,
    gone: Vec<String>,
    left: Vec<String>,
    refused: Vec<String>,
}

impl Evictions {
    fn words(&self) -> String {
        let list = |v: &[String]| v.join(", ");
        let mut parts = Vec::new();
        if !self.refused.is_empty() {
            parts.push(format!("NOT evicted: {}", self.refused.join("; ")));
        }
        parts.push(match self.evicted.len() {
            0 => "no pod to evict".to_string(),
            n => format!("{n} pod(s) evicted ({})", list(&self.evicted)),
        });
        if !self.gone.is_empty() {
            parts.push(format!("already gone: {}", list(&self.gone)));
        }
        if !self.left.is_empty() {
            parts.push(format!("left: {}", list(&self.left)));
        }
        parts.join("; ")
    }
}

/// Evicts the pods on `node` a drain takes (policy/v1 Eviction), one at a
/// time; a pod already gone (404) is no failure.
async fn evict_pods(kube: &Kube, node: &str, gpu_pods_only: bool) -> Result<Evictions, KubeError> {
    let pods: Vec<KubePod> = kube.pods_on(node).await?;
    let mut out = Evictions::default();
    for p in pods {
        if let Some(why) = p.left_by_drain(gpu_pods_only) {
            out.left.push(format!("{} ({why})", p.id()));
            continue;
        }
        let api: Api<Pod> = Api::namespaced(kube.client.clone(), &p.namespace);
        let body = km::eviction_body(&p.namespace, &p.name);
        let sent: Result<serde_json::Value, kube::Error> = kube
            .bounded(api.create_subresource("eviction", &p.name, &PostParams::default(), &body))
            .await;
        match sent {
            Ok(_) => out.evicted.push(p.id()),
            Err(kube::Error::Api(s)) if s.code == 404 => out.gone.push(p.id()),
            // 429: a PodDisruptionBudget allows no disruption now; the
            // API server's message says which budget.
            Err(e) => out
                .refused
                .push(format!("{}: {}", p.id(), kube.explain(&e, "create", "pods/eviction"))),
        }
    }
    Ok(out)
}

/// One node of a confirmed plan.
async fn execute_node(kube: &Kube, plan: &Plan, node: &str) -> NodeResult {
    let before = match kube.node(node).await {
        Ok(Some(b)) => b,
        Ok(None) => return result(node, false, "Kubernetes has no node of this name".into(), None, None),
        Err(e) => return result(node, false, format!("cannot read the node: {e}"), None, None),
    };
    let b = Some(&before);
    match (plan.action, before.hold()) {
        (NodeAction::Cordon, Hold::InService) => match cordon(kube, plan, node).await {
            Ok(after) => result(node, true, format!("now {}", quarantined(&after)), b, Some(&after)),
            Err(e) => result(node, false, e, b, None),
        },
        (NodeAction::Cordon, Hold::Fleetop { .. }) => match complete(kube, plan, &before).await {
            Ok(None) => result(node, true, format!("already {}; left as it is", before.held_by()), b, b),
            Ok(Some(a)) => {
                let msg = format!(
                    "already {}; quarantine completed: tainted {}:{}, {} set",
                    before.held_by(),
                    km::TAINT_KEY,
                    km::TAINT_EFFECT,
                    km::CONDITION_TYPE
                );
                result(node, true, msg, b, Some(&a))
            }
            Err(e) => result(node, false, format!("already {}; {e}", before.held_by()), b, b),
        },
        (NodeAction::Cordon, _) => result(node, true, format!("already {}; left as it is", before.held_by()), b, b),
        (NodeAction::Drain, hold) => {
            let (cordon_words, after) = match hold {
                Hold::InService => match cordon(kube, plan, node).await {
                    Ok(a) => (format!("now {}", quarantined(&a)), a),
                    Err(e) => return result(node, false, format!("{e}; nothing evicted"), b, None),
                },
                Hold::Fleetop { .. } => match complete(kube, plan, &before).await {
                    Ok(None) => (format!("already {}", before.held_by()), before.clone()),
                    Ok(Some(a)) => (
                        format!(
                            "already {}; quarantine completed: tainted {}:{}, {} set",
                            before.held_by(),
                            km::TAINT_KEY,
                            km::TAINT_EFFECT,
                            km::CONDITION_TYPE
                        ),
                        a,
                    ),
                    Err(e) => {
                        let msg = format!("already {}; {e}; nothing evicted", before.held_by());
                        return result(node, false, msg, b, b);
                    }
                },
                Hold::Other if !plan.force => {
                    return result(
                        node,
                        true,
                        format!(
                            "already {}; left as it is, its pods too (--force to evict them anyway)",
                            before.held_by()
                        ),
                        b,
                        b,
                    );
                }
                Hold::Other => (
                    format!("already {} (cordon left as it is)", before.held_by()),
                    before.clone(),
                ),
            };
            match evict_pods(kube, node, plan.gpu_pods_only).await {
                Ok(ev) => result(
                    node,
                    ev.refused.is_empty(),
                    format!("{cordon_words}; {}", ev.words()),
                    b,
                    Some(&after),
                ),
                Err(e) => result(
                    node,
                    false,
                    format!("{cordon_words}; its pods could not be listed, nothing evicted: {e}"),
                    b,
                    Some(&after),
                ),
            }
        }
        (NodeAction::Resume | NodeAction::Return, Hold::InService) => {
            result(node, true, "already schedulable; nothing to uncordon".into(), b, b)
        }
        (NodeAction::Resume | NodeAction::Return, Hold::Other) if !plan.force => result(
            node,
            false,
            format!(
                "{}: left as it is (--force to {} it anyway)",
                before.held_by(),
                plan.action.verb()
            ),
            b,
            b,
        ),
        (NodeAction::Resume | NodeAction::Return, _) => match patch(kube, plan, node).await {
            Ok(n) => {
                let after = decode_node(&n);
                if after.unschedulable {
                    let msg = format!("the API server accepted it, but the node is {}", after.held_by());
                    return result(node, false, msg, b, Some(&after));
                }
                if let Err(e) = unquarantine(kube, &before).await {
                    return result(node, false, format!("now schedulable, but {e}"), b, Some(&after));
                }
                match post_planned_event(kube, plan, node).await {
                    Ok(()) => result(
                        node,
                        true,
                        "now schedulable; fleetop's taint, condition and annotations removed".into(),
                        b,
                        Some(&after),
                    ),
                    Err(e) => result(
                        node,
                        false,
                        format!("now schedulable, fleetop's taint and condition removed, but no Event posted: {e}"),
                        b,
                        Some(&after),
                    ),
                }
            }
            Err(e) => result(node, false, e, b, None),
        },
        (other, _) => result(
            node,
            false,
            format!("{} is not a Kubernetes action", other.verb()),
            b,
            b,
        ),
    }
}

/// "cordoned by fleetop (...): REASON, tainted fleetop/quarantine:NoSchedule".
fn quarantined(n: &KubeNode) -> String {
    format!("{}, tainted {}:{}", n.held_by(), km::TAINT_KEY, km::TAINT_EFFECT)
}

/// Runs a confirmed, stamped plan node by node. An API server that cannot
/// be reached is tried once: the nodes after say so at once.
pub async fn execute(kube: &Kube, plan: &Plan) -> ActionReport {
    let mut results = Vec::new();
    let mut unreachable: Option<String> = None;
    for node in &plan.nodes {
        if let Some(why) = &unreachable {
            results.push(result(node, false, format!("not run: {why}"), None, None));
            continue;
        }
        let r = execute_node(kube, plan, node).await;
        if r.message.contains("cannot reach the API server") {
            unreachable = Some(r.message.clone());
        }
        results.push(r);
    }
    audit::report(plan, Stage::Done, None, results)
}

/// Fills in who and when (the cordon's annotations), as late as can be.
pub fn stamp(plan: &mut Plan) {
    km::stamp(plan, &audit::actor().display(), &rfc3339(now_ms()));
}

/// Runs a confirmed plan as every caller must: stamped, logged before it
/// runs (not run if it cannot be logged), executed, logged with its results.
pub async fn run_logged(kube: &Kube, mut plan: Plan) -> ActionReport {
    stamp(&mut plan);
    audit::run_logged(&plan, || execute(kube, &plan)).await
}
