//! Drawing: a function of `&App` alone, no I/O.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use crate::flags::{FlagKind, Severity, Subject};
use crate::store::NodeStatus;
use crate::tui::app::App;

/// Heat colour for a utilization percentage (256-colour palette).
pub fn heat(pct: u32) -> Color {
    const RAMP: [u8; 6] = [17, 24, 30, 36, 142, 166];
    Color::Indexed(RAMP[(pct.min(100) as usize * (RAMP.len() - 1)) / 100])
}

fn severity_style(s: Severity) -> Style {
    match s {
        Severity::Crit => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        Severity::Warn => Style::new().fg(Color::Yellow),
        Severity::Info => Style::new().fg(Color::Cyan),
    }
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let [header, body, alerts, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(8.min(area.height / 3)),
            Constraint::Length(1),
        ])
        .areas(area);
        self.render_header(header, buf);
        self.render_nodes(body, buf);
        self.render_alerts(alerts, buf);
        let hint = match &self.log_path {
            Some(p) => format!(" q quit  j/k move  g/G top/bottom   log: {}", p.display()),
            None => " q quit  j/k move  g/G top/bottom".into(),
        };
        Paragraph::new(hint)
            .style(Style::new().fg(Color::DarkGray))
            .render(footer, buf);
    }
}

impl App {
    fn render_header(&self, area: Rect, buf: &mut Buffer) {
        let th = &self.store.thresholds;
        let mut counts = [0usize; 4];
        let (mut gpus, mut util_sum, mut util_n, mut power_w) = (0usize, 0u64, 0u64, 0f64);
        let mut kinds = std::collections::BTreeMap::<FlagKind, usize>::new();
        for n in &self.store.nodes {
            counts[n.status(self.now_ms, th) as usize] += 1;
            gpus += n.info.as_ref().map(|i| i.gpus.len()).unwrap_or(0);
            for g in n
                .last
                .iter()
                .flat_map(|s| &s.gpus)
                .filter(|g| g.error.is_empty())
            {
                util_sum += u64::from(g.util_pct);
                util_n += 1;
                power_w += f64::from(g.power_mw) / 1000.0;
            }
            for f in n.detector.active() {
                *kinds.entry(f.kind).or_default() += 1;
            }
        }
        let mean = util_sum.checked_div(util_n).unwrap_or(0);
        let mut spans = vec![
            Span::styled(
                " fleetop ",
                Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED),
            ),
            Span::raw(format!(
                " {} nodes ({} ok, {} stale, {} unreachable)  {gpus} GPUs  util {mean}%  {:.1} kW ",
                self.store.nodes.len(),
                counts[NodeStatus::Ok as usize],
                counts[NodeStatus::Stale as usize],
                counts[NodeStatus::Unreachable as usize] + counts[NodeStatus::Connecting as usize],
                power_w / 1000.0
            )),
        ];
        for (k, c) in kinds {
            spans.push(Span::styled(
                format!(" {}:{c}", k.name()),
                Style::new().fg(Color::Yellow),
            ));
        }
        Line::from(spans).render(area, buf);
    }

    fn render_nodes(&self, area: Rect, buf: &mut Buffer) {
        let block = Block::new()
            .borders(Borders::TOP)
            .title(" nodes (cells: GPU utilization %) ");
        let inner = block.inner(area);
        block.render(area, buf);
        let rows = inner.height as usize;
        let first = self.selected.saturating_sub(rows.saturating_sub(1));
        let th = &self.store.thresholds;
        for (row, (i, n)) in self
            .store
            .nodes
            .iter()
            .enumerate()
            .skip(first)
            .take(rows)
            .enumerate()
        {
            let status = n.status(self.now_ms, th);
            let mut spans = vec![Span::styled(
                format!("{:<10.10} ", n.target.name),
                if i == self.selected {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                },
            )];
            let (text, style) = match status {
                NodeStatus::Ok => ("ok   ", Style::new().fg(Color::Green)),
                NodeStatus::Stale => ("stale", Style::new().fg(Color::Yellow)),
                NodeStatus::Unreachable => ("unrch", Style::new().fg(Color::Red)),
                NodeStatus::Connecting => ("conn ", Style::new().fg(Color::DarkGray)),
            };
            spans.push(Span::styled(text, style));
            spans.push(Span::raw(" "));
            for g in n.last.iter().flat_map(|s| &s.gpus) {
                if !g.error.is_empty() {
                    spans.push(Span::styled(
                        " XX",
                        Style::new().fg(Color::White).bg(Color::Red),
                    ));
                } else {
                    spans.push(Span::styled(
                        format!("{:>3}", g.util_pct),
                        Style::new().fg(Color::White).bg(heat(g.util_pct)),
                    ));
                }
                spans.push(Span::raw(" "));
            }
            let worst = n.detector.active().map(|f| f.severity).max();
            let names: Vec<String> = n
                .detector
                .active()
                .map(|f| flag_label(f.kind, f.subject))
                .collect();
            if let Some(w) = worst {
                spans.push(Span::styled(names.join(" "), severity_style(w)));
            }
            Line::from(spans).render(
                Rect {
                    y: inner.y + row as u16,
                    height: 1,
                    ..inner
                },
                buf,
            );
        }
    }

    fn render_alerts(&self, area: Rect, buf: &mut Buffer) {
        let block = Block::new().borders(Borders::TOP).title(" alerts ");
        let inner = block.inner(area);
        block.render(area, buf);
        let mut all: Vec<_> = self
            .store
            .nodes
            .iter()
            .flat_map(|n| n.detector.active().map(move |f| (n, f)))
            .collect();
        all.sort_by_key(|(n, f)| {
            (
                std::cmp::Reverse(f.severity),
                f.since_ms,
                n.target.name.clone(),
            )
        });
        for (row, (n, f)) in all.iter().take(inner.height as usize).enumerate() {
            let sev = match f.severity {
                Severity::Crit => "CRIT",
                Severity::Warn => "WARN",
                Severity::Info => "INFO",
            };
            let line = Line::from(vec![
                Span::styled(format!("{sev} "), severity_style(f.severity)),
                Span::raw(format!(
                    "{:<8.8} {:<14} {}",
                    n.target.name,
                    flag_label(f.kind, f.subject),
                    f.detail
                )),
            ]);
            line.render(
                Rect {
                    y: inner.y + row as u16,
                    height: 1,
                    ..inner
                },
                buf,
            );
        }
    }
}

fn flag_label(kind: FlagKind, subject: Subject) -> String {
    match subject {
        Subject::Node => kind.name().to_string(),
        Subject::Gpu(g) => format!("{}@gpu{g}", kind.name()),
        Subject::IbPort(p) => format!("{}@ib{p}", kind.name()),
    }
}
