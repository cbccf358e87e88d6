//! The dialogs of cluster actions: what will run, on which nodes, what it
//! does to the jobs there, and who else holds a node, before anything runs.
//! Long text (a filled-in reason, a command with it) is wrapped, not cut:
//! the person confirms what they can read.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::popup;
use crate::model::action::{self, NodeAction, Plan, REASON_PREFIX};
use crate::model::sample::Vendor;
use crate::model::sched::Job;
use crate::tui::app::{App, Dialog, Guard};
use crate::tui::theme::Theme;
use crate::tui::view::{count, human_span};

/// Jobs listed by name in a drain dialog; the rest are counted.
const JOBS_SHOWN: usize = 4;

pub(super) fn render(app: &App, d: &Dialog, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let width = area.width.saturating_sub(4).clamp(40, 110);
    // The popup's text width: inside its border.
    let inner = usize::from(width.min(area.width).saturating_sub(2));
    match d {
        Dialog::Reason {
            action,
            nodes,
            text,
            chosen,
        } => {
            let mut lines = vec![
                Line::from(format!(" {} {chosen}: {}", action.verb(), nodes.join(" "))),
                Line::from(""),
            ];
            lines.extend(reason_lines(t, text, inner));
            lines.push(Line::from(""));
            // Before the confirmation: a node someone (or fleetop) already
            // holds is left as it is, its reason kept.
            let held = crate::tui::actions::already_held(app, nodes);
            if *action == NodeAction::Drain && !held.is_empty() {
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
        Dialog::Confirm { plan, chosen, guard } => {
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
        Dialog::ConfirmReturn {
            prepared,
            chosen,
            guard,
        } => {
            let suite = prepared.suite.name();
            let head = format!(" Return {chosen} to service ({suite} burn-in where none passed since the drain):");
            let mut lines: Vec<Line<'_>> = wrap(&head, inner, " ").into_iter().map(Line::from).collect();
            for d in prepared.describe() {
                lines.extend(wrap(&format!("   {d}"), inner, "     ").into_iter().map(Line::from));
            }
            lines.push(Line::from(""));
            if prepared.plan.commands.is_empty() {
                lines.push(Line::from(Span::styled(
                    " Nothing runs: every node is left as it is.",
                    t.muted,
                )));
            } else {
                lines.push(Line::from(Span::styled(
                    " Runs (the resume only where the burn-in passes):",
                    t.muted,
                )));
                lines.extend(command_lines(&prepared.plan, inner));
            }
            if !prepared.bench_targets().is_empty() && !app.bench_enabled {
                let no_token = " No agents' token (bench_token_file): no burn-in runs; those nodes stay drained.";
                lines.extend(
                    wrap(no_token, inner, " ")
                        .into_iter()
                        .map(|l| Line::from(Span::styled(l, t.warn))),
                );
            }
            lines.push(Line::from(""));
            match guard {
                Some(g) => lines.extend(guard_lines(t, g, Some(("Tab", "quick/full")), inner)),
                None => lines.push(answers(t, "run", &[("s", "quick/full")], "cancel")),
            }
            popup(t, "return to service", lines, width, area, buf);
        }
        Dialog::ConfirmBench { nodes, suite, guard } => {
            let names: Vec<&str> = nodes
                .iter()
                .filter_map(|&i| app.store.nodes.get(i))
                .map(|n| n.target.name.as_str())
                .collect();
            let suite = suite.name();
            let mut lines = vec![
                Line::from(format!(
                    " Run the {suite} burn-in suite on {}?",
                    count(names.len(), "node")
                )),
                Line::from(format!("   {}", names.join(" "))),
                Line::from(""),
            ];
            let vendors: std::collections::BTreeSet<Vendor> = nodes
                .iter()
                .filter_map(|&i| app.store.nodes.get(i)?.info.as_ref())
                .map(|info| info.vendor())
                .collect();
            lines.extend(wrap(&bench_checks(&vendors), inner, " ").into_iter().map(Line::from));
            lines.push(Line::from(" The GPUs are busy for a few minutes: jobs on them will slow down."));
            lines.push(Line::from(""));
            match guard {
                Some(g) => lines.extend(guard_lines(t, g, Some(("Tab", "quick/full")), inner)),
                None => lines.push(answers(t, "run", &[("s", "quick/full")], "cancel")),
            }
            popup(t, "confirm burn-in", lines, width, area, buf);
        }
        Dialog::ConfirmSignal { plan, node } => {
            let mut lines = vec![
                Line::from(format!(
                    " {} on {}?",
                    plan.reason.as_deref().unwrap_or(""),
                    plan.nodes.join(" ")
                )),
                Line::from(" The node's agent sends it, only to processes it sees on that GPU:"),
            ];
            lines.extend(process_lines(app, *node, plan, inner));
            lines.push(Line::from(""));
            lines.extend(command_lines(plan, inner));
            lines.push(Line::from(""));
            lines.push(answers(t, "send", &[], "cancel"));
            popup(t, "confirm signal", lines, width, area, buf);
        }
        Dialog::ConfirmCancelBench { nodes } => {
            let lines = vec![
                Line::from(format!(" Stop the burn-in on {}?", count(nodes.len(), "node"))),
                Line::from(format!("   {}", nodes.join(" "))),
                Line::from(" They end as cancelled: no verdict on the hardware."),
                Line::from(""),
                answers(t, "stop it", &[], "let it run"),
            ];
            popup(t, "cancel burn-in", lines, width, area, buf);
        }
        Dialog::Running(plan) => {
            let n = count(plan.nodes.len(), "node");
            let lines = match plan.action {
                NodeAction::Signal => vec![Line::from(format!(" signal {n}… asking the node's agent"))],
                NodeAction::Return => {
                    let mut lines = vec![Line::from(format!(
                        " return {n}… a burn-in first where needed (minutes), then the resume"
                    ))];
                    lines.extend(return_progress(app, plan, inner));
                    lines.push(Line::from(Span::styled(
                        " Esc hides this: the result shows when it is done",
                        t.muted,
                    )));
                    lines
                }
                a => vec![Line::from(format!(
                    " {} {n}… then reading the result back from {}",
                    a.verb(),
                    match plan.scheduler {
                        crate::model::action::Scheduler::Kubernetes => "Kubernetes",
                        _ => "Slurm",
                    }
                ))],
            };
            popup(t, "running", lines, width, area, buf);
        }
        Dialog::Result => {
            let Some(r) = &app.store.last_action else { return };
            let mut lines = Vec::new();
            // A node's message is wrapped under its own column, never cut
            // at the box's edge: a failure's why is what the person needs.
            let name_w = r.results.iter().map(|n| n.node.chars().count()).max().unwrap_or(0).clamp(4, 24);
            let lead = " ".repeat(name_w + 8);
            for n in &r.results {
                let message = wrap(&n.message, inner.saturating_sub(name_w + 8).max(20), "");
                let mut message = message.into_iter();
                lines.push(Line::from(vec![
                    Span::raw(format!(" {:<name_w$} ", n.node)),
                    if n.ok {
                        Span::styled("ok    ", t.ok)
                    } else {
                        Span::styled("FAIL  ", t.crit)
                    },
                    Span::raw(message.next().unwrap_or_default()),
                ]));
                lines.extend(message.map(|m| Line::from(format!("{lead}{m}"))));
            }
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(
                format!(" logged to {}   any key closes", app.audit_path.display()),
                t.muted,
            )));
            let title = format!(
                "{} {}",
                r.action.verb(),
                if r.ok() { "done" } else { "failed on some nodes" }
            );
            popup(t, &title, lines, width, area, buf);
        }
    }
}

/// Where each returning node's burn-in stands, as the CLI prints it:
/// "gpu03  burn-in [24/33] nvlink_bw" (the bench screen has the checks).
fn return_progress(app: &App, plan: &Plan, width: usize) -> Vec<Line<'static>> {
    let name_w = plan.nodes.iter().map(|n| n.chars().count()).max().unwrap_or(0).clamp(4, 24);
    plan.nodes
        .iter()
        .map(|name| {
            let state = app
                .store
                .nodes
                .iter()
                .position(|n| &n.target.name == name)
                .and_then(|i| app.store.bench.get(&i));
            // The words of the CLI's progress; a node with no burn-in of
            // its own (one passed since the drain) waits for the resume.
            use crate::model::bench::Outcome;
            let now = match state.map(|b| (b, b.outcome())) {
                None => "no burn-in needed: resume next".to_string(),
                Some((b, Outcome::Running)) if b.total > 0 => format!(
                    "burn-in [{}/{}] {}",
                    b.done,
                    b.total,
                    fleetop_proto::input::printable(&b.step, 80)
                ),
                Some((_, Outcome::Running)) => "burn-in starting".to_string(),
                Some((_, Outcome::Passed)) => "burn-in passed: resuming".to_string(),
                Some((_, Outcome::Failed)) => "burn-in failed: stays drained".to_string(),
                Some(_) => "burn-in did not finish: stays drained".to_string(),
            };
            let line = format!("   {name:<name_w$}  {now}");
            Line::from(super::cut(&line, width))
        })
        .collect()
}

