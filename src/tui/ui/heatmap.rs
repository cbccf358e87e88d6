//! The fleet heatmap: a row per node, a cell per GPU coloured by the metric;
//! or, for big fleets, the dense wall: a cell per node.

use std::collections::BTreeMap;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::marks::{self, FREE};
use super::{block, cut, line_at, severity_style, status_span, whole_words};
use crate::model::flag::{FlagKind, Severity};
use crate::store::{NodeState, NodeStatus};
use crate::tui::app::App;
use crate::tui::layout::wall_geometry;
use crate::tui::theme::Theme;
use crate::tui::view::{self, Metric};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let vis = app.visible();
    let all = app.store.nodes.len();
    let shown = match (app.wall_active(), vis.len() == all) {
        (true, true) => format!("{all} wall"),
        (true, false) => format!("{} of {all} wall", vis.len()),
        (false, true) => view::count(all, "node"),
        // "1 of 16 nodes": the noun goes with the fleet's count.
        (false, false) => format!("{} of {}", vis.len(), view::count(all, "node")),
    };
    let title = format!(" {shown} · {} ", app.metric.name());
    let b = block(&app.theme, title);
    let inner = b.inner(area);
    b.render(area, buf);
    if inner.height < 2 {
        return;
    }
    let legend = Rect {
        y: inner.y + inner.height - 1,
        height: 1,
        ..inner
    };
    let body = Rect {
        height: inner.height - 1,
        ..inner
    };
    if vis.is_empty() {
        let msg = if app.store.nodes.is_empty() {
            "no nodes"
        } else {
            "no node matches the filter (Esc clears it)"
        };
        line_at(Line::from(Span::styled(msg, app.theme.muted)), body, 0, buf);
    }
    let hidden = if vis.is_empty() {
        (0, 0)
    } else if app.wall_active() {
        render_wall(app, &vis, body, buf)
    } else {
        render_rows(app, &vis, body, buf)
    };
    // Rows out of sight above and below, on the top edge: a list that
    // starts mid-way must never read as the whole fleet.
    if let Some(text) = hidden_rows(hidden) {
        let w = text.chars().count() as u16;
        if area.width > w + 2 {
            buf.set_string(area.right() - w - 1, area.y, &text, app.theme.title);
        }
    }
    render_legend(&app.theme, app.metric, legend, buf);
}

/// The colour bar and its ends.
fn render_legend(t: &Theme, metric: Metric, area: Rect, buf: &mut Buffer) {
    let (lo, hi) = metric.scale();
    let mut spans = vec![Span::styled(format!("{lo} "), t.muted)];
    let steps = 20;
    for i in 0..steps {
        let f = f64::from(i) / f64::from(steps - 1);
        spans.push(heat_span(t, f, if t.is_mono() { shade(f) } else { " " }.to_string()));
    }
    spans.push(Span::styled(format!(" {hi}"), t.muted));
    spans.push(Span::styled("   ERR: no reading  ! crit * warn  ┄ free", t.muted));
    Line::from(spans).render(area, buf);
}

/// Shade glyphs stand in for colour where there is none (NO_COLOR).
fn shade(f: f64) -> &'static str {
    match (f * 4.0).round() as u8 {
        0 => "·",
        1 => "░",
        2 => "▒",
        3 => "▓",
        _ => "█",
    }
}

fn heat_span(t: &Theme, f: f64, text: String) -> Span<'static> {
    if t.is_mono() {
        Span::raw(text)
    } else {
        Span::styled(text, Style::new().fg(t.heat_fg(f)).bg(t.heat(f)))
    }
}

/// The first of `len` rows to draw in `rows` so the cursor is on screen
/// (on the last row at most), and how many rows are out of sight above
/// and below.
fn scroll(len: usize, cursor: usize, rows: usize) -> (usize, usize, usize) {
    let first = cursor.saturating_sub(rows.saturating_sub(1));
    (first, first, len.saturating_sub(first + rows))
}

