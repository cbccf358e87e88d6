//! What the screens show, computed from the store: metrics as fractions for
//! the heat scale, node summaries, the filter and the sort. Pure functions.
//! The filter typed after `/` is in `filter`, the group view's rows in
//! `groups`, where the response to a node's trouble stands in `response`,
//! the text kit (counts, sizes, durations, "-") in `text`; all are
//! re-exported here, where the screens look for them.

mod filter;
mod groups;
mod response;
mod text;

use crate::model::sample::{GpuDesc, GpuReading, MigReading};

use crate::detect::Thresholds;
use crate::model::flag::{Flag, FlagKind, Severity, Subject};
use crate::model::sched::{Hold, SchedNode};
use crate::model::words::{Said, duration};
use crate::store::{NodeState, NodeStatus, Store};

pub use filter::Filter;
pub use groups::{GroupBy, GroupRow, NO_GROUP, groups};
pub use response::{hhmm, next_step, response};
pub use text::{count, human_age, human_bytes, human_rate, human_span, opt};

/// The metric that colours the heatmap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Util,
    Mem,
    Temp,
    Power,
    Clock,
    /// GPM: SMs with a warp assigned ("-" on GPUs without GPM).
    SmActive,
    /// GPM: warp occupancy.
    SmOccupancy,
    /// GPM: tensor pipes busy.
    TensorActive,
    /// GPM: DRAM bandwidth against the peak.
    DramBw,
}

impl Metric {
    pub const ALL: [Metric; 9] = [
        Metric::Util,
        Metric::Mem,
        Metric::Temp,
        Metric::Power,
        Metric::Clock,
        Metric::SmActive,
        Metric::SmOccupancy,
        Metric::TensorActive,
        Metric::DramBw,
    ];

    pub fn next(self) -> Metric {
        let i = Self::ALL.iter().position(|m| *m == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Util => "utilization",
            Metric::Mem => "memory used",
            Metric::Temp => "temperature",
            Metric::Power => "power / limit",
            Metric::Clock => "SM clock / max",
            Metric::SmActive => "SM activity (GPM)",
            Metric::SmOccupancy => "SM occupancy (GPM)",
            Metric::TensorActive => "tensor activity (GPM)",
            Metric::DramBw => "DRAM bandwidth (GPM)",
        }
    }

    /// The two ends of the legend, in units.
    pub fn scale(self) -> (&'static str, &'static str) {
        match self {
            Metric::Temp => ("25°C", "slowdown °C"),
            Metric::Power => ("0%", "100% of the power limit"),
            Metric::Mem => ("0%", "100% of GPU memory"),
            Metric::Clock => ("0%", "100% of the max SM clock"),
            _ => ("0%", "100%"),
        }
    }

    /// Whether `frac` reads the GPU's description (its memory size, clocks,
    /// slowdown temperature). The wall asks a mean of every node on screen
    /// at every frame: the others are spared looking the GPU up.
    fn needs_desc(self) -> bool {
        matches!(self, Metric::Mem | Metric::Temp | Metric::Clock)
    }

    /// Where this GPU sits on the scale, 0..=1; `None` without a reading.
    /// Temperature runs from 25 °C to the GPU's slowdown temperature (or the
    /// configured fallback, the same one the `hot` flag uses).
    pub fn frac(self, g: &GpuReading, desc: Option<&GpuDesc>, th: &Thresholds) -> Option<f64> {
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some((a / b).clamp(0.0, 1.0)),
            _ => None,
        };
        match self {
            Metric::Util => g.util_pct.map(|u| f64::from(u.min(100)) / 100.0),
            Metric::Mem => ratio(
                g.mem_used_bytes.map(|b| b as f64),
                desc.and_then(|d| d.mem_total_bytes).map(|b| b as f64),
            ),
            Metric::Temp => {
                let slow = f64::from(th.slowdown_c(desc));
                ratio(g.temp_c.map(|t| f64::from(t).max(25.0) - 25.0), Some(slow - 25.0))
            }
            Metric::Power => ratio(g.power_w, g.power_limit_w),
            Metric::Clock => ratio(
                g.sm_clock_mhz.map(f64::from),
                desc.and_then(|d| d.max_sm_clock_mhz).map(f64::from),
            ),
            Metric::SmActive => g.gpm.map(|m| (m.sm_active_pct / 100.0).clamp(0.0, 1.0)),
            Metric::SmOccupancy => g.gpm.map(|m| (m.sm_occupancy_pct / 100.0).clamp(0.0, 1.0)),
            Metric::TensorActive => g.gpm.map(|m| (m.tensor_active_pct / 100.0).clamp(0.0, 1.0)),
            Metric::DramBw => g.gpm.map(|m| (m.dram_bw_pct / 100.0).clamp(0.0, 1.0)),
        }
    }

    /// The number shown in a cell (at most 3 characters).
    pub fn cell_text(self, g: &GpuReading, desc: Option<&GpuDesc>, th: &Thresholds) -> String {
        if g.error.is_some() {
            return "ERR".into();
        }
        match (self, g.temp_c) {
            (Metric::Temp, Some(t)) => format!("{}", t.min(999)),
            _ => self
                .frac(g, desc, th)
                .map(|f| format!("{:.0}", f * 100.0))
                .unwrap_or_else(|| "-".into()),
        }
    }
}

