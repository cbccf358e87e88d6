//! The group view (`J`): one line per Slurm job, partition or rack (`b`
//! cycles) on the shown nodes, the least busy first, so "job 4152 holds 64
//! idle GPUs" is one line. Enter shows the group's nodes on the heatmap.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, Widget};

use super::{block, line_at, severity_style};
use crate::ingest::hostlist;
use crate::tui::app::App;
use crate::tui::view::{self, GroupBy};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let by = app.group_by;
    let rows = view::groups(&app.store, &app.visible(), by);
    let what = match by {
        GroupBy::Job => {
            let gpus: usize = rows.iter().map(|r| r.gpus).sum();
            format!("jobs · {} holding {}", rows.len(), view::count(gpus, "GPU"))
        }
        GroupBy::Partition => format!("partitions · {}", rows.len()),
        GroupBy::Rack => format!("racks · {}", rows.len()),
    };
    let b = block(t, format!(" {what} · least busy first · b: by {} ", by.next().name()));
    let inner = b.inner(area);
    b.render(area, buf);
    if rows.is_empty() {
        let msg = match by {
            GroupBy::Job => "no GPU process belongs to a Slurm job on the shown nodes",
            _ => "no node is shown",
        };
        line_at(Line::from(Span::styled(msg, t.muted)), inner, 0, buf);
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let first = app.group_cursor.saturating_sub(height.saturating_sub(1));
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
            Some(s) => Span::styled(r.flags_text(), severity_style(t, s)),
            None => Span::styled("-", t.muted),
        };
        let mut cells = vec![Cell::from(r.key.clone())];
        if by == GroupBy::Job {
            cells.push(Cell::from(r.user.clone().unwrap_or_else(|| "-".into())));
            cells.push(Cell::from(r.name.clone().unwrap_or_else(|| "-".into())));
        } else {
            cells.push(Cell::from(format!("{:>5}", r.nodes.len())));
        }
        cells.extend([
            Cell::from(format!("{:>4}", r.gpus)),
            Cell::from(format!("{:>4}", r.idle)),
            Cell::from(util),
            Cell::from(flags),
            Cell::from(hostlist::compress(&names)),
        ]);
        let row = Row::new(cells);
        if pos == app.group_cursor {
            row.style(t.selected)
        } else {
            row
        }
    });
    let (widths, header): (Vec<Constraint>, Vec<&str>) = match by {
        GroupBy::Job => (
            vec![
                Constraint::Length(8),
                Constraint::Length(8),
                Constraint::Length(10),
                Constraint::Length(4),
                Constraint::Length(4),
                Constraint::Length(5),
                Constraint::Length(13),
                Constraint::Min(10),
            ],
            vec!["job", "user", "name", "GPUs", "idle", "util", "flags", "nodes"],
        ),
        _ => (
            vec![
                Constraint::Length(12),
                Constraint::Length(5),
                Constraint::Length(4),
                Constraint::Length(4),
                Constraint::Length(5),
                Constraint::Length(13),
                Constraint::Min(10),
            ],
            vec![by.name(), "nodes", "GPUs", "idle", "util", "flags", "hosts"],
        ),
    };
    Table::new(lines, widths)
        .header(Row::new(header).style(t.title))
        .column_spacing(1)
        .render(inner, buf);
}
