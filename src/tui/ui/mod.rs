//! Drawing: a function of `&App` alone, no I/O. Layout adapts to the
//! terminal: columns drop before anything overlaps, down to 80x24 and below.

mod alerts;
mod bench;
mod detail;
mod dialog;
mod groups;
mod heatmap;
mod help;
mod kube;
mod marks;
mod ray;
mod timeline;

use std::collections::BTreeMap;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use crate::model::flag::{FlagKind, Severity};
use crate::store::NodeStatus;
use crate::tui::app::{App, Screen};
use crate::tui::layout::split;
use crate::tui::theme::Theme;
use crate::tui::view;

pub use help::{flag_legend, help_lines};

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
        if self.help.shown {
            help::render(self, area, buf);
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
    let h = view::Health::from_parts(s, worst);
    Span::styled(h.short(), health_style(t, h))
}

pub fn health_style(t: &Theme, h: view::Health) -> Style {
    use view::Health;
    match h {
        Health::Crit | Health::Unreachable => t.crit,
        Health::Warn | Health::Stale => t.warn,
        Health::Ok => t.ok,
        Health::Connecting => t.muted,
    }
}

/// A bordered block with the theme's border and title styles.
pub fn block<'a>(t: &Theme, title: impl Into<Line<'a>>) -> Block<'a> {
    Block::new()
        .borders(Borders::TOP)
        .border_style(t.border)
        .title(title.into().style(t.title))
}