impl Metric {
    /// Where MIG instance `m` of GPU `g` sits on the scale. Memory is the
    /// instance's own; temperature, power and clock belong to the whole GPU,
    /// which all its instances share; utilization is not given per instance
    /// (nor for the GPU) in MIG mode, so `None`; GPM is the instance's own.
    pub fn mig_frac(self, g: &GpuReading, m: &MigReading, desc: Option<&GpuDesc>, th: &Thresholds) -> Option<f64> {
        match self {
            Metric::Util => None,
            Metric::Mem => match (m.mem_used_bytes, m.mem_total_bytes) {
                (Some(u), Some(t)) if t > 0 => Some((u as f64 / t as f64).clamp(0.0, 1.0)),
                _ => None,
            },
            Metric::Temp | Metric::Power | Metric::Clock => self.frac(g, desc, th),
            Metric::SmActive => m.gpm.map(|x| (x.sm_active_pct / 100.0).clamp(0.0, 1.0)),
            Metric::SmOccupancy => m.gpm.map(|x| (x.sm_occupancy_pct / 100.0).clamp(0.0, 1.0)),
            Metric::TensorActive => m.gpm.map(|x| (x.tensor_active_pct / 100.0).clamp(0.0, 1.0)),
            Metric::DramBw => m.gpm.map(|x| (x.dram_bw_pct / 100.0).clamp(0.0, 1.0)),
        }
    }

    /// The number in a MIG instance's cell ("-" without a reading).
    pub fn mig_cell_text(self, g: &GpuReading, m: &MigReading, desc: Option<&GpuDesc>, th: &Thresholds) -> String {
        if g.error.is_some() {
            return "ERR".into();
        }
        match (self, g.temp_c) {
            (Metric::Temp, Some(t)) => format!("{}", t.min(999)),
            _ => self
                .mig_frac(g, m, desc, th)
                .map(|f| format!("{:.0}", f * 100.0))
                .unwrap_or_else(|| "-".into()),
        }
    }
}

/// A node's mean of a metric over its GPUs that answered.
pub fn node_mean(n: &NodeState, metric: Metric, th: &Thresholds) -> Option<f64> {
    let info = n.info.as_ref().filter(|_| metric.needs_desc());
    gpu_mean(n, |g| metric.frac(g, info.and_then(|i| i.gpu(g.index)), th))
}

/// The mean of `f` over a node's GPUs that give it; `None` where none does.
///
/// Summed as it goes, nothing collected: the wall asks it of every node on
/// screen at every frame (thousands at 10,240 nodes).
fn gpu_mean(n: &NodeState, f: impl Fn(&crate::model::sample::GpuReading) -> Option<f64>) -> Option<f64> {
    let (sum, count) = n
        .last
        .iter()
        .flat_map(|s| &s.gpus)
        .filter_map(f)
        .fold((0.0, 0u32), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / f64::from(count))
}