/// What a burn-in checks, in the words of the chosen nodes' vendors: AMD
/// nodes have XGMI and RAS events, and no collective test yet.
fn bench_checks(vendors: &std::collections::BTreeSet<Vendor>) -> String {
    let nvidia = vendors.is_empty() || vendors.contains(&Vendor::Nvidia);
    let amd = vendors.contains(&Vendor::Amd);
    let (links, collective, faults) = match (nvidia, amd) {
        (true, false) => ("NVLink", "NCCL all-reduce, ", "XIDs"),
        (false, _) => ("XGMI", "", "RAS events"),
        (true, true) => ("NVLink or XGMI", "NCCL all-reduce (NVIDIA), ", "XIDs, RAS events"),
    };
    format!(
        " GPU copies (HBM, PCIe, {links}), {collective}a GEMM burn watched for throttling, {faults} and ECC errors, host memory, and TCP to the next node."
    )
}

/// `text` in lines of at most `width` columns, broken at spaces where it
/// can be (a word longer than a line is cut), the lines after the first
/// led by `indent`.
pub(super) fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let lead = indent.chars().count();
    // Never narrower than the indent and a little text: no endless loop.
    let width = width.max(lead + 8);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut len = 0usize;
    let mut fresh = true;
    for word in text.split(' ') {
        let wl = word.chars().count();
        if !fresh && len + 1 + wl <= width {
            cur.push(' ');
            cur.push_str(word);
            len += 1 + wl;
            continue;
        }
        if !fresh {
            out.push(std::mem::take(&mut cur));
            cur.push_str(indent);
            len = lead;
        }
        let mut rest: Vec<char> = word.chars().collect();
        while len + rest.len() > width {
            let take = width - len;
            cur.extend(rest.drain(..take));
            out.push(std::mem::take(&mut cur));
            cur.push_str(indent);
            len = lead;
        }
        len += rest.len();
        cur.extend(rest);
        fresh = false;
    }
    out.push(cur);
    out
}

