//! Drawing: a function of `&App` alone, no I/O. Layout adapts to the
//! terminal: columns drop before anything overlaps, down to 80x24 and below.

mod alerts;
mod bench;
mod detail;
mod dialog;
mod groups;
mod heatmap;
mod timeline;

use std::collections::BTreeMap;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use crate::model::flag::{FlagKind, Severity};
use crate::store::NodeStatus;
use crate::tui::app::{App, Screen};
use crate::tui::theme::Theme;

pub use heatmap::wall_geometry;

/// Rows above and below the screens' body.
const HEADER: u16 = 2;
const FOOTER: u16 = 1;

/// The body of a screen in a terminal of this size.
pub fn body_area(area: Rect) -> Rect {
    let [_, body, _] = split(area);
    body
}

fn split(area: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(HEADER),
        Constraint::Min(1),
        Constraint::Length(FOOTER),
    ])
    .areas(area)
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        buf.set_style(area, self.theme.base);
        let [header, body, footer] = split(area);
        render_header(self, header, buf);
        match self.screen {
            Screen::Heatmap => heatmap::render(self, body, buf),
            Screen::Detail => detail::render(self, body, buf),
            Screen::Alerts => alerts::render(self, body, buf),
            Screen::Bench => bench::render(self, body, buf),
            Screen::Groups => groups::render(self, body, buf),
        }
        render_footer(self, footer, buf);
        if self.help {
            render_help(self, area, buf);
        }
        if let Some(d) = &self.dialog {
            dialog::render(self, d, area, buf);
        }
    }
}

/// A centred box of `lines`, `w` wide at most.
fn popup(t: &Theme, title: &str, lines: Vec<Line<'_>>, w: u16, area: Rect, buf: &mut Buffer) {
    let h = (lines.len() as u16 + 2).min(area.height);
    let w = w.min(area.width);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    Clear.render(r, buf);
    Paragraph::new(lines)
        .style(t.base)
        .block(
            Block::bordered()
                .border_style(t.border)
                .title(Line::from(format!(" {title} ")).style(t.title)),
        )
        .render(r, buf);
}

pub fn severity_style(t: &Theme, s: Severity) -> Style {
    match s {
        Severity::Crit => t.crit,
        Severity::Warn => t.warn,
        Severity::Info => t.info,
    }
}

/// A node's state in one word: why it cannot be judged (stale, unreachable,
/// connecting), else its health, the worst severity of its flags: a node
/// with a lost GPU is "crit", never "ok".
pub fn status_span(t: &Theme, s: NodeStatus, worst: Option<Severity>) -> Span<'static> {
    match s {
        NodeStatus::Ok => match worst {
            Some(Severity::Crit) => Span::styled("crit", t.crit),
            Some(Severity::Warn) => Span::styled("warn", t.warn),
            _ => Span::styled("ok", t.ok),
        },
        NodeStatus::Stale => Span::styled("stale", t.warn),
        NodeStatus::Unreachable => Span::styled("unrch", t.crit),
        NodeStatus::Connecting => Span::styled("conn", t.muted),
    }
}

/// A bordered block with the theme's border and title styles.
pub fn block<'a>(t: &Theme, title: impl Into<Line<'a>>) -> Block<'a> {
    Block::new()
        .borders(Borders::TOP)
        .border_style(t.border)
        .title(title.into().style(t.title))
}

/// Draws a line clipped to one row of `area` at row `row`.
pub fn line_at(line: Line<'_>, area: Rect, row: u16, buf: &mut Buffer) {
    if row < area.height {
        line.render(
            Rect {
                y: area.y + row,
                height: 1,
                ..area
            },
            buf,
        );
    }
}

