//! A Ray cluster, read from two places of Ray's own: the GCS's autoscaler
//! state service (gRPC: each node's status, draining included, and its GPUs
//! total and available; also where a drain is sent) and the dashboard's
//! state API (HTTP: node names, the actors and running tasks that hold GPUs
//! with their pids, the jobs). Decoded once into `model::ray`.
//!
//! Ray's GCS (2.60 at least) aborts on a DrainNode whose node id is not 28
//! bytes, and accepts one for a node it does not know: fleetop sends only
//! ids it read from Ray itself, checked here, and reads the node back.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetop_proto::ray as pb;
use serde::Deserialize;

use crate::ingest::scrape;
use crate::model::ray::{RayJob, RayNode, RayNodeStatus, RaySnapshot, RayWork, RayWorkKind};

/// The GCS port where `--ray-gcs` gives none (Ray's default `--port`).
pub const DEFAULT_GCS_PORT: u16 = 6379;
/// The most bytes of answers one refresh of Ray's dashboard reads, its
/// four lists together (each read after the other, so held one at a time).
pub const MAX_ANSWER: usize = 64 << 20;
/// How many rows a state API list may return (its default is 100).
const LIST_LIMIT: u32 = 10_000;
/// Ray's node ids are 28 bytes.
const NODE_ID_BYTES: usize = 28;

#[derive(Debug, thiserror::Error)]
pub enum RayError {
    #[error("--ray {0}: not an http(s) URL of Ray's dashboard")]
    BadUrl(String),
    #[error("Ray's dashboard at {url}: {error}")]
    Dashboard { url: String, error: String },
    #[error("Ray's GCS at {addr}: {error}")]
    Gcs { addr: String, error: String },
    #[error("{0}: not a Ray node id (Ray's are 56 hex digits)")]
    BadNodeId(String),
    #[error("Ray (dashboard {url}, GCS {addr}): no whole answer within {secs} s")]
    Deadline { url: String, addr: String, secs: u64 },
}

/// One Ray cluster: its dashboard's URL and its GCS's address.
#[derive(Debug, Clone)]
pub struct Ray {
    pub dashboard: String,
    pub gcs: String,
    pub timeout: Duration,
    client: reqwest::Client,
}

/// What the GCS said to a drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainAnswer {
    Accepted,
    /// Ray's own words ("The node to be idle terminated is no longer idle.").
    Rejected(String),
}

