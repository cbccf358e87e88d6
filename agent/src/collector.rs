//! The collector: runs the node's sources (`crate::sources::Sampler`)
//! together into one node description and one sample per tick, matches the
//! XIDs two sources report, and keeps the fault journal and the pods.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

use crate::keep::burnins::BurnIns;
use crate::keep::journal::Journal;
use crate::proto::{FaultRecord, HostSample, NodeInfo, Sample, XidEvent};
use crate::sources::{GpuProcesses, Sampler};

/// Runs a set of samplers as one node.
pub struct Collector {
    samplers: Vec<Box<dyn Sampler>>,
    info: NodeInfo,
    seq: u64,
    recent: RecentXids,
    journal: Option<Journal>,
    /// The journal as it is now, for a server that describes the node to
    /// each new subscriber (the collector itself moves to the sampling task).
    journal_view: Option<JournalView>,
    /// Which pods hold which GPU devices, as the kubelet last said.
    pods: Option<crate::sources::pods::HoldersView>,
    /// Device ids the kubelet named that this node has not, as last logged.
    unknown_devices: Vec<String>,
    /// The simulated node this is, if it is one (see `set_simulation`).
    simulation: Option<crate::sim::SimConfig>,
    /// The burn-in journal, for the server that runs the burn-ins (see
    /// `take_burn_ins`); `None`: kept in memory.
    burn_ins: Option<BurnIns>,
}

/// The fault journal as it is now (`NodeInfo.fault_journal`), shared.
pub type JournalView = Arc<RwLock<Vec<FaultRecord>>>;

/// Two reports of one XID (NVML's event set and the kernel log) are this
/// close in time at most: NVML stamps the event when its thread wakes, the
/// kernel log's time is its record's, through a boot time in whole seconds.
pub const SAME_XID_MS: i64 = 10_000;
/// How long an XID is remembered for matching a report from the other source
/// (by the agent's clock: the second report arrives within a sample or two).
const RECENT_XID_KEEP_MS: i64 = 60_000;
/// XIDs remembered at most.
const RECENT_XID_MAX: usize = 256;

/// XIDs sent lately, to send a fault that NVML and the kernel log both
/// report once, whichever comes first.
#[derive(Debug, Default)]
struct RecentXids {
    seen: VecDeque<SeenXid>,
}

#[derive(Debug, Clone, Copy)]
struct SeenXid {
    gpu: u32,
    xid: XidEvent,
    /// When the collector sent it (its clock).
    sent_ms: i64,
    /// A report from the other source was already folded into this one.
    matched: bool,
}

impl RecentXids {
    /// Whether `x` on `gpu` is news: false when it is the other source's
    /// report of an XID already sent (same GPU and code, close in time, not
    /// yet matched). Reports from one source are never folded together: two
    /// XIDs NVML reports are two faults.
    fn admit(&mut self, gpu: u32, x: &XidEvent, now_ms: i64) -> bool {
        while self
            .seen
            .front()
            .is_some_and(|s| s.sent_ms < now_ms.saturating_sub(RECENT_XID_KEEP_MS))
        {
            self.seen.pop_front();
        }
        if let Some(s) = self.seen.iter_mut().find(|s| {
            s.gpu == gpu
                && s.xid.xid == x.xid
                && s.xid.source != x.source
                && !s.matched
                && s.xid.time_ms.abs_diff(x.time_ms) <= SAME_XID_MS as u64
        }) {
            s.matched = true;
            return false;
        }
        if self.seen.len() >= RECENT_XID_MAX {
            self.seen.pop_front();
        }
        self.seen.push_back(SeenXid {
            gpu,
            xid: *x,
            sent_ms: now_ms,
            matched: false,
        });
        true
    }
}

/// Default for how often per-link NVLink counters are sent (every 10th sample).
pub const NVLINK_COUNTERS_EVERY: u32 = 10;

impl Collector {
    /// Builds the collector and its static node description.
    pub fn new(mut samplers: Vec<Box<dyn Sampler>>, base: NodeInfo) -> Self {
        let mut info = base;
        for s in &mut samplers {
            s.describe(&mut info);
        }
        info.nvlink_counters_every = NVLINK_COUNTERS_EVERY;
        Collector {
            samplers,
            info,
            seq: 0,
            recent: RecentXids::default(),
            journal: None,
            journal_view: None,
            pods: None,
            unknown_devices: Vec::new(),
            simulation: None,
            burn_ins: None,
        }
    }

    /// Keeps this node's burn-ins in `b` (the server takes it at start).
    pub fn set_burn_ins(&mut self, b: BurnIns) {
        self.burn_ins = Some(b);
    }

    /// The burn-in journal, for the server: the one in the state directory,
    /// or one kept in memory.
    pub fn take_burn_ins(&mut self) -> BurnIns {
        self.burn_ins.take().unwrap_or_else(BurnIns::in_memory)
    }

