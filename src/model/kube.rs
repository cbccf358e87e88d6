//! Kubernetes' view of a GPU node (`--kubernetes`): whether it takes new
//! pods, who cordoned it, its conditions and taints, its `nvidia.com/gpu`
//! capacity; the pods a drain evicts; and the plan of a cordon, drain or
//! uncordon as the exact API calls. Decoded from the API's objects once, in
//! `ingest::kube`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::action::{self, NodeAction, Plan, Scheduler, own_words};
use crate::model::sched::Hold;

/// The extended resource NVIDIA's device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// MIG slices as the device plugin's mixed strategy advertises them
/// (`nvidia.com/mig-1g.10gb`, ...): a pod holding one holds a GPU's part.
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";
/// The label NVIDIA's GPU Operator (GPU feature discovery) puts on GPU nodes.
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";

/// fleetop's annotations on a node it cordoned: the reason (with the
/// `fleetop:` prefix, as in Slurm), who and when. A cordon without
/// `REASON_ANNOTATION` is someone else's.
pub const REASON_ANNOTATION: &str = "fleetop/reason";
pub const BY_ANNOTATION: &str = "fleetop/cordoned-by";
pub const AT_ANNOTATION: &str = "fleetop/cordoned-at";

/// One condition of `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Condition {
    /// `Ready`, `MemoryPressure`, a node problem detector's `KernelDeadlock`, ...
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl Condition {
    /// Something to look at: `Ready` that is not `True`, or any other
    /// condition that is `True` (pressure, a detected problem: they are all
    /// phrased so that `False` is healthy).
    pub fn is_problem(&self) -> bool {
        if self.kind == "Ready" {
            self.status != "True"
        } else {
            self.status == "True"
        }
    }

    /// "Ready=False (KubeletNotReady: PLEG is not healthy)".
    pub fn line(&self) -> String {
        let mut s = format!("{}={}", self.kind, self.status);
        match (&self.reason, &self.message) {
            (Some(r), Some(m)) => s.push_str(&format!(" ({r}: {m})")),
            (Some(r), None) => s.push_str(&format!(" ({r})")),
            (None, Some(m)) => s.push_str(&format!(" ({m})")),
            (None, None) => {}
        }
        s
    }
}

/// One taint of `spec.taints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl Taint {
    /// "nvidia.com/gpu=present:NoSchedule", as kubectl writes a taint.
    pub fn line(&self) -> String {
        match &self.value {
            Some(v) => format!("{}={v}:{}", self.key, self.effect),
            None => format!("{}:{}", self.key, self.effect),
        }
    }
}

/// fleetop's record on a node it cordoned, from its annotations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Annotation {
    /// The `fleetop/reason` annotation as it is (normally "fleetop: ...").
    pub reason: String,
    pub by: Option<String>,
    pub at: Option<String>,
}

/// One node as Kubernetes sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeNode {
    pub name: String,
    /// `status.addresses` of type InternalIP and Hostname, in the API's order.
    pub addresses: Vec<String>,
    /// `spec.unschedulable`: cordoned.
    pub unschedulable: bool,
    /// `status.capacity` / `status.allocatable` of `nvidia.com/gpu`; absent
    /// where the device plugin does not advertise it.
    pub gpu_capacity: Option<u32>,
    pub gpu_allocatable: Option<u32>,
    pub conditions: Vec<Condition>,
    pub taints: Vec<Taint>,
    /// fleetop's annotations, where it set them.
    pub fleetop: Option<Annotation>,
}

impl KubeNode {
    /// Where fleetop's taint is among the node's taints.
    pub fn fleetop_taint(&self) -> Option<usize> {
        self.taints.iter().position(|t| t.key == TAINT_KEY)
    }

    /// The node carries fleetop's condition.
    pub fn has_fleetop_condition(&self) -> bool {
        self.conditions.iter().any(|c| c.kind == CONDITION_TYPE)
    }
}

