//! The node detail: a table of its GPUs, and below it history, NVLink,
//! InfiniBand and processes (one pane at 80 columns, two side by side when
//! the terminal is wide).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Sparkline, Table, Widget};

use super::{block, line_at, severity_style, status_span};
use crate::model::flag::{Flag, FlagKind, Subject};
use crate::store::NodeState;
use crate::store::history::{COARSE, Point};
use crate::tui::app::{App, Pane};
use crate::tui::theme::Theme;
use crate::tui::view::{gpu_info, human_age, human_rate, opt};
use fleetop_proto::ib::counter_name;
use fleetop_proto::throttle;

const GIB: f64 = (1u64 << 30) as f64;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let Some(n) = app.detail() else {
        block(t, " node ").render(area, buf);
        return;
    };
    let status = n.status(app.now_ms, &app.store.thresholds);
    let mut title = vec![
        Span::raw(format!(" {} ", n.target.name)),
        status_span(t, status, crate::tui::view::worst_severity(n)),
        Span::styled(format!(" {} ", crate::tui::view::freshness(n, app.now_ms)), t.muted),
    ];
    if let Some(i) = &n.info {
        title.push(Span::styled(
            format!(
                "{} · {} · driver {} CUDA {} ",
                i.hostname,
                i.backend,
                opt(i.driver_version.as_deref()),
                opt(i.cuda_version.as_deref())
            ),
            t.muted,
        ));
    }
    let b = block(t, Line::from(title));
    let inner = b.inner(area);
    b.render(area, buf);

    let gpus = n.last.as_ref().map(|s| s.gpus.len()).unwrap_or(0);
    let mut host_line = host_summary(n);
    if let Some(r) = &n.rack {
        host_line = format!("rack {r} · {host_line}");
    }
    let table_h = (gpus as u16 + 1).min(inner.height.saturating_sub(6).max(2));
    // What the schedulers say of the node, a line each (Kubernetes up to
    // three), then the pods on its GPUs.
    let ray = app.store.ray.as_ref();
    let sched_h = u16::from(n.scheduler.is_some()) + u16::from(ray.is_some());
    let kube_lines = super::kube::lines(t, &app.store.kube, app.detail_node, app.now_ms);
    let kube_h = kube_lines.len() as u16;
    let pods = n.last.as_ref().and_then(pods_line);
    let pods_h = u16::from(pods.is_some());
    // The diagnosis: the node's most urgent action, then every flag (kind,
    // subject, action, detail) as far as room allows, so a node crit for a
    // node-level reason never looks healthy and no flag name is cut.
    let flags: Vec<&Flag> = n.detector.active().collect();
    let room = inner.height.saturating_sub(1 + sched_h + kube_h + pods_h + table_h + 4);
    let flags_h = (flags.len() as u16).min(3).min(room.saturating_sub(1));
    // A "do now" line with a flag, or for a node fleetop holds (its return).
    let do_now = !flags.is_empty() || crate::tui::view::next_step(n, None).is_some();
    let diag_h = u16::from(do_now) + flags_h;
    let [host, sched, kube, pods_at, diag, table, lower] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(sched_h),
        Constraint::Length(kube_h),
        Constraint::Length(pods_h),
        Constraint::Length(diag_h),
        Constraint::Length(table_h),
        Constraint::Min(0),
    ])
    .areas(inner);
    render_diagnosis(app, n, &flags, diag, buf);
    // A broken connection's reason first: the person must not have to
    // guess why the numbers stopped (or never came).
    let mut host_spans = Vec::new();
    if let Some(p) = crate::tui::view::link_problem(n, app.now_ms) {
        host_spans.push(Span::styled(p, t.crit));
        host_spans.push(Span::styled(" │ ", t.border));
    }
    host_spans.push(Span::styled(host_line, t.muted));
    line_at(Line::from(host_spans), host, 0, buf);
    if let Some(v) = &n.scheduler {
        let drainer = crate::tui::view::fleetop_drainer(&n.timeline);
        let mut line = sched_line(t, v, app.now_ms, drainer.as_deref());
        if let Some(p) = crate::tui::view::scheduler_problem(&app.store, app.now_ms) {
            line.spans.insert(0, Span::styled(format!("{p} │ "), t.crit));
        }
        line_at(line, sched, 0, buf);
    }
    if let Some(r) = ray {
        line_at(
            super::ray::line(t, r, app.detail_node, app.now_ms),
            sched,
            u16::from(n.scheduler.is_some()),
            buf,
        );
    }
    if let Some(p) = pods {
        line_at(
            Line::from(vec![Span::styled("pods ", t.title), Span::styled(p, t.muted)]),
            pods_at,
            0,
            buf,
        );
    }
    for (i, l) in kube_lines.into_iter().enumerate() {
        line_at(l, kube, i as u16, buf);
    }
    render_gpu_table(app, n, table, buf);
    if lower.height < 3 {
        return;
    }
    // Two panes side by side where there is room for both.
    if lower.width >= 140 {
        let [left, right] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(lower);
        let i = Pane::ALL.iter().position(|p| *p == app.pane).unwrap_or(0);
        render_pane(app, n, app.pane, left, buf);
        // The tabs once, over the left pane; the right one is named alone.
        let next = Pane::ALL[(i + 1) % Pane::ALL.len()];
        render_pane_in(app, n, next, block(t, format!(" {} ", next.title())), right, buf);
    } else {
        render_pane(app, n, app.pane, lower, buf);
    }
}

