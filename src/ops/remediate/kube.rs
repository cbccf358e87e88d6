//! The policy on Kubernetes (`watch --kubernetes --remediate`): its
//! quarantine is `ops::kube`'s drain (cordon, taint, condition, Event,
//! evictions) with the policy's marked reason; its window counts the
//! marks the cluster shows: fleetop's `fleetop/reason` annotations that
//! carry `remediation::POLICY_MARK` (at `fleetop/cordoned-at`) and its
//! Warning Events (`FleetopQuarantine`, at their first timestamp), which
//! outlive a return.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

use crate::ingest::kube::Kube;
use crate::model::action::{NodeAction, Plan};
use crate::model::kube::{self as km, KubeNode};
use crate::model::remediation::{marked_drain, marked_message};
use crate::model::sched::Hold;

/// The plan of one policy quarantine: the drain of `model::kube::plan`
/// with the policy's reason as it is (already marked, not given the
/// `fleetop:` prefix), audited as the policy's.
pub fn quarantine_plan(node: &str, reason: &str, gpu_pods_only: bool) -> Result<Plan, String> {
    let mut plan = km::plan(
        NodeAction::Drain,
        vec![node.to_string()],
        Some(reason.to_string()),
        gpu_pods_only,
    )?;
    plan.reason = Some(reason.to_string());
    plan.policy = Some("remediate".into());
    // The calls again, with the policy's reason in each body.
    km::stamp(&mut plan, km::UNSTAMPED_BY, km::UNSTAMPED_AT);
    Ok(plan)
}

/// The policy's quarantines the nodes' annotations show (node, when).
pub fn marked_nodes<'a>(nodes: impl IntoIterator<Item = &'a KubeNode>, now_ms: i64) -> Vec<(String, i64)> {
    nodes
        .into_iter()
        .filter_map(|n| {
            let a = n.fleetop.as_ref()?;
            marked_drain(&n.name, Some(&a.reason), a.at.as_deref(), now_ms).map(|(n, at)| (n, to_second(at)))
        })
        .collect()
}

/// The policy's quarantines its Events show (node, when): Warning Events
/// of reason `FleetopQuarantine` on a Node whose message carries the
/// policy's reason, at their `firstTimestamp` (else `eventTime`, else now).
pub async fn marked_events(kube: &Kube, now_ms: i64) -> Result<Vec<(String, i64)>, String> {
    let api: Api<Event> = Api::namespaced(kube.client.clone(), km::EVENT_NAMESPACE);
    let lp = ListParams::default().fields(&format!("reason={}", km::EVENT_REASON));
    let list = kube
        .bounded(api.list(&lp))
        .await
        .map_err(|e| kube.explain(&e, "list", "events"))?;
    Ok(list.items.iter().filter_map(|e| marked_event(e, now_ms)).collect())
}

fn marked_event(e: &Event, now_ms: i64) -> Option<(String, i64)> {
    if e.reason.as_deref() != Some(km::EVENT_REASON) || e.involved_object.kind.as_deref() != Some("Node") {
        return None;
    }
    if !marked_message(e.message.as_deref()?) {
        return None;
    }
    let node = e.involved_object.name.clone()?;
    let v = serde_json::to_value(e).ok()?;
    let at = v["firstTimestamp"].as_str().or_else(|| v["eventTime"].as_str());
    let at = at
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(now_ms, |t| t.timestamp_millis());
    Some((fleetop_proto::input::printable(&node, 253), to_second(at)))
}

/// A time to its whole second: an Event's timestamps are to the second,
/// the annotation's to the millisecond; one quarantine reads as one.
fn to_second(ms: i64) -> i64 {
    ms - ms.rem_euclid(1000)
}

/// Everything the cluster shows of the policy's quarantines: the
/// annotations of the nodes read now, and the Events; and the GPU nodes
/// held out of service now (by anyone).
pub async fn marked_in_cluster(kube: &Kube, now_ms: i64) -> Result<(Vec<(String, i64)>, BTreeSet<String>), String> {
    let nodes = kube.gpu_nodes().await.map_err(|e| e.to_string())?;
    let mut out = marked_nodes(&nodes.nodes, now_ms);
    out.extend(marked_events(kube, now_ms).await?);
    let held = nodes
        .nodes
        .iter()
        .filter(|n| n.hold() != Hold::InService)
        .map(|n| n.name.clone())
        .collect();
    Ok((out, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policys_plan_keeps_its_mark_and_says_so_in_every_body() {
        let r = crate::model::remediation::policy_reason("xid on gpu1: reboot_node (XID 79)");
        let p = quarantine_plan("gpu01", &r, true).expect("plan");
        assert_eq!(p.reason.as_deref(), Some(r.as_str()));
        assert_eq!(p.policy.as_deref(), Some("remediate"));
        assert!(p.gpu_pods_only);
        assert!(p.commands[0][2].contains(r#""fleetop/reason":"fleetop-policy: xid on gpu1"#));
        assert!(
            p.commands[3][2].contains(": fleetop-policy: xid"),
            "{:?}",
            p.commands[3]
        );
    }

    #[test]
    fn an_event_counts_when_it_is_the_policys_quarantine_of_a_node() {
        let ev = |reason: &str, msg: &str| -> Event {
            let mut v = km::event_body("gpu01", msg, "root", "2026-01-01T00:00:00Z");
            v["reason"] = serde_json::json!(reason);
            serde_json::from_value(v).expect("event")
        };
        assert_eq!(
            marked_event(&ev(km::EVENT_REASON, "fleetop-policy: xid"), 0),
            Some(("gpu01".to_string(), 1_767_225_600_000))
        );
        let n = KubeNode {
            name: "gpu01".into(),
            fleetop: Some(crate::model::kube::Annotation {
                reason: "fleetop-policy: xid".into(),
                by: None,
                at: Some("2026-01-01T00:00:00.250Z".into()),
            }),
            ..Default::default()
        };
        assert_eq!(
            marked_nodes([&n], 0),
            [("gpu01".to_string(), 1_767_225_600_000)],
            "the annotation and the Event of one quarantine are one mark"
        );
        assert_eq!(marked_event(&ev(km::EVENT_REASON, "fleetop: fan"), 0), None);
        assert_eq!(marked_event(&ev("Other", "fleetop-policy: xid"), 0), None);
    }
}
