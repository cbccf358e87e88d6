//! The remediation policy (`fleetop watch --remediate`, `[remediate]`):
//! opt-in, dry-run first, bounded by a breaker. For a crit flag whose action
//! takes the node (reset_gpu, reboot_node, replace) and that stays up for the
//! grace period, the policy drains the node with the catalog's reason and
//! notifies. It never touches a node someone else holds out of service, and
//! acts once per incident: a node it drained is not drained again while it
//! is out of service. A node put back in service while its fault is still
//! up (by a return, or a resume outside fleetop) is a new incident, drained
//! again within the breaker. It logs, once each, every node it leaves alone
//! and why. It stops for good when it would drain more than the breaker
//! allows in its window: a fleet-wide event (a switch, a bad driver
//! rollout) must never drain the cluster. A person lifts the stop
//! (`fleetop remediate reset`); the window still counts every drain made in
//! it.
//!
//! What it did is kept in `remediate.json` beside the audit log, so a
//! restarted watch neither drains twice nor notifies twice. The window is
//! counted from the audit log too (`audited_drains`): a state file deleted,
//! emptied or reset cannot make room for more drains.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::config::{RemediateConfig, RemediateMode};
use crate::model::flag::{Flag, FlagKind, Severity};
pub use crate::model::remediation::{Drained, State, Tripped};
use crate::model::sched::Hold;
use crate::model::time::rfc3339;
use crate::ops::notify::Alert;
use crate::ops::{audit, state_file};
use crate::store::{Link, NodeState, Store};

/// `remediate.json` beside the audit log.
pub fn path() -> PathBuf {
    audit::audit_path().with_file_name("remediate.json")
}

/// Reads the state; a missing file is a fresh policy. A damaged one is an
/// error: a policy that does not know what it did must not act.
pub fn load(p: &Path) -> anyhow::Result<State> {
    match state_file::read(p, fleetop_proto::input::MAX_FILE_BYTES) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", p.display())),
    }
}

pub fn save(p: &Path, s: &State) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(s)?;
    state_file::replace(p, &bytes).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

/// The policy's drains since `since_ms`, as the audit log has them (node,
/// when): each drain the policy made that Slurm took.
pub fn audited_drains(since_ms: i64) -> Vec<(String, i64)> {
    drains_in(&crate::ops::timeline::load(None, since_ms))
}

fn drains_in(events: &[crate::model::timeline::Event]) -> Vec<(String, i64)> {
    use crate::model::action::NodeAction;
    use crate::model::timeline::What;
    events
        .iter()
        .filter(|e| {
            matches!(
                &e.what,
                What::Action {
                    action: NodeAction::Drain,
                    ok: true,
                    policy: Some(_),
                    ..
                }
            )
        })
        .map(|e| (e.node.clone(), e.time_ms))
        .collect()
}

/// What the policy decided at one look at the fleet.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Drain this node with this reason (the catalog's line for `kind`).
    Drain {
        node: String,
        kind: FlagKind,
        reason: String,
    },
    /// Stop: draining `node` would pass the breaker's limit.
    Trip { node: String, why: String },
}

/// A flag the policy acts on: crit, an action that takes the node, and up
/// for at least `grace` (any age when `grace` is `None`).
fn qualifies(f: &Flag, now_ms: i64, grace_ms: Option<i64>) -> bool {
    f.severity == Severity::Crit && f.action.takes_node() && grace_ms.is_none_or(|g| now_ms - f.since_ms >= g)
}

/// The most urgent qualifying flag of a node.
fn worst(n: &NodeState, now_ms: i64, grace_ms: Option<i64>) -> Option<&Flag> {
    n.detector
        .active()
        .filter(|f| qualifies(f, now_ms, grace_ms))
        .max_by_key(|f| f.action.urgency())
}

/// The policy's logic, without I/O: what to do now, given what it did.
pub struct Policy {
    pub cfg: RemediateConfig,
    /// Notes already logged (a node left alone, a dry-run's would-drain),
    /// so each is said once.
    said: BTreeSet<String>,
    /// Dry-run only: the drains it would have made in the window.
    would: Vec<Drained>,
    /// The policy's drains the audit log holds (node, when), read at
    /// start, and each drain made since: the window's floor, which no
    /// state file can lower.
    audited: Vec<(String, i64)>,
}

