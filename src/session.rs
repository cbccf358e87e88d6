//! A console's connection to its fleet: resolve the SOURCE to targets
//! (starting the demo agents if asked), create the store, and start the tasks
//! that feed its one update channel: a source per node, the scheduler poller
//! (with `--slurm`; and the Kubernetes and Ray pollers with `--kubernetes`
//! and `--ray`), and the action task that runs what the person confirmed
//! (`ops::execute`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::config::Config;
use crate::ingest::agent::{self, SourceOptions};
use crate::ingest::racks::Racks;
use crate::ingest::slurm::Slurm;
use crate::ingest::source::Source;
use crate::ingest::targets::{self, Feed, Resolved};
use crate::ingest::{pace, prometheus, scrape};
use crate::model::request::Request;
use crate::model::target::Target;
use crate::model::time::now_ms;
use crate::model::update::Update;
use crate::ops::execute::Executor;
use crate::ops::timeline;
use crate::record::writer::Stats;
use crate::record::{RecordError, Recorder, RecorderOptions};
use crate::store::{Link, NodeState, Store};

/// How often a console reads what others appended to the audit log.
const AUDIT_FOLLOW_EVERY: Duration = Duration::from_secs(3);

/// A console's live connection to its fleet.
pub struct Session {
    pub store: Store,
    pub updates: mpsc::Receiver<Update>,
    /// Kept alive for as long as the session: dropping it stops the demo.
    #[cfg(feature = "demo")]
    demo: Option<crate::ingest::demo::Demo>,
    /// Where confirmed actions, burn-in requests and refusals (for the log) go.
    pub actions: Option<mpsc::Sender<Request>>,
    /// A scheduler is known, so drain/resume/undrain can run.
    pub scheduler: bool,
    /// The agents' bench token, when known (config, or the demo's own).
    pub bench_token: Option<String>,
    /// Kubernetes is read and acted on (`--kubernetes`).
    pub kubernetes: bool,
}

/// Reads a scheduler (Slurm, Kubernetes, Ray) with `read` every `every`,
/// and at once when poked (after an action), sending each read's update.
async fn poll<F, R>(mut read: F, every: Duration, poke: Arc<Notify>, tx: mpsc::Sender<Update>)
where
    F: FnMut() -> R,
    R: std::future::Future<Output = Update>,
{
    loop {
        if tx.send(read().await).await.is_err() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = poke.notified() => {}
        }
    }
}

/// One read of Slurm, off the async threads (its tools block).
async fn read_slurm(slurm: Slurm) -> Update {
    match tokio::task::spawn_blocking(move || slurm.query()).await {
        Ok(Ok(snap)) => Update::Scheduler(Arc::new(snap)),
        Ok(Err(e)) => Update::SchedulerError(e.to_string()),
        Err(e) => Update::SchedulerError(e.to_string()),
    }
}

