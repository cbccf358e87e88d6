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
//! counted from the cluster and the audit log: each policy drain carries
//! the policy's mark in Slurm's reason (`remediation::POLICY_MARK`), with
//! the time Slurm stored it, and the window holds the union of the marks
//! any read of Slurm showed and the audit log's policy drains
//! (`remediation::window_drains`). No state file, moved audit log, restart
//! or second watch makes room.
//!
//! Two watches in drain mode: only the one holding the lease acts
//! (`LeaseKeeper`). The lease is a held Slurm job that never runs, named
//! `fleetop-remediate-lease`, whose comment names its holder and until
//! when; the lowest live job id holds it. A dry-run needs no lease.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::config::{RemediateConfig, RemediateMode};
use crate::model::action::{NodeAction, Plan, Scheduler};
use crate::model::flag::{Flag, FlagKind, Severity};
pub use crate::model::remediation::{Drained, State, Tripped};
use crate::model::remediation::{WindowDrain, window_drains};
use crate::model::sched::{Held, Hold, SchedNode};
use crate::model::time::rfc3339;
use crate::ops::notify::Alert;
use crate::ops::{audit, state_file};
use crate::store::{Link, NodeState, Store};

pub mod kube;
mod kube_lease;
mod lease;
pub use kube_lease::{KubeLeaseKeeper, LEASE_NAME, kube_lease_status, kube_lease_words};
pub use lease::{LEASE_CHECK_MS, LEASE_JOB, LEASE_TTL_MS, LeaseKeeper, LeaseNow, host_name, lease_words, list_leases};

/// A line the policy logs once, until what it would say changes: who holds
/// a lease, a read that keeps failing.
#[derive(Debug, Clone, Default)]
pub struct SaidOnce(String);

/// How loud a `SaidOnce` line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loud {
    Info,
    Warn,
    Error,
}

impl SaidOnce {
    /// Logs `what` unless the last line said was `key`.
    pub fn say(&mut self, key: String, what: impl FnOnce() -> String, loud: Loud) {
        if self.0 == key {
            return;
        }
        self.0 = key;
        match loud {
            Loud::Info => tracing::info!("remediate: {}", what()),
            Loud::Warn => tracing::warn!("remediate: {}", what()),
            Loud::Error => tracing::error!("remediate: {}", what()),
        }
    }

    /// Forgets the last line: the next one is said whatever it is.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

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

/// The policy's drains a read of the scheduler shows (node, when Slurm
/// stored the marked reason).
pub fn marked_drains<'a>(nodes: impl IntoIterator<Item = (&'a str, &'a SchedNode)>, now_ms: i64) -> Vec<(String, i64)> {
    nodes
        .into_iter()
        .filter_map(|(name, n)| {
            crate::model::remediation::marked_drain(name, n.reason.as_deref(), n.reason_time.as_deref(), now_ms)
        })
        .collect()
}

/// The marked drains in the store's scheduler view.
pub fn marked_in_store(store: &Store, now_ms: i64) -> Vec<(String, i64)> {
    marked_drains(
        store
            .nodes
            .iter()
            .filter_map(|n| n.scheduler.as_ref().map(|v| (n.target.name.as_str(), &v.node))),
        now_ms,
    )
}

/// The plan of one policy drain: `reason` (already marked) given to
/// Slurm as it is, audited as the policy's.
pub fn drain_plan(node: &str, reason: &str) -> Result<Plan, String> {
    crate::model::action::check_reason(reason)?;
    let argv = crate::model::action::command(NodeAction::Drain, node, Some(reason));
    let mut plan = Plan::new(
        NodeAction::Drain,
        vec![node.to_string()],
        Some(reason.to_string()),
        vec![argv],
    );
    plan.policy = Some("remediate".into());
    Ok(plan)
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

/// A flag of the kind the policy acts on: crit, an action that takes the
/// node.
fn policy_kind(f: &Flag) -> bool {
    f.severity == Severity::Crit && f.action.takes_node()
}

/// A flag's key in `Policy::seen_up`.
fn flag_key(node: &str, f: &Flag) -> String {
    format!("{node} {} {}", f.kind.name(), f.subject.key())
}

/// The grace of a flag: up for at least `grace` since it began or since
/// this watch first saw it up (`seen`), whichever is later (any age when
/// `grace` is `None`). A flag never seen up here has not begun its grace.
fn qualifies(node: &str, f: &Flag, now_ms: i64, grace: Option<(i64, &BTreeMap<String, i64>)>) -> bool {
    policy_kind(f)
        && grace.is_none_or(|(g, seen)| {
            seen.get(&flag_key(node, f))
                .is_some_and(|first| now_ms - f.since_ms.max(*first) >= g)
        })
}

/// The most urgent qualifying flag of a node.
fn worst<'a>(n: &'a NodeState, now_ms: i64, grace: Option<(i64, &BTreeMap<String, i64>)>) -> Option<&'a Flag> {
    n.detector
        .active()
        .filter(|f| qualifies(&n.target.name, f, now_ms, grace))
        .max_by_key(|f| f.action.urgency())
}