impl Policy {
    pub fn new(cfg: RemediateConfig) -> Policy {
        Policy {
            cfg,
            said: BTreeSet::new(),
            would: Vec::new(),
            audited: Vec::new(),
        }
    }

    /// The policy's drains the audit log holds (`audited_drains`), and each
    /// one made since (`made`).
    pub fn count_drain(&mut self, node: &str, at_ms: i64) {
        self.audited.push((node.to_string(), at_ms));
    }

    /// The drains counted against the window now: the most of what the
    /// state file says and what the audit log says.
    pub fn in_window(&self, state: &State) -> usize {
        state.recent.len().max(self.audited.len())
    }

    /// Says `what` once (by `key`).
    fn once(&mut self, key: String, what: impl FnOnce() -> String) {
        if self.said.insert(key) {
            tracing::info!("remediate: {}", what());
        }
    }

    /// Looks at the fleet: forgets incidents that are over, then decides.
    /// `state` is what was done (on disk); in drain mode the caller records
    /// each drain it makes with `State::drained`.
    pub fn decide(&mut self, store: &Store, state: &mut State, now_ms: i64) -> Vec<Decision> {
        let window = self.cfg.window.as_millis() as i64;
        let grace = self.cfg.grace.as_millis() as i64;
        state.recent.retain(|d| now_ms - d.at_ms < window);
        self.would.retain(|d| now_ms - d.at_ms < window);
        self.audited.retain(|(_, at)| now_ms - at < window);
        // An incident is over once its node is back in service: with no
        // qualifying flag, the next fault is a new incident; with its fault
        // still up (a return that let it through, a resume outside
        // fleetop), that is a new incident now.
        let said = &mut self.said;
        state.holding.retain(|node, d| {
            let Some(n) = store.nodes.iter().find(|n| &n.target.name == node) else {
                return true;
            };
            let Some(s) = n.scheduler.as_ref().map(|v| &v.node) else {
                return true;
            };
            if s.hold() != Hold::InService {
                d.seen_out = true;
                return true;
            }
            if !d.seen_out {
                // Slurm has not shown the drain yet.
                return true;
            }
            if let Some(f) = worst(n, now_ms, None)
                && said.insert(format!("back {node} {}", d.at_ms))
            {
                tracing::warn!(
                    "remediate: {node}: back in service with {} still active: a new incident",
                    f.kind.name()
                );
            }
            false
        });
        if let Some(t) = &state.tripped {
            let why = t.why.clone();
            self.once(format!("tripped {}", t.at_ms), || {
                format!("the breaker is tripped ({why}); nothing is drained until `fleetop remediate reset`")
            });
            return Vec::new();
        }
        let dry = self.cfg.mode == RemediateMode::DryRun;
        let limit = self.cfg.limit(store.nodes.len());
        let mut out = Vec::new();
        let mut made = if dry { self.would.len() } else { self.in_window(state) };
        for n in &store.nodes {
            let name = &n.target.name;
            // A node whose history is still arriving shows the past.
            if matches!(n.link, Link::Connected { .. }) && !n.caught_up {
                continue;
            }
            let Some(f) = worst(n, now_ms, Some(grace)) else {
                continue;
            };
            if let Some(d) = state.holding.get(name) {
                let (at, reason) = (rfc3339(d.at_ms), d.reason.clone());
                self.once(format!("holding {name} {}", d.at_ms), || {
                    format!("{name}: drained by the policy at {at} ({reason}); the incident is open: not drained twice")
                });
                continue;
            }
            if dry && self.would.iter().any(|d| &d.node == name) {
                continue;
            }
            let Some(s) = n.scheduler.as_ref().map(|v| &v.node) else {
                self.once(format!("nosched {name}"), || {
                    format!("{name}: {} but Slurm does not list the node; left alone", f.kind.name())
                });
                continue;
            };
            match s.hold() {
                Hold::InService => {}
                Hold::Fleetop { .. } => {
                    let held = s.held_by();
                    self.once(format!("fleetop {name} {}", f.kind.name()), || {
                        format!(
                            "{name}: {} but the node is already {held}; left as it is",
                            f.kind.name()
                        )
                    });
                    continue;
                }
                Hold::Other => {
                    let held = s.held_by();
                    self.once(format!("other {name} {}", f.kind.name()), || {
                        format!(
                            "{name}: {} but the node is {held}; someone else's drain is left alone",
                            f.kind.name()
                        )
                    });
                    continue;
                }
            }
            if made >= limit {
                let why = format!(
                    "{made} node(s) drained by the policy in the last {}, its limit for {} nodes ({}): {name} would be the next",
                    humantime::format_duration(self.cfg.window),
                    store.nodes.len(),
                    self.cfg.limit_words(),
                );
                if dry {
                    self.once(
                        format!("would trip {}", self.would.first().map_or(0, |d| d.at_ms)),
                        || format!("dry-run: the breaker would trip here: {why}"),
                    );
                    break;
                }
                out.push(Decision::Trip {
                    node: name.clone(),
                    why,
                });
                break;
            }
            let reason = crate::model::action::owned_reason(&f.drain_reason());
            made += 1;
            if dry {
                let kind = f.kind;
                self.once(format!("would {name} {}", f.since_ms), || {
                    format!("dry-run: would drain {name}: {reason}")
                });
                self.would.push(Drained {
                    node: name.clone(),
                    at_ms: now_ms,
                    kind,
                    reason,
                    seen_out: false,
                });
                continue;
            }
            out.push(Decision::Drain {
                node: name.clone(),
                kind: f.kind,
                reason,
            });
        }
        out
    }
}

