//! The agent's gRPC server: samples on its own clock into a bounded ring
//! buffer, whatever the number of subscribers, and streams the node
//! description, then history, then live samples to each subscriber.
//!
//! Each subscriber gets a producer task feeding a small bounded channel (the
//! tonic streaming pattern). Live samples reach producers through a broadcast
//! channel, so a slow subscriber only ever lags itself: it skips samples and
//! never blocks sampling or the other subscribers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::bench::sim::SimBench;
use crate::bench::{BenchContext, Suite};
use crate::net::{FailedTokens, same_token};
pub use crate::net::{Limits, TlsSettings};
use crate::proto::agent_message::Kind;
use crate::proto::agent_server::{Agent, AgentServer};
use crate::proto::{AgentMessage, NodeInfo, Sample, SubscribeRequest};
use crate::proto::{BenchEvent, BenchRequest, NetSinkEvent, NetSinkRequest, SignalReply, SignalRequest, bench_event};
use crate::ring::{Backlog, Ring};
use crate::sampler::Collector;

/// How an agent samples and what it keeps.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub interval: Duration,
    /// How much history the ring buffer keeps (default 10 minutes).
    pub history: Duration,
    /// For a simulated node: invent history from this time (ms since the
    /// epoch) up to now at start, so a console sees a lived-in node at once.
    pub backfill_from_ms: Option<i64>,
    /// Benchmarks on request; `None` refuses them.
    pub bench: Option<BenchSettings>,
    /// Added to this machine's clock for every time the agent stamps: a
    /// simulated node whose clock is wrong (`--sim-clock-offset`), so the
    /// console's handling of skew can be tested.
    pub clock_offset_ms: i64,
    /// Serve TLS (rustls) with this certificate; `None` serves plaintext.
    pub tls: Option<TlsSettings>,
    /// Subscribers must present this token (`authorization: Bearer ...`).
    pub telemetry_token: Option<String>,
    /// Allow a bench token on a plaintext listener (`--insecure`).
    pub insecure: bool,
    pub limits: Limits,
    /// The ring's bound in bytes of memory, beside its bound in samples: a
    /// short interval or a long history cannot talk it past this.
    pub max_ring_bytes: usize,
    /// Ask the kubelet which pods hold the GPUs (`--kubelet-socket`);
    /// `None`: never.
    pub pods: Option<crate::pods::PodsOptions>,
}

/// Default bound of the ring in bytes of memory: ten minutes of a big node
/// (8 GPUs, 18 NVLink links each, 8 IB ports) every second fit several
/// times over.
pub const DEFAULT_MAX_RING_BYTES: usize = 64 << 20;

/// What the agent needs to run burn-in suites.
#[derive(Clone)]
pub struct BenchSettings {
    /// Requests must carry this (read from the file named by `--bench-token-file`).
    pub token: String,
    pub expectations: crate::bench::expect::Expectations,
    /// The agent's own bound on a suite, whatever a request asks.
    pub max_duration: Duration,
}

impl std::fmt::Debug for BenchSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("BenchSettings")
            .field("max_duration", &self.max_duration)
            .finish_non_exhaustive()
    }
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            interval: Duration::from_secs(1),
            history: Duration::from_secs(600),
            backfill_from_ms: None,
            bench: None,
            clock_offset_ms: 0,
            tls: None,
            telemetry_token: None,
            insecure: false,
            limits: Limits::default(),
            max_ring_bytes: DEFAULT_MAX_RING_BYTES,
            pods: None,
        }
    }
}

