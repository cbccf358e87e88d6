//! Starting and confirming what changes the cluster from the console:
//! drain, resume, undrain, return to service, burn-in, scancel, signals.
//! Kept apart from `keys` (the key handlers) so every path to a command is in
//! one place: each one refuses in read-only mode (and logs the attempt),
//! says what is missing without a scheduler or token, and shows exactly
//! what will run before a `y` (or, for a node someone else holds out of
//! service, its name typed) sends it. Pure like `app`: no I/O, no clock.
//! Here the plans and the steps that open a dialog; the keys in an open
//! dialog are in `dialog`, one module per kind.

mod dialog;

use crate::model::action::{self, NodeAction, Plan};
use crate::model::bench::{Outcome, Suite};
use crate::model::request::Request;
use crate::model::returning::Prepared;
use crate::model::sched::Hold;
use crate::tui::app::{App, Screen};
use crate::tui::modal::{Dialog, Guard};
use crate::tui::view;

pub(crate) use dialog::dialog_key;

/// The nodes an action applies to: the marked ones, else the one in view.
pub(crate) fn action_targets(app: &App) -> Vec<String> {
    let idx: Vec<usize> = if !app.marked.is_empty() {
        app.marked.iter().copied().collect()
    } else if app.screen == Screen::Detail {
        vec![app.detail.node]
    } else {
        app.current_node().into_iter().collect()
    };
    idx.into_iter()
        .filter_map(|i| app.store.nodes.get(i))
        .map(|n| n.target.name.clone())
        .collect()
}

/// Which nodes an action is about, as the person chose them: "3 marked
/// nodes" when marks chose them, so nobody mistakes them for the one in view.
pub(crate) fn chosen(app: &App, n: usize) -> String {
    match (app.marked.is_empty(), n) {
        (false, 1) => "1 marked node".into(),
        (false, n) => format!("{n} marked nodes"),
        (true, 1) => "the node in view".into(),
        (true, n) => format!("{n} nodes"),
    }
}

/// Kubernetes takes the console's drain and resume when it is read
/// (`--kubernetes`) and Slurm is not (`--slurm`): with both, Slurm keeps
/// them, and `fleetop node ... --kubernetes` acts on Kubernetes.
pub(crate) fn to_kube(app: &App) -> bool {
    app.store.kube.known && !app.store.scheduler_known
}

/// Whether drains go to Ray: it is read, and neither Slurm nor Kubernetes
/// is (Ray has only a drain: its nodes come back by starting again).
pub(crate) fn to_ray(app: &App) -> bool {
    app.store.ray.is_some() && !app.store.scheduler_known && !app.store.kube.known
}

/// The plan for `action` on `nodes`, for the scheduler that takes it:
/// Slurm where it is read, else Kubernetes, else Ray (each node's Ray id
/// from the last read).
fn plan_for(app: &App, action: NodeAction, nodes: Vec<String>, reason: Option<String>) -> Result<Plan, String> {
    if to_kube(app) {
        return crate::model::kube::plan(action, nodes, reason, false);
    }
    match &app.store.ray {
        Some(ray) if to_ray(app) => {
            if action != NodeAction::Drain {
                return Err(crate::ops::ray::NO_RESUME.into());
            }
            let matched = nodes
                .into_iter()
                .map(|name| {
                    let i = app.store.nodes.iter().position(|n| n.target.name == name);
                    (name, i.and_then(|i| ray.node(i)))
                })
                .collect();
            let how = crate::ops::ray::RayDrain {
                deadline: None,
                if_idle: false,
            };
            crate::ops::ray::drain_plan(&ray.gcs, matched, reason, &how, app.now_ms)
        }
        _ => action::plan(action, nodes, reason),
    }
}

