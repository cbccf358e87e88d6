//! Signalling a GPU's processes through their node's agent (SignalProcess):
//! the console never runs `kill` itself, and the agent signals only a pid its
//! latest sample shows on a GPU, with the control token. Logged like any
//! action: the attempt, then each pid's outcome.

use fleetop_proto::pb::SignalRequest;

use crate::ingest::agent;
use crate::model::action::{ActionReport, NodeAction, NodeResult, Plan, Stage};
use crate::model::target::Target;
use crate::ops::audit;

/// What will be asked of the agent, for the confirmation and the log.
pub fn plan(target: &Target, gpu: u32, pids: &[u32], kill: bool) -> Plan {
    let sig = if kill { "KILL" } else { "TERM" };
    Plan::new(
        NodeAction::Signal,
        vec![target.name.clone()],
        Some(format!("SIG{sig} to the processes on GPU {gpu}")),
        pids.iter()
            .map(|p| {
                vec![
                    "SignalProcess".into(),
                    format!("pid={p}"),
                    format!("signal={sig}"),
                    format!("agent={}", target.address()),
                ]
            })
            .collect(),
    )
}

/// Asks the agent to signal each pid of `plan`; one result per pid.
pub async fn run(plan: &Plan, target: &Target, token: &str, access: &agent::Access) -> ActionReport {
    if let Err(why) = access.control_token_allowed() {
        return audit::report(plan, Stage::Done, Some(why), Vec::new());
    }
    let mut results = Vec::new();
    let mut client = agent::connect(target, access).await.map(|c| c.client());
    for argv in &plan.commands {
        let arg = |k: &str| argv.iter().find_map(|a| a.strip_prefix(k)).unwrap_or("").to_string();
        // The plan's own pids parse; anything else is never sent as pid 0
        // (which would mean the agent's whole process group).
        let Ok(pid) = arg("pid=").parse::<u32>() else {
            results.push(NodeResult {
                node: target.name.clone(),
                ok: false,
                message: format!("not a pid: '{}'; nothing sent", arg("pid=")),
                state_before: None,
                state_after: None,
            });
            continue;
        };
        let (ok, message) = match client.as_mut() {
            Err(e) => (false, format!("cannot reach the agent at {}: {e}", target.address())),
            Ok(c) => {
                let req = SignalRequest {
                    token: token.into(),
                    pid,
                    signal: arg("signal="),
                };
                match c.signal_process(req).await {
                    Ok(r) => (true, r.into_inner().outcome),
                    Err(s) => (false, s.message().to_string()),
                }
            }
        };
        results.push(NodeResult {
            node: format!("{} pid {pid}", target.name),
            ok,
            message,
            state_before: None,
            state_after: None,
        });
    }
    audit::report(plan, Stage::Done, None, results)
}