impl KubeNode {
    /// Who keeps the node from taking new pods: nobody (schedulable),
    /// fleetop (cordoned with its annotation, a `fleetop:` reason), or
    /// someone else (a cordon without it: kubectl, an autoscaler, a person).
    pub fn hold(&self) -> Hold<'_> {
        if !self.unschedulable {
            return Hold::InService;
        }
        match &self.fleetop {
            Some(a) if own_words(&a.reason).is_some() => Hold::Fleetop { reason: &a.reason },
            _ => Hold::Other,
        }
    }

    /// "schedulable", or "cordoned by fleetop (alice, 2026-..): fleetop: xid 79",
    /// or "cordoned, not by fleetop (no fleetop/reason annotation)".
    pub fn held_by(&self) -> String {
        match (self.hold(), &self.fleetop) {
            (Hold::InService, _) => "schedulable".into(),
            (Hold::Fleetop { reason }, Some(a)) => {
                let who: Vec<&str> = [a.by.as_deref(), a.at.as_deref()].into_iter().flatten().collect();
                if who.is_empty() {
                    format!("cordoned by fleetop: {reason}")
                } else {
                    format!("cordoned by fleetop ({}): {reason}", who.join(", "))
                }
            }
            _ => format!("cordoned, not by fleetop (no {REASON_ANNOTATION} annotation)"),
        }
    }

    /// "schedulable" or "cordoned": the state in one word, for reports.
    pub fn label(&self) -> &'static str {
        if self.unschedulable { "cordoned" } else { "schedulable" }
    }

    pub fn problems(&self) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(|c| c.is_problem())
    }

    /// The node is the one named so, or at this address (a fleetop node
    /// given by its IP address).
    pub fn matches(&self, name_or_addr: &str) -> bool {
        self.name == name_or_addr || self.addresses.iter().any(|a| a == name_or_addr)
    }
}

impl crate::model::sched::Held for KubeNode {
    fn scheduler(&self) -> &'static str {
        "Kubernetes"
    }
    fn hold(&self) -> Hold<'_> {
        KubeNode::hold(self)
    }
    fn held_by(&self) -> String {
        KubeNode::held_by(self)
    }
    fn state(&self) -> String {
        self.label().to_string()
    }
    /// fleetop's reason annotation; someone else's cordon has none.
    fn reason(&self) -> Option<&str> {
        self.fleetop.as_ref().map(|a| a.reason.as_str())
    }
    /// fleetop's `cordoned-at` annotation.
    fn since(&self) -> Option<&str> {
        self.fleetop.as_ref().and_then(|a| a.at.as_deref())
    }
}

/// Everything read from the API server at one time: the GPU nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeSnapshot {
    pub nodes: Vec<KubeNode>,
}

/// A pod on a node, as much as a drain needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubePod {
    pub namespace: String,
    pub name: String,
    /// The controller's kind (`ReplicaSet`, `DaemonSet`, `Job`, ...).
    pub owner_kind: Option<String>,
    /// A static pod's mirror (`kubernetes.io/config.mirror`): the kubelet
    /// owns it; the API cannot evict it.
    pub mirror: bool,
    /// A container (or init container) requests or is limited to
    /// `nvidia.com/gpu` or a MIG slice.
    pub holds_gpu: bool,
    /// `status.phase`: Pending, Running, Succeeded, Failed, Unknown.
    pub phase: Option<String>,
}

impl KubePod {
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Why a drain leaves this pod where it is, if it does: as `kubectl
    /// drain` does, DaemonSet pods (their controller ignores the cordon
    /// and would put them back) and mirror pods; pods that have finished;
    /// with `gpu_pods_only`, pods that hold no GPU.
    pub fn left_by_drain(&self, gpu_pods_only: bool) -> Option<&'static str> {
        if self.owner_kind.as_deref() == Some("DaemonSet") {
            Some("DaemonSet pod")
        } else if self.mirror {
            Some("mirror pod")
        } else if matches!(self.phase.as_deref(), Some("Succeeded" | "Failed")) {
            Some("finished")
        } else if gpu_pods_only && !self.holds_gpu {
            Some("holds no GPU")
        } else {
            None
        }
    }
}