/// The nodes among `names` already held out of service in Slurm, with who
/// holds them and why ("gpu03: drained by alice at ...: maintenance"): a
/// drain leaves them as they are.
pub(crate) fn already_held(app: &App, names: &[String]) -> Vec<String> {
    if to_kube(app) || to_ray(app) {
        return Vec::new();
    }
    names
        .iter()
        .filter_map(|name| {
            let n = app.store.nodes.iter().find(|n| &n.target.name == name)?;
            let s = &n.scheduler.as_ref()?.node;
            (s.hold() != Hold::InService).then(|| format!("{name}: {}", s.held_by()))
        })
        .collect()
}

/// The nodes a drain acts on: those not already held out of service.
fn drainable(app: &App, action: NodeAction, names: &[String]) -> Vec<String> {
    if action != NodeAction::Drain {
        return names.to_vec();
    }
    let held = already_held(app, names);
    names
        .iter()
        .filter(|n| !held.iter().any(|h| h.starts_with(&format!("{n}: "))))
        .cloned()
        .collect()
}

/// What is logged for an attempt refused before it was planned (read-only):
/// the calls it would have made, whether or not a reason was typed.
fn refused_plan(app: &App, action: NodeAction, nodes: Vec<String>, reason: Option<String>) -> Plan {
    if to_ray(app)
        && let Ok(plan) = plan_for(app, action, nodes.clone(), reason.clone())
    {
        return plan;
    }
    let mut plan = Plan::new(action, nodes, reason, Vec::new());
    if to_ray(app) {
        plan.scheduler = action::Scheduler::Ray;
    } else if to_kube(app) {
        plan.scheduler = action::Scheduler::Kubernetes;
        crate::model::kube::stamp(
            &mut plan,
            crate::model::kube::UNSTAMPED_BY,
            crate::model::kube::UNSTAMPED_AT,
        );
    } else {
        plan.commands = plan
            .nodes
            .iter()
            .map(|n| action::command(action, n, plan.reason.as_deref()))
            .collect();
    }
    plan
}

/// Read-only mode: `plan` is not run, but the attempt goes to the audit log,
/// and the footer says what is off.
pub(crate) fn refuse_read_only(app: &mut App, plan: Plan, what: &str) {
    app.out.request = Some(Request::Refused(plan, "read-only mode".into()));
    app.message = Some(format!("read-only mode: {what} is off"));
}

/// `D` `R` `U` on the heatmap, node detail and groups.
pub(crate) fn start_action(app: &mut App, key: char) {
    let action = match key {
        'D' => NodeAction::Drain,
        'R' => NodeAction::Resume,
        'U' => NodeAction::Undrain,
        _ => return,
    };
    let nodes = action_targets(app);
    if nodes.is_empty() {
        return;
    }
    let label = chosen(app, nodes.len());
    if action == NodeAction::Drain {
        // In node detail, the node's most urgent flag says why; with marks
        // it would speak for nodes it is not on.
        let text = match app.screen {
            Screen::Detail if app.marked.is_empty() => app
                .node_in_detail()
                .and_then(view::diagnosis)
                .map(|(f, _)| f.drain_reason())
                .unwrap_or_default(),
            _ => String::new(),
        };
        open_drain(app, nodes, text, label);
        return;
    }
    if app.allowed.read_only {
        let plan = refused_plan(app, action, nodes, None);
        refuse_read_only(app, plan, action.verb());
        return;
    }
    if !app.allowed.actions && !to_kube(app) && !to_ray(app) {
        app.message = Some(format!("no scheduler: start with --slurm to {}", action.verb()));
        return;
    }
    match plan_for(app, action, nodes, None) {
        Ok(mut plan) => {
            let guard = guard_for(app, &plan.nodes);
            // Only the typed names can send it, and then it is meant: the
            // audit log and the timeline say what it overrode.
            plan.force = guard.is_some();
            if let Some(g) = &guard {
                for (node, why) in &g.why {
                    plan.overrides.entry(node.clone()).or_default().push(why.clone());
                }
            }
            app.dialog = Some(Dialog::Confirm {
                plan,
                chosen: label,
                guard,
            });
        }
        Err(e) => app.message = Some(e),
    }
}

