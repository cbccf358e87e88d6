//! The remediation policy's record of what it did (kept in the state
//! directory by `ops::remediate`, shown in the console's header).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::flag::FlagKind;

/// What the remediation policy does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Says what it would drain (in its log), drains nothing.
    DryRun,
    /// Drains the nodes, within the breaker's bounds.
    Drain,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::DryRun => "dry-run",
            Mode::Drain => "drain",
        }
    }
}

/// What the policy has done, as kept on disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct State {
    /// Nodes the policy drained whose incident is not over (by node).
    pub holding: BTreeMap<String, Drained>,
    /// The policy's drains within the breaker's window, oldest first.
    pub recent: Vec<Drained>,
    /// Set when the breaker tripped: the policy acts no more until reset.
    pub tripped: Option<Tripped>,
    /// The running policy's mode and limit, for the console's header.
    pub mode: Option<Mode>,
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drained {
    pub node: String,
    pub at_ms: i64,
    pub kind: FlagKind,
    pub reason: String,
    /// Slurm has shown the node out of service since the drain: only then
    /// does a node back in service mean someone put it back (a scheduler
    /// read from before the drain says nothing).
    #[serde(default)]
    pub seen_out: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tripped {
    pub at_ms: i64,
    pub why: String,
}

impl State {
    /// Records a drain the policy made.
    pub fn drained(&mut self, node: &str, kind: FlagKind, reason: &str, now_ms: i64) {
        let d = Drained {
            node: node.to_string(),
            at_ms: now_ms,
            kind,
            reason: reason.to_string(),
            seen_out: false,
        };
        self.holding.insert(node.to_string(), d.clone());
        self.recent.push(d);
    }
}

// The policy's drains as facts in the scheduler. Everything here is plain
// text and times: Slurm keeps the marked reason and its time on the node;
// Kubernetes will keep the same reason in an annotation beside its taint.

/// What starts the reason of every drain the remediation policy makes, in
/// the scheduler: `fleetop-policy: ` then the catalog's words. Any console
/// reads it there, with the time the scheduler stored with the reason. A
/// person's drain through fleetop says `fleetop: ` (`action::REASON_PREFIX`)
/// and can never carry this mark: their words go after `fleetop: `.
pub const POLICY_MARK: &str = "fleetop-policy:";

/// The reason the policy gives the scheduler for a drain: the mark, then
/// the catalog's words.
pub fn policy_reason(words: &str) -> String {
    format!("{POLICY_MARK} {}", words.trim())
}

/// The catalog's words of a reason the policy set; `None` for any other
/// reason (a person's, fleetop's or not).
pub fn policy_words(reason: &str) -> Option<&str> {
    reason.strip_prefix(POLICY_MARK).map(str::trim_start)
}

/// A policy drain a scheduler shows on `node`: when the scheduler stored its
/// reason (`time`, RFC 3339), as ms. `None` when the reason is not the
/// policy's. A marked reason whose time is missing or unreadable counts as
/// made `now`: a drain of unknown age is never left out of a window.
pub fn marked_drain(node: &str, reason: Option<&str>, time: Option<&str>, now_ms: i64) -> Option<(String, i64)> {
    policy_words(reason?)?;
    let at = time
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t.trim()).ok())
        .map_or(now_ms, |t| t.timestamp_millis());
    Some((node.to_string(), at))
}

/// Where the evidence of a drain in the breaker's window was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// The scheduler shows the mark (the node is still out of service).
    Scheduler,
    /// Only this console's audit log has it (the node is back, or drained
    /// by this console a moment ago and not yet shown).
    AuditLog,
    /// Both.
    Both,
}

impl Seen {
    /// `evidence`: what the scheduler shows ("Slurm's reason").
    pub fn words(self, evidence: &str) -> String {
        match self {
            Seen::Scheduler => evidence.to_string(),
            Seen::AuditLog => "the audit log".into(),
            Seen::Both => format!("{evidence} and the audit log"),
        }
    }
}

/// One drain the breaker's window counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowDrain {
    pub node: String,
    pub at_ms: i64,
    pub seen: Seen,
}

/// The scheduler's time of a reason and the console's time of its audit
/// line differ by the drain's run and the two clocks: a mark and an audit
/// line of the same node this close are one drain.
pub const SAME_DRAIN_MS: i64 = 120_000;