/// A node's mean of a metric for its mean column, in the metric's unit: °C
/// for temperature, W for power (the scale's position would read as a
/// percentage that means nothing), % for the rest. Five characters.
pub fn node_mean_text(n: &NodeState, metric: Metric, th: &Thresholds) -> String {
    match metric {
        Metric::Temp => gpu_mean(n, |g| g.temp_c.map(f64::from)).map(|c| format!("{c:>3.0}°C")),
        Metric::Power => gpu_mean(n, |g| g.power_w).map(|w| format!("{w:>4.0}W")),
        _ => node_mean(n, metric, th).map(|f| format!("{:>4.0}%", f * 100.0)),
    }
    .unwrap_or_else(|| "    -".into())
}

/// The header's totals: of the nodes with a fresh sample only, so a fleet
/// gone unreachable never shows its last numbers as if they were now.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    /// Nodes whose status is ok (a fresh sample): the ones counted.
    pub live: usize,
    /// The others (stale, unreachable, connecting): left out, and said so.
    pub left_out: usize,
    pub gpus: usize,
    /// Mean utilization over the live GPUs that give it.
    pub util_pct: Option<u64>,
    pub power_w: f64,
}

pub fn totals(store: &Store, now_ms: i64) -> Totals {
    let mut t = Totals::default();
    let (mut util_sum, mut util_n) = (0u64, 0u64);
    for n in &store.nodes {
        if n.status(now_ms, &store.thresholds) != NodeStatus::Ok {
            t.left_out += 1;
            continue;
        }
        t.live += 1;
        let sampled = n.last.as_ref().map_or(0, |s| s.gpus.len());
        // The GPUs it describes (one that fell off the bus included), else
        // those it samples; physical GPUs: an AMD GPU in compute partitions
        // (CPX), a GPU on the wire per partition, counts once.
        t.gpus += match &n.info {
            Some(i) if i.gpus.iter().any(|g| g.partition.is_some()) => i.physical_gpus(),
            Some(i) => i.gpus.len().max(sampled),
            None => sampled,
        };
        for g in n.last.iter().flat_map(|s| &s.gpus) {
            if let Some(u) = g.util_pct {
                util_sum += u64::from(u);
                util_n += 1;
            }
        }
        // Power is socket-wide: a partitioned GPU's, repeated on each of
        // its partitions, is counted once.
        match (&n.info, &n.last) {
            (Some(i), Some(s)) if i.gpus.iter().any(|g| g.partition.is_some()) => {
                t.power_w += i.per_physical_gpu(s).iter().filter_map(|g| g.power_w).sum::<f64>();
            }
            (_, Some(s)) => t.power_w += s.gpus.iter().filter_map(|g| g.power_w).sum::<f64>(),
            _ => {}
        }
    }
    t.util_pct = util_sum.checked_div(util_n);
    t
}