    /// Names this machine (`NodeInfo.machine_id`).
    pub fn set_machine_id(&mut self, id: String) {
        self.info.machine_id = id;
    }

    /// Keeps every XID this collector sends in `journal`, whose records (and
    /// boot id) the node description then carries.
    pub fn set_journal(&mut self, journal: Journal) {
        self.info.boot_id = journal.boot_id().to_string();
        self.info.fault_journal = journal.records().to_vec();
        self.journal_view = Some(Arc::new(RwLock::new(self.info.fault_journal.clone())));
        self.journal = Some(journal);
    }

    /// The fault journal as it will be from now on, if there is one: a
    /// server gives each new subscriber the journal as it is then.
    pub fn journal_view(&self) -> Option<JournalView> {
        self.journal_view.clone()
    }

    /// Puts in each sample the pods holding each GPU, as `view` says then
    /// (the kubelet is asked elsewhere: see `pods::spawn`).
    pub fn set_pods(&mut self, view: crate::sources::pods::HoldersView) {
        self.pods = Some(view);
    }

    /// Whether a sample may block: any source that may (see
    /// `Sampler::blocks`), or the journal, written to disk on a fault.
    pub fn blocks(&self) -> bool {
        self.journal.is_some() || self.samplers.iter().any(|s| s.blocks())
    }

    /// Marks this collector as the simulated node `cfg`: a burn-in on it
    /// answers its GPU checks from the simulation (`bench::sim`), since
    /// there is no GPU to measure.
    pub fn set_simulation(&mut self, cfg: crate::sim::SimConfig) {
        self.simulation = Some(cfg);
    }

    /// The simulated node this collector is, if it is one.
    pub fn simulation(&self) -> Option<crate::sim::SimConfig> {
        self.simulation.clone()
    }

    /// Where the GPUs' processes can be asked for now (see `Sampler::gpu_processes`).
    pub fn gpu_processes(&self) -> Option<Arc<dyn GpuProcesses>> {
        self.samplers.iter().find_map(|s| s.gpu_processes())
    }

    /// Sends per-link NVLink counters in every `n`-th sample only.
    pub fn set_nvlink_counters_every(&mut self, n: u32) {
        self.info.nvlink_counters_every = n.max(1);
    }

    /// Records why the node has no GPU data (sent to every subscriber).
    pub fn set_note(&mut self, note: String) {
        if self.info.backend.is_empty() {
            self.info.backend = "none".into();
        }
        // A library's own words (a path, dlopen's message): printable and
        // bounded, as the wire says.
        self.info.gpu_backend_note = fleetop_proto::input::printable(&note, 500);
    }

    pub fn info(&self) -> &NodeInfo {
        &self.info
    }

    /// One sample of every source at `now_ms`, or `None` while a source hangs.
    pub fn sample(&mut self, now_ms: i64) -> Option<Sample> {
        if self.samplers.iter().any(|s| s.is_hung(now_ms)) {
            return None;
        }
        self.seq += 1;
        let mut out = Sample {
            seq: self.seq,
            time_ms: now_ms,
            host: Some(HostSample::default()),
            ..Default::default()
        };
        for s in &mut self.samplers {
            s.sample(now_ms, &mut out);
        }
        self.one_report_per_xid(now_ms, &mut out);
        self.attach_pods(&mut out);
        // The first sample, then every n-th, carries the NVLink counters.
        if !(self.seq - 1).is_multiple_of(u64::from(self.info.nvlink_counters_every.max(1))) {
            for g in &mut out.gpus {
                g.nvlink_tx_kib.clear();
                g.nvlink_rx_kib.clear();
            }
        }
        Some(out)
    }

    /// The pods holding each GPU; a device the kubelet names that this node
    /// does not have is logged once per change, never per sample.
    fn attach_pods(&mut self, out: &mut Sample) {
        let Some(view) = &self.pods else { return };
        let holders = view.read().unwrap_or_else(|e| e.into_inner()).clone();
        crate::sources::pods::attach(&holders, &self.info, out);
        let unknown = holders.unknown_devices(&self.info, out);
        if unknown != self.unknown_devices {
            if !unknown.is_empty() {
                tracing::warn!(
                    "the kubelet gives pods GPU devices this node does not list: {}",
                    unknown.join(", ")
                );
            }
            self.unknown_devices = unknown.into_iter().map(String::from).collect();
        }
    }

