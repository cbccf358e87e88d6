//! Detectors: turn a node's samples into flags, with debounce and hysteresis
//! so flags do not flap. They run once per sample, at the sample's time (on
//! the console's clock), so history sent on connect raises flags with their
//! true start times. One function per flag kind, in `gpu` and `ib`.

pub mod debounce;
pub mod gpu;
pub mod ib;
pub mod node;
pub mod thresholds;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::model::flag::{ClearedFlag, Flag, FlagKind, Severity, Subject};
use crate::model::rates::Derived;
use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::sched::Job;
use crate::model::timeline::What;

pub use thresholds::{Thresholds, de_duration};

pub(crate) fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

pub(crate) fn flag(
    kind: FlagKind,
    severity: Severity,
    subject: Subject,
    since_ms: i64,
    detail: String,
    ev: &[(&str, f64)],
) -> Flag {
    Flag {
        kind,
        severity,
        subject,
        since_ms,
        detail,
        holder: None,
        evidence: ev.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
        action: kind.action(),
        escalation: None,
    }
}

/// The flags of one node and the memory behind them.
#[derive(Debug, Default, Clone)]
pub struct NodeDetector {
    gpus: Vec<gpu::GpuState>,
    ib: Vec<ib::IbState>,
    active: BTreeMap<(FlagKind, Subject), Flag>,
    cleared: VecDeque<ClearedFlag>,
    node: node::NodeState,
    /// Flags raised and cleared since the store last took them, for the
    /// node's timeline (at most `PENDING_MAX`: a store that never takes
    /// them, as in a benchmark, does not grow it).
    changes: Vec<(i64, What)>,
    /// The Ray actors and tasks holding GPUs on this node (set by the
    /// store from the last Ray read), to name who holds an idle GPU where
    /// no Slurm job does.
    pub ray: Vec<crate::model::ray::RayWork>,
    /// When the node last passed a burn-in (set by the store from the bench
    /// screen and the timeline): XIDs before it are no longer held, since
    /// the hardware was measured good after them.
    pub burnin_passed_ms: Option<i64>,
}

const PENDING_MAX: usize = 256;

fn raised(f: &Flag) -> (i64, What) {
    (
        f.since_ms,
        What::FlagRaised {
            kind: f.kind,
            subject: f.subject.key(),
            severity: f.severity,
            action: f.action,
            detail: f.words(),
        },
    )
}

impl NodeDetector {
    /// Flags active now, in a stable order (kind, then subject).
    pub fn active(&self) -> impl Iterator<Item = &Flag> {
        self.active.values()
    }

    /// The XID codes behind GPU `index`'s xid flag while it is up.
    pub fn held_xids(&self, index: u32) -> &[u32] {
        self.gpus.get(index as usize).map_or(&[], |g| g.held_xids())
    }