/// A flag's evidence for people: "symbol_error=+5 link_downed=+1" (the
/// InfiniBand error counters are increments over the window, so signed).
/// Sizes and durations in people's units ("mem_used=65.4 GiB",
/// "no_answer=9m54s"); the export keeps the raw numbers.
pub fn evidence_text(f: &Flag) -> String {
    let sign = if f.kind == FlagKind::IbErrors { "+" } else { "" };
    f.evidence
        .iter()
        .map(|(k, v)| {
            let dur = |ms: f64| duration(ms as i64, Said::ToSecond);
            if let Some(k) = k.strip_suffix("_bytes") {
                format!("{k}={}", human_bytes(*v))
            } else if let Some(k) = k.strip_suffix("_ms") {
                format!("{k}={}", dur(*v))
            } else if let Some(k) = k.strip_suffix("_s") {
                format!("{k}={}", dur(*v * 1000.0))
            } else {
                format!("{k}={sign}{v}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The description of GPU `index` on a node.
pub fn gpu_info(n: &NodeState, index: u32) -> Option<&GpuDesc> {
    n.info.as_ref()?.gpu(index)
}

/// "Slurm: last read 2m ago: sinfo did not answer within 10 s (killed)":
/// what people must know when the scheduler's view on screen is not current.
pub fn scheduler_problem(store: &Store, now_ms: i64) -> Option<String> {
    if !store.scheduler_known {
        return None;
    }
    let h = &store.scheduler;
    let error = h.error.as_deref()?;
    Some(match h.read_ms {
        Some(t) => format!("Slurm: last read {} ago: {error}", human_age(now_ms - t)),
        None => format!("Slurm: never read: {error}"),
    })
}

pub fn worst_severity(n: &NodeState) -> Option<Severity> {
    n.worst_severity()
}

/// A node's state in one word, as the status column and the header say it:
/// why it cannot be judged (stale, unreachable, connecting), else its health,
/// the worst severity of its flags. In the order the header counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    Crit,
    Warn,
    Ok,
    Stale,
    Unreachable,
    Connecting,
}

impl Health {
    pub const ALL: [Health; 6] = [
        Health::Crit,
        Health::Warn,
        Health::Ok,
        Health::Stale,
        Health::Unreachable,
        Health::Connecting,
    ];

    pub fn of(n: &NodeState, now_ms: i64, th: &Thresholds) -> Health {
        Health::from_parts(n.status(now_ms, th), n.worst_severity())
    }

    pub fn from_parts(status: NodeStatus, worst: Option<Severity>) -> Health {
        match (status, worst) {
            (NodeStatus::Ok, Some(Severity::Crit)) => Health::Crit,
            (NodeStatus::Ok, Some(Severity::Warn)) => Health::Warn,
            (NodeStatus::Ok, _) => Health::Ok,
            (NodeStatus::Stale, _) => Health::Stale,
            (NodeStatus::Unreachable, _) => Health::Unreachable,
            (NodeStatus::Connecting, _) => Health::Connecting,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Health::Crit => "crit",
            Health::Warn => "warn",
            Health::Ok => "ok",
            Health::Stale => "stale",
            Health::Unreachable => "unreachable",
            Health::Connecting => "connecting",
        }
    }

    /// The status column's five-letter form.
    pub fn short(self) -> &'static str {
        match self {
            Health::Unreachable => "unrch",
            Health::Connecting => "conn",
            h => h.word(),
        }
    }
}

/// How many nodes are in each state, in `Health::ALL` order.
pub fn health_counts(store: &Store, now_ms: i64) -> [(Health, usize); 6] {
    let mut out = Health::ALL.map(|h| (h, 0));
    for n in &store.nodes {
        let h = Health::of(n, now_ms, &store.thresholds);
        out[h as usize].1 += 1;
    }
    out
}

/// The node's most urgent flag (by its action, then its severity) and what
/// to do about it in one sentence: "drain, then reboot the node: XID 79
/// (...) on GPU 1; if it recurs: drain, then replace the hardware (RMA)".
pub fn diagnosis(n: &NodeState) -> Option<(&Flag, String)> {
    let f = n.detector.active().max_by_key(|f| (f.action.urgency(), f.severity))?;
    let on = match f.subject {
        Subject::Node => String::new(),
        Subject::Gpu(g) => format!(" on GPU {g}"),
        Subject::IbPort(p) => format!(" on {}", n.ib_port_name(p)),
    };
    let mut said = f.clone();
    said.detail.push_str(&on);
    Some((f, said.action_detail()))
}

/// How the node list is ordered (`s` cycles, `S` reverses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Name,
    /// The selected metric's node mean, highest first (reversed: lowest
    /// first, the idle ones).
    Metric,
    /// Worst flags first.
    Flags,
    /// The longest without a sample first.
    Age,
    /// By scheduler state (down, drained, ... first), then name.
    Sched,
}

impl Sort {
    /// In the order `s` steps through them: worst first is the default
    /// (the SRE's first question is which node is worst), name one key away.
    pub const ALL: [Sort; 5] = [Sort::Flags, Sort::Name, Sort::Metric, Sort::Age, Sort::Sched];

    pub fn next(self) -> Sort {
        let i = Self::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    pub fn name(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::Metric => "metric",
            Sort::Flags => "flags",
            Sort::Age => "age",
            Sort::Sched => "slurm state",
        }
    }
}

/// Indices of the nodes to show, filtered and sorted; `reverse` turns the
/// order around, except that nodes without the value sorted on stay last.
pub fn visible(store: &Store, filter: &Filter, sort: Sort, reverse: bool, metric: Metric, now_ms: i64) -> Vec<usize> {
    use std::cmp::{Ordering, Reverse};
    let mut v: Vec<usize> = store
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| filter.matches(n, now_ms, store))
        .map(|(i, _)| i)
        .collect();
    let node = |i: usize| &store.nodes[i];
    let name = |i: usize| node(i).target.name.as_str();
    let th = &store.thresholds;
    // Each key: (whether the value is missing, the value's order); the
    // missing stay last whichever way the list runs.
    // Under a metric sort, a node without a fresh sample goes after every
    // live one whatever its last numbers were: old numbers must not rank
    // as if they were now.
    let live = |i: usize| node(i).status(now_ms, th) == NodeStatus::Ok;
    let by = |a: usize, b: usize| -> (u8, u8, Ordering) {
        match sort {
            Sort::Name => (0, 0, Ordering::Equal),
            Sort::Metric => {
                let (x, y) = (node_mean(node(a), metric, th), node_mean(node(b), metric, th));
                let rank = |v: Option<f64>, i: usize| if !live(i) { 2 } else { u8::from(v.is_none()) };
                (rank(x, a), rank(y, b), y.partial_cmp(&x).unwrap_or(Ordering::Equal))
            }
            Sort::Flags => {
                let k = |i: usize| {
                    (
                        Reverse(worst_severity(node(i))),
                        Reverse(node(i).detector.active().count()),
                    )
                };
                (0, 0, k(a).cmp(&k(b)))
            }
            Sort::Age => {
                let (x, y) = (node(a).sample_age_ms(now_ms), node(b).sample_age_ms(now_ms));
                (u8::from(x.is_none()), u8::from(y.is_none()), y.cmp(&x))
            }
            Sort::Sched => {
                let k = |i: usize| node(i).scheduler.as_ref().map(|s| sched_rank(&s.node.state));
                let (x, y) = (k(a), k(b));
                (u8::from(x.is_none()), u8::from(y.is_none()), x.cmp(&y))
            }
        }
    };
    v.sort_by(|&a, &b| {
        let (a_missing, b_missing, ord) = by(a, b);
        let ord = if reverse { ord.reverse() } else { ord };
        a_missing.cmp(&b_missing).then(ord).then_with(|| {
            if reverse && sort == Sort::Name {
                name(b).cmp(name(a))
            } else {
                name(a).cmp(name(b))
            }
        })
    });
    v
}

/// Slurm states, the ones that need a person first.
fn sched_rank(state: &str) -> (u8, String) {
    let s = state.to_ascii_lowercase();
    let rank = if s.contains("down") || s.contains("fail") || s.contains("not_responding") {
        0
    } else if s.contains("drain") {
        1
    } else if s.contains("idle") {
        3
    } else {
        2
    };
    (rank, s)
}

/// "updated 3s ago", or "no sample yet": how fresh a node's data is.
pub fn freshness(n: &NodeState, now_ms: i64) -> String {
    match n.sample_age_ms(now_ms) {
        Some(age) => format!("updated {} ago", human_age(age.max(0))),
        None => "no sample yet".into(),
    }
}

/// Why the console cannot reach a node's agent, from the first failed
/// attempt on (a node still `connecting` included): "agent unreachable
/// for 12s: connection refused"; `None` while connected.
pub fn link_problem(n: &NodeState, now_ms: i64) -> Option<String> {
    match &n.link {
        crate::store::node::Link::Down { since_ms, error } => Some(format!(
            "agent unreachable for {}: {error}",
            human_age((now_ms - since_ms).max(0))
        )),
        _ => None,
    }
}

/// How long Slurm has held a node out of service, from its reason's time;
/// `None` where the time is missing or not RFC 3339.
pub fn held_for_ms(s: &SchedNode, now_ms: i64) -> Option<i64> {
    let at = crate::ops::timeline::parse_time(s.reason_time.as_deref()?)?;
    Some((now_ms - at).max(0))
}

/// The most a heatmap row's Slurm word takes: a state, an age and a
/// holder, never the reason (node detail has it), so the flags keep their
/// room.
pub const SCHED_LABEL_MAX: usize = 26;

/// A heatmap row's Slurm word: the state, and for a node held out of
/// service how long and by whom ("drained 2h fleetop", "draining 5m
/// alice"), someone else's drain as visible as fleetop's. At most
/// `SCHED_LABEL_MAX` characters.
pub fn sched_label(s: &SchedNode, now_ms: i64) -> String {
    let who = match s.hold() {
        Hold::InService => return s.label(),
        Hold::Fleetop { .. } => "fleetop".to_string(),
        Hold::Other => fleetop_proto::input::printable(s.reason_user.as_deref().unwrap_or("?"), 10),
    };
    let mut l = match held_for_ms(s, now_ms) {
        Some(ms) => format!("{} {} {who}", s.label(), human_age(ms)),
        None => format!("{} {who}", s.label()),
    };
    if l.chars().count() > SCHED_LABEL_MAX {
        l = l.chars().take(SCHED_LABEL_MAX - 1).chain(['…']).collect();
    }
    l
}

/// Who made fleetop's drain of a node with Slurm's `reason`: "fleetop's
/// policy" where the reason carries the policy's mark (every console reads
/// it there), else "alice via fleetop" for the newest drain its timeline
/// holds (the audit log's drains, this console's and others'), else
/// "fleetop".
pub fn fleetop_drainer(reason: &str, timeline: &crate::model::timeline::Timeline) -> String {
    use crate::model::timeline::What;
    if crate::model::remediation::policy_words(reason).is_some() {
        return "fleetop's policy".into();
    }
    let person = timeline.events().rev().find_map(|e| match &e.what {
        What::Action {
            action: crate::model::action::NodeAction::Drain,
            ok: true,
            policy,
            ..
        } => Some(match policy {
            Some(_) => "fleetop's policy".to_string(),
            None => format!("{} via fleetop", fleetop_proto::input::printable(&e.by, 32)),
        }),
        _ => None,
    });
    person.unwrap_or_else(|| "fleetop".into())
}

/// Who holds a node out of service, for how long and why: "drained by
/// fleetop 2h13m: xid on gpu3 ...", "drained by alice 3h00m: maintenance";
/// `None` for a node in service. Who made fleetop's drain is said where
/// Slurm's reason or the node's timeline says (`fleetop_drainer`).
pub fn held_text(s: &SchedNode, now_ms: i64, timeline: &crate::model::timeline::Timeline) -> Option<String> {
    let (who, words) = match s.hold() {
        Hold::InService => return None,
        Hold::Fleetop { reason } => (
            Some(fleetop_drainer(reason, timeline)),
            crate::model::action::own_words(reason).unwrap_or(reason).to_string(),
        ),
        Hold::Other => (
            s.reason_user.clone(),
            s.reason.clone().unwrap_or_else(|| "no reason given".into()),
        ),
    };
    let mut t = s.label();
    if let Some(w) = who {
        t.push_str(&format!(" by {w}"));
    }
    if let Some(ms) = held_for_ms(s, now_ms) {
        t.push_str(&format!(" {}", human_span(ms)));
    }
    t.push_str(&format!(": {words}"));
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy's drain is said from Slurm's reason alone: a console that
    /// never saw the watch's audit log still names the policy.
    #[test]
    fn a_policy_drain_is_named_from_slurms_reason_in_any_console() {
        let empty = crate::model::timeline::Timeline::default();
        let node = |reason: &str| SchedNode {
            state: "drained".into(),
            reason: Some(reason.into()),
            reason_user: Some("root".into()),
            ..Default::default()
        };
        let policy = held_text(&node("fleetop-policy: xid on gpu3: reboot_node"), 0, &empty).expect("held");
        assert_eq!(policy, "drained by fleetop's policy: xid on gpu3: reboot_node");
        let person = held_text(&node("fleetop: psu"), 0, &empty).expect("held");
        assert_eq!(person, "drained by fleetop: psu");
    }

    #[test]
    fn metrics_are_fractions_of_their_limit() {
        let th = Thresholds::default();
        let info = GpuDesc {
            mem_total_bytes: Some(100),
            max_sm_clock_mhz: Some(2000),
            slowdown_temp_c: Some(85),
            ..Default::default()
        };
        let g = GpuReading {
            util_pct: Some(50),
            mem_used_bytes: Some(25),
            temp_c: Some(55),
            power_w: Some(350.0),
            power_limit_w: Some(700.0),
            sm_clock_mhz: Some(1000),
            ..Default::default()
        };
        assert_eq!(Metric::Util.frac(&g, Some(&info), &th), Some(0.5));
        assert_eq!(Metric::Mem.frac(&g, Some(&info), &th), Some(0.25));
        assert_eq!(Metric::Temp.frac(&g, Some(&info), &th), Some(0.5));
        assert_eq!(Metric::Power.frac(&g, Some(&info), &th), Some(0.5));
        assert_eq!(Metric::Clock.frac(&g, Some(&info), &th), Some(0.5));
        assert_eq!(Metric::Mem.frac(&g, None, &th), None, "no total, no fraction");
        // GPM metrics: a GPU without GPM shows "-", not 0.
        assert_eq!(Metric::SmActive.cell_text(&g, Some(&info), &th), "-");
        let gpm = GpuReading {
            gpm: Some(crate::model::sample::Gpm {
                sm_active_pct: 12.0,
                sm_occupancy_pct: 4.0,
                tensor_active_pct: 0.0,
                dram_bw_pct: 62.0,
            }),
            ..g.clone()
        };
        assert_eq!(Metric::SmActive.cell_text(&gpm, Some(&info), &th), "12");
        assert_eq!(Metric::TensorActive.cell_text(&gpm, Some(&info), &th), "0");
        assert_eq!(Metric::DramBw.frac(&gpm, Some(&info), &th), Some(0.62));
        // Without the GPU's own slowdown temperature, the configured one.
        let th = Thresholds {
            hot_fallback_slowdown_c: 125,
            ..Thresholds::default()
        };
        assert_eq!(Metric::Temp.frac(&g, None, &th), Some(0.3));
        let lost = GpuReading {
            index: 0,
            error: Some(crate::model::sample::GpuError::Lost),
            ..Default::default()
        };
        assert_eq!(Metric::Util.frac(&lost, Some(&info), &th), None);
        assert_eq!(Metric::Util.cell_text(&lost, Some(&info), &th), "ERR");
    }

    /// A node's mean is the mean of its GPUs' fractions, each read against
    /// its own description, in every metric.
    #[test]
    fn a_nodes_mean_reads_each_gpus_own_description() {
        use crate::model::sample::{Gpm, NodeDesc, NodeSample};
        use crate::model::target::Target;
        let th = Thresholds::default();
        let desc = |index, mem, clock, slowdown| GpuDesc {
            index,
            mem_total_bytes: Some(mem),
            max_sm_clock_mhz: Some(clock),
            slowdown_temp_c: Some(slowdown),
            ..Default::default()
        };
        // Listed out of index order, so a GPU found by position is wrong.
        let info = NodeDesc {
            gpus: vec![desc(1, 400, 1000, 65), desc(0, 100, 2000, 85)],
            ..Default::default()
        };
        let reading = |index| GpuReading {
            index,
            util_pct: Some(40 + 20 * index),
            mem_used_bytes: Some(50),
            temp_c: Some(45),
            power_w: Some(100.0),
            power_limit_w: Some(400.0 * f64::from(index + 1)),
            sm_clock_mhz: Some(500),
            gpm: Some(Gpm {
                sm_active_pct: 10.0 + 50.0 * f64::from(index),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(info.gpu(0).and_then(|d| d.mem_total_bytes), Some(100), "by index");
        assert_eq!(info.gpu(2), None);
        let mut n = NodeState::new(Target {
            name: "a".into(),
            host: "a".into(),
            port: 1,
        });
        n.info = Some(info.clone());
        n.last = Some(NodeSample {
            gpus: vec![reading(0), reading(1)],
            ..Default::default()
        });
        for m in Metric::ALL {
            let each: Vec<f64> = [0, 1]
                .iter()
                .filter_map(|&i| m.frac(&reading(i), info.gpu(i), &th))
                .collect();
            let want = each.iter().sum::<f64>() / each.len() as f64;
            let got = node_mean(&n, m, &th).expect("a mean");
            assert!((got - want).abs() < 1e-9, "{m:?}: {got} != {want}");
        }
        assert_eq!(node_mean(&n, Metric::Mem, &th), Some((0.5 + 0.125) / 2.0));
    }
}
