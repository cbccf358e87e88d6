//! Burn-in: per node, a progress bar, the step it is on, its latest figure
//! and its verdicts; a failed node says why, and `D` offers to drain it.
//! A cancelled run is grey, not red; one that measured no GPU is incomplete.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{block, line_at};
use crate::model::bench::{Outcome, Verdict};
use crate::tui::app::App;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let b = block(
        t,
        format!(" burn-in · {} ", crate::tui::view::count(app.store.bench.len(), "node")),
    );
    let inner = b.inner(area);
    b.render(area, buf);
    if app.store.bench.is_empty() {
        line_at(
            Line::from(Span::styled("no burn-in yet: mark nodes (space) and press B", t.muted)),
            inner,
            0,
            buf,
        );
        return;
    }
    let name_w = app
        .store
        .bench
        .keys()
        .filter_map(|&i| app.store.nodes.get(i))
        .map(|n| n.target.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let bar_w = 20usize;
    let mut row = 0u16;
    for (pos, (&i, s)) in app.store.bench.iter().enumerate() {
        let Some(n) = app.store.nodes.get(i) else { continue };
        // An agent may report more done than total: the bar is then full,
        // never a panic.
        let filled = if s.total > 0 {
            (s.done.min(s.total) as usize * bar_w) / s.total as usize
        } else {
            0
        };

        let outcome = s.outcome();
        let (state, style) = match outcome {
            Outcome::Failed if !s.finished => ("failing", t.crit),
            Outcome::Failed => ("FAILED", t.crit),
            Outcome::Error | Outcome::Incomplete => (outcome.word(), t.warn),
            Outcome::Cancelled | Outcome::Refused => (outcome.word(), t.muted),
            Outcome::Passed => (outcome.word(), t.ok),
            Outcome::Running => (outcome.word(), t.title),
        };
        let name_style = if pos == app.bench.cursor { t.selected } else { t.base };
        // The latest figure actually measured (a skipped check has none).
        let latest = s
            .results
            .iter()
            .rev()
            .find_map(|r| {
                Some(format!(
                    "{} {:.1} {}",
                    r.name,
                    r.value?,
                    r.unit.as_deref().unwrap_or("")
                ))
            })
            .unwrap_or_default();
        let line = Line::from(vec![
            Span::styled(format!("{:<name_w$} ", n.target.name), name_style),
            Span::styled(format!("{:<11}", state), style),
            Span::styled("█".repeat(filled), style),
            Span::styled("░".repeat(bar_w - filled), t.muted),
            Span::raw(format!(" {:>2}/{:<2} ", s.done, s.total)),
            Span::styled(format!("{} pass ", s.count(Verdict::Pass)), t.ok),
            Span::styled(format!("{} warn ", s.count(Verdict::Warn)), t.warn),
            Span::styled(format!("{} fail ", s.count(Verdict::Fail)), t.crit),
            Span::styled(format!("{} skipped  ", s.count(Verdict::Skipped)), t.muted),
            Span::raw(if s.finished {
                latest
            } else {
                format!("{}  {latest}", s.step)
            }),
        ]);
        line_at(line, inner, row, buf);
        row += 1;
        let why = match outcome {
            Outcome::Failed | Outcome::Error => Some((format!("{}  (D drains it, c clears)", s.failure()), style)),
            Outcome::Incomplete => Some(("no GPU check ran: see the skipped reasons".to_string(), style)),
            Outcome::Cancelled => Some((
                "cancelled from the console: says nothing about the hardware".to_string(),
                style,
            )),
            Outcome::Refused => Some((
                format!(
                    "not run: {}: says nothing about the hardware",
                    s.error.as_deref().unwrap_or("refused")
                ),
                style,
            )),
            Outcome::Running | Outcome::Passed => None,
        };
        if let Some((text, style)) = why {
            line_at(Line::from(Span::styled(format!("    {text}"), style)), inner, row, buf);
            row += 1;
        }
        if app.bench.open == Some(i) {
            row = render_checks(app, s, inner, row, buf);
        }
    }
}

/// Every check of one node's run: its figure against its floor (and where
/// the floor comes from), its verdict and why.
fn render_checks(app: &App, s: &crate::model::bench::BenchState, area: Rect, mut row: u16, buf: &mut Buffer) -> u16 {
    let t = &app.theme;
    let head = format!(
        "    {:<22} {:>4} {:>14} {:>10}  {:<8} why / floor from",
        "check", "GPU", "figure", "floor", "verdict"
    );
    line_at(Line::from(Span::styled(head, t.title)), area, row, buf);
    row += 1;
    for r in &s.results {
        let unit = r.unit.as_deref().unwrap_or("");
        let figure = r.value.map(|v| format!("{v:.1} {unit}")).unwrap_or_else(|| "-".into());
        let floor = r.expected_min.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
        let style = match r.verdict {
            Verdict::Fail => t.crit,
            Verdict::Warn => t.warn,
            Verdict::Skipped => t.muted,
            Verdict::Pass => t.ok,
        };
        let why = r.reason.as_deref().or(r.expected_source.as_deref()).unwrap_or("");
        let gpu = r.gpu.map(|g| g.to_string()).unwrap_or_else(|| "-".into());
        let verdict = format!("{:?}", r.verdict).to_lowercase();
        let line = Line::from(vec![
            Span::raw(format!("    {:<22} {gpu:>4} {figure:>14} {floor:>10}  ", r.name)),
            Span::styled(format!("{verdict:<8}"), style),
            Span::styled(format!(" {why}"), t.muted),
        ]);
        line_at(line, area, row, buf);
        row += 1;
    }
    row
}
