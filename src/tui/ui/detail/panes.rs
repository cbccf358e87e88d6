//! The node detail's panes below the GPU table: history, NVLink (AMD:
//! XGMI), InfiniBand and processes.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Sparkline, Table, Widget};

use super::super::{block, line_at};
use crate::model::sample::Vendor;
use crate::store::NodeState;
use crate::store::history::{COARSE, Point};
use crate::tui::app::{App, Pane};
use crate::tui::theme::Theme;
use crate::tui::view::{gpu_info, human_age, human_rate, opt};
use fleetop_proto::ib::counter_name;

use super::GIB;

/// The node's GPUs' vendor, for the words of its links.
pub(super) fn vendor(n: &NodeState) -> Vendor {
    n.info.as_ref().map(|i| i.vendor()).unwrap_or_default()
}

pub(super) fn pane_block<'a>(t: &Theme, pane: Pane, vendor: Vendor) -> ratatui::widgets::Block<'a> {
    let tabs: Vec<Span<'a>> = Pane::ALL
        .iter()
        .map(|p| {
            let style = if *p == pane { t.title } else { t.muted };
            Span::styled(format!(" {} ", p.title_for(vendor)), style)
        })
        .collect();
    block(t, Line::from(tabs))
}

pub(super) fn render_pane(app: &App, n: &NodeState, pane: Pane, area: Rect, buf: &mut Buffer) {
    render_pane_in(app, n, pane, pane_block(&app.theme, pane, vendor(n)), area, buf);
}

pub(super) fn render_pane_in(
    app: &App,
    n: &NodeState,
    pane: Pane,
    b: ratatui::widgets::Block<'_>,
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &app.theme;
    let inner = b.inner(area);
    b.render(area, buf);
    match pane {
        Pane::History => render_history(app, n, inner, buf),
        Pane::Nvlink => render_nvlink(app, n, inner, buf),
        Pane::Infiniband => render_ib(t, n, inner, buf),
        Pane::Processes => render_processes(app, n, inner, buf),
        Pane::Timeline => super::super::timeline::render(app, n, inner, buf),
    }
}

/// Reads one series out of a history point.
type PointField = fn(&Point) -> u8;

/// Sparklines of the selected GPU over the kept history.
fn render_history(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    if app.detail.gpu >= n.history.gpus() {
        return;
    }
    let series: [(&str, PointField); 4] = [
        ("util %", |p| p.util_pct),
        ("mem %", |p| p.mem_pct),
        ("temp °C", |p| p.temp_c),
        ("power %", |p| p.power_pct),
    ];
    let label_w = 16u16;
    let width = area.width.saturating_sub(label_w) as usize;
    // The points inside the zoom's window (the whole history for "all").
    let newest = n.history.newest_ms().unwrap_or(0);
    let window = app.detail.zoom.window_ms();
    let shown: Vec<(i64, Point)> = n
        .history
        .points(app.detail.gpu)
        .filter(|(at, _)| newest - at < window)
        .collect();
    let oldest = shown.first().map_or(newest, |p| p.0);
    let cols = history_columns(&shown, width);
    // Four series, each as tall as the pane allows, a blank row between
    // where there is room, and a time axis at the bottom.
    let rows = area.height.saturating_sub(1).clamp(1, 4);
    let pitch = (area.height.saturating_sub(1) / rows).max(1);
    let h = if pitch > 1 { pitch - 1 } else { 1 };
    for (k, (name, get)) in series.iter().enumerate().take(rows as usize) {
        let y = area.y + k as u16 * pitch;
        let data: Vec<Option<u64>> = cols
            .iter()
            .map(|c| c.iter().map(get).filter(|&v| v != 255).max().map(u64::from))
            .collect();
        let now = shown
            .last()
            .map(|p| get(&p.1))
            .filter(|&v| v != 255)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into());
        let label = format!("{name:<8}{now:>4}");
        buf.set_stringn(area.x, y, &label, label_w as usize, t.muted);
        // Every series is on a 0..100 scale (percent, or °C).
        Sparkline::default()
            .data(data.iter().map(|v| v.map(|x| x.min(100))).collect::<Vec<_>>())
            .max(100)
            .style(t.title)
            .render(
                Rect {
                    x: area.x + label_w,
                    y,
                    width: area.width.saturating_sub(label_w),
                    height: h,
                },
                buf,
            );
    }
    // The time axis: how long ago the left edge, the middle and the right are.
    let cols = cols.len();
    let axis_y = area.height - 1;
    let span = newest - oldest;
    let mut axis = vec![' '; width];
    let mut put = |at: usize, text: &str| {
        for (i, c) in text.chars().enumerate() {
            if let Some(slot) = axis.get_mut(at + i) {
                *slot = c;
            }
        }
    };
    if cols > 0 {
        put(0, &format!("-{}", human_age(span)));
        if cols > 30 {
            put(cols / 2 - 2, &format!("-{}", human_age(span / 2)));
        }
        put(cols.saturating_sub(3), "now");
    }
    let label = format!("GPU {} · {}", app.detail.gpu, app.detail.zoom.name());
    buf.set_stringn(area.x, area.y + axis_y, &label, label_w as usize, t.muted);
    let axis: String = axis.into_iter().collect();
    buf.set_stringn(area.x + label_w, area.y + axis_y, axis, width, t.muted);
}