/// The alert for a node the policy drained, firing while its incident lasts.
pub fn drain_alert(d: &Drained) -> Alert {
    let mut labels = BTreeMap::new();
    labels.insert("alertname".into(), "FleetopRemediationDrain".into());
    labels.insert("node".into(), d.node.clone());
    labels.insert("kind".into(), d.kind.name().into());
    labels.insert("severity".into(), "warn".into());
    labels.insert("action".into(), "drain".into());
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".into(),
        format!("{} drained by fleetop's remediation policy: {}", d.node, d.reason),
    );
    annotations.insert("description".into(), format!("drained at {}", rfc3339(d.at_ms)));
    Alert {
        labels,
        annotations,
        starts_ms: d.at_ms,
        ends_ms: None,
    }
}

/// The alert while the breaker is tripped.
pub fn breaker_alert(t: &Tripped) -> Alert {
    let mut labels = BTreeMap::new();
    labels.insert("alertname".into(), "FleetopRemediationBreaker".into());
    labels.insert("severity".into(), "crit".into());
    labels.insert("action".into(), "check_node".into());
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".into(),
        format!("fleetop's remediation policy stopped: {}", t.why),
    );
    annotations.insert(
        "description".into(),
        "a fleet-wide event? Nothing more is drained until a person runs `fleetop remediate reset`".into(),
    );
    Alert {
        labels,
        annotations,
        starts_ms: t.at_ms,
        ends_ms: None,
    }
}

