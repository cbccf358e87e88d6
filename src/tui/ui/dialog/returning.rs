//! The return to service: what happens to each node, and what runs.

use ratatui::buffer::Buffer;
use ratatui::text::{Line, Span};

use super::{Room, answers, command_lines, guard_lines, wrap};
use crate::model::returning::Prepared;
use crate::tui::app::App;
use crate::tui::modal::Guard;
use crate::tui::ui::popup;

pub(super) fn render(
    app: &App,
    prepared: &Prepared,
    chosen: &str,
    guard: Option<&Guard>,
    room: Room,
    buf: &mut Buffer,
) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let suite = prepared.suite.name();
    let head = format!(" Return {chosen} to service ({suite} burn-in where none passed since the drain):");
    let mut lines: Vec<Line<'_>> = wrap(&head, inner, " ").into_iter().map(Line::from).collect();
    for d in prepared.describe() {
        lines.extend(wrap(&format!("   {d}"), inner, "     ").into_iter().map(Line::from));
    }
    lines.push(Line::from(""));
    if prepared.plan.commands.is_empty() {
        lines.push(Line::from(Span::styled(
            " Nothing runs: every node is left as it is.",
            t.muted,
        )));
    } else {
        lines.push(Line::from(Span::styled(
            " Runs (the resume only where the burn-in passes):",
            t.muted,
        )));
        lines.extend(command_lines(&prepared.plan, inner));
    }
    if !prepared.bench_targets().is_empty() && !app.allowed.bench {
        let out = match prepared.plan.scheduler {
            crate::model::action::Scheduler::Kubernetes => "cordoned",
            _ => "drained",
        };
        let no_token = format!(" No agents' token (bench_token_file): no burn-in runs; those nodes stay {out}.");
        lines.extend(
            wrap(&no_token, inner, " ")
                .into_iter()
                .map(|l| Line::from(Span::styled(l, t.warn))),
        );
    }
    lines.push(Line::from(""));
    match guard {
        Some(g) => lines.extend(guard_lines(t, g, Some(("Tab", "quick/full")), inner)),
        None => lines.push(answers(t, "run", &[("s", "quick/full")], "cancel")),
    }
    popup(t, "return to service", lines, width, area, buf);
}
