//! Node detail's timeline pane (`5`): what happened to the node and who did
//! it, newest first: flags raised and cleared, drains, resumes, returns,
//! burn-ins, signals, and the XIDs of its agent's fault journal. The answer
//! to "why is this node drained, and since when" at 3 a.m.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::{line_at, severity_style};
use crate::model::timeline::{Event, What};
use crate::store::NodeState;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// The column of who acted: account names are short; longer ones are cut.
const BY_MAX: usize = 10;

pub(super) fn render(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    if area.width == 0 || area.height == 0 {
        return;
    }
    let len = n.timeline.events().len();
    if len == 0 {
        Paragraph::new(Span::styled(
            "Nothing has happened to this node since fleetop began keeping its timeline. \
             Flags raised and cleared, drains, resumes, returns, burn-ins, signals and \
             the XIDs of its agent's fault journal show here, newest first.",
            t.muted,
        ))
        .wrap(Wrap { trim: true })
        .render(area, buf);
        return;
    }
    // A header row where there is room for it and an event.
    let header = area.height >= 3;
    let rows = usize::from(area.height) - usize::from(header);
    let first = app.detail.timeline_scroll.min(len - 1);
    // At most one event a row: enough to size the columns by.
    let candidates: Vec<&Event> = n.timeline.events().rev().skip(first).take(rows).collect();
    // Dates only where an event is not from today (UTC), for every row
    // shown, so the columns line up.
    let today = day(app.now_ms);
    let dated = candidates.iter().any(|e| day(e.time_ms) != today);
    let time_w = if dated { 19 } else { 8 };
    let by_w = candidates
        .iter()
        .map(|e| e.by.chars().count())
        .max()
        .unwrap_or(2)
        .clamp(2, BY_MAX);
    // Each event whole, wrapped under its own column: the reason of a
    // drain is the point, and at 80 columns it is longer than a row.
    let what_x = time_w + 2 + by_w + 2;
    let what_w = usize::from(area.width).saturating_sub(what_x);
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut events = 0;
    for e in &candidates {
        let what = what_text(e);
        let wrapped = super::dialog::wrap(&what, what_w, "");
        // The last event may be cut at the pane's end: scrolling shows it whole.
        if lines.len() >= rows {
            break;
        }
        let by: String = e.by.chars().take(by_w).collect();
        let style = what_style(t, &e.what);
        for (k, w) in wrapped.into_iter().enumerate() {
            let lead = if k == 0 {
                vec![
                    Span::styled(format!("{:<time_w$}  ", when(e.time_ms, dated)), t.muted),
                    Span::raw(format!("{by:<by_w$}  ")),
                ]
            } else {
                vec![Span::raw(" ".repeat(what_x))]
            };
            let mut spans = lead;
            spans.push(Span::styled(w, style));
            lines.push(Line::from(spans));
        }
        events += 1;
    }
    if header {
        let head = Line::from(vec![
            Span::styled(format!("{:<time_w$}  {:<by_w$}  what", "time UTC", "by"), t.title),
            Span::styled(
                format!("   newest first · {}-{} of {len}", first + 1, first + events),
                t.muted,
            ),
        ]);
        line_at(head, area, 0, buf);
    }
    for (i, l) in lines.into_iter().take(rows).enumerate() {
        line_at(l, area, (i + usize::from(header)) as u16, buf);
    }
}

/// The event in words, without the "by alice" the column already says.
fn what_text(e: &Event) -> String {
    let line = e.line();
    match line.strip_suffix(&format!(" by {}", e.by)) {
        Some(s) => s.to_string(),
        None => line,
    }
}

/// The day (UTC) of a time, to tell today's events from older ones.
fn day(ms: i64) -> Option<chrono::NaiveDate> {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.date_naive())
}

/// "14:03:07", or "2025-12-31 23:50:02" where dates are shown.
fn when(ms: i64, dated: bool) -> String {
    let fmt = if dated { "%Y-%m-%d %H:%M:%S" } else { "%H:%M:%S" };
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format(fmt).to_string())
        .unwrap_or_else(|| "?".into())
}

/// A raised flag in its severity's style, a failure in crit, what cleared
/// or went well plain.
fn what_style(t: &Theme, w: &What) -> Style {
    match w {
        What::FlagRaised { severity, .. } => severity_style(t, *severity),
        What::FlagCleared { .. } => t.muted,
        What::Action { ok: false, .. } => t.crit,
        What::Action { .. } => t.base,
        What::Fault { .. } => t.warn,
        What::BurnIn { passed: false, .. } => t.crit,
        What::BurnIn { .. } => t.base,
        What::SchedulerState { .. } => t.warn,
    }
}