impl Ray {
    /// `dashboard` is the dashboard's HTTP address (`http://head:8265`);
    /// `gcs` the GCS's `host:port`, by default the dashboard's host at 6379.
    pub fn new(dashboard: &str, gcs: Option<&str>, timeout: Duration) -> Result<Ray, RayError> {
        let url = dashboard.trim_end_matches('/');
        let host = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .map(|rest| rest.split('/').next().unwrap_or(""))
            .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
            .ok_or_else(|| RayError::BadUrl(dashboard.into()))?;
        let gcs = match gcs {
            Some(g) => g.to_string(),
            None => {
                // The dashboard's host, without its port ([v6]:port kept bracketed).
                let bare = match host.rsplit_once(':') {
                    Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) && !h.is_empty() => h,
                    _ => host,
                };
                format!("{bare}:{DEFAULT_GCS_PORT}")
            }
        };
        let client = scrape::client(timeout).map_err(|error| RayError::Dashboard { url: url.into(), error })?;
        Ok(Ray {
            dashboard: url.to_string(),
            gcs,
            timeout,
            client,
        })
    }

    /// Everything at once: the GCS's node states, then the dashboard's
    /// names, work and jobs.
    ///
    /// Bounded as a whole: within `timeout` (a GCS that accepts and never
    /// answers, a dashboard that trickles: an error saying so), and the
    /// dashboard's four answers read one after another within one budget of
    /// `MAX_ANSWER` bytes, so a refresh holds at most that of answers.
    pub async fn read(&self) -> Result<RaySnapshot, RayError> {
        let dashboard = async {
            let mut budget = MAX_ANSWER;
            let nodes = self.list::<StateNode>("nodes", "", &mut budget).await?;
            let actors = self
                .list::<StateActor>(
                    "actors",
                    "&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE",
                    &mut budget,
                )
                .await?;
            let tasks = self
                .list::<StateTask>(
                    "tasks",
                    "&filter_keys=state&filter_predicates=%3D&filter_values=RUNNING",
                    &mut budget,
                )
                .await?;
            let jobs = self.jobs(&mut budget).await?;
            Ok::<_, RayError>((nodes, actors, tasks, jobs))
        };
        let both = async { tokio::try_join!(self.node_states(), dashboard) };
        let (states, (nodes, actors, tasks, jobs)) = self.within(both).await?;
        Ok(snapshot(states, nodes, actors, tasks, jobs))
    }

    /// `call` within the reader's timeout, or `RayError::Deadline`.
    async fn within<T>(&self, call: impl std::future::Future<Output = Result<T, RayError>>) -> Result<T, RayError> {
        tokio::time::timeout(self.timeout, call).await.unwrap_or_else(|_| {
            Err(RayError::Deadline {
                url: self.dashboard.clone(),
                addr: self.gcs.clone(),
                secs: self.timeout.as_secs().max(1),
            })
        })
    }

    /// The GCS's view of every node, by hex id.
    async fn node_states(&self) -> Result<BTreeMap<String, pb::NodeState>, RayError> {
        let mut client = self.gcs_client().await?;
        let reply = client
            .get_cluster_status(pb::GetClusterStatusRequest {})
            .await
            .map_err(|s| self.gcs_error(&s))?
            .into_inner();
        let nodes = reply.cluster_resource_state.map(|c| c.node_states).unwrap_or_default();
        Ok(nodes.into_iter().map(|n| (hex(&n.node_id), n)).collect())
    }

    /// Asks the GCS to drain node `id` (hex, as read from Ray): Ray places
    /// no new work on it, and `deadline_ms` (0: none) says when the node
    /// will go. Ray always accepts PREEMPTION; it refuses an idle
    /// termination (`idle_only`) once anything runs there.
    pub async fn drain(
        &self,
        id: &str,
        message: &str,
        deadline_ms: i64,
        idle_only: bool,
    ) -> Result<DrainAnswer, RayError> {
        let node_id = node_id_bytes(id)?;
        let reply = self
            .within(async {
                let mut client = self.gcs_client().await?;
                client
                    .drain_node(pb::DrainNodeRequest {
                        node_id,
                        reason: if idle_only {
                            pb::DrainNodeReason::IdleTermination as i32
                        } else {
                            pb::DrainNodeReason::Preemption as i32
                        },
                        reason_message: message.to_string(),
                        deadline_timestamp_ms: deadline_ms,
                    })
                    .await
                    .map_err(|s| self.gcs_error(&s))
            })
            .await?
            .into_inner();
        Ok(if reply.is_accepted {
            DrainAnswer::Accepted
        } else {
            DrainAnswer::Rejected(reply.rejection_reason_message)
        })
    }

    async fn gcs_client(
        &self,
    ) -> Result<pb::autoscaler_state_service_client::AutoscalerStateServiceClient<tonic::transport::Channel>, RayError>
    {
        let err = |error: String| RayError::Gcs {
            addr: self.gcs.clone(),
            error,
        };
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.gcs))
            .map_err(|e| err(e.to_string()))?
            .connect_timeout(self.timeout)
            .timeout(self.timeout)
            .connect()
            .await
            .map_err(|e| err(format!("cannot connect ({})", fleetop_proto::input::error_line(&e))))?;
        Ok(pb::autoscaler_state_service_client::AutoscalerStateServiceClient::new(
            channel,
        ))
    }

    fn gcs_error(&self, s: &tonic::Status) -> RayError {
        RayError::Gcs {
            addr: self.gcs.clone(),
            error: fleetop_proto::input::printable(&format!("{:?}: {}", s.code(), s.message()), 500),
        }
    }

    /// One answer of at most what is left of `budget` bytes, taken from it.
    async fn get(&self, path: &str, budget: &mut usize) -> Result<Vec<u8>, RayError> {
        let url = format!("{}{path}", self.dashboard);
        let err = |error: String| RayError::Dashboard {
            url: self.dashboard.clone(),
            error: fleetop_proto::input::printable(&error, 500),
        };
        let answer = scrape::get_capped(&self.client, &url, "application/json", *budget, self.timeout)
            .await
            .map_err(|e| err(format!("{path}: {e}")))?;
        *budget = budget.saturating_sub(answer.body.len());
        if !answer.status.is_success() {
            let body = String::from_utf8_lossy(&answer.body);
            let first = body.lines().next().unwrap_or("").chars().take(200).collect::<String>();
            return Err(err(format!("{path}: HTTP {} {first}", answer.status)));
        }
        Ok(answer.body)
    }

    /// One list of the state API (`/api/v0/{what}`).
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        filter: &str,
        budget: &mut usize,
    ) -> Result<Vec<T>, RayError> {
        let path = format!("/api/v0/{what}?detail=1&limit={LIST_LIMIT}{filter}");
        let body = self.get(&path, budget).await?;
        let bad = |error: String| RayError::Dashboard {
            url: self.dashboard.clone(),
            error: format!("/api/v0/{what}: {error}"),
        };
        let answer: StateAnswer<T> =
            serde_json::from_slice(&body).map_err(|e| bad(format!("not the state API's answer ({e})")))?;
        if !answer.result {
            return Err(bad(answer.msg.unwrap_or_default()));
        }
        let list = answer.data.ok_or_else(|| bad("no data in the answer".into()))?.result;
        if list.total.is_some_and(|t| t > list.result.len() as u64) {
            tracing::warn!(
                "Ray's {what}: {} of {} listed (the state API truncates past {LIST_LIMIT})",
                list.result.len(),
                list.total.unwrap_or_default()
            );
        }
        Ok(list.result)
    }

    async fn jobs(&self, budget: &mut usize) -> Result<Vec<JobInfo>, RayError> {
        let body = self.get("/api/jobs/", budget).await?;
        serde_json::from_slice(&body).map_err(|e| RayError::Dashboard {
            url: self.dashboard.clone(),
            error: format!("/api/jobs/: not the job API's answer ({e})"),
        })
    }
}

