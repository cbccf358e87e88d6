//! Connecting a console to its nodes: resolve the SOURCE to targets (starting
//! the demo agents if asked), create the store, and start the sources.

use std::time::Duration;

use tokio::sync::mpsc;

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
        let (targets, demo) = if args.demo {
            let d = demo::start(args.nodes, args.gpus, args.seed).await?;
            (d.targets(), Some(d))
        } else {
            (targets(args, cfg)?, None)
        };
        let store = Store::new(targets, cfg.thresholds.clone());
        let (tx, updates) = mpsc::channel(8192);
        source::spawn_all(
            &store.nodes.iter().map(|n| n.target.clone()).collect::<Vec<_>>(),
            &SourceOptions::default(),
            tx,
        );
        Ok(Session { store, updates, demo })
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
            if self.store.nodes.iter().all(|n| settled(n, now)) {
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
