//! The cluster store: the latest state of every node, rates derived from
//! consecutive samples, bounded per-GPU history, connection state, and each
//! node's detectors. It is fed one `Update` at a time and read by the view
//! and the export; it does no I/O.

pub mod history;
pub mod kube;
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

/// How far behind the console is, the more of two measures:
/// - what waits in its queue: the median age of the live samples it took
///   in over the last second, when taken in. Most samples are old only when
///   the console (not an agent, nor the network) has fallen behind. Not the
///   freshest: a starved console that reads each stream's backlog in a
///   burst takes in some fresh sample every second while most waited
///   seconds, and the freshest would never say so. Under `LAG_SAID` it is
///   the network's ordinary delay and counts as none.
/// - how late its runtime gets to its tasks (`model::pace`): a console
///   starved outright takes nothing in, and what it never read has no age.
///   From `LATE_SAID`; while so late, it judges no node's silence
///   (`JUDGING_HELD`).
#[derive(Debug, Clone, Default)]
pub struct Lag {
    /// The current window's samples by age, in `AGE_STEP_MS` steps (the
    /// last step holds anything older); empty until a sample is seen.
    ages: Vec<u32>,
    seen: u32,
    window_start_ms: i64,
    /// What the last whole window of samples found: 0 when not behind.
    queued_ms: i64,
    /// The lag as last judged: 0 when not behind.
    pub behind_ms: i64,
    /// How much less a node's silence counts for it (`NodeState::status`):
    /// the queue's lag, or `JUDGING_HELD` while the runtime is late.
    pub discount_ms: i64,
}

/// A discount no silence outlasts: while its runtime is late the console
/// judges no node stale or unreachable. It cannot tell a silent node from
/// one it did not get to: it reads each stream once a round of seconds
/// (one read early in a round may be read late in the next), and agents
/// close connections whose handshake or pings it answers that late. It
/// says `console behind` instead, and judges again once it has been on
/// time a while (`model::pace`).
const JUDGING_HELD: i64 = i64::MAX / 4;

/// A lag under this is no lag: agents' clocks are matched to the console's
/// to within a few hundred milliseconds, and a sample takes that to arrive.
pub const LAG_SAID: i64 = 2_000;

/// A runtime this late is behind: on time it is late by a millisecond or
/// two, and a second late its streams are read late enough for a node to
/// look silent (stale after three intervals).
pub const LATE_SAID: i64 = 1_000;

/// Ages are told apart to a quarter of a second, up to a minute.
const AGE_STEP_MS: i64 = 250;
const AGE_STEPS: usize = 240;

impl Lag {
    /// A lag of `behind_ms` in the queue as judged at `at_ms` (a console's
    /// header in a test).
    pub fn judged(behind_ms: i64, at_ms: i64) -> Lag {
        Lag {
            window_start_ms: at_ms,
            queued_ms: behind_ms,
            behind_ms,
            discount_ms: behind_ms,
            ..Lag::default()
        }
    }

    /// Whether no node's silence is judged now (the runtime is late).
    pub fn judging_held(&self) -> bool {
        self.discount_ms == JUDGING_HELD
    }

    fn saw(&mut self, age_ms: i64, now_ms: i64) {
        if self.seen == 0 && now_ms - self.window_start_ms > 1_000 {
            self.window_start_ms = now_ms;
        }
        if self.ages.is_empty() {
            self.ages = vec![0; AGE_STEPS];
        }
        let step = (age_ms.max(0) / AGE_STEP_MS).min(AGE_STEPS as i64 - 1) as usize;
        self.ages[step] += 1;
        self.seen += 1;
    }

    /// The age half the window's samples reach, to its step.
    fn median_ms(&self) -> i64 {
        let half = self.seen.div_ceil(2);
        let mut counted = 0;
        let step = self.ages.iter().position(|&n| {
            counted += n;
            counted >= half
        });
        step.unwrap_or(0) as i64 * AGE_STEP_MS
    }

