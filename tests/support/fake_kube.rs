//! An in-process fake Kubernetes API server: plain HTTP/1.1 on loopback,
//! serving only the calls fleetop makes (list and get nodes; a node's
//! merge, JSON (RFC 6902) and strategic merge patches, `nodes/status`
//! apart, as the API server keeps them; list pods by `spec.nodeName`;
//! create a policy/v1 Eviction, refused with a 429 naming the budget as
//! the API server's eviction registry words it; create a core/v1 Event),
//! with bodies shaped as Kubernetes' OpenAPI defines v1 Node, NodeList,
//! PodList, Event and meta/v1 Status (each request and answer read into
//! k8s-openapi's types), and a record of every request it got. No real API
//! server can run on these machines: this is what the Kubernetes path is
//! tested against (docs/kubernetes.md says so).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::api::policy::v1::Eviction;
use serde_json::{Value, json};

use super::fake_kube_lease::{Leases, Rule, access, allowed, forbidden};
use super::fake_kube_patch::{json_patch, strategic_merge};

/// One request as the fake got it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub content_type: Option<String>,
    pub body: Option<Value>,
}

#[derive(Default)]
pub struct State {
    pub nodes: BTreeMap<String, Value>,
    pub pods: Vec<Value>,
    /// Pods ("ns/name") a PodDisruptionBudget protects, and the budget's
    /// name: their eviction is a 429 naming it among its causes.
    pub pdb: BTreeMap<String, &'static str>,
    /// Bearer tokens and what each may do: "admin" everything, "viewer"
    /// only get and list, "cordoner" what fleetop needed before its
    /// quarantine (no `nodes/status`, no `events`): a 403 for the rest, as
    /// RBAC answers.
    pub tokens: BTreeMap<String, &'static str>,
    /// Bearer tokens held to RBAC rules (a ClusterRole's and a Role's, as
    /// `fake_kube_lease::rules_of` reads them): a call no rule allows is
    /// a 403 naming the verb and resource; the others are served.
    pub rules: BTreeMap<String, Vec<Rule>>,
    /// The Events created (core/v1), as stored.
    pub events: Vec<Value>,
    /// The coordination.k8s.io/v1 Leases.
    pub leases: Leases,
    /// A request whose path holds this is read and never answered: an API
    /// server that stops answering mid-way.
    pub stall: Option<&'static str>,
    pub requests: Vec<Req>,
}

pub struct FakeApi {
    pub port: u16,
    pub state: Arc<Mutex<State>>,
}

pub const ADMIN_TOKEN: &str = "fleetop-test-admin";
pub const VIEWER_TOKEN: &str = "fleetop-test-viewer";
pub const CORDONER_TOKEN: &str = "fleetop-test-cordoner";
pub const TAINTER_TOKEN: &str = "fleetop-test-tainter";

/// A v1 Node: `gpus` of nvidia.com/gpu (None: a CPU node), `cordon`
/// (unschedulable) with these annotations.
pub fn node(name: &str, ip: &str, gpus: Option<u32>, unschedulable: bool, annotations: Value) -> Value {
    let mut capacity = json!({"cpu": "64", "memory": "528157432Ki", "pods": "110"});
    if let Some(g) = gpus {
        capacity["nvidia.com/gpu"] = json!(g.to_string());
    }
    let mut allocatable = capacity.clone();
    if let Some(g) = gpus {
        // One GPU held back: allocatable below capacity, as a failed GPU leaves it.
        allocatable["nvidia.com/gpu"] = json!(g.saturating_sub(1).to_string());
    }
    let mut spec = json!({"podCIDR": "10.244.1.0/24"});
    if unschedulable {
        spec["unschedulable"] = json!(true);
        spec["taints"] = json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-11-25T08:00:00Z"}]);
    }
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": format!("uid-{name}"),
            "resourceVersion": "1000",
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": if gpus.is_some() {"true"} else {"false"}},
            "annotations": annotations,
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-11-25T09:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-25T09:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name}
            ]
        }
    })
}

/// A v1 Pod on `node`: owned by `owner` (kind), holding `gpus`.
pub fn pod(ns: &str, name: &str, node: &str, owner: Option<&str>, gpus: u32, mirror: bool) -> Value {
    let mut meta = json!({"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"), "resourceVersion": "2000"});
    if let Some(kind) = owner {
        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": format!("{name}-owner"), "uid": "uid-owner", "controller": true, "blockOwnerDeletion": true}]);
    }
    if mirror {
        meta["annotations"] = json!({"kubernetes.io/config.mirror": "abc123", "kubernetes.io/config.source": "file"});
    }
    let mut resources = json!({"requests": {"cpu": "1"}});
    if gpus > 0 {
        resources["limits"] = json!({"nvidia.com/gpu": gpus.to_string()});
    }
    json!({
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.example/app:1", "resources": resources}]},
        "status": {"phase": "Running"}
    })
}