/// The drains of a window: the union, by node and time, of the audit log's
/// (node, ms) and the scheduler's marked drains. A mark and an audit line
/// of the same node within `SAME_DRAIN_MS` are one drain (each audit line
/// matches one mark at most, the nearest); everything else counts on its
/// own. Oldest first.
pub fn window_drains(audit: &[(String, i64)], sched: &[(String, i64)]) -> Vec<WindowDrain> {
    let mut out: Vec<WindowDrain> = audit
        .iter()
        .map(|(node, at)| WindowDrain {
            node: node.clone(),
            at_ms: *at,
            seen: Seen::AuditLog,
        })
        .collect();
    let mut sched: Vec<&(String, i64)> = sched.iter().collect();
    sched.sort_by_key(|(n, at)| (*at, n.clone()));
    sched.dedup();
    for (node, at) in sched {
        let nearest = out
            .iter_mut()
            .filter(|d| d.seen == Seen::AuditLog && &d.node == node && (d.at_ms - at).abs() <= SAME_DRAIN_MS)
            .min_by_key(|d| (d.at_ms - at).abs());
        match nearest {
            Some(d) => {
                d.seen = Seen::Both;
                // The later of the two: the drain stays in the window as
                // long as either says it should.
                d.at_ms = d.at_ms.max(*at);
            }
            None => out.push(WindowDrain {
                node: node.clone(),
                at_ms: *at,
                seen: Seen::Scheduler,
            }),
        }
    }
    out.sort_by(|a, b| (a.at_ms, &a.node).cmp(&(b.at_ms, &b.node)));
    out
}

// The lease: which of several watches acts. It lives in the cluster (in
// Slurm, a held job that never runs), never in a local file.

/// Who holds a lease: the user, the host and the process of the watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub user: String,
    pub host: String,
    pub pid: u32,
}

impl Holder {
    /// "alice@head1 pid 4242".
    pub fn words(&self) -> String {
        format!("{}@{} pid {}", self.user, self.host, self.pid)
    }

    /// Reads `words` back (a Kubernetes Lease's `holderIdentity`); `None`
    /// for any other text.
    pub fn parse(words: &str) -> Option<Holder> {
        let (who, pid) = words.trim().rsplit_once(" pid ")?;
        let (user, host) = who.rsplit_once('@')?;
        Some(Holder {
            user: user.to_string(),
            host: host.to_string(),
            pid: pid.trim().parse().ok()?,
        })
    }
}

/// A policy quarantine an Event shows: its message (`model::kube::event_body`:
/// "... by WHO: REASON") carries the policy's reason, starting with the
/// mark; a person's reason ("fleetop: fleetop-policy: ...") never counts.
pub fn marked_message(message: &str) -> bool {
    message
        .split_once(" by ")
        .and_then(|(_, rest)| rest.split_once(": "))
        .is_some_and(|(_, reason)| reason.starts_with(POLICY_MARK))
}

/// A lease as the cluster shows it: its id there (in Slurm, the job id:
/// the lowest live one wins), its holder and until when it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    pub holder: Holder,
    pub until_ms: i64,
}

/// The lease's text (a Slurm job's comment): `holder=USER@HOST pid=N
/// until=RFC3339`.
pub fn lease_text(h: &Holder, until_ms: i64) -> String {
    format!(
        "holder={}@{} pid={} until={}",
        h.user,
        h.host,
        h.pid,
        crate::model::time::rfc3339(until_ms)
    )
}

/// Reads `lease_text`; `None` for any other text (not a lease).
pub fn parse_lease(id: u64, text: &str) -> Option<Lease> {
    let mut holder = None;
    let mut pid = None;
    let mut until = None;
    for word in text.split_whitespace() {
        match word.split_once('=')? {
            ("holder", v) => holder = v.rsplit_once('@').map(|(u, h)| (u.to_string(), h.to_string())),
            ("pid", v) => pid = v.parse::<u32>().ok(),
            ("until", v) => {
                until = chrono::DateTime::parse_from_rfc3339(v)
                    .ok()
                    .map(|t| t.timestamp_millis())
            }
            _ => {}
        }
    }
    let (user, host) = holder?;
    Some(Lease {
        id,
        holder: Holder { user, host, pid: pid? },
        until_ms: until?,
    })
}

