//! An action running, then its result node by node.

use ratatui::buffer::Buffer;
use ratatui::text::{Line, Span};

use super::{Room, wrap};
use crate::model::action::{NodeAction, Plan};
use crate::model::bench::Outcome;
use crate::tui::app::App;
use crate::tui::ui::{cut, popup};
use crate::tui::view::count;

pub(super) fn running(app: &App, plan: &Plan, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let n = count(plan.nodes.len(), "node");
    let lines = match plan.action {
        NodeAction::Signal => vec![Line::from(format!(" signal {n}… asking the node's agent"))],
        NodeAction::Return => {
            let mut lines = vec![Line::from(format!(
                " return {n}… a burn-in first where needed (minutes), then the resume"
            ))];
            lines.extend(return_progress(app, plan, inner));
            lines.push(Line::from(Span::styled(
                " Esc hides this: the result shows when it is done",
                t.muted,
            )));
            lines
        }
        a => vec![Line::from(format!(
            " {} {n}… then reading the result back from {}",
            a.verb(),
            plan.scheduler.title()
        ))],
    };
    popup(t, "running", lines, width, area, buf);
}

/// Where each returning node's burn-in stands, in the CLI's words:
/// "gpu03  burn-in [24/33] nvlink_bw" (the bench screen has the checks).
fn return_progress(app: &App, plan: &Plan, width: usize) -> Vec<Line<'static>> {
    let name_w = name_width(plan.nodes.iter().map(String::as_str));
    plan.nodes
        .iter()
        .map(|name| {
            let state = app
                .store
                .nodes
                .iter()
                .position(|n| &n.target.name == name)
                .and_then(|i| app.store.bench.get(&i));
            // A node with no burn-in of its own (one passed since the
            // drain) waits for the resume.
            let now = match state.map(|b| (b, b.outcome())) {
                None => "no burn-in needed: resume next".to_string(),
                Some((b, Outcome::Running)) if b.total > 0 => format!(
                    "burn-in [{}/{}] {}",
                    b.done,
                    b.total,
                    fleetop_proto::input::printable(&b.step, 80)
                ),
                Some((_, Outcome::Running)) => "burn-in starting".to_string(),
                Some((_, Outcome::Passed)) => "burn-in passed: resuming".to_string(),
                Some((_, Outcome::Failed)) => "burn-in failed: stays drained".to_string(),
                Some(_) => "burn-in did not finish: stays drained".to_string(),
            };
            Line::from(cut(&format!("   {name:<name_w$}  {now}"), width))
        })
        .collect()
}

/// The column of node names in a list of them.
fn name_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names.map(|n| n.chars().count()).max().unwrap_or(0).clamp(4, 24)
}

pub(super) fn render(app: &App, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let Some(r) = &app.store.last_action else { return };
    let mut lines = Vec::new();
    // A node's message is wrapped under its own column, never cut at the
    // box's edge: a failure's why is what the person needs.
    let name_w = name_width(r.results.iter().map(|n| n.node.as_str()));
    let lead = " ".repeat(name_w + 8);
    for n in &r.results {
        let mut message = wrap(&n.message, inner.saturating_sub(name_w + 8).max(20), "").into_iter();
        lines.push(Line::from(vec![
            Span::raw(format!(" {:<name_w$} ", n.node)),
            if n.ok {
                Span::styled("ok    ", t.ok)
            } else {
                Span::styled("FAIL  ", t.crit)
            },
            Span::raw(message.next().unwrap_or_default()),
        ]));
        lines.extend(message.map(|m| Line::from(format!("{lead}{m}"))));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        format!(" logged to {}   any key closes", app.files.audit.display()),
        t.muted,
    )));
    let title = format!(
        "{} {}",
        r.action.verb(),
        if r.ok() { "done" } else { "failed on some nodes" }
    );
    popup(t, &title, lines, width, area, buf);
}