/// "do now: drain, then reboot the node: XID 79 (...) on GPU 1; ..." and
/// under it the flags, most urgent first, one a line, as many as fit
/// ("+N more: the alerts screen has them all"). Each says what it is on,
/// how long it has been up and its evidence before its detail, so at 80
/// columns the numbers stay when the detail is cut. Of equal urgency,
/// node-level flags (a node, an InfiniBand port) come first: the GPU table
/// shows GPU flags in their rows, and nothing else above pane 3 shows these.
fn render_diagnosis(app: &App, n: &NodeState, flags: &[&Flag], area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let diagnosis = crate::tui::view::diagnosis(n);
    let top = diagnosis.as_ref().map(|(f, _)| *f);
    // Once fleetop has acted, the next step and where the response
    // stands, never a step already done (a drained node with nothing
    // flagged still has one: its return).
    let said = match (crate::tui::view::next_step(n, top), &diagnosis) {
        (Some(next), _) => {
            let since = top.map_or(i64::MIN, |f| f.since_ms);
            match crate::tui::view::response(n, since, app.now_ms) {
                Some(r) => format!("{next} ({r})"),
                None => next,
            }
        }
        (None, Some((_, said))) => said.clone(),
        (None, None) => return,
    };
    let severity = top.map_or(crate::model::flag::Severity::Info, |f| f.action.severity());
    let line = Line::from(vec![
        Span::styled("do now ", t.muted),
        Span::styled(said, severity_style(t, severity)),
    ]);
    line_at(line, area, 0, buf);
    let mut sorted = flags.to_vec();
    sorted.sort_by_key(|f| {
        let node_level = !matches!(f.subject, Subject::Gpu(_));
        std::cmp::Reverse((f.action.urgency(), f.severity, node_level))
    });
    let rows = area.height.saturating_sub(1) as usize;
    let more = sorted.len().saturating_sub(rows);
    for (i, f) in sorted.iter().take(rows).enumerate() {
        let on = match f.subject {
            Subject::Node => "node".to_string(),
            Subject::Gpu(g) => format!("gpu{g}"),
            Subject::IbPort(p) => n.ib_port_name(p),
        };
        let mut spans = vec![
            Span::styled(format!("  {} ", f.kind.name()), severity_style(t, f.severity)),
            Span::raw(format!("{on} ")),
            Span::styled(format!("{} ", human_age(app.now_ms - f.since_ms)), t.muted),
            Span::styled(format!("{} ", f.action.name()), t.muted),
        ];
        let evidence = crate::tui::view::evidence_text(f);
        if !evidence.is_empty() {
            spans.push(Span::raw(format!("[{evidence}] ")));
        }
        spans.push(Span::raw(f.detail.clone()));
        if i + 1 == rows && more > 0 {
            spans.insert(
                0,
                Span::styled(format!("+{more} more (A: this node's alerts) "), t.muted),
            );
        }
        line_at(Line::from(spans), area, i as u16 + 1, buf);
    }
}