/// A plan's exact commands, one a line (wrapped, never cut), as a person
/// would type them.
/// Each process a signal would reach: pid, owner, job and command line, so
/// the person sees whose work ends before pressing `y`.
fn process_lines(app: &App, node: usize, plan: &Plan, width: usize) -> Vec<Line<'static>> {
    let procs: Vec<&crate::model::sample::GpuProcess> = app
        .store
        .nodes
        .get(node)
        .and_then(|n| n.last.as_ref())
        .map(|s| s.gpus.iter().flat_map(|g| g.processes.iter()).collect())
        .unwrap_or_default();
    let pids = plan
        .commands
        .iter()
        .filter_map(|c| c.iter().find_map(|a| a.strip_prefix("pid=")))
        .filter_map(|p| p.parse::<u32>().ok());
    pids.map(|pid| {
        let p = procs.iter().find(|p| p.pid == pid);
        let job = p
            .and_then(|p| p.job_id)
            .map(|j| format!(" job {j}"))
            .unwrap_or_default();
        let owner = p.and_then(|p| p.owner.as_deref()).unwrap_or("?");
        let command = p.and_then(|p| p.command.as_deref()).unwrap_or("");
        let mut line = format!("   pid {pid} · {owner}{job} · {command}");
        if line.chars().count() > width {
            line = line.chars().take(width.saturating_sub(1)).collect::<String>() + "…";
        }
        Line::from(line)
    })
    .collect()
}

