//! Connecting a console to its nodes: resolve the SOURCE to targets (starting
//! the demo agents if asked), create the store, and start the sources.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::actions;
use crate::sched::Slurm;
use crate::tui::app::Outgoing;

use crate::cli::SourceArgs;
use crate::config::Config;
use crate::demo::{self, Demo};
use crate::hostlist::{self, Target};
use crate::source::{self, SourceOptions};
use crate::store::{Link, NodeState, Store, Update};

/// A console's live connection to its fleet.
pub struct Session {
    pub store: Store,
    pub updates: mpsc::Receiver<Update>,
    /// Kept alive for as long as the session: dropping it stops the demo.
    pub demo: Option<Demo>,
    /// Where confirmed actions (and refusals, for the log) go, when a
    /// scheduler is known.
    pub actions: Option<mpsc::Sender<Outgoing>>,
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

/// Runs confirmed plans one at a time, logs them (and refusals), and
/// reports back.
async fn run_actions(slurm: Slurm, mut asks: mpsc::Receiver<Outgoing>, poke: Arc<Notify>, tx: mpsc::Sender<Update>) {
    while let Some(ask) = asks.recv().await {
        let plan = match ask {
            Outgoing::Run(plan) => plan,
            Outgoing::Refused(plan, why) => {
                if let Err(e) = actions::audit(&actions::ActionReport::refused(&plan, &why)) {
                    tracing::error!("cannot write the audit log: {e}");
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
        let (targets, demo) = if args.demo {
            let d = demo::start(args.nodes, args.gpus, args.seed).await?;
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
        let actions = args.slurm.then(|| {
            let poke = Arc::new(Notify::new());
            tokio::spawn(poll_scheduler(
                slurm.clone(),
                cfg.slurm.refresh,
                poke.clone(),
                tx.clone(),
            ));
            let (atx, arx) = mpsc::channel(8);
            tokio::spawn(run_actions(slurm, arx, poke, tx));
            atx
        });
        Ok(Session {
            store,
            updates,
            demo,
            actions,
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
