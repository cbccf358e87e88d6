//! Where the response to a node's trouble stands, read from Slurm and the
//! node's timeline (no I/O): drained, and by whom; a burn-in passed; back
//! in service. The alerts screen shows it on the node's rows, and node
//! detail's "do now" becomes the next step instead of one already done.

use crate::model::action::NodeAction;
use crate::model::flag::Flag;
use crate::model::sched::Hold;
use crate::model::timeline::What;
use crate::store::NodeState;
use crate::tui::view::{fleetop_drainer, held_for_ms, human_span};

/// "14:05Z": a time of day, UTC like the header's clock.
pub fn hhmm(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%MZ").to_string())
        .unwrap_or_default()
}

/// The newest time the node's timeline shows `action` done (ok), if any.
fn last_ok(n: &NodeState, action: NodeAction) -> Option<i64> {
    n.timeline.events().rev().find_map(|e| match &e.what {
        What::Action {
            action: a, ok: true, ..
        } if *a == action => Some(e.time_ms),
        _ => None,
    })
}

/// When Slurm's hold on the node began, where it says.
fn held_since(n: &NodeState) -> Option<i64> {
    let s = &n.scheduler.as_ref()?.node;
    crate::ops::timeline::parse_time(s.reason_time.as_deref()?)
}

/// A burn-in that passed since the node was drained, if one did.
fn passed_since_drain(n: &NodeState) -> Option<i64> {
    // The node's own agent's verdicts: a line in an audit log is a request.
    let passed = n
        .info
        .as_ref()?
        .health
        .burn_ins
        .iter()
        .filter(|b| b.passed)
        .map(|b| b.ended_ms)
        .max()?;
    held_since(n).is_none_or(|since| passed >= since).then_some(passed)
}

/// Where the response to the node stands, in a few words: "drained by
/// alice via fleetop 3m", "draining by fleetop's policy 1m · burn-in passed
/// 10:42Z", "held by bob: RMA 5521", "returned 10:45Z"; `None` while
/// nothing has been done. `since_ms`: when the trouble began (a return
/// before it is not this trouble's).
pub fn response(n: &NodeState, since_ms: i64, now_ms: i64) -> Option<String> {
    let s = &n.scheduler.as_ref()?.node;
    match s.hold() {
        Hold::InService => {
            let back = [last_ok(n, NodeAction::Return), last_ok(n, NodeAction::Resume)]
                .into_iter()
                .flatten()
                .max()?;
            (back >= since_ms).then(|| format!("returned {}", hhmm(back)))
        }
        Hold::Fleetop { reason } => {
            let who = fleetop_drainer(reason, &n.timeline);
            let mut t = format!("{} by {who}", s.state);
            if let Some(ms) = held_for_ms(s, now_ms) {
                t.push_str(&format!(" {}", human_span(ms)));
            }
            if let Some(p) = passed_since_drain(n) {
                t.push_str(&format!(" · burn-in passed {}", hhmm(p)));
            }
            Some(t)
        }
        Hold::Other => {
            let who = s.reason_user.as_deref().unwrap_or("someone else");
            let why = s.reason.as_deref().unwrap_or("no reason given");
            Some(format!(
                "held by {}: {}",
                fleetop_proto::input::printable(who, 32),
                fleetop_proto::input::printable(why, 80)
            ))
        }
    }
}

/// The next step for a node fleetop has acted on, its most urgent flag
/// `f` (if any) in view, in place of the catalog's first step ("drain,
/// then ..."), which is done: `None` where nothing has been done yet (the
/// catalog's step is the next).
pub fn next_step(n: &NodeState, f: Option<&Flag>) -> Option<String> {
    let v = n.scheduler.as_ref()?;
    match v.node.hold() {
        Hold::InService => None,
        Hold::Other => Some("someone else holds the node: theirs to return".into()),
        Hold::Fleetop { .. } => {
            // A fault that keeps the node out is still up: fix it first,
            // whatever passed.
            let fixed = crate::model::flag::keeping_out(n.detector.active()).is_none();
            if let Some(p) = passed_since_drain(n).filter(|_| fixed) {
                return Some(format!("T: return it to service (burn-in passed {})", hhmm(p)));
            }
            let Some(f) = f else {
                return Some("nothing flagged now: T burns it in and returns it".into());
            };
            let fix = match f.action {
                crate::model::flag::Action::ResetGpu => "reset the GPU",
                crate::model::flag::Action::RebootNode => "reboot the node",
                crate::model::flag::Action::Replace => "replace the hardware (RMA)",
                other => other.says(),
            };
            let wait = if v.jobs.is_empty() {
                String::new()
            } else {
                format!(
                    "wait for its {} to end, then ",
                    crate::tui::view::count(v.jobs.len(), "job")
                )
            };
            Some(format!("{wait}{fix}, then T: burn-in and return"))
        }
    }
}
