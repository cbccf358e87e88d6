//! The cluster store: the latest state of every node, rates derived from
//! consecutive samples, bounded per-GPU history, connection state, and each
//! node's detectors. It is fed one `Update` at a time and read by the view
//! and the export; it does no I/O.

pub mod history;
pub mod kube;
mod lag;
mod matching;
pub mod node;
pub mod rates;
pub mod ray;
pub mod skew;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::detect::Thresholds;
use crate::model::action::ActionReport;
use crate::model::bench::{BenchState, BenchUpdate, Outcome};
use crate::model::flag::Severity;
use crate::model::pace::Pace;
use crate::model::sched::{self, SchedHealth};
use crate::model::target::Target;
use crate::model::timeline;
use crate::model::update::{Event, Update};

pub use lag::{LAG_SAID, LATE_SAID, Lag};
pub use node::{Link, NodeState, NodeStatus};

/// Every node the console watches.
#[derive(Debug, Clone)]
pub struct Store {
    pub nodes: Vec<NodeState>,
    pub thresholds: Thresholds,
    history_len: usize,
    /// Whether a scheduler is read at all (`--slurm`).
    pub scheduler_known: bool,
    /// How reading the scheduler goes.
    pub scheduler: SchedHealth,
    /// The result of the last cluster action (drain, resume, ...).
    pub last_action: Option<Arc<ActionReport>>,
    /// Burn-in by node index, from the last suite started on each.
    pub bench: BTreeMap<usize, BenchState>,
    /// A node description arrived: the fleet's version skew is judged
    /// again at the next tick (once, whatever the number of arrivals).
    skew_dirty: bool,
    /// Flag events not yet saved to the state directory: `Some` only in a
    /// live console that keeps its timelines (`keep_timeline`), never in a
    /// replay or a benchmark.
    unsaved: Option<Vec<timeline::Event>>,
    /// The remediation policy's state, where one runs on this fleet.
    pub remediation: Option<crate::model::remediation::State>,
    /// The Ray cluster, where one is read (`--ray`).
    pub ray: Option<ray::RayState>,
    /// How far behind the console is in taking in what arrived (see `Lag`).
    pub lag: Lag,
    /// How late the console's runtime gets to its tasks (never, where no
    /// probe runs: a replay, a test).
    pub pace: Arc<Pace>,
    /// Kubernetes' view of the nodes (`--kubernetes`).
    pub kube: kube::KubeOverlay,
    /// How many nodes go by each name: a node given by address takes its
    /// agent's host name where no other has it, asked on every connection
    /// (a scan of the fleet each time was 10,000 x 10,000 comparisons at a
    /// large console's start).
    names: HashMap<String, usize>,
}

/// Samples of history kept per node (ten minutes at 1 Hz).
pub const DEFAULT_HISTORY: usize = 600;

impl Store {
    pub fn new(targets: Vec<Target>, thresholds: Thresholds) -> Self {
        let mut names = HashMap::new();
        for t in &targets {
            *names.entry(t.name.clone()).or_default() += 1;
        }
        Store {
            names,
            nodes: targets.into_iter().map(NodeState::new).collect(),
            thresholds,
            history_len: DEFAULT_HISTORY,
            scheduler_known: false,
            scheduler: SchedHealth::default(),
            last_action: None,
            bench: Default::default(),
            skew_dirty: false,
            unsaved: None,
            remediation: None,
            ray: None,
            lag: Lag::default(),
            pace: Arc::default(),
            kube: Default::default(),
        }
    }

    /// From now on, flag events are kept for `take_unsaved` (a live
    /// console saves them to its state directory).
    pub fn keep_timeline(&mut self) {
        self.unsaved.get_or_insert_with(Vec::new);
    }