struct Shared {
    info: NodeInfo,
    /// The fault journal as it is now (the collector updates it): each new
    /// subscriber's description carries it, not the one at start.
    fault_journal: Option<crate::sampler::JournalView>,
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<Sample>>,
    /// Protobuf bytes of messages sent to subscribers (for benchmarks).
    bytes_sent: AtomicU64,
    /// Samples taken since start (for benchmarks and tests).
    samples_taken: AtomicU64,
    bench: Option<BenchSettings>,
    /// A suite is running (one at a time).
    bench_busy: std::sync::atomic::AtomicBool,
    /// The simulated node this agent serves, if it does: its burn-ins answer
    /// the GPU checks from the simulation (the collector itself moves to the
    /// sampling task, so this is taken from it at start).
    simulated: Option<crate::sim::SimConfig>,
    clock_offset_ms: i64,
    telemetry_token: Option<String>,
    max_subscribers: usize,
    /// Subscribe streams open now (each producer task holds one).
    subscribers: AtomicU64,
    failed_tokens: Arc<FailedTokens>,
    /// Where the GPUs' processes are asked for at the moment of a signal.
    gpu_processes: Option<Arc<dyn crate::sampler::GpuProcesses>>,
    /// Where each sample is left for /metrics scrapes.
    publisher: Arc<crate::metrics::Publisher>,
    /// Open connections and their streams.
    connections: Arc<crate::net::Connections>,
    /// The ring holds its invented history (the simulated backend's
    /// backfill, made after the agent already listens): subscribers wait
    /// for it, so each gets all of it.
    ready: watch::Receiver<bool>,
}

/// Counts a subscriber for as long as its producer task runs.
struct SubscriberSlot(Arc<Shared>);

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    /// The agent's clock: this machine's, plus the configured offset.
    fn now_ms(&self) -> i64 {
        crate::now_ms() + self.clock_offset_ms
    }

    fn push(&self, s: Sample) {
        let s = Arc::new(s);
        self.samples_taken.fetch_add(1, Ordering::Relaxed);
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.push(s.clone());
        // Sent under the ring lock so a new subscriber sees every sample
        // exactly once: either in its backlog or on its receiver.
        let _ = self.live.send(s.clone());
        drop(ring);
        self.publisher.publish(&s);
    }

    fn subscribe(&self, since_ms: Option<i64>) -> (Option<Backlog>, broadcast::Receiver<Arc<Sample>>) {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let rx = self.live.subscribe();
        (since_ms.map(|t| ring.backlog(t)), rx)
    }
}

/// A running agent. Dropping it stops the agent.
pub struct AgentHandle {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    metrics: Option<JoinHandle<()>>,
}

impl AgentHandle {
    /// Protobuf bytes sent to all subscribers so far.
    pub fn bytes_sent(&self) -> u64 {
        self.shared.bytes_sent.load(Ordering::Relaxed)
    }

    pub fn samples_taken(&self) -> u64 {
        self.shared.samples_taken.load(Ordering::Relaxed)
    }

    /// Subscribe streams being served now.
    pub fn subscribers(&self) -> u64 {
        self.shared.subscribers.load(Ordering::SeqCst)
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.shared.connections.open()
    }

    /// Connections accepted since the agent started.
    pub fn connections_accepted(&self) -> usize {
        self.shared.connections.accepted()
    }

    /// Samples the ring holds now, and the memory they take.
    pub fn ring_size(&self) -> (usize, usize) {
        let ring = self.shared.ring.lock().unwrap_or_else(|e| e.into_inner());
        (ring.len(), ring.bytes())
    }

    /// Serves `GET /metrics` (Prometheus text) on `listener` too, from the
    /// samples this agent takes, with its telemetry token; returns the
    /// address. It stops with the agent.
    pub fn serve_metrics(
        &mut self,
        listener: TcpListener,
        limits: crate::metrics::http::Limits,
    ) -> std::io::Result<SocketAddr> {
        let src = crate::metrics::http::Source {
            info: Arc::new(self.shared.info.clone()),
            publisher: self.shared.publisher.clone(),
            token: self.shared.telemetry_token.clone(),
            failed: self.shared.failed_tokens.clone(),
            clock_offset_ms: self.shared.clock_offset_ms,
        };
        let (addr, task) = crate::metrics::http::serve(listener, src, limits, self.stop.subscribe())?;
        self.metrics = Some(task);
        Ok(addr)
    }