    /// The lag at `now_ms`, the runtime being `late_ms` late; returns the
    /// discount. The queue's measure moves at the end of a window of at
    /// least a second that saw live samples; after two seconds with none
    /// taken in at all, nothing waits in the queue (a node that went silent
    /// is judged without a discount).
    fn judge(&mut self, now_ms: i64, late_ms: i64) -> i64 {
        let elapsed = now_ms - self.window_start_ms;
        let median = match self.seen {
            0 if elapsed >= 2_000 => Some(0),
            n if n > 0 && elapsed >= 1_000 => Some(self.median_ms()),
            _ => None,
        };
        if let Some(median) = median {
            self.ages.fill(0);
            self.seen = 0;
            self.window_start_ms = now_ms;
            self.queued_ms = if median >= LAG_SAID { median } else { 0 };
        }
        let late_ms = if late_ms >= LATE_SAID { late_ms } else { 0 };
        self.behind_ms = self.queued_ms.max(late_ms);
        self.discount_ms = if late_ms > 0 { JUDGING_HELD } else { self.queued_ms };
        self.discount_ms
    }
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
                n.info = Some(*info);
                n.link = Link::Connected { since_ms: now_ms };
                n.caught_up = false;
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
            Outcome::Running | Outcome::Cancelled | Outcome::Incomplete => cleared.then_some(None),
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
    fn add_events(&mut self, events: Vec<timeline::Event>) {
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
                // A burn-in that passed, wherever it was run from, ends the
                // holds of the faults before it.
                if matches!(
                    e.what,
                    timeline::What::Action {
                        action: crate::model::action::NodeAction::Bench,
                        ok: true,
                        ..
                    }
                ) {
                    n.detector.burnin_passed_ms = n.detector.burnin_passed_ms.max(Some(e.time_ms));
                }
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
mod tests {
    use super::*;
    use crate::model::flag::{FlagKind, Severity};
    use crate::model::sample::{GpuReading, NodeDesc, NodeSample};

    fn target() -> Target {
        Target {
            name: "n1".into(),
            host: "127.0.0.1".into(),
            port: 1,
        }
    }

    fn on(st: &mut Store, event: Event, now_ms: i64) {
        on_node(st, 0, event, now_ms);
    }

    fn on_node(st: &mut Store, node: usize, event: Event, now_ms: i64) {
        st.apply(Update::Node { node, event }, now_ms);
    }

    fn feed(st: &mut Store, s: NodeSample) {
        on(st, Event::Sample(Box::new(s)), 0);
    }

    /// A store of `n` nodes (`n0`, `n1`, ...), each described (1 s
    /// interval) and caught up at `t0`: what it takes in now is live.
    fn live_store(n: usize, t0: i64) -> Store {
        let targets = (0..n).map(|i| Target {
            name: format!("n{i}"),
            ..target()
        });
        let mut st = Store::new(targets.collect(), Thresholds::default());
        for node in 0..n {
            let desc = NodeDesc {
                interval_ms: 1_000,
                ..Default::default()
            };
            on_node(&mut st, node, Event::Info(Box::new(desc)), t0);
            on_node(&mut st, node, Event::CaughtUp, t0);
        }
        st
    }

    /// Node `node`'s sample taken at `time_ms`, taken in at `now_ms`.
    fn sample_at(st: &mut Store, node: usize, time_ms: i64, now_ms: i64) {
        let s = NodeSample {
            time_ms,
            ..Default::default()
        };
        on_node(st, node, Event::Sample(Box::new(s)), now_ms);
    }

    /// A starved console reads each stream's backlog in a burst when it
    /// gets to it: each node's newest sample is fresh, the rest seconds old.
    /// It is behind, and says by how much most samples waited; a few slow
    /// agents among prompt ones do not make it behind.
    #[test]
    fn a_console_reading_backlogs_in_bursts_is_behind() {
        let t0 = 1_700_000_000_000;
        let mut st = live_store(10, t0);
        let burst = |st: &mut Store, now: i64, ages: &[i64]| {
            for node in 0..10 {
                for age in ages {
                    sample_at(st, node, now - age, now);
                }
            }
        };
        let now = t0 + 5_000;
        burst(&mut st, now, &[6_000, 5_000, 4_000, 3_000, 2_000, 1_000, 100]);
        st.tick(now + 1_000);
        assert_eq!(st.lag.behind_ms, 3_000);
        // Then prompt again, but for two slow agents.
        let now = now + 1_500;
        burst(&mut st, now, &[100]);
        for node in 0..2 {
            sample_at(&mut st, node, now - 9_000, now);
        }
        st.tick(now + 600);
        assert_eq!(st.lag.behind_ms, 0);
    }

    /// A console starved outright takes nothing in: no sample has an age
    /// to count, and only its runtime's probe knows it is behind.
    #[test]
    fn a_console_its_runtime_gets_to_late_says_so_and_calls_no_node_silent_for_it() {
        let th = Thresholds::default();
        let t0 = 1_700_000_000_000;
        let starved = |late: Option<std::time::Duration>| {
            let mut st = live_store(2, t0);
            sample_at(&mut st, 0, t0 - 200, t0);
            sample_at(&mut st, 1, t0 - 200, t0);
            st.tick(t0 + 1_000);
            assert_eq!(st.lag.behind_ms, 0);
            if let Some(late) = late {
                let ran = tokio::time::Instant::now();
                st.pace.beat(ran - late, ran);
            }
            // Then nothing taken in for four and a half seconds.
            for ms in [t0 + 3_000, t0 + 4_000, t0 + 4_500] {
                st.tick(ms);
            }
            st
        };
        let st = starved(Some(std::time::Duration::from_secs(4)));
        assert!((4_000..4_100).contains(&st.lag.behind_ms), "{}", st.lag.behind_ms);
        for n in &st.nodes {
            // However long: it cannot tell a silent node from one it did
            // not get to.
            assert_eq!(n.status(t0 + 600_000, &th), NodeStatus::Ok);
            assert_eq!(n.detector.active().count(), 0, "no flag");
        }
        // The same silence on a console on time is the nodes'.
        let st = starved(None);
        assert_eq!(st.lag.behind_ms, 0);
        for n in &st.nodes {
            assert_eq!(n.status(t0 + 4_500, &th), NodeStatus::Stale);
            assert!(n.detector.active().any(|f| f.kind == FlagKind::Stale));
        }
    }

    /// Held judgement neither raises nor clears for the console's lag: a
    /// node flagged before stays flagged; one that answers is cleared.
    #[test]
    fn while_judging_is_held_a_flag_stays_until_its_node_answers() {
        let t0 = 1_700_000_000_000;
        let mut st = live_store(2, t0);
        let stale = |st: &Store, node: usize| st.nodes[node].detector.active().any(|f| f.kind == FlagKind::Stale);
        sample_at(&mut st, 0, t0, t0);
        sample_at(&mut st, 1, t0, t0);
        for s in 1..=10 {
            st.tick(t0 + s * 1_000);
        }
        assert!(
            stale(&st, 0) && stale(&st, 1),
            "both silent for 10 s on a console on time"
        );
        let ran = tokio::time::Instant::now();
        st.pace.beat(ran - std::time::Duration::from_secs(4), ran);
        sample_at(&mut st, 1, t0 + 11_000, t0 + 11_000);
        for s in 11..=13 {
            st.tick(t0 + s * 1_000);
        }
        assert!(st.lag.judging_held());
        assert!(stale(&st, 0), "still silent: the flag stays");
        assert!(!stale(&st, 1), "it answered");
    }

    #[test]
    fn a_console_behind_says_so_and_calls_no_node_silent_for_it() {
        let th = Thresholds::default();
        let t0 = 1_700_000_000_000;
        let mut st = live_store(2, t0);
        // Samples taken in as they come: no lag.
        sample_at(&mut st, 0, t0 - 200, t0);
        sample_at(&mut st, 1, t0 - 200, t0);
        st.tick(t0 + 1_000);
        assert_eq!(st.lag.behind_ms, 0);
        // Then what is taken in is 8 s old (it waited in the queue): node
        // 0's next samples have not come out of it yet, node 1's keep coming.
        let now = t0 + 10_000;
        sample_at(&mut st, 0, now - 8_000, now);
        for s in 0..=12 {
            let ms = now + s * 1_000;
            sample_at(&mut st, 1, ms - 8_000, ms);
            st.tick(ms);
            if s == 5 {
                assert_eq!(st.lag.behind_ms, 8_000);
                // Node 0 is not stale for the console's own lag...
                assert_eq!(st.nodes[0].status(ms, &th), NodeStatus::Ok);
            }
        }
        // ...but it is once its silence outlasts the lag too.
        assert_eq!(st.nodes[0].status(now + 12_000, &th), NodeStatus::Stale);
        // Caught up again: after a whole second of fresh samples, the lag goes.
        sample_at(&mut st, 1, now + 13_000, now + 13_100);
        st.tick(now + 13_100);
        sample_at(&mut st, 1, now + 14_000, now + 14_100);
        st.tick(now + 14_100);
        assert_eq!(st.lag.behind_ms, 0);
        assert_eq!(st.nodes[0].console_lag_ms, 0);
    }

    #[test]
    fn nodes_given_by_address_take_their_agents_host_name_and_the_port_where_taken() {
        let t = |name: &str, host: &str, port: u16| Target {
            name: name.into(),
            host: host.into(),
            port,
        };
        let mut st = Store::new(
            vec![
                t("127.0.0.1:7001", "127.0.0.1", 7001),
                t("127.0.0.1:7002", "127.0.0.1", 7002),
                t("gpu01", "10.0.0.9", 50051),
            ],
            Thresholds::default(),
        );
        let info = |h: &str| {
            Event::Info(Box::new(NodeDesc {
                hostname: h.into(),
                ..Default::default()
            }))
        };
        for node in 0..3 {
            on_node(&mut st, node, info("n1"), 0);
        }
        let names: Vec<&str> = st.nodes.iter().map(|n| n.target.name.as_str()).collect();
        assert_eq!(names, ["n1", "n1:7002", "gpu01"], "a node given by name keeps it");
        // A reconnect describing the same host changes nothing.
        on_node(&mut st, 1, info("n1"), 1);
        assert_eq!(st.nodes[1].target.name, "n1:7002");
    }

    #[test]
    fn nvlink_rates_hold_between_counter_carrying_samples() {
        let mut st = Store::new(vec![target()], Thresholds::default());
        on(&mut st, Event::Info(Box::default()), 0);
        let with = |t: i64, kib: u64| NodeSample {
            seq: t as u64,
            time_ms: t,
            gpus: vec![GpuReading {
                nvlink_tx_kib: vec![kib, 9],
                nvlink_rx_kib: vec![kib, 9],
                ..Default::default()
            }],
            ..Default::default()
        };
        let without = |t: i64| NodeSample {
            seq: t as u64,
            time_ms: t,
            gpus: vec![GpuReading::default()],
            ..Default::default()
        };
        feed(&mut st, with(0, 1000));
        feed(&mut st, without(1000));
        assert_eq!(st.nodes[0].derived.gpus[0].tx(0), None, "no rate from one reading");
        feed(&mut st, with(2000, 3048));
        let r = &st.nodes[0].derived.gpus[0];
        assert_eq!((r.tx(0), r.tx(1), r.tx(2)), (Some(1024.0 * 1024.0), Some(0.0), None));
        feed(&mut st, without(3000));
        assert_eq!(st.nodes[0].derived.gpus[0].tx(0), Some(1024.0 * 1024.0), "held");
        // A counter that went back (a reset): that link's rate is unknown, not a number.
        feed(&mut st, with(4000, 5));
        let r = &st.nodes[0].derived.gpus[0];
        assert_eq!((r.tx(0), r.rx(1)), (None, Some(0.0)));
    }

    #[test]
    fn a_burn_in_that_passed_after_an_xid_ends_its_hold_wherever_it_ran() {
        use crate::model::sample::Xid;
        let th = Thresholds::default();
        let sample = |t: i64, xids: Vec<Xid>| NodeSample {
            seq: t as u64,
            time_ms: t,
            gpus: vec![GpuReading {
                xids,
                ..Default::default()
            }],
            ..Default::default()
        };
        let xid_flag = |st: &Store| st.nodes[0].detector.active().any(|f| f.kind == FlagKind::Xid);
        let mut st = Store::new(vec![target()], th.clone());
        on(&mut st, Event::Info(Box::default()), 1_000);
        on(&mut st, Event::CaughtUp, 1_000);
        let x = Xid {
            xid: 79,
            time_ms: 1_000,
        };
        on(&mut st, Event::Sample(Box::new(sample(1_000, vec![x]))), 1_000);
        on(&mut st, Event::Sample(Box::new(sample(2_000, vec![]))), 2_000);
        assert!(xid_flag(&st), "held for an hour");
        // A burn-in passed at 10 s (from the CLI: the audit log's line).
        let passed = timeline::Event {
            time_ms: 10_000,
            node: "n1".into(),
            what: timeline::What::Action {
                action: crate::model::action::NodeAction::Bench,
                ok: true,
                reason: Some("suite quick".into()),
                message: String::new(),
                policy: None,
            },
            by: "alice".into(),
        };
        let failed = timeline::Event {
            what: timeline::What::Action {
                action: crate::model::action::NodeAction::Bench,
                ok: false,
                reason: Some("suite quick".into()),
                message: String::new(),
                policy: None,
            },
            ..passed.clone()
        };
        st.apply(Update::Timeline(vec![failed]), 10_000);
        on(&mut st, Event::Sample(Box::new(sample(11_000, vec![]))), 11_000);
        assert!(xid_flag(&st), "a failed burn-in ends nothing");
        st.apply(Update::Timeline(vec![passed]), 12_000);
        on(&mut st, Event::Sample(Box::new(sample(13_000, vec![]))), 13_000);
        assert!(!xid_flag(&st), "the hold ended with the passing burn-in");
        // An XID after it is a new fault.
        let again = Xid {
            xid: 79,
            time_ms: 14_000,
        };
        on(&mut st, Event::Sample(Box::new(sample(14_000, vec![again]))), 14_000);
        assert!(xid_flag(&st));
    }

    #[test]
    fn an_agent_connected_but_not_sampling_is_unreachable_once_it_lasts() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        let info = NodeDesc {
            interval_ms: 1000,
            ..Default::default()
        };
        on(&mut st, Event::Info(Box::new(info)), 10_000);
        let s = NodeSample {
            time_ms: 10_000,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(s)), 10_000);
        on(&mut st, Event::CaughtUp, 10_000);
        // Still connected, no sample since 10 s: stale (warn) a while...
        st.tick(30_000);
        assert_eq!(st.nodes[0].status(30_000, &th), NodeStatus::Stale);
        // ...then, past `unreachable_after`, crit, saying why.
        st.tick(40_000);
        assert_eq!(st.nodes[0].status(40_000, &th), NodeStatus::Unreachable);
        let flags: Vec<_> = st.nodes[0].detector.active().map(|f| (f.kind, f.severity)).collect();
        assert_eq!(flags, [(FlagKind::Unreachable, Severity::Crit)]);
        let f = st.nodes[0].detector.active().next().expect("flag");
        assert_eq!(f.detail, "agent connected but not sampling for 30 s");
    }

