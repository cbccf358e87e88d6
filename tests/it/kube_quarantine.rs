//! The quarantine on Kubernetes (`node drain|cordon --kubernetes`): the
//! cordon, fleetop's taint, annotations, condition and Event, then the
//! evictions; and what uncordon removes. Failures first: a budget that
//! refuses, someone else's taint, an unknown node, RBAC without the new
//! verbs, an API server that stops answering mid-way; then the happy path.
//! Against the fake API server, whose every node and Event is read back
//! into k8s-openapi's types here.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node};
use serde_json::{Value, json};

use crate::kube::{annotations, node, setup};
use crate::support::fake_kube::{ADMIN_TOKEN, CORDONER_TOKEN, TAINTER_TOKEN, kubeconfig};
use crate::support::fake_kube_patch::{json_patch, strategic_merge};

fn typed(n: Value) -> Node {
    serde_json::from_value(n).expect("a v1 Node")
}

fn taints(n: &Node) -> Vec<String> {
    let ts = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    ts.iter()
        .map(|t| format!("{}={}:{}", t.key, t.value.clone().unwrap_or_default(), t.effect))
        .collect()
}

fn condition(n: &Node, kind: &str) -> Option<k8s_openapi::api::core::v1::NodeCondition> {
    let cs = n.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    cs.into_iter().find(|c| c.type_ == kind)
}

#[test]
fn a_budget_refusal_names_the_pod_and_budget_and_nothing_is_deleted() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    api.state
        .lock()
        .expect("lock")
        .pdb
        .insert("ml/train-0".into(), "train-0-budget");
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79", "--gpu-pods-only"]);
    assert!(!r.ok, "{}", r.stdout);
    let line = r.stdout.lines().find(|l| l.starts_with("gpu01")).expect("gpu01's line");
    assert!(
        line.contains("NOT evicted: ml/train-0: 429 TooManyRequests")
            && line.contains("The disruption budget train-0-budget needs 2 healthy pods"),
        "{line}"
    );
    assert!(api.pods_on("gpu01").contains(&"ml/train-0".to_string()));
    assert!(!api.pods_on("gpu01").contains(&"ml/train-1".to_string()));
    assert!(api.requests().iter().all(|w| w.method != "DELETE"));
    // The quarantine stands: the refusal is the evictions' alone.
    let n = typed(api.node("gpu01"));
    assert!(taints(&n).contains(&"fleetop/quarantine=:NoSchedule".to_string()));
}

#[test]
fn someone_elses_taint_is_neither_counted_nor_lifted() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let theirs = json!({"key": "example.com/maintenance", "value": "bob", "effect": "NoSchedule"});
    api.state.lock().expect("lock").nodes.get_mut("gpu01").expect("gpu01")["spec"]["taints"] = json!([theirs]);
    // Their taint holds nothing for fleetop: the node is quarantined.
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79", "--gpu-pods-only"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("now cordoned by fleetop"), "{}", r.stdout);
    let n = typed(api.node("gpu01"));
    assert_eq!(
        taints(&n),
        [
            "example.com/maintenance=bob:NoSchedule",
            "fleetop/quarantine=:NoSchedule"
        ]
    );
    // Appended by a JSON patch, never the list replaced.
    let tainted = api
        .writes()
        .into_iter()
        .find(|w| w.content_type.as_deref() == Some("application/json-patch+json"))
        .expect("a JSON patch");
    assert_eq!(
        tainted.body.expect("body"),
        json!([{"op": "add", "path": "/spec/taints/-", "value": {"key": "fleetop/quarantine", "effect": "NoSchedule"}}])
    );
    // Uncordon removes fleetop's alone.
    let r = node(&kc, &log, &["resume", "gpu01"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let n = typed(api.node("gpu01"));
    assert_eq!(taints(&n), ["example.com/maintenance=bob:NoSchedule"]);
    assert!(condition(&n, "FleetopQuarantine").is_none());
    // Someone else's cordon: not fleetop's to taint, nor to untaint.
    let r = node(&kc, &log, &["drain", "gpu02", "--reason", "fan"]);
    assert!(r.ok && r.stdout.contains("not by fleetop"), "{}", r.stdout);
    assert_eq!(
        taints(&typed(api.node("gpu02"))),
        ["node.kubernetes.io/unschedulable=:NoSchedule"]
    );
}

#[test]
fn an_unknown_node_is_one_line_and_nothing_is_written() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let r = node(&kc, &log, &["drain", "nosuch", "--reason", "xid 79"]);
    assert!(!r.ok);
    assert!(
        r.stdout.contains("nosuch  FAIL  Kubernetes has no node of this name"),
        "{}",
        r.stdout
    );
    assert!(api.writes().is_empty(), "{:?}", api.writes());
}