/// Fires the alerts the state says should fire, and resolves the others:
/// the same state gives the same alerts. `known` is `None` at the first
/// call of a run: what the state holds then was announced by an earlier run,
/// so a restart notifies nothing new.
pub fn sync_alerts(
    n: &mut crate::ops::notify::Notifier,
    state: &State,
    known: &mut Option<BTreeSet<String>>,
    now_ms: i64,
) {
    let announce = known.is_some();
    let known = known.get_or_insert_with(BTreeSet::new);
    let mut want: BTreeMap<String, Alert> = state
        .holding
        .values()
        .map(|d| (format!("drain {}", d.node), drain_alert(d)))
        .collect();
    if let Some(t) = &state.tripped {
        want.insert("breaker".into(), breaker_alert(t));
    }
    for gone in known.iter().filter(|k| !want.contains_key(*k)) {
        n.set_own(gone, None, now_ms, announce);
    }
    *known = want.keys().cloned().collect();
    for (k, a) in want {
        n.set_own(&k, Some(a), now_ms, announce);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Thresholds;
    use crate::model::sched::{NodeView, SchedNode};
    use crate::model::target::Target;

    fn store(n: usize) -> Store {
        let targets = (0..n)
            .map(|i| Target {
                name: format!("n{i:02}"),
                host: "127.0.0.1".into(),
                port: 1,
            })
            .collect();
        let mut st = Store::new(targets, Thresholds::default());
        for node in &mut st.nodes {
            node.scheduler = Some(NodeView {
                node: SchedNode {
                    state: "idle".into(),
                    ..Default::default()
                },
                jobs: Vec::new(),
            });
        }
        st
    }

    fn cfg(mode: RemediateMode) -> RemediateConfig {
        RemediateConfig {
            mode,
            grace: std::time::Duration::from_secs(60),
            ..Default::default()
        }
    }

    #[test]
    fn the_limit_is_a_share_of_the_fleet_at_least_one_node() {
        let c = RemediateConfig::default();
        assert_eq!((c.limit(40), c.limit(5), c.limit(1000)), (4, 1, 100));
        let c = RemediateConfig {
            max_nodes: Some(3),
            ..Default::default()
        };
        assert_eq!(c.limit(1000), 3);
    }

    /// Node `i` reports XID `code` on GPU 0 at `t` (console time).
    fn xid(st: &mut Store, i: usize, code: u32, t: i64) {
        use crate::model::sample::{GpuReading, NodeSample, Xid};
        use crate::model::update::{Event, Update};
        let on = |st: &mut Store, event| st.apply(Update::Node { node: i, event }, t);
        on(st, Event::Info(Box::default()));
        on(st, Event::CaughtUp);
        let s = NodeSample {
            seq: 1,
            time_ms: t,
            gpus: vec![GpuReading {
                xids: vec![Xid { xid: code, time_ms: t }],
                ..Default::default()
            }],
            ..Default::default()
        };
        on(st, Event::Sample(Box::new(s)));
    }

    #[test]
    fn crit_node_level_flags_drain_after_grace_up_to_the_breaker_then_it_trips() {
        let mut st = store(20);
        let t0 = 1_000_000;
        for i in 0..6 {
            xid(&mut st, i, 79, t0);
        }
        xid(&mut st, 6, 94, t0); // warn: contained ECC error, not the node's
        xid(&mut st, 7, 79, t0);
        st.nodes[7].scheduler.as_mut().expect("sched").node = SchedNode {
            state: "drained".into(),
            reason: Some("maintenance".into()),
            ..Default::default()
        };
        let mut p = Policy::new(RemediateConfig {
            max_percent: 15.0, // 3 of 20
            ..cfg(RemediateMode::Drain)
        });
        let mut state = State::default();
        assert!(
            p.decide(&st, &mut state, t0 + 59_000).is_empty(),
            "within the grace period"
        );
        let d = p.decide(&st, &mut state, t0 + 60_000);
        let drained: Vec<&str> = d
            .iter()
            .filter_map(|d| match d {
                Decision::Drain { node, .. } => Some(node.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(drained, ["n00", "n01", "n02"], "{d:?}");
        let Some(Decision::Trip { node, why }) = d.last() else {
            panic!("the 4th trips the breaker: {d:?}")
        };
        assert_eq!(node, "n03");
        assert!(why.contains("3 node(s) drained by the policy in the last 1h"), "{why}");
        let Decision::Drain { reason, .. } = &d[0] else {
            unreachable!()
        };
        assert!(reason.starts_with("fleetop: xid on gpu0: reboot_node"), "{reason}");
        for d in &d[..3] {
            if let Decision::Drain { node, kind, reason } = d {
                state.drained(node, *kind, reason, t0 + 60_000);
            }
        }
        state.tripped = Some(Tripped {
            at_ms: t0 + 60_000,
            why: why.clone(),
        });
        // Tripped: nothing more, however long it lasts, until reset.
        assert!(p.decide(&st, &mut state, t0 + 10 * 3_600_000).is_empty());
        // A restart with the same state, reset by a person: the drained
        // nodes are not drained again; the window has passed, so the next
        // ones are.
        state.tripped = None;
        let mut again = Policy::new(p.cfg.clone());
        let d = again.decide(&st, &mut state, t0 + 2 * 3_600_000);
        let nodes: Vec<String> = d
            .iter()
            .map(|d| match d {
                Decision::Drain { node, .. } | Decision::Trip { node, .. } => node.clone(),
            })
            .collect();
        assert_eq!(
            nodes,
            ["n03", "n04", "n05"],
            "never n00-n02 again, never n06 (warn) or n07 (someone else's)"
        );
    }

    fn set_state(st: &mut Store, i: usize, state: &str, reason: Option<&str>) {
        st.nodes[i].scheduler.as_mut().expect("sched").node = SchedNode {
            state: state.into(),
            reason: reason.map(String::from),
            ..Default::default()
        };
    }

    fn drains(d: &[Decision]) -> Vec<&str> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Drain { node, .. } => Some(node.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_node_put_back_with_its_fault_still_up_is_a_new_incident() {
        let mut st = store(20);
        let t0 = 1_000_000;
        xid(&mut st, 0, 79, t0);
        let mut p = Policy::new(cfg(RemediateMode::Drain));
        let mut state = State::default();
        let t = t0 + 60_000;
        assert_eq!(drains(&p.decide(&st, &mut state, t)), ["n00"]);
        state.drained("n00", FlagKind::Xid, "fleetop: xid", t);
        // Slurm has not shown the drain yet: not put back, nothing again.
        assert!(p.decide(&st, &mut state, t + 1_000).is_empty());
        set_state(&mut st, 0, "drained", Some("fleetop: xid"));
        assert!(
            p.decide(&st, &mut state, t + 2_000).is_empty(),
            "one incident, one drain"
        );
        assert!(state.holding["n00"].seen_out);
        // Returned with the XID still held: a new incident, drained again.
        set_state(&mut st, 0, "idle", None);
        assert_eq!(drains(&p.decide(&st, &mut state, t + 3_000)), ["n00"]);
    }

    #[test]
    fn the_window_counts_the_audit_logs_drains_whatever_the_state_file_says() {
        let mut st = store(20); // limit: 10% of 20 = 2
        let t0 = 1_000_000;
        xid(&mut st, 0, 79, t0);
        let mut p = Policy::new(cfg(RemediateMode::Drain));
        p.count_drain("n10", t0);
        p.count_drain("n11", t0 + 1_000);
        // An empty state file (deleted, or `{}`): the audit log's two drains
        // fill the window, and the next node trips the breaker.
        let mut state = State::default();
        let d = p.decide(&st, &mut state, t0 + 60_000);
        assert!(
            matches!(d.as_slice(), [Decision::Trip { node, why }]
            if node == "n00" && why.contains("2 node(s)") && why.contains("10% of the fleet, at least 1")),
            "{d:?}"
        );
        // Past the window they no longer count.
        assert_eq!(drains(&p.decide(&st, &mut state, t0 + 2 * 3_600_000)), ["n00"]);
        // The audit log's lines of a policy drain are what is counted.
        use crate::model::timeline::{Event, What};
        let ev = |policy: Option<&str>, ok: bool| Event {
            time_ms: 5,
            node: "n01".into(),
            what: What::Action {
                action: crate::model::action::NodeAction::Drain,
                ok,
                reason: None,
                message: String::new(),
                policy: policy.map(String::from),
            },
            by: "root".into(),
        };
        let events = [
            ev(Some("remediate"), true),
            ev(None, true),
            ev(Some("remediate"), false),
        ];
        assert_eq!(drains_in(&events), [("n01".to_string(), 5)]);
    }

    #[test]
    fn dry_run_decides_nothing_to_run() {
        let mut st = store(4);
        xid(&mut st, 0, 79, 0);
        let mut p = Policy::new(cfg(RemediateMode::DryRun));
        let mut state = State::default();
        assert!(p.decide(&st, &mut state, 600_000).is_empty());
        assert_eq!(p.would.len(), 1, "it would have drained n00");
        assert_eq!(state, State::default(), "and changed nothing");
    }
}
