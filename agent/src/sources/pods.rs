//! Which Kubernetes pods hold this node's GPUs, from the kubelet's
//! PodResources API (`v1.PodResourcesLister.List` on its unix socket).
//!
//! A background task asks the kubelet every few seconds and leaves the answer
//! in a shared view; the collector reads that view when it builds a sample
//! (`attach`), so sampling never waits on the kubelet. Off Kubernetes (no
//! socket) the task stays quiet and the view empty.
//!
//! What the device plugin names: whole GPUs by UUID (`GPU-...`), MIG
//! instances by their UUID (`MIG-...`; old drivers `MIG-GPU-<uuid>/gi/ci`),
//! and with time-slicing or MPS each replica as `<id>::<n>`: the suffix is
//! dropped, so the pods given replicas of one GPU all hold that GPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::proto::{NodeInfo, PodRef, Sample};
use fleetop_proto::input::printable;

/// The generated PodResources API (client, and the server the tests use).
pub mod pb {
    #![allow(clippy::all, clippy::unwrap_used)]
    tonic::include_proto!("v1");
}

/// Where the kubelet serves the PodResources API by default.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// How often the kubelet is asked.
pub const DEFAULT_POLL: Duration = Duration::from_secs(10);

/// The longest one answer may take (connecting included), at most.
pub const MAX_DEADLINE: Duration = Duration::from_secs(5);

/// How long the last answer stands while the kubelet fails (a kubelet
/// restart takes seconds: the pods are still there, and series that lose
/// their labels for a poll or two would churn in Prometheus).
const KEEP_ON_ERROR: Duration = Duration::from_secs(60);

/// The most bytes one List answer may take (a node of a few hundred pods
/// takes tens of KiB).
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The resources the NVIDIA device plugin advertises: whole GPUs, MIG
/// instances (`nvidia.com/mig-3g.40gb`, ...), and shared GPUs renamed
/// (`nvidia.com/gpu.shared`, `renameByDefault` in its sharing config).
pub fn is_gpu_resource(name: &str) -> bool {
    name == "nvidia.com/gpu" || name == "nvidia.com/gpu.shared" || name.starts_with("nvidia.com/mig-")
}

/// A device id as the kubelet gives it, without a sharing replica's
/// `::<n>` suffix.
pub fn device_of(id: &str) -> &str {
    id.split_once("::").map_or(id, |(d, _)| d)
}

/// One container that holds a device.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// The containers holding each GPU device, by device id (replica suffix
/// dropped), each list sorted and without repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    by_device: BTreeMap<String, Vec<Holder>>,
}

impl Holders {
    /// The GPU devices of a List answer; other resources are left out.
    pub fn from_answer(answer: &pb::ListPodResourcesResponse) -> Holders {
        let mut by_device: BTreeMap<String, Vec<Holder>> = BTreeMap::new();
        for p in &answer.pod_resources {
            for c in &p.containers {
                for d in c.devices.iter().filter(|d| is_gpu_resource(&d.resource_name)) {
                    for id in &d.device_ids {
                        // Made printable and bounded (Kubernetes' own limits on
                        // the names) here, where they come in: they reach
                        // /metrics, which people read with curl, as well as
                        // the console.
                        by_device.entry(device_of(id).to_string()).or_default().push(Holder {
                            namespace: printable(&p.namespace, 63),
                            pod: printable(&p.name, 253),
                            container: printable(&c.name, 63),
                        });
                    }
                }
            }
        }
        for h in by_device.values_mut() {
            h.sort();
            h.dedup();
        }
        Holders { by_device }
    }

    pub fn is_empty(&self) -> bool {
        self.by_device.is_empty()
    }

    fn get(&self, device: &str) -> &[Holder] {
        self.by_device.get(device).map_or(&[], Vec::as_slice)
    }

    /// Device ids no GPU of `info` and no MIG instance of `s` has (for the
    /// log: a device plugin that names GPUs the agent does not see).
    pub fn unknown_devices(&self, info: &NodeInfo, s: &Sample) -> Vec<&str> {
        self.by_device
            .keys()
            .map(String::as_str)
            .filter(|id| {
                let parent = old_mig_parent(id);
                !info
                    .gpus
                    .iter()
                    .any(|g| g.uuid == *id || Some(g.uuid.as_str()) == parent)
                    && !s.gpus.iter().any(|g| g.mig.iter().any(|m| m.uuid == *id))
            })
            .collect()
    }
}

/// An old-style MIG device id (`MIG-GPU-<uuid>/<gi>/<ci>`, drivers before
/// R470) names its parent GPU.
fn old_mig_parent(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("MIG-")?;
    rest.starts_with("GPU-").then(|| rest.split('/').next().unwrap_or(rest))
}

/// The holders as the kubelet last said, shared between the task that asks
/// and the collector that reads.
pub type HoldersView = Arc<RwLock<Arc<Holders>>>;

