//! Drain, resume, undrain in Slurm. A plan (the exact commands, shown
//! before anything runs) is confirmed by the caller, run node by node with
//! the reader's timeout, re-read from the scheduler, and reported per node;
//! the caller appends the report to the audit log.

use crate::ingest::slurm::{SchedError, Slurm};
use crate::model::action::{ActionReport, NodeAction, NodeResult, Plan, Stage};
use crate::model::sched::{Hold, SchedNode};
use crate::ops::audit;

/// Whether the node is now where the action should have put it.
fn reached(action: NodeAction, after: &SchedNode) -> bool {
    match action {
        NodeAction::Drain => after.is_drained() || after.state.contains("drain"),
        NodeAction::Resume | NodeAction::Return => !after.out_of_service(),
        NodeAction::Undrain => !after.state.contains("drain"),
        NodeAction::Bench
        | NodeAction::Silence
        | NodeAction::Scancel
        | NodeAction::Signal
        | NodeAction::RemediateReset
        | NodeAction::Cordon => true,
    }
}

fn describe(n: &SchedNode) -> String {
    let mut s = n.label();
    if let Some(r) = &n.reason {
        s.push_str(&format!(" ({r}"));
        if let Some(u) = &n.reason_user {
            s.push_str(&format!(", by {u}"));
        }
        if let Some(t) = &n.reason_time {
            s.push_str(&format!(", {t}"));
        }
        s.push(')');
    }
    s
}

/// The result for a node the plan must not touch, if it is one: a drain
/// never overwrites a reason (ours or anyone's), resuming a node in service
/// has nothing to do, and a node someone else holds out of service is not
/// fleetop's to resume unless the plan is forced.
fn leave_alone(plan: &Plan, node: &str, b: &SchedNode) -> Option<NodeResult> {
    let resumes = matches!(
        plan.action,
        NodeAction::Resume | NodeAction::Return | NodeAction::Undrain
    );
    let (ok, message) = match b.hold() {
        Hold::InService if plan.action == NodeAction::Drain => return None,
        // Slurm refuses to resume a node that is in service ("Invalid node
        // state specified"): say plainly that there is nothing to do.
        Hold::InService if resumes && plan.action != NodeAction::Undrain => {
            (true, format!("already in service ({}); nothing to resume", b.label()))
        }
        _ if plan.action == NodeAction::Drain && b.reason.is_none() && !b.is_drained() => return None,
        Hold::Fleetop { .. } | Hold::Other if plan.action == NodeAction::Drain => {
            (true, format!("already {}; left as it is", describe(b)))
        }
        // A fault that takes the node out of service is still up: putting
        // it back would hand a broken node to the next job.
        _ if resumes && !plan.force && plan.faults.contains_key(node) => (
            false,
            format!(
                "{} still active, so left out of service (--force to {} it anyway)",
                plan.faults[node],
                plan.action.verb()
            ),
        ),
        Hold::Other if resumes && !plan.force => (
            false,
            format!(
                "{}: not drained by fleetop, so left as it is (--force to {} it anyway)",
                b.held_by(),
                plan.action.verb()
            ),
        ),
        _ => return None,
    };
    Some(NodeResult {
        node: node.to_string(),
        ok,
        message,
        state_before: Some(b.label()),
        state_after: Some(b.label()),
    })
}