/// A DNS label, as Kubernetes names a namespace: 1 to 63 lower-case
/// letters, digits and '-', a letter or digit at each end.
pub fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// `/api/v1/nodes/NAME`.
pub fn node_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}")
}

/// `/api/v1/namespaces/NS/pods/NAME/eviction`.
pub fn eviction_path(namespace: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/{pod}/eviction")
}

/// `/api/v1/pods?fieldSelector=spec.nodeName%3DNAME`: the node's pods, in
/// every namespace.
pub fn pods_path(node: &str) -> String {
    format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")
}

/// `/api/v1/nodes/NAME/status`: the status subresource (conditions).
pub fn status_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}/status")
}

/// `/api/v1/namespaces/default/events`: where a node's Events go (a Node
/// has no namespace; the kubelet posts its node's Events there too).
pub fn events_path() -> String {
    format!("/api/v1/namespaces/{EVENT_NAMESPACE}/events")
}

/// fleetop's taint on a node it quarantined: `fleetop/quarantine:NoSchedule`.
/// Only a taint with this key is fleetop's; others' are never touched.
pub const TAINT_KEY: &str = "fleetop/quarantine";
pub const TAINT_EFFECT: &str = "NoSchedule";
/// fleetop's Node condition (`status.conditions`, type `FleetopQuarantine`).
pub const CONDITION_TYPE: &str = "FleetopQuarantine";
pub const CONDITION_REASON: &str = "QuarantinedByFleetop";
/// The Event's reason, and the namespace of a node's Events.
pub const EVENT_REASON: &str = "FleetopQuarantine";
pub const EVENT_NAMESPACE: &str = "default";
/// Where the remediation policy's Lease lives unless `[remediate]
/// lease_namespace` says otherwise: the namespace deploy/kubernetes
/// creates (a workload's objects never go in `default`).
pub const LEASE_NAMESPACE: &str = "fleetop";
/// The reason of the Event on a node fleetop put back in service.
pub const RELEASE_REASON: &str = "FleetopRelease";

/// The content types of the three kinds of PATCH fleetop sends.
pub const MERGE_PATCH: &str = "application/merge-patch+json";
pub const JSON_PATCH: &str = "application/json-patch+json";
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// The merge patch (`application/merge-patch+json`) that cordons a node
/// with fleetop's annotations.
pub fn cordon_body(reason: &str, by: &str, at: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {REASON_ANNOTATION: reason, BY_ANNOTATION: by, AT_ANNOTATION: at}},
        "spec": {"unschedulable": true},
    })
}

/// The merge patch that uncordons a node and removes fleetop's
/// annotations (a null removes a key in a merge patch); others' stay.
pub fn uncordon_body() -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {REASON_ANNOTATION: null, BY_ANNOTATION: null, AT_ANNOTATION: null}},
        "spec": {"unschedulable": false},
    })
}

fn taint_value() -> serde_json::Value {
    serde_json::json!({"key": TAINT_KEY, "effect": TAINT_EFFECT})
}

/// The JSON patch (`application/json-patch+json`) that appends fleetop's
/// taint to a node's taints: others' stay as they are (a merge patch of
/// `spec.taints` would replace the whole list).
pub fn taint_append_body() -> serde_json::Value {
    serde_json::json!([{"op": "add", "path": "/spec/taints/-", "value": taint_value()}])
}

/// The JSON patch for a node that has no taints yet: the list with
/// fleetop's alone, only if the node is still the one read
/// (`resourceVersion`), so that a taint added meanwhile is not lost.
pub fn taint_first_body(resource_version: &str) -> serde_json::Value {
    serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "add", "path": "/spec/taints", "value": [taint_value()]},
    ])
}

/// The JSON patch that removes fleetop's taint at `index`, only if the
/// taint there is still fleetop's.
pub fn untaint_body(index: &str) -> serde_json::Value {
    serde_json::json!([
        {"op": "test", "path": format!("/spec/taints/{index}/key"), "value": TAINT_KEY},
        {"op": "remove", "path": format!("/spec/taints/{index}")},
    ])
}

