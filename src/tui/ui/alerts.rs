//! Every active flag of the visible nodes, then the recently cleared ones,
//! dimmed. Enter opens the node.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Widget, Wrap};

use super::{block, line_at, severity_style};
use crate::model::flag::{Flag, Severity, Subject};
use crate::tui::app::App;
use crate::tui::view::{hhmm, human_age};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let rows = app.alert_rows();
    // Acknowledged and silenced rows are not counted as active: a person
    // has them in hand.
    let open = rows.iter().filter(|r| r.cleared_ms.is_none()).count();
    let quiet = rows
        .iter()
        .filter(|r| r.cleared_ms.is_none() && r.quiet.is_some())
        .count();
    let quiet_said = if quiet > 0 {
        format!(", {quiet} acked/silenced")
    } else {
        String::new()
    };
    let title = format!(
        " alerts · {} active{quiet_said}, {} cleared recently · sort {}{} ",
        open - quiet,
        rows.len() - open,
        app.alerts.sort.name(),
        if app.alerts.folded {
            " · one row per job (z unfolds)"
        } else {
            ""
        }
    );
    let b = block(t, title);
    let inner = b.inner(area);
    b.render(area, buf);
    if rows.is_empty() {
        line_at(Line::from(Span::styled("nothing flagged", t.ok)), inner, 0, buf);
        return;
    }
    // The selected alert in full, wrapped, under the list: a long reason
    // (a TLS error, an XID's meaning) and its evidence are readable at 80
    // columns, where the list's detail column is cut; then its catalog
    // entry: what it means, what to do, why, and the runbook.
    let pane_h = match inner.height {
        h if h >= 16 => 7,
        h if h >= 10 => 4,
        _ => 0,
    };
    let (inner, pane) = (
        Rect {
            height: inner.height - pane_h,
            ..inner
        },
        Rect {
            y: inner.y + inner.height - pane_h,
            height: pane_h,
            ..inner
        },
    );
    if let Some(r) = rows.get(app.alerts.cursor).filter(|_| pane_h > 0) {
        let rule = Line::from(Span::styled("─".repeat(pane.width as usize), t.border));
        line_at(rule, pane, 0, buf);
        let name = &app.store.nodes[r.node].target.name;
        Paragraph::new(entry_lines(app, &app.store.nodes[r.node], name, r.flag))
            .wrap(Wrap { trim: false })
            .render(
                Rect {
                    y: pane.y + 1,
                    height: pane.height - 1,
                    ..pane
                },
                buf,
            );
    }
    let height = inner.height.saturating_sub(1) as usize;
    let first = app.alerts.cursor.saturating_sub(height.saturating_sub(1));
    let wide = inner.width >= 120;
    let table_rows = rows.iter().enumerate().skip(first).take(height).map(|(pos, r)| {
        let n = &app.store.nodes[r.node];
        let f = r.flag;
        let subject = match f.subject {
            _ if r.gpus > 1 => crate::tui::view::count(r.gpus, "GPU"),
            Subject::Node => "node".to_string(),
            Subject::Gpu(g) => format!("gpu{g}"),
            Subject::IbPort(p) => n.ib_port_name(p),
        };
        let node = if r.nodes > 1 {
            crate::tui::view::count(r.nodes, "node")
        } else {
            n.target.name.clone()
        };
        // A cleared flag says so where the severity was, and its age is
        // the time since it cleared.
        let (sev, age) = match r.cleared_ms {
            None => (
                match f.severity {
                    Severity::Crit => "CRIT",
                    Severity::Warn => "WARN",
                    Severity::Info => "INFO",
                },
                human_age(app.now_ms - f.since_ms),
            ),
            Some(c) => ("gone", human_age(app.now_ms - c)),
        };
        // A quiet row keeps its severity (dimmed); its detail says why it
        // is quiet and until when.
        let mut detail = match r.quiet {
            Some(s) if s.ack.is_some() => "acked · ".to_string(),
            Some(s) => match s.until_ms {
                Some(until) => format!("silenced until {} · ", hhmm(until)),
                None => "silenced · ".to_string(),
            },
            None => String::new(),
        };
        // Where the response stands, before the detail: a drained node's
        // alert does not look unhandled.
        if r.nodes == 1
            && r.cleared_ms.is_none()
            && let Some(resp) = crate::tui::view::response(n, f.since_ms, app.now_ms)
        {
            detail.push_str(&format!("{resp} · "));
        }
        detail.push_str(&match r.job {
            Some(job) if r.gpus > 1 => folded_detail(f, job, r.gpus),
            _ => f.words(),
        });
        if wide && !f.evidence.is_empty() {
            detail.push_str(&format!("  [{}]", crate::tui::view::evidence_text(f)));
        }
        let row = Row::new(vec![
            Cell::from(Span::styled(sev, severity_style(t, f.severity))),
            Cell::from(node),
            Cell::from(subject),
            Cell::from(f.kind.name()),
            Cell::from(age),
            Cell::from(f.action.name()),
            Cell::from(detail),
        ]);
        match (pos == app.alerts.cursor, r.cleared_ms.is_some() || r.quiet.is_some()) {
            (true, _) => row.style(t.selected),
            (false, true) => row.style(t.muted.add_modifier(Modifier::DIM)),
            (false, false) => row,
        }
    });
    let node_w = rows
        .iter()
        .map(|r| match r.nodes {
            1 => app.store.nodes[r.node].target.name.chars().count(),
            n => crate::tui::view::count(n, "node").len(),
        })
        .max()
        .unwrap_or(4);
    let kind_w = rows.iter().map(|r| r.flag.kind.name().len()).max().unwrap_or(4);
    let action_w = rows
        .iter()
        .map(|r| r.flag.action.name().len())
        .max()
        .unwrap_or(6)
        .max(6);
    let widths = [
        Constraint::Length(5),
        Constraint::Length(node_w.clamp(4, 16) as u16),
        Constraint::Length(if rows.iter().any(|r| r.gpus > 9) { 9 } else { 8 }),
        Constraint::Length(kind_w as u16),
        Constraint::Length(4),
        Constraint::Length(action_w as u16),
        Constraint::Min(10),
    ];
    let header = Row::new(["sev", "node", "what", "kind", "age", "action", "detail"]).style(t.title);
    Table::new(table_rows, widths)
        .header(header)
        .column_spacing(1)
        .render(inner, buf);
}