/// " ↑ 3 above  ↓ 12 below ": what the top edge says of the rows out of sight.
fn hidden_rows((above, below): (usize, usize)) -> Option<String> {
    let parts: Vec<String> = [(above, "↑", "above"), (below, "↓", "below")]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, arrow, word)| format!("{arrow} {n} {word}"))
        .collect();
    (!parts.is_empty()).then(|| format!(" {} ", parts.join("  ")))
}

/// Which columns fit, widest first: GPU cell width, and whether the status
/// and mean columns are shown.
struct RowLayout {
    name_w: usize,
    /// The status column: "crit", or "stale 2m" where a shown node's
    /// numbers are old.
    status_w: usize,
    cell_w: usize,
    status: bool,
    mean: bool,
}

const FLAGS_MIN: usize = 12;

/// The scheduler column's width: 10 for Slurm's state words; wider where
/// a shown node is held out of service, so its row says for how long and by
/// whom (`need`, at most `view::SCHED_LABEL_MAX` and a gap). Where `need`
/// only fits with narrower GPU cells, it gets just that.
#[cfg(test)]
fn sched_width(need: usize) -> usize {
    sched_width_with(need)
}

fn sched_width_with(need: usize) -> usize {
    const STATE_W: usize = 10;
    need.clamp(STATE_W, view::SCHED_LABEL_MAX + 1)
}

fn row_layout(width: usize, gpus: usize, name_w: usize, status_w: usize) -> RowLayout {
    for (cell_w, status, mean) in [
        (4, true, true),
        (3, true, true),
        (3, false, true),
        (2, false, true),
        (2, false, false),
        (1, false, false),
    ] {
        let used =
            2 + name_w + 1 + if status { status_w } else { 0 } + gpus * cell_w + if mean { 5 } else { 0 } + FLAGS_MIN;
        if used <= width {
            return RowLayout {
                name_w,
                status_w,
                cell_w,
                status,
                mean,
            };
        }
    }
    RowLayout {
        name_w: name_w.min(8),
        status_w,
        cell_w: 1,
        status: false,
        mean: false,
    }
}

/// Flags of a node grouped by kind, worst first, in `room` columns:
/// "idle×8 xid gpu_lost"; where those names do not all fit, the short ones
/// the header uses ("ecc rmp_fail xid"). Whole names only, never one cut
/// mid-word ("remap_fa"): those that do not fit are counted ("xid +3").
fn flag_summary(t: &Theme, n: &NodeState, room: usize) -> Vec<Span<'static>> {
    let mut by_kind: BTreeMap<FlagKind, (usize, Severity)> = BTreeMap::new();
    for f in n.detector.active() {
        let e = by_kind.entry(f.kind).or_insert((0, f.severity));
        e.0 += 1;
        e.1 = e.1.max(f.severity);
    }
    let mut v: Vec<(FlagKind, usize, Severity)> = by_kind.into_iter().map(|(k, (c, s))| (k, c, s)).collect();
    v.sort_by_key(|(k, _, s)| (std::cmp::Reverse(*s), *k));
    let words = |name: fn(FlagKind) -> &'static str| -> Vec<Span<'static>> {
        let words = v
            .iter()
            .map(|&(k, c, s)| {
                let text = if c > 1 {
                    format!("{}×{c} ", name(k))
                } else {
                    format!("{} ", name(k))
                };
                Span::styled(text, severity_style(t, s))
            })
            .collect();
        whole_words(words, room, t.muted)
    };
    let long = words(FlagKind::name);
    if long.len() == v.len() && !long.last().is_some_and(|s| s.content.starts_with('+')) {
        return long;
    }
    words(FlagKind::short)
}