    /// The AMD faults behind GPU `index`'s gpu_event flag while it is up
    /// (the AMD fault catalog's codes: "gpu_reset", "xgmi_error", ...).
    pub fn held_events(&self, index: u32) -> Vec<&'static str> {
        self.gpus
            .get(index as usize)
            .map(|g| g.held_events().collect())
            .unwrap_or_default()
    }

    /// The flags raised and cleared since the last call, in order, with
    /// when: a raise at its condition's start, a clear when it cleared.
    pub fn take_changes(&mut self) -> Vec<(i64, What)> {
        std::mem::take(&mut self.changes)
    }

    fn changed(&mut self, c: (i64, What)) {
        if self.changes.len() < PENDING_MAX {
            self.changes.push(c);
        }
    }

    /// Flags cleared recently, newest last.
    pub fn cleared(&self) -> impl Iterator<Item = &ClearedFlag> {
        self.cleared.iter()
    }

    /// Feeds one sample (with the rates the store derived from it).
    /// `jobs` are the scheduler's jobs on this node (to name who holds an idle GPU).
    pub fn on_sample(&mut self, info: &NodeDesc, s: &NodeSample, derived: &Derived, jobs: &[Job], th: &Thresholds) {
        let t = s.time_ms;
        let mut want: Vec<Flag> = Vec::new();
        self.gpus
            .resize_with(s.gpus.len().max(self.gpus.len()), Default::default);
        for g in &s.gpus {
            let Some(st) = self.gpus.get_mut(g.index as usize) else {
                continue;
            };
            let cx = gpu::Context {
                t,
                desc: info.gpu(g.index),
                jobs,
                ray: &self.ray,
                th,
                health: &info.health,
                burnin_passed_ms: self.burnin_passed_ms,
            };
            gpu::flags(st, g, &cx, &mut want);
        }
        self.ib
            .resize_with(s.ib_ports.len().max(self.ib.len()), Default::default);
        for p in &s.ib_ports {
            let Some(st) = self.ib.get_mut(p.port as usize) else {
                continue;
            };
            let deltas = derived
                .ib
                .get(p.port as usize)
                .map(|r| r.errors.as_slice())
                .unwrap_or(&[]);
            let cx = ib::Context { t, info, deltas, th };
            ib::flags(st, p, &cx, &mut want);
        }
        node::flags(&mut self.node, info, s, t, th, &mut want);
        // Node-level flags decided by the store's clock or the fleet, not by
        // this sample: keep them.
        let keep = |k: &(FlagKind, Subject)| {
            k.1 == Subject::Node
                && matches!(
                    k.0,
                    FlagKind::Stale | FlagKind::Unreachable | FlagKind::BurninFailed | FlagKind::VersionSkew
                )
        };
        self.reconcile(want, keep, t, th);
    }

    /// Raises or clears the node's `stale` flag (decided by the store's clock).
    /// `stale` is (since, age in ms, detail) while the node is stale.
    pub fn set_stale(&mut self, stale: Option<(i64, i64, String)>, now_ms: i64, th: &Thresholds) {
        self.set_node_flag(FlagKind::Stale, Severity::Warn, stale, now_ms, th);
    }

    /// Raises (since, detail) or clears the node's `version_skew` flag, which
    /// the store decides against the rest of the fleet.
    pub fn set_version_skew(&mut self, skew: Option<(i64, String)>, now_ms: i64, th: &Thresholds) {
        let key = (FlagKind::VersionSkew, Subject::Node);
        match skew {
            Some((since_ms, detail)) => {
                if !self.active.contains_key(&key) {
                    let f = flag(
                        FlagKind::VersionSkew,
                        Severity::Info,
                        Subject::Node,
                        since_ms,
                        detail.clone(),
                        &[],
                    );
                    self.changed(raised(&f));
                }
                let f = self.active.entry(key).or_insert_with(|| {
                    flag(
                        FlagKind::VersionSkew,
                        Severity::Info,
                        Subject::Node,
                        since_ms,
                        String::new(),
                        &[],
                    )
                });
                f.detail = detail;
            }
            None => {
                if let Some(f) = self.active.remove(&key) {
                    self.push_cleared(f, now_ms, th);
                }
            }
        }
    }

    /// Raises or clears the node's `unreachable` flag (decided by the store's
    /// clock): (since, how long in ms, the connection's error) while it is.
    pub fn set_unreachable(&mut self, down: Option<(i64, i64, String)>, now_ms: i64, th: &Thresholds) {
        self.set_node_flag(FlagKind::Unreachable, Severity::Crit, down, now_ms, th);
    }

    /// Raises (severity, since, detail) or clears the node's `burnin_failed`
    /// flag; a new verdict replaces the old one.
    pub fn set_burnin(&mut self, failed: Option<(Severity, i64, String)>, now_ms: i64, th: &Thresholds) {
        let key = (FlagKind::BurninFailed, Subject::Node);
        let old = self.active.remove(&key);
        match failed {
            Some((severity, since_ms, detail)) => {
                let f = flag(FlagKind::BurninFailed, severity, Subject::Node, since_ms, detail, &[]);
                if old.is_none() {
                    self.changed(raised(&f));
                }
                self.active.insert(key, f);
            }
            None => {
                if let Some(f) = old {
                    self.push_cleared(f, now_ms, th);
                }
            }
        }
    }

    /// A node-level flag held while `state` is (since, age in ms, detail).
    fn set_node_flag(
        &mut self,
        kind: FlagKind,
        severity: Severity,
        state: Option<(i64, i64, String)>,
        now_ms: i64,
        th: &Thresholds,
    ) {
        let key = (kind, Subject::Node);
        match state {
            Some((since_ms, age_ms, detail)) => {
                let new = !self.active.contains_key(&key);
                let f = self.active.entry(key).or_insert_with(|| Flag {
                    kind,
                    severity,
                    subject: Subject::Node,
                    since_ms,
                    detail: String::new(),
                    holder: None,
                    evidence: BTreeMap::new(),
                    action: kind.action(),
                    escalation: None,
                });
                f.detail = detail;
                f.evidence.insert("age_s".into(), (age_ms / 1000) as f64);
                if new {
                    let c = raised(f);
                    self.changed(c);
                }
            }
            None => {
                if let Some(f) = self.active.remove(&key) {
                    self.push_cleared(f, now_ms, th);
                }
            }
        }
    }

    /// Makes the active set match `want`, keeping the start time of flags
    /// that stay and moving the ones that go to the cleared list.
    fn reconcile(&mut self, want: Vec<Flag>, keep: impl Fn(&(FlagKind, Subject)) -> bool, t: i64, th: &Thresholds) {
        let mut next: BTreeMap<(FlagKind, Subject), Flag> = BTreeMap::new();
        for f in want {
            next.insert((f.kind, f.subject), f);
        }
        let old = std::mem::take(&mut self.active);
        let up: Vec<(i64, What)> = next
            .iter()
            .filter(|(k, _)| !old.contains_key(*k))
            .map(|(_, f)| raised(f))
            .collect();
        for c in up {
            self.changed(c);
        }
        for (k, f) in old {
            if next.contains_key(&k) || keep(&k) {
                next.entry(k).or_insert(f);
            } else {
                self.push_cleared(f, t, th);
            }
        }
        self.active = next;
    }

    fn push_cleared(&mut self, flag: Flag, t: i64, th: &Thresholds) {
        self.changed((
            t,
            What::FlagCleared {
                kind: flag.kind,
                subject: flag.subject.key(),
            },
        ));
        self.cleared.push_back(ClearedFlag { flag, cleared_ms: t });
        while let Some(front) = self.cleared.front() {
            if t - front.cleared_ms > ms(th.cleared_keep) || self.cleared.len() > 64 {
                self.cleared.pop_front();
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests;
