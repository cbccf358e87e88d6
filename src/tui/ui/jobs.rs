//! The job view (`J`): one line per Slurm job holding GPUs on the shown
//! nodes, the least busy first, so "job 4152 holds 64 idle GPUs" is one line.
//! Enter shows the job's nodes on the heatmap.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, Widget};

use super::{block, line_at, severity_style};
use crate::ingest::hostlist;
use crate::tui::app::App;
use crate::tui::view;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let rows = view::jobs(&app.store, &app.visible());
    let gpus: usize = rows.iter().map(|r| r.gpus).sum();
    let b = block(
        t,
        format!(" jobs · {} holding {gpus} GPUs · least busy first ", rows.len()),
    );
    let inner = b.inner(area);
    b.render(area, buf);
    if rows.is_empty() {
        let msg = "no GPU process belongs to a Slurm job on the shown nodes";
        line_at(Line::from(Span::styled(msg, t.muted)), inner, 0, buf);
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let first = app.jobs_cursor.saturating_sub(height.saturating_sub(1));
    let lines = rows.iter().enumerate().skip(first).take(height).map(|(pos, r)| {
        let names: Vec<String> = r
            .nodes
            .iter()
            .map(|&i| app.store.nodes[i].target.name.clone())
            .collect();
        let util = r
            .util_pct
            .map(|u| format!("{u:>4.0}%"))
            .unwrap_or_else(|| "    -".into());
        let flags = match r.worst {
            Some(s) => Span::styled(format!("{} ({})", r.flags, s.name()), severity_style(t, s)),
            None => Span::styled("-", t.muted),
        };
        let row = Row::new(vec![
            Cell::from(r.id.to_string()),
            Cell::from(r.user.clone().unwrap_or_else(|| "-".into())),
            Cell::from(r.name.clone().unwrap_or_else(|| "-".into())),
            Cell::from(format!("{:>4}", r.gpus)),
            Cell::from(util),
            Cell::from(flags),
            Cell::from(hostlist::compress(&names)),
        ]);
        if pos == app.jobs_cursor {
            row.style(t.selected)
        } else {
            row
        }
    });
    let widths = [
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(14),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(12),
        Constraint::Min(10),
    ];
    let header = Row::new(["job", "user", "name", "GPUs", "util", "flags", "nodes"]).style(t.title);
    Table::new(lines, widths)
        .header(header)
        .column_spacing(1)
        .render(inner, buf);
}