    #[test]
    fn status_moves_from_ok_to_stale_to_unreachable() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        assert_eq!(st.nodes[0].status(0, &th), NodeStatus::Connecting);
        let info = NodeDesc {
            interval_ms: 1000,
            ..Default::default()
        };
        on(&mut st, Event::Info(Box::new(info)), 10_000);
        let s = NodeSample {
            time_ms: 10_000,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(s)), 10_000);
        on(&mut st, Event::CaughtUp, 10_000);
        assert_eq!(st.nodes[0].status(12_000, &th), NodeStatus::Ok);
        assert_eq!(st.nodes[0].status(14_000, &th), NodeStatus::Stale);
        on(&mut st, Event::Down("refused".into()), 14_000);
        st.tick(14_000);
        assert!(
            st.nodes[0]
                .detector
                .active()
                .any(|f| f.kind == crate::model::flag::FlagKind::Stale)
        );
        assert_eq!(st.nodes[0].status(20_000, &th), NodeStatus::Stale);
        // Silent since 10 s, noticed down at 14 s: unreachable 30 s after it
        // went silent, not 30 s after it was noticed.
        assert_eq!(st.nodes[0].status(39_000, &th), NodeStatus::Stale);
        assert_eq!(st.nodes[0].status(40_000, &th), NodeStatus::Unreachable);
        // Unreachable is an alert, crit, with the reason; stale gives way to it.
        st.tick(40_000);
        let kinds = |st: &Store| {
            st.nodes[0]
                .detector
                .active()
                .map(|f| (f.kind, f.severity))
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&st), [(FlagKind::Unreachable, Severity::Crit)]);
        let f = st.nodes[0].detector.active().next().expect("flag");
        assert_eq!(f.detail, "agent unreachable for 30 s: refused");
        assert_eq!(f.since_ms, 10_000, "since it went silent");
        // Back: the alert clears.
        on(&mut st, Event::Info(Box::default()), 41_000);
        let s = NodeSample {
            seq: 2,
            time_ms: 41_000,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(s)), 41_000);
        st.tick(41_000);
        assert!(kinds(&st).is_empty());
    }

    #[test]
    fn a_node_never_reached_raises_an_alert_after_unreachable_after() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        on(
            &mut st,
            Event::Down("dns error: failed to lookup address".into()),
            1_000,
        );
        st.tick(30_000);
        assert_eq!(st.nodes[0].detector.active().count(), 0, "not yet: 29 s");
        assert_eq!(
            st.nodes[0].status(30_000, &th),
            NodeStatus::Connecting,
            "still connecting"
        );
        st.tick(31_000);
        assert_eq!(st.nodes[0].status(31_000, &th), NodeStatus::Unreachable);
        let f = st.nodes[0].detector.active().next().expect("an alert");
        assert_eq!((f.kind, f.severity), (FlagKind::Unreachable, Severity::Crit));
        assert_eq!(
            f.detail,
            "agent never reached for 30 s: dns error: failed to lookup address"
        );
    }

    #[test]
    fn samples_arriving_late_because_the_console_is_behind_are_not_stale() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        let info = NodeDesc {
            interval_ms: 1000,
            ..Default::default()
        };
        on(&mut st, Event::Info(Box::new(info)), 0);
        on(&mut st, Event::CaughtUp, 0);
        // Taken at 10 s, 11 s, ... but taken in 20 s later each.
        for seq in 0..5 {
            let t = 10_000 + seq * 1000;
            let s = NodeSample {
                seq: seq as u64,
                time_ms: t,
                ..Default::default()
            };
            on(&mut st, Event::Sample(Box::new(s)), t + 20_000);
            st.tick(t + 20_000);
            assert_eq!(st.nodes[0].status(t + 20_000, &th), NodeStatus::Ok, "{seq}");
        }
        assert_eq!(st.nodes[0].detector.active().count(), 0, "no stale flag");
        // Then nothing comes at all: the console, idle, is no longer behind,
        // and the node is stale a few intervals after the last one came.
        st.tick(34_000 + 3_000);
        assert_eq!(st.nodes[0].status(34_000 + 3_000, &th), NodeStatus::Ok);
        assert_eq!(st.nodes[0].status(34_000 + 3_001, &th), NodeStatus::Stale);
    }

    #[test]
    fn history_still_arriving_is_not_stale() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        let info = NodeDesc {
            interval_ms: 1000,
            ..Default::default()
        };
        on(&mut st, Event::Info(Box::new(info)), 100_000);
        let old = NodeSample {
            time_ms: 10_000,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(old)), 100_000);
        st.tick(100_000);
        assert_eq!(st.nodes[0].status(100_000, &th), NodeStatus::Connecting);
        assert_eq!(
            st.nodes[0].detector.active().count(),
            0,
            "no stale flag while history arrives"
        );
        on(&mut st, Event::CaughtUp, 100_000);
        st.tick(100_000);
        assert_eq!(
            st.nodes[0].status(100_000, &th),
            NodeStatus::Unreachable,
            "an agent silent 90 s is judged once caught up: past unreachable_after"
        );
    }

    #[test]
    fn history_is_bounded_and_aligned() {
        let mut st = Store::new(vec![target()], Thresholds::default()).with_history(3);
        on(&mut st, Event::Info(Box::default()), 0);
        for t in 1..=5 {
            let gpus = (0..(t % 2 + 1))
                .map(|i| GpuReading {
                    index: i as u32,
                    util_pct: Some(10 * t as u32),
                    ..Default::default()
                })
                .collect();
            let s = NodeSample {
                seq: t as u64,
                time_ms: t * 1000,
                gpus,
                ..Default::default()
            };
            on(&mut st, Event::Sample(Box::new(s)), 0);
        }
        let h = &st.nodes[0].history;
        assert_eq!(h.times_ms().collect::<Vec<_>>(), [3000, 4000, 5000]);
        assert_eq!(h.points(0).count(), 3);
        assert_eq!(h.points(0).last().map(|p| p.1.util_pct), Some(50));
        // A replayed sample (one the agent sent before) changes nothing,
        // whatever its time says.
        let old = NodeSample {
            seq: 2,
            time_ms: 9000,
            ..Default::default()
        };
        on(&mut st, Event::Sample(Box::new(old)), 0);
        assert_eq!(st.nodes[0].history.newest_ms(), Some(5000));
    }
}
