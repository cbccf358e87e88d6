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

/// The calls for one node, in words: method, path, and body where there is
/// one. A drain's evictions depend on the pods on the node when it runs:
/// the plan names the listing and the rule; the report names each pod.
pub fn calls(plan: &Plan, node: &str, by: &str, at: &str) -> Vec<Vec<String>> {
    let patch = |body: serde_json::Value| vec!["PATCH".to_string(), node_path(node), body.to_string()];
    let cordon = || patch(cordon_body(plan.reason.as_deref().unwrap_or_default(), by, at));
    match plan.action {
        NodeAction::Cordon => vec![cordon()],
        NodeAction::Drain => {
            let which = if plan.gpu_pods_only {
                "each pod that holds a GPU (nvidia.com/gpu or nvidia.com/mig-*), not DaemonSet-owned, not a mirror pod"
            } else {
                "each pod not DaemonSet-owned and not a mirror pod"
            };
            vec![
                cordon(),
                vec!["GET".into(), pods_path(node)],
                vec![
                    "POST".into(),
                    eviction_path("{namespace}", "{pod}"),
                    eviction_body("{namespace}", "{pod}").to_string(),
                    format!("for {which}"),
                ],
            ]
        }
        NodeAction::Resume | NodeAction::Undrain => vec![patch(uncordon_body())],
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
        assert_eq!(
            p.commands[1],
            ["GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu01"]
        );
        assert!(p.commands[2][3].contains("holds a GPU"), "{:?}", p.commands[2]);
        let r = plan(NodeAction::Resume, vec!["gpu01".into()], None, true).expect("plan");
        assert!(!r.gpu_pods_only);
        assert!(r.commands[0][2].contains(r#""fleetop/reason":null"#));
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
