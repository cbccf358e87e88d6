//! Starting an agent (its sampling task and its gRPC server on a listener)
//! and the handle that stops it. Apart from the calls the server answers:
//! this is the agent's life, not what it says.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use super::{AgentOptions, AgentService, Shared};
use crate::collector::Collector;
use crate::keep::ring::Ring;
use crate::proto::Sample;
use crate::proto::agent_server::AgentServer;
use crate::serve::net::FailedTokens;

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
        limits: crate::serve::metrics::http::Limits,
    ) -> std::io::Result<SocketAddr> {
        let src = crate::serve::metrics::http::Source {
            info: Arc::new(self.shared.info.clone()),
            publisher: self.shared.publisher.clone(),
            token: self.shared.telemetry_token.clone(),
            failed: self.shared.failed_tokens.clone(),
            clock_offset_ms: self.shared.clock_offset_ms,
        };
        let (addr, task) = crate::serve::metrics::http::serve(listener, src, limits, self.stop.subscribe())?;
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
        Some(t) => Some(
            crate::serve::tls::server_config(t)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
        ),
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
        burn_ins: Mutex::new(collector.take_burn_ins()),
        burn_in_live: broadcast::channel(8).0,
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
        publisher: Arc::new(crate::serve::metrics::Publisher::default()),
        connections: Arc::new(crate::serve::net::Connections::default()),
        ready,
    });
    let (stop, stop_rx) = watch::channel(false);
    // The kubelet is asked on a task of its own: a slow or hung kubelet
    // never delays a sample.
    if let Some(p) = &opts.pods {
        let view = crate::sources::pods::HoldersView::default();
        collector.set_pods(view.clone());
        crate::sources::pods::spawn(p.clone(), view, stop_rx.clone());
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
    let incoming = ReceiverStream::new(crate::serve::net::incoming(
        listener,
        limits,
        shared.connections.clone(),
        tls,
    ));
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
