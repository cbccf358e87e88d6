//! RunBench (a burn-in suite, streamed as it runs) and NetSink (the far
//! end of another node's network test). Apart from the other calls: these
//! load the node, one suite at a time, and need the bench token.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{AgentService, Shared};
use crate::bench::sim::SimBench;
use crate::bench::{BenchContext, Suite};
use crate::proto::{BenchEvent, BenchRequest, BurnInRecord, NetSinkEvent, NetSinkRequest, bench_event};

/// Frees the agent for the next suite when the running one ends, however.
struct BusyGuard(Arc<Shared>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.bench_busy.store(false, Ordering::SeqCst);
    }
}

impl AgentService {
    pub(super) async fn run_bench_stream(
        &self,
        req: Request<BenchRequest>,
    ) -> Result<Response<ReceiverStream<Result<BenchEvent, Status>>>, Status> {
        let peer = req.remote_addr();
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
            // HIP where the agent reads its GPUs through AMD SMI, else CUDA.
            gpu_api: crate::bench::GpuApi::of(&shared.info),
            latest: Arc::new(move || shared.ring.lock().ok().and_then(|r| r.latest().cloned())),
        };
        let limit = match req.timeout_s {
            0 => settings.max_duration,
            t => settings.max_duration.min(Duration::from_secs(u64::from(t))),
        };
        let target = (!req.net_target.is_empty()).then_some(req.net_target);
        let (tx, rx) = mpsc::channel(64);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The timeout: stop the suite, and say so. It also ends when the
        // suite does (`ended`): its copy of the sender would otherwise keep
        // the answer open, after the verdict, until the timeout.
        let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ended, suite_ended) = tokio::sync::oneshot::channel::<()>();
        {
            let (stop, timed_out, tx) = (stop.clone(), timed_out.clone(), tx.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(limit) => {
                        timed_out.store(true, Ordering::SeqCst);
                        stop.store(true, Ordering::SeqCst);
                    }
                    _ = tx.closed() => stop.store(true, Ordering::SeqCst),
                    _ = suite_ended => {}
                }
            });
        }
        // The record this burn-in leaves in the node's journal, filled as
        // its checks come.
        let mut record = self.burn_in_record(suite, &req.requested_by, peer.map(|a| a.ip()));
        let (agents_on_host, host) = (req.agents_on_host, self.shared.info.hostname.clone());
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let _busy = guard;
            let _stream = stream;
            // Dropped when the suite ends, however: the timeout ends too.
            let _ended = ended;
            let mut emit = |e: BenchEvent| {
                let e = match e.kind {
                    Some(bench_event::Kind::Result(mut r)) => {
                        share_of_host(&mut r, agents_on_host, &host);
                        record.checks.push(r.clone());
                        BenchEvent {
                            kind: Some(bench_event::Kind::Result(r)),
                        }
                    }
                    Some(bench_event::Kind::Done(mut d)) => {
                        if timed_out.load(Ordering::SeqCst) {
                            d.error = format!("timed out after {} s", limit.as_secs());
                        }
                        // A suite the caller cancelled has no verdict.
                        if !d.cancelled || timed_out.load(Ordering::SeqCst) {
                            d.record = Some(shared.keep_burn_in(std::mem::take(&mut record), &d.error));
                        }
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

    /// A burn-in's record as it starts: the node as this agent knows it
    /// now, who asked (in their words, or the address they asked from).
    fn burn_in_record(&self, suite: Suite, requested_by: &str, peer: Option<std::net::IpAddr>) -> BurnInRecord {
        let info = &self.shared.info;
        let by = fleetop_proto::input::printable(requested_by.trim(), 128);
        BurnInRecord {
            started_ms: self.shared.now_ms(),
            suite: suite.name().into(),
            requested_by: match (by.is_empty(), peer) {
                (false, _) => by,
                (true, Some(ip)) => format!("a console at {ip}"),
                (true, None) => "a console".into(),
            },
            hostname: info.hostname.clone(),
            machine_id: info.machine_id.clone(),
            boot_id: info.boot_id.clone(),
            gpu_uuids: info.gpus.iter().map(|g| g.uuid.clone()).collect(),
            gpu_serials: info.gpus.iter().map(|g| g.serial_number.clone()).collect(),
            ..Default::default()
        }
    }

    pub(super) async fn net_sink_stream(
        &self,
        req: Request<NetSinkRequest>,
    ) -> Result<Response<ReceiverStream<Result<NetSinkEvent, Status>>>, Status> {
        let peer = req.remote_addr();
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
}

impl Shared {
    /// Judges a suite that ended, keeps its verdict in the node's burn-in
    /// journal and sends it to every subscriber; the record as kept.
    fn keep_burn_in(&self, mut record: BurnInRecord, error: &str) -> BurnInRecord {
        let now = self.now_ms();
        record.ended_ms = now;
        record.error = error.to_string();
        // Every GPU the node should have: those it lists, those its
        // --expect-gpus says, those on the bus that its library misses.
        let expect = (self.info.gpus.len() + self.info.gpus_missing_pci.len()).max(self.info.expect_gpus as usize);
        record.passed = crate::keep::burnins::passed(&record.checks, error, expect);
        let mut journal = self.burn_ins.lock().unwrap_or_else(|e| e.into_inner());
        let kept = journal.add(record, now);
        // Under the lock: a new subscriber has it in its description or here.
        let _ = self.burn_in_live.send(kept.clone());
        kept
    }
}

/// A host figure of a run that `agents` agents on this host ran at once is
/// a share of the host: below its floor, a warning that says so, never a
/// hardware failure of every node on that host.
fn share_of_host(r: &mut crate::proto::BenchResult, agents: u32, host: &str) {
    use crate::proto::Verdict;
    if agents < 2 || r.gpu >= 0 || !fleetop_proto::bench::HOST_CHECKS.contains(&r.name.as_str()) {
        return;
    }
    if r.verdict == Verdict::Fail as i32 {
        r.verdict = Verdict::Warn as i32;
    }
    if r.verdict != Verdict::Skipped as i32 {
        let note = fleetop_proto::bench::shared_host_note(agents, host);
        r.reason = match r.reason.is_empty() {
            true => note,
            false => format!("{}; {note}", r.reason),
        };
    }
}