/// The strategic merge patch of `nodes/status` that sets fleetop's
/// condition (conditions merge by `type`: the others stay).
pub fn condition_body(reason: &str, by: &str, at: &str) -> serde_json::Value {
    serde_json::json!({"status": {"conditions": [{
        "type": CONDITION_TYPE,
        "status": "True",
        "reason": CONDITION_REASON,
        "message": format!("{reason} (by {by})"),
        "lastHeartbeatTime": at,
        "lastTransitionTime": at,
    }]}})
}

/// The strategic merge patch of `nodes/status` that deletes fleetop's
/// condition, and only it.
pub fn uncondition_body() -> serde_json::Value {
    serde_json::json!({"status": {"conditions": [{"type": CONDITION_TYPE, "$patch": "delete"}]}})
}

/// The core/v1 Event fleetop posts on a node it quarantined. A node's
/// Events name it with its name as uid, as the kubelet's do and as
/// `kubectl describe node` looks them up.
pub fn event_body(node: &str, reason: &str, by: &str, at: &str) -> serde_json::Value {
    let message = format!("cordoned and tainted {TAINT_KEY}:{TAINT_EFFECT} by {by}: {reason}");
    node_event(node, ("Warning", EVENT_REASON, "Quarantine"), &message, by, at)
}

/// The Normal Event fleetop posts on a node it put back in service.
pub fn release_event_body(node: &str, why: &str, by: &str, at: &str) -> serde_json::Value {
    let message = match why.trim() {
        "" => format!("uncordoned by {by}; {TAINT_KEY} and {CONDITION_TYPE} removed"),
        why => format!("uncordoned by {by}; {TAINT_KEY} and {CONDITION_TYPE} removed: {why}"),
    };
    node_event(node, ("Normal", RELEASE_REASON, "Release"), &message, by, at)
}

/// An Event on `node`: its type, reason and action, and its message.
fn node_event(
    node: &str,
    (kind, reason, action): (&str, &str, &str),
    message: &str,
    by: &str,
    at: &str,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{node}.fleetop-"), "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
        "type": kind,
        "reason": reason,
        "action": action,
        "message": message,
        "source": {"component": "fleetop"},
        "reportingComponent": "fleetop",
        "reportingInstance": by,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    })
}

/// The body of a policy/v1 Eviction of `namespace/pod`.
pub fn eviction_body(namespace: &str, pod: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": namespace},
    })
}

/// Who and when, as the cordon's annotations say, before the plan is sent:
/// the console's plan is made without a clock or the account's name, and
/// `stamp` fills both in just before it is logged and run.
pub const UNSTAMPED_BY: &str = "(this user)";
pub const UNSTAMPED_AT: &str = "(the time it is sent)";

/// The quarantine's calls after the cordon: the taint, the condition, the
/// Event (each with its content type or note as the fourth word).
pub fn quarantine_calls(node: &str, reason: &str, by: &str, at: &str) -> Vec<Vec<String>> {
    vec![
        vec![
            "PATCH".into(),
            node_path(node),
            taint_append_body().to_string(),
            format!("{JSON_PATCH}; a node without taints: test resourceVersion, add /spec/taints [the taint]"),
        ],
        vec![
            "PATCH".into(),
            status_path(node),
            condition_body(reason, by, at).to_string(),
            STRATEGIC_MERGE_PATCH.into(),
        ],
        vec![
            "POST".into(),
            events_path(),
            event_body(node, reason, by, at).to_string(),
        ],
    ]
}

/// The calls that remove what fleetop put on a node, after the uncordon
/// (`uncordon_body`): its taint where the node has it, its condition.
pub fn unquarantine_calls(node: &str) -> Vec<Vec<String>> {
    vec![
        vec![
            "PATCH".into(),
            node_path(node),
            untaint_body("{index}").to_string(),
            format!("{JSON_PATCH}; where the node has {TAINT_KEY}, at its index"),
        ],
        vec![
            "PATCH".into(),
            status_path(node),
            uncondition_body().to_string(),
            format!("{STRATEGIC_MERGE_PATCH}; where the node has {CONDITION_TYPE}"),
        ],
    ]
}