#[test]
fn rbac_without_the_quarantines_verbs_is_named_and_nothing_is_evicted() {
    // Without `patch` on nodes/status: cordoned and tainted, then stopped.
    let (api, _dir, kc, log) = setup(CORDONER_TOKEN);
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok);
    let line = r.stdout.lines().find(|l| l.starts_with("gpu01")).expect("gpu01's line");
    assert!(
        line.contains("cordoned; tainted fleetop/quarantine, no condition set: 403 Forbidden: RBAC must allow 'patch' on 'nodes/status'")
            && line.contains("cannot patch resource \"nodes/status\"")
            && line.ends_with("nothing evicted"),
        "{line}"
    );
    assert_eq!(api.pods_on("gpu01").len(), 5);
    // The rights granted, the next drain completes what was cut short.
    let kc = kubeconfig(_dir.path(), &api.url(), ADMIN_TOKEN);
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79", "--gpu-pods-only"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("quarantine completed: tainted fleetop/quarantine:NoSchedule, FleetopQuarantine set")
            && r.stdout.contains("2 pod(s) evicted"),
        "{}",
        r.stdout
    );
    let n = typed(api.node("gpu01"));
    assert_eq!(taints(&n), ["fleetop/quarantine=:NoSchedule"], "not tainted twice");
    assert!(condition(&n, "FleetopQuarantine").is_some());
    assert_eq!(api.state.lock().expect("lock").events.len(), 1);
    // Without `create` on events.
    let (api, _dir, kc, log) = setup(TAINTER_TOKEN);
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok);
    assert!(
        r.stdout
            .contains("no Event posted: 403 Forbidden: RBAC must allow 'create' on 'events'")
            && r.stdout.contains("in the namespace \"default\""),
        "{}",
        r.stdout
    );
    assert_eq!(api.pods_on("gpu01").len(), 5);
}

#[test]
fn an_api_server_that_stops_answering_mid_quarantine_fails_at_its_deadline() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    api.state.lock().expect("lock").stall = Some("/status");
    let started = Instant::now();
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79"]);
    assert!(!r.ok);
    let line = r.stdout.lines().find(|l| l.starts_with("gpu01")).expect("gpu01's line");
    assert!(
        line.contains("no condition set: cannot reach the API server at http://127.0.0.1:")
            && line.ends_with("nothing evicted"),
        "{line}"
    );
    assert!(started.elapsed() < Duration::from_secs(45), "{:?}", started.elapsed());
    assert_eq!(api.pods_on("gpu01").len(), 5);
}