fn render_header(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let th = &app.store.thresholds;
    let mut by_status: BTreeMap<NodeStatus, usize> = BTreeMap::new();
    let mut kinds: BTreeMap<FlagKind, (usize, Severity)> = BTreeMap::new();
    let (mut gpus, mut util_sum, mut util_n, mut power_w) = (0usize, 0u64, 0u64, 0f64);
    for n in &app.store.nodes {
        *by_status.entry(n.status(app.now_ms, th)).or_default() += 1;
        gpus += n.info.as_ref().map(|i| i.gpus.len()).unwrap_or(0);
        for g in n.last.iter().flat_map(|s| &s.gpus) {
            if let Some(u) = g.util_pct {
                util_sum += u64::from(u);
                util_n += 1;
            }
            power_w += g.power_w.unwrap_or(0.0);
        }
        for f in n.detector.active() {
            let e = kinds.entry(f.kind).or_insert((0, f.severity));
            e.0 += 1;
            e.1 = e.1.max(f.severity);
        }
    }
    let count = |s| by_status.get(&s).copied().unwrap_or(0);
    let mut line1 = vec![
        Span::styled(" fleetop ", t.title.add_modifier(Modifier::REVERSED)),
        // The console's clock, in UTC like the export and the audit log: a
        // frozen clock means a frozen console.
        Span::styled(format!(" {} ", clock(app.now_ms)), t.muted),
    ];
    if app.read_only {
        line1.push(Span::styled(" READ-ONLY ", t.warn.add_modifier(Modifier::REVERSED)));
    }
    line1.extend([
        Span::raw(format!(" {} nodes ", app.store.nodes.len())),
        Span::styled(format!("{} ok", count(NodeStatus::Ok)), t.ok),
    ]);
    for (s, label, style) in [
        (NodeStatus::Stale, "stale", t.warn),
        (NodeStatus::Unreachable, "unreachable", t.crit),
        (NodeStatus::Connecting, "connecting", t.muted),
    ] {
        if count(s) > 0 {
            line1.push(Span::raw(" "));
            line1.push(Span::styled(format!("{} {label}", count(s)), style));
        }
    }
    line1.push(Span::styled(" │ ", t.border));
    line1.push(Span::raw(format!(
        "{gpus} GPUs  util {}%  {:.1} kW",
        util_sum.checked_div(util_n).unwrap_or(0),
        power_w / 1000.0
    )));
    line_at(Line::from(line1), area, 0, buf);
    let mut line2 = Vec::new();
    // The remediation policy's breaker tripped: it drains nothing more
    // until a person looks and resets it. Loud, and first.
    if app.store.remediation.as_ref().is_some_and(|r| r.tripped.is_some()) {
        line2.push(Span::styled(" REMEDIATION STOPPED ", t.crit_block()));
        if area.width >= 100 {
            line2.push(Span::styled(" fleetop remediate reset ", t.muted));
        }
        line2.push(Span::styled("│", t.border));
    }
    // A scheduler that cannot be read comes first: every Slurm state on
    // screen is then as old as its last good read.
    if let Some(p) = crate::tui::view::scheduler_problem(&app.store, app.now_ms) {
        line2.push(Span::styled(format!(" {p} "), t.crit));
        line2.push(Span::styled("│", t.border));
    }
    line2.push(Span::styled(" flags ", t.muted));
    if kinds.is_empty() {
        line2.push(Span::styled("none", t.ok));
    }
    let used: usize = line2.iter().map(|s| s.width()).sum();
    let room = (area.width as usize).saturating_sub(used);
    line2.extend(flag_counts(t, kinds, room));
    line_at(Line::from(line2), area, 1, buf);
}