/// "slurm mixed in gpu,debug · job 4411 alice train 8 GPUs 1h02m"; out of
/// service, who holds it, for how long and why first: "slurm drained by
/// fleetop 2h13m: xid on gpu3 ... · in gpu · no jobs".
fn sched_line<'a>(t: &Theme, v: &crate::model::sched::NodeView, now_ms: i64, drainer: Option<&str>) -> Line<'a> {
    let style = if v.node.is_down() {
        t.crit
    } else if v.node.state.contains("drain") {
        t.warn
    } else {
        t.ok
    };
    let mut spans = vec![Span::styled("slurm ", t.muted)];
    if let Some(held) = crate::tui::view::held_text(&v.node, now_ms, drainer) {
        spans.push(Span::styled(held, style));
        if !v.node.partitions.is_empty() {
            spans.push(Span::styled(" · in ", t.muted));
            spans.push(Span::raw(v.node.partitions.join(",")));
        }
    } else {
        spans.push(Span::styled(v.node.label(), style));
        if !v.node.partitions.is_empty() {
            spans.push(Span::styled(" in ", t.muted));
            spans.push(Span::raw(v.node.partitions.join(",")));
        }
    }
    // A reason on a node in service (Slurm keeps the last one): as before.
    if let Some(r) = v.node.reason.as_ref().filter(|_| !v.node.out_of_service()) {
        let by = v
            .node
            .reason_user
            .as_deref()
            .map(|u| format!(", by {u}"))
            .unwrap_or_default();
        let when = v
            .node
            .reason_time
            .as_deref()
            .map(|w| format!(", {w}"))
            .unwrap_or_default();
        spans.push(Span::raw(format!(" ({r}{by}{when})")));
    }
    for j in &v.jobs {
        spans.push(Span::styled(" · ", t.muted));
        spans.push(Span::raw(format!(
            "job {} {} {} {} {}",
            j.id,
            j.user,
            j.name,
            crate::tui::view::count(j.gpus_per_node as usize, "GPU"),
            crate::tui::view::human_age(j.elapsed_s as i64 * 1000)
        )));
    }
    if v.jobs.is_empty() {
        spans.push(Span::styled(" · no jobs", t.muted));
    }
    Line::from(spans)
}

/// Which Kubernetes pods hold the node's GPUs, GPUs held alike together:
/// "gpu0,1 ml/train-0 (trainer) · gpu3 gi1 ml/infer (server) · gpu5
/// a/nb-1 (jupyter), b/nb-2 (jupyter)"; `None` where no pod holds one.
fn pods_line(s: &crate::model::sample::NodeSample) -> Option<String> {
    let mut parts: Vec<(Vec<u32>, String)> = Vec::new();
    for g in s.gpus.iter().filter(|g| !g.pods.is_empty()) {
        let holders: Vec<String> = g
            .pods
            .iter()
            .map(|p| {
                let gi = p
                    .mig_uuid
                    .as_ref()
                    .and_then(|u| g.mig.iter().find(|m| &m.uuid == u))
                    .map(|m| format!("gi{} ", m.gpu_instance_id))
                    .unwrap_or_default();
                format!("{gi}{} ({})", p.name(), p.container)
            })
            .collect();
        let text = holders.join(", ");
        match parts.last_mut() {
            Some((gpus, t)) if *t == text => gpus.push(g.index),
            _ => parts.push((vec![g.index], text)),
        }
    }
    (!parts.is_empty()).then(|| {
        parts
            .iter()
            .map(|(gpus, t)| {
                let ids: Vec<String> = gpus.iter().map(u32::to_string).collect();
                format!("gpu{} {t}", ids.join(","))
            })
            .collect::<Vec<_>>()
            .join(" · ")
    })
}

fn host_summary(n: &NodeState) -> String {
    let Some(h) = n.last.as_ref().and_then(|s| s.host.as_ref()) else {
        return n.target.address();
    };
    format!(
        "{}  cpu {:.0}%  mem {:.0}/{:.0} GiB  load {:.2}  up {}d",
        n.target.address(),
        h.cpu_pct,
        h.mem_used_bytes as f64 / GIB,
        h.mem_total_bytes as f64 / GIB,
        h.load1,
        h.uptime_s / 86_400
    )
}

/// Throttle reasons for people, without the noise of "gpu_idle".
/// The throttle reasons in `w` columns: whole names only, never one cut
/// mid-word ("hw_power_brake_slowdow"); those that do not fit are counted
/// ("sw_thermal,+2").
fn throttle_text(mask: u64, w: usize) -> String {
    let names = throttle::names(mask & !throttle::GPU_IDLE);
    if names.is_empty() {
        return "-".into();
    }
    fit_names(&names, w)
}