#[test]
fn a_drain_quarantines_the_node_then_evicts_and_uncordon_leaves_nothing_of_fleetops() {
    let (api, _dir, kc, log) = setup(ADMIN_TOKEN);
    let before = typed(api.node("gpu01"));
    let r = node(&kc, &log, &["drain", "gpu01", "--reason", "xid 79", "--gpu-pods-only"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("tainted fleetop/quarantine:NoSchedule; 2 pod(s) evicted (ml/train-0, ml/train-1)"),
        "{}",
        r.stdout
    );
    let n = typed(api.node("gpu01"));
    assert_eq!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    assert_eq!(taints(&n), ["fleetop/quarantine=:NoSchedule"]);
    let a = n.metadata.annotations.clone().expect("annotations");
    assert_eq!(a["fleetop/reason"], "fleetop: xid 79");
    assert!(a.contains_key("fleetop/cordoned-by") && a.contains_key("fleetop/cordoned-at"));
    let c = condition(&n, "FleetopQuarantine").expect("fleetop's condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("QuarantinedByFleetop"))
    );
    assert!(
        c.message
            .as_deref()
            .is_some_and(|m| m.starts_with("fleetop: xid 79 (by "))
    );
    assert_eq!(
        condition(&n, "Ready"),
        condition(&before, "Ready"),
        "others' conditions stay"
    );
    // The Event, on the node, as `kubectl describe node` finds it.
    let events = api.state.lock().expect("lock").events.clone();
    assert_eq!(events.len(), 1);
    let e: Event = serde_json::from_value(events[0].clone()).expect("a v1 Event");
    assert_eq!(
        (e.involved_object.kind.as_deref(), e.involved_object.name.as_deref()),
        (Some("Node"), Some("gpu01"))
    );
    assert_eq!(e.involved_object.uid.as_deref(), Some("gpu01"));
    assert_eq!(
        (e.type_.as_deref(), e.reason.as_deref(), e.metadata.namespace.as_deref()),
        (Some("Warning"), Some("FleetopQuarantine"), Some("default"))
    );
    assert!(e.message.as_deref().is_some_and(|m| m.contains("fleetop: xid 79")));
    // The order and kind of each call: cordon, taint, condition, Event, pods, evictions.
    let calls: Vec<(String, String, String)> = api
        .writes()
        .iter()
        .map(|w| {
            let path = w.target.split('?').next().unwrap_or("").to_string();
            (w.method.clone(), path, w.content_type.clone().unwrap_or_default())
        })
        .collect();
    let first: Vec<(&str, &str, &str)> = calls[..4]
        .iter()
        .map(|(m, p, c)| (m.as_str(), p.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        first,
        [
            ("PATCH", "/api/v1/nodes/gpu01", "application/merge-patch+json"),
            ("PATCH", "/api/v1/nodes/gpu01", "application/json-patch+json"),
            (
                "PATCH",
                "/api/v1/nodes/gpu01/status",
                "application/strategic-merge-patch+json"
            ),
            ("POST", "/api/v1/namespaces/default/events", "application/json"),
        ]
    );
    // A node without taints gets its first only if it is still the node read.
    let tainted = &api.writes()[1];
    assert_eq!(tainted.body.as_ref().expect("body")[0]["op"], "test");
    // The plan logged and shown names each of these calls.
    assert!(
        r.stderr.contains("PATCH /api/v1/nodes/gpu01/status")
            && r.stderr.contains("POST /api/v1/namespaces/default/events"),
        "{}",
        r.stderr
    );
    // Uncordon: nothing of fleetop's stays; the rest is as it was.
    let r = node(&kc, &log, &["resume", "gpu01"]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let n = typed(api.node("gpu01"));
    assert_eq!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(false));
    assert!(taints(&n).is_empty(), "{:?}", taints(&n));
    assert!(condition(&n, "FleetopQuarantine").is_none());
    assert_eq!(
        n.status.as_ref().and_then(|s| s.conditions.clone()),
        before.status.as_ref().and_then(|s| s.conditions.clone())
    );
    assert!(
        annotations(&api.node("gpu01"))
            .keys()
            .all(|k| !k.starts_with("fleetop/"))
    );
}

// The fake's patches, as the API server applies them.

#[test]
fn conditions_merge_by_type_and_delete_by_directive_while_taints_are_replaced() {
    let mut n = json!({
        "spec": {"taints": [{"key": "theirs", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let set = json!({"status": {"conditions": [{"type": "FleetopQuarantine", "status": "True"}]}});
    strategic_merge(&mut n, &set).expect("applies");
    assert_eq!(n["status"]["conditions"].as_array().map(Vec::len), Some(2));
    let del = json!({"status": {"conditions": [{"type": "FleetopQuarantine", "$patch": "delete"}]}});
    strategic_merge(&mut n, &del).expect("applies");
    assert_eq!(n["status"]["conditions"], json!([{"type": "Ready", "status": "True"}]));
    // A strategic merge patch of spec.taints replaces the list: why
    // fleetop appends its taint with a JSON patch instead.
    let t = json!({"spec": {"taints": [{"key": "fleetop/quarantine", "effect": "NoSchedule"}]}});
    strategic_merge(&mut n, &t).expect("applies");
    assert_eq!(n["spec"]["taints"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_json_patch_whose_test_fails_changes_nothing() {
    let mut n = json!({"metadata": {"resourceVersion": "7", "annotations": {"a/b": "x"}}, "spec": {}});
    let before = n.clone();
    let stale = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
        {"op": "add", "path": "/spec/taints", "value": []}
    ]);
    assert!(json_patch(&mut n, &stale).is_err());
    assert_eq!(n, before);
    let ok = json!([{"op": "remove", "path": "/metadata/annotations/a~1b"}]);
    json_patch(&mut n, &ok).expect("applies");
    assert_eq!(n["metadata"]["annotations"], json!({}));
    let missing = json!([{"op": "remove", "path": "/spec/taints/0"}]);
    assert!(json_patch(&mut n, &missing).is_err());
}