/// The calls that put a node fleetop cordoned back in service: the
/// uncordon (which drops fleetop's annotations), the removal of its taint
/// and condition, and an Event saying who and why (`why`: the resume's
/// reason, where one was given).
pub fn release_calls(node: &str, why: &str, by: &str, at: &str) -> Vec<Vec<String>> {
    let mut c = vec![vec!["PATCH".to_string(), node_path(node), uncordon_body().to_string()]];
    c.extend(unquarantine_calls(node));
    c.push(vec![
        "POST".into(),
        events_path(),
        release_event_body(node, why, by, at).to_string(),
    ]);
    c
}

/// The calls for one node, in words: method, path, and body where there is
/// one. A drain's evictions depend on the pods on the node when it runs:
/// the plan names the listing and the rule; the report names each pod.
pub fn calls(plan: &Plan, node: &str, by: &str, at: &str) -> Vec<Vec<String>> {
    let patch = |body: serde_json::Value| vec!["PATCH".to_string(), node_path(node), body.to_string()];
    let reason = plan.reason.as_deref().unwrap_or_default();
    let quarantine = || {
        let mut c = vec![patch(cordon_body(reason, by, at))];
        c.extend(quarantine_calls(node, reason, by, at));
        c
    };
    match plan.action {
        NodeAction::Cordon => quarantine(),
        NodeAction::Drain => {
            let which = if plan.gpu_pods_only {
                "each pod that holds a GPU (nvidia.com/gpu or nvidia.com/mig-*), not DaemonSet-owned, not a mirror pod"
            } else {
                "each pod not DaemonSet-owned and not a mirror pod"
            };
            let mut c = quarantine();
            c.push(vec!["GET".into(), pods_path(node)]);
            c.push(vec![
                "POST".into(),
                eviction_path("{namespace}", "{pod}"),
                eviction_body("{namespace}", "{pod}").to_string(),
                format!("for {which}; a refusal (429, a PodDisruptionBudget) is reported, never forced"),
            ]);
            c
        }
        NodeAction::Resume | NodeAction::Undrain | NodeAction::Return => release_calls(node, reason, by, at),
        _ => Vec::new(),
    }
}

/// The plan of a Kubernetes cordon, drain (cordon, then evictions) or
/// uncordon (`Resume`): the same reason rules as Slurm's drain (needed to
/// cordon or drain, given the `fleetop:` prefix).
pub fn plan(
    action: NodeAction,
    nodes: Vec<String>,
    reason: Option<String>,
    gpu_pods_only: bool,
) -> Result<Plan, String> {
    if let Some(r) = &reason {
        crate::model::action::check_reason(r)?;
    }
    let action = match action {
        // Undrain has no meaning of its own in Kubernetes: an uncordon.
        NodeAction::Undrain => NodeAction::Resume,
        NodeAction::Cordon | NodeAction::Drain | NodeAction::Resume => action,
        other => {
            return Err(format!(
                "{} is not a Kubernetes action (cordon, drain, resume)",
                other.verb()
            ));
        }
    };
    // The reason rules are the Slurm drain's: a cordon is a drain's first half.
    let as_drain = if action == NodeAction::Resume {
        NodeAction::Resume
    } else {
        NodeAction::Drain
    };
    let checked = action::plan(as_drain, nodes, reason)?;
    let mut p = Plan::new(action, checked.nodes, checked.reason, Vec::new());
    p.scheduler = Scheduler::Kubernetes;
    p.gpu_pods_only = gpu_pods_only && action == NodeAction::Drain;
    stamp(&mut p, UNSTAMPED_BY, UNSTAMPED_AT);
    Ok(p)
}