/// `names` joined by commas in `w` columns, whole, the rest as "+N".
fn fit_names<S: AsRef<str>>(names: &[S], w: usize) -> String {
    let mut out = String::new();
    for (i, n) in names.iter().enumerate() {
        let n = n.as_ref();
        let sep = if out.is_empty() { "" } else { "," };
        let left = names.len() - i - 1;
        let more = if left > 0 { format!(",+{left}").len() } else { 0 };
        if out.len() + sep.len() + n.len() + more > w {
            let rest = format!("+{}", names.len() - i);
            return if out.is_empty() { rest } else { format!("{out},{rest}") };
        }
        out.push_str(sep);
        out.push_str(n);
    }
    out
}

fn render_gpu_table(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let Some(s) = &n.last else {
        line_at(Line::from(Span::styled("no sample yet", t.muted)), area, 0, buf);
        return;
    };
    // Columns in screen order, each with how much it matters: when narrow
    // the least important go first, so at 80 columns the faults (throttle,
    // ECC, XID) and the flags stay and clocks and power give way.
    // Narrow terminals get narrower throttle and flag columns (long reasons
    // are cut, the flag names still fit), so memory stays too at 80.
    let narrow = area.width < 110;
    let all: [(&str, u16, u8); 11] = [
        ("GPU", 4, 10),
        ("util", 5, 9),
        ("mem GiB", 11, 5),
        ("temp", 8, 7),
        ("power W", 10, 3),
        ("SM MHz", 10, 2),
        ("throttle", if narrow { 14 } else { 22 }, 6),
        ("ECC c/u", 8, 8),
        ("XID", 5, 8),
        // GPM's SM activity ("-" without GPM).
        ("SM act", 6, 1),
        ("flags", if narrow { 16 } else { 18 }, 9),
    ];
    let mut shown = [true; 11];
    let width = |shown: &[bool; 11]| -> u16 { all.iter().zip(shown).filter(|(_, s)| **s).map(|(c, _)| c.1 + 1).sum() };
    let mut by_importance: Vec<usize> = (0..all.len()).collect();
    by_importance.sort_by_key(|&i| all[i].2);
    for i in by_importance {
        if width(&shown) <= area.width || shown.iter().filter(|s| **s).count() <= 4 {
            break;
        }
        shown[i] = false;
    }
    let keep_cols = |cells: Vec<Cell<'static>>| -> Vec<Cell<'static>> {
        cells
            .into_iter()
            .zip(shown)
            .filter(|(_, s)| *s)
            .map(|(c, _)| c)
            .collect()
    };
    let cols: Vec<(&str, u16)> = all
        .iter()
        .zip(shown)
        .filter(|(_, s)| *s)
        .map(|(c, _)| (c.0, c.1))
        .collect();
    // Rows (of the flattened table) of GPUs that gave no reading, with why:
    // drawn whole across the reading columns after the table, never cut to
    // a column's width ("gpu_l").
    let mut errors: Vec<(usize, usize, String)> = Vec::new();
    let mut rows: Vec<Row<'static>> = Vec::new();
    for (pos, g) in s.gpus.iter().enumerate() {
        let gi = gpu_info(n, g.index);
        let flags: Vec<Span<'static>> = n
            .detector
            .active()
            .filter(|f| f.subject == Subject::Gpu(g.index))
            // Short names (the legend is under `?`): the full list is above the table.
            .map(|f| Span::styled(format!("{} ", f.kind.short()), severity_style(t, f.severity)))
            .collect();
        let cells: Vec<Cell<'static>> = if let Some(e) = &g.error {
            // The XIDs it reported on the way out stay visible with the reason.
            // One name on screen for a stuck GPU: the flag's kind.
            let mut why = match e {
                crate::model::sample::GpuError::Stuck { text, for_ms } => {
                    format!(
                        "{}: {}",
                        FlagKind::GpuStuck.name(),
                        crate::detect::gpu::stuck_words(text, *for_ms)
                    )
                }
                e => e.name().to_string(),
            };
            let codes: Vec<String> = n.xid_codes(g.index).iter().map(u32::to_string).collect();
            if !codes.is_empty() {
                why.push_str(&format!(" · XID {}", codes.join(",")));
            }
            errors.push((rows.len(), pos, why));
            let mut cells = vec![Cell::from(g.index.to_string())];
            cells.resize(all.len() - 1, Cell::from(""));
            cells.push(Cell::from(Line::from(flags.clone())));
            cells
        } else {
            let th = &app.store.thresholds;
            let total = gi.and_then(|i| i.mem_total_bytes).map(|b| b as f64 / GIB);
            let xids: Vec<String> = n.xid_codes(g.index).iter().map(u32::to_string).collect();
            let xid_style = xid_style(t, n, g.index, !xids.is_empty());
            // The same line the `hot` flag draws: the slowdown temperature less the margin.
            let hot_at = th.slowdown_c(gi).saturating_sub(th.hot_margin_c);
            let hot = g.temp_c.is_some_and(|c| c >= hot_at);
            let mask = g.throttle_mask.unwrap_or(0);
            let hbm = g.hbm_temp_c.map(|c| format!(" {c}")).unwrap_or_default();
            vec![
                Cell::from(g.index.to_string()),
                Cell::from(format!("{:>3}%", opt(g.util_pct))),
                Cell::from(format!(
                    "{:>4}/{}",
                    opt(g.mem_used_bytes.map(|b| format!("{:.1}", b as f64 / GIB))),
                    opt(total.map(|t| format!("{t:.0}")))
                )),
                Cell::from(Span::styled(
                    format!("{}°C{hbm}", opt(g.temp_c)),
                    if hot { t.warn } else { Style::new() },
                )),
                Cell::from(format!(
                    "{}/{}",
                    opt(g.power_w.map(|w| format!("{w:.0}"))),
                    opt(g.power_limit_w.map(|w| format!("{w:.0}")))
                )),
                Cell::from(format!(
                    "{}/{}",
                    opt(g.sm_clock_mhz),
                    opt(gi.and_then(|i| i.max_sm_clock_mhz))
                )),
                Cell::from(Span::styled(
                    throttle_text(mask, if narrow { 14 } else { 22 }),
                    if mask & throttle::TROUBLE != 0 {
                        t.crit
                    } else {
                        Style::new()
                    },
                )),
                Cell::from(Span::styled(
                    format!("{}/{}", opt(g.ecc_corrected_volatile), opt(g.ecc_uncorrected_volatile)),
                    if g.ecc_uncorrected_volatile.unwrap_or(0) > 0 {
                        t.crit
                    } else {
                        Style::new()
                    },
                )),
                Cell::from(Span::styled(
                    if xids.is_empty() { "-".into() } else { xids.join(",") },
                    xid_style,
                )),
                Cell::from(match g.gpm {
                    Some(m) => format!("{:>3.0}%", m.sm_active_pct),
                    None => "   -".into(),
                }),
                Cell::from(Line::from(flags.clone())),
            ]
        };
        let row = Row::new(keep_cols(cells));
        let row = if pos == app.detail_gpu {
            row.style(t.selected)
        } else {
            row
        };
        // A GPU in MIG mode: a row per instance under it, with its profile,
        // memory and GPM SM activity, in the GPU's SM act column (the GPU's
        // utilization is not given in MIG mode).
        let mig = g.mig.iter().map(|m| {
            let mem = format!(
                "{:>4}/{}",
                opt(m.mem_used_bytes.map(|b| format!("{:.1}", b as f64 / GIB))),
                opt(m.mem_total_bytes.map(|b| format!("{:.0}", b as f64 / GIB)))
            );
            let mut cells = vec![
                Cell::from(""),
                Cell::from(format!("gi{}", m.gpu_instance_id)),
                Cell::from(mem),
                Cell::from(m.profile.clone()),
            ];
            cells.resize(9, Cell::from(""));
            cells.push(Cell::from(match m.gpm {
                Some(x) => format!("{:>3.0}%", x.sm_active_pct),
                None => "   -".into(),
            }));
            cells.resize(all.len(), Cell::from(""));
            Row::new(keep_cols(cells)).style(t.muted)
        });
        rows.push(row);
        rows.extend(mig);
    }
    let widths: Vec<Constraint> = cols.iter().map(|(_, w)| Constraint::Length(*w)).collect();
    let header = Row::new(cols.iter().map(|(h, _)| Cell::from(*h))).style(t.title);
    Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .render(area, buf);
    // Why a GPU gave nothing, across the columns between its index and its flags.
    let first = cols[0].1 + 1;
    let last = cols.iter().take(cols.len() - 1).map(|c| c.1 + 1).sum::<u16>();
    for (row, pos, why) in errors {
        let y = area.y + 1 + row as u16;
        if y < area.bottom() && last > first + 1 {
            let w = usize::from(last - first - 1);
            let style = if pos == app.detail_gpu { t.selected } else { t.crit };
            buf.set_stringn(area.x + first, y, format!("{why:<w$}"), w, style);
        }
    }
}

