//! One node's state: the connection to its agent, its description, latest
//! sample, derived rates, history, detectors and scheduler view.

use std::collections::BTreeMap;
use std::mem::take;

use crate::detect::{NodeDetector, Thresholds};
use crate::model::rates::{Derived, GpuRates};
use crate::model::sample::{GpuReading, NodeDesc, NodeSample};
use crate::model::sched;
use crate::model::target::Target;
use crate::model::timeline::{Event, Timeline};
use crate::store::history::History;
use crate::store::rates::{derive_ib, kib_rates};

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

/// NVLink counters of one GPU at one time: (time, tx KiB, rx KiB) per link.
type NvlinkReading = (i64, Vec<u64>, Vec<u64>);

#[derive(Debug, Clone)]
pub struct NodeState {
    pub target: Target,
    pub info: Option<NodeDesc>,
    pub last: Option<NodeSample>,
    pub derived: Derived,
    pub history: History,
    pub link: Link,
    /// The agent's history has all arrived on the current connection.
    pub caught_up: bool,
    /// When the console last took in a live sample of this node (console
    /// time, when it was applied, not when it was taken).
    pub received_ms: Option<i64>,
    pub detector: NodeDetector,
    /// What the scheduler says of this node, when one is known.
    pub scheduler: Option<sched::NodeView>,
    /// The node's rack, from the config's `[racks]` (by hostlist or by the
    /// host-name pattern); `None` where it names none.
    pub rack: Option<String>,
    /// What happened to the node and who did it (flags, actions, burn-in,
    /// its agent's fault journal).
    pub timeline: Timeline,
    /// The newest sample taken in: (agent instance, seq). History is sent
    /// again on every reconnect; this, not a clock, says what is new.
    seen: Option<(u64, u64)>,
    /// Per GPU position: the last NVLink counters seen.
    nvlink_base: Vec<Option<NvlinkReading>>,
    /// How much later the node's silence is judged for the console's own
    /// lag (`Lag::discount_ms`): its samples may wait in the console's
    /// queue, or its stream for a starved runtime to get to it.
    pub console_lag_ms: i64,
    /// Per GPU index: the Slurm jobs its processes belonged to when it last
    /// answered, taken when it stopped. A GPU that falls off the bus lists no
    /// processes; its page should still say whose work was on it.
    last_jobs: BTreeMap<u32, Vec<u64>>,
    /// The most GPUs any description of this node listed while the console
    /// ran: a node that comes back from a fault with one fewer must not
    /// pass its burn-in on the ones left.
    pub gpus_seen: u32,
}

impl NodeState {
    pub fn new(target: Target) -> Self {
        NodeState {
            target,
            info: None,
            last: None,
            derived: Derived::default(),
            history: History::default(),
            link: Link::Connecting,
            caught_up: false,
            received_ms: None,
            console_lag_ms: 0,
            detector: NodeDetector::default(),
            timeline: Timeline::default(),
            scheduler: None,
            rack: None,
            seen: None,
            nvlink_base: Vec::new(),
            last_jobs: BTreeMap::new(),
            gpus_seen: 0,
        }
    }

    /// How many GPUs the node should have: `explicit` (`--expect-gpus`) if
    /// given, else the most of what its agent says (`--expect-gpus` there, or
    /// its GPUs plus those on the PCI bus NVML does not list), the fleet's
    /// `[thresholds] expect_gpus`, and the most this console saw it list.
    pub fn expected_gpus(&self, explicit: Option<u32>, th: &Thresholds) -> Option<u32> {
        if explicit.is_some() {
            return explicit;
        }
        let agent = self.info.as_ref().map(|i| {
            let pci = i.gpus.len() as u32 + i.health.gpus_missing_pci.len() as u32;
            i.health.expect_gpus.unwrap_or(0).max(pci)
        });
        // A node without a GPU backend (a login node) is not held to the fleet's count.
        let fleet = th
            .expect_gpus
            .filter(|_| self.info.as_ref().is_some_and(|i| i.backend != "none"));
        [agent, fleet, Some(self.gpus_seen)]
            .into_iter()
            .flatten()
            .max()
            .filter(|&n| n > 0)
    }

    /// What a return or resume of this node must know beyond Slurm: the
    /// active flags that keep it out of service, and its GPU count.
    pub fn gate(&self, explicit_gpus: Option<u32>, th: &Thresholds) -> crate::model::returning::Gate {
        crate::model::returning::Gate {
            faults: crate::model::flag::keeping_out(self.detector.active()),
            expect_gpus: self.expected_gpus(explicit_gpus, th),
            jobs: self
                .scheduler
                .as_ref()
                .map(|v| v.jobs.iter().map(crate::model::sched::Job::words).collect())
                .unwrap_or_default(),
            burn_ins: self
                .info
                .as_ref()
                .map(|i| i.health.burn_ins.clone())
                .unwrap_or_default(),
            identity: self.info.as_ref().map(|i| i.identity()),
        }
    }