fn command_lines(plan: &Plan, width: usize) -> Vec<Line<'static>> {
    plan.commands
        .iter()
        .flat_map(|c| wrap(&format!("   {}", action::shell_words(c)), width, "     "))
        .map(Line::from)
        .collect()
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
        let what = " Kubernetes: the drain cordons, then evicts the pods (not DaemonSet or mirror pods); \
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

/// For nodes someone else holds: who and why, and that only their names,
/// typed, run it (`y` alone does not); `switch` is the suite key where
/// there is one.
fn guard_lines(t: &Theme, g: &Guard, switch: Option<(&str, &str)>, width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(Span::styled(
        // Someone else's hold, a fault still up, a running job: none is
        // ours to override with one key.
        if g.held.len() == 1 {
            format!(" This node is {}:", g.head)
        } else {
            format!(" These nodes are {}:", g.head)
        },
        t.warn,
    ))];
    for h in &g.held {
        lines.extend(wrap(&format!("   {h}"), width, "     ").into_iter().map(Line::from));
    }
    lines.extend(
        wrap(
            &format!(
                " y alone does not run this: type {} and Enter to go on anyway.",
                g.names
            ),
            width,
            " ",
        )
        .into_iter()
        .map(Line::from),
    );
    let mut typed = vec![
        Span::styled(" > ", t.title),
        Span::raw(g.typed.clone()),
        Span::styled("\u{2588}", t.muted),
    ];
    if g.wrong {
        typed.push(Span::styled(format!("  not {}: nothing was run", g.names), t.crit));
    }
    lines.push(Line::from(typed));
    let mut keys = vec![Span::styled(" Enter ", t.crit), Span::raw("run when it matches    ")];
    if let Some((k, what)) = switch {
        keys.push(Span::styled(format!("{k} "), t.title));
        keys.push(Span::raw(format!("{what}    ")));
    }
    keys.push(Span::styled("Esc ", t.title));
    keys.push(Span::raw("cancel"));
    lines.push(Line::from(keys));
    lines
}

/// A confirmation's answers: `y` and what it does, any other keys, and what
/// any other key does, which is the default.
fn answers(t: &Theme, yes: &str, more: &[(&str, &str)], otherwise: &str) -> Line<'static> {
    let mut spans = vec![Span::styled(" y ", t.crit), Span::raw(format!("{yes}    "))];
    for (key, what) in more {
        spans.push(Span::styled(format!("{key} "), t.title));
        spans.push(Span::raw(format!("{what}    ")));
    }
    spans.push(Span::styled("any other key ", t.title));
    spans.push(Span::raw(format!("{otherwise} (the default)")));
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_breaks_at_spaces_cuts_long_words_and_never_loops() {
        assert_eq!(wrap("ab cd ef gh", 9, " "), ["ab cd ef", " gh"]);
        assert_eq!(wrap("abcdefghijkl", 10, ""), ["abcdefghij", "kl"]);
        for w in 0..12 {
            for l in wrap("a very long reason: with words, and moreeeeeeeeeeeeeeeeee", w, "   ") {
                assert!(l.chars().count() <= w.max(11), "{l:?} at {w}");
            }
        }
        assert_eq!(wrap("", 10, " "), [""]);
    }
}