/// Draws the rows that fit; returns how many are out of sight above and below.
fn render_rows(app: &App, vis: &[usize], area: Rect, buf: &mut Buffer) -> (usize, usize) {
    let t = &app.theme;
    let nodes = &app.store.nodes;
    let max_gpus = vis
        .iter()
        .map(|&i| nodes[i].info.as_ref().map(|x| x.gpus.len()).unwrap_or(0))
        .max()
        .unwrap_or(0);
    let name_w = vis
        .iter()
        .map(|&i| nodes[i].target.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 16);
    // The scheduler's word for the node, where a scheduler is known; for
    // a node held out of service, how long and by whom.
    let labels: Vec<Option<String>> = vis
        .iter()
        .map(|&i| {
            let s = &nodes[i].scheduler.as_ref()?.node;
            Some(view::sched_label(s, app.now_ms))
        })
        .collect();
    let with_sched = labels.iter().any(Option::is_some);
    // "drained 2h fleetop", "draining 5m alice" (a gap after): bounded, so
    // a long reason never takes the flags' room; the reason is in detail.
    let need = labels
        .iter()
        .flatten()
        .map(|l| l.chars().count() + 1)
        .max()
        .unwrap_or(0);

    // A GPU in MIG mode gets a cell per instance where those still fit three
    // columns wide; else one cell per GPU, which says how many instances it has.
    let cells = |i: usize| -> usize {
        nodes[i]
            .last
            .iter()
            .flat_map(|s| &s.gpus)
            .map(|g| g.mig.len().max(1))
            .sum()
    };
    let max_cells = vis.iter().map(|&i| cells(i)).max().unwrap_or(0);
    // "stale 2m": a node whose numbers are old says how old in its row.
    let th = &app.store.thresholds;
    let free: Vec<bool> = vis
        .iter()
        .map(|&i| nodes[i].status(app.now_ms, th) == NodeStatus::Ok && marks::is_free(&nodes[i], th))
        .collect();
    let status_words: Vec<String> = vis
        .iter()
        .zip(&free)
        .map(|(&i, &free)| status_word(&nodes[i], app.now_ms, th, free))
        .collect();
    let status_w = status_words
        .iter()
        .map(|w| w.chars().count() + 1)
        .max()
        .unwrap_or(0)
        .max(6);
    let sched_w = if with_sched { sched_width_with(need) } else { 0 };
    let width = (area.width as usize).saturating_sub(sched_w);
    let split_lay = row_layout(width, max_cells, name_w, status_w);
    let split = max_cells > max_gpus && split_lay.cell_w >= 3;
    let (lay, max_cells) = if split {
        (split_lay, max_cells)
    } else {
        (row_layout(width, max_gpus, name_w, status_w), max_gpus)
    };
    let rows = area.height as usize;
    // Keep the cursor on screen: scroll so it is on the last row at most.
    let cursor = app.cursor_pos_in(vis);
    let (first, above, below) = scroll(vis.len(), cursor, rows);
    for (row, (pos, &i)) in vis.iter().enumerate().skip(first).take(rows).enumerate() {
        let n = &nodes[i];
        let mut spans = Vec::with_capacity(max_gpus + 8);
        let marked = app.marked.contains(&i);
        spans.push(Span::styled(if marked { "● " } else { "  " }, t.title));
        let name_style = if pos == cursor { t.selected } else { t.base };
        let name: String = n.target.name.chars().take(lay.name_w).collect();
        spans.push(Span::styled(format!("{name:<w$}", w = lay.name_w), name_style));
        spans.push(Span::raw(" "));
        let status = n.status(app.now_ms, &app.store.thresholds);
        let word = &status_words[pos];
        let free = free[pos];
        if lay.status {
            let s = status_span(t, status, view::worst_severity(n));
            let style = if word == "free" { t.muted } else { s.style };
            let s = Span::styled(word.clone(), style);
            let pad = lay.status_w.saturating_sub(s.content.chars().count());
            spans.push(s);
            spans.push(Span::raw(" ".repeat(pad)));
        }
        if with_sched {
            spans.push(sched_span(t, n, labels[pos].as_deref(), sched_w));
        }
        let info = n.info.as_ref();
        let stale = status != NodeStatus::Ok;
        let th = &app.store.thresholds;
        let mut drawn = 0;
        let flagged = marks::gpu_marks(n);
        let w = lay.cell_w;
        // A flagged GPU's first cell carries its mark before the value;
        // where the mark does not fit, the cell's style says it (the
        // second part: the severity to draw it in).
        let cell_text = |raw: String, g: u32, first: bool| -> (String, Option<Severity>) {
            match flagged.get(&g).filter(|_| first) {
                Some(&s) => match marks::mark_cell(&raw, w, marks::glyph(s)) {
                    Some(marked) => (marked, None),
                    None => (fit(&raw, w), Some(s)),
                },
                None => (fit(&raw, w), None),
            }
        };
        let unmarked = |span: Span<'static>, s: Option<Severity>| match s {
            Some(s) if !stale => span.style(marks::unmarked_style(t, s)),
            _ => span,
        };
        for g in n.last.iter().flat_map(|s| &s.gpus) {
            let gi = info.and_then(|x| x.gpu(g.index));
            if free {
                // Nobody's: dots, muted, on every metric (the numbers are
                // in node detail); never the heat of a busy GPU.
                let dots: String = FREE.chars().take(w.saturating_sub(1).max(1)).collect();
                let (text, s) = cell_text(dots, g.index, true);
                spans.push(unmarked(Span::styled(text, t.muted), s));
                drawn += 1;
            } else if g.mig.is_empty() || g.error.is_some() {
                let (text, s) = cell_text(app.metric.cell_text(g, gi, th), g.index, true);
                // A crit GPU is drawn as crit, not in the heat of its number:
                // its `!` and its colour say the same.
                let crit = !stale && flagged.get(&g.index) == Some(&Severity::Crit);
                let frac = app.metric.frac(g, gi, th).filter(|_| !crit);
                spans.push(unmarked(cell_span(t, frac, stale, false, text), s));
                drawn += 1;
            } else if split {
                for (k, m) in g.mig.iter().enumerate() {
                    let (text, s) = cell_text(app.metric.mig_cell_text(g, m, gi, th), g.index, k == 0);
                    let span = cell_span(t, app.metric.mig_frac(g, m, gi, th), stale, true, text);
                    spans.push(unmarked(span, s));
                    drawn += 1;
                }
            } else {
                // Narrow: "m3" for three instances, coloured by their mean.
                let fracs: Vec<f64> = g.mig.iter().filter_map(|m| app.metric.mig_frac(g, m, gi, th)).collect();
                let mean = (!fracs.is_empty()).then(|| fracs.iter().sum::<f64>() / fracs.len() as f64);
                let (text, s) = cell_text(format!("m{}", g.mig.len()), g.index, true);
                spans.push(unmarked(cell_span(t, mean, stale, true, text), s));
                drawn += 1;
            }
        }
        let missing = max_cells.saturating_sub(drawn);
        spans.push(Span::raw(" ".repeat(missing * lay.cell_w)));
        if lay.mean {
            let mean = view::node_mean_text(n, app.metric, &app.store.thresholds);
            spans.push(Span::styled(mean, t.muted));
        }
        spans.push(Span::raw(" "));
        if app.store.bench.get(&i).is_some_and(|b| b.finished && b.failed()) {
            spans.push(Span::styled("burn-in failed ", t.crit));
        }
        if !lay.status && (free || status != NodeStatus::Ok) && n.last.is_some() {
            spans.push(Span::styled(format!("{word} "), status_span(t, status, None).style));
        }
        let used: usize = spans.iter().map(Span::width).sum();
        spans.extend(flag_summary(t, n, usize::from(area.width).saturating_sub(used)));
        // Someone else's hold: their words after the flags, as far as they
        // fit (the whole reason is in node detail).
        if let Some(reason) = others_reason(n) {
            let room = usize::from(area.width).saturating_sub(spans.iter().map(Span::width).sum());
            if room > 4 {
                spans.push(Span::styled(cut(&format!("“{reason}”"), room), t.muted));
            }
        }
        line_at(Line::from(spans), area, row as u16, buf);
    }
    (above, below)
}