/// `s` in `w` columns: whole, or cut with "…" saying so.
pub(super) fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `words` (each with its trailing space) in `room` columns: whole words
/// only, never one cut mid-word ("remap_fa"); those that do not fit are
/// counted at the end ("xid +3"), in `more`'s style.
pub(super) fn whole_words(words: Vec<Span<'static>>, room: usize, more: Style) -> Vec<Span<'static>> {
    let total = words.len();
    let mut out = Vec::with_capacity(total);
    let mut used = 0;
    for (i, w) in words.into_iter().enumerate() {
        let left = total - i - 1;
        let count = if left > 0 { format!("+{left}").len() } else { 0 };
        if used + w.width() + count > room {
            out.push(Span::styled(format!("+{}", total - i), more));
            break;
        }
        used += w.width();
        out.push(w);
    }
    out
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
    let mut kinds: BTreeMap<FlagKind, (usize, Severity)> = BTreeMap::new();
    for n in &app.store.nodes {
        for f in n.detector.active() {
            let e = kinds.entry(f.kind).or_insert((0, f.severity));
            e.0 += 1;
            e.1 = e.1.max(f.severity);
        }
    }
    let health = view::health_counts(&app.store, app.now_ms);
    let mut head = vec![
        Span::styled(" fleetop ", t.title.add_modifier(Modifier::REVERSED)),
        // The console's clock, in UTC like the export and the audit log: a
        // frozen clock means a frozen console.
        Span::styled(format!(" {} ", clock(app.now_ms)), t.muted),
    ];
    if app.allowed.read_only {
        head.push(Span::styled(" READ-ONLY ", t.warn.add_modifier(Modifier::REVERSED)));
    }
    if app.paused.is_some() {
        head.push(Span::styled(" PAUSED ", t.warn.add_modifier(Modifier::REVERSED)));
    }
    head.push(Span::raw(format!(" {}:", view::count(app.store.nodes.len(), "node"))));
    // Every node counted once, by the word its status column shows: a crit
    // node is never counted as ok. `ok` is said even at 0; the states as
    // words, or as the heatmap's short words where the totals would not fit.
    let states = |short: bool| {
        let mut v = Vec::new();
        for (h, c) in health {
            if c > 0 || h == view::Health::Ok {
                v.push(Span::raw(" "));
                let word = if short { h.short() } else { h.word() };
                v.push(Span::styled(format!("{c} {word}"), health_style(t, h)));
            }
        }
        v.push(Span::styled(" │ ", t.border));
        v
    };
    let used = |spans: &[Span<'_>]| spans.iter().map(|s| s.width()).sum::<usize>();
    let totals = view::totals(&app.store, app.now_ms);
    let forms = totals_forms(&totals);
    let width = usize::from(area.width);
    // The longest totals that fit, long state words before short ones;
    // the shortest form at worst (cut at the edge, never wrong).
    let (short, said) = forms
        .iter()
        .flat_map(|f| [(false, f), (true, f)])
        .find(|(short, f)| used(&head) + used(&states(*short)) + f.chars().count() <= width)
        .or_else(|| forms.last().map(|f| (true, f)))
        .map_or((true, String::new()), |(s, f)| (s, f.clone()));
    let mut line1 = head;
    line1.extend(states(short));
    if said.is_empty() {
        line1.pop();
    }
    line1.push(if totals.live == 0 {
        Span::styled(said, t.muted)
    } else {
        Span::raw(said)
    });
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
    // The console itself has fallen behind (its queue, its CPU): what it
    // shows is that old, and no node is called silent for it.
    if app.store.lag.behind_ms > 0 {
        let behind = view::human_age(app.store.lag.behind_ms);
        line2.push(Span::styled(format!(" console behind {behind} "), t.warn));
        // Its runtime is late: no node is called stale or unreachable now.
        if app.store.lag.judging_held() && area.width >= 100 {
            line2.push(Span::styled("(silence not judged) ", t.muted));
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

/// The header's totals, longest first: the numbers come from live nodes
/// only, and the nodes left out are said in every form that has a number
/// (util and power give way first); with no live node, no number at all.
fn totals_forms(t: &view::Totals) -> Vec<String> {
    if t.live == 0 {
        return vec!["no live data".into()];
    }
    let util = t.util_pct.map_or("-".to_string(), |u| format!("{u}%"));
    let kw = t.power_w / 1000.0;
    let gpus = view::count(t.gpus, "GPU");
    let mut forms = vec![
        format!("{gpus}  util {util}  {kw:.1} kW"),
        format!("{gpus} util {util} {kw:.1} kW"),
        format!("{gpus} util {util}"),
        gpus,
    ];
    if t.left_out > 0 {
        let out = t.left_out;
        for (i, f) in forms.iter_mut().enumerate() {
            let said = if i == 0 {
                format!(" · {} not counted", view::count(out, "node"))
            } else {
                format!(" · {out} not counted")
            };
            f.push_str(&said);
        }
        // Where not even the GPUs fit: what is left out, and no number.
        forms.push(format!("{out} not counted"));
        // Where not even that fits beside the health counts: no number is
        // shown, and the counts already name the nodes left out.
        forms.push(String::new());
    }
    forms
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
    if let Some(c) = &app.command {
        // What Tab could not choose between, else how the line works.
        let hint = if c.choices.is_empty() {
            "   Tab complete  Enter run  Esc cancel".to_string()
        } else {
            format!("   {}", c.choices.join(" "))
        };
        let line = Line::from(vec![
            Span::styled(":", t.title),
            Span::raw(c.text.clone()),
            Span::styled("█", t.muted),
            Span::styled(hint, t.muted),
        ]);
        line.render(area, buf);
        return;
    }
    if let Some(text) = &app.input {
        let line = Line::from(vec![
            Span::styled("/", t.title),
            Span::raw(text.clone()),
            Span::styled("█", t.muted),
            Span::styled(
                "   name, gpu[01-08], a flag (thr), crit; a,b = either   Enter keep  Esc undo  ^U clear",
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
            "n/N warn+",
            "c/C crit",
            "p pause",
            "space mark",
            "y copy",
            "w wall",
            ": command",
        ],
        Screen::Detail if app.detail.pane == crate::tui::app::Pane::Timeline => &[
            "? help",
            "Esc back",
            "j/k scroll",
            "1-5 pane",
            "n/N warn+",
            "c/C crit",
            "p pause",
            ": command",
        ],
        Screen::Detail => &[
            "? help",
            "Esc back",
            "j/k GPU",
            "1-5 pane",
            "n/N warn+",
            "c/C crit",
            "p pause",
            ": command",
        ],
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
            ": command",
        ],
        Screen::Groups => &[
            "? help",
            "Esc back",
            "j/k move",
            "b group by",
            "Enter its nodes",
            "/ filter",
            ": command",
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
            ": command",
        ],
    };
    let mut state = vec![format!("metric {}", app.metric.name())];
    if app.screen == Screen::Heatmap {
        let dir = if app.sort_reverse { " reversed" } else { "" };
        // On the wall a live sort is taken once: say so, and how to renew it.
        let sort = app.shown_sort();
        let frozen = if app.wall_active() && sort != crate::tui::view::Sort::Name {
            " (as of s)"
        } else {
            ""
        };
        state.push(format!("sort {}{dir}{frozen}", sort.name()));
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
