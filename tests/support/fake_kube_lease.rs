//! The fake API server's coordination.k8s.io/v1 Leases, as the API server
//! keeps them (a resourceVersion changed by every write, 409 AlreadyExists
//! on a second create, 409 Conflict on a replace or delete whose
//! resourceVersion is not the stored one, 404 NotFound), and RBAC rules
//! enforced per token, as the shipped ClusterRole and Role say.

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};

/// One RBAC rule: API groups, resources, verbs (and the namespace of the
/// Role it came from; `None`: a ClusterRole, every namespace).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    pub namespace: Option<String>,
}

/// What a request asks, as RBAC names it: the verb, the API group, the
/// resource (with its subresource), the namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// The access a request asks for; `None` for a path the fake does not know.
pub fn access(method: &str, path: &str) -> Option<Access> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", g, "v1", rest @ ..] => (*g, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        r => (None, r),
    };
    let (resource, name) = match rest {
        [r] => (r.to_string(), String::new()),
        [r, n] => (r.to_string(), n.to_string()),
        [r, n, sub] => (format!("{r}/{sub}"), n.to_string()),
        _ => return None,
    };
    let verb = match (method, name.is_empty()) {
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    Some(Access {
        verb: verb.into(),
        group: group.into(),
        resource,
        namespace,
        name,
    })
}

/// Whether `rules` allow `a`.
pub fn allowed(rules: &[Rule], a: &Access) -> bool {
    rules.iter().any(|r| {
        r.groups.iter().any(|g| g == &a.group || g == "*")
            && r.resources.iter().any(|x| x == &a.resource || x == "*")
            && r.verbs.iter().any(|v| v == &a.verb || v == "*")
            && (r.namespace.is_none() || r.namespace == a.namespace)
    })
}

/// The 403 RBAC answers, in the API server's words.
pub fn forbidden(a: &Access) -> (u16, Value) {
    let user = "system:serviceaccount:fleetop:fleetop-console";
    let res = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let scope = match &a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".into(),
    };
    let msg = format!(
        "{res} \"{}\" is forbidden: User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
        a.name, a.verb, a.resource, a.group
    );
    (403, status(403, "Forbidden", &msg))
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code < 300 {"Success"} else {"Failure"},
        "code": code, "reason": reason, "message": message,
        "details": {"group": "coordination.k8s.io", "kind": "leases"},
    })
}

/// The rules of the ClusterRoles and Roles in a YAML file of several
/// documents (`deploy/kubernetes/components/console-rbac/rbac.yaml`).
pub fn rules_of(yaml: &str) -> Vec<Rule> {
    let mut out = Vec::new();
    for doc in yaml.split("\n---\n") {
        let d: Value = serde_yaml::from_str(doc).expect("yaml");
        let ns = match d["kind"].as_str() {
            Some("ClusterRole") => None,
            Some("Role") => Some(d["metadata"]["namespace"].as_str().unwrap_or("default").to_string()),
            _ => continue,
        };
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        };
        for r in d["rules"].as_array().into_iter().flatten() {
            out.push(Rule {
                groups: strings(&r["apiGroups"]),
                resources: strings(&r["resources"]),
                verbs: strings(&r["verbs"]),
                namespace: ns.clone(),
            });
        }
    }
    out
}

/// The Leases, by "namespace/name", and the resourceVersion counter.
#[derive(Default)]
pub struct Leases {
    pub stored: std::collections::BTreeMap<String, Value>,
    pub version: u64,
    /// Before the next replace, another watch writes the Lease as this
    /// holder (renewed now): the replace then meets a 409 Conflict.
    pub race: Option<String>,
}

fn now_micro() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn conflict(name: &str) -> (u16, Value) {
    let msg = format!(
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    );
    (409, status(409, "Conflict", &msg))
}

impl Leases {
    fn next(&mut self) -> String {
        self.version += 1;
        (7000 + self.version).to_string()
    }

    /// One call on `/apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]`.
    pub fn route(&mut self, method: &str, ns: &str, name: Option<&str>, body: Option<&Value>) -> (u16, Value) {
        let not_found = |n: &str| {
            (
                404,
                status(
                    404,
                    "NotFound",
                    &format!("leases.coordination.k8s.io \"{n}\" not found"),
                ),
            )
        };
        let valid = |b: Option<&Value>| -> Result<Value, (u16, Value)> {
            let b = b.cloned().unwrap_or(Value::Null);
            serde_json::from_value::<Lease>(b.clone()).map(|_| b).map_err(|e| {
                (
                    422,
                    status(422, "Invalid", &format!("not a coordination.k8s.io/v1 Lease: {e}")),
                )
            })
        };
        match (method, name) {
            ("GET", Some(n)) => match self.stored.get(&format!("{ns}/{n}")) {
                Some(l) => (200, l.clone()),
                None => not_found(n),
            },
            ("POST", None) => {
                let mut l = match valid(body) {
                    Ok(l) => l,
                    Err(e) => return e,
                };
                let Some(n) = l["metadata"]["name"].as_str().map(String::from) else {
                    return (422, status(422, "Invalid", "metadata.name: Required value"));
                };
                let key = format!("{ns}/{n}");
                if self.stored.contains_key(&key) {
                    let msg = format!("leases.coordination.k8s.io \"{n}\" already exists");
                    return (409, status(409, "AlreadyExists", &msg));
                }
                l["metadata"]["namespace"] = json!(ns);
                l["metadata"]["uid"] = json!(format!("uid-lease-{n}"));
                l["metadata"]["resourceVersion"] = json!(self.next());
                l["metadata"]["creationTimestamp"] = json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string());
                self.stored.insert(key, l.clone());
                (201, l)
            }
            ("PUT", Some(n)) => {
                let key = format!("{ns}/{n}");
                if !self.stored.contains_key(&key) {
                    return not_found(n);
                }
                if let Some(h) = self.race.take() {
                    let rv = self.next();
                    let l = self.stored.get_mut(&key).expect("lease");
                    l["spec"]["holderIdentity"] = json!(h);
                    l["spec"]["renewTime"] = json!(now_micro());
                    l["spec"]["leaseDurationSeconds"] = json!(60);
                    l["metadata"]["resourceVersion"] = json!(rv);
                }
                let mut l = match valid(body) {
                    Ok(l) => l,
                    Err(e) => return e,
                };
                let stored = &self.stored[&key];
                if l["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"] {
                    return conflict(n);
                }
                for k in ["uid", "creationTimestamp", "namespace"] {
                    l["metadata"][k] = stored["metadata"][k].clone();
                }
                l["metadata"]["resourceVersion"] = json!(self.next());
                self.stored.insert(key, l.clone());
                (200, l)
            }
            ("DELETE", Some(n)) => {
                let key = format!("{ns}/{n}");
                let Some(stored) = self.stored.get(&key) else {
                    return not_found(n);
                };
                let want = body.map(|b| b["preconditions"]["resourceVersion"].clone());
                if want
                    .as_ref()
                    .is_some_and(|w| !w.is_null() && *w != stored["metadata"]["resourceVersion"])
                {
                    return conflict(n);
                }
                self.stored.remove(&key);
                (200, status(200, "", ""))
            }
            _ => (
                405,
                status(405, "MethodNotAllowed", "the server does not allow this method"),
            ),
        }
    }
}