/// Why a person or another tool holds the node out of service, in their
/// words (escaped): fleetop's own drains say theirs in node detail.
fn others_reason(n: &NodeState) -> Option<String> {
    let s = &n.scheduler.as_ref()?.node;
    let reason = s.reason.as_deref().filter(|r| !r.trim().is_empty())?;
    (s.out_of_service() && matches!(s.hold(), crate::model::sched::Hold::Other))
        .then(|| fleetop_proto::input::printable(reason.trim(), 200))
}

/// The status column's word: the health, and for a node whose numbers
/// are old (stale, unreachable after it answered) how old: "stale 2m";
/// an ok node nobody uses is "free" (a flag of warn or worse says more).
fn status_word(n: &NodeState, now_ms: i64, th: &crate::detect::Thresholds, free: bool) -> String {
    let h = view::Health::of(n, now_ms, th);
    if free && h == view::Health::Ok {
        return "free".into();
    }
    match n.sample_age_ms(now_ms) {
        Some(age) if n.status(now_ms, th) != NodeStatus::Ok => format!("{} {}", h.short(), view::human_age(age)),
        _ => h.short().to_string(),
    }
}

/// One heatmap cell. Old data is shown, but muted: it may no longer be true.
/// No reading is an alarm for a whole GPU; for a MIG instance it is what NVML
/// gives (no utilization in MIG mode), so it is only muted.
fn cell_span(t: &Theme, frac: Option<f64>, stale: bool, mig: bool, text: String) -> Span<'static> {
    match frac {
        Some(f) if !stale => heat_span(t, f, text),
        Some(_) => Span::styled(text, t.muted),
        None if mig => Span::styled(text, t.muted),
        None => Span::styled(text, t.crit_block()),
    }
}