/// Reads the remediation policy's state file every few seconds and sends
/// it when it changed: the header says when the breaker tripped, whichever
/// process runs the policy.
async fn poll_remediation(tx: mpsc::Sender<Update>) {
    let path = crate::ops::remediate::path();
    let mut last: Option<crate::model::remediation::State> = None;
    loop {
        let p = path.clone();
        let read = tokio::task::spawn_blocking(move || p.exists().then(|| crate::ops::remediate::load(&p))).await;
        if let Ok(Some(Ok(state))) = read
            && last.as_ref() != Some(&state)
        {
            last = Some(state.clone());
            if tx.send(Update::Remediation(Box::new(state))).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

impl Session {
    /// Starts the sources of `source` (and the demo agents for `--demo`)
    /// for a console that keeps running.
    pub async fn start(source: &Source, cfg: &Config) -> anyhow::Result<Session> {
        Session::start_for(source, cfg, agent::Reading::Running).await
    }

    /// As `start`, for what the session reads the fleet's history for.
    pub async fn start_for(source: &Source, cfg: &Config, reading: agent::Reading) -> anyhow::Result<Session> {
        let slurm = targets::slurm(cfg);
        // Before anything starts: a bad rack hostlist is a config error.
        let racks = Racks::from_config(cfg)?;
        // A kubeconfig that cannot be used stops the start, in one line.
        let kube = match &source.kube {
            Some(opts) => Some((crate::ingest::kube::connect(opts).await?, opts.refresh)),
            None => None,
        };
        // So is a --ray that is not a dashboard's URL.
        let ray = targets::ray(&source.ray, cfg)?;
        let mut resolved: Resolved = targets::resolve(source, cfg).await?;
        let bench_token = resolved.bench_token;
        let mut store = Store::new(resolved.targets, cfg.thresholds.clone());
        // How late this runtime gets to its tasks: said as the console's
        // lag, and not counted against the agents by their timeouts.
        pace::spawn_probe(&store.pace);
        resolved.access.pace = store.pace.clone();
        store.set_racks(|n| racks.rack_of(n));
        store.scheduler_known = source.slurm;
        store.kube.known = kube.is_some();
        let (tx, updates) = mpsc::channel(8192);
        let targets: Vec<Target> = store.nodes.iter().map(|n| n.target.clone()).collect();
        let sources = SourceOptions {
            access: resolved.access.clone(),
            // 0 asks for everything: a second is the least that can be asked.
            backfill_s: source.backfill.map_or_else(
                || agent::default_backfill_s(targets.len(), reading),
                |d| d.as_secs().clamp(1, u64::from(u32::MAX)) as u32,
            ),
            ..SourceOptions::default()
        };
        if source.backfill.is_none() && sources.backfill_s > 0 && matches!(resolved.feed, Feed::Agents) {
            tracing::info!(
                "{} nodes: {} s of each agent's history read at start (--backfill to choose)",
                targets.len(),
                sources.backfill_s
            );
        }
        match &resolved.feed {
            Feed::Agents => {
                agent::spawn_all(&targets, &sources, tx.clone());
            }
            Feed::Exporter(opts) => {
                scrape::spawn_all(&targets, opts, tx.clone()).map_err(anyhow::Error::msg)?;
            }
            Feed::Prometheus(p) => {
                prometheus::spawn(p.clone(), targets.clone(), source.scrape_interval, tx.clone());
            }
        }
        // The nodes' timelines as kept on disk, read off the update path.
        let names: std::collections::BTreeSet<String> = targets.iter().map(|t| t.name.clone()).collect();
        let ttx = tx.clone();
        if source.demo.is_none() {
            tokio::spawn(async move {
                let week = now_ms() - 7 * 24 * 3_600_000;
                let (names, mut follow) = (Arc::new(names), timeline::AuditFollower::from_end());
                let all = names.clone();
                if let Ok(events) = tokio::task::spawn_blocking(move || timeline::load(Some(&all), week)).await
                    && !events.is_empty()
                    && ttx.send(Update::Timeline(events)).await.is_err()
                {
                    return;
                }
                // Then what others do (the CLI, another console, a watch's
                // policy), as they do it.
                loop {
                    tokio::time::sleep(AUDIT_FOLLOW_EVERY).await;
                    let names = names.clone();
                    let Ok((events, f)) = tokio::task::spawn_blocking(move || {
                        let events = follow.new_events(&names);
                        (events, follow)
                    })
                    .await
                    else {
                        return;
                    };
                    follow = f;
                    if !events.is_empty() && ttx.send(Update::Timeline(events)).await.is_err() {
                        return;
                    }
                }
            });
        }
        if source.demo.is_none() {
            tokio::spawn(poll_remediation(tx.clone()));
        }
        let poke = Arc::new(Notify::new());
        if source.slurm {
            let s = slurm.clone();
            let read = move || read_slurm(s.clone());
            tokio::spawn(poll(read, cfg.slurm.refresh, poke.clone(), tx.clone()));
        }
        let ray = ray.map(|r| {
            let rpoke = Arc::new(Notify::new());
            store.ray = Some(crate::store::ray::RayState::new(r.gcs.clone()));
            let ray = r.clone();
            let read = move || {
                let ray = ray.clone();
                async move {
                    match ray.read().await {
                        Ok(snap) => Update::Ray(Arc::new(snap)),
                        Err(e) => Update::RayError(e.to_string()),
                    }
                }
            };
            tokio::spawn(poll(read, cfg.ray.refresh, rpoke.clone(), tx.clone()));
            (r, rpoke)
        });
        let kube = kube.map(|(k, every)| {
            let kpoke = Arc::new(Notify::new());
            let kube = k.clone();
            let read = move || {
                let kube = kube.clone();
                async move {
                    match kube.gpu_nodes().await {
                        Ok(snap) => Update::Kube(Arc::new(snap)),
                        Err(e) => Update::KubeError(e.to_string()),
                    }
                }
            };
            tokio::spawn(poll(read, every, kpoke.clone(), tx.clone()));
            (k, kpoke)
        });
        let kubernetes = kube.is_some();
        let (atx, arx) = mpsc::channel(8);
        let executor = Executor {
            slurm,
            poke,
            kube,
            ray,
            targets,
            bench_token: bench_token.clone(),
            access: resolved.access,
        };
        tokio::spawn(executor.run(arx, tx));
        Ok(Session {
            store,
            updates,
            #[cfg(feature = "demo")]
            demo: resolved.demo,
            actions: Some(atx),
            scheduler: source.slurm,
            bench_token,
            kubernetes,
        })
    }

    /// A session on these agents alone, for a command that must know what
    /// they say before it acts (`node resume`, `node return`): no scheduler,
    /// no actions, no timeline from disk. `settle` it, then read its store.
    pub fn of_agents(targets: Vec<Target>, mut access: agent::Access, cfg: &Config) -> Session {
        let store = Store::new(targets, cfg.thresholds.clone());
        pace::spawn_probe(&store.pace);
        access.pace = store.pace.clone();
        let (tx, updates) = mpsc::channel(8192);
        let targets: Vec<Target> = store.nodes.iter().map(|n| n.target.clone()).collect();
        let sources = SourceOptions {
            access,
            backfill_s: agent::default_backfill_s(targets.len(), agent::Reading::Snapshot),
            ..SourceOptions::default()
        };
        agent::spawn_all(&targets, &sources, tx);
        Session {
            store,
            updates,
            #[cfg(feature = "demo")]
            demo: None,
            actions: None,
            scheduler: false,
            bench_token: None,
            kubernetes: false,
        }
    }

    /// Stops what the session started (the demo's agents).
    pub async fn stop(self) {
        // The readers first: with no one to take their updates the streams'
        // tasks end and close their connections, so the demo's agents have
        // none left to wait for.
        let Session { updates, actions, .. } = self;
        drop(updates);
        drop(actions);
        #[cfg(feature = "demo")]
        if let Some(d) = self.demo {
            d.stop().await;
        }
    }

    /// Records every update from now on (`--record`, `fleetop record`): the
    /// channel is teed, each update written with its arrival time before it
    /// is passed on. Call before anything takes `updates`. A recording that
    /// fails (a full disk) stops recording, never the console: see
    /// `RecordHandle::error`.
    pub fn record(&mut self, opts: RecorderOptions) -> Result<RecordHandle, RecordError> {
        let targets: Vec<Target> = self.store.nodes.iter().map(|n| n.target.clone()).collect();
        let rec = Recorder::create(opts, &targets, self.scheduler)?;
        let failed = rec.failed();
        let (tx, rx) = mpsc::channel(8192);
        let mut upstream = std::mem::replace(&mut self.updates, rx);
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut recording = true;
            loop {
                tokio::select! {
                    u = upstream.recv() => {
                        let Some(u) = u else { break };
                        if recording && !rec.record(now_ms(), &u) {
                            recording = false;
                            tracing::error!("recording stopped: {}", rec.error().unwrap_or_default());
                        }
                        // The console may be gone while the recording goes on.
                        let _ = tx.send(u).await;
                    }
                    _ = &mut stopped => break,
                }
            }
            tokio::task::spawn_blocking(move || rec.finish())
                .await
                .unwrap_or_else(|e| {
                    Err(RecordError::Encode {
                        path: Default::default(),
                        what: e.to_string(),
                    })
                })
        });
        Ok(RecordHandle {
            failed,
            stop: Some(stop),
            task,
        })
    }

    /// Applies every update already waiting; true if there were any.
    pub fn drain(&mut self) -> bool {
        let mut any = false;
        while let Ok(u) = self.updates.try_recv() {
            self.store.apply(u, now_ms());
            any = true;
        }
        any
    }

    /// Waits until every node has answered with its history or failed, or
    /// until `timeout`: the moment a first snapshot means something.
    pub async fn settle(&mut self, timeout: Duration) {
        let start = tokio::time::Instant::now();
        let deadline = start + timeout;
        // Nodes before `first_open` have settled and are not looked at
        // again: a pass after each update looked at every node up to the
        // first one still open, each one's state cold in cache.
        let mut first_open = 0;
        let mut progress = start;
        loop {
            self.drain();
            let now = now_ms();
            while self.store.nodes.get(first_open).is_some_and(|n| settled(n, now)) {
                first_open += 1;
            }
            if progress.elapsed() >= Duration::from_secs(1) {
                progress = tokio::time::Instant::now();
                tracing::debug!("settling: {}", self.settling(now));
            }
            // With a scheduler, its first reading (or its failure) belongs in
            // the first snapshot too; without one there is nothing to wait for.
            let sched_done = !self.scheduler || self.store.scheduler.answered();
            let ray_done = self.store.ray.as_ref().is_none_or(|r| r.health.answered());
            let kube_done = !self.kubernetes || self.store.kube.health.answered();
            if sched_done && ray_done && kube_done && first_open == self.store.nodes.len() {
                break;
            }
            tokio::select! {
                u = self.updates.recv() => match u {
                    Some(u) => self.store.apply(u, now_ms()),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        self.drain();
        let now = now_ms();
        self.store.tick(now);
        tracing::debug!(
            "settled after {:.1} s: {}",
            start.elapsed().as_secs_f64(),
            self.settling(now)
        );
    }

    /// Where a first snapshot's wait stands, for the log.
    fn settling(&self, now_ms: i64) -> String {
        let (mut connecting, mut reading, mut down) = (0, 0, 0);
        for n in &self.store.nodes {
            match n.link {
                Link::Connecting => connecting += 1,
                Link::Down { .. } => down += 1,
                Link::Connected { .. } if !settled(n, now_ms) => reading += 1,
                Link::Connected { .. } => {}
            }
        }
        format!(
            "{} nodes: {connecting} connecting, {reading} reading their history, {down} down",
            self.store.nodes.len()
        )
    }
}

/// A recording in progress (see `Session::record`).
pub struct RecordHandle {
    failed: Arc<std::sync::Mutex<Option<String>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<Stats, RecordError>>,
}

impl RecordHandle {
    /// Why the recording stopped early, if it did.
    pub fn error(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|e| e.clone())
    }

    /// Writes what is queued and closes the recording.
    pub async fn finish(mut self) -> anyhow::Result<Stats> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        Ok(self.task.await??)
    }
}

/// A node has said what it has to say for a first snapshot: it failed, or it
/// sent its history and either a sample or nothing for three intervals.
fn settled(n: &NodeState, now_ms: i64) -> bool {
    match &n.link {
        Link::Down { .. } => true,
        Link::Connected { since_ms } => n.caught_up && (n.last.is_some() || now_ms - since_ms > 3 * n.interval_ms()),
        Link::Connecting => false,
    }
}