/// The plan's calls with who and when filled in: what is logged and sent.
pub fn stamp(plan: &mut Plan, by: &str, at: &str) {
    plan.commands = plan.nodes.iter().flat_map(|n| calls(plan, n, by, at)).collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(unschedulable: bool, reason: Option<&str>) -> KubeNode {
        KubeNode {
            name: "gpu01".into(),
            unschedulable,
            fleetop: reason.map(|r| Annotation {
                reason: r.into(),
                by: Some("alice".into()),
                at: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_cordon_is_fleetops_only_with_its_annotation() {
        assert_eq!(node(false, Some("fleetop: x")).hold(), Hold::InService);
        assert_eq!(node(true, None).hold(), Hold::Other);
        // The annotation without the prefix is not fleetop's words.
        assert_eq!(node(true, Some("maintenance")).hold(), Hold::Other);
        assert_eq!(
            node(true, Some("fleetop: xid 79")).hold(),
            Hold::Fleetop {
                reason: "fleetop: xid 79"
            }
        );
        assert_eq!(
            node(true, Some("fleetop: xid 79")).held_by(),
            "cordoned by fleetop (alice): fleetop: xid 79"
        );
    }

    #[test]
    fn conditions_are_problems_by_their_polarity() {
        let c = |k: &str, s: &str| Condition {
            kind: k.into(),
            status: s.into(),
            reason: None,
            message: None,
        };
        assert!(c("Ready", "False").is_problem());
        assert!(c("Ready", "Unknown").is_problem());
        assert!(!c("Ready", "True").is_problem());
        assert!(c("MemoryPressure", "True").is_problem());
        assert!(!c("KernelDeadlock", "False").is_problem());
    }

    #[test]
    fn plans_need_a_reason_to_cordon_and_carry_the_calls() {
        assert!(plan(NodeAction::Cordon, vec!["gpu01".into()], None, false).is_err());
        assert!(plan(NodeAction::Bench, vec!["gpu01".into()], None, false).is_err());
        let p = plan(NodeAction::Drain, vec!["gpu01".into()], Some("xid 79".into()), true).expect("plan");
        assert_eq!(p.scheduler, Scheduler::Kubernetes);
        assert_eq!(p.reason.as_deref(), Some("fleetop: xid 79"));
        assert_eq!(p.commands[0][0..2], ["PATCH", "/api/v1/nodes/gpu01"]);
        assert!(p.commands[0][2].contains(r#""fleetop/reason":"fleetop: xid 79""#));
        // The quarantine: the taint (a JSON patch), the condition (the
        // status subresource), the Event; then the pods and evictions.
        assert_eq!(p.commands[1][0..2], ["PATCH", "/api/v1/nodes/gpu01"]);
        assert!(p.commands[1][2].contains(r#""/spec/taints/-""#), "{:?}", p.commands[1]);
        assert_eq!(p.commands[2][0..2], ["PATCH", "/api/v1/nodes/gpu01/status"]);
        assert!(p.commands[2][2].contains(r#""type":"FleetopQuarantine""#));
        assert_eq!(p.commands[3][0..2], ["POST", "/api/v1/namespaces/default/events"]);
        assert_eq!(
            p.commands[4],
            ["GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu01"]
        );
        assert!(p.commands[5][3].contains("holds a GPU"), "{:?}", p.commands[5]);
        let r = plan(NodeAction::Resume, vec!["gpu01".into()], None, true).expect("plan");
        assert!(!r.gpu_pods_only);
        assert!(r.commands[0][2].contains(r#""fleetop/reason":null"#));
        assert!(r.commands[1][2].contains(r#""op":"remove""#), "{:?}", r.commands[1]);
        assert!(r.commands[2][2].contains(r#""$patch":"delete""#), "{:?}", r.commands[2]);
    }

    #[test]
    fn a_drain_leaves_daemonset_mirror_and_finished_pods() {
        let pod = KubePod {
            namespace: "ml".into(),
            name: "train".into(),
            owner_kind: Some("Job".into()),
            mirror: false,
            holds_gpu: false,
            phase: Some("Running".into()),
        };
        assert_eq!(pod.left_by_drain(false), None);
        assert_eq!(pod.left_by_drain(true), Some("holds no GPU"));
        let ds = KubePod {
            owner_kind: Some("DaemonSet".into()),
            ..pod.clone()
        };
        assert_eq!(ds.left_by_drain(false), Some("DaemonSet pod"));
        let mirror = KubePod { mirror: true, ..pod };
        assert_eq!(mirror.left_by_drain(false), Some("mirror pod"));
    }
}