    /// Takes in the newest burn-in its agent recorded, wherever it was run
    /// from: a pass clears `burnin_failed` and ends the holds of the faults
    /// before it; a failure raises `burnin_failed` (crit) until a pass.
    pub fn judge_burn_in(&mut self, b: &crate::model::bench::BurnIn, now_ms: i64, th: &Thresholds) {
        let newest = self
            .info
            .as_ref()
            .and_then(|i| i.health.burn_ins.iter().map(|x| x.ended_ms).max());
        if newest.is_some_and(|t| t > b.ended_ms) {
            return;
        }
        if b.passed {
            self.detector.burnin_passed_ms = self.detector.burnin_passed_ms.max(Some(b.ended_ms));
            self.detector.set_burnin(None, now_ms, th);
        } else {
            let suite = b.suite.map_or("?", crate::model::bench::Suite::name);
            let detail = format!("burn-in {suite} failed: {} (the node's agent)", b.failure());
            let failed = (crate::model::flag::Severity::Crit, b.ended_ms, detail);
            self.detector.set_burnin(Some(failed), now_ms, th);
        }
    }

    /// Moves the flags the detectors raised and cleared onto the timeline,
    /// and into `unsaved` when the console keeps them on disk.
    pub fn take_flag_changes(&mut self, unsaved: Option<&mut Vec<Event>>) {
        let changes = self.detector.take_changes();
        if changes.is_empty() {
            return;
        }
        let events = changes.into_iter().map(|(time_ms, what)| Event {
            time_ms,
            node: self.target.name.clone(),
            what,
            by: "fleetop".into(),
        });
        match unsaved {
            Some(out) => {
                for e in events {
                    out.push(e.clone());
                    self.timeline.add(e);
                }
            }
            None => events.for_each(|e| self.timeline.add(e)),
        }
    }

    /// The worst severity among the node's active flags: its health, as
    /// the console's status word and the export's `health` read it.
    pub fn worst_severity(&self) -> Option<crate::model::flag::Severity> {
        self.detector.active().map(|f| f.severity).max()
    }

    pub fn interval_ms(&self) -> i64 {
        self.info.as_ref().map(|i| i.interval_ms).unwrap_or(1000)
    }

    /// How old the latest sample is at console time `now_ms`.
    pub fn sample_age_ms(&self, now_ms: i64) -> Option<i64> {
        self.last.as_ref().map(|s| now_ms - s.time_ms)
    }

    /// The node's status at console time `now_ms`.
    pub fn status(&self, now_ms: i64, th: &Thresholds) -> NodeStatus {
        // What arrived may still wait in the console's queue.
        self.status_after(now_ms - self.console_lag_ms, th)
    }

    /// The node's status at `now_ms`, nothing discounted for the console's
    /// lag: what the node itself has shown.
    pub fn status_after(&self, now_ms: i64, th: &Thresholds) -> NodeStatus {
        let stale_after = self.interval_ms() * i64::from(th.stale_intervals.max(1));
        match (self.sample_age_ms(now_ms), &self.link) {
            // A node never reached is still connecting (a fleet starting
            // up, an agent restarting) until `unreachable_after` has passed
            // since the first failed attempt: no false alarm at start.
            (None, Link::Down { since_ms, .. }) if now_ms - since_ms >= th.unreachable_after.as_millis() as i64 => {
                NodeStatus::Unreachable
            }
            (None, _) => NodeStatus::Connecting,
            (Some(age), _) if age <= stale_after => NodeStatus::Ok,
            // Old samples while the history is still arriving say nothing
            // about the node being stale.
            (Some(_), Link::Connected { .. }) if !self.caught_up => NodeStatus::Connecting,
            // Samples still coming in, only late: the console is working
            // through a backlog (a big fleet starting), the node is not silent.
            (Some(_), Link::Connected { .. }) if self.received_ms.is_some_and(|r| now_ms - r <= stale_after) => {
                NodeStatus::Ok
            }
            // Counted from when the node went silent, not from when the
            // connection was noticed dead (keepalive takes its own 15 s). An
            // agent that answers but sends no sample (a hung sampler) is as
            // blind as one that does not answer: unreachable after as long.
            (Some(age), Link::Down { .. } | Link::Connected { .. })
                if age >= th.unreachable_after.as_millis() as i64 =>
            {
                NodeStatus::Unreachable
            }
            (Some(_), _) => NodeStatus::Stale,
        }
    }

    /// The Slurm partitions the node is in (none without a scheduler).
    pub fn partitions(&self) -> &[String] {
        self.scheduler
            .as_ref()
            .map(|v| v.node.partitions.as_slice())
            .unwrap_or_default()
    }

    /// The user of a job running on this node, when the scheduler says.
    pub fn job_user(&self, job_id: u64) -> Option<&str> {
        let v = self.scheduler.as_ref()?;
        v.jobs.iter().find(|j| j.id == job_id).map(|j| j.user.as_str())
    }