/// The policy's logic, without I/O: what to do now, given what it did.
pub struct Policy {
    pub cfg: RemediateConfig,
    /// The scheduler it acts on: each node's hold is read from its view
    /// (Slurm's `n.scheduler`, Kubernetes' `store.kube.of(i)`).
    pub on: Scheduler,
    /// Notes already logged (a node left alone, a dry-run's would-drain),
    /// so each is said once.
    said: BTreeSet<String>,
    /// Dry-run only: the drains it would have made in the window.
    would: Vec<Drained>,
    /// The policy's drains the audit log holds (node, when), read at
    /// start, and each drain made since.
    audited: Vec<(String, i64)>,
    /// The policy's drains any read of the scheduler showed (its mark in a
    /// reason, with the time the scheduler stored), kept for the window
    /// even once the node is back.
    sched: Vec<(String, i64)>,
    /// When this watch first saw each qualifying flag up (by `flag_key`),
    /// for the grace: a flag from history is not old to this watch.
    seen_up: BTreeMap<String, i64>,
}

impl Policy {
    pub fn new(cfg: RemediateConfig) -> Policy {
        Policy::on(cfg, Scheduler::Slurm)
    }

    /// A policy that acts on `on` (Slurm or Kubernetes).
    pub fn on(cfg: RemediateConfig, on: Scheduler) -> Policy {
        Policy {
            cfg,
            on,
            said: BTreeSet::new(),
            would: Vec::new(),
            audited: Vec::new(),
            sched: Vec::new(),
            seen_up: BTreeMap::new(),
        }
    }

    /// The policy's drains the audit log holds (`audited_drains`), and each
    /// one made since (`made`).
    pub fn count_drain(&mut self, node: &str, at_ms: i64) {
        self.audited.push((node.to_string(), at_ms));
    }

    /// The policy's drains a read of the scheduler shows (`marked_drains`).
    pub fn see_scheduler(&mut self, drains: impl IntoIterator<Item = (String, i64)>) {
        for d in drains {
            if !self.sched.contains(&d) {
                self.sched.push(d);
            }
        }
    }

    /// The window's drains (the caller drops those past it with `decide`):
    /// the union of the scheduler's marks and the audit log's lines.
    pub fn window(&self) -> Vec<WindowDrain> {
        window_drains(&self.audited, &self.sched)
    }

    /// The drains counted against the window now: the most of what the
    /// state file says and what the scheduler and the audit log say.
    pub fn in_window(&self, state: &State) -> usize {
        state.recent.len().max(self.window().len())
    }