/// Runs a confirmed plan node by node, then reads the nodes back from Slurm.
pub fn execute(slurm: &Slurm, plan: &Plan) -> ActionReport {
    if plan.action == NodeAction::Scancel {
        return execute_scancel(slurm, plan);
    }
    let before = slurm.query().map(|s| s.nodes);
    // A controller that does not answer will not answer scontrol either:
    // each node then says so at once rather than after a timeout of its own.
    let mut hung = match &before {
        Err(e @ SchedError::Timeout(..)) => Some(e.to_string()),
        _ => None,
    };
    let before = before.unwrap_or_default();
    let mut results: Vec<NodeResult> = Vec::new();
    let mut ran: Vec<usize> = Vec::new();
    for (i, (node, argv)) in plan.nodes.iter().zip(&plan.commands).enumerate() {
        let was = before.get(node);
        if let Some(left) = was.and_then(|b| leave_alone(plan, node, b)) {
            results.push(left);
            continue;
        }
        if let Some(why) = &hung {
            results.push(NodeResult {
                node: node.clone(),
                ok: false,
                message: format!("not run: Slurm does not answer ({why})"),
                state_before: was.map(|b| b.label()),
                state_after: None,
            });
            continue;
        }
        let outcome = slurm.run(&argv[0], &argv[1..]);
        if let Err(e @ SchedError::Timeout(..)) = &outcome {
            hung = Some(e.to_string());
        }
        results.push(NodeResult {
            node: node.clone(),
            ok: outcome.is_ok(),
            message: match &outcome {
                Ok(_) => String::new(),
                Err(e) => e.to_string(),
            },
            state_before: was.map(|b| b.label()),
            state_after: None,
        });
        if outcome.is_ok() {
            ran.push(i);
        }
    }
    // The truth is what Slurm says now, not what the command returned.
    let after = match &hung {
        Some(why) => Err(SchedError::Failed("slurm".into(), why.clone())),
        None => slurm.query().map(|s| s.nodes),
    };
    for i in ran {
        let r = &mut results[i];
        match after.as_ref().map(|a| a.get(&r.node)) {
            Ok(Some(a)) => {
                r.state_after = Some(a.label());
                r.ok = reached(plan.action, a);
                r.message = if r.ok {
                    format!("now {}", describe(a))
                } else if a.is_down() {
                    format!("still {}: Slurm keeps it down until it responds", describe(a))
                } else {
                    format!("Slurm accepted it, but the node is {}", describe(a))
                };
            }
            Ok(None) => {
                r.ok = false;
                r.message = "Slurm no longer lists this node".into();
            }
            Err(e) => {
                r.ok = false;
                r.message = format!("ran, but the result could not be read back: {e}");
            }
        }
    }
    audit::report(plan, Stage::Done, None, results)
}

/// Runs a confirmed plan as every caller must: logged before it runs (not
/// run if it cannot be logged: the report then says why), executed off the
/// async threads, logged with its results.
pub async fn run_logged(slurm: &Slurm, plan: Plan) -> ActionReport {
    let (s, p) = (slurm.clone(), plan.clone());
    audit::run_logged(&plan, || async {
        match tokio::task::spawn_blocking(move || execute(&s, &p)).await {
            Ok(r) => r,
            Err(e) => audit::report(
                &plan,
                Stage::Done,
                Some(format!("the action task failed: {e}")),
                Vec::new(),
            ),
        }
    })
    .await
}

/// Whether a job state from squeue means the job has ended (Slurm keeps
/// an ended job listed for a while, `MinJobAge`).
fn ended(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "CANCELLED"
            | "FAILED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "OUT_OF_MEMORY"
            | "PREEMPTED"
            | "REVOKED"
    )
}

/// The failed result for job `job` when Slurm has nothing to cancel: it
/// lists no such job, or lists it as ended. `None` where the job is there
/// to cancel, or where Slurm cannot say (scancel then answers for itself).
pub fn nothing_to_cancel(slurm: &Slurm, job: &str) -> Option<NodeResult> {
    let (message, state) = match slurm.job_state(job) {
        Ok(None) => (
            format!("nothing to cancel: Slurm lists no job {job}"),
            "not listed".to_string(),
        ),
        Ok(Some(s)) if ended(&s) => (
            format!("nothing to cancel: job {job} has already ended ({s})"),
            s.to_lowercase(),
        ),
        Ok(Some(_)) | Err(_) => return None,
    };
    Some(NodeResult {
        node: format!("job {job}"),
        ok: false,
        message,
        state_before: Some(state.clone()),
        state_after: Some(state),
    })
}

