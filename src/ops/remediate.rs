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
use crate::ingest::slurm::{SchedError, Slurm};
use crate::model::action::{NodeAction, Plan};
use crate::model::flag::{Flag, FlagKind, Severity};
pub use crate::model::remediation::{Drained, State, Tripped};
use crate::model::remediation::{Holder, Lease, WindowDrain, lease_holder, lease_text, parse_lease, window_drains};
use crate::model::sched::{Hold, SchedNode};
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
        Policy {
            cfg,
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
            let Some(f) = worst(n, now_ms, Some((grace, &self.seen_up))) else {
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
            let reason = crate::model::remediation::policy_reason(&f.drain_reason());
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

/// The lease's Slurm job name.
pub const LEASE_JOB: &str = "fleetop-remediate-lease";
/// How long a lease holds without renewal: a watch that stopped renewing
/// (killed, hung, cut off) is taken over this long after its last renewal.
pub const LEASE_TTL_MS: i64 = 60_000;
/// A lease is renewed once less than this is left.
const LEASE_RENEW_MS: i64 = 40_000;
/// Its holder acts only while more than this is left: a clock a little
/// off, or a renewal that failed, never gives two watches the lease.
const LEASE_MARGIN_MS: i64 = 15_000;
/// How often a watch looks at the lease between drains.
pub const LEASE_CHECK_MS: i64 = 5_000;

/// Where a watch stands with the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseNow {
    /// This watch holds it: it acts.
    Mine,
    /// Another watch holds it: this one waits.
    Held(Lease),
    /// Slurm could not be asked, or the lease could not be taken: nobody
    /// here acts until it can.
    Unknown(String),
}

/// The lease of one watch: takes it when free, renews it, gives it back.
/// Its methods run Slurm's clients (each with the reader's timeout): call
/// them off the async runtime.
#[derive(Debug, Clone)]
pub struct LeaseKeeper {
    pub me: Holder,
    /// The job of this watch's lease, while it has one.
    job: Option<u64>,
    /// Until when the lease holds, as last written.
    until_ms: i64,
    /// Console time of the last look.
    pub checked_ms: Option<i64>,
    /// What was last said about the lease, so each change is said once.
    said: String,
}

impl Default for LeaseKeeper {
    fn default() -> Self {
        LeaseKeeper::new()
    }
}

/// This machine's host name.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// The field and record separators of the lease listing (as the node
/// listing's: never in a job id or user; the comment comes last).
const SEP: char = '\u{1f}';
const END: char = '\u{1e}';

/// The leases Slurm lists: its held jobs named `LEASE_JOB`, each as its
/// comment says, the holder's user being the job's owner as Slurm knows
/// it. Jobs with another comment are not leases.
pub fn list_leases(slurm: &Slurm) -> Result<Vec<Lease>, SchedError> {
    let fmt = format!("%i{SEP}%u{SEP}%k{END}");
    let args: Vec<String> = ["-h", "--name", LEASE_JOB, "-t", "PENDING", "-o", &fmt]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = slurm.run("squeue", &args)?;
    Ok(parse_lease_list(&out))
}

fn parse_lease_list(out: &str) -> Vec<Lease> {
    let mut leases: Vec<Lease> = out
        .split(END)
        .filter_map(|r| {
            let mut f = r.trim_start_matches('\n').splitn(3, SEP);
            let id = f.next()?.trim().parse::<u64>().ok()?;
            let user = f.next()?.trim().to_string();
            let mut l = parse_lease(id, f.next()?.trim())?;
            if !user.is_empty() {
                l.holder.user = fleetop_proto::input::printable(&user, 64);
            }
            l.holder.host = fleetop_proto::input::printable(&l.holder.host, 128);
            Some(l)
        })
        .collect();
    leases.sort_by_key(|l| l.id);
    leases
}

/// "alice@head1 pid 4242 (Slurm job 57, until 2026-...Z)".
pub fn lease_words(l: &Lease) -> String {
    format!(
        "{} (Slurm job {} `{LEASE_JOB}`, until {})",
        l.holder.words(),
        l.id,
        rfc3339(l.until_ms)
    )
}

impl LeaseKeeper {
    pub fn new() -> LeaseKeeper {
        let a = audit::actor();
        LeaseKeeper {
            me: Holder {
                user: a.name.unwrap_or_else(|| a.uid.to_string()),
                host: host_name(),
                pid: std::process::id(),
            },
            job: None,
            until_ms: 0,
            checked_ms: None,
            said: String::new(),
        }
    }

    /// Whether this watch may act now: it holds the lease, with time left.
    pub fn may_act(&self, now_ms: i64) -> bool {
        self.job.is_some() && now_ms < self.until_ms - LEASE_MARGIN_MS
    }

    /// A lease of this host whose process is gone: its holder stopped
    /// without giving it back (killed); it need not run out.
    fn dead(&self, l: &Lease) -> bool {
        Some(l.id) != self.job
            && l.holder.host == self.me.host
            && l.holder.pid != self.me.pid
            && !Path::new(&format!("/proc/{}", l.holder.pid)).exists()
    }

    fn say(&mut self, key: String, what: impl FnOnce() -> String, warn: bool) {
        if self.said != key {
            self.said = key;
            if warn {
                tracing::warn!("remediate: {}", what());
            } else {
                tracing::info!("remediate: {}", what());
            }
        }
    }

    fn cancel(&self, slurm: &Slurm, id: u64) -> Result<String, SchedError> {
        slurm.run("scancel", &[id.to_string()])
    }

    fn submit(&mut self, slurm: &Slurm, now_ms: i64) -> Result<u64, SchedError> {
        let until = now_ms + LEASE_TTL_MS;
        let args = [
            "--parsable".to_string(),
            "--hold".into(),
            format!("--job-name={LEASE_JOB}"),
            format!("--comment={}", lease_text(&self.me, until)),
            "--output=/dev/null".into(),
            "--error=/dev/null".into(),
            "--chdir=/".into(),
            "--time=1".into(),
            "--nodes=1".into(),
            "--wrap=true".into(),
        ];
        let out = slurm.run("sbatch", &args)?;
        let id = out
            .trim()
            .split(';')
            .next()
            .and_then(|i| i.trim().parse::<u64>().ok())
            .ok_or_else(|| SchedError::Parse("sbatch".into(), format!("no job id in {:?}", out.trim())))?;
        self.job = Some(id);
        self.until_ms = until;
        Ok(id)
    }

    fn renew(&mut self, slurm: &Slurm, id: u64, now_ms: i64) {
        let until = now_ms + LEASE_TTL_MS;
        let args = [
            "update".to_string(),
            format!("JobId={id}"),
            format!("Comment={}", lease_text(&self.me, until)),
        ];
        match slurm.run("scontrol", &args) {
            Ok(_) => self.until_ms = until,
            Err(e) => tracing::error!(
                "remediate: the lease (Slurm job {id}) not renewed: {e}; it holds until {}",
                rfc3339(self.until_ms)
            ),
        }
    }

    /// Looks at the lease: keeps it (renewed when due), takes it when it
    /// is free (the lowest live job id wins a race; a lease run out, or
    /// of a process gone from this host, is cancelled and taken over),
    /// or names who holds it. Says each change once.
    pub fn check(&mut self, slurm: &Slurm, now_ms: i64) -> LeaseNow {
        self.checked_ms = Some(now_ms);
        let leases = match list_leases(slurm) {
            Ok(l) => l,
            Err(e) => return self.unknown(format!("the lease cannot be read: {e}")),
        };
        if let Some(id) = self.job
            && !leases.iter().any(|l| l.id == id)
        {
            self.job = None;
            self.say(
                format!("lost {id}"),
                || format!("the lease (Slurm job {id}) is gone (cancelled in Slurm): this watch stops acting"),
                true,
            );
        }
        let holder = lease_holder(&leases, now_ms, |l| self.dead(l)).cloned();
        match holder {
            Some(l) if Some(l.id) == self.job => {
                if self.until_ms - now_ms < LEASE_RENEW_MS {
                    self.renew(slurm, l.id, now_ms);
                }
                self.mine(l.id)
            }
            Some(l) => {
                if let Some(mine) = self.job.take() {
                    let _ = self.cancel(slurm, mine);
                }
                self.held(l)
            }
            None => {
                // Free: whatever is listed ran out, or its process is gone.
                for l in &leases {
                    if Some(l.id) != self.job {
                        let why = if l.until_ms <= now_ms {
                            format!("it ran out at {}", rfc3339(l.until_ms))
                        } else {
                            "its process is gone from this host".into()
                        };
                        tracing::warn!("remediate: taking over the lease of {}: {why}", lease_words(l));
                    }
                    let _ = self.cancel(slurm, l.id);
                }
                self.job = None;
                if let Err(e) = self.submit(slurm, now_ms) {
                    return self.unknown(format!("the lease cannot be taken (sbatch --hold): {e}"));
                }
                // Another watch may have taken it at the same time: the
                // lowest job id wins.
                let again = match list_leases(slurm) {
                    Ok(l) => l,
                    Err(e) => return self.unknown(format!("the lease cannot be read: {e}")),
                };
                match lease_holder(&again, now_ms, |l| self.dead(l)).cloned() {
                    Some(l) if Some(l.id) == self.job => self.mine(l.id),
                    Some(l) => {
                        if let Some(mine) = self.job.take() {
                            let _ = self.cancel(slurm, mine);
                        }
                        self.held(l)
                    }
                    None => self.unknown("the lease just taken is not listed".into()),
                }
            }
        }
    }

    fn mine(&mut self, id: u64) -> LeaseNow {
        let me = self.me.words();
        self.say(
            format!("mine {id}"),
            || format!("this watch ({me}) holds the lease (Slurm job {id} `{LEASE_JOB}`): it acts"),
            false,
        );
        LeaseNow::Mine
    }

    fn held(&mut self, l: Lease) -> LeaseNow {
        self.say(
            format!("held {} {}", l.id, l.holder.words()),
            || {
                format!(
                    "the policy acts in another watch: {}; this one drains nothing, and takes over if that one stops",
                    lease_words(&l)
                )
            },
            true,
        );
        LeaseNow::Held(l)
    }

    fn unknown(&mut self, why: String) -> LeaseNow {
        let w = why.clone();
        self.say(format!("unknown {why}"), || format!("{w}; nothing is drained"), true);
        LeaseNow::Unknown(why)
    }

    /// Gives the lease back (a clean stop).
    pub fn release(&mut self, slurm: &Slurm) {
        if let Some(id) = self.job.take() {
            match self.cancel(slurm, id) {
                Ok(_) => tracing::info!("remediate: the lease (Slurm job {id}) given back"),
                Err(e) => tracing::error!(
                    "remediate: the lease (Slurm job {id}) not given back: {e}; it runs out at {}",
                    rfc3339(self.until_ms)
                ),
            }
        }
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
    use crate::model::remediation::Seen;
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
        assert!(p.decide(&st, &mut state, t0).is_empty(), "the flags are seen up");
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
        assert!(
            reason.starts_with("fleetop-policy: xid on gpu0: reboot_node"),
            "{reason}"
        );
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
        assert!(
            again.decide(&st, &mut state, t0 + 2 * 3_600_000).is_empty(),
            "a restarted watch gives each flag its grace"
        );
        let d = again.decide(&st, &mut state, t0 + 2 * 3_600_000 + 60_000);
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
        assert!(p.decide(&st, &mut state, t0).is_empty());
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
        assert!(p.decide(&st, &mut state, t0).is_empty());
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
        assert!(p.decide(&st, &mut state, 0).is_empty());
        assert!(p.decide(&st, &mut state, 600_000).is_empty());
        assert_eq!(p.would.len(), 1, "it would have drained n00");
        assert_eq!(state, State::default(), "and changed nothing");
    }

    #[test]
    fn grace_counts_from_when_this_watch_first_saw_the_flag_up() {
        // A restarted watch: the flag's since is an hour old (history).
        let mut st = store(20);
        let t0 = 1_000_000;
        xid(&mut st, 0, 79, t0);
        let mut p = Policy::new(RemediateConfig {
            max_percent: 1.0, // 1 node
            ..cfg(RemediateMode::Drain)
        });
        p.count_drain("n10", t0 + 3_000_000); // the window is full: the next one trips
        let mut state = State::default();
        let now = t0 + 3_600_000 - 1;
        assert!(
            p.decide(&st, &mut state, now).is_empty(),
            "first seen now: no drain, no trip in the same millisecond"
        );
        assert!(p.decide(&st, &mut state, now + 59_999).is_empty(), "within its grace");
        let d = p.decide(&st, &mut state, now + 60_000);
        assert!(
            matches!(d.as_slice(), [Decision::Trip { node, .. }] if node == "n00"),
            "{d:?}"
        );
        // A flag that goes down and up again begins its grace again.
        let mut p = Policy::new(cfg(RemediateMode::Drain));
        assert!(p.decide(&st, &mut state, t0).is_empty());
        let mut quiet = store(20);
        xid(&mut quiet, 1, 79, t0); // n00 clean now
        assert!(p.decide(&quiet, &mut state, t0 + 30_000).is_empty());
        assert!(p.decide(&st, &mut state, t0 + 61_000).is_empty(), "seen again at +61 s");
        assert_eq!(drains(&p.decide(&st, &mut state, t0 + 121_000)), ["n00"]);
    }

    #[test]
    fn the_window_counts_the_marks_slurm_shows_with_no_audit_log_or_state() {
        let mut st = store(20); // limit 2
        let t0 = 10_000_000;
        xid(&mut st, 0, 79, t0);
        // Another watch drained two nodes; this one has no audit line of
        // them. One is still drained, one was returned since (seen once).
        set_state(&mut st, 5, "drained", Some("fleetop-policy: xid on gpu0: reboot_node"));
        st.nodes[5].scheduler.as_mut().expect("sched").node.reason_time = Some(rfc3339(t0 - 1_000));
        let mut p = Policy::new(cfg(RemediateMode::Drain));
        p.see_scheduler(marked_in_store(&st, t0));
        p.see_scheduler([("n06".to_string(), t0 - 2_000)]);
        p.see_scheduler(marked_in_store(&st, t0)); // seen again: one drain
        let mut state = State::default();
        assert!(p.decide(&st, &mut state, t0).is_empty());
        let d = p.decide(&st, &mut state, t0 + 60_000);
        assert!(
            matches!(d.as_slice(), [Decision::Trip { why, .. }] if why.contains("2 node(s)")),
            "{d:?}"
        );
        let w = p.window();
        assert_eq!(
            w.iter().map(|d| (d.node.as_str(), d.seen)).collect::<Vec<_>>(),
            [("n06", Seen::Scheduler), ("n05", Seen::Scheduler)]
        );
        // A person's drain through fleetop is not the policy's.
        set_state(&mut st, 5, "drained", Some("fleetop: fleetop-policy: x"));
        assert!(marked_in_store(&st, t0).is_empty());
    }

    #[test]
    fn the_policys_drain_carries_the_mark_to_slurm_as_one_argument() {
        let reason = crate::model::remediation::policy_reason("xid on gpu0: reboot_node (XID 79)");
        let plan = drain_plan("gpu07", &reason).expect("plan");
        assert_eq!(plan.policy.as_deref(), Some("remediate"));
        assert_eq!(
            plan.commands,
            [vec![
                "scontrol".to_string(),
                "update".into(),
                "NodeName=gpu07".into(),
                "State=DRAIN".into(),
                "Reason=fleetop-policy: xid on gpu0: reboot_node (XID 79)".into()
            ]]
        );
        assert!(drain_plan("gpu07", "fleetop-policy: \u{1b}[2J").is_err());
    }

    #[test]
    fn leases_listed_by_squeue_are_read_with_slurms_user() {
        let out = "57\u{1f}alice\u{1f}holder=mallory@h1 pid=42 until=2026-01-01T00:01:00Z\u{1e}\n\
                   12\u{1f}bob\u{1f}holder=bob@h2 pid=7 until=2026-01-01T00:00:30Z\u{1e}\n\
                   9\u{1f}eve\u{1f}just a job\u{1e}\n";
        let l = parse_lease_list(out);
        assert_eq!(
            l.iter().map(|l| l.id).collect::<Vec<_>>(),
            [12, 57],
            "sorted, not a lease left out"
        );
        assert_eq!(
            l[1].holder.words(),
            "alice@h1 pid 42",
            "the job's owner, not what its comment says"
        );
        let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("t").timestamp_millis();
        let now = t("2026-01-01T00:00:00Z");
        assert_eq!(
            lease_holder(&l, now, |_| false).map(|l| l.id),
            Some(12),
            "the lowest live id"
        );
        assert_eq!(
            lease_holder(&l, now + 40_000, |_| false).map(|l| l.id),
            Some(57),
            "12 ran out"
        );
        assert_eq!(
            lease_holder(&l, now, |l| l.id == 12).map(|l| l.id),
            Some(57),
            "12's process is gone"
        );
        assert_eq!(lease_holder(&l, now + 60_000, |_| false), None, "free");
    }
}