/// The drain dialog with `text` filled in (editable), after the same
/// refusals everywhere a drain starts: read-only (logged), no scheduler.
pub(crate) fn open_drain(app: &mut App, nodes: Vec<String>, text: String, chosen: String) {
    if app.allowed.read_only {
        let reason = (!text.trim().is_empty()).then(|| action::owned_reason(text.trim()));
        let plan = refused_plan(app, NodeAction::Drain, nodes, reason);
        refuse_read_only(app, plan, "drain");
        return;
    }
    if !app.allowed.actions && !to_kube(app) && !to_ray(app) {
        app.message = Some("no scheduler: start with --slurm, --kubernetes or --ray to drain".into());
        return;
    }
    app.dialog = Some(Dialog::Reason {
        action: NodeAction::Drain,
        nodes,
        text,
        chosen,
    });
}

/// `D` on the alerts screen: drain the selected alert's node, the catalog's
/// reason for its flag filled in. A row folding several nodes is not one
/// node: it says how to get one.
pub(crate) fn drain_alert(app: &mut App) {
    let Some((node, nodes, text)) = app
        .alert_rows()
        .get(app.alerts.cursor)
        .map(|r| (r.node, r.nodes, r.flag.drain_reason()))
    else {
        app.message = Some("no alert selected: nothing to drain".into());
        return;
    };
    if nodes > 1 {
        app.message = Some(format!("this row folds {nodes} nodes: z unfolds it, then D drains one"));
        return;
    }
    let Some(name) = app.store.nodes.get(node).map(|n| n.target.name.clone()) else {
        return;
    };
    open_drain(app, vec![name], text, "the alert's node".into());
}

/// On the bench screen, `D` offers to drain the selected node that failed,
/// with the failure as the reason.
pub(crate) fn drain_failed_bench_node(app: &mut App) {
    let Some((&node, b)) = app.store.bench.iter().nth(app.bench.cursor) else {
        return;
    };
    match b.outcome() {
        Outcome::Failed | Outcome::Error => {}
        other => {
            app.message = Some(format!("this node's burn-in is {}: nothing to drain for", other.word()));
            return;
        }
    }
    let text = b.failure();
    let Some(name) = app.store.nodes.get(node).map(|n| n.target.name.clone()) else {
        return;
    };
    open_drain(app, vec![name], text, "the failed node".into());
}

/// The guard for putting `names` back in service, when someone else holds
/// any of them, or any has an active flag that keeps it out of service
/// (a GPU missing or lost): either is put back only by typing its name.
fn guard_for(app: &App, names: &[String]) -> Option<Guard> {
    let held: Vec<(String, String)> = names
        .iter()
        .filter_map(|name| {
            let i = app.store.nodes.iter().position(|n| &n.target.name == name)?;
            let node = &app.store.nodes[i];
            let fault = crate::model::flag::keeping_out(node.detector.active()).map(|f| format!("{f} still active"));
            let other = if to_kube(app) {
                app.store
                    .kube
                    .of(i)
                    .filter(|k| matches!(k.hold(), Hold::Other))
                    .map(|k| k.held_by())
            } else {
                node.scheduler
                    .as_ref()
                    .map(|v| &v.node)
                    .filter(|s| matches!(s.hold(), Hold::Other))
                    .map(|s| s.held_by())
            };
            let why: Vec<String> = [other, fault].into_iter().flatten().collect();
            (!why.is_empty()).then(|| (name.clone(), why.join("; ")))
        })
        .collect();
    Guard::over("held out of service", held)
}