    /// The newest sample this agent took, if any.
    pub fn latest_sample(&self) -> Option<Arc<Sample>> {
        self.shared.publisher.latest().sample.clone()
    }

    /// Stops sampling and serving, ends every subscriber's stream, and waits
    /// for the server to finish, at most `STOP_GRACE`: a graceful shutdown
    /// waits for every connection to close, and a console that holds its
    /// streams open without reading them (an in-process demo whose export
    /// has written its document) would hold it for ever. Past the grace the
    /// server is aborted, which drops its connections.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(mut server) = self.server.take()
            && tokio::time::timeout(STOP_GRACE, &mut server).await.is_err()
        {
            tracing::debug!(
                "agent {}: connections still open after {STOP_GRACE:?}; closed",
                self.addr
            );
            server.abort();
            let _ = server.await;
        }
        if let Some(mut m) = self.metrics.take()
            && tokio::time::timeout(STOP_GRACE, &mut m).await.is_err()
        {
            m.abort();
            let _ = m.await;
        }
    }

    /// Waits until the server ends (it only ends when stopped or on error).
    pub async fn wait(mut self) -> Result<(), tonic::transport::Error> {
        match self.server.take() {
            Some(server) => server.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }
}

/// How long `AgentHandle::stop` waits for open connections to close.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

impl Drop for AgentHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// A simulated node served on an ephemeral loopback port: the one way the
/// demo, the tests and the benchmarks start an in-process agent.
pub async fn serve_sim(sim: crate::sim::SimConfig, opts: AgentOptions) -> std::io::Result<AgentHandle> {
    let (collector, _) =
        crate::backend::build(&crate::backend::BackendOptions::sim(sim)).map_err(std::io::Error::other)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    serve(collector, opts, listener).await
}

/// Simulated histories made at the same time in this process (see `serve`).
static BACKFILL_SLOTS: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
    tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
});

/// The most samples a ring may hold, whatever the history and interval.
pub const MAX_RING_SAMPLES: usize = 1_000_000;