fn status(code: u16, reason: &str, message: &str, details: Value) -> Value {
    let mut s = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code < 300 {"Success"} else {"Failure"},
        "code": code
    });
    if !message.is_empty() {
        s["message"] = json!(message);
    }
    if !reason.is_empty() {
        s["reason"] = json!(reason);
    }
    if !details.is_null() {
        s["details"] = details;
    }
    s
}

fn not_found(kind: &str, name: &str) -> (u16, Value) {
    (
        404,
        status(
            404,
            "NotFound",
            &format!("{kind} \"{name}\" not found"),
            json!({"name": name, "kind": kind}),
        ),
    )
}

fn invalid(message: &str) -> (u16, Value) {
    (422, status(422, "Invalid", message, Value::Null))
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn decode_query(q: &str) -> String {
    let mut out = Vec::new();
    let b = q.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&q[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl State {
    /// A PATCH of a node (`status`: of its status subresource): the three
    /// patch types the API server takes; the main resource keeps its status
    /// and the subresource changes only status, as the API server does. The
    /// result must read as a v1 Node, or it is a 422 and nothing changes.
    fn patch_node(&mut self, name: &str, req: &Req, status_only: bool) -> (u16, Value) {
        let Some(before) = self.nodes.get(name).cloned() else {
            return not_found("nodes", name);
        };
        let patch = req.body.clone().unwrap_or(Value::Null);
        let mut n = before.clone();
        let applied = match req.content_type.as_deref() {
            Some("application/merge-patch+json") => {
                merge(&mut n, &patch);
                Ok(())
            }
            Some("application/json-patch+json") => json_patch(&mut n, &patch),
            Some("application/strategic-merge-patch+json") => strategic_merge(&mut n, &patch),
            _ => {
                return (
                    415,
                    status(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format",
                        Value::Null,
                    ),
                );
            }
        };
        if let Err(e) = applied {
            return invalid(&e);
        }
        if status_only {
            let st = n["status"].clone();
            n = before.clone();
            n["status"] = st;
        } else {
            n["status"] = before["status"].clone();
        }
        if let Err(e) = serde_json::from_value::<Node>(n.clone()) {
            return invalid(&format!("Node \"{name}\" is invalid: {e}"));
        }
        let rv: u64 = before["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        n["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        self.nodes.insert(name.to_string(), n.clone());
        (200, n)
    }

    /// A core/v1 Event: read as one, in its namespace, about an object;
    /// `generateName` named as the API server does.
    fn create_event(&mut self, ns: &str, req: &Req) -> (u16, Value) {
        let mut e = req.body.clone().unwrap_or(Value::Null);
        if let Err(err) = serde_json::from_value::<Event>(e.clone()) {
            return invalid(&format!("not a core/v1 Event: {err}"));
        }
        if e["metadata"]["namespace"].as_str().is_some_and(|n| n != ns) {
            return invalid("the namespace of the provided object does not match the namespace sent on the request");
        }
        if e["involvedObject"]["kind"].as_str().is_none() || e["reason"].as_str().is_none() {
            return invalid("Event is invalid: involvedObject.kind and reason are required");
        }
        if e["metadata"]["name"].as_str().is_none() {
            let Some(prefix) = e["metadata"]["generateName"].as_str() else {
                return invalid("Event is invalid: metadata.name: Required value");
            };
            e["metadata"]["name"] = json!(format!("{prefix}{:05x}", self.events.len() + 1));
        }
        e["metadata"]["namespace"] = json!(ns);
        e["metadata"]["uid"] = json!(format!("uid-event-{}", self.events.len() + 1));
        self.events.push(e.clone());
        (201, e)
    }

    /// Answers one request as the API server would (`token`: the bearer).
    pub fn route(&mut self, req: &Req, token: Option<&str>) -> (u16, Value) {
        let (path, query) = req.target.split_once('?').unwrap_or((&req.target, ""));
        let role = match token.and_then(|t| self.rules.get(t)) {
            Some(rules) => {
                if let Some(a) = access(&req.method, path)
                    && !allowed(rules, &a)
                {
                    return forbidden(&a);
                }
                Some("admin")
            }
            None => token.and_then(|t| self.tokens.get(t)).copied(),
        };
        let Some(role) = role else {
            return (401, status(401, "Unauthorized", "Unauthorized", Value::Null));
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let forbid = |verb: &str, resource: &str, name: &str| {
            let user = "system:serviceaccount:ops:viewer";
            (
                403,
                status(
                    403,
                    "Forbidden",
                    &format!(
                        "{resource} \"{name}\" is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"\" at the cluster scope"
                    ),
                    json!({"name": name, "kind": resource}),
                ),
            )
        };
        match (req.method.as_str(), parts.as_slice()) {
            ("GET", ["api", "v1", "nodes"]) => {
                let items: Vec<Value> = self
                    .nodes
                    .values()
                    .map(|n| {
                        let mut n = n.clone();
                        // Items of a list carry no kind or apiVersion of their own.
                        n.as_object_mut().map(|o| (o.remove("kind"), o.remove("apiVersion")));
                        n
                    })
                    .collect();
                (
                    200,
                    json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "5000"}, "items": items}),
                )
            }
            ("GET", ["api", "v1", "nodes", name]) => match self.nodes.get(*name) {
                Some(n) => (200, n.clone()),
                None => not_found("nodes", name),
            },
            ("PATCH", ["api", "v1", "nodes", name]) => {
                if role == "viewer" {
                    return forbid("patch", "nodes", name);
                }
                self.patch_node(name, req, false)
            }
            ("PATCH", ["api", "v1", "nodes", name, "status"]) => {
                if role != "admin" && role != "tainter" {
                    return forbid("patch", "nodes/status", name);
                }
                self.patch_node(name, req, true)
            }
            ("POST", ["api", "v1", "namespaces", ns, "events"]) => {
                if role != "admin" {
                    let user = format!("system:serviceaccount:ops:{role}");
                    let msg = format!(
                        "events is forbidden: User \"{user}\" cannot create resource \"events\" in API group \"\" in the namespace \"{ns}\""
                    );
                    return (403, status(403, "Forbidden", &msg, json!({"kind": "events"})));
                }
                self.create_event(ns, req)
            }
            ("GET", ["api", "v1", "namespaces", ns, "events"]) => {
                if role == "cordoner" || role == "tainter" {
                    return forbid("list", "events", "");
                }
                // A field selector on the reason, as the API server takes it.
                let q = decode_query(query);
                let reason = q
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldSelector=reason="))
                    .map(str::to_string);
                let items: Vec<Value> = self
                    .events
                    .iter()
                    .filter(|e| e["metadata"]["namespace"] == *ns)
                    .filter(|e| reason.as_deref().is_none_or(|r| e["reason"] == r))
                    .cloned()
                    .collect();
                (
                    200,
                    json!({"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "8000"}, "items": items}),
                )
            }
            (
                m,
                [
                    "apis",
                    "coordination.k8s.io",
                    "v1",
                    "namespaces",
                    ns,
                    "leases",
                    rest @ ..,
                ],
            ) if rest.len() <= 1 => {
                if role != "admin" && m != "GET" {
                    return forbid("update", "leases", rest.first().copied().unwrap_or(""));
                }
                let (ns, name) = (ns.to_string(), rest.first().map(|n| n.to_string()));
                self.leases.route(m, &ns, name.as_deref(), req.body.as_ref())
            }
            ("GET", ["api", "v1", "pods"]) => {
                let q = decode_query(query);
                let on = q
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldSelector=spec.nodeName="))
                    .map(str::to_string);
                let items: Vec<Value> = self
                    .pods
                    .iter()
                    .filter(|p| on.as_deref().is_none_or(|n| p["spec"]["nodeName"] == n))
                    .cloned()
                    .collect();
                (
                    200,
                    json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "6000"}, "items": items}),
                )
            }
            ("POST", ["api", "v1", "namespaces", ns, "pods", name, "eviction"]) => {
                if role == "viewer" {
                    return forbid("create", "pods/eviction", name);
                }
                let id = format!("{ns}/{name}");
                let body = req.body.clone().unwrap_or_default();
                if let Err(e) = serde_json::from_value::<Eviction>(body.clone()) {
                    return invalid(&format!("not a policy/v1 Eviction: {e}"));
                }
                if body["metadata"]["name"] != *name {
                    return invalid("the Eviction's name is not the pod's");
                }
                let Some(i) = self
                    .pods
                    .iter()
                    .position(|p| p["metadata"]["namespace"] == *ns && p["metadata"]["name"] == *name)
                else {
                    return not_found("pods", name);
                };
                if let Some(budget) = self.pdb.get(&id) {
                    let cause = format!("The disruption budget {budget} needs 2 healthy pods and has 2 currently");
                    return (
                        429,
                        status(
                            429,
                            "TooManyRequests",
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]}),
                        ),
                    );
                }
                self.pods.remove(i);
                (201, status(201, "", "", Value::Null))
            }
            _ => (
                404,
                status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                    Value::Null,
                ),
            ),
        }
    }
}

