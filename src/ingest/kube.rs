//! Kubernetes (`--kubernetes`): the client from a kubeconfig or the pod's
//! service account, and the reads: the GPU nodes (one list of nodes) and a
//! node's pods (a list with the field selector `spec.nodeName`), decoded
//! into `model::kube` here and nowhere else. Only documented core/v1,
//! policy/v1 and coordination.k8s.io/v1 (the policy's Lease) calls are
//! used (docs/kubernetes.md lists them), so a real
//! cluster needs nothing the tests' fake API server does not serve.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::model::kube::{
    AT_ANNOTATION, Annotation, BY_ANNOTATION, Condition, GPU_PRESENT_LABEL, GPU_RESOURCE, KubeNode, KubePod,
    KubeSnapshot, MIG_RESOURCE_PREFIX, REASON_ANNOTATION, Taint,
};

/// Why Kubernetes could not be used, in one line.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig (or the in-cluster service account) could not be loaded.
    #[error("{0}")]
    Config(String),
    /// A call failed: unreachable, refused, or answered with an error.
    #[error("{0}")]
    Api(String),
}

/// Which Kubernetes to reach, and how often the console reads it.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// This kubeconfig instead of $KUBECONFIG or ~/.kube/config.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// This kubeconfig context instead of the current one.
    pub context: Option<String>,
    /// How often the console reads the nodes.
    pub refresh: Duration,
}

/// A client, and where it goes (for messages).
#[derive(Clone)]
pub struct Kube {
    pub client: kube::Client,
    /// The API server's URL, as the kubeconfig names it.
    pub server: String,
}

/// The kubeconfig to read: `--kubeconfig`, else `$KUBECONFIG` (a list of
/// files, merged, as kubectl does), else `~/.kube/config` where it exists;
/// `None`: none, so the pod's service account (in-cluster).
fn kubeconfig(args: &KubeOptions) -> Result<Option<(Kubeconfig, String)>, KubeError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| KubeError::Config(format!("kubeconfig {what}: {e}"));
    if let Some(p) = &args.kubeconfig {
        let what = p.display().to_string();
        return read_file(p).map_err(|e| bad(&what, &e)).map(|k| Some((k, what)));
    }
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let what = format!("{} ($KUBECONFIG)", v.to_string_lossy());
        return Kubeconfig::from_env()
            .map_err(|e| bad(&what, &error_chain(&e)))
            .map(|k| k.map(|k| (k, what)));
    }
    let home = dirs::home_dir().map(|h| h.join(".kube").join("config"));
    match home {
        Some(p) if p.exists() => {
            let what = p.display().to_string();
            read_file(&p).map_err(|e| bad(&what, &e)).map(|k| Some((k, what)))
        }
        _ => Ok(None),
    }
}

fn read_file(p: &Path) -> Result<Kubeconfig, String> {
    Kubeconfig::read_from(p).map_err(|e| error_chain(&e))
}

/// An error and its causes on one line, each said once.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cause = c.source();
    }
    parts.join(": ").replace('\n', " ")
}

/// The client for `args`: a kubeconfig (its current context, or
/// `--kube-context`), else the pod's service account. A kubeconfig that
/// cannot be read or used is an error naming it; it never falls back to
/// the service account, which would act as someone else.
pub async fn connect(args: &KubeOptions) -> Result<Kube, KubeError> {
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match kubeconfig(args)? {
        Some((kc, what)) => kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|e| KubeError::Config(format!("kubeconfig {what}: {}", error_chain(&e))))?,
        None if args.context.is_some() => {
            return Err(KubeError::Config(
                "--kube-context needs a kubeconfig: none given (--kubeconfig), $KUBECONFIG unset, no ~/.kube/config"
                    .into(),
            ));
        }
        None => kube::Config::incluster().map_err(|e| {
            KubeError::Config(format!(
                "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a pod with a service account: {}",
                error_chain(&e)
            ))
        })?,
    };
    // A console must say soon that the API server does not answer; each
    // call as a whole is bounded too (`Kube::bounded`): a server that
    // trickles a byte a second resets a read timeout for ever.
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(20));
    let server = config.cluster_url.to_string();
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| KubeError::Config(format!("Kubernetes client for {server}: {}", error_chain(&e))))?;
    // Every answer's body is bounded as it is read, never after it is held.
    let client = builder
        .with_layer(&tower::util::MapResponseLayer::new(limit_body))
        .build();
    Ok(Kube { client, server })
}

/// The longest one Kubernetes call may take, however its answer trickles.
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// The most bytes one Kubernetes answer may hold (a node list of 10,000
/// nodes is about 100 MiB; a pod list of one node far less).
pub const MAX_ANSWER_BYTES: usize = 128 << 20;

fn limit_body<B>(res: http::Response<B>) -> http::Response<http_body_util::Limited<B>> {
    res.map(|b| http_body_util::Limited::new(b, MAX_ANSWER_BYTES))
}

