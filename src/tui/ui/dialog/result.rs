//! An action running, then its result node by node.

use ratatui::buffer::Buffer;
use ratatui::text::{Line, Span};

use super::Room;
use crate::model::action::{NodeAction, Plan};
use crate::tui::app::App;
use crate::tui::ui::popup;
use crate::tui::view::count;

pub(super) fn running(app: &App, plan: &Plan, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, area, .. } = room;
    let n = count(plan.nodes.len(), "node");
    let lines = match plan.action {
        NodeAction::Signal => vec![Line::from(format!(" signal {n}… asking the node's agent"))],
        NodeAction::Return => vec![
            Line::from(format!(
                " return {n}… a burn-in first where needed (minutes), then the resume"
            )),
            Line::from(Span::styled(
                " Esc hides this: the result shows when it is done",
                t.muted,
            )),
        ],
        a => vec![Line::from(format!(
            " {} {n}… then reading the result back from {}",
            a.verb(),
            match plan.scheduler {
                crate::model::action::Scheduler::Kubernetes => "Kubernetes",
                _ => "Slurm",
            }
        ))],
    };
    popup(t, "running", lines, width, area, buf);
}

pub(super) fn render(app: &App, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, area, .. } = room;
    let Some(r) = &app.store.last_action else { return };
    let mut lines = Vec::new();
    for n in &r.results {
        lines.push(Line::from(vec![
            Span::raw(format!(" {:<12}", n.node)),
            if n.ok {
                Span::styled("ok    ", t.ok)
            } else {
                Span::styled("FAIL  ", t.crit)
            },
            Span::raw(n.message.clone()),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        format!(" logged to {}   any key closes", app.audit_path.display()),
        t.muted,
    )));
    let title = format!(
        "{} {}",
        r.action.verb(),
        if r.ok() { "done" } else { "failed on some nodes" }
    );
    popup(t, &title, lines, width, area, buf);
}
