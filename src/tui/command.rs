//! The footer's prompts: `/` (the filter, applied as it is typed) and `:`
//! (a command line, as in k9s). A command does what its key does, through
//! the same paths: `:drain` opens the drain dialog that `D` opens, so
//! nothing runs without the usual confirmation. Pure like `app`: no I/O.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::tui::actions::{action_targets, open_drain, start_action, start_return};
use crate::tui::app::{App, Screen};
use crate::tui::view::{Filter, Sort};

/// The commands, in the order help and completion list them.
pub const COMMANDS: [&str; 9] = [
    "node", "filter", "drain", "resume", "return", "sort", "help", "q", "quit",
];

/// A key while the filter is typed: the list follows each key (a term that
/// does not parse yet, like `gpu[0`, keeps the last good filter); Enter
/// keeps it, Esc puts back the one before, Ctrl-U clears the line.
pub fn filter_key(app: &mut App, k: KeyEvent) {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    let Some(text) = app.input.as_mut() else { return };
    match k.code {
        KeyCode::Char('u') if ctrl => text.clear(),
        KeyCode::Char(c) if !ctrl => text.push(c),
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Esc => {
            app.input = None;
            if let Some((f, t)) = app.filter_before.take() {
                (app.filter, app.filter_text) = (f, t);
            }
            app.message = None;
            return;
        }
        KeyCode::Enter => {
            let text = app.input.take().unwrap_or_default();
            app.filter_before = None;
            set_filter(app, &text);
            return;
        }
        _ => return,
    }
    let text = text.clone();
    if let Ok(f) = Filter::parse(&text) {
        app.filter = f;
        app.filter_text = text.trim().to_string();
        app.select_row(0);
        app.alerts.cursor = 0;
    }
}

/// Sets the filter from `text`, or says why it cannot.
fn set_filter(app: &mut App, text: &str) {
    match Filter::parse(text) {
        Ok(f) => {
            app.filter = f;
            app.filter_text = text.trim().to_string();
            app.message = None;
            app.select_row(0);
            app.alerts.cursor = 0;
        }
        Err(e) => app.message = Some(e),
    }
}

/// A key while the `:` line is open: Tab completes, Enter runs, Esc
/// cancels, Ctrl-U clears.
pub fn command_key(app: &mut App, k: KeyEvent) {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    let Some(line) = app.command.as_mut() else { return };
    match k.code {
        KeyCode::Esc => app.command = None,
        KeyCode::Enter => {
            let text = app.command.take().map(|c| c.text).unwrap_or_default();
            run(app, &text);
        }
        KeyCode::Tab => {
            let typed = line.text.clone();
            let (text, choices) = complete(app, &typed);
            if let Some(c) = app.command.as_mut() {
                c.text = text;
                c.choices = choices;
            }
        }
        KeyCode::Char('u') if ctrl => line.text.clear(),
        KeyCode::Char(c) if !ctrl => {
            line.text.push(c);
            line.choices.clear();
        }
        KeyCode::Backspace => {
            line.text.pop();
            line.choices.clear();
        }
        _ => {}
    }
}

/// The sort keys `:sort` takes: each sort's name's first word.
fn sort_keys() -> Vec<(&'static str, Sort)> {
    Sort::ALL
        .iter()
        .map(|&s| (s.name().split(' ').next().unwrap_or(""), s))
        .collect()
}

/// `text` completed by Tab: a command's name, or a node's (`:node`) or a
/// sort key's (`:sort`) as far as the candidates agree; and the candidates
/// when more than one is left.
pub fn complete(app: &App, text: &str) -> (String, Vec<String>) {
    let (cmd, arg) = match text.split_once(' ') {
        Some((c, a)) => (c, Some(a.trim_start())),
        None => (text, None),
    };
    let (head, word, pool): (String, &str, Vec<String>) = match (cmd, arg) {
        (c, None) => (String::new(), c, COMMANDS.iter().map(|s| s.to_string()).collect()),
        ("node", Some(a)) => (
            "node ".into(),
            a,
            app.store.nodes.iter().map(|n| n.target.name.clone()).collect(),
        ),
        ("sort", Some(a)) => (
            "sort ".into(),
            a,
            sort_keys().iter().map(|(k, _)| k.to_string()).collect(),
        ),
        _ => return (text.to_string(), Vec::new()),
    };
    let lower = word.to_lowercase();
    let hits: Vec<String> = pool
        .into_iter()
        .filter(|p| p.to_lowercase().starts_with(&lower))
        .collect();
    match hits.as_slice() {
        [] => (text.to_string(), Vec::new()),
        // A command's name is followed by its argument.
        [one] if arg.is_none() && !matches!(one.as_str(), "help" | "q" | "quit" | "resume" | "return") => {
            (format!("{one} "), Vec::new())
        }
        [one] => (format!("{head}{one}"), Vec::new()),
        many => {
            let common = common_prefix(many).filter(|c| c.len() >= word.len());
            let done = common.map_or_else(|| word.to_string(), str::to_string);
            (format!("{head}{done}"), many.to_vec())
        }
    }
}

