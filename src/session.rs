//! A console's connection to its fleet: resolve the SOURCE to targets
//! (starting the demo agents if asked), create the store, and start the tasks
//! that feed its one update channel: a source per node, the scheduler poller
//! (with `--slurm`), and the action task that runs what the person confirmed.

use std::sync::Arc;
use std::time::Duration;

use fleetop_agent::bench::Suite;
use tokio::sync::{Notify, mpsc};

use crate::actions;
use crate::cli::SourceArgs;
use crate::config::Config;
use crate::demo::{self, Demo};
use crate::hostlist::{self, Target};
use crate::sched::Slurm;
use crate::source::{self, SourceOptions};
use crate::store::{BenchUpdate, Link, NodeState, Store, Update};
use crate::tui::app::Outgoing;

/// A console's live connection to its fleet.
pub struct Session {
    pub store: Store,
    pub updates: mpsc::Receiver<Update>,
    /// Kept alive for as long as the session: dropping it stops the demo.
    pub demo: Option<Demo>,
    /// Where confirmed actions, burn-in requests and refusals (for the log) go.
    pub actions: Option<mpsc::Sender<Outgoing>>,
    /// A scheduler is known, so drain/resume/undrain can run.
    pub scheduler: bool,
    /// The agents' bench token, when known (config, or the demo's own).
    pub bench_token: Option<String>,
}

/// Reads the scheduler every `every`, and at once when poked (after an action).
async fn poll_scheduler(slurm: Slurm, every: Duration, poke: Arc<Notify>, tx: mpsc::Sender<Update>) {
    loop {
        let s = slurm.clone();
        let update = match tokio::task::spawn_blocking(move || s.query()).await {
            Ok(Ok(snap)) => Update::Scheduler(Arc::new(snap)),
            Ok(Err(e)) => Update::SchedulerError(e.to_string()),
            Err(e) => Update::SchedulerError(e.to_string()),
        };
        if tx.send(update).await.is_err() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = poke.notified() => {}
        }
    }
}

/// Runs a burn-in suite on some nodes, reporting every event as an update,
/// and logs it like any other action.
async fn run_bench(targets: Vec<(usize, Target)>, suite: Suite, token: String, tx: mpsc::Sender<Update>) {
    use fleetop_agent::proto::bench_event::Kind;
    let suite = suite.name();
    for (node, _) in &targets {
        let _ = tx
            .send(Update::Bench {
                node: *node,
                event: BenchUpdate::Started { suite: suite.into() },
            })
            .await;
    }
    let index: Vec<usize> = targets.iter().map(|(i, _)| *i).collect();
    let list: Vec<Target> = targets.into_iter().map(|(_, t)| t).collect();
    // The callback cannot wait, so events queue without bound here and a
    // forwarder waits on the update channel: nothing is dropped, and a suite
    // produces a few dozen events per node.
    let (queue, mut queued) = mpsc::unbounded_channel::<Update>();
    let forward = {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(u) = queued.recv().await {
                if tx.send(u).await.is_err() {
                    return;
                }
            }
        })
    };
    let seen = |i: usize, k: &Kind| {
        let event = match k {
            Kind::Progress(p) => BenchUpdate::Progress {
                step: p.step.clone(),
                done: p.done,
                total: p.total,
            },
            Kind::Result(r) => BenchUpdate::Result(crate::bench_cmd::result_out(r.clone())),
            Kind::Done(_) => return,
        };
        let _ = queue.send(Update::Bench { node: index[i], event });
    };
    let report = crate::bench_cmd::run_suites(&list, suite, &token, Duration::from_secs(1800), &seen).await;
    // Everything seen goes out before the finish.
    drop(queue);
    let _ = forward.await;
    for (i, n) in report.nodes.iter().enumerate() {
        let _ = tx
            .send(Update::Bench {
                node: index[i],
                event: BenchUpdate::Finished { error: n.error.clone() },
            })
            .await;
    }
    if let Err(e) = crate::bench_cmd::audit_report(&report, &list) {
        tracing::error!("{e}");
    }
}

/// Runs confirmed plans one at a time, logs them (and refusals), starts
/// burn-in suites, and reports back.
async fn run_actions(
    slurm: Slurm,
    mut asks: mpsc::Receiver<Outgoing>,
    poke: Arc<Notify>,
    tx: mpsc::Sender<Update>,
    targets: Vec<Target>,
    bench_token: Option<String>,
) {
    let mut bench: Option<(tokio::task::JoinHandle<()>, Vec<usize>)> = None;
    while let Some(ask) = asks.recv().await {
        let plan = match ask {
            Outgoing::Run(plan) => plan,
            Outgoing::Refused(plan, why) => {
                if let Err(e) = actions::audit(&actions::ActionReport::refused(&plan, &why)) {
                    tracing::error!("cannot write the audit log: {e}");
                }
                continue;
            }
            Outgoing::Bench { nodes, suite } => {
                let Some(token) = bench_token.clone() else { continue };
                let chosen: Vec<(usize, Target)> = nodes
                    .into_iter()
                    .filter_map(|i| targets.get(i).map(|t| (i, t.clone())))
                    .collect();
                let idx = chosen.iter().map(|(i, _)| *i).collect();
                // A suite takes minutes: it runs beside the drain/resume queue.
                bench = Some((tokio::spawn(run_bench(chosen, suite, token, tx.clone())), idx));
                continue;
            }
            Outgoing::CancelBench => {
                if let Some((task, nodes)) = bench.take() {
                    // Dropping the task drops its streams: each agent stops its suite.
                    task.abort();
                    for node in nodes {
                        let event = BenchUpdate::Finished {
                            error: Some("cancelled from the console".into()),
                        };
                        let _ = tx.send(Update::Bench { node, event }).await;
                    }
                }
                continue;
            }
        };
        let s = slurm.clone();
        let report = match tokio::task::spawn_blocking(move || actions::execute(&s, &plan)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("action task failed: {e}");
                continue;
            }
        };
        if let Err(e) = actions::audit(&report) {
            tracing::error!("cannot write the audit log: {e}");
        }
        poke.notify_one();
        if tx.send(Update::ActionDone(Arc::new(report))).await.is_err() {
            return;
        }
    }
}

