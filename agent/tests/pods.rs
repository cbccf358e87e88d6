//! Pods on GPUs: the agent process, on the fake NVML (8 H100s, GPU 3 in MIG
//! mode), asks a fake kubelet on a temporary unix socket which pods hold
//! which GPUs, and says so on /metrics (dcgm-exporter's `pod`, `namespace`,
//! `container` labels) and on its gRPC stream. The failure paths first: no
//! socket, a kubelet that hangs, answers garbage or an error; then the
//! answer as a kubelet gives it, and pods that change.

mod common;

// How a test learns the port the agent bound (docs/testing.md#ports).
#[allow(dead_code)]
#[path = "../../tests/support/ports.rs"]
mod ports;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::scrape::{Scrape, scrape_until};
use fleetop_agent::sources::pods::pb::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};
use fleetop_agent::sources::pods::pb::{
    AllocatableResourcesRequest, AllocatableResourcesResponse, ContainerDevices, ContainerResources,
    GetPodResourcesRequest, GetPodResourcesResponse, ListPodResourcesRequest, ListPodResourcesResponse, PodResources,
};
use tonic::{Request, Response, Status};

#[path = "common/fake_nvml.rs"]
mod fake_nvml;

/// The fake NVML's GPU UUIDs (tests/fake-nvml: `uuid`).
fn gpu(i: u32) -> String {
    format!("GPU-fa4e0000-0000-4000-8000-{:012x}", 0xfa4e_0000u32 + i)
}

/// The UUID of MIG instance `k` of GPU `i`.
fn mig(i: u32, k: u32) -> String {
    format!("MIG-fa4e0000-0000-4000-9000-{:012x}", 0xfa4e_0000u32 + i * 16 + k)
}

/// How the fake kubelet answers `List`.
#[derive(Clone)]
enum Mode {
    Answer(ListPodResourcesResponse),
    /// Never answers.
    Hang,
    Error(Status),
    /// Not HTTP/2 at all: bytes, then the connection closes.
    Garbage,
}

#[derive(Clone)]
struct Kubelet(Arc<Mutex<Mode>>);

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(&self, _: Request<ListPodResourcesRequest>) -> Result<Response<ListPodResourcesResponse>, Status> {
        let mode = self.0.lock().expect("lock").clone();
        match mode {
            Mode::Answer(a) => Ok(Response::new(a)),
            Mode::Hang => std::future::pending().await,
            Mode::Error(s) => Err(s),
            Mode::Garbage => Err(Status::internal("unreachable")),
        }
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get(&self, _: Request<GetPodResourcesRequest>) -> Result<Response<GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }
}

/// A kubelet's PodResources socket, served from its own runtime thread.
struct FakeKubelet {
    mode: Arc<Mutex<Mode>>,
    _rt: tokio::runtime::Runtime,
}

impl FakeKubelet {
    fn start(path: &Path, mode: Mode) -> FakeKubelet {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let mode = Arc::new(Mutex::new(mode));
        let listener = {
            let _g = rt.enter();
            tokio::net::UnixListener::bind(path).expect("bind the socket")
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<tokio::net::UnixStream>>(4);
        let m = mode.clone();
        rt.spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let garbage = matches!(*m.lock().expect("lock"), Mode::Garbage);
                if garbage {
                    use tokio::io::AsyncWriteExt;
                    let _ = conn.write_all(b"HTTP/1.1 500 nope\r\n\r\n\x00\x01\x02garbage").await;
                    continue;
                }
                if tx.send(Ok(conn)).await.is_err() {
                    return;
                }
            }
        });
        let svc = PodResourcesListerServer::new(Kubelet(mode.clone()));
        rt.spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tokio_stream::wrappers::ReceiverStream::new(rx)),
        );
        FakeKubelet { mode, _rt: rt }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().expect("lock") = mode;
    }
}

fn pod(ns: &str, name: &str, container: &str, resource: &str, ids: &[String]) -> PodResources {
    PodResources {
        name: name.into(),
        namespace: ns.into(),
        containers: vec![ContainerResources {
            name: container.into(),
            devices: vec![ContainerDevices {
                resource_name: resource.into(),
                device_ids: ids.to_vec(),
                topology: None,
            }],
            ..Default::default()
        }],
    }
}

