//! The node detail: what to do now and the node's flags (here), a table of
//! its GPUs (`gpus`), and below it history, NVLink, InfiniBand and
//! processes (`panes`: one pane at 80 columns, two side by side when the
//! terminal is wide).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{block, line_at, severity_style, status_span};
use crate::model::flag::{Flag, Severity, Subject};
use crate::store::NodeState;
use crate::tui::app::{App, Pane};
use crate::tui::theme::Theme;
use crate::tui::view::{human_age, opt};

mod gpus;
mod panes;

use gpus::render_gpu_table;
use panes::{render_pane, render_pane_in};

const GIB: f64 = (1u64 << 30) as f64;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let Some(n) = app.node_in_detail() else {
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
        // The agent's version beside its backend ("nvml, agent 0.1.0"); a
        // dcgm-exporter's node names only its source.
        let agent = match i.agent_version.as_str() {
            v if v.is_empty() || v == i.backend => String::new(),
            v => format!(", agent {v}"),
        };
        // The host's own name where it is not the name the node goes by.
        let host = match i.hostname.as_str() {
            h if h == n.target.name || h.is_empty() => String::new(),
            h => format!("{h} · "),
        };
        // AMD has no CUDA: its driver is amdgpu's.
        let cuda = match i.vendor() {
            crate::model::sample::Vendor::Amd => String::new(),
            crate::model::sample::Vendor::Nvidia => format!(" CUDA {}", opt(i.cuda_version.as_deref())),
        };
        title.push(Span::styled(
            format!(
                "{host}{}{agent} · driver {}{cuda} ",
                i.backend,
                opt(i.driver_version.as_deref()),
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
    // An AMD GPU's own line under the table: its partition, temperatures,
    // RAS, throttle words.
    let amd_line = amd_gpu_line(app, n);
    let amd_h = u16::from(amd_line.is_some());
    let table_h = (gpus as u16 + 1).min(inner.height.saturating_sub(6 + amd_h).max(2));
    // What the schedulers say of the node, a line each (Kubernetes up to
    // three), then the pods on its GPUs.
    let ray = app.store.ray.as_ref();
    let sched_h = u16::from(n.scheduler.is_some()) + u16::from(ray.is_some());
    let kube_lines = super::kube::lines(t, &app.store.kube, app.detail.node, app.now_ms);
    let kube_h = kube_lines.len() as u16;
    let pods = n.last.as_ref().and_then(pods_line);
    let pods_h = u16::from(pods.is_some());
    // The diagnosis: the node's most urgent action, then every flag (kind,
    // subject, action, detail) as far as room allows, so a node crit for a
    // node-level reason never looks healthy and no flag name is cut.
    let flags: Vec<&Flag> = n.detector.active().collect();
    let room = inner
        .height
        .saturating_sub(1 + sched_h + kube_h + pods_h + table_h + amd_h + 4);
    // "do now": the most urgent step, wrapped (two lines at most), never
    // cut at the edge; then the flags.
    let do_now = do_now(app, n)
        .map(|(said, severity)| (wrap_do_now(&said, usize::from(inner.width)), severity))
        .unwrap_or((Vec::new(), Severity::Info));
    let do_now_h = do_now.0.len() as u16;
    let flags_h = (flags.len() as u16).min(3).min(room.saturating_sub(do_now_h));
    let diag_h = do_now_h + flags_h;
    let [host, sched, kube, pods_at, diag, table, amd, lower] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(sched_h),
        Constraint::Length(kube_h),
        Constraint::Length(pods_h),
        Constraint::Length(diag_h),
        Constraint::Length(table_h),
        Constraint::Length(amd_h),
        Constraint::Min(0),
    ])
    .areas(inner);
    render_diagnosis(app, n, do_now, &flags, diag, buf);
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
        let mut line = sched_line(t, v, app.now_ms, &n.timeline);
        if let Some(p) = crate::tui::view::scheduler_problem(&app.store, app.now_ms) {
            line.spans.insert(0, Span::styled(format!("{p} │ "), t.crit));
        }
        line_at(line, sched, 0, buf);
    }
    if let Some(r) = ray {
        line_at(
            super::ray::line(t, r, app.detail.node, app.now_ms),
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
    if let Some(l) = amd_line {
        line_at(l, amd, 0, buf);
    }
    if lower.height < 3 {
        return;
    }
    // Two panes side by side where there is room for both.
    if lower.width >= 140 {
        let [left, right] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(lower);
        let i = Pane::ALL.iter().position(|p| *p == app.detail.pane).unwrap_or(0);
        render_pane(app, n, app.detail.pane, left, buf);
        // The tabs once, over the left pane; the right one is named alone.
        let next = Pane::ALL[(i + 1) % Pane::ALL.len()];
        let title = format!(" {} ", next.title_for(panes::vendor(n)));
        render_pane_in(app, n, next, block(t, title), right, buf);
    } else {
        render_pane(app, n, app.detail.pane, lower, buf);
    }
}

/// "do now: drain, then reboot the node: XID 79 (...) on GPU 1; ..." and
/// under it the flags, most urgent first, one a line, as many as fit
/// ("+N more: the alerts screen has them all"). Each says what it is on,
/// how long it has been up and its evidence before its detail, so at 80
/// columns the numbers stay when the detail is cut. Of equal urgency,
/// node-level flags (a node, an InfiniBand port) come first: the GPU table
/// shows GPU flags in their rows, and nothing else above pane 3 shows these.
fn render_diagnosis(
    app: &App,
    n: &NodeState,
    (said, severity): (Vec<String>, Severity),
    flags: &[&Flag],
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &app.theme;
    for (i, text) in said.iter().enumerate() {
        let lead = if i == 0 { "do now " } else { "       " };
        let line = Line::from(vec![
            Span::styled(lead, t.muted),
            Span::styled(text.clone(), severity_style(t, severity)),
        ]);
        line_at(line, area, i as u16, buf);
    }
    // The flags under it.
    let said_h = (said.len() as u16).min(area.height);
    let area = Rect {
        y: area.y + said_h,
        height: area.height - said_h,
        ..area
    };
    let mut sorted = flags.to_vec();
    sorted.sort_by_key(|f| {
        let node_level = !matches!(f.subject, Subject::Gpu(_));
        std::cmp::Reverse((f.action.urgency(), f.severity, node_level))
    });
    let rows = area.height as usize;
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
        spans.push(Span::raw(f.words()));
        if i + 1 == rows && more > 0 {
            spans.insert(
                0,
                Span::styled(format!("+{more} more (A: this node's alerts) "), t.muted),
            );
        }
        line_at(Line::from(spans), area, i as u16, buf);
    }
}

/// What to do now and its urgency: once fleetop has acted, the next step
/// and where the response stands, never a step already done (a drained
/// node with nothing flagged still has one: its return); else the most
/// urgent flag's action. `None` where there is nothing to do.
fn do_now(app: &App, n: &NodeState) -> Option<(String, Severity)> {
    let diagnosis = crate::tui::view::diagnosis(n);
    let top = diagnosis.as_ref().map(|(f, _)| *f);
    let said = match (crate::tui::view::next_step(n, top), &diagnosis) {
        (Some(next), _) => {
            let since = top.map_or(i64::MIN, |f| f.since_ms);
            match crate::tui::view::response(n, since, app.now_ms) {
                Some(r) => format!("{next} ({r})"),
                None => next,
            }
        }
        (None, Some((_, said))) => said.clone(),
        (None, None) => return None,
    };
    Some((said, top.map_or(Severity::Info, |f| f.action.severity())))
}

/// The do-now text in lines after its "do now " lead: two at most, the
/// second cut with "…" only where even two do not hold it.
fn wrap_do_now(said: &str, width: usize) -> Vec<String> {
    let mut lines = super::dialog::wrap(said, width.saturating_sub(7).max(20), "");
    if lines.len() > 2 {
        let rest = lines[1..].join(" ");
        lines.truncate(1);
        lines.push(super::cut(&rest, width.saturating_sub(7)));
    }
    lines
}

/// "slurm mixed in gpu,debug · job 4411 alice train 8 GPUs 1h02m"; out of
/// service, who holds it, for how long and why first: "slurm drained by
/// fleetop 2h13m: xid on gpu3 ... · in gpu · no jobs".
fn sched_line<'a>(
    t: &Theme,
    v: &crate::model::sched::NodeView,
    now_ms: i64,
    timeline: &crate::model::timeline::Timeline,
) -> Line<'a> {
    let style = if v.node.is_down() {
        t.crit
    } else if v.node.state.contains("drain") {
        t.warn
    } else {
        t.ok
    };
    let mut spans = vec![Span::styled("slurm ", t.muted)];
    if let Some(held) = crate::tui::view::held_text(&v.node, now_ms, timeline) {
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

/// The selected GPU's line where it is AMD's: "gpu3 CPX/NPS4 partition 3 ·
/// junction 71°C HBM 65°C edge - · RAS c/u UMC 0/2 · XGMI errors 1 · bad
/// pages pending 1 · throttle socket_thrm,TEMP_HOTSPOT": what the table's
/// columns, NVIDIA's, have no room for. Faults before the throttle words, so
/// at 80 columns the cut takes those.
fn amd_gpu_line(app: &App, n: &NodeState) -> Option<Line<'static>> {
    let t = &app.theme;
    let g = n.last.as_ref()?.gpus.get(app.detail.gpu)?;
    let d = crate::tui::view::gpu_info(n, g.index)?;
    if d.vendor != crate::model::sample::Vendor::Amd {
        return None;
    }
    let sep = || Span::styled(" · ", t.muted);
    let mut spans = vec![Span::styled(format!("gpu{}", g.index), t.title)];
    if let Some(p) = &d.partition {
        spans.push(Span::raw(format!(" {}", p.words())));
    }
    if g.error.is_none() {
        spans.push(sep());
        spans.push(Span::raw(format!(
            "junction {}°C HBM {}°C edge {}",
            opt(g.temp_c),
            opt(g.hbm_temp_c),
            g.edge_temp_c.map_or("-".to_string(), |c| format!("{c}°C"))
        )));
    }
    let ras: Vec<String> = g
        .ras
        .iter()
        .filter(|r| r.correctable > 0 || r.uncorrectable > 0 || r.deferred > 0)
        .map(|r| match r.deferred {
            0 => format!("{} {}/{}", r.block, r.correctable, r.uncorrectable),
            d => format!("{} {}/{}+{d}d", r.block, r.correctable, r.uncorrectable),
        })
        .collect();
    if !ras.is_empty() {
        let bad = g.ras.iter().any(|r| r.uncorrectable > 0 || r.deferred > 0);
        spans.push(sep());
        spans.push(Span::styled("RAS c/u ", t.muted));
        spans.push(Span::styled(ras.join(" "), if bad { t.crit } else { t.warn }));
    }
    if let Some(x) = g.xgmi_error_status.filter(|&x| x != 0) {
        spans.push(sep());
        let what = if x == 1 {
            "an XGMI error".to_string()
        } else {
            format!("XGMI errors ({x})")
        };
        spans.push(Span::styled(what, t.crit));
    }
    if let Some(p) = g.retired_pages_pending.filter(|&p| p > 0) {
        spans.push(sep());
        spans.push(Span::styled(format!("bad pages pending {p}"), t.warn));
    }
    if !g.throttle_detail.is_empty() {
        spans.push(sep());
        spans.push(Span::styled("throttle ", t.muted));
        spans.push(Span::raw(g.throttle_detail.join(",")));
    }
    Some(Line::from(spans))
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