/// A return to service of `names`, decided from what the console holds:
/// Slurm's (or Kubernetes') view of each node, and what their agents say (a burn-in their
/// own agent recorded since the drain began lets a node go back without
/// another).
fn prepare_return(app: &App, names: &[String], suite: Suite, force: bool) -> Prepared {
    let store = &app.store;
    let nodes: Vec<&crate::store::NodeState> = names
        .iter()
        .filter_map(|name| store.nodes.iter().find(|n| &n.target.name == name))
        .collect();
    let targets: Vec<crate::model::target::Target> = nodes.iter().map(|n| n.target.clone()).collect();
    let index = |name: &str| store.nodes.iter().position(|n| n.target.name == name);
    let th = &store.thresholds;
    let gate = |name: &str| {
        store
            .nodes
            .iter()
            .find(|n| n.target.name == name)
            .map(|n| n.gate(None, th))
            .unwrap_or_default()
    };
    // The typed name lifts a fault or someone else's drain, never the jobs:
    // a burn-in beside them is `node return --beside-jobs` alone.
    let how = crate::ops::return_to_service::Overrides {
        force,
        beside_jobs: false,
    };
    use crate::ops::return_to_service::prepare;
    if to_kube(app) {
        let kube = |name: &str| index(name).and_then(|i| store.kube.of(i));
        prepare(names, action::Scheduler::Kubernetes, kube, gate, &targets, suite, how)
    } else {
        let slurm = |name: &str| {
            index(name)
                .and_then(|i| store.nodes[i].scheduler.as_ref())
                .map(|v| &v.node)
        };
        prepare(names, action::Scheduler::Slurm, slurm, gate, &targets, suite, how)
    }
}

/// `T` on the heatmap and node detail: return the marked nodes (or the one
/// in view) to service.
pub(crate) fn start_return(app: &mut App) {
    let names = action_targets(app);
    if names.is_empty() {
        return;
    }
    if app.allowed.read_only {
        let plan = prepare_return(app, &names, Suite::Quick, false).plan;
        refuse_read_only(app, plan, "return to service");
        return;
    }
    if !app.allowed.actions && !to_kube(app) {
        app.message = Some("no scheduler: start with --slurm or --kubernetes to return nodes to service".into());
        return;
    }
    let guard = guard_for(app, &names);
    let prepared = prepare_return(app, &names, Suite::Quick, guard.is_some());
    app.dialog = Some(Dialog::ConfirmReturn {
        prepared: Box::new(prepared),
        chosen: chosen(app, names.len()),
        guard,
    });
}

pub(crate) fn start_bench(app: &mut App) {
    let names = action_targets(app);
    let nodes: Vec<usize> = app
        .store
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| names.contains(&n.target.name))
        .map(|(i, _)| i)
        .collect();
    if nodes.is_empty() {
        return;
    }
    if app.allowed.read_only {
        let plan = Plan::new(NodeAction::Bench, names, Some("suite quick".into()), vec![]);
        refuse_read_only(app, plan, "burn-in");
        return;
    }
    if !app.allowed.bench {
        app.message = Some("burn-in needs the agents' token: bench_token_file in the config".into());
        return;
    }
    let guard = bench_guard(app, &nodes);
    app.dialog = Some(Dialog::ConfirmBench {
        nodes,
        suite: Suite::Quick,
        guard,
    });
}

/// The guard for a burn-in on `nodes`: a node with jobs running (a burn-in
/// takes its GPUs from them) or held out of service by someone else (an
/// RMA, maintenance) runs one only with its name typed, each named with
/// what is on it and who holds it.
fn bench_guard(app: &App, nodes: &[usize]) -> Option<Guard> {
    let busy: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|&i| {
            let n = app.store.nodes.get(i)?;
            let v = n.scheduler.as_ref()?;
            let mut why: Vec<String> = v.jobs.iter().map(|j| format!("{} runs on it", job_text(j))).collect();
            if v.node.hold() == Hold::Other {
                why.push(v.node.held_by());
            }
            (!why.is_empty()).then(|| (n.target.name.clone(), why.join("; ")))
        })
        .collect();
    Guard::over("running jobs or held by someone else", busy)
}