/// Starts sampling with `collector` and serving on `listener`. Refuses a
/// bench token on a plaintext listener unless `opts.insecure`: the token
/// would cross the network in clear.
pub async fn serve(
    mut collector: Collector,
    opts: AgentOptions,
    listener: TcpListener,
) -> std::io::Result<AgentHandle> {
    if opts.bench.is_some() && opts.tls.is_none() && !opts.insecure {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "benchmarks on a plaintext listener would take their token in clear: \
             give --tls-cert and --tls-key, or --insecure to accept that",
        ));
    }
    // TLS is accepted by the agent itself (see `tls`), so that refused
    // handshakes are logged with the peer and the reason.
    let tls = match &opts.tls {
        None => None,
        Some(t) => {
            Some(crate::tls::server_config(t).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?)
        }
    };
    let server = tonic::transport::Server::builder();
    let addr = listener.local_addr()?;
    let interval_ms = opts.interval.as_millis().max(1) as i64;
    let capacity = ((opts.history.as_millis() / interval_ms as u128).max(1)).min(MAX_RING_SAMPLES as u128) as usize;
    let mut info = collector.info().clone();
    info.sample_interval_ms = interval_ms as u32;
    info.agent_instance = instance_id();
    let (live, _) = broadcast::channel(16);
    let (ready_tx, ready) = watch::channel(opts.backfill_from_ms.is_none());
    let shared = Arc::new(Shared {
        info,
        fault_journal: collector.journal_view(),
        ring: Mutex::new(Ring::new(capacity, opts.max_ring_bytes)),
        live,
        bytes_sent: AtomicU64::new(0),
        samples_taken: AtomicU64::new(0),
        bench: opts.bench.clone(),
        bench_busy: std::sync::atomic::AtomicBool::new(false),
        simulated: collector.simulation(),
        gpu_processes: collector.gpu_processes(),
        clock_offset_ms: opts.clock_offset_ms,
        telemetry_token: opts.telemetry_token.clone(),
        max_subscribers: opts.limits.max_subscribers,
        subscribers: AtomicU64::new(0),
        failed_tokens: Arc::new(FailedTokens::default()),
        publisher: Arc::new(crate::metrics::Publisher::default()),
        connections: Arc::new(crate::net::Connections::default()),
        ready,
    });
    let (stop, stop_rx) = watch::channel(false);
    // The kubelet is asked on a task of its own: a slow or hung kubelet
    // never delays a sample.
    if let Some(p) = &opts.pods {
        let view = crate::pods::HoldersView::default();
        collector.set_pods(view.clone());
        crate::pods::spawn(p.clone(), view, stop_rx.clone());
    }

    // The history is invented while the agent already listens (a demo of a
    // thousand nodes is on screen at once, filling in), then sampling starts.
    let backfill = opts.backfill_from_ms;
    let (sampling, every, stop_sampling) = (shared.clone(), opts.interval, stop_rx.clone());
    tokio::spawn(async move {
        let mut collector = collector;
        if let Some(from) = backfill {
            let shared = sampling.clone();
            // One agent's history at a time per core, however many agents
            // this process runs: a thousand at once (a demo) took 500
            // threads, their allocators' memory, and the cores the console
            // needs to draw; in turn, each is sent as soon as it is made.
            let Ok(_permit) = BACKFILL_SLOTS.acquire().await else {
                return;
            };
            let made = tokio::task::spawn_blocking(move || {
                let now = shared.now_ms();
                let start = from.max(now - capacity as i64 * interval_ms);
                let mut t = start - start.rem_euclid(interval_ms);
                while t < now {
                    if let Some(s) = collector.sample(t) {
                        shared.push(s);
                    }
                    t += interval_ms;
                }
                collector
            })
            .await;
            match made {
                Ok(c) => collector = c,
                Err(e) => {
                    tracing::error!("inventing the simulated history failed: {e}");
                    return;
                }
            }
        }
        let _ = ready_tx.send(true);
        sample_loop(collector, every, sampling, stop_sampling).await;
    });

    let svc = AgentService {
        shared: shared.clone(),
        stop: stop_rx.clone(),
        ip: addr.ip(),
    };
    let mut shutdown = stop_rx;
    let limits = &opts.limits;
    let incoming = ReceiverStream::new(crate::net::incoming(listener, limits, shared.connections.clone(), tls));
    // A stalled stream can hold at most what HTTP/2 buffers for it (h2's send
    // buffer, bounded per stream) plus its channel: bounded, since streams
    // per connection and subscribers per agent are. The receive windows are
    // small because consoles only ever send small requests.
    let server = tokio::spawn(
        server
            .max_concurrent_streams(limits.max_streams_per_connection)
            .initial_stream_window_size(64 * 1024)
            .initial_connection_window_size(256 * 1024)
            .http2_keepalive_interval(Some(limits.idle_timeout / 3))
            .http2_keepalive_timeout(Some((limits.idle_timeout / 3).min(Duration::from_secs(20))))
            .http2_max_pending_accept_reset_streams(Some(32))
            .http2_max_header_list_size(16 * 1024)
            .add_service(AgentServer::new(svc))
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = shutdown.wait_for(|s| *s).await;
            }),
    );
    Ok(AgentHandle {
        addr,
        shared,
        stop,
        server: Some(server),
        metrics: None,
    })
}

/// A random number naming this agent process (see `NodeInfo.agent_instance`).
fn instance_id() -> u64 {
    use std::hash::BuildHasher;
    // A fresh RandomState is randomly keyed; never zero, which means "unknown".
    std::collections::hash_map::RandomState::new().hash_one(crate::now_ms()) | 1
}