/// The points of each column, oldest first: as many columns as there are
/// seconds (the newest points' step) up to `width`, each the points of its
/// stretch of time. Older history is kept five seconds to a point, so a
/// column past the newest two minutes may get none of its own: it shows
/// the point whose five seconds cover it. A stretch with no sample at all
/// (the node was silent) stays empty.
pub(super) fn history_columns(shown: &[(i64, Point)], width: usize) -> Vec<Vec<Point>> {
    let (Some(&(oldest, _)), Some(&(newest, _))) = (shown.first(), shown.last()) else {
        return Vec::new();
    };
    // The newest points' average step (agents' times jitter by a few ms),
    // and each point in the slot nearest its time.
    let recent = &shown[shown.len().saturating_sub(11)..];
    let step = ((newest - recent[0].0) / (recent.len() as i64 - 1).max(1)).max(1);
    let slot = |at: i64| usize::try_from((at - oldest + step / 2) / step).unwrap_or(0);
    let slots = slot(newest) + 1;
    let per_col = slots.div_ceil(width.max(1)).max(1);
    let mut cols = vec![Vec::new(); slots.div_ceil(per_col)];
    for (at, p) in shown {
        if let Some(c) = cols.get_mut(slot(*at) / per_col) {
            c.push(*p);
        }
    }
    // A folded point covers the seconds up to the next point; a longer
    // silence (a node that sent nothing) stays empty.
    for w in shown.windows(2) {
        let (a, b) = (slot(w[0].0), slot(w[1].0));
        // (Times held in order, except after a clock that stepped back.)
        if b.checked_sub(a).is_some_and(|gap| gap <= usize::from(COARSE)) {
            for c in cols.iter_mut().take(b / per_col).skip(a / per_col + 1) {
                if c.is_empty() {
                    c.push(w[0].1);
                }
            }
        }
    }
    cols
}

fn render_nvlink(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let Some(g) = n.last.as_ref().and_then(|s| s.gpus.get(app.detail.gpu)) else {
        return;
    };
    let Some(gi) = gpu_info(n, g.index) else { return };
    if gi.nvlinks.is_empty() {
        let none = format!("no {} on this GPU", gi.links_word());
        line_at(Line::from(Span::styled(none, t.muted)), area, 0, buf);
        return;
    }
    // A lost GPU's links carry nothing: its last rates are history, not now.
    let rates = n.derived.gpus.get(app.detail.gpu).filter(|_| !g.is_lost());
    let row = |i: usize| {
        let l = &gi.nvlinks[i];
        // No reading (a GPU that fell off the bus, link states AMD SMI
        // could not read): not known, never "up".
        let state = match g.nvlink_up(i).filter(|_| !g.is_lost()) {
            Some(true) => Span::styled("up", t.ok),
            Some(false) => Span::styled("down", t.crit),
            None => Span::styled("?", t.muted),
        };
        Row::new(vec![
            Cell::from(format!("{}", l.link)),
            Cell::from(state),
            Cell::from(human_rate(rates.and_then(|r| r.tx(i)))),
            Cell::from(human_rate(rates.and_then(|r| r.rx(i)))),
            // The GPU or switch at the far end (a fault may be there).
            Cell::from(l.peer_pci_bus_id.as_deref().map_or("-".into(), short_bus_id)),
        ])
    };
    // 18 links do not fit one column at 24 rows: as many columns as fit,
    // two at 80 (38 wide and a gap).
    const COL_W: u16 = 39;
    let per_col = area.height.saturating_sub(1).max(1) as usize;
    let cols = (area.width / COL_W).max(1) as usize;
    let links: Vec<usize> = (0..gi.nvlinks.len()).collect();
    for (c, chunk) in links.chunks(per_col).take(cols).enumerate() {
        let widths = [4, 5, 10, 10, 5].map(Constraint::Length);
        let header = Row::new(["link", "state", "tx", "rx", "peer"]).style(t.title);
        let col = Rect {
            x: area.x + c as u16 * COL_W,
            width: (COL_W - 1).min(area.width),
            ..area
        };
        Table::new(chunk.iter().map(|&i| row(i)), widths)
            .header(header)
            .render(col, buf);
    }
}

/// A PCI bus id without the usual domain 0 and function 0 ("0000:05:00.0"
/// is "05:00"), escaped: it came from the node.
fn short_bus_id(id: &str) -> String {
    let id = id
        .strip_prefix("0000:")
        .or_else(|| id.strip_prefix("00000000:"))
        .unwrap_or(id);
    let id = id.strip_suffix(".0").unwrap_or(id);
    fleetop_proto::input::printable(id, 16)
}