/// Puts each GPU's holders in `s`: those of the GPU's UUID (whole or
/// replicas), then those of each of its MIG instances (by the instance's
/// UUID, as NVML gives it in this very sample, or an old-style id naming
/// the GPU and instance).
pub fn attach(holders: &Holders, info: &NodeInfo, s: &mut Sample) {
    if holders.is_empty() {
        return;
    }
    for g in &mut s.gpus {
        let Some(uuid) = info.gpus.iter().find(|i| i.index == g.index).map(|i| i.uuid.as_str()) else {
            continue;
        };
        let mut pods: Vec<PodRef> = holders.get(uuid).iter().map(|h| pod_ref(h, "")).collect();
        for m in &g.mig {
            if m.uuid.is_empty() {
                continue;
            }
            pods.extend(holders.get(&m.uuid).iter().map(|h| pod_ref(h, &m.uuid)));
        }
        // Old-style MIG ids: the parent is known, the instance is not
        // matched to NVML's (GPU instance and compute instance ids would be
        // needed): the GPU is held, as by a whole-GPU holder.
        for (id, hs) in &holders.by_device {
            if old_mig_parent(id) == Some(uuid) {
                pods.extend(hs.iter().map(|h| pod_ref(h, "")));
            }
        }
        pods.sort_by(|a, b| {
            (&a.namespace, &a.pod, &a.container, &a.mig_uuid).cmp(&(&b.namespace, &b.pod, &b.container, &b.mig_uuid))
        });
        pods.dedup();
        g.pods = pods;
    }
}

fn pod_ref(h: &Holder, mig_uuid: &str) -> PodRef {
    PodRef {
        namespace: h.namespace.clone(),
        pod: h.pod.clone(),
        container: h.container.clone(),
        mig_uuid: mig_uuid.to_string(),
    }
}

/// Why asking the kubelet failed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cannot connect to {0}: {1}")]
    Connect(PathBuf, String),
    #[error("the kubelet at {0} did not answer within {1:?}")]
    Deadline(PathBuf, Duration),
    #[error("the kubelet at {0} answered List with an error: {1}")]
    Status(PathBuf, String),
}

/// One `List` call to the kubelet at `socket`, within `deadline`.
pub async fn list(socket: &Path, deadline: Duration) -> Result<pb::ListPodResourcesResponse, ListError> {
    let call = async {
        let path = socket.to_path_buf();
        // The URI is not used: the connector opens the socket.
        let channel = tonic::transport::Endpoint::from_static("http://kubelet")
            .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            }))
            .await
            .map_err(|e| {
                ListError::Connect(
                    socket.to_path_buf(),
                    fleetop_proto::input::printable(&error_chain(&e), 300),
                )
            })?;
        let mut client = pb::pod_resources_lister_client::PodResourcesListerClient::new(channel)
            .max_decoding_message_size(MAX_ANSWER_BYTES);
        let mut req = tonic::Request::new(pb::ListPodResourcesRequest {});
        req.set_timeout(deadline);
        client
            .list(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ListError::Status(socket.to_path_buf(), status_words(&s)))
    };
    tokio::time::timeout(deadline, call)
        .await
        .map_err(|_| ListError::Deadline(socket.to_path_buf(), deadline))?
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(e) = src {
        s.push_str(": ");
        s.push_str(&e.to_string());
        src = e.source();
    }
    s
}

fn status_words(s: &tonic::Status) -> String {
    let msg = fleetop_proto::input::printable(s.message(), 200);
    if msg.is_empty() {
        format!("{:?}", s.code())
    } else {
        format!("{:?}: {msg}", s.code())
    }
}

/// How the last poll went, for logging each change once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Start,
    NoSocket,
    Answered,
    Failed(String),
}

/// The kubelet is asked every `every` (each answer within a deadline of
/// `every`, between 1 s and 5 s), from the first poll at once until `stop`.
#[derive(Debug, Clone)]
pub struct PodsOptions {
    pub socket: PathBuf,
    pub every: Duration,
}

impl PodsOptions {
    pub fn new(socket: PathBuf) -> Self {
        PodsOptions {
            socket,
            every: DEFAULT_POLL,
        }
    }

    fn deadline(&self) -> Duration {
        self.every.clamp(Duration::from_secs(1), MAX_DEADLINE)
    }
}

/// Starts the task that keeps `view` as the kubelet says.
pub fn spawn(opts: PodsOptions, view: HoldersView, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(opts.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut state = State::Start;
        // What this run of failures has said: a kubelet that fails in
        // turns two ways (garbage: a refused handshake, then a broken
        // pipe) is reported twice, then no more until it answers.
        let mut said: Vec<String> = Vec::new();
        let mut last_answer: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let now = poll(&opts).await;
            let set = |h: Holders| *view.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(h);
            let next = match now {
                Poll::NoSocket => {
                    set(Holders::default());
                    last_answer = None;
                    State::NoSocket
                }
                Poll::Answer(h) => {
                    set(h);
                    last_answer = Some(Instant::now());
                    State::Answered
                }
                Poll::Failed(e) => {
                    if last_answer.is_none_or(|t| t.elapsed() > KEEP_ON_ERROR) {
                        set(Holders::default());
                    }
                    State::Failed(e)
                }
            };
            if next == state {
                continue;
            }
            match &next {
                State::Failed(e) if said.contains(e) => {}
                State::Failed(e) => {
                    log_change(&opts.socket, &next);
                    if said.len() < 8 {
                        said.push(e.clone());
                    }
                }
                _ => {
                    said.clear();
                    log_change(&opts.socket, &next);
                }
            }
            state = next;
        }
    })
}