/// Samples on the agent's own clock. Driver calls block, so each sample is
/// taken on the blocking pool; a hung driver call stalls only this loop. A
/// collector whose sources never block is sampled in place.
async fn sample_loop(collector: Collector, every: Duration, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Its sources are fixed once it is built: asked once, not every tick.
    let blocks = collector.blocks();
    let mut collector = Some(collector);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let Some(mut c) = collector.take() else {
            return;
        };
        let now = shared.now_ms();
        let taken = if blocks {
            tokio::task::spawn_blocking(move || {
                let s = c.sample(now);
                (c, s)
            })
            .await
        } else {
            let s = c.sample(now);
            Ok((c, s))
        };
        match taken {
            Ok((c, s)) => {
                collector = Some(c);
                if let Some(s) = s {
                    shared.push(s);
                }
            }
            Err(e) => {
                tracing::error!("sampler panicked, sampling stopped: {e}");
                return;
            }
        }
    }
}

struct AgentService {
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    /// The address the agent serves on; a network sink listens there too.
    ip: std::net::IpAddr,
}

impl AgentService {
    /// The bench settings, if the request carries the agent's token.
    fn authorize(&self, peer: Option<std::net::IpAddr>, token: &str) -> Result<BenchSettings, Status> {
        let Some(b) = &self.shared.bench else {
            return Err(Status::failed_precondition(
                "benchmarks are disabled on this agent: start it with --bench-token-file",
            ));
        };
        // The right token first: only wrong ones are limited, so consoles
        // that share an address with a guesser keep working.
        if same_token(&b.token, token) {
            return Ok(b.clone());
        }
        let failed = &self.shared.failed_tokens;
        failed.check(peer)?;
        failed.failed(peer, "bench");
        Err(Status::permission_denied("wrong bench token"))
    }

    /// Checks the telemetry token (`authorization: Bearer TOKEN`), where one is set.
    fn authorize_telemetry<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let Some(want) = &self.shared.telemetry_token else {
            return Ok(());
        };
        let given = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        // The right token first: only wrong (or missing) ones are limited.
        let why = match given {
            Some(t) if same_token(want, t) => return Ok(()),
            Some(_) => "wrong telemetry token",
            None => "this agent needs a telemetry token (console: telemetry_token_file)",
        };
        let peer = req.remote_addr().map(|a| a.ip());
        let failed = &self.shared.failed_tokens;
        failed.check(peer)?;
        failed.failed(peer, "telemetry");
        Err(Status::unauthenticated(why))
    }
}

/// The most bytes of encoded samples in one History message (unless one
/// sample is larger): a few samples of a big node. A console's stream keeps
/// a read buffer the size of the largest message it was sent for as long
/// as the stream lasts, 10,000 of them in a large console; 4 KiB is about
/// the size of the node's description, which every stream starts with.
const HISTORY_BATCH_BYTES: usize = 4 * 1024;

fn history(batch: &mut crate::proto::History) -> AgentMessage {
    AgentMessage {
        kind: Some(Kind::History(std::mem::take(batch))),
    }
}

/// Sends `backlog` as History messages; the number of samples sent, or
/// `None` when the subscriber went (or an entry could not be read).
async fn send_history_batches<F, Fut>(backlog: &Backlog, send: &F) -> Option<u64>
where
    F: Fn(AgentMessage) -> Fut,
    Fut: std::future::Future<Output = Result<(), mpsc::error::SendError<Result<AgentMessage, Status>>>>,
{
    let mut sent = 0u64;
    let mut batch = crate::proto::History::default();
    let mut bytes = 0;
    for e in backlog.encoded() {
        let e = match e {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("history entry unreadable: {e}");
                return None;
            }
        };
        if !batch.samples.is_empty() && bytes + e.len() > HISTORY_BATCH_BYTES {
            sent += batch.samples.len() as u64;
            send(history(&mut batch)).await.ok()?;
            bytes = 0;
        }
        bytes += e.len();
        batch.samples.push(e.to_vec());
    }
    if !batch.samples.is_empty() {
        sent += batch.samples.len() as u64;
        send(history(&mut batch)).await.ok()?;
    }
    Some(sent)
}