/// `scancel JOBID`, then squeue read back: the result is the job's, by what
/// Slurm lists afterwards, not by scancel's exit status alone. A job Slurm
/// does not list is not cancelled: that fails, and nothing runs.
fn execute_scancel(slurm: &Slurm, plan: &Plan) -> ActionReport {
    let Some(argv) = plan.commands.first().filter(|a| a.len() == 2) else {
        return audit::report(plan, Stage::Done, Some("no job to cancel".into()), Vec::new());
    };
    let job = argv[1].clone();
    if let Some(nothing) = nothing_to_cancel(slurm, &job) {
        return audit::report(plan, Stage::Done, None, vec![nothing]);
    }
    let before = slurm.job_state(&job).ok().flatten();
    let (ok, message, after) = match slurm.run(&argv[0], &argv[1..]) {
        Err(e) => (false, e.to_string(), None),
        Ok(_) => match slurm.job_state(&job) {
            Ok(Some(s)) if !ended(&s) => (
                true,
                format!("Slurm accepted it; the job is still listed ({s}) while it ends"),
                Some("ending".to_string()),
            ),
            Ok(_) => (
                true,
                "cancelled: Slurm no longer lists it as running".to_string(),
                Some("gone".to_string()),
            ),
            Err(e) => (false, format!("ran, but the result could not be read back: {e}"), None),
        },
    };
    let result = NodeResult {
        node: format!("job {job}"),
        ok,
        message,
        state_before: before.map(|s| s.to_lowercase()),
        state_after: after,
    };
    audit::report(plan, Stage::Done, None, vec![result])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::action;

    fn node(state: &str, reason: Option<&str>) -> SchedNode {
        SchedNode {
            state: state.into(),
            reason: reason.map(str::to_string),
            reason_user: Some("alice".into()),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_drain_fleetop_made_is_resumed_unless_forced() {
        let resume = action::plan(NodeAction::Resume, vec!["n".into()], None).expect("plan");
        let theirs = node("drained", Some("maintenance"));
        let left = leave_alone(&resume, "n", &theirs).expect("refused");
        assert!(!left.ok, "{left:?}");
        assert!(
            left.message.contains("drained by alice: maintenance") && left.message.contains("--force"),
            "{}",
            left.message
        );
        // Slurm's own (a node that stopped answering) is someone else's too.
        assert!(leave_alone(&resume, "n", &node("down", Some("Not responding"))).is_some());
        assert!(leave_alone(&resume, "n", &node("drained", Some("fleetop: xid 79"))).is_none());
        let forced = Plan {
            force: true,
            ..resume.clone()
        };
        assert!(leave_alone(&forced, "n", &theirs).is_none());
        // A node with a fault that keeps it out is not resumed, ours or not,
        // unless forced; the refusal names the fault.
        let mut faulty = resume.clone();
        faulty
            .faults
            .insert("n".into(), "gpu_lost on gpu1 (NVML: GPU is lost)".into());
        let ours = node("drained", Some("fleetop: xid 79"));
        let left = leave_alone(&faulty, "n", &ours).expect("refused");
        assert!(
            !left.ok && left.message.contains("gpu_lost on gpu1") && left.message.contains("--force"),
            "{left:?}"
        );
        faulty.force = true;
        assert!(leave_alone(&faulty, "n", &ours).is_none());
        // A drain never overwrites a reason, fleetop's or anyone's.
        let drain = action::plan(NodeAction::Drain, vec!["n".into()], Some("fan".into())).expect("plan");
        for held in [
            theirs,
            node("down", Some("power")),
            node("draining", Some("fleetop: x")),
        ] {
            let r = leave_alone(&drain, "n", &held).expect("left as it is");
            assert!(r.ok && r.message.contains("left as it is"), "{r:?}");
        }
        assert!(leave_alone(&drain, "n", &node("idle", None)).is_none());
    }

    #[test]
    fn outcomes_are_judged_by_the_state_slurm_reports() {
        let n = |s: &str| SchedNode {
            state: s.into(),
            not_responding: false,
            reason: None,
            reason_user: None,
            reason_time: None,
            partitions: Vec::new(),
        };
        assert!(reached(NodeAction::Drain, &n("draining")));
        assert!(reached(NodeAction::Drain, &n("drained")));
        assert!(!reached(NodeAction::Drain, &n("idle")));
        assert!(reached(NodeAction::Resume, &n("idle")));
        assert!(!reached(NodeAction::Resume, &n("down")));
        assert!(reached(NodeAction::Undrain, &n("down")));
    }
}
