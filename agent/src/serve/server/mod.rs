//! The agent's gRPC server: samples on its own clock into a bounded ring
//! buffer, whatever the number of subscribers, and streams the node
//! description, then history, then live samples to each subscriber.
//!
//! Each subscriber gets a producer task feeding a small bounded channel (the
//! tonic streaming pattern). Live samples reach producers through a broadcast
//! channel, so a slow subscriber only ever lags itself: it skips samples and
//! never blocks sampling or the other subscribers.
//!
//! This file holds what every call shares (`Shared`) and the service that
//! answers the calls; each call is in a file of its own (`subscribe`,
//! `bench` for RunBench and NetSink, `signal_process`), the tokens they
//! check in `auth`, starting and stopping an agent in `start` and its
//! options in `options`.

mod auth;
mod bench;
mod options;
mod signal_process;
mod start;
mod subscribe;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::keep::ring::{Backlog, Ring};
use crate::proto::agent_server::Agent;
use crate::proto::{AgentMessage, NodeInfo, Sample, SubscribeRequest};
use crate::proto::{BenchEvent, BenchRequest, NetSinkEvent, NetSinkRequest, SignalReply, SignalRequest};
use crate::serve::net::FailedTokens;
pub use crate::serve::net::{DEFAULT_MAX_CONNECTIONS_PER_PEER, Limits};
pub use crate::serve::tls::TlsSettings;
pub use options::{AgentOptions, BenchSettings, DEFAULT_MAX_RING_BYTES};
pub use start::{AgentHandle, MAX_RING_SAMPLES, STOP_GRACE, serve, serve_sim};

struct Shared {
    info: NodeInfo,
    /// The fault journal as it is now (the collector updates it): each new
    /// subscriber's description carries it, not the one at start.
    fault_journal: Option<crate::collector::JournalView>,
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<Sample>>,
    /// The burn-ins this node ran (`keep::burnins`): each new subscriber's
    /// description carries them, and each new one goes live to every
    /// subscriber on `burn_in_live`.
    burn_ins: Mutex<crate::keep::burnins::BurnIns>,
    burn_in_live: broadcast::Sender<crate::proto::BurnInRecord>,
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
    gpu_processes: Option<Arc<dyn crate::sources::GpuProcesses>>,
    /// Where each sample is left for /metrics scrapes.
    publisher: Arc<crate::serve::metrics::Publisher>,
    /// Open connections and their streams.
    connections: Arc<crate::serve::net::Connections>,
    /// The ring holds its invented history (the simulated backend's
    /// backfill, made after the agent already listens): subscribers wait
    /// for it, so each gets all of it.
    ready: watch::Receiver<bool>,
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

struct AgentService {
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    /// The address the agent serves on; a network sink listens there too.
    ip: std::net::IpAddr,
}

/// The calls, each answered in its own file.
#[tonic::async_trait]
impl Agent for AgentService {
    type SubscribeStream = ReceiverStream<Result<AgentMessage, Status>>;
    type RunBenchStream = ReceiverStream<Result<BenchEvent, Status>>;
    type NetSinkStream = ReceiverStream<Result<NetSinkEvent, Status>>;

    async fn signal_process(&self, req: Request<SignalRequest>) -> Result<Response<SignalReply>, Status> {
        self.signal_gpu_process(req).await
    }

    async fn run_bench(&self, req: Request<BenchRequest>) -> Result<Response<Self::RunBenchStream>, Status> {
        self.run_bench_stream(req).await
    }

    async fn net_sink(&self, req: Request<NetSinkRequest>) -> Result<Response<Self::NetSinkStream>, Status> {
        self.net_sink_stream(req).await
    }

    async fn subscribe(&self, req: Request<SubscribeRequest>) -> Result<Response<Self::SubscribeStream>, Status> {
        self.subscribe_stream(req).await
    }
}