    /// Drops the second report of an XID both NVML and the kernel log saw
    /// (in this sample or lately), then journals what is left.
    fn one_report_per_xid(&mut self, now_ms: i64, out: &mut Sample) {
        let mut changed = false;
        for g in &mut out.gpus {
            if g.xids.is_empty() {
                continue;
            }
            let recent = &mut self.recent;
            g.xids.retain(|x| recent.admit(g.index, x, now_ms));
            let Some(journal) = &mut self.journal else {
                continue;
            };
            let uuid = self
                .info
                .gpus
                .iter()
                .find(|i| i.index == g.index)
                .map(|i| i.uuid.as_str())
                .unwrap_or_default();
            for x in &g.xids {
                changed |= journal.add_xid(uuid, x.xid, x.time_ms, now_ms);
            }
        }
        if let (true, Some(journal)) = (changed, &mut self.journal) {
            journal.save();
            self.info.fault_journal = journal.records().to_vec();
            if let Some(view) = &self.journal_view {
                *view.write().unwrap_or_else(|e| e.into_inner()) = self.info.fault_journal.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{GpuInfo, GpuSample};

    /// Reports, in its n-th sample, the XIDs (GPU, code, time, source) scripted for it.
    struct Scripted(Vec<Vec<(u32, u32, i64, u32)>>, usize);

    impl Sampler for Scripted {
        fn describe(&mut self, info: &mut NodeInfo) {
            if info.gpus.is_empty() {
                for i in 0..2 {
                    info.gpus.push(GpuInfo {
                        index: i,
                        uuid: format!("GPU-{i}"),
                        ..Default::default()
                    });
                }
            }
        }

        fn sample(&mut self, _now_ms: i64, out: &mut Sample) {
            for i in 0..2 {
                if !out.gpus.iter().any(|g| g.index == i) {
                    out.gpus.push(GpuSample {
                        index: i,
                        ..Default::default()
                    });
                }
            }
            for &(gpu, xid, time_ms, source) in self.0.get(self.1).map(Vec::as_slice).unwrap_or_default() {
                if let Some(g) = out.gpus.iter_mut().find(|g| g.index == gpu) {
                    g.xids.push(XidEvent { xid, time_ms, source });
                }
            }
            self.1 += 1;
        }
    }

    fn xids(s: &Sample) -> Vec<(u32, u32, u32)> {
        s.gpus
            .iter()
            .flat_map(|g| g.xids.iter().map(move |x| (g.index, x.xid, x.source)))
            .collect()
    }

    #[test]
    fn one_fault_from_nvml_and_the_kernel_log_travels_once_whatever_the_order() {
        const T: i64 = 1_000_000;
        let nvml = Scripted(
            vec![
                // Both in one sample.
                vec![(0, 79, T, 0)],
                // The kernel log first (below), NVML a sample later.
                vec![],
                vec![(1, 48, T + 2_500, 0)],
                // Two XIDs from NVML alone are two faults.
                vec![(0, 13, T + 5_000, 0), (0, 13, T + 5_100, 0)],
            ],
            0,
        );
        let kmsg = Scripted(
            vec![
                vec![(0, 79, T + 900, 1)],
                vec![(1, 48, T + 2_000, 1)],
                // Another GPU, or a code, or long after: not the same fault.
                vec![(0, 48, T + 2_000, 1), (1, 79, T + 900, 1)],
                vec![(0, 13, T + 5_400, 1), (0, 79, T + 60_000, 1)],
            ],
            0,
        );
        let mut c = Collector::new(vec![Box::new(nvml), Box::new(kmsg)], NodeInfo::default());
        let mut got = Vec::new();
        for i in 0..4 {
            got.push(xids(&c.sample(T + i * 1000).expect("sample")));
        }
        assert_eq!(got[0], [(0, 79, 0)]);
        assert_eq!(got[1], [(1, 48, 1)]);
        assert_eq!(got[2], [(0, 48, 1), (1, 79, 1)], "NVML's 48 on GPU 1 was the kernel's");
        assert_eq!(got[3], [(0, 13, 0), (0, 13, 0), (0, 79, 1)]);
    }

    #[test]
    fn the_journal_gets_each_fault_once_and_the_view_follows() {
        const T: i64 = 1_800_000_000_000;
        let dir = tempfile::tempdir().expect("tempdir");
        let run = |boot: &str, script: Vec<Vec<(u32, u32, i64, u32)>>| {
            let j = Journal::open(dir.path(), boot.into(), T).expect("journal");
            let mut c = Collector::new(vec![Box::new(Scripted(script, 0))], NodeInfo::default());
            c.set_journal(j);
            let view = c.journal_view().expect("view");
            let before = view.read().expect("r").len();
            for i in 0..2 {
                c.sample(T + i * 1000);
            }
            let after = view.read().expect("r").clone();
            assert_eq!(after, c.info().fault_journal);
            (before, after)
        };
        let (before, after) = run("boot-a", vec![vec![(0, 79, T - 1000, 1)], vec![(0, 79, T - 500, 0)]]);
        assert_eq!((before, after.len()), (0, 1));
        assert_eq!(after[0].gpu_uuid, "GPU-0");
        // Restarted: the kernel log is replayed.
        let (before, after) = run("boot-a", vec![vec![(0, 79, T - 1000, 1)]]);
        assert_eq!((before, after.len()), (1, 1));
        // Another boot, another fall off the bus.
        let (_, after) = run("boot-b", vec![vec![(0, 79, T + 100, 1)]]);
        assert_eq!(after.len(), 2);
        assert_eq!(after[1].boot_id, "boot-b");
    }
}
