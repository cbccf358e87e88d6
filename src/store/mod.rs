//! The cluster store: the latest state of every node, rates derived from
//! consecutive samples, bounded per-GPU history, connection state, and each
//! node's detectors. It is fed one `Update` at a time from the sources and
//! read by the view and the export; it does no I/O.

use std::collections::VecDeque;

use fleetop_agent::counters::{self, CounterWidth, Delta};
use fleetop_agent::ib;
use fleetop_agent::proto::{NodeInfo, Sample};

use std::sync::Arc;

use crate::detect::{NodeDetector, Thresholds};
use crate::hostlist::Target;
use crate::sched;

/// Something the console learned: from a node's agent, from the scheduler,
/// or from an action it ran. All of it arrives on one channel.
#[derive(Debug, Clone)]
pub enum Update {
    /// About one node; `node` indexes the store (the order of the targets).
    Node { node: usize, event: Event },
    /// The scheduler's view of the fleet, read just now.
    Scheduler(Arc<sched::Snapshot>),
    /// The scheduler could not be read.
    SchedulerError(String),
    /// What a cluster action did, node by node.
    ActionDone(Arc<crate::actions::ActionReport>),
    /// Burn-in progress on one node.
    Bench { node: usize, event: BenchUpdate },
}

/// What a node's burn-in did last.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchUpdate {
    Started { suite: String },
    Progress { step: String, done: u32, total: u32 },
    Result(crate::bench_cmd::BenchResultOut),
    Finished { error: Option<String> },
}

/// A node's burn-in, as far as it has gone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchState {
    pub suite: String,
    pub step: String,
    pub done: u32,
    pub total: u32,
    pub results: Vec<crate::bench_cmd::BenchResultOut>,
    pub finished: bool,
    pub error: Option<String>,
}

impl BenchState {
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.results.iter().any(|r| r.verdict == "fail")
    }

    /// Why it failed, in one line (a drain reason).
    pub fn failure(&self) -> String {
        let mut parts: Vec<String> = self
            .results
            .iter()
            .filter(|r| r.verdict == "fail")
            .map(|r| {
                let gpu = r.gpu.map(|g| format!(" GPU {g}")).unwrap_or_default();
                format!("{}{gpu}: {}", r.name, r.reason.as_deref().unwrap_or("failed"))
            })
            .collect();
        if let Some(e) = &self.error {
            parts.push(e.clone());
        }
        format!("burn-in {} failed: {}", self.suite, parts.join("; "))
    }
}

#[derive(Debug, Clone)]
pub enum Event {
    /// The agent's node description, first thing on every connection.
    Info(Box<NodeInfo>),
    Sample(Box<Sample>),
    /// The agent has sent all of its history; what follows is live.
    CaughtUp,
    /// The connection failed or broke, with the reason.
    Down(String),
}

/// The state of the connection to a node's agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Link {
    Connecting,
    Connected { since_ms: i64 },
    Down { since_ms: i64, error: String },
}

/// What a person needs to know first about a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeStatus {
    Ok,
    /// Connected or recently so, but no fresh sample.
    Stale,
    /// No data and the agent cannot be reached.
    Unreachable,
    /// Still trying for the first time.
    Connecting,
}

impl NodeStatus {
    pub fn name(self) -> &'static str {
        match self {
            NodeStatus::Ok => "ok",
            NodeStatus::Stale => "stale",
            NodeStatus::Unreachable => "unreachable",
            NodeStatus::Connecting => "connecting",
        }
    }
}

/// Rates derived from the last two samples of a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    pub gpus: Vec<GpuRates>,
    pub ib: Vec<IbRates>,
}

/// Per-GPU NVLink throughput. NVLink counters come in every few samples
/// (`NodeInfo.nvlink_counters_every`): these rates are over the last two
/// samples that carried them, and hold until the next.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuRates {
    pub nvlink_tx_bytes_per_s: Vec<Option<f64>>,
    pub nvlink_rx_bytes_per_s: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IbRates {
    pub tx_bytes_per_s: Option<f64>,
    pub rx_bytes_per_s: Option<f64>,
    /// Per `ib::ERROR_COUNTERS` entry: the change since the previous sample,
    /// `None` where the counter is not readable on this port.
    pub errors: Vec<Option<Delta>>,
}

/// One GPU's reading in the history, compact (a whole fleet's ten minutes
/// must fit comfortably in memory). 255 means "no reading".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub util_pct: u8,
    pub mem_pct: u8,
    pub temp_c: u8,
    pub power_pct: u8,
}