/// The scheduler's word for a node (`label`) in `w` columns, a gap
/// after it: drained and down stand out; a cut reason ends in "…".
fn sched_span(t: &Theme, n: &NodeState, label: Option<&str>, w: usize) -> Span<'static> {
    let (Some(v), Some(label)) = (&n.scheduler, label) else {
        return Span::raw(" ".repeat(w));
    };
    let style = if v.node.is_down() {
        t.crit
    } else if v.node.state.contains("drain") {
        t.warn
    } else {
        t.muted
    };
    let room = w.saturating_sub(1);
    let label: String = label.chars().take(room).collect();
    Span::styled(format!("{label:<w$}"), style)
}

/// `s` in exactly `w` columns, right-aligned, always with a gap before it
/// where the cell has two columns or more: cells never touch ("96100"
/// reads as one number). A number too long saturates at the largest that
/// fits ("100" in three columns is " 99"), never a cut "10".
fn fit(s: &str, w: usize) -> String {
    let room = if w >= 2 { w - 1 } else { w };
    let n = s.chars().count();
    let v = if n <= room {
        s.to_string()
    } else if s.chars().all(|c| c.is_ascii_digit()) {
        "9".repeat(room)
    } else {
        s.chars().take(room).collect()
    };
    format!("{v:>w$}")
}