fn common_prefix(words: &[String]) -> Option<&str> {
    let first = words.first()?;
    let mut end = first.len();
    for w in &words[1..] {
        end = first
            .char_indices()
            .zip(w.chars())
            .take_while(|((_, a), b)| a.eq_ignore_ascii_case(b))
            .last()
            .map_or(0, |((i, c), _)| i + c.len_utf8())
            .min(end);
    }
    Some(&first[..end])
}

/// Runs one command line. What changes the cluster only opens its dialog.
pub fn run(app: &mut App, text: &str) {
    let text = text.trim();
    let (cmd, arg) = match text.split_once(char::is_whitespace) {
        Some((c, a)) => (c, a.trim()),
        None => (text, ""),
    };
    app.message = None;
    match cmd {
        "" => {}
        "q" | "quit" => app.quit = true,
        "help" => app.help.shown = true,
        "filter" => set_filter(app, arg),
        "node" => open_node(app, arg),
        "sort" => sort(app, arg),
        "drain" => {
            // No reason typed: what `D` fills in (node detail's diagnosis).
            if arg.is_empty() {
                start_action(app, 'D');
                return;
            }
            let nodes = action_targets(app);
            if nodes.is_empty() {
                app.message = Some("no node to drain: select or mark one".into());
                return;
            }
            let chosen = crate::tui::actions::chosen(app, nodes.len());
            open_drain(app, nodes, arg.to_string(), chosen);
        }
        "resume" => start_action(app, 'R'),
        "return" => start_return(app),
        other => {
            app.message = Some(format!("unknown command :{other} · try {}", COMMANDS[..8].join(" ")));
        }
    }
}

/// `:node NAME`: that node's detail; a hostlist opens its first node the
/// console knows.
fn open_node(app: &mut App, arg: &str) {
    if arg.is_empty() {
        app.message = Some(":node takes a node's name (Tab completes it)".into());
        return;
    }
    let names = crate::ingest::hostlist::expand(arg).unwrap_or_else(|_| vec![arg.to_string()]);
    let found = names.iter().find_map(|want| {
        app.store
            .nodes
            .iter()
            .position(|n| n.target.name.eq_ignore_ascii_case(want))
    });
    match found {
        Some(i) => {
            app.open_detail(i, None);
            app.select_node(i);
        }
        None => app.message = Some(format!("no node {arg}")),
    }
}

/// `:sort KEY`: that sort (`-KEY` the other way), as `s` and `S` set it.
fn sort(app: &mut App, arg: &str) {
    let (reverse, key) = match arg.strip_prefix('-') {
        Some(k) => (true, k),
        None => (false, arg),
    };
    let key = key.to_lowercase();
    let keys = sort_keys();
    match keys.iter().find(|(k, _)| !key.is_empty() && k.starts_with(&key)) {
        Some(&(_, s)) => {
            app.sort = s;
            app.sort_reverse = reverse;
            app.screen = Screen::Heatmap;
            app.freeze_wall_order();
        }
        None => {
            let all: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
            app.message = Some(format!(":sort takes one of {} (-KEY reverses)", all.join(" ")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_prefix_of_names() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(common_prefix(&w(&["gpu01", "gpu02"])), Some("gpu0"));
        assert_eq!(common_prefix(&w(&["resume", "return"])), Some("re"));
        assert_eq!(common_prefix(&w(&["a", "b"])), Some(""));
        assert_eq!(common_prefix(&[]), None);
    }
}