/// `K` in node detail: cancel the Slurm job on the selected GPU (its
/// processes' job, as the agent maps them), after the same confirmation as
/// a drain, showing the exact `scancel` it runs and whose job it is. Where
/// Slurm's view of the node is known, the job must be in it: a stale
/// cgroup, a reused pid or a mapping gone wrong must not cancel someone's
/// job, so a job Slurm does not list on this node is refused, naming the
/// jobs it does list.
pub(crate) fn start_scancel(app: &mut App) {
    let Some(n) = app.node_in_detail() else { return };
    let gpu = n.last.as_ref().and_then(|s| s.gpus.get(app.detail.gpu));
    let Some(job) = gpu.and_then(|g| g.processes.iter().find_map(|p| p.job_id)) else {
        app.message = Some("no Slurm job on this GPU".into());
        return;
    };
    let name = n.target.name.clone();
    let (nodes, said) = match n.scheduler.as_ref() {
        Some(v) => match v.jobs.iter().find(|j| j.id == job) {
            Some(j) => (j.nodes.clone(), job_text(j)),
            None => {
                let listed: Vec<String> = v.jobs.iter().map(|j| j.id.to_string()).collect();
                let lists = match listed.as_slice() {
                    [] => "no job".to_string(),
                    [one] => format!("job {one}"),
                    many => format!("jobs {}", many.join(", ")),
                };
                app.message = Some(format!(
                    "not offering scancel: job {job} is not on {name} in Slurm, which lists {lists} there"
                ));
                return;
            }
        },
        // No scheduler's view of this node: what the agent says is all
        // there is, and the dialog says so.
        None => (
            vec![name.clone()],
            format!("job {job} · owner unknown (no Slurm view of {name})"),
        ),
    };
    let user = n.job_user(job).map(str::to_string);
    let nodes = if nodes.is_empty() { vec![name] } else { nodes };
    let plan = action::scancel_plan(job, user.as_deref(), nodes);
    if app.allowed.read_only {
        refuse_read_only(app, plan, "scancel");
        return;
    }
    if !app.allowed.actions {
        app.message = Some("no scheduler: start with --slurm to cancel jobs".into());
        return;
    }
    let chosen = format!("{said}, on {}", view::count(plan.nodes.len(), "node"));
    app.dialog = Some(Dialog::Confirm {
        plan,
        chosen,
        guard: None,
    });
}

/// "job 4411 · alice · train · 2h13m": whose job, what, and how long it has run.
fn job_text(j: &crate::model::sched::Job) -> String {
    format!(
        "job {} · {} · {} · {}",
        j.id,
        j.user,
        j.name,
        view::human_span(j.elapsed_s.saturating_mul(1000).min(i64::MAX as u64) as i64)
    )
}

/// `x` (SIGTERM) or `X` (SIGKILL) in node detail: the selected GPU's
/// processes, signalled by the node's agent after a confirmation that lists
/// every pid.
pub(crate) fn start_signal(app: &mut App, kill: bool) {
    let node = app.detail.node;
    let Some(n) = app.store.nodes.get(node) else { return };
    let Some(g) = n.last.as_ref().and_then(|s| s.gpus.get(app.detail.gpu)) else {
        return;
    };
    let pids: Vec<u32> = g.processes.iter().map(|p| p.pid).collect();
    if pids.is_empty() {
        app.message = Some("no process on this GPU".into());
        return;
    }
    let plan = crate::ops::signal::plan(&n.target, g.index, &pids, kill);
    if app.allowed.read_only {
        refuse_read_only(app, plan, "signalling processes");
        return;
    }
    if !app.allowed.bench {
        app.message = Some("signalling needs the agents' control token: bench_token_file in the config".into());
        return;
    }
    app.dialog = Some(Dialog::ConfirmSignal { node, plan });
}