/// Sends `backlog` one Sample message a sample (to a subscriber that did
/// not ask for batches); the number sent, or `None` as above.
async fn send_history_samples<F, Fut>(backlog: &Backlog, send: &F) -> Option<u64>
where
    F: Fn(AgentMessage) -> Fut,
    Fut: std::future::Future<Output = Result<(), mpsc::error::SendError<Result<AgentMessage, Status>>>>,
{
    let mut sent = 0u64;
    for s in backlog.samples() {
        let s = match s {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("history entry unreadable: {e}");
                return None;
            }
        };
        send(AgentMessage {
            kind: Some(Kind::Sample(s)),
        })
        .await
        .ok()?;
        sent += 1;
    }
    Some(sent)
}

/// Frees the agent for the next suite when the running one ends, however.
struct BusyGuard(Arc<Shared>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.bench_busy.store(false, Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl Agent for AgentService {
    type SubscribeStream = ReceiverStream<Result<AgentMessage, Status>>;
    type RunBenchStream = ReceiverStream<Result<BenchEvent, Status>>;
    type NetSinkStream = ReceiverStream<Result<NetSinkEvent, Status>>;

    async fn signal_process(&self, req: Request<SignalRequest>) -> Result<Response<SignalReply>, Status> {
        let peer = req.remote_addr().map(|a| a.ip());
        let req = req.into_inner();
        self.authorize(peer, &req.token)?;
        if self.shared.info.backend.starts_with("sim") {
            return Err(Status::failed_precondition(
                "simulated processes: nothing to signal (their pids are invented)",
            ));
        }
        let signal = match req.signal.as_str() {
            "TERM" => libc::SIGTERM,
            "KILL" => libc::SIGKILL,
            other => return Err(Status::invalid_argument(format!("signal '{other}': TERM or KILL"))),
        };
        // Never pid 0 (the agent's process group), init or the agent,
        // whatever a GPU's process list says.
        let pid = crate::signal::allowed(req.pid).map_err(Status::permission_denied)?;
        // Only a process the latest sample shows on a GPU: never any pid.
        let latest = self.shared.ring.lock().ok().and_then(|r| r.latest().cloned());
        let gpu = latest.and_then(|s| {
            s.gpus
                .iter()
                .find(|g| g.processes.iter().any(|p| p.pid == req.pid))
                .map(|g| g.index)
        });
        let Some(gpu) = gpu else {
            return Err(Status::not_found(format!(
                "pid {} is not a process on this node's GPUs (in the latest sample)",
                req.pid
            )));
        };
        // Held from here to the signal: if it exits, no other process that
        // takes its pid is signalled instead.
        let target = crate::signal::Target::hold(pid)
            .map_err(|e| Status::not_found(format!("pid {}: {e}: not signalled", req.pid)))?;
        crate::signal::outside_own_group(pid).map_err(Status::permission_denied)?;
        // Still on that GPU now, by the driver's list at this moment (the
        // sample may be an interval old: the process may have ended).
        crate::signal::still_on_gpu(self.shared.gpu_processes.clone(), gpu, req.pid)
            .await
            .map_err(Status::failed_precondition)?;
        if let Err(e) = target.signal(signal) {
            return Err(Status::failed_precondition(format!("kill {}: {e}", req.pid)));
        }
        tracing::warn!("SIG{} sent to pid {} (GPU {gpu}) for {peer:?}", req.signal, req.pid);
        Ok(Response::new(SignalReply {
            outcome: format!("SIG{} sent to {} (GPU {gpu})", req.signal, req.pid),
        }))
    }

    async fn run_bench(&self, req: Request<BenchRequest>) -> Result<Response<Self::RunBenchStream>, Status> {
        let peer = req.remote_addr().map(|a| a.ip());
        let stream = self.shared.connections.stream(req.remote_addr());
        let req = req.into_inner();
        let settings = self.authorize(peer, &req.token)?;
        let suite = Suite::parse(&req.suite)
            .ok_or_else(|| Status::invalid_argument(format!("unknown suite '{}': quick or full", req.suite)))?;
        if self
            .shared
            .bench_busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(Status::resource_exhausted(
                "busy: a suite is already running on this node",
            ));
        }
        let guard = BusyGuard(self.shared.clone());
        let shared = self.shared.clone();
        let ctx = BenchContext {
            expectations: settings.expectations.clone(),
            gpu_models: shared.info.gpus.iter().map(|g| g.model.clone()).collect(),
            gpu_pci_bus_ids: shared
                .info
                .gpus
                .iter()
                .map(|g| (g.index, g.pci_bus_id.clone()))
                .collect(),
            // The simulation is sampled on the agent's clock: its faults
            // are judged on the same one.
            simulated: shared.simulated.clone().map(|cfg| SimBench {
                cfg,
                clock_offset_ms: shared.clock_offset_ms,
            }),
            latest: Arc::new(move || shared.ring.lock().ok().and_then(|r| r.latest().cloned())),
        };
        let limit = match req.timeout_s {
            0 => settings.max_duration,
            t => settings.max_duration.min(Duration::from_secs(u64::from(t))),
        };
        let target = (!req.net_target.is_empty()).then_some(req.net_target);
        let (tx, rx) = mpsc::channel(64);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The timeout: stop the suite, and say so.
        let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let (stop, timed_out, tx) = (stop.clone(), timed_out.clone(), tx.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(limit) => {
                        timed_out.store(true, Ordering::SeqCst);
                        stop.store(true, Ordering::SeqCst);
                    }
                    _ = tx.closed() => stop.store(true, Ordering::SeqCst),
                }
            });
        }
        tokio::task::spawn_blocking(move || {
            let _busy = guard;
            let _stream = stream;
            let mut emit = |e: BenchEvent| {
                let e = match e.kind {
                    Some(bench_event::Kind::Done(mut d)) if timed_out.load(Ordering::SeqCst) => {
                        d.error = format!("timed out after {} s", limit.as_secs());
                        BenchEvent {
                            kind: Some(bench_event::Kind::Done(d)),
                        }
                    }
                    _ => e,
                };
                tx.blocking_send(Ok(e)).is_ok()
            };
            crate::bench::run(suite, target.as_deref(), &ctx, &stop, &mut emit);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn net_sink(&self, req: Request<NetSinkRequest>) -> Result<Response<Self::NetSinkStream>, Status> {
        let peer = req.remote_addr().map(|a| a.ip());
        let stream = self.shared.connections.stream(req.remote_addr());
        let req = req.into_inner();
        self.authorize(peer, &req.token)?;
        let listener = std::net::TcpListener::bind((self.ip, 0))
            .map_err(|e| Status::internal(format!("cannot open a sink port: {e}")))?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = mpsc::channel(4);
        let _ = tx
            .send(Ok(NetSinkEvent {
                port: u32::from(port),
                bytes_received: 0,
            }))
            .await;
        // perftest's server side, where perftest is installed, for as long as the sink is open.
        let ib_server = std::process::Command::new("ib_write_bw")
            .arg("--report_gbits")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok();
        {
            let (received, stop) = (received.clone(), stop.clone());
            std::thread::spawn(move || crate::bench::net::sink(listener, received, stop));
        }
        let limit = Duration::from_secs(u64::from(req.duration_s.clamp(1, 3600)));
        tokio::spawn(async move {
            let _stream = stream;
            tokio::select! {
                _ = tokio::time::sleep(limit) => {}
                _ = tx.closed() => {}
            }
            stop.store(true, Ordering::SeqCst);
            if let Some(mut c) = ib_server {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = tx
                .send(Ok(NetSinkEvent {
                    port: u32::from(port),
                    bytes_received: received.load(Ordering::SeqCst),
                }))
                .await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn subscribe(&self, req: Request<SubscribeRequest>) -> Result<Response<Self::SubscribeStream>, Status> {
        self.authorize_telemetry(&req)?;
        let max = self.shared.max_subscribers as u64;
        if self
            .shared
            .subscribers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .is_err()
        {
            return Err(Status::resource_exhausted(format!(
                "this agent already serves {max} subscribers (its --max-subscribers); try again later"
            )));
        }
        let slot = SubscriberSlot(self.shared.clone());
        let stream = self.shared.connections.stream(req.remote_addr());
        let req = req.into_inner();
        let mut ready = self.shared.ready.clone();
        let since = if req.no_backfill {
            None
        } else if req.backfill_s == 0 {
            Some(i64::MIN)
        } else {
            Some(self.shared.now_ms() - i64::from(req.backfill_s) * 1000)
        };
        let batches = req.history_batches;
        let columns = req.columns;
        let known_instance = req.known_instance;
        let mut info = self.shared.info.clone();
        info.agent_time_ms = self.shared.now_ms();
        if let Some(j) = &self.shared.fault_journal {
            info.fault_journal = j.read().unwrap_or_else(|e| e.into_inner()).clone();
        }
        let shared = self.shared.clone();
        let mut stop = self.stop.clone();
        // Small: a subscriber that stops reading holds at most this many
        // messages here (the live ones are skipped on the broadcast instead).
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let _slot = (slot, stream);
            let send = |msg: AgentMessage| {
                shared.bytes_sent.fetch_add(msg.encoded_len() as u64, Ordering::Relaxed);
                tx.send(Ok(msg))
            };
            // Each sample goes out encoded against the previous one sent on
            // this stream (see `wire`); a lagging subscriber's skipped
            // samples are then simply not in its chain. The backlog is held
            // in that form already (see `ring`): it goes out as it is.
            let known = known_instance != 0 && known_instance == info.agent_instance;
            if !known
                && send(AgentMessage {
                    kind: Some(Kind::Info(info)),
                })
                .await
                .is_err()
            {
                return;
            }
            // All of the invented history, not the part made so far. The
            // description is out already: the subscriber knows the agent
            // answers (a thousand agents of a demo make theirs in turn).
            tokio::select! {
                r = ready.wait_for(|r| *r) => if r.is_err() { return },
                _ = stop.wait_for(|s| *s) => return,
            }
            let (backlog, mut live) = shared.subscribe(since);
            let mut sent = 0u64;
            let mut last_sent: Option<Arc<Sample>> = None;
            if let Some(backlog) = backlog {
                let sent_all = if batches {
                    send_history_batches(&backlog, &send).await
                } else {
                    send_history_samples(&backlog, &send).await
                };
                match sent_all {
                    Some(n) => sent = n,
                    None => return,
                }
                last_sent = backlog.last;
            }
            // The last sample sent live that carried NVLink counters: the
            // base of the next ones in a column delta.
            let mut last_links: Option<Arc<Sample>> = None;
            let mut wrap = |s: &Arc<Sample>| {
                let delta = match columns {
                    true => crate::wire::encode_columns(last_sent.as_deref(), last_links.as_deref(), s),
                    false => crate::wire::encode(last_sent.as_deref(), s),
                };
                let msg = AgentMessage {
                    kind: Some(Kind::Sample(delta)),
                };
                if crate::wire::columns::carries_links(s) {
                    last_links = Some(s.clone());
                }
                last_sent = Some(s.clone());
                msg
            };
            if send(AgentMessage {
                kind: Some(Kind::CaughtUp(sent)),
            })
            .await
            .is_err()
            {
                return;
            }
            loop {
                let next = tokio::select! {
                    r = live.recv() => r,
                    _ = stop.wait_for(|s| *s) => return,
                };
                match next {
                    Ok(s) => {
                        let msg = wrap(&s);
                        if send(msg).await.is_err() {
                            return; // the subscriber is gone
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!("slow subscriber skipped {n} samples");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