/// Draws the cells that fit; returns how many nodes are out of sight above
/// and below.
fn render_wall(app: &App, vis: &[usize], area: Rect, buf: &mut Buffer) -> (usize, usize) {
    let t = &app.theme;
    let nodes = &app.store.nodes;
    // The outer body (with border and legend) decides the geometry.
    let (cols, cell_w) = wall_geometry(
        Rect {
            height: area.height + 2,
            ..area
        },
        vis.len(),
    );
    let status_row = area.height.saturating_sub(1);
    let rows = status_row as usize;
    let cursor = app.cursor_pos_in(vis);
    let (first_row, above, _) = scroll(vis.len().div_ceil(cols.max(1)), cursor / cols, rows);
    for (pos, &i) in vis.iter().enumerate().skip(first_row * cols).take(rows * cols) {
        let n = &nodes[i];
        let (r, c) = (pos / cols - first_row, pos % cols);
        let status = n.status(app.now_ms, &app.store.thresholds);
        let worst = view::worst_severity(n);
        // The glyph says what colour cannot: flags and missing data.
        let glyph = match (status, worst) {
            (NodeStatus::Unreachable, _) => "x",
            (NodeStatus::Stale | NodeStatus::Connecting, _) => "?",
            (_, Some(Severity::Crit)) => "!",
            // Not `•`: next to the shade `·` of NO_COLOR the two look alike.
            (_, Some(Severity::Warn)) => "*",
            _ => " ",
        };
        let frac = view::node_mean(n, app.metric, &app.store.thresholds);
        let mut style = match frac {
            Some(f) if !t.is_mono() && status == NodeStatus::Ok => Style::new().fg(t.heat_fg(f)).bg(t.heat(f)),
            _ => t.muted,
        };
        // Crit is the crit colour, reversed, in every theme: never a glyph
        // on a heat colour (the heat scale has no red, crit is only red).
        if worst == Some(Severity::Crit) && status == NodeStatus::Ok {
            style = t.crit_block();
        } else if let Some(s) = worst.filter(|_| t.is_mono() || frac.is_none()) {
            style = severity_style(t, s);
        }
        let text = if t.is_mono() && glyph == " " {
            shade(frac.unwrap_or(0.0))
        } else {
            glyph
        };
        let mut cell = format!("{text:<cell_w$}");
        if pos == cursor {
            style = t.selected;
            cell = format!("{:<cell_w$}", if glyph == " " { "◆" } else { glyph });
        }
        if app.marked.contains(&i) {
            style = style.add_modifier(Modifier::UNDERLINED);
        }
        let x = area.x + (c * cell_w) as u16;
        let y = area.y + r as u16;
        if x < area.right() && y < area.bottom() {
            buf.set_stringn(x, y, &cell, cell_w, style);
        }
    }
    // What the cursor is on, in words.
    if let Some(&i) = vis.get(cursor) {
        let n = &nodes[i];
        let mean = view::node_mean_text(n, app.metric, &app.store.thresholds);
        let mean = mean.trim();
        let mut spans = vec![
            Span::styled(n.target.name.clone(), t.title),
            Span::raw(" "),
            status_span(t, n.status(app.now_ms, &app.store.thresholds), view::worst_severity(n)),
            Span::raw(format!("  mean {} {mean}  ", app.metric.name())),
            Span::styled(format!("{}  ", view::freshness(n, app.now_ms)), t.muted),
        ];
        let key = Span::styled("  ! crit  * warn  ? stale  x unreachable", t.muted);
        let used: usize = spans.iter().map(Span::width).sum::<usize>() + key.width();
        spans.extend(flag_summary(t, n, usize::from(area.width).saturating_sub(used)));
        spans.push(key);
        line_at(Line::from(spans), area, status_row, buf);
    }
    (above * cols, vis.len().saturating_sub((first_row + rows) * cols))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_nodes_slurm_word_is_bounded_so_the_flags_keep_their_room() {
        // Slurm's words in 10.
        assert_eq!(sched_width(0), 10);
        assert_eq!(sched_width(9), 10);
        // "draining 59m fleetop" and a gap.
        assert_eq!(sched_width(21), 21);
        // Never wider than the longest label and its gap.
        assert_eq!(sched_width(200), crate::tui::view::SCHED_LABEL_MAX + 1);
    }

    #[test]
    fn columns_drop_before_anything_overlaps() {
        let wide = row_layout(200, 8, 8, 6);
        assert_eq!((wide.cell_w, wide.status, wide.mean), (4, true, true));
        let narrow = row_layout(80, 8, 8, 6);
        assert!(2 + 8 + 1 + 8 * narrow.cell_w + 12 <= 80);
        let tiny = row_layout(40, 16, 8, 6);
        assert_eq!((tiny.cell_w, tiny.status, tiny.mean), (1, false, false));
    }

    #[test]
    fn fit_right_aligns_with_a_gap() {
        assert_eq!(fit("97", 4), "  97");
        assert_eq!(fit("100", 4), " 100");
        assert_eq!(fit("100", 3), " 99");
        assert_eq!(fit("100", 2), " 9");
        assert_eq!(fit("ERR", 3), " ER");
        assert_eq!(fit("5", 2), " 5");
        assert_eq!(fit("5", 1), "5");
    }
}
