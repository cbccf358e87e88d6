//! A node's timeline: what happened to it and who did it, newest last.
//! Flags raised and cleared (from the detectors), actions taken on it (from
//! the audit log and the console's own reports), burn-in results, and the
//! XIDs of its agent's fault journal. Kept bounded per node.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::action::{ActionReport, NodeAction, Stage};
use crate::model::flag::{Action, FlagKind, Severity};
use crate::model::sample::FaultRecord;

/// Two records of one event may be this far apart (ms): see `Event::same_as`.
pub const SAME_EVENT_MS: i64 = 2_000;

/// Events kept per node in memory (the file keeps more, see `ops::timeline`).
pub const PER_NODE: usize = 256;

/// One thing that happened to a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// When (ms since the epoch, the console's clock; the agent's for a
    /// fault journal record).
    pub time_ms: i64,
    pub node: String,
    pub what: What,
    /// Who: the account that acted (from the audit log), `fleetop` for the
    /// detectors, `agent` for the fault journal.
    pub by: String,
}

/// What happened. Externally tagged (`{"flag_raised": {...}}`), with no
/// field ever skipped: recordings encode it positionally (postcard).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// A flag went up: on what (`gpu3`, `ib0`, `node`), how bad, what to do.
    FlagRaised {
        kind: FlagKind,
        subject: String,
        severity: Severity,
        action: Action,
        detail: String,
    },
    /// A flag cleared.
    FlagCleared { kind: FlagKind, subject: String },
    /// An action on the node (drain, resume, return, bench, scancel,
    /// signal, silence) and how it went on this node.
    Action {
        action: NodeAction,
        ok: bool,
        reason: Option<String>,
        message: String,
        /// The policy that acted, if no person did.
        policy: Option<String>,
    },
    /// An XID from the agent's fault journal (this boot or an earlier one).
    Fault {
        gpu_uuid: String,
        xid: u32,
        boot_id: Option<String>,
    },
    /// A burn-in's verdict, from the node's agent's burn-in journal (`by`
    /// is who asked for it).
    BurnIn {
        suite: String,
        passed: bool,
        /// The failing checks, where it failed.
        detail: String,
    },
    /// What a scheduler read beside the fleet says of the node changed
    /// (`scheduler`: "Ray"; `state` in its words: dead, draining, idle...).
    SchedulerState {
        scheduler: String,
        state: String,
        detail: String,
    },
}

impl Event {
    /// One line for people: "drain ok (fleetop: xid 79) by alice".
    pub fn line(&self) -> String {
        match &self.what {
            What::FlagRaised {
                kind,
                subject,
                severity,
                action,
                detail,
            } => format!(
                "{} {} on {subject} raised ({}; {}): {detail}",
                severity.name(),
                kind.name(),
                action.name(),
                action.says()
            ),
            What::FlagCleared { kind, subject } => format!("{} on {subject} cleared", kind.name()),
            What::Action {
                action,
                ok,
                reason,
                message,
                policy,
            } => {
                let mut s = format!("{} {}", action.verb(), if *ok { "ok" } else { "FAILED" });
                if let Some(r) = reason {
                    s.push_str(&format!(" ({r})"));
                }
                if !message.is_empty() {
                    s.push_str(&format!(": {message}"));
                }
                s.push_str(&format!(" by {}", self.by));
                if let Some(p) = policy {
                    s.push_str(&format!(" (policy {p})"));
                }
                s
            }
            What::Fault { gpu_uuid, xid, boot_id } => {
                let boot = boot_id
                    .as_deref()
                    .map(|b| format!(", boot {}", short(b)))
                    .unwrap_or_default();
                format!("XID {xid} on {gpu_uuid}{boot} (agent's fault journal)")
            }
            What::BurnIn { suite, passed, detail } => match passed {
                true => format!("burn-in {suite} passed (the node's agent), asked by {}", self.by),
                false => format!(
                    "burn-in {suite} FAILED: {detail} (the node's agent), asked by {}",
                    self.by
                ),
            },
            What::SchedulerState {
                scheduler,
                state,
                detail,
            } => format!("{scheduler}: {state}: {detail}"),
        }
    }

    /// Two records of the same event: a flag a console saw again from the
    /// agent's history (its start time moves by the clock offset of each
    /// connection, so a little tolerance), an audit line read twice.
    pub fn same_as(&self, o: &Event) -> bool {
        self.node == o.node && self.what == o.what && (self.time_ms - o.time_ms).abs() <= SAME_EVENT_MS
    }
}

fn short(boot: &str) -> &str {
    boot.get(..8).unwrap_or(boot)
}

