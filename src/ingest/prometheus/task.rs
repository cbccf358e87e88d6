//! The reading task: discovery, the first read and its history, then a
//! refresh every interval, sent as `Update`s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Fleet, Kept, Prometheus};
use crate::ingest::dcgm::Xids;
use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::target::Target;
use crate::model::time::now_ms;
use crate::model::update::{Event, Update};

/// The nodes Prometheus knows now, as targets: named by their hostname
/// label, at the agent port (for `bench` and the node's address).
pub async fn discover(p: &Prometheus, agent_port: u16) -> anyhow::Result<Vec<Target>> {
    let mut kept = Kept::default();
    let fleet = p
        .read(1000, &mut kept, p.first_timeout())
        .await
        .map_err(|e| anyhow::anyhow!("--prometheus {}: first read of the fleet: {e}", p.url()))?;
    if fleet.nodes.is_empty() {
        anyhow::bail!(
            "--prometheus {}: no dcgm-exporter or fleetop GPU series{}",
            p.url(),
            p.matchers
                .as_deref()
                .map(|m| format!(" matching {{{m}}}"))
                .unwrap_or_default()
        );
    }
    let targets = fleet
        .nodes
        .keys()
        .map(|name| Target {
            name: name.clone(),
            host: name.clone(),
            port: agent_port,
        })
        .collect();
    if let Ok(mut first) = p.first.lock() {
        *first = Some((Instant::now(), fleet, kept));
    }
    Ok(targets)
}

/// Starts the one task that reads the fleet every `interval` for `targets`
/// (node `i` of the store is `targets[i]`).
pub fn spawn(p: Prometheus, targets: Vec<Target>, interval: Duration, tx: mpsc::Sender<Update>) -> JoinHandle<()> {
    tokio::spawn(run(p, targets, interval, tx))
}

async fn run(p: Prometheus, targets: Vec<Target>, interval: Duration, tx: mpsc::Sender<Update>) {
    let n = targets.len();
    let mut described: Vec<Option<NodeDesc>> = vec![None; n];
    let mut xids: Vec<Xids> = (0..n).map(|_| Xids::default()).collect();
    let mut seq = 0u64;
    let mut backfilled = false;
    let mut kept = Kept::default();
    // The first read moves everything; later ones get the configured
    // timeout, or three times the first read's slowest query where that is
    // longer (a large fleet's answers take what they take).
    let mut timeout = p.first_timeout();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tx.closed() => return,
        }
        let started = std::time::Instant::now();
        // Discovery's read stands for the first refresh while it is fresh.
        let first = p.first.lock().ok().and_then(|mut f| f.take());
        let read = match first {
            Some((at, mut fleet, k)) if at.elapsed() < interval => {
                kept = k;
                for m in fleet.nodes.values_mut() {
                    m.desc.interval_ms = interval.as_millis() as i64;
                }
                Ok(fleet)
            }
            _ => p.read(interval.as_millis() as i64, &mut kept, timeout).await,
        };
        tracing::debug!("prometheus refresh read in {} ms", started.elapsed().as_millis());
        let mut fleet = match read {
            Ok(f) => f,
            Err(e) => {
                let why = format!("prometheus {}: {e}", p.url());
                tracing::warn!("{why}");
                for (node, d) in described.iter_mut().enumerate() {
                    *d = None;
                    if tx
                        .send(Update::Node {
                            node,
                            event: Event::Down(why.clone()),
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                continue;
            }
        };
        if !backfilled {
            backfilled = true;
            // The history may cost the start no more than HISTORY_WAIT: a
            // slow store's range query must not hold back the nodes the
            // first read found (a one-shot export waits for them).
            let past = history(&p, &fleet, interval, timeout.min(HISTORY_WAIT)).await;
            if !backfill(&targets, &fleet, past, &mut described, &mut seq, &tx).await {
                return;
            }
            timeout = p.refresh_timeout(fleet.slowest);
            if timeout > p.timeout {
                tracing::info!(
                    "prometheus {}: queries take up to {} ms: refresh timeout {} s",
                    p.url(),
                    fleet.slowest.as_millis(),
                    timeout.as_secs()
                );
            }
        }
        seq += 1;
        for (node, t) in targets.iter().enumerate() {
            let mut events = Vec::with_capacity(3);
            match fleet.nodes.remove(&t.name) {
                _ if fleet.down.contains(&t.name) => {
                    described[node] = None;
                    events.push(Event::Down(
                        "Prometheus reports its exporter down (up == 0): its series are from the last good scrape"
                            .into(),
                    ));
                }
                Some(mut m) => {
                    if described[node].as_ref() != Some(&m.desc) {
                        described[node] = Some(m.desc.clone());
                        events.push(Event::Info(Box::new(m.desc)));
                        events.push(Event::CaughtUp);
                    }
                    m.sample.seq = seq;
                    xids[node].dedup(&mut m.sample);
                    events.push(Event::Sample(Box::new(m.sample)));
                }
                None => {
                    described[node] = None;
                    events.push(Event::Down(
                        "no series for this node in Prometheus' answer (its exporter down or gone?)".into(),
                    ));
                }
            }
            for event in events {
                if tx.send(Update::Node { node, event }).await.is_err() {
                    return;
                }
            }
        }
        if !fleet.nodes.is_empty() {
            tracing::debug!(
                "{} node(s) appeared in Prometheus since the start (seen on the next start)",
                fleet.nodes.len()
            );
        }
    }
}

/// How far back the history is read at start.
const HISTORY_WINDOW: Duration = Duration::from_secs(600);

/// The longest the history's read may hold back the first nodes.
const HISTORY_WAIT: Duration = Duration::from_secs(5);

/// The history the sparklines start with: `HISTORY_WINDOW` back from now
/// at the refresh step. A failed range query costs the history only.
async fn history(
    p: &Prometheus,
    fleet: &Fleet,
    interval: Duration,
    timeout: Duration,
) -> BTreeMap<String, Vec<NodeSample>> {
    let gpus: usize = fleet.nodes.values().map(|m| m.desc.gpus.len()).sum();
    let end = now_ms() - interval.as_millis() as i64 / 2;
    let start = end - HISTORY_WINDOW.as_millis() as i64;
    p.history(start, end, interval, gpus, timeout)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("prometheus {}: no history: {e}", p.url());
            BTreeMap::new()
        })
}

/// After the first good read: each node's description, its history (as
/// with an agent's backfill), and "caught up". False when the session is
/// gone.
async fn backfill(
    targets: &[Target],
    fleet: &Fleet,
    mut past: BTreeMap<String, Vec<NodeSample>>,
    described: &mut [Option<NodeDesc>],
    seq: &mut u64,
    tx: &mpsc::Sender<Update>,
) -> bool {
    for (node, t) in targets.iter().enumerate() {
        let Some(m) = fleet.nodes.get(&t.name) else { continue };
        if fleet.down.contains(&t.name) {
            continue;
        }
        described[node] = Some(m.desc.clone());
        let mut events = vec![Event::Info(Box::new(m.desc.clone()))];
        for mut s in past.remove(&t.name).unwrap_or_default() {
            *seq += 1;
            s.seq = *seq;
            events.push(Event::Sample(Box::new(s)));
        }
        events.push(Event::CaughtUp);
        for event in events {
            if tx.send(Update::Node { node, event }).await.is_err() {
                return false;
            }
        }
    }
    true
}