/// The XID column's style: held codes in their flag's severity (a code
/// not held yet, in its catalog severity); "-" plain, because red is crit
/// and nothing else, and a healthy GPU has nothing to shout about.
fn xid_style(t: &Theme, n: &NodeState, gpu: u32, any: bool) -> Style {
    if !any {
        return Style::new();
    }
    let flag = n
        .detector
        .active()
        .find(|f| f.kind == FlagKind::Xid && f.subject == Subject::Gpu(gpu));
    let severity = match flag {
        Some(f) => f.severity,
        None => n
            .xid_codes(gpu)
            .iter()
            .map(|&c| fleetop_catalog::xid_action(c).severity())
            .max()
            .unwrap_or(crate::model::flag::Severity::Info),
    };
    severity_style(t, severity)
}

fn pane_block<'a>(t: &Theme, pane: Pane) -> ratatui::widgets::Block<'a> {
    let tabs: Vec<Span<'a>> = Pane::ALL
        .iter()
        .map(|p| {
            let style = if *p == pane { t.title } else { t.muted };
            Span::styled(format!(" {} ", p.title()), style)
        })
        .collect();
    block(t, Line::from(tabs))
}

fn render_pane(app: &App, n: &NodeState, pane: Pane, area: Rect, buf: &mut Buffer) {
    render_pane_in(app, n, pane, pane_block(&app.theme, pane), area, buf);
}