/// The events of an action report, one per node it names: its result on
/// that node where it has one. Only reports that ran (or were refused) make
/// events; the line logged before a run (`Started`) does not.
pub fn from_report(r: &ActionReport, time_ms: i64) -> Vec<Event> {
    if r.stage == Stage::Started {
        return Vec::new();
    }
    let by = r.actor.display();
    let event = |node: &str, ok: bool, message: String| Event {
        time_ms,
        node: node.to_string(),
        what: What::Action {
            action: r.action,
            ok,
            reason: r.reason.clone(),
            message,
            policy: r.policy.clone(),
        },
        by: by.clone(),
    };
    if let Some(why) = &r.refused {
        return r
            .nodes
            .iter()
            .map(|n| event(n, false, format!("refused: {why}")))
            .collect();
    }
    // scancel reports its job as the result's "node": the job's nodes each
    // get the result.
    if r.action == NodeAction::Scancel {
        let (ok, message) = r
            .results
            .first()
            .map_or((true, String::new()), |x| (x.ok, x.message.clone()));
        return r.nodes.iter().map(|n| event(n, ok, message.clone())).collect();
    }
    // A forced action says, on each node's timeline, what it overrode.
    let forced = |node: &str, message: String| match r.overrides.get(node) {
        Some(o) if !o.is_empty() => format!("{message} (FORCED past: {})", o.join("; ")),
        _ => message,
    };
    r.results
        .iter()
        .map(|x| event(&x.node, x.ok, forced(&x.node, x.message.clone())))
        .collect()
}

/// The journal's records as events of node `node`.
pub fn from_journal(node: &str, journal: &[FaultRecord]) -> Vec<Event> {
    journal
        .iter()
        .filter(|f| f.kind == "xid")
        .map(|f| Event {
            time_ms: f.time_ms,
            node: node.to_string(),
            what: What::Fault {
                gpu_uuid: f.gpu_uuid.clone(),
                xid: f.code,
                boot_id: f.boot_id.clone(),
            },
            by: "agent".into(),
        })
        .collect()
}

/// The verdicts of a node's agent's burn-in journal as events of node `node`.
pub fn from_burn_ins(node: &str, burn_ins: &[crate::model::bench::BurnIn]) -> Vec<Event> {
    burn_ins
        .iter()
        .map(|b| Event {
            time_ms: b.ended_ms,
            node: node.to_string(),
            what: What::BurnIn {
                suite: b.suite.map_or("?", crate::model::bench::Suite::name).to_string(),
                passed: b.passed,
                detail: if b.passed { String::new() } else { b.failure() },
            },
            by: b.requested_by.clone(),
        })
        .collect()
}

/// A node's timeline: at most `PER_NODE` events, in time order, no event
/// twice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    events: VecDeque<Event>,
}

impl Timeline {
    /// Adds `e` in its place by time, unless it is already there; the oldest
    /// goes when the timeline is full.
    pub fn add(&mut self, e: Event) {
        // Most events are new and the newest: look from the back.
        let at = self
            .events
            .iter()
            .rposition(|x| x.time_ms <= e.time_ms)
            .map_or(0, |i| i + 1);
        let near = self.events.range(at.saturating_sub(4)..(at + 4).min(self.events.len()));
        if near.clone().any(|x| x.same_as(&e)) {
            return;
        }
        self.events.insert(at, e);
        while self.events.len() > PER_NODE {
            self.events.pop_front();
        }
    }

    pub fn events(&self) -> impl DoubleEndedIterator<Item = &Event> + ExactSizeIterator {
        self.events.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleared(t: i64) -> Event {
        Event {
            time_ms: t,
            node: "n1".into(),
            what: What::FlagCleared {
                kind: FlagKind::Xid,
                subject: "gpu3".into(),
            },
            by: "fleetop".into(),
        }
    }

    #[test]
    fn events_keep_time_order_once_each_and_are_bounded() {
        let mut t = Timeline::default();
        t.add(cleared(5_000));
        t.add(cleared(1_000));
        // The same event seen again from a reconnect's history, 300 ms off.
        t.add(cleared(5_300));
        let times: Vec<i64> = t.events().map(|e| e.time_ms).collect();
        assert_eq!(times, [1_000, 5_000]);
        for i in 0..(PER_NODE as i64 + 10) {
            t.add(cleared(10_000 + i * 10_000));
        }
        assert_eq!(t.events().len(), PER_NODE);
        assert_eq!(
            t.events().next().map(|e| e.time_ms),
            Some(10_000 + 10 * 10_000),
            "the oldest went"
        );
    }
}