impl Point {
    pub const NONE: Point = Point {
        util_pct: 255,
        mem_pct: 255,
        temp_c: 255,
        power_pct: 255,
    };
}

/// Bounded history of a node: sample times and, per GPU, points.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub times: VecDeque<i64>,
    pub gpus: Vec<VecDeque<Point>>,
}

/// NVLink counters of one GPU at one time: (time, tx KiB, rx KiB) per link.
type NvlinkReading = (i64, Vec<u64>, Vec<u64>);

#[derive(Debug, Clone)]
pub struct NodeState {
    pub target: Target,
    pub info: Option<NodeInfo>,
    /// Agent clock minus console clock, measured when the description came.
    pub clock_offset_ms: i64,
    pub last: Option<Sample>,
    pub derived: Derived,
    pub history: History,
    pub link: Link,
    /// The agent's history has all arrived on the current connection.
    pub caught_up: bool,
    pub detector: NodeDetector,
    /// What the scheduler says of this node, when one is known.
    pub scheduler: Option<sched::NodeView>,
    /// Per GPU position: the last NVLink counters seen.
    nvlink_base: Vec<Option<NvlinkReading>>,
}

impl NodeState {
    fn new(target: Target) -> Self {
        NodeState {
            target,
            info: None,
            clock_offset_ms: 0,
            last: None,
            derived: Derived::default(),
            history: History::default(),
            link: Link::Connecting,
            caught_up: false,
            detector: NodeDetector::default(),
            scheduler: None,
            nvlink_base: Vec::new(),
        }
    }

    pub fn interval_ms(&self) -> i64 {
        self.info
            .as_ref()
            .map(|i| i64::from(i.sample_interval_ms))
            .filter(|&i| i > 0)
            .unwrap_or(1000)
    }

    /// How old the latest sample is at console time `now_ms`.
    pub fn sample_age_ms(&self, now_ms: i64) -> Option<i64> {
        self.last.as_ref().map(|s| now_ms - (s.time_ms - self.clock_offset_ms))
    }

    /// The node's status at console time `now_ms`.
    pub fn status(&self, now_ms: i64, th: &Thresholds) -> NodeStatus {
        let stale_after = self.interval_ms() * i64::from(th.stale_intervals.max(1));
        match (self.sample_age_ms(now_ms), &self.link) {
            (None, Link::Down { .. }) => NodeStatus::Unreachable,
            (None, _) => NodeStatus::Connecting,
            (Some(age), _) if age <= stale_after => NodeStatus::Ok,
            // Old samples while the history is still arriving say nothing
            // about the node being stale.
            (Some(_), Link::Connected { .. }) if !self.caught_up => NodeStatus::Connecting,
            (Some(_), Link::Down { since_ms, .. }) if now_ms - since_ms >= th.unreachable_after.as_millis() as i64 => {
                NodeStatus::Unreachable
            }
            (Some(_), _) => NodeStatus::Stale,
        }
    }

    /// The user of a job running on this node, when the scheduler says.
    pub fn job_user(&self, job_id: u64) -> Option<&str> {
        let v = self.scheduler.as_ref()?;
        v.jobs.iter().find(|j| j.id == job_id).map(|j| j.user.as_str())
    }

    /// Convenience: the latest sample of GPU `index`.
    pub fn gpu(&self, index: u32) -> Option<&fleetop_agent::proto::GpuSample> {
        self.last.as_ref()?.gpus.iter().find(|g| g.index == index)
    }

    fn ingest(&mut self, s: Sample, history_len: usize, th: &Thresholds) {
        if let Some(prev) = &self.last {
            // History arrives again on every reconnect: skip what we have.
            if s.time_ms <= prev.time_ms {
                return;
            }
            self.derived.ib = derive_ib(prev, &s);
        } else {
            self.derived.ib = Vec::new();
        }
        self.update_nvlink_rates(&s);
        self.push_history(&s, history_len);
        if let Some(info) = &self.info {
            let jobs = self.scheduler.as_ref().map(|v| v.jobs.as_slice()).unwrap_or_default();
            self.detector.on_sample(info, &s, &self.derived, jobs, th);
        }
        self.last = Some(s);
    }

