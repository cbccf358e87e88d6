//! Burn-in: per node, a progress bar, the step it is on, its latest figure
//! and its verdicts; a failed node says why, and `D` offers to drain it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{block, line_at};
use crate::model::bench::Verdict;
use crate::tui::app::App;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let b = block(t, format!(" burn-in · {} node(s) ", app.store.bench.len()));
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

        let (state, style) = match (s.finished, s.failed()) {
            (true, true) => ("FAILED", t.crit),
            (true, false) => ("passed", t.ok),
            (false, true) => ("failing", t.crit),
            (false, false) => ("running", t.title),
        };
        let name_style = if pos == app.bench_cursor { t.selected } else { t.base };
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
            Span::styled(format!("{:<8}", state), style),
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
        if s.failed() {
            line_at(
                Line::from(Span::styled(format!("    {}  (D drains it)", s.failure()), t.crit)),
                inner,
                row,
                buf,
            );
            row += 1;
        }
    }
}