    /// Notes when each qualifying flag was first seen up by this watch,
    /// and forgets the flags that are down.
    fn see_flags(&mut self, store: &Store, now_ms: i64) {
        let mut up = BTreeSet::new();
        for n in &store.nodes {
            // A node whose history is still arriving shows the past.
            if matches!(n.link, Link::Connected { .. }) && !n.caught_up {
                continue;
            }
            for f in n.detector.active().filter(|f| policy_kind(f)) {
                let k = flag_key(&n.target.name, f);
                self.seen_up.entry(k.clone()).or_insert(now_ms);
                up.insert(k);
            }
        }
        self.seen_up.retain(|k, _| up.contains(k));
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
        self.sched.retain(|(_, at)| now_ms - at < window);
        self.see_flags(store, now_ms);
        // An incident is over once its node is back in service: with no
        // qualifying flag, the next fault is a new incident; with its fault
        // still up (a return that let it through, a resume outside
        // fleetop), that is a new incident now.
        let (said, on) = (&mut self.said, self.on);
        state.holding.retain(|node, d| {
            let Some(i) = store.nodes.iter().position(|n| &n.target.name == node) else {
                return true;
            };
            let n = &store.nodes[i];
            let Some(s) = held(store, on, i) else {
                return true;
            };
            if s.hold() != Hold::InService {
                d.seen_out = true;
                return true;
            }
            if !d.seen_out {
                // The scheduler has not shown the drain yet.
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
        let (title, did, verb) = (self.on.title(), self.did(), self.verb());
        for (i, n) in store.nodes.iter().enumerate() {
            let name = &n.target.name;
            // A node whose history is still arriving shows the past.
            if matches!(n.link, Link::Connected { .. }) && !n.caught_up {
                continue;
            }
            let Some(f) = worst(n, now_ms, Some((grace, &self.seen_up))) else {
                continue;
            };
            if let Some(d) = state.holding.get(name) {
                let (at, reason) = (rfc3339(d.at_ms), d.reason.clone());
                self.once(format!("holding {name} {}", d.at_ms), || {
                    format!("{name}: {did} by the policy at {at} ({reason}); the incident is open: not {did} twice")
                });
                continue;
            }
            if dry && self.would.iter().any(|d| &d.node == name) {
                continue;
            }
            let Some(s) = held(store, self.on, i) else {
                self.once(format!("nosched {name}"), || {
                    format!(
                        "{name}: {} but {title} does not list the node; left alone",
                        f.kind.name()
                    )
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
                            "{name}: {} but the node is {held} in {title}; someone else's hold is left alone",
                            f.kind.name()
                        )
                    });
                    continue;
                }
            }
            if made >= limit {
                let why = format!(
                    "{made} node(s) {did} by the policy in the last {}, its limit for {} nodes ({}): {name} would be the next",
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
            let reason = crate::model::remediation::policy_reason(&f.drain_reason());
            made += 1;
            if dry {
                let kind = f.kind;
                self.once(format!("would {name} {}", f.since_ms), || {
                    format!("dry-run: would {verb} {name}: {reason}")
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

/// Node `i`'s hold as the scheduler `on` shows it.
fn held(store: &Store, on: Scheduler, i: usize) -> Option<&dyn Held> {
    match on {
        Scheduler::Kubernetes => store.kube.of(i).map(|k| k as &dyn Held),
        _ => store.nodes[i].scheduler.as_ref().map(|v| &v.node as &dyn Held),
    }
}

impl Policy {
    /// "drain" on Slurm, "quarantine" on Kubernetes.
    pub fn verb(&self) -> &'static str {
        match self.on {
            Scheduler::Kubernetes => "quarantine",
            _ => "drain",
        }
    }

    /// "drained", "quarantined".
    pub fn did(&self) -> &'static str {
        match self.on {
            Scheduler::Kubernetes => "quarantined",
            _ => "drained",
        }
    }
}

/// The start of one look of a watch's policy: its state read again (a
/// person may have reset it), with this policy's mode and limit for a
/// fleet of `fleet` nodes; what it was before, to save only a change.
/// `None` (logged) when the state cannot be read: the policy does not act.
pub fn begin_look(p: &Policy, state: &mut State, fleet: usize) -> Option<State> {
    match load(&path()) {
        Ok(s) => *state = s,
        Err(e) => {
            tracing::error!("remediate: {e}; the policy does not act until it can read its state");
            return None;
        }
    }
    let before = state.clone();
    state.mode = Some(p.cfg.mode);
    state.limit = Some(p.cfg.limit(fleet));
    Some(before)
}

/// A trip of the breaker at `now`, logged and kept in the state.
pub fn trip(state: &mut State, node: &str, why: String, now: i64) {
    tracing::error!(
        "remediate: BREAKER TRIPPED at {}: {why}; {node} and every later node left as they are until `fleetop remediate reset`",
        rfc3339(now)
    );
    state.tripped = Some(Tripped { at_ms: now, why });
}

/// The end of one look: the state saved where it changed, the alerts it
/// says should fire sent.
pub fn end_look(
    state: &State,
    before: &State,
    notifier: &mut crate::ops::notify::Notifier,
    own_alerts: &mut Option<BTreeSet<String>>,
    now: i64,
) {
    if state != before
        && let Err(e) = save(&path(), state)
    {
        tracing::error!("remediate: {e}");
    }
    sync_alerts(notifier, state, own_alerts, now);
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
mod tests;