    fn update_nvlink_rates(&mut self, s: &Sample) {
        let n = s.gpus.len();
        self.nvlink_base.resize(n, None);
        self.derived.gpus.resize_with(n, GpuRates::default);
        for (i, g) in s.gpus.iter().enumerate() {
            if g.nvlink_tx_kib.is_empty() && g.nvlink_rx_kib.is_empty() {
                continue; // not a counter-carrying sample: rates hold
            }
            if let Some((t0, tx0, rx0)) = &self.nvlink_base[i] {
                let dt = s.time_ms - t0;
                self.derived.gpus[i] = GpuRates {
                    nvlink_tx_bytes_per_s: kib_rates(tx0, &g.nvlink_tx_kib, dt),
                    nvlink_rx_bytes_per_s: kib_rates(rx0, &g.nvlink_rx_kib, dt),
                };
            }
            self.nvlink_base[i] = Some((s.time_ms, g.nvlink_tx_kib.clone(), g.nvlink_rx_kib.clone()));
        }
    }

    fn push_history(&mut self, s: &Sample, cap: usize) {
        let h = &mut self.history;
        if h.times.len() == cap {
            h.times.pop_front();
            for g in &mut h.gpus {
                g.pop_front();
            }
        }
        h.times.push_back(s.time_ms);
        let n = h.times.len();
        if h.gpus.len() < s.gpus.len() {
            h.gpus.resize_with(s.gpus.len(), VecDeque::new);
        }
        let info = self.info.as_ref();
        for (i, ring) in h.gpus.iter_mut().enumerate() {
            let p = s
                .gpus
                .get(i)
                .filter(|g| g.error.is_empty())
                .map(|g| {
                    let total = info
                        .and_then(|inf| inf.gpus.get(i))
                        .map(|x| x.mem_total_bytes)
                        .unwrap_or(0);
                    Point {
                        util_pct: g.util_pct.min(100) as u8,
                        mem_pct: pct(g.mem_used_bytes as f64, total as f64),
                        temp_c: g.temp_c.min(254) as u8,
                        power_pct: pct(f64::from(g.power_mw), f64::from(g.power_limit_mw)),
                    }
                })
                .unwrap_or(Point::NONE);
            // Keep every GPU ring aligned with `times`.
            while ring.len() + 1 < n {
                ring.push_back(Point::NONE);
            }
            ring.push_back(p);
        }
    }
}

fn pct(v: f64, total: f64) -> u8 {
    if total <= 0.0 {
        255
    } else {
        (v / total * 100.0).round().clamp(0.0, 254.0) as u8
    }
}

/// Bytes per second of KiB counters, link by link; `None` where unknown.
fn kib_rates(before: &[u64], after: &[u64], dt_ms: i64) -> Vec<Option<f64>> {
    after
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let b = before.get(i)?;
            counters::rate_per_s(*b, v, CounterWidth::U64, dt_ms).map(|r| r * 1024.0)
        })
        .collect()
}

/// InfiniBand rates and error deltas between two samples of the same node.
pub fn derive_ib(prev: &Sample, cur: &Sample) -> Vec<IbRates> {
    let dt = cur.time_ms - prev.time_ms;
    cur.ib_ports
        .iter()
        .map(|q| {
            let Some(p) = prev.ib_ports.iter().find(|p| p.port == q.port) else {
                return IbRates::default();
            };
            let errors = ib::ERROR_COUNTERS
                .iter()
                .enumerate()
                .map(|(i, (_, width))| {
                    let present = |m: u32| m & (1 << i) != 0;
                    if !present(q.errors_present_mask) || !present(p.errors_present_mask) {
                        return None;
                    }
                    Some(counters::delta(*p.errors.get(i)?, *q.errors.get(i)?, *width))
                })
                .collect();
            IbRates {
                tx_bytes_per_s: counters::rate_per_s(p.tx_bytes, q.tx_bytes, ib::DATA_WIDTH, dt),
                rx_bytes_per_s: counters::rate_per_s(p.rx_bytes, q.rx_bytes, ib::DATA_WIDTH, dt),
                errors,
            }
        })
        .collect()
}

/// Every node the console watches.
#[derive(Debug, Clone)]
pub struct Store {
    pub nodes: Vec<NodeState>,
    pub thresholds: Thresholds,
    history_len: usize,
    /// When the scheduler was last read, and why the last read failed.
    pub scheduler_read_ms: Option<i64>,
    pub scheduler_error: Option<String>,
    /// The result of the last cluster action (drain, resume, ...).
    pub last_action: Option<Arc<crate::actions::ActionReport>>,
    /// Burn-in by node index, from the last suite started on each.
    pub bench: std::collections::BTreeMap<usize, BenchState>,
}