/// A node as a kubelet with the NVIDIA device plugin describes it: a
/// training pod on GPUs 0 and 1, an inference pod on a MIG instance of GPU 3,
/// two notebooks on replicas of GPU 5 (time-slicing), a pod without GPUs,
/// and a pod given a GPU this node does not have.
fn node_answer() -> ListPodResourcesResponse {
    ListPodResourcesResponse {
        pod_resources: vec![
            pod("ml", "train-0", "trainer", "nvidia.com/gpu", &[gpu(0), gpu(1)]),
            pod("ml", "infer", "server", "nvidia.com/mig-3g.40gb", &[mig(3, 0)]),
            pod(
                "a",
                "notebook-1",
                "jupyter",
                "nvidia.com/gpu",
                &[format!("{}::0", gpu(5))],
            ),
            pod(
                "b",
                "notebook-2",
                "jupyter",
                "nvidia.com/gpu",
                &[format!("{}::3", gpu(5))],
            ),
            pod("kube-system", "coredns", "coredns", "example.com/nic", &["eth0".into()]),
            pod(
                "ml",
                "ghost",
                "x",
                "nvidia.com/gpu",
                &["GPU-ffffffff-0000-4000-8000-000000000000".into()],
            ),
        ],
    }
}

struct Agent {
    child: Child,
    metrics: u16,
    grpc: u16,
    log: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    /// The agent's stderr so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn scrape_until(&self, done: impl Fn(&Scrape) -> bool) -> Scrape {
        scrape_until(self.metrics, &[], done)
    }

    fn samples(s: &Scrape) -> f64 {
        s.one("fleetop_agent_samples_total", &[]).map_or(0.0, |x| x.value)
    }
}