/// A flag and its catalog entry, for the pane under the list: the flag,
/// what it means, what to do now (escalated, and why), what next, where
/// the runbook is.
fn entry_lines<'a>(app: &App, n: &crate::store::NodeState, node: &str, f: &'a Flag) -> Vec<Line<'a>> {
    let t = &app.theme;
    let e = f.entry();
    let ev = crate::tui::view::evidence_text(f);
    let mut head = vec![
        Span::styled(format!("{node} {}: ", f.kind.name()), severity_style(t, f.severity)),
        Span::raw(f.words()),
    ];
    if !ev.is_empty() {
        head.push(Span::styled(format!("  [{ev}]"), t.muted));
    }
    let label = |s: &'static str| Span::styled(s, t.muted);
    let mut lines = vec![
        Line::from(head),
        Line::from(vec![label("means   "), Span::raw(e.meaning)]),
        // Once fleetop has acted, the next step, never one already done.
        match crate::tui::view::next_step(n, Some(f)) {
            Some(next) => Line::from(vec![
                label("do now  "),
                Span::styled(next, severity_style(t, f.action.severity())),
            ]),
            None => Line::from(vec![
                label("do now  "),
                Span::styled(f.action.name(), severity_style(t, f.action.severity())),
                Span::raw(format!(": {}", f.action.says())),
            ]),
        },
    ];
    if let Some(r) = crate::tui::view::response(n, f.since_ms, app.now_ms) {
        lines.push(Line::from(vec![label("so far  "), Span::raw(r)]));
    }
    match (&f.escalation, e.investigate) {
        (Some(why), _) => lines.push(Line::from(vec![label("because "), Span::raw(why.as_str())])),
        (None, Some(next)) if next != f.action => lines.push(Line::from(vec![
            label("if again"),
            Span::raw(format!(" {}: {}", next.name(), next.says())),
        ])),
        _ => {}
    }
    lines.push(Line::from(vec![
        label("runbook "),
        Span::raw(fleetop_catalog::runbook(f.kind.name())),
    ]));
    lines
}

/// A row folding `gpus` GPUs of one job: the job said once, "job 4598 (alice,
/// 8 GPUs here): 8 GPUs idle at 0% for 12 min", where the job alone holds
/// the GPU; else the job, then the flag's words whole.
fn folded_detail(f: &crate::model::flag::Flag, job: u64, gpus: usize) -> String {
    let what = format!("{} {}", crate::tui::view::count(gpus, "GPU"), f.kind.name());
    match &f.holder {
        Some(h) if h.is_job_alone(job) => format!("{}: {what} {}", h.words(), f.detail),
        _ => format!("job {job}: {what}; {}", f.words()),
    }
}