/// The fleet's flag counts in `room` columns: the worst first; short names
/// before anything is cut; and what is cut is counted ("+3 more"), so a
/// crit flag never gives way to an info one.
fn flag_counts(t: &Theme, kinds: BTreeMap<FlagKind, (usize, Severity)>, room: usize) -> Vec<Span<'static>> {
    let mut kinds: Vec<(FlagKind, usize, Severity)> = kinds.into_iter().map(|(k, (c, s))| (k, c, s)).collect();
    kinds.sort_by_key(|&(k, _, s)| (std::cmp::Reverse(s), k));
    let text = |k: FlagKind, c: usize, short: bool| format!("{} {c}", if short { k.short() } else { k.name() });
    let width = |short: bool| {
        kinds
            .iter()
            .map(|&(k, c, _)| text(k, c, short).chars().count() + 2)
            .sum::<usize>()
    };
    let short = width(false) > room;
    let gap = if short { 1 } else { 2 };
    let mut out = Vec::new();
    let mut used = 0;
    for (i, &(k, c, s)) in kinds.iter().enumerate() {
        let piece = text(k, c, short);
        let w = piece.chars().count() + gap;
        let left = kinds.len() - i - 1;
        // Keep room to say how many more there are, unless this is the last.
        let reserve = if left > 0 { 9 } else { 0 };
        if used + w + reserve > room && (left > 0 || used + w > room) {
            // As loud as the worst of what it stands for.
            let worst = kinds[i..].iter().map(|k| k.2).max().unwrap_or(Severity::Info);
            out.push(Span::styled(
                format!("+{} more", kinds.len() - i),
                severity_style(t, worst),
            ));
            break;
        }
        used += w;
        out.push(Span::styled(piece, severity_style(t, s)));
        out.push(Span::raw(" ".repeat(gap)));
    }
    out
}