enum Poll {
    NoSocket,
    Answer(Holders),
    Failed(String),
}

async fn poll(opts: &PodsOptions) -> Poll {
    // Off Kubernetes: no socket, nothing to say (checked each time: the
    // kubelet may start after the agent).
    if matches!(opts.socket.try_exists(), Ok(false)) {
        return Poll::NoSocket;
    }
    match list(&opts.socket, opts.deadline()).await {
        Ok(a) => Poll::Answer(Holders::from_answer(&a)),
        Err(e) => Poll::Failed(e.to_string()),
    }
}

fn log_change(socket: &Path, now: &State) {
    match now {
        State::Start => {}
        State::NoSocket => tracing::debug!(
            "no kubelet socket at {}: GPUs are not mapped to pods (--kubelet-socket to name another)",
            socket.display()
        ),
        State::Answered => tracing::info!("GPUs mapped to pods from the kubelet at {}", socket.display()),
        State::Failed(e) => tracing::warn!("{e}; GPUs are not mapped to pods until it answers"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{GpuInfo, GpuSample, MigInstance};
    use pb::{ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources};

    fn pod(ns: &str, name: &str, resource: &str, ids: &[&str]) -> PodResources {
        PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![ContainerResources {
                name: "main".into(),
                devices: vec![ContainerDevices {
                    resource_name: resource.into(),
                    device_ids: ids.iter().map(|s| s.to_string()).collect(),
                    topology: None,
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn names_from_the_kubelet_are_made_printable_and_bounded() {
        // The socket is the kubelet's, but whoever can write there (or a
        // compromised kubelet) names the pods that /metrics and the console
        // show.
        let mut p = pod("ns\u{1b}[2J", &"p".repeat(10_000), "nvidia.com/gpu", &["GPU-0"]);
        p.containers[0].name = "c\u{202e}".into();
        let h = Holders::from_answer(&ListPodResourcesResponse { pod_resources: vec![p] });
        let got = &h.get("GPU-0")[0];
        assert_eq!(got.namespace, "ns\\u{1b}[2J");
        assert_eq!(got.container, "c\\u{202e}");
        assert!(
            got.pod.len() < 300 && got.pod.ends_with("(9747 more characters)"),
            "{}",
            got.pod.len()
        );
    }

    #[test]
    fn gpus_mig_instances_and_replicas_map_to_their_gpu() {
        let answer = ListPodResourcesResponse {
            pod_resources: vec![
                pod("ml", "whole", "nvidia.com/gpu", &["GPU-0"]),
                pod("ml", "mig", "nvidia.com/mig-3g.40gb", &["MIG-1a"]),
                pod("a", "shared-1", "nvidia.com/gpu", &["GPU-2::0"]),
                pod("b", "shared-2", "nvidia.com/gpu.shared", &["GPU-2::3", "GPU-2::4"]),
                pod("x", "nic", "rdma/hca", &["GPU-3"]),
                pod("ml", "elsewhere", "nvidia.com/gpu", &["GPU-9"]),
                pod("old", "oldmig", "nvidia.com/mig-1g.5gb", &["MIG-GPU-3/1/0"]),
            ],
        };
        let h = Holders::from_answer(&answer);
        let info = NodeInfo {
            gpus: (0..4)
                .map(|i| GpuInfo {
                    index: i,
                    uuid: format!("GPU-{i}"),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let mut s = Sample {
            gpus: (0..4)
                .map(|i| GpuSample {
                    index: i,
                    mig: if i == 1 {
                        vec![MigInstance {
                            uuid: "MIG-1a".into(),
                            ..Default::default()
                        }]
                    } else {
                        vec![]
                    },
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        attach(&h, &info, &mut s);
        let names = |i: usize| -> Vec<(String, String)> {
            s.gpus[i]
                .pods
                .iter()
                .map(|p| (p.pod.clone(), p.mig_uuid.clone()))
                .collect()
        };
        assert_eq!(names(0), [("whole".into(), String::new())]);
        assert_eq!(names(1), [("mig".into(), "MIG-1a".into())]);
        assert_eq!(
            names(2),
            [("shared-1".into(), String::new()), ("shared-2".into(), String::new())],
            "two pods on replicas of one GPU, the second holding two of them once"
        );
        assert_eq!(names(3), [("oldmig".into(), String::new())], "not the NIC");
        assert_eq!(h.unknown_devices(&info, &s), ["GPU-9"]);
    }

    #[test]
    fn replica_suffixes_are_dropped() {
        assert_eq!(device_of("GPU-abc::12"), "GPU-abc");
        assert_eq!(device_of("MIG-abc"), "MIG-abc");
    }
}