/// The lease that holds now among `leases`: the lowest id of those live
/// (`until` not passed, and not known `dead`: a holder this host sees is
/// gone). `None`: the lease is free.
pub fn lease_holder(leases: &[Lease], now_ms: i64, dead: impl Fn(&Lease) -> bool) -> Option<&Lease> {
    leases
        .iter()
        .filter(|l| l.until_ms > now_ms && !dead(l))
        .min_by_key(|l| l.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policys_mark_is_its_own_and_fleetops() {
        let r = policy_reason(" xid on gpu3: reset_gpu (XID 79) ");
        assert_eq!(r, "fleetop-policy: xid on gpu3: reset_gpu (XID 79)");
        assert_eq!(policy_words(&r), Some("xid on gpu3: reset_gpu (XID 79)"));
        // Still fleetop's drain: a return or a resume works on it.
        assert_eq!(
            crate::model::action::own_words(&r),
            Some("xid on gpu3: reset_gpu (XID 79)")
        );
        // A person's reason never reads as the policy's, whatever it says:
        // fleetop puts it after `fleetop: `.
        let person = crate::model::action::plan(
            crate::model::action::NodeAction::Drain,
            vec!["gpu01".into()],
            Some("fleetop-policy: fan".into()),
        )
        .expect("plan");
        let said = person.reason.expect("reason");
        assert_eq!(said, "fleetop: fleetop-policy: fan", "kept verbatim after the prefix");
        assert_eq!(policy_words(&said), None);
        assert_eq!(policy_words("fleetop: xid"), None);
        assert_eq!(policy_words("maintenance"), None);
    }

    #[test]
    fn a_marked_reason_with_its_time_is_a_drain_and_an_unknown_time_is_now() {
        let r = Some("fleetop-policy: xid");
        assert_eq!(
            marked_drain("gpu01", r, Some("1970-01-01T00:00:10Z"), 99_000),
            Some(("gpu01".to_string(), 10_000))
        );
        assert_eq!(
            marked_drain("gpu01", r, Some("2026-01-01T00:00:00.000Z"), 0).map(|d| d.1),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            marked_drain("gpu01", r, None, 99_000),
            Some(("gpu01".to_string(), 99_000))
        );
        assert_eq!(
            marked_drain("gpu01", r, Some("Unknown"), 5),
            Some(("gpu01".to_string(), 5))
        );
        assert_eq!(
            marked_drain("gpu01", Some("fleetop: xid"), Some("1970-01-01T00:00:10Z"), 0),
            None
        );
        assert_eq!(marked_drain("gpu01", None, None, 0), None);
    }

    #[test]
    fn the_window_is_the_union_of_the_marks_and_the_audit_log_by_node_and_time() {
        let d = |n: &str, at: i64| (n.to_string(), at);
        let audit = [d("a", 1_000), d("b", 2_000), d("a", 500_000), d("c", 900_000)];
        let sched = [
            d("a", 3_000),   // a's first drain, Slurm's clock 2 s on
            d("a", 3_000),   // read twice: one drain
            d("b", 400_000), // b drained again, by another watch
            d("e", 10),      // another watch's only
        ];
        let w = window_drains(&audit, &sched);
        let got: Vec<(&str, i64, Seen)> = w.iter().map(|x| (x.node.as_str(), x.at_ms, x.seen)).collect();
        assert_eq!(
            got,
            [
                ("e", 10, Seen::Scheduler),
                ("b", 2_000, Seen::AuditLog),
                ("a", 3_000, Seen::Both),
                ("b", 400_000, Seen::Scheduler),
                ("a", 500_000, Seen::AuditLog),
                ("c", 900_000, Seen::AuditLog),
            ]
        );
        // One mark matches one audit line: the nearest.
        let w = window_drains(&[d("a", 0), d("a", 100_000)], &[d("a", 90_000)]);
        assert_eq!(
            w.iter().map(|x| x.seen).collect::<Vec<_>>(),
            [Seen::AuditLog, Seen::Both]
        );
        assert!(window_drains(&[], &[]).is_empty());
    }

    #[test]
    fn a_holder_reads_back_and_an_events_mark_is_the_policys_only() {
        let h = Holder {
            user: "alice".into(),
            host: "head1".into(),
            pid: 42,
        };
        assert_eq!(Holder::parse(&h.words()), Some(h));
        assert_eq!(Holder::parse("kube-controller-manager"), None);
        assert_eq!(Holder::parse(""), None);
        assert!(marked_message("cordoned and tainted x by root: fleetop-policy: xid"));
        assert!(!marked_message(
            "cordoned and tainted x by root: fleetop: a: fleetop-policy: b"
        ));
        assert!(!marked_message(
            "cordoned and tainted x by root: fleetop: fleetop-policy: fan"
        ));
        assert!(!marked_message("fleetop-policy: with nothing before"));
    }

    #[test]
    fn a_lease_reads_back_what_it_wrote() {
        let h = Holder {
            user: "alice".into(),
            host: "head1".into(),
            pid: 4242,
        };
        let text = lease_text(&h, 60_000);
        assert_eq!(text, "holder=alice@head1 pid=4242 until=1970-01-01T00:01:00.000Z");
        assert_eq!(
            parse_lease(7, &text),
            Some(Lease {
                id: 7,
                holder: h,
                until_ms: 60_000
            })
        );
        assert_eq!(
            parse_lease(7, "holder=alice@head1 pid=x until=1970-01-01T00:01:00Z"),
            None
        );
        assert_eq!(parse_lease(7, "a job"), None);
        assert_eq!(parse_lease(7, ""), None);
    }
}