    /// The flag events raised and cleared since the last call, to be saved.
    pub fn take_unsaved(&mut self) -> Vec<timeline::Event> {
        self.unsaved.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn with_history(mut self, samples: usize) -> Self {
        self.history_len = samples.max(2);
        self
    }

    /// Gives each node its rack: `rack_of` maps a node name to its rack.
    pub fn set_racks(&mut self, rack_of: impl Fn(&str) -> Option<String>) {
        for n in &mut self.nodes {
            n.rack = rack_of(&n.target.name);
        }
    }

    /// Applies one update at console time `now_ms`.
    pub fn apply(&mut self, u: Update, now_ms: i64) {
        let (node, event) = match u {
            Update::Node { node, event } => (node, event),
            Update::Scheduler(snap) => {
                self.apply_scheduler(&snap, now_ms);
                return;
            }
            Update::SchedulerError(e) => {
                self.scheduler.error = Some(e);
                self.scheduler.error_ms = Some(now_ms);
                return;
            }
            Update::ActionDone(report) => {
                self.add_events(timeline::from_report(&report, now_ms));
                self.last_action = Some(report);
                return;
            }
            Update::Timeline(events) => {
                self.add_events(events);
                return;
            }
            Update::Remediation(state) => {
                self.remediation = Some(*state);
                return;
            }
            Update::Ray(snap) => {
                self.apply_ray(snap, now_ms);
                return;
            }
            Update::RayError(e) => {
                self.apply_ray_error(e, now_ms);
                return;
            }
            Update::Bench { node, event } => {
                self.apply_bench(node, event, now_ms);
                return;
            }
            Update::Kube(snap) => {
                self.kube.apply(&self.nodes, &snap, now_ms);
                return;
            }
            Update::KubeError(e) => {
                self.kube.failed(e, now_ms);
                return;
            }
        };
        if let Event::Info(info) = &event {
            self.name_by_host(node, &info.hostname);
        }
        let th = &self.thresholds;
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        match event {
            Event::Info(info) => {
                self.skew_dirty = true;
                for e in timeline::from_journal(&n.target.name, &info.health.fault_journal) {
                    n.timeline.add(e);
                }
                n.gpus_seen = n.gpus_seen.max(info.gpus.len() as u32);
                let latest = info.health.burn_ins.iter().max_by_key(|b| b.ended_ms).cloned();
                n.info = Some(*info);
                n.link = Link::Connected { since_ms: now_ms };
                n.caught_up = false;
                if let Some(b) = latest {
                    n.judge_burn_in(&b, now_ms, th);
                }
                if let Some(info) = &n.info {
                    for e in timeline::from_burn_ins(&n.target.name, &info.health.burn_ins) {
                        n.timeline.add(e);
                    }
                }
                n.take_flag_changes(self.unsaved.as_mut());
            }
            Event::BurnIn(b) => {
                let new = n.info.as_mut().is_some_and(|i| i.health.add_burn_in((*b).clone()));
                if new {
                    n.judge_burn_in(&b, now_ms, th);
                    for e in timeline::from_burn_ins(&n.target.name, std::slice::from_ref(&b)) {
                        n.timeline.add(e);
                    }
                    n.take_flag_changes(self.unsaved.as_mut());
                }
            }
            Event::Sample(s) => {
                // Live samples only: history says nothing of the node now.
                if n.caught_up {
                    n.received_ms = Some(now_ms);
                    self.lag.saw(now_ms - s.time_ms, now_ms);
                }
                n.ingest(*s, self.history_len, th);
                n.take_flag_changes(self.unsaved.as_mut());
            }
            Event::CaughtUp => n.caught_up = true,
            Event::Down(error) => {
                // Keep the time of the first failure while it stays down.
                let since_ms = match &n.link {
                    Link::Down { since_ms, .. } => *since_ms,
                    _ => now_ms,
                };
                n.link = Link::Down { since_ms, error };
                n.caught_up = false;
            }
        }
    }

    /// A node's burn-in moves on; its verdict raises or clears the node's
    /// `burnin_failed` flag, so a failure shows in alerts, filters and the
    /// export like any other.
    fn apply_bench(&mut self, node: usize, event: BenchUpdate, now_ms: i64) {
        let cleared = matches!(event, BenchUpdate::Cleared);
        let b = self.bench.entry(node).or_default();
        b.apply(event);
        let passed = b.outcome() == Outcome::Passed;
        let verdict = match b.outcome() {
            // Judged when it ends: a run failing midway is shown, not flagged.
            Outcome::Failed if b.finished => Some(Some((Severity::Crit, b.failure()))),
            Outcome::Failed => None,
            Outcome::Error => Some(Some((Severity::Warn, b.failure()))),
            // Only a run that measured the GPUs and passed clears a failure:
            // a cancelled or incomplete one says nothing new.
            Outcome::Passed => Some(None),
            // A suite that never started says nothing of the hardware.
            Outcome::Running | Outcome::Cancelled | Outcome::Refused | Outcome::Incomplete => cleared.then_some(None),
        };
        if cleared {
            self.bench.remove(&node);
        }
        let (Some(verdict), Some(n)) = (verdict, self.nodes.get_mut(node)) else {
            return;
        };
        if passed {
            // The holds of the faults before it end.
            n.detector.burnin_passed_ms = Some(now_ms);
        }
        let verdict = verdict.map(|(sev, detail)| (sev, now_ms, detail));
        n.detector.set_burnin(verdict, now_ms, &self.thresholds);
        n.take_flag_changes(self.unsaved.as_mut());
    }

    /// A node given by its address (`127.0.0.1:7001`, `10.1.0.7`) is named by
    /// the host name its agent reports, once it reports one: people know
    /// nodes by name, and agents that share an address (containers, a
    /// swarm) are then told apart. Where another node already has that
    /// name, the port is added. Nodes given by name (a hostlist, Slurm)
    /// keep theirs.
    fn name_by_host(&mut self, node: usize, hostname: &str) {
        let Some(n) = self.nodes.get(node) else { return };
        let t = &n.target;
        let by_address = t.by_address();
        let hostname = fleetop_proto::input::printable(hostname.trim(), 64);
        if !by_address || hostname.is_empty() || hostname == t.name {
            return;
        }
        // By another node than this one.
        let taken = |name: &str| self.names.get(name).copied().unwrap_or(0) > usize::from(name == t.name);
        let name = if taken(&hostname) {
            format!("{hostname}:{}", t.port)
        } else {
            hostname
        };
        if !taken(&name) {
            let old = std::mem::replace(&mut self.nodes[node].target.name, name.clone());
            if let Some(n) = self.names.get_mut(&old) {
                *n -= 1;
            }
            *self.names.entry(name).or_default() += 1;
        }
    }

    /// Puts events (from the state directory, the audit log, an action just
    /// done) on the timelines of the nodes they name; events of nodes this
    /// console does not watch are dropped.
    pub(super) fn add_events(&mut self, events: Vec<timeline::Event>) {
        if events.is_empty() {
            return;
        }
        let index: std::collections::HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.target.name.as_str(), i))
            .collect();
        let at: Vec<Option<usize>> = events.iter().map(|e| index.get(e.node.as_str()).copied()).collect();
        for (e, i) in events.into_iter().zip(at) {
            if let Some(n) = i.and_then(|i| self.nodes.get_mut(i)) {
                n.timeline.add(e);
            }
        }
    }

    /// Gives each node its scheduler state and jobs (by name); nodes the
    /// scheduler does not know get none.
    fn apply_scheduler(&mut self, snap: &sched::Snapshot, now_ms: i64) {
        for n in &mut self.nodes {
            n.scheduler = snap.nodes.get(&n.target.name).map(|s| sched::NodeView {
                node: s.clone(),
                jobs: snap
                    .jobs
                    .iter()
                    .filter(|j| j.nodes.contains(&n.target.name))
                    .cloned()
                    .collect(),
            });
        }
        self.scheduler = SchedHealth {
            read_ms: Some(now_ms),
            error: None,
            error_ms: None,
        };
    }

    /// Marks every node's history as arrived (for fleets fed without a
    /// network: tests and benchmarks).
    pub fn apply_all_caught_up(&mut self, now_ms: i64) {
        for i in 0..self.nodes.len() {
            self.apply(
                Update::Node {
                    node: i,
                    event: Event::CaughtUp,
                },
                now_ms,
            );
        }
    }

    /// Re-judges what depends on the clock alone: `stale` (a node silent
    /// for a few intervals, warn) and `unreachable` (its agent cannot be
    /// reached, or never could be, for `unreachable_after`: crit, with why).
    pub fn tick(&mut self, now_ms: i64) {
        // The console's own lag first: a node whose samples wait in its
        // queue, or that its starved runtime did not get to, is not a
        // silent node (`NodeState::status` discounts it).
        let late_ms = self.pace.late().as_millis() as i64;
        let discount = self.lag.judge(now_ms, late_ms);
        let held = self.lag.judging_held();
        // Node descriptions arrived: the host names their agents report
        // are names other schedulers may know the nodes by.
        if self.skew_dirty {
            self.match_ray();
        }
        let th = &self.thresholds;
        let after = th.unreachable_after.as_millis() as i64;
        for n in &mut self.nodes {
            n.console_lag_ms = discount;
            // Held: no flag is raised, and one is cleared only by what the
            // node itself did (a fresh sample), never for the console's lag.
            if held && !matches!(n.status_after(now_ms, th), NodeStatus::Ok | NodeStatus::Connecting) {
                continue;
            }
            let status = n.status(now_ms, th);
            let stale = match (status, &n.last) {
                (NodeStatus::Stale, Some(last)) => {
                    let age_ms = now_ms - last.time_ms;
                    let why = match &n.link {
                        Link::Down { error, .. } => format!("; agent unreachable: {error}"),
                        _ => "; agent connected but not sampling".into(),
                    };
                    Some((last.time_ms, age_ms, format!("no sample for {} s{why}", age_ms / 1000)))
                }
                _ => None,
            };
            n.detector.set_stale(stale, now_ms, th);
            let unreachable = match (status, &n.link) {
                (NodeStatus::Unreachable, Link::Connected { .. }) => n.last.as_ref().map(|l| {
                    let age = now_ms - l.time_ms;
                    let detail = format!("agent connected but not sampling for {} s", age / 1000);
                    (l.time_ms, age, detail)
                }),
                (NodeStatus::Unreachable, Link::Down { since_ms, error }) => {
                    // Silent since its last sample, or since the first
                    // failed attempt for a node never reached.
                    let since = n.last.as_ref().map_or(*since_ms, |l| l.time_ms);
                    let age = now_ms - since;
                    (age >= after).then(|| {
                        let what = if n.last.is_some() {
                            "unreachable"
                        } else {
                            "never reached"
                        };
                        (since, age, format!("agent {what} for {} s: {error}", age / 1000))
                    })
                }
                _ => None,
            };
            n.detector.set_unreachable(unreachable, now_ms, th);
            n.take_flag_changes(self.unsaved.as_mut());
        }
        if std::mem::take(&mut self.skew_dirty) {
            let descs: Vec<_> = self.nodes.iter().map(|n| n.info.as_ref()).collect();
            let skew = skew::judge(&descs);
            for (n, what) in self.nodes.iter_mut().zip(skew) {
                n.detector.set_version_skew(what.map(|w| (now_ms, w)), now_ms, th);
                n.take_flag_changes(self.unsaved.as_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests;