/// Samples of history kept per node (ten minutes at 1 Hz).
pub const DEFAULT_HISTORY: usize = 600;

impl Store {
    pub fn new(targets: Vec<Target>, thresholds: Thresholds) -> Self {
        Store {
            nodes: targets.into_iter().map(NodeState::new).collect(),
            thresholds,
            history_len: DEFAULT_HISTORY,
            scheduler_read_ms: None,
            scheduler_error: None,
            last_action: None,
            bench: Default::default(),
        }
    }

    pub fn with_history(mut self, samples: usize) -> Self {
        self.history_len = samples.max(2);
        self
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
                self.scheduler_error = Some(e);
                return;
            }
            Update::ActionDone(report) => {
                self.last_action = Some(report);
                return;
            }
            Update::Bench { node, event } => {
                let b = self.bench.entry(node).or_default();
                match event {
                    BenchUpdate::Started { suite } => {
                        *b = BenchState {
                            suite,
                            ..Default::default()
                        }
                    }
                    BenchUpdate::Progress { step, done, total } => (b.step, b.done, b.total) = (step, done, total),
                    BenchUpdate::Result(r) => b.results.push(r),
                    BenchUpdate::Finished { error } => (b.finished, b.error) = (true, error),
                }
                return;
            }
        };
        let th = &self.thresholds;
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        match event {
            Event::Info(info) => {
                n.clock_offset_ms = info.agent_time_ms - now_ms;
                n.info = Some(*info);
                n.link = Link::Connected { since_ms: now_ms };
                n.caught_up = false;
            }
            Event::Sample(s) => n.ingest(*s, self.history_len, th),
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
        self.scheduler_read_ms = Some(now_ms);
        self.scheduler_error = None;
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

    /// Re-judges what depends on the clock alone (the `stale` flag).
    pub fn tick(&mut self, now_ms: i64) {
        let th = &self.thresholds;
        for n in &mut self.nodes {
            let status = n.status(now_ms, th);
            let stale = match status {
                NodeStatus::Stale | NodeStatus::Unreachable if n.last.is_some() => {
                    let last = n.last.as_ref().map(|s| s.time_ms).unwrap_or(0);
                    let age_ms = n.sample_age_ms(now_ms).unwrap_or(0);
                    let why = match &n.link {
                        Link::Down { error, .. } => format!("; agent unreachable: {error}"),
                        _ => "; agent connected but not sampling".into(),
                    };
                    Some((last, age_ms, format!("no sample for {} s{why}", age_ms / 1000)))
                }
                _ => None,
            };
            n.detector.set_stale(stale, now_ms, th);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetop_agent::proto::{GpuSample, IbSample};

    fn target() -> Target {
        Target {
            name: "n1".into(),
            host: "127.0.0.1".into(),
            port: 1,
        }
    }

    fn feed(st: &mut Store, s: Sample) {
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Sample(Box::new(s)),
            },
            0,
        );
    }

    #[test]
    fn ib_rates_come_from_counters_and_resets_give_none() {
        let a = Sample {
            time_ms: 1000,
            ib_ports: vec![IbSample {
                tx_bytes: 4_000,
                rx_bytes: 1 << 40,
                errors: vec![0; ib::ERROR_COUNTERS.len()],
                errors_present_mask: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.time_ms = 3000;
        b.ib_ports[0].tx_bytes = 8_000;
        b.ib_ports[0].rx_bytes = 5;
        b.ib_ports[0].errors[0] = 7;
        let d = derive_ib(&a, &b);
        assert_eq!(d[0].tx_bytes_per_s, Some(2000.0));
        assert_eq!(d[0].rx_bytes_per_s, None, "a counter that went back is a reset");
        assert_eq!(d[0].errors[0], Some(Delta::Exact(7)));
        assert_eq!(d[0].errors[1], None, "unreadable counters have no delta");
        let mut c = b.clone();
        c.time_ms = 3000;
        assert_eq!(derive_ib(&b, &c)[0].tx_bytes_per_s, None, "no time, no rate");
    }

    #[test]
    fn nvlink_rates_hold_between_counter_carrying_samples() {
        let mut st = Store::new(vec![target()], Thresholds::default());
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Info(Box::default()),
            },
            0,
        );
        let with = |t: i64, kib: u64| Sample {
            time_ms: t,
            gpus: vec![GpuSample {
                nvlink_tx_kib: vec![kib, 9],
                nvlink_rx_kib: vec![kib, 9],
                ..Default::default()
            }],
            ..Default::default()
        };
        let without = |t: i64| Sample {
            time_ms: t,
            gpus: vec![GpuSample::default()],
            ..Default::default()
        };
        feed(&mut st, with(0, 1000));
        feed(&mut st, without(1000));
        assert_eq!(
            st.nodes[0].derived.gpus[0].nvlink_tx_bytes_per_s,
            Vec::<Option<f64>>::new(),
            "no rate from one reading"
        );
        feed(&mut st, with(2000, 3048));
        let r = &st.nodes[0].derived.gpus[0];
        assert_eq!(r.nvlink_tx_bytes_per_s, [Some(1024.0 * 1024.0), Some(0.0)]);
        feed(&mut st, without(3000));
        assert_eq!(
            st.nodes[0].derived.gpus[0].nvlink_tx_bytes_per_s[0],
            Some(1024.0 * 1024.0),
            "held"
        );
    }

    #[test]
    fn status_moves_from_ok_to_stale_to_unreachable() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        assert_eq!(st.nodes[0].status(0, &th), NodeStatus::Connecting);
        let info = NodeInfo {
            sample_interval_ms: 1000,
            agent_time_ms: 10_000,
            ..Default::default()
        };
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Info(Box::new(info)),
            },
            10_000,
        );
        let s = Sample {
            time_ms: 10_000,
            ..Default::default()
        };
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Sample(Box::new(s)),
            },
            10_000,
        );
        st.apply(
            Update::Node {
                node: 0,
                event: Event::CaughtUp,
            },
            10_000,
        );
        assert_eq!(st.nodes[0].status(12_000, &th), NodeStatus::Ok);
        assert_eq!(st.nodes[0].status(14_000, &th), NodeStatus::Stale);
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Down("refused".into()),
            },
            14_000,
        );
        st.tick(14_000);
        assert!(
            st.nodes[0]
                .detector
                .active()
                .any(|f| f.kind == crate::flags::FlagKind::Stale)
        );
        assert_eq!(st.nodes[0].status(20_000, &th), NodeStatus::Stale);
        assert_eq!(st.nodes[0].status(44_000, &th), NodeStatus::Unreachable);
    }

    #[test]
    fn history_still_arriving_is_not_stale() {
        let th = Thresholds::default();
        let mut st = Store::new(vec![target()], th.clone());
        let info = NodeInfo {
            sample_interval_ms: 1000,
            agent_time_ms: 100_000,
            ..Default::default()
        };
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Info(Box::new(info)),
            },
            100_000,
        );
        let old = Sample {
            time_ms: 10_000,
            ..Default::default()
        };
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Sample(Box::new(old)),
            },
            100_000,
        );
        st.tick(100_000);
        assert_eq!(st.nodes[0].status(100_000, &th), NodeStatus::Connecting);
        assert_eq!(
            st.nodes[0].detector.active().count(),
            0,
            "no stale flag while history arrives"
        );
        st.apply(
            Update::Node {
                node: 0,
                event: Event::CaughtUp,
            },
            100_000,
        );
        st.tick(100_000);
        assert_eq!(
            st.nodes[0].status(100_000, &th),
            NodeStatus::Stale,
            "a hung agent is stale once caught up"
        );
    }

    #[test]
    fn history_is_bounded_and_aligned() {
        let mut st = Store::new(vec![target()], Thresholds::default()).with_history(3);
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Info(Box::default()),
            },
            0,
        );
        for t in 1..=5 {
            let gpus = (0..(t % 2 + 1))
                .map(|i| GpuSample {
                    index: i as u32,
                    util_pct: 10 * t as u32,
                    ..Default::default()
                })
                .collect();
            let s = Sample {
                time_ms: t * 1000,
                gpus,
                ..Default::default()
            };
            st.apply(
                Update::Node {
                    node: 0,
                    event: Event::Sample(Box::new(s)),
                },
                0,
            );
        }
        let h = &st.nodes[0].history;
        assert_eq!(h.times, [3000, 4000, 5000]);
        assert!(h.gpus.iter().all(|g| g.len() == 3));
        assert_eq!(h.gpus[0].back().map(|p| p.util_pct), Some(50));
        // A replayed (older) sample changes nothing.
        let old = Sample {
            time_ms: 2000,
            ..Default::default()
        };
        st.apply(
            Update::Node {
                node: 0,
                event: Event::Sample(Box::new(old)),
            },
            0,
        );
        assert_eq!(st.nodes[0].history.times.back(), Some(&5000));
    }
}
