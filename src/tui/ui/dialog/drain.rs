//! The drain's reason being typed (also resume's and undrain's first
//! step), and a plan's commands waiting for `y`: with the jobs a drain
//! leaves running and the nodes someone already holds.

use ratatui::buffer::Buffer;
use ratatui::text::{Line, Span};

use super::{Room, answers, command_lines, guard_lines, wrap};
use crate::model::action::{NodeAction, Plan, REASON_PREFIX};
use crate::model::sched::Job;
use crate::tui::app::App;
use crate::tui::modal::Guard;
use crate::tui::theme::Theme;
use crate::tui::ui::popup;
use crate::tui::view::human_span;

/// Jobs listed by name in a drain dialog; the rest are counted.
const JOBS_SHOWN: usize = 4;

pub(super) fn reason(
    app: &App,
    action: NodeAction,
    nodes: &[String],
    text: &str,
    chosen: &str,
    room: Room,
    buf: &mut Buffer,
) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let mut lines = vec![
        Line::from(format!(" {} {chosen}: {}", action.verb(), nodes.join(" "))),
        Line::from(""),
    ];
    lines.extend(reason_lines(t, text, inner));
    lines.push(Line::from(""));
    // Before the confirmation: a node someone (or fleetop) already
    // holds is left as it is, its reason kept.
    let held = crate::tui::actions::already_held(app, nodes);
    if action == NodeAction::Drain && !held.is_empty() {
        lines.push(Line::from(Span::styled(
            " Already out of service, left as it is (its reason kept):",
            t.warn,
        )));
        for h in &held {
            lines.extend(wrap(&format!("   {h}"), inner, "     ").into_iter().map(Line::from));
        }
        lines.push(Line::from(""));
    }
    lines.extend(job_lines(app, nodes, inner));
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        " Enter continue (nothing runs yet)   Ctrl-U clear   Esc cancel",
        t.muted,
    )));
    popup(t, action.verb(), lines, width, area, buf);
}

pub(super) fn confirm(app: &App, plan: &Plan, chosen: &str, guard: Option<&Guard>, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let forced = if guard.is_some() { ", forced" } else { "" };
    // Wrapped: a job's owner, name and run time make it long.
    let head = format!(" Run these commands ({chosen}{forced})?");
    let mut lines: Vec<Line<'_>> = wrap(&head, inner, " ").into_iter().map(Line::from).collect();
    lines.push(Line::from(""));
    lines.extend(command_lines(plan, inner));
    lines.push(Line::from(""));
    if plan.action == NodeAction::Drain {
        lines.extend(job_lines(app, &plan.nodes, inner));
        lines.push(Line::from(""));
    }
    match guard {
        Some(g) => lines.extend(guard_lines(t, g, None, inner)),
        None => lines.push(answers(t, "run", &[], "cancel")),
    }
    popup(t, &format!("confirm {}", plan.action.verb()), lines, width, area, buf);
}

/// The reason being typed, after the fixed prefix it will carry (shown,
/// not typed), wrapped, with the cursor at its end.
fn reason_lines(t: &Theme, text: &str, width: usize) -> Vec<Line<'static>> {
    let label = " reason: ";
    let prefix = format!("{REASON_PREFIX} ");
    let whole = format!("{label}{prefix}{text}\u{2588}");
    let lead = label.chars().count() + prefix.chars().count();
    wrap(&whole, width, &" ".repeat(label.chars().count()))
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let mut chars: Vec<char> = l.chars().collect();
            let cursor = chars.last() == Some(&'\u{2588}');
            if cursor {
                chars.pop();
            }
            let mut spans = Vec::new();
            if i == 0 {
                let cut = |a: usize, b: usize| chars[a.min(chars.len())..b.min(chars.len())].iter().collect::<String>();
                spans.push(Span::styled(cut(0, label.len()), t.title));
                spans.push(Span::styled(cut(label.len(), lead), t.muted));
                spans.push(Span::raw(cut(lead, chars.len())));
            } else {
                spans.push(Span::raw(chars.iter().collect::<String>()));
            }
            if cursor {
                spans.push(Span::styled("\u{2588}", t.muted));
            }
            Line::from(spans)
        })
        .collect()
}

/// The Slurm jobs on `nodes` and what a drain does to them: they run to
/// their end, and nothing new starts.
fn job_lines(app: &App, nodes: &[String], width: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    if crate::tui::actions::to_kube(app) {
        let what = " Kubernetes: the drain cordons, taints fleetop/quarantine:NoSchedule, sets the condition \
                    FleetopQuarantine, posts an Event, then evicts the pods (not DaemonSet or mirror pods); \
                    a PodDisruptionBudget may refuse some: the result names them.";
        return wrap(what, width, " ")
            .into_iter()
            .map(|l| Line::from(Span::styled(l, t.muted)))
            .collect();
    }
    let views: Vec<_> = nodes
        .iter()
        .filter_map(|name| app.store.nodes.iter().find(|n| &n.target.name == name))
        .filter_map(|n| n.scheduler.as_ref())
        .collect();
    if views.is_empty() {
        return vec![Line::from(Span::styled(
            " Slurm has not listed these nodes yet: their jobs are unknown",
            t.warn,
        ))];
    }
    let mut jobs: Vec<&Job> = Vec::new();
    for j in views.iter().flat_map(|v| &v.jobs) {
        if !jobs.iter().any(|x| x.id == j.id) {
            jobs.push(j);
        }
    }
    if jobs.is_empty() {
        return vec![Line::from(Span::styled(" no Slurm job runs here", t.ok))];
    }
    let mut lines = vec![Line::from(vec![
        Span::raw(format!(
            " {} Slurm job{} here: ",
            jobs.len(),
            if jobs.len() == 1 { "" } else { "s" }
        )),
        Span::styled("running jobs finish; nothing new starts here", t.warn),
    ])];
    for j in jobs.iter().take(JOBS_SHOWN) {
        let name: String = j.name.chars().take(20).collect();
        let mut l = format!(
            "   {:<8} {:<10} {:<20} {:>6}",
            j.id,
            j.user,
            name,
            human_span(j.elapsed_s.min(i64::MAX as u64 / 1000) as i64 * 1000)
        );
        if nodes.len() > 1 {
            let here: Vec<String> = j.nodes.iter().filter(|n| nodes.contains(n)).cloned().collect();
            l.push_str(&format!("  on {}", crate::ingest::hostlist::compress(&here)));
        }
        lines.push(Line::from(l.chars().take(width).collect::<String>()));
    }
    if jobs.len() > JOBS_SHOWN {
        lines.push(Line::from(Span::styled(
            format!("   +{} more", jobs.len() - JOBS_SHOWN),
            t.muted,
        )));
    }
    lines
}