/// "14:03:07Z": the time of day, UTC.
fn clock(now_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(now_ms)
        .map(|t| t.format("%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn render_footer(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    if let Some(text) = &app.input {
        let line = Line::from(vec![
            Span::styled("/", t.title),
            Span::raw(text.clone()),
            Span::styled("█", t.muted),
            Span::styled(
                "   name, gpu[01-08], a flag, crit; a,b = either   Enter keep  Esc undo  ^U clear",
                t.muted,
            ),
        ]);
        line.render(area, buf);
        return;
    }
    if let Some(m) = &app.message {
        Line::from(Span::styled(format!(" {m}"), t.warn)).render(area, buf);
        return;
    }
    let keys: &[&str] = match app.screen {
        Screen::Heatmap => &[
            "? help",
            "q quit",
            "Tab alerts",
            "Enter node",
            "/ filter",
            "m metric",
            "s/S sort",
            "n/N flagged",
            "space mark",
            "y copy",
            "w wall",
        ],
        Screen::Detail if app.pane == crate::tui::app::Pane::Timeline => {
            &["? help", "Esc back", "j/k scroll", "1-5 pane", "n/p node", "Tab screen"]
        }
        Screen::Detail => &["? help", "Esc back", "j/k GPU", "1-5 pane", "n/p node", "Tab screen"],
        Screen::Alerts => &[
            "? help",
            "Esc back",
            "j/k move",
            "Enter node",
            "D drain",
            "a ack",
            "1/4/8 silence h",
            "z fold",
            "s sort",
        ],
        Screen::Groups => &[
            "? help",
            "Esc back",
            "j/k move",
            "b group by",
            "Enter its nodes",
            "/ filter",
        ],
        Screen::Bench => &[
            "? help",
            "Esc back",
            "j/k move",
            "Enter checks",
            "D drain a failed node",
            "c clear",
            "x cancel",
            "Tab screen",
        ],
    };
    let mut state = vec![format!("metric {}", app.metric.name())];
    if app.screen == Screen::Heatmap {
        let dir = if app.sort_reverse { " reversed" } else { "" };
        state.push(format!("sort {}{dir}", app.sort.name()));
    }
    if !app.filter_text.is_empty() {
        state.push(format!("filter {}", app.filter_text));
    }
    if !app.marked.is_empty() {
        state.push(format!("{} marked", app.marked.len()));
    }
    let right = format!("{} ", state.join(" · "));
    let w = area.width as usize;
    // Key hints give way, whole, to the state when the terminal is narrow.
    let room = w.saturating_sub(right.chars().count() + 2);
    let mut hints = String::new();
    for k in keys {
        if hints.chars().count() + k.chars().count() + 2 > room {
            break;
        }
        hints.push_str(k);
        hints.push_str("  ");
    }
    let pad = w.saturating_sub(hints.chars().count() + right.chars().count() + 1);
    Line::from(vec![
        Span::styled(format!(" {hints}"), t.muted),
        Span::raw(" ".repeat(pad)),
        Span::styled(right, t.title),
    ])
    .render(area, buf);
}

/// Every key of the current screen.
pub fn help_lines(screen: Screen) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("?", "this help (any key closes)"),
        ("q  Ctrl-C", "quit"),
        ("Tab  Shift-Tab", "next / previous screen: heatmap, alerts, node"),
        ("Esc", "back to the heatmap; on the heatmap, clear the filter"),
        ("/", "filter as you type: name, gpu[01-08], flag, crit, warn, ok,"),
        ("", "  a partition or rack; a,b matches either; Ctrl-U clears"),
        ("m", "metric: util, memory, temperature, power, SM clock"),
        ("J", "group the shown nodes by Slurm job, partition or rack"),
    ];
    match screen {
        Screen::Heatmap | Screen::Detail => v.extend([
            ("D R U", "drain (with a reason), resume, undrain: marked or this"),
            ("T", "return to service: resume after a passing burn-in"),
            ("B", "burn-in on the marked nodes or this one (s: quick/full)"),
        ]),
        Screen::Alerts | Screen::Groups => {}
        Screen::Bench => v.extend([
            ("j k  ↓ ↑", "move"),
            ("D", "drain the selected failed node, the failure as reason"),
            ("Enter", "each check of this node: figure, floor, verdict, why"),
            ("c", "clear this finished run and its burnin_failed flag"),
            ("x", "stop the running burn-in (asks; cancelled, not failed)"),
        ]),
    }
    match screen {
        Screen::Heatmap => v.extend([
            ("j k  ↓ ↑", "move (a row of cells on the wall)"),
            ("h l  ← →", "move along the wall"),
            ("g G  PgUp PgDn", "top, bottom, page"),
            ("Enter", "open the node"),
            ("s  S", "sort by name, metric, flags, age, Slurm state; S reverses"),
            ("n  N", "next / previous node with a flag"),
            ("w", "toggle the dense wall (one cell per node)"),
            ("space", "mark / unmark the node (for actions), then move down"),
            ("Ctrl-Space", "mark from the last marked node to this one"),
            ("a  u", "mark every node shown (the filter's) / unmark all"),
            ("y", "copy the marked nodes (or this one) as a Slurm hostlist"),
        ]),
        Screen::Detail => v.extend([
            ("j k  ↓ ↑", "select a GPU"),
            ("1-5  h l", "pane: history, NVLink, InfiniBand, processes, timeline"),
            ("", "  in the timeline (5) j k PgUp PgDn g G scroll it"),
            ("n p", "next / previous node"),
            ("z", "history: the last minute, ten minutes, or all of it"),
            ("K", "cancel the Slurm job on this GPU (scancel, asks first)"),
            ("x  X", "SIGTERM / SIGKILL the GPU's processes via its agent (asks)"),
        ]),
        Screen::Alerts => v.extend([
            ("j k  ↓ ↑", "move"),
            ("g G  PgUp PgDn", "top, bottom, page"),
            ("Enter", "open the node of the alert"),
            ("D", "drain the alert's node, the catalog's reason filled in"),
            ("s", "sort by severity, age, node, kind"),
            ("z", "fold / unfold identical flags of one job into one row"),
            ("a", "acknowledge the alert (until it clears); again to undo"),
            ("1 4 8", "silence this kind on this node for 1, 4 or 8 hours"),
        ]),
        Screen::Groups => v.extend([
            ("j k  ↓ ↑", "move"),
            ("b", "group by Slurm job, partition or rack (cycles)"),
            ("", "  the least busy first; nodes in none: \"(none)\""),
            ("Enter", "show the group's nodes on the heatmap (Esc clears)"),
        ]),
        Screen::Bench => {}
    }
    v
}

fn render_help(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let text: Vec<Line<'_>> = help_lines(app.screen)
        .into_iter()
        .map(|(k, what)| Line::from(vec![Span::styled(format!(" {k:<16}"), t.title), Span::raw(what)]))
        .collect();
    popup(t, "keys", text, 86, area, buf);
}