fn render_ib(t: &Theme, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let Some(s) = &n.last else { return };
    if s.ib_ports.is_empty() {
        line_at(Line::from(Span::styled("no InfiniBand ports", t.muted)), area, 0, buf);
        return;
    }
    let rows = s.ib_ports.iter().map(|p| {
        let r = n.derived.ib.get(p.port as usize);
        let errors: Vec<String> = r
            .map(|r| {
                r.errors
                    .iter()
                    .enumerate()
                    .filter_map(|(i, d)| {
                        d.and_then(|d| d.value())
                            .filter(|&v| v > 0)
                            .map(|v| format!("{} +{v}", counter_name(i)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let state = opt(p.state.as_deref());
        Row::new(vec![
            Cell::from(n.ib_port_name(p.port)),
            Cell::from(Span::styled(state, if p.is_down() { t.crit } else { t.ok })),
            Cell::from(format!("{}G", opt(p.rate_gbps))),
            Cell::from(human_rate(r.and_then(|r| r.tx_bytes_per_s))),
            Cell::from(human_rate(r.and_then(|r| r.rx_bytes_per_s))),
            Cell::from(Span::styled(
                if errors.is_empty() {
                    "-".into()
                } else {
                    errors.join(" ")
                },
                t.warn,
            )),
        ])
    });
    let widths = [10, 7, 5, 10, 10, 30].map(Constraint::Length);
    let header = Row::new(["port", "state", "rate", "tx", "rx", "errors/interval"]).style(t.title);
    Table::new(rows, widths).header(header).render(area, buf);
}

fn render_processes(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let (t, ray, node) = (&app.theme, app.store.ray.as_ref(), app.detail.node);
    let Some(s) = &n.last else { return };
    // The job column: Slurm's job, else the Ray job whose worker has the pid.
    let job = |p: &crate::model::sample::GpuProcess| match (p.job_id, ray.and_then(|r| r.work_of_pid(node, p.pid))) {
        (Some(id), _) => id.to_string(),
        (None, Some(w)) => format!("ray:{}", w.job),
        (None, None) => "-".into(),
    };
    let rows: Vec<Row<'_>> = s
        .gpus
        .iter()
        .flat_map(|g| g.processes.iter().map(move |p| (g.index, p)))
        .map(|(gpu, p)| {
            // Who runs it and what, as nvitop shows: the owner on the node
            // and the command line, from the agent's /proc.
            Row::new(vec![
                Cell::from(gpu.to_string()),
                Cell::from(p.pid.to_string()),
                Cell::from(format!("{:.1} GiB", p.used_mem_bytes as f64 / GIB)),
                Cell::from(job(p)),
                Cell::from(p.owner.as_deref().unwrap_or("-")),
                Cell::from(Span::styled(p.command.as_deref().unwrap_or("-"), t.muted)),
            ])
        })
        .collect();
    if rows.is_empty() {
        line_at(Line::from(Span::styled("no GPU processes", t.muted)), area, 0, buf);
        return;
    }
    let widths = [
        Constraint::Length(4),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    let header = Row::new(["GPU", "pid", "memory", "job", "user", "command"]).style(t.title);
    Table::new(rows, widths).header(header).render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::history_columns;
    use crate::store::history::Point;

    #[test]
    fn columns_narrower_than_a_folded_point_show_that_point() {
        // Ten minutes as the store keeps them: 5 s a point, then 1 s for the
        // newest two minutes; 600 s over 200 columns is 3 s a column.
        let at = |util: u8| Point {
            util_pct: util,
            ..Point::NONE
        };
        let mut shown: Vec<(i64, Point)> = (0..96).map(|i| (i * 5000, at(if i == 20 { 97 } else { 10 }))).collect();
        shown.extend((480..600).map(|s| (s * 1000, at(10))));
        let cols = history_columns(&shown, 200);
        assert_eq!(cols.len(), 200);
        assert!(cols.iter().all(|c| !c.is_empty()), "no column without a point");
        let spike: Vec<usize> = (cols.iter().enumerate())
            .filter(|(_, c)| c.iter().any(|p| p.util_pct == 97))
            .map(|(i, _)| i)
            .collect();
        // 100 s to 105 s: columns 33 and 34 (3 s each).
        assert_eq!(spike, [33, 34]);
        // A node silent for 30 s of the newest two minutes: those columns
        // stay empty rather than repeat the last point.
        shown.retain(|(t, _)| !(540_000..570_000).contains(t));
        let cols = history_columns(&shown, 200);
        let empty: Vec<usize> = (cols.iter().enumerate())
            .filter(|(_, c)| c.is_empty())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(empty, (180..190).collect::<Vec<_>>());
    }
}