fn render_pane_in(app: &App, n: &NodeState, pane: Pane, b: ratatui::widgets::Block<'_>, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let inner = b.inner(area);
    b.render(area, buf);
    match pane {
        Pane::History => render_history(app, n, inner, buf),
        Pane::Nvlink => render_nvlink(app, n, inner, buf),
        Pane::Infiniband => render_ib(t, n, inner, buf),
        Pane::Processes => render_processes(app, n, inner, buf),
        Pane::Timeline => super::timeline::render(app, n, inner, buf),
    }
}

/// Reads one series out of a history point.
type PointField = fn(&Point) -> u8;

/// Sparklines of the selected GPU over the kept history.
fn render_history(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    if app.detail_gpu >= n.history.gpus() {
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
    let window = app.history_zoom.window_ms();
    let shown: Vec<(i64, Point)> = n
        .history
        .points(app.detail_gpu)
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
    let label = format!("GPU {} · {}", app.detail_gpu, app.history_zoom.name());
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
fn history_columns(shown: &[(i64, Point)], width: usize) -> Vec<Vec<Point>> {
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
    let Some(g) = n.last.as_ref().and_then(|s| s.gpus.get(app.detail_gpu)) else {
        return;
    };
    let Some(gi) = gpu_info(n, g.index) else { return };
    if gi.nvlinks.is_empty() {
        line_at(Line::from(Span::styled("no NVLink on this GPU", t.muted)), area, 0, buf);
        return;
    }
    let rates = n.derived.gpus.get(app.detail_gpu);
    let row = |i: usize| {
        let l = &gi.nvlinks[i];
        // No reading (a GPU that fell off the bus): not known, never "up".
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
        ])
    };
    // 18 links do not fit one column at 24 rows: as many columns as fit.
    const COL_W: u16 = 36;
    let per_col = area.height.saturating_sub(1).max(1) as usize;
    let cols = (area.width / COL_W).max(1) as usize;
    let links: Vec<usize> = (0..gi.nvlinks.len()).collect();
    for (c, chunk) in links.chunks(per_col).take(cols).enumerate() {
        let widths = [4, 5, 11, 11].map(Constraint::Length);
        let header = Row::new(["link", "state", "tx", "rx"]).style(t.title);
        let col = Rect {
            x: area.x + c as u16 * COL_W,
            width: COL_W.min(area.width),
            ..area
        };
        Table::new(chunk.iter().map(|&i| row(i)), widths)
            .header(header)
            .render(col, buf);
    }
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
    let (t, ray, node) = (&app.theme, app.store.ray.as_ref(), app.detail_node);
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
    use super::{Point, fit_names, history_columns};

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

    #[test]
    fn throttle_names_are_never_cut_mid_word() {
        assert_eq!(fit_names(&["sw_thermal", "hw_slowdown"], 22), "sw_thermal,hw_slowdown");
        assert_eq!(
            fit_names(&["sw_thermal", "hw_power_brake_slowdown"], 22),
            "sw_thermal,+1"
        );
        assert_eq!(fit_names(&["hw_power_brake_slowdown"], 14), "+1");
        assert_eq!(fit_names(&["a", "b", "c"], 4), "a,+2");
    }
}