impl FakeApi {
    pub fn start(state: State) -> FakeApi {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(state));
        let s = state.clone();
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        FakeApi { port, state }
    }

    /// A fleet: gpu01 (schedulable) with pods, gpu02 cordoned by someone
    /// else, cpu01 (no GPU), an admin and a viewer token.
    pub fn fleet() -> FakeApi {
        let mut st = State::default();
        st.tokens.insert(ADMIN_TOKEN.into(), "admin");
        st.tokens.insert(VIEWER_TOKEN.into(), "viewer");
        st.tokens.insert(CORDONER_TOKEN.into(), "cordoner");
        st.tokens.insert(TAINTER_TOKEN.into(), "tainter");
        for n in [
            node(
                "gpu01",
                "10.0.0.1",
                Some(8),
                false,
                json!({"node.alpha.kubernetes.io/ttl": "0"}),
            ),
            node(
                "gpu02",
                "10.0.0.2",
                Some(8),
                true,
                json!({"example.com/maintenance": "alice: PSU swap"}),
            ),
            node("cpu01", "10.0.0.9", None, false, json!({})),
        ] {
            st.nodes
                .insert(n["metadata"]["name"].as_str().expect("name").to_string(), n);
        }
        st.pods = vec![
            pod("ml", "train-0", "gpu01", Some("StatefulSet"), 4, false),
            pod("ml", "train-1", "gpu01", Some("StatefulSet"), 4, false),
            pod("web", "cache", "gpu01", Some("ReplicaSet"), 0, false),
            pod("kube-system", "dcgm-exporter-x", "gpu01", Some("DaemonSet"), 0, false),
            pod("kube-system", "kube-proxy-gpu01", "gpu01", Some("Node"), 0, true),
            pod("ml", "other", "gpu02", Some("ReplicaSet"), 8, false),
        ];
        FakeApi::start(st)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Req> {
        self.state.lock().expect("lock").requests.clone()
    }

    /// The requests that would change something (not GET).
    pub fn writes(&self) -> Vec<Req> {
        self.requests().into_iter().filter(|r| r.method != "GET").collect()
    }

    pub fn node(&self, name: &str) -> Value {
        self.state.lock().expect("lock").nodes[name].clone()
    }

    pub fn pods_on(&self, node: &str) -> Vec<String> {
        let st = self.state.lock().expect("lock");
        st.pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node)
            .map(|p| {
                format!(
                    "{}/{}",
                    p["metadata"]["namespace"].as_str().unwrap_or(""),
                    p["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    }
}

/// A kubeconfig for `server` with `token`, written into `dir`.
pub fn kubeconfig(dir: &std::path::Path, server: &str, token: &str) -> std::path::PathBuf {
    let p = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: fake\n  cluster:\n    server: {server}\ncontexts:\n- name: test\n  context:\n    cluster: fake\n    user: ops\nusers:\n- name: ops\n  user:\n    token: {token}\n"
    );
    std::fs::write(&p, text).expect("write kubeconfig");
    p
}

fn serve(mut conn: TcpStream, state: &Mutex<State>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let target = first.next().unwrap_or("").to_string();
    let mut headers = BTreeMap::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while buf.len() < head_end + len {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = &buf[head_end..head_end + len];
    let req = Req {
        method,
        target,
        content_type: headers.get("content-type").cloned(),
        body: (!body.is_empty()).then(|| serde_json::from_slice(body).unwrap_or(Value::Null)),
    };
    let token = headers
        .get("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::to_string);
    let (code, value) = {
        let mut st = state.lock().expect("lock");
        st.requests.push(req.clone());
        if st.stall.is_some_and(|s| req.target.contains(s)) {
            drop(st);
            std::thread::sleep(Duration::from_secs(90));
            return;
        }
        st.route(&req, token.as_deref())
    };
    let text = serde_json::to_vec(&value).expect("json");
    let reason = match code {
        200 => "OK",
        201 => "Created",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        415 => "Unsupported Media Type",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    )
    .into_bytes();
    out.extend_from_slice(&text);
    let _ = conn.write_all(&out);
}