    /// The latest readings of GPU `index`.
    pub fn gpu(&self, index: u32) -> Option<&GpuReading> {
        self.last.as_ref()?.gpu(index)
    }

    /// The XID codes of GPU `index`: those behind its xid flag (held a
    /// while after the event), then any in the latest sample not held yet.
    pub fn xid_codes(&self, index: u32) -> Vec<u32> {
        let mut out = self.detector.held_xids(index).to_vec();
        for x in self.gpu(index).map(|s| s.xids.as_slice()).unwrap_or_default() {
            if !out.contains(&x.xid) {
                out.push(x.xid);
            }
        }
        out
    }

    /// The AMD faults behind GPU `index`'s gpu_event flag while it is up,
    /// then any its latest sample reported: the AMD fault catalog's codes.
    pub fn event_codes(&self, index: u32) -> Vec<&'static str> {
        let mut out = self.detector.held_events(index);
        for e in self.gpu(index).map(|s| s.events.as_slice()).unwrap_or_default() {
            let code = fleetop_catalog::amd::event(&e.kind).code;
            if !out.contains(&code) {
                out.push(code);
            }
        }
        out
    }

    /// The Slurm jobs on GPU `index`: its processes' now, or, while it does
    /// not answer (lost, stuck), those of when it last did.
    pub fn gpu_jobs(&self, index: u32) -> Vec<u64> {
        match self.gpu(index) {
            Some(g) if g.error.is_none() => jobs_of(g),
            _ => self.last_jobs.get(&index).cloned().unwrap_or_default(),
        }
    }

    /// "mlx5_0/1" for the node's IB port at position `k`.
    pub fn ib_port_name(&self, k: u32) -> String {
        match &self.info {
            Some(i) => i.ib_port_name(k),
            None => format!("port{k}"),
        }
    }

    /// Whether `s` is new: a later sample of the same agent process, or, from
    /// a new process (restarted agent), one taken after the newest kept.
    fn is_new(&self, s: &NodeSample) -> bool {
        let instance = self.info.as_ref().map(|i| i.instance).unwrap_or(0);
        match self.seen {
            None => true,
            Some((inst, seq)) if inst == instance => s.seq > seq,
            // Both times are on the console's clock, measured per connection,
            // so an agent clock that stepped between the two does not matter.
            Some(_) => self.last.as_ref().is_none_or(|l| s.time_ms > l.time_ms),
        }
    }

    pub(crate) fn ingest(&mut self, mut s: NodeSample, history_len: usize, th: &Thresholds) {
        if !self.is_new(&s) {
            return;
        }
        self.seen = Some((self.info.as_ref().map(|i| i.instance).unwrap_or(0), s.seq));
        match &self.last {
            Some(prev) => derive_ib(prev, &s, &mut self.derived.ib),
            None => self.derived.ib.clear(),
        }
        self.update_nvlink_rates(&mut s);
        // Only when a GPU stops answering: the sample before says what ran on it.
        if let Some(prev) = &self.last {
            for g in s.gpus.iter().filter(|g| g.error.is_some()) {
                if let Some(was) = prev.gpu(g.index).filter(|p| p.error.is_none()) {
                    self.last_jobs.insert(g.index, jobs_of(was));
                }
            }
        }
        self.history.push(&s, self.info.as_ref(), history_len);
        if let Some(info) = &self.info {
            let jobs = self.scheduler.as_ref().map(|v| v.jobs.as_slice()).unwrap_or_default();
            self.detector.on_sample(info, &s, &self.derived, jobs, th);
        }
        self.last = Some(s);
    }

    /// A GPU's NVLink counters move from the sample into `nvlink_base`, the
    /// base of the next rates, rather than being held twice: nothing reads
    /// them from the node's last sample.
    fn update_nvlink_rates(&mut self, s: &mut NodeSample) {
        let n = s.gpus.len();
        self.nvlink_base.resize(n, None);
        self.derived.gpus.resize_with(n, GpuRates::default);
        for (i, g) in s.gpus.iter_mut().enumerate() {
            if g.nvlink_tx_kib.is_empty() && g.nvlink_rx_kib.is_empty() {
                continue; // not a counter-carrying sample: rates hold
            }
            if let Some((t0, tx0, rx0)) = &self.nvlink_base[i] {
                let dt = s.time_ms - t0;
                self.derived.gpus[i] = GpuRates::new(
                    kib_rates(tx0, &g.nvlink_tx_kib, dt),
                    kib_rates(rx0, &g.nvlink_rx_kib, dt),
                );
            }
            self.nvlink_base[i] = Some((s.time_ms, take(&mut g.nvlink_tx_kib), take(&mut g.nvlink_rx_kib)));
        }
    }
}

/// The distinct Slurm jobs of a GPU's processes, in order.
fn jobs_of(g: &GpuReading) -> Vec<u64> {
    let ids: std::collections::BTreeSet<u64> = g.processes.iter().filter_map(|p| p.job_id).collect();
    ids.into_iter().collect()
}