impl Kube {
    /// `call` within `CALL_DEADLINE`, or an error saying so.
    pub async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        match tokio::time::timeout(CALL_DEADLINE, call).await {
            Ok(r) => r,
            Err(_) => Err(kube::Error::Service(
                format!("no whole answer within {} s", CALL_DEADLINE.as_secs()).into(),
            )),
        }
    }

    /// One line for a failed call: who refused what, and for a 403 the
    /// RBAC rule that is missing (docs/kubernetes.md has the whole role).
    pub fn explain(&self, e: &kube::Error, verb: &str, resource: &str) -> String {
        // The API server's words (a 401's body, a status message) are from
        // outside: escaped before any terminal sees them.
        fleetop_proto::input::printable(&self.explain_raw(e, verb, resource), 2000)
    }

    fn explain_raw(&self, e: &kube::Error, verb: &str, resource: &str) -> String {
        match e {
            kube::Error::Api(s) => {
                let mut msg = if s.message.is_empty() {
                    s.reason.clone()
                } else {
                    s.message.clone()
                };
                // A refused eviction names its budget among the causes.
                let causes: Vec<&str> = s
                    .details
                    .iter()
                    .flat_map(|d| &d.causes)
                    .map(|c| c.message.as_str())
                    .filter(|m| !m.is_empty() && !msg.contains(m))
                    .collect();
                if !causes.is_empty() {
                    msg = format!("{msg} ({})", causes.join("; "));
                }
                match s.code {
                    401 => format!(
                        "401 Unauthorized from {}: the credentials were refused ({msg})",
                        self.server
                    ),
                    403 => format!("403 Forbidden: RBAC must allow '{verb}' on '{resource}' ({msg})"),
                    code => format!("{code} {}: {msg}", s.reason),
                }
            }
            kube::Error::HyperError(_) | kube::Error::Service(_) => {
                format!("cannot reach the API server at {}: {}", self.server, error_chain(e))
            }
            other => format!("{verb} {resource}: {}", error_chain(other)),
        }
    }

    /// The GPU nodes (`GET /api/v1/nodes`), by name.
    pub async fn gpu_nodes(&self) -> Result<KubeSnapshot, KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let list = self
            .bounded(api.list(&ListParams::default()))
            .await
            .map_err(|e| KubeError::Api(self.explain(&e, "list", "nodes")))?;
        let mut nodes: Vec<KubeNode> = list.items.iter().filter(|n| is_gpu_node(n)).map(decode_node).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(KubeSnapshot { nodes })
    }

    /// One node (`GET /api/v1/nodes/NAME`); `None` where the API server
    /// has no such node.
    pub async fn node(&self, name: &str) -> Result<Option<KubeNode>, KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        match self.bounded(api.get(name)).await {
            Ok(n) => Ok(Some(decode_node(&n))),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(KubeError::Api(self.explain(&e, "get", "nodes"))),
        }
    }

    /// The pods on `node`, in every namespace.
    pub async fn pods_on(&self, node: &str) -> Result<Vec<KubePod>, KubeError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let list = self
            .bounded(api.list(&lp))
            .await
            .map_err(|e| KubeError::Api(self.explain(&e, "list", "pods")))?;
        Ok(list.items.iter().map(decode_pod).collect())
    }

    /// The pods on `node` that hold a GPU and have not finished, by
    /// "namespace/name": a burn-in would take their GPUs.
    pub async fn gpu_pods_on(&self, node: &str) -> Result<Vec<String>, KubeError> {
        Ok(self
            .pods_on(node)
            .await?
            .iter()
            .filter(|p| p.holds_gpu && !matches!(p.phase.as_deref(), Some("Succeeded" | "Failed")))
            .map(|p| format!("pod {}", p.id()))
            .collect())
    }
}

fn is_gpu_node(n: &Node) -> bool {
    let advertised = n
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .is_some_and(|c| c.contains_key(GPU_RESOURCE));
    let labelled = n
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(GPU_PRESENT_LABEL))
        .is_some_and(|v| v == "true");
    advertised || labelled
}

/// A count of GPUs from a quantity; absent (not 0) where it is not a
/// whole number, which the device plugin never advertises.
fn gpus(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Option<u32> {
    q.and_then(|q| q.0.trim().parse().ok())
}

/// A node from the API's object.
pub fn decode_node(n: &Node) -> KubeNode {
    let status = n.status.as_ref();
    let spec = n.spec.as_ref();
    let annotations = n.metadata.annotations.as_ref();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
    KubeNode {
        name: n.metadata.name.clone().unwrap_or_default(),
        addresses: status
            .and_then(|s| s.addresses.as_ref())
            .map(|a| {
                a.iter()
                    .filter(|a| a.type_ == "InternalIP" || a.type_ == "Hostname")
                    .map(|a| a.address.clone())
                    .collect()
            })
            .unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        gpu_capacity: gpus(
            status
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get(GPU_RESOURCE)),
        ),
        gpu_allocatable: gpus(
            status
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|c| c.get(GPU_RESOURCE)),
        ),
        conditions: status
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| Condition {
                        kind: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone().filter(|r| !r.is_empty()),
                        message: c.message.clone().filter(|m| !m.is_empty()),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone().filter(|v| !v.is_empty()),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        fleetop: annotation(REASON_ANNOTATION).map(|reason| Annotation {
            reason,
            by: annotation(BY_ANNOTATION),
            at: annotation(AT_ANNOTATION),
        }),
    }
}

/// A pod from the API's object.
pub fn decode_pod(p: &Pod) -> KubePod {
    let owner_kind = p.metadata.owner_references.as_ref().and_then(|os| {
        os.iter()
            .find(|o| o.controller == Some(true))
            .or_else(|| os.first())
            .map(|o| o.kind.clone())
    });
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let gpu_key = |k: &String| k == GPU_RESOURCE || k.starts_with(MIG_RESOURCE_PREFIX);
    let holds_gpu = p.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .filter_map(|c| c.resources.as_ref())
            .any(|r| {
                [r.requests.as_ref(), r.limits.as_ref()]
                    .into_iter()
                    .flatten()
                    .any(|m| m.keys().any(gpu_key))
            })
    });
    KubePod {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        owner_kind,
        mirror,
        holds_gpu,
        phase: p.status.as_ref().and_then(|s| s.phase.clone()),
    }
}
