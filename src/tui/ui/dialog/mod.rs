//! The dialogs of cluster actions: what will run, on which nodes, what it
//! does to the jobs there, and who else holds a node, before anything runs.
//! Long text (a filled-in reason, a command with it) is wrapped, not cut:
//! the person confirms what they can read. One module per kind of dialog;
//! here what they share.

mod bench;
mod drain;
mod result;
mod returning;
mod signal;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::model::action::{self, Plan};
use crate::tui::app::{App, Dialog, Guard};
use crate::tui::theme::Theme;

/// Where a dialog is drawn: the popup's width, the text's width inside
/// its border, and the screen.
#[derive(Clone, Copy)]
struct Room {
    width: u16,
    inner: usize,
    area: Rect,
}

pub(super) fn render(app: &App, d: &Dialog, area: Rect, buf: &mut Buffer) {
    let width = area.width.saturating_sub(4).clamp(40, 110);
    // The popup's text width: inside its border.
    let inner = usize::from(width.min(area.width).saturating_sub(2));
    let room = Room { width, inner, area };
    match d {
        Dialog::Reason {
            action,
            nodes,
            text,
            chosen,
        } => drain::reason(app, *action, nodes, text, chosen, room, buf),
        Dialog::Confirm { plan, chosen, guard } => drain::confirm(app, plan, chosen, guard.as_ref(), room, buf),
        Dialog::ConfirmReturn {
            prepared,
            chosen,
            guard,
        } => returning::render(app, prepared, chosen, guard.as_ref(), room, buf),
        Dialog::ConfirmBench { nodes, suite, guard } => bench::render(app, nodes, *suite, guard.as_ref(), room, buf),
        Dialog::ConfirmSignal { plan, node } => signal::render(app, plan, *node, room, buf),
        Dialog::ConfirmCancelBench { nodes } => bench::cancel(app, nodes, room, buf),
        Dialog::Running(plan) => result::running(app, plan, room, buf),
        Dialog::Result => result::render(app, room, buf),
    }
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
pub(super) fn command_lines(plan: &Plan, width: usize) -> Vec<Line<'static>> {
    plan.commands
        .iter()
        .flat_map(|c| wrap(&format!("   {}", action::shell_words(c)), width, "     "))
        .map(Line::from)
        .collect()
}

/// For nodes someone else holds: who and why, and that only their names,
/// typed, run it (`y` alone does not); `switch` is the suite key where
/// there is one.
pub(super) fn guard_lines(t: &Theme, g: &Guard, switch: Option<(&str, &str)>, width: usize) -> Vec<Line<'static>> {
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
pub(super) fn answers(t: &Theme, yes: &str, more: &[(&str, &str)], otherwise: &str) -> Line<'static> {
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