fn agent(dir: &Path, socket: &Path) -> Agent {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let log = dir.join("agent.log");
    let child = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--backend", "nvml", "--interval", "200ms", "--kubelet-poll", "200ms"])
        .arg("--nvml-lib")
        .arg(fake_nvml::fake_lib())
        .args(["--kmsg", "none", "--state-dir", "none"])
        .arg("--ib-sysfs")
        .arg(dir.join("no-ib"))
        .arg("--sysfs-root")
        .arg(dir.join("no-sysfs"))
        .arg("--kubelet-socket")
        .arg(socket)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .env(
            "FAKE_NVML_PROFILE",
            root.join("tests/fake-nvml/profiles/h100-sxm5-mig.toml"),
        )
        .env("FLEETOP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("agent starts");
    let mut a = Agent {
        child,
        metrics: 0,
        grpc: 0,
        log,
    };
    // Logged (FLEETOP_LOG=info) once it serves, with the ports it bound.
    a.grpc = ports::wait_addr_in_file(&a.log, "serving on ").port();
    a.metrics = ports::wait_addr_in_file(&a.log, "metrics on http://").port();
    a
}

/// The pods (namespace/pod/container) on a series of `name` for GPU `gpu`.
fn pods_on(s: &Scrape, name: &str, gpu: u32, more: &[(&str, &str)]) -> Vec<String> {
    let gpu = gpu.to_string();
    let mut v: Vec<String> = s
        .named(name)
        .into_iter()
        .filter(|x| x.labels.get("gpu") == Some(&gpu))
        .filter(|x| {
            more.iter()
                .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|x| {
            let l = |k: &str| x.labels.get(k).cloned().unwrap_or_default();
            format!("{}/{}/{}", l("namespace"), l("pod"), l("container"))
        })
        .collect();
    v.sort();
    v
}

fn no_pod_labels(s: &Scrape) -> bool {
    s.series.iter().all(|x| !x.labels.contains_key("pod"))
}

/// Waits for `n` more samples than `s` showed: the agent kept sampling.
fn keeps_sampling(a: &Agent, s: &Scrape, n: f64) -> Scrape {
    let before = Agent::samples(s);
    a.scrape_until(|t| Agent::samples(t) >= before + n)
}

/// No warning said twice (the time stamps aside).
fn assert_each_warning_once(log: &str) {
    let mut seen = std::collections::HashSet::new();
    for l in log.lines().filter_map(|l| l.split_once("WARN")).map(|(_, w)| w) {
        assert!(seen.insert(l), "said again: {l}\n{log}");
    }
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[test]
fn without_a_kubelet_socket_the_agent_runs_quietly_without_pods() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = agent(dir.path(), &dir.path().join("kubelet.sock"));
    let s = a.scrape_until(|s| s.named("DCGM_FI_DEV_GPU_TEMP").len() == 8);
    let s = keeps_sampling(&a, &s, 10.0);
    assert!(no_pod_labels(&s));
    let log = a.log();
    assert!(
        !log.contains("kubelet") && !log.contains("WARN") && !log.contains("ERROR"),
        "{log}"
    );
}

#[test]
fn a_kubelet_that_hangs_costs_one_warning_and_no_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("kubelet.sock");
    let _k = FakeKubelet::start(&sock, Mode::Hang);
    let a = agent(dir.path(), &sock);
    let s = a.scrape_until(|s| s.named("DCGM_FI_DEV_GPU_TEMP").len() == 8);
    // The deadline (1 s at this poll) passes: said once.
    let start = Instant::now();
    while !a.log().contains("did not answer within") {
        assert!(start.elapsed() < Duration::from_secs(20), "{}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Several deadlines later, sampling never stopped, and still one line.
    let s = keeps_sampling(&a, &s, 20.0);
    assert!(no_pod_labels(&s));
    assert_eq!(count(&a.log(), "did not answer within"), 1, "{}", a.log());
}

#[test]
fn a_kubelet_that_answers_garbage_or_an_error_is_logged_once_per_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("kubelet.sock");
    let k = FakeKubelet::start(&sock, Mode::Garbage);
    let a = agent(dir.path(), &sock);
    let wait_log = |what: &str| {
        let start = Instant::now();
        while !a.log().contains(what) {
            assert!(start.elapsed() < Duration::from_secs(20), "no {what:?}: {}", a.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_log("WARN");
    let s = a.scrape_until(|s| s.named("DCGM_FI_DEV_GPU_TEMP").len() == 8);
    let s = keeps_sampling(&a, &s, 10.0);
    assert!(no_pod_labels(&s));
    assert_each_warning_once(&a.log());

    k.set(Mode::Error(Status::unavailable("kubelet is restarting")));
    wait_log("kubelet is restarting");
    let s = keeps_sampling(&a, &s, 10.0);
    assert!(no_pod_labels(&s));
    assert_eq!(count(&a.log(), "kubelet is restarting"), 1, "{}", a.log());
    assert_each_warning_once(&a.log());

    // It answers: the pods come, and saying so is one line.
    k.set(Mode::Answer(node_answer()));
    let s = a.scrape_until(|s| !pods_on(s, "DCGM_FI_DEV_GPU_TEMP", 0, &[]).contains(&"//".to_string()));
    assert_eq!(pods_on(&s, "DCGM_FI_DEV_GPU_TEMP", 0, &[]), ["ml/train-0/trainer"]);
    assert_eq!(count(&a.log(), "GPUs mapped to pods"), 1, "{}", a.log());
}

#[test]
fn metrics_and_the_stream_name_the_pods_and_follow_their_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("kubelet.sock");
    let k = FakeKubelet::start(&sock, Mode::Answer(node_answer()));
    let a = agent(dir.path(), &sock);
    let temp = "DCGM_FI_DEV_GPU_TEMP";
    let s = a.scrape_until(|s| pods_on(s, temp, 0, &[]) == ["ml/train-0/trainer"]);

    // Whole GPUs: one series each, with the pod's labels.
    assert_eq!(pods_on(&s, temp, 1, &[]), ["ml/train-0/trainer"]);
    assert_eq!(pods_on(&s, "DCGM_FI_DEV_FB_USED", 0, &[]), ["ml/train-0/trainer"]);
    // A GPU no pod holds: its series as before, no pod labels.
    assert_eq!(pods_on(&s, temp, 2, &[]), ["//"]);
    // Replicas of GPU 5 for two pods: each GPU series once per pod.
    let shared = ["a/notebook-1/jupyter", "b/notebook-2/jupyter"];
    assert_eq!(pods_on(&s, temp, 5, &[]), shared);
    assert_eq!(pods_on(&s, "DCGM_FI_DEV_POWER_USAGE", 5, &[]), shared);
    // A MIG instance's series carry its pod; the whole GPU's do not.
    assert_eq!(
        pods_on(&s, "DCGM_FI_DEV_FB_USED", 3, &[("GPU_I_PROFILE", "3g.40gb")]),
        ["ml/infer/server"]
    );
    assert_eq!(
        pods_on(&s, "DCGM_FI_DEV_FB_USED", 3, &[("GPU_I_PROFILE", "2g.20gb")]),
        ["//"]
    );
    assert_eq!(pods_on(&s, temp, 3, &[]), ["//"]);
    // Neither the pod without GPUs nor the one on a GPU elsewhere.
    for x in &s.series {
        let p = x.labels.get("pod").map(String::as_str);
        assert!(p != Some("coredns") && p != Some("ghost"), "{x:?}");
    }
    // The device this node does not have is said once, not per sample.
    keeps_sampling(&a, &s, 10.0);
    let log = a.log();
    assert_eq!(count(&log, "GPU-ffffffff-0000-4000-8000-000000000000"), 1, "{log}");

    // The stream: each GPU's holders, decoded from the deltas.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let stream_pods = |want: &dyn Fn(&fleetop_agent::proto::Sample) -> bool| rt.block_on(stream_until(a.grpc, want));
    let got = stream_pods(&|s| s.gpus.iter().any(|g| !g.pods.is_empty()));
    let on = |i: usize| -> Vec<(String, String, String, String)> {
        got.gpus[i]
            .pods
            .iter()
            .map(|p| {
                (
                    p.namespace.clone(),
                    p.pod.clone(),
                    p.container.clone(),
                    p.mig_uuid.clone(),
                )
            })
            .collect()
    };
    let p = |ns: &str, pod: &str, c: &str, m: &str| (ns.into(), pod.into(), c.into(), m.to_string());
    assert_eq!(on(0), [p("ml", "train-0", "trainer", "")]);
    assert_eq!(on(3), [p("ml", "infer", "server", &mig(3, 0))]);
    assert_eq!(
        on(5),
        [p("a", "notebook-1", "jupyter", ""), p("b", "notebook-2", "jupyter", "")]
    );
    assert!(on(2).is_empty());

    // Pods change: train-0 ends, a new pod takes GPU 1; a notebook goes.
    let mut next = node_answer();
    next.pod_resources
        .retain(|p| p.name != "train-0" && p.name != "notebook-2");
    next.pod_resources
        .push(pod("ml", "train-1", "trainer", "nvidia.com/gpu", &[gpu(1)]));
    k.set(Mode::Answer(next));
    let s = a.scrape_until(|s| pods_on(s, temp, 1, &[]) == ["ml/train-1/trainer"]);
    assert_eq!(pods_on(&s, temp, 0, &[]), ["//"], "a removed pod's labels go");
    assert_eq!(pods_on(&s, temp, 5, &[]), ["a/notebook-1/jupyter"]);
    for x in &s.series {
        let p = x.labels.get("pod").map(String::as_str);
        assert!(p != Some("train-0") && p != Some("notebook-2"), "{x:?}");
    }
    let got = stream_pods(&|s| s.gpus[0].pods.is_empty() && !s.gpus[1].pods.is_empty());
    assert_eq!(got.gpus[1].pods[0].pod, "train-1");
    let _ = std::io::stderr().flush();
}

/// Subscribes to the agent and reads live samples (deltas decoded) until
/// `want` holds for one; 20 s at most.
async fn stream_until(port: u16, want: &dyn Fn(&fleetop_agent::proto::Sample) -> bool) -> fleetop_agent::proto::Sample {
    use fleetop_agent::proto::agent_message::Kind;
    use fleetop_agent::proto::{SubscribeRequest, agent_client::AgentClient};
    let run = async {
        let mut c = AgentClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .expect("connects");
        let req = SubscribeRequest {
            no_backfill: true,
            ..Default::default()
        };
        let mut stream = c.subscribe(req).await.expect("subscribes").into_inner();
        let mut prev: Option<fleetop_agent::proto::Sample> = None;
        loop {
            let m = stream.message().await.expect("stream").expect("a message");
            if let Some(Kind::Sample(s)) = m.kind {
                let s = fleetop_agent::wire::decode(prev.as_mut(), s).expect("decodes");
                if want(&s) {
                    return s;
                }
                prev = Some(s);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the stream says so within 20 s")
}