/// The 28 bytes of a node id given in hex; anything else is refused here
/// (see the module's note: Ray's GCS does not survive a short one).
pub fn node_id_bytes(id: &str) -> Result<Vec<u8>, RayError> {
    let bad = || RayError::BadNodeId(id.chars().take(80).collect());
    if id.len() != NODE_ID_BYTES * 2 {
        return Err(bad());
    }
    (0..NODE_ID_BYTES)
        .map(|i| u8::from_str_radix(id.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Deserialize)]
struct StateAnswer<T> {
    result: bool,
    msg: Option<String>,
    data: Option<StateData<T>>,
}

#[derive(Deserialize)]
struct StateData<T> {
    result: StateList<T>,
}

#[derive(Deserialize)]
struct StateList<T> {
    total: Option<u64>,
    result: Vec<T>,
}

#[derive(Deserialize)]
struct StateNode {
    node_id: String,
    node_ip: Option<String>,
    node_name: Option<String>,
    #[serde(default)]
    is_head_node: bool,
    state: Option<String>,
}

#[derive(Deserialize)]
struct StateActor {
    class_name: Option<String>,
    name: Option<String>,
    job_id: Option<String>,
    node_id: Option<String>,
    pid: Option<u32>,
    #[serde(default)]
    required_resources: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct StateTask {
    func_or_class_name: Option<String>,
    name: Option<String>,
    job_id: Option<String>,
    node_id: Option<String>,
    worker_pid: Option<u32>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    required_resources: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct JobInfo {
    job_id: Option<String>,
    submission_id: Option<String>,
    entrypoint: Option<String>,
    status: Option<String>,
}

fn gpus(resources: &BTreeMap<String, f64>) -> f64 {
    resources.get("GPU").copied().unwrap_or(0.0)
}

fn snapshot(
    states: BTreeMap<String, pb::NodeState>,
    nodes: Vec<StateNode>,
    actors: Vec<StateActor>,
    tasks: Vec<StateTask>,
    jobs: Vec<JobInfo>,
) -> RaySnapshot {
    let nodes = nodes
        .into_iter()
        .map(|n| {
            let gcs = states.get(&n.node_id);
            let status = match (gcs.map(|s| s.status()), n.state.as_deref()) {
                (Some(pb::NodeStatus::Running), _) => RayNodeStatus::Running,
                (Some(pb::NodeStatus::Idle), _) => RayNodeStatus::Idle,
                (Some(pb::NodeStatus::Draining), _) => RayNodeStatus::Draining,
                (Some(pb::NodeStatus::Dead), _) | (_, Some("DEAD")) => RayNodeStatus::Dead,
                _ => RayNodeStatus::Unknown,
            };
            let total = gcs.and_then(|s| s.total_resources.get("GPU").copied());
            // The GCS leaves a resource out of `available` when none is left.
            let used = total.map(|t| {
                t - gcs
                    .and_then(|s| s.available_resources.get("GPU"))
                    .copied()
                    .unwrap_or(0.0)
            });
            let ip = n.node_ip.unwrap_or_default();
            RayNode {
                name: n.node_name.filter(|s| !s.is_empty()).unwrap_or_else(|| ip.clone()),
                ip,
                head: n.is_head_node,
                status,
                gpus_total: total,
                gpus_used: used,
                activity: gcs.map(|s| s.node_activity.clone()).unwrap_or_default(),
                id: n.node_id,
            }
        })
        .collect();
    let actors = actors
        .into_iter()
        .filter(|a| gpus(&a.required_resources) > 0.0)
        .map(|a| RayWork {
            kind: RayWorkKind::Actor,
            job: a.job_id.unwrap_or_default(),
            what: match (a.class_name, a.name.filter(|n| !n.is_empty())) {
                (Some(c), Some(n)) => format!("{c} {n}"),
                (c, n) => c.or(n).unwrap_or_else(|| "actor".into()),
            },
            node: a.node_id.unwrap_or_default(),
            pid: a.pid.filter(|p| *p != 0),
            gpus: gpus(&a.required_resources),
        });
    // An actor's own tasks ask for nothing: the actor holds the GPUs.
    let tasks = tasks
        .into_iter()
        .filter(|t| t.kind.as_deref() == Some("NORMAL_TASK") && gpus(&t.required_resources) > 0.0)
        .map(|t| RayWork {
            kind: RayWorkKind::Task,
            job: t.job_id.unwrap_or_default(),
            what: t.func_or_class_name.or(t.name).unwrap_or_else(|| "task".into()),
            node: t.node_id.unwrap_or_default(),
            pid: t.worker_pid.filter(|p| *p != 0),
            gpus: gpus(&t.required_resources),
        });
    let jobs = jobs
        .into_iter()
        .filter_map(|j| {
            Some(RayJob {
                id: j.job_id?,
                submission: j.submission_id,
                entrypoint: j.entrypoint.filter(|e| !e.is_empty()),
                status: j.status,
            })
        })
        .collect();
    RaySnapshot {
        nodes,
        work: actors.chain(tasks).collect(),
        jobs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_node_id_of_28_bytes_in_hex_is_sent() {
        let id = "5e94b1854880b047203d37da99b89bf9f67ef6d8667d7de7be3f6de5";
        assert_eq!(node_id_bytes(id).expect("valid").len(), 28);
        for bad in [
            "",
            "010101",
            &id[..54],
            &format!("{}zz", &id[..54]),
            &format!("{id}00"),
            "é",
        ] {
            assert!(node_id_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_gcs_port_defaults_to_the_dashboards_host() {
        let t = Duration::from_secs(1);
        assert_eq!(Ray::new("http://head:8265/", None, t).expect("ok").gcs, "head:6379");
        assert_eq!(Ray::new("http://[::1]:8265", None, t).expect("ok").gcs, "[::1]:6379");
        assert_eq!(
            Ray::new("http://head:8265", Some("10.0.0.1:7000"), t).expect("ok").gcs,
            "10.0.0.1:7000"
        );
        for bad in ["head:8265", "ftp://head", "http://", "http:// x"] {
            assert!(Ray::new(bad, None, t).is_err(), "{bad}");
        }
    }
}