/// The nodes Slurm knows, at the agent address the config gives them.
pub fn slurm_targets(slurm: &Slurm, cfg: &Config, port: u16) -> anyhow::Result<Vec<Target>> {
    let snap = slurm.query().map_err(|e| anyhow::anyhow!("--slurm: {e}"))?;
    if snap.nodes.is_empty() {
        anyhow::bail!("--slurm: Slurm lists no nodes");
    }
    snap.nodes
        .keys()
        .map(|name| {
            let addr = match cfg.slurm.agents.get(name) {
                Some(a) => a.clone(),
                None => cfg.slurm.agent_address.replace("{name}", name),
            };
            let mut t = hostlist::parse_targets(&addr, port)
                .map_err(|e| anyhow::anyhow!("[slurm] agent_address gives a bad address for {name}: {e}"))?;
            let mut t = t
                .pop()
                .ok_or_else(|| anyhow::anyhow!("[slurm] agent_address gives no address for {name}"))?;
            t.name = name.clone();
            Ok(t)
        })
        .collect()
}

/// The targets a SOURCE names, or the config's, or the local node.
pub fn targets(args: &SourceArgs, cfg: &Config) -> anyhow::Result<Vec<Target>> {
    let port = args.port.or(cfg.port).unwrap_or(50051);
    if let Some(h) = &args.hosts {
        return Ok(hostlist::parse_targets(h, port)?);
    }
    if let Some(f) = &args.hostfile {
        return Ok(hostlist::read_hostfile(f, port)?);
    }
    if let Some(h) = &cfg.hosts {
        return Ok(hostlist::parse_targets(h, port)?);
    }
    if let Some(f) = &cfg.hostfile {
        return Ok(hostlist::read_hostfile(f, port)?);
    }
    Ok(vec![Target {
        name: "localhost".into(),
        host: "127.0.0.1".into(),
        port,
    }])
}

impl Session {
    /// Starts the sources for `args` (and the demo agents for `--demo`).
    pub async fn start(args: &SourceArgs, cfg: &Config) -> anyhow::Result<Session> {
        let slurm = Slurm {
            format: cfg.slurm.format,
        };
        let mut bench_token = match &cfg.bench_token_file {
            Some(p) => Some(
                std::fs::read_to_string(p)
                    .map_err(|e| anyhow::anyhow!("cannot read bench_token_file {}: {e}", p.display()))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        let (targets, demo) = if args.demo {
            // The demo's agents run burn-in for this console, with a one-off token.
            let (bench, token) = crate::bench_cmd::demo_bench()?;
            let d = demo::start_with(args.nodes, args.gpus, args.seed, Some(bench)).await?;
            bench_token = Some(token);
            (d.targets(), Some(d))
        } else if args.slurm {
            let port = args.port.or(cfg.port).unwrap_or(50051);
            let (s, c) = (slurm.clone(), cfg.clone());
            (
                tokio::task::spawn_blocking(move || slurm_targets(&s, &c, port)).await??,
                None,
            )
        } else {
            (targets(args, cfg)?, None)
        };
        let store = Store::new(targets, cfg.thresholds.clone());
        let (tx, updates) = mpsc::channel(8192);
        let targets: Vec<Target> = store.nodes.iter().map(|n| n.target.clone()).collect();
        source::spawn_all(&targets, &SourceOptions::default(), tx.clone());
        let poke = Arc::new(Notify::new());
        if args.slurm {
            tokio::spawn(poll_scheduler(
                slurm.clone(),
                cfg.slurm.refresh,
                poke.clone(),
                tx.clone(),
            ));
        }
        let (atx, arx) = mpsc::channel(8);
        tokio::spawn(run_actions(slurm, arx, poke, tx, targets, bench_token.clone()));
        Ok(Session {
            store,
            updates,
            demo,
            actions: Some(atx),
            scheduler: args.slurm,
            bench_token,
        })
    }

    /// Applies every update already waiting; true if there were any.
    pub fn drain(&mut self) -> bool {
        let mut any = false;
        while let Ok(u) = self.updates.try_recv() {
            self.store.apply(u, fleetop_agent::now_ms());
            any = true;
        }
        any
    }

    /// Waits until every node has answered with its history or failed, or
    /// until `timeout`: the moment a first snapshot means something.
    pub async fn settle(&mut self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            self.drain();
            let now = fleetop_agent::now_ms();
            // With a scheduler, its first reading belongs in the first snapshot too.
            let sched_done = self.actions.is_none()
                || self.store.scheduler_read_ms.is_some()
                || self.store.scheduler_error.is_some();
            if sched_done && self.store.nodes.iter().all(|n| settled(n, now)) {
                break;
            }
            tokio::select! {
                u = self.updates.recv() => match u {
                    Some(u) => self.store.apply(u, fleetop_agent::now_ms()),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        self.drain();
        self.store.tick(fleetop_agent::now_ms());
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
