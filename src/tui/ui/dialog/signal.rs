//! Signalling a GPU's processes: every process it reaches, by pid.

use ratatui::buffer::Buffer;
use ratatui::text::Line;

use super::{Room, answers, command_lines};
use crate::model::action::Plan;
use crate::tui::app::App;
use crate::tui::ui::{cut, popup};

pub(super) fn render(app: &App, plan: &Plan, node: usize, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let mut lines = vec![
        Line::from(format!(
            " {} on {}?",
            plan.reason.as_deref().unwrap_or(""),
            plan.nodes.join(" ")
        )),
        Line::from(" The node's agent sends it, only to processes it sees on that GPU:"),
    ];
    lines.extend(process_lines(app, node, plan, inner));
    lines.push(Line::from(""));
    lines.extend(command_lines(plan, inner));
    lines.push(Line::from(""));
    lines.push(answers(t, "send", &[], "cancel"));
    popup(t, "confirm signal", lines, width, area, buf);
}

/// Each process a signal would reach: pid, owner, job and command line, so
/// the person sees whose work ends before pressing `y`.
fn process_lines(app: &App, node: usize, plan: &Plan, width: usize) -> Vec<Line<'static>> {
    let procs: Vec<&crate::model::sample::GpuProcess> = app
        .store
        .nodes
        .get(node)
        .and_then(|n| n.last.as_ref())
        .map(|s| s.gpus.iter().flat_map(|g| g.processes.iter()).collect())
        .unwrap_or_default();
    let pids = plan
        .commands
        .iter()
        .filter_map(|c| c.iter().find_map(|a| a.strip_prefix("pid=")))
        .filter_map(|p| p.parse::<u32>().ok());
    pids.map(|pid| {
        let p = procs.iter().find(|p| p.pid == pid);
        let job = p
            .and_then(|p| p.job_id)
            .map(|j| format!(" job {j}"))
            .unwrap_or_default();
        let owner = p.and_then(|p| p.owner.as_deref()).unwrap_or("?");
        let command = p.and_then(|p| p.command.as_deref()).unwrap_or("");
        Line::from(cut(&format!("   pid {pid} · {owner}{job} · {command}"), width))
    })
    .collect()
}
