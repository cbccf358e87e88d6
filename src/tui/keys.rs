//! The key handlers: what each key does, first the keys every screen shares
//! (quit, help, filter, Tab, actions), then each screen's own, and the
//! helpers behind them (marking, jumping to the next flagged node, quieting
//! an alert, copying a hostlist). `dispatch::update` hands every key here; the
//! state the keys change stays in `app`. What the keys are said to do is in
//! `screen`'s tables; a test there holds each table's keys taken here.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::flag::{Severity, Silence, Subject};
use crate::model::request::Request;
use crate::model::update::Update;
use crate::tui::actions::{
    action_targets, dialog_key, drain_alert, drain_failed_bench_node, start_action, start_bench, start_return,
    start_scancel, start_signal,
};
use crate::tui::app::{App, Dialog, Pane, Screen, Wall, moved, toggle_pause};
use crate::tui::view::{self, Filter};

/// A key pressed, while no mouse, dialog or prompt has taken it elsewhere
/// first. Whether a handler took it: a key no handler knows is no error
/// (it does nothing), but a key a screen's table names must be taken (a
/// test holds the tables to that).
pub(super) fn on_key(app: &mut App, k: KeyEvent) -> bool {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(k.code, KeyCode::Char('c')) {
        app.quit = true;
        return true;
    }
    if app.input.is_some() {
        crate::tui::command::filter_key(app, k);
        return true;
    }
    if app.command.is_some() {
        crate::tui::command::command_key(app, k);
        return true;
    }
    if app.dialog.is_some() {
        dialog_key(app, k);
        return true;
    }
    if app.help {
        // Any key closes help, q included, as the help says: a person who
        // opened help to find the quit key must not quit by closing it.
        // `?` again turns to the flag names first.
        let legend = k.code == KeyCode::Char('?') && !app.help_legend;
        app.help = legend;
        app.help_legend = legend;
        return true;
    }
    app.message = None;
    match k.code {
        KeyCode::Char('q') => app.quit = true,
        KeyCode::Char('?') => app.help = true,
        KeyCode::Char('/') => {
            app.filter_before = Some((app.filter.clone(), app.filter_text.clone()));
            app.input = Some(app.filter_text.clone());
        }
        KeyCode::Char(':') => app.command = Some(Default::default()),
        KeyCode::Tab | KeyCode::BackTab => {
            // The bench screen joins the cycle once a suite has run.
            let mut cycle = vec![Screen::Heatmap, Screen::Alerts, Screen::Detail];
            if !app.store.bench.is_empty() {
                cycle.push(Screen::Bench);
            }
            let i = cycle.iter().position(|s| *s == app.screen).unwrap_or(0);
            let step = if k.code == KeyCode::Tab { 1 } else { cycle.len() - 1 };
            app.screen = cycle[(i + step) % cycle.len()];
        }
        KeyCode::Char('m') => {
            app.metric = app.metric.next();
            app.freeze_wall_order();
        }
        KeyCode::Char('p') => toggle_pause(app),
        // One meaning on every screen that shows nodes: the next node that
        // needs a person (n: warn or worse, c: crit).
        KeyCode::Char(c @ ('n' | 'N' | 'c' | 'C')) if matches!(app.screen, Screen::Heatmap | Screen::Detail) => {
            let at_least = if c.eq_ignore_ascii_case(&'c') {
                Severity::Crit
            } else {
                Severity::Warn
            };
            jump_flagged(app, c.is_ascii_lowercase(), at_least);
        }
        KeyCode::Char('D') if app.screen == Screen::Bench => drain_failed_bench_node(app),
        KeyCode::Char('x') if app.screen == Screen::Bench => {
            let nodes: Vec<String> = app
                .store
                .bench
                .iter()
                .filter(|(_, b)| !b.finished)
                .filter_map(|(&i, _)| app.store.nodes.get(i).map(|n| n.target.name.clone()))
                .collect();
            if nodes.is_empty() {
                app.message = Some("no burn-in is running".into());
            } else {
                app.dialog = Some(Dialog::ConfirmCancelBench { nodes });
            }
        }
        KeyCode::Char('c') if app.screen == Screen::Bench => clear_bench(app),
        KeyCode::Char('D') if app.screen == Screen::Alerts => drain_alert(app),
        KeyCode::Char(c @ ('D' | 'R' | 'U')) if app.screen != Screen::Alerts => start_action(app, c),
        KeyCode::Char('T') if matches!(app.screen, Screen::Heatmap | Screen::Detail) => start_return(app),
        KeyCode::Char('B') if matches!(app.screen, Screen::Heatmap | Screen::Detail) => start_bench(app),
        KeyCode::Char('J') => {
            app.screen = Screen::Groups;
            app.group_cursor = 0;
        }
        KeyCode::Esc => match app.screen {
            Screen::Detail | Screen::Alerts => app.screen = Screen::Heatmap,
            Screen::Heatmap => {
                app.filter = Filter::All;
                app.filter_text.clear();
            }
            Screen::Bench | Screen::Groups => app.screen = Screen::Heatmap,
        },
        _ => {
            return match app.screen {
                Screen::Heatmap => heatmap_key(app, k),
                Screen::Detail => detail_key(app, k),
                Screen::Alerts => alerts_key(app, k),
                Screen::Groups => groups_key(app, k),
                Screen::Bench => bench_key(app, k),
            };
        }
    }
    true
}

fn bench_key(app: &mut App, k: KeyEvent) -> bool {
    if let Some(d) = vertical(&k, 10) {
        app.bench_cursor = moved(app.bench_cursor, d, app.store.bench.len());
        if app.bench_open.is_some() {
            app.bench_open = app.store.bench.keys().nth(app.bench_cursor).copied();
        }
    } else if k.code == KeyCode::Enter {
        let node = app.store.bench.keys().nth(app.bench_cursor).copied();
        app.bench_open = if app.bench_open == node { None } else { node };
    } else {
        return false;
    }
    true
}

/// Up/down/page/home/end as a signed move (`page` steps a page).
fn vertical(k: &KeyEvent, page: isize) -> Option<isize> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    Some(match k.code {
        KeyCode::Char('j') | KeyCode::Down => 1,
        KeyCode::Char('k') | KeyCode::Up => -1,
        KeyCode::PageDown => page,
        KeyCode::Char('d') if ctrl => page,
        KeyCode::PageUp => -page,
        KeyCode::Char('u') if ctrl => -page,
        KeyCode::Char('g') | KeyCode::Home => isize::MIN / 2,
        KeyCode::Char('G') | KeyCode::End => isize::MAX / 2,
        _ => return None,
    })
}

fn heatmap_key(app: &mut App, k: KeyEvent) -> bool {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    let wall = app.wall_active();
    // On the wall, up and down move a row of cells.
    let step = if wall { app.wall_columns() as isize } else { 1 };
    if let Some(d) = vertical(&k, 10) {
        app.move_cursor(d.saturating_mul(step));
        return true;
    }
    match k.code {
        KeyCode::Char('h') | KeyCode::Left if wall => app.move_cursor(-1),
        KeyCode::Char('l') | KeyCode::Right if wall => app.move_cursor(1),
        KeyCode::Enter => {
            if let Some(n) = app.current_node() {
                app.open_detail(n, None);
            }
        }
        KeyCode::Char('s') => {
            app.sort = app.sort.next();
            app.freeze_wall_order();
        }
        KeyCode::Char('S') => {
            app.sort_reverse = !app.sort_reverse;
            app.freeze_wall_order();
        }
        KeyCode::Char('w') => {
            app.wall = if app.wall_active() { Wall::Off } else { Wall::On };
            app.freeze_wall_order();
        }
        KeyCode::Char(' ') if ctrl => mark_range(app),
        KeyCode::Char(' ') => {
            if let Some(n) = app.current_node() {
                if app.marked.contains(&n) {
                    app.marked.remove(&n);
                } else {
                    app.marked.insert(n);
                    app.mark_anchor = Some(n);
                }
            }
            app.move_cursor(1);
        }
        KeyCode::Char('a') => {
            let shown = app.visible();
            app.message = Some(format!("marked the {} shown", view::count(shown.len(), "node")));
            app.marked.extend(shown);
        }
        KeyCode::Char('u') | KeyCode::Char('\\') => {
            app.marked.clear();
            app.mark_anchor = None;
        }
        KeyCode::Char('y') => copy_hostlist(app),
        _ => return false,
    }
    true
}

/// Ctrl-Space: marks every shown node from the last one marked to the
/// cursor (both included).
fn mark_range(app: &mut App) {
    let vis = app.visible();
    let cur = app.cursor_pos_in(&vis);
    let from = app
        .mark_anchor
        .and_then(|a| vis.iter().position(|&i| i == a))
        .unwrap_or(cur);
    let (lo, hi) = (from.min(cur), from.max(cur));
    app.marked.extend(&vis[lo..=hi.min(vis.len().saturating_sub(1))]);
    app.message = Some(format!("marked {}", view::count(hi - lo + 1, "node")));
}

/// `n` / `N` (`c` / `C`): the next (previous) shown node with a flag of
/// warn or worse (crit), wrapping; the same on the heatmap and in node
/// detail, where it opens that node. Info flags (idle, underused) are not
/// what a person on call steps through.
fn jump_flagged(app: &mut App, forward: bool, at_least: Severity) {
    let vis = app.visible();
    let len = vis.len();
    let cur = match app.screen {
        Screen::Detail => vis.iter().position(|&i| i == app.detail_node).unwrap_or(0),
        _ => app.cursor_pos_in(&vis),
    };
    let flagged = |pos: usize| app.store.nodes[vis[pos]].worst_severity() >= Some(at_least);
    let found = (1..=len)
        .map(|step| {
            if forward {
                (cur + step) % len
            } else {
                (cur + len * 2 - step) % len
            }
        })
        .find(|&pos| flagged(pos));
    match found {
        Some(pos) if app.screen == Screen::Detail => {
            app.open_detail(vis[pos], None);
            app.select_node(vis[pos]);
        }
        Some(pos) => app.select_row(pos),
        None if at_least == Severity::Crit => app.message = Some("no crit node is shown".into()),
        None => app.message = Some("no node with a warn or crit flag is shown".into()),
    }
}

/// `y`: the marked nodes (or the one under the cursor) as a Slurm hostlist,
/// to the clipboard by OSC 52 (it works over SSH and in tmux with
/// `set-clipboard on`), and shown in the footer.
fn copy_hostlist(app: &mut App) {
    let names = action_targets(app);
    if names.is_empty() {
        return;
    }
    let list = crate::ingest::hostlist::compress(&names);
    app.message = Some(format!("copied {list}"));
    app.clipboard = Some(list);
}

fn detail_key(app: &mut App, k: KeyEvent) -> bool {
    let len = app.gpu_count();
    // The timeline is a list of its own: the list keys scroll it (the
    // other panes are about the selected GPU, so there they pick one).
    if app.pane == Pane::Timeline {
        let events = app.detail().map_or(0, |n| n.timeline.events().len());
        if let Some(d) = vertical(&k, 10) {
            app.timeline_scroll = moved(app.timeline_scroll, d, events);
            return true;
        }
    } else if let Some(d) = vertical(&k, 8) {
        app.detail_gpu = moved(app.detail_gpu, d, len);
        return true;
    }
    let pane_at = |i: usize| Pane::ALL[i % Pane::ALL.len()];
    let cur = Pane::ALL.iter().position(|p| *p == app.pane).unwrap_or(0);
    match k.code {
        KeyCode::Char(c @ '1'..='5') => app.pane = pane_at(c as usize - '1' as usize),
        KeyCode::Char('z') => app.history_zoom = app.history_zoom.next(),
        KeyCode::Char('K') => start_scancel(app),
        KeyCode::Char('A') => alerts_of_node(app),
        KeyCode::Char(c @ ('x' | 'X')) => start_signal(app, c == 'X'),
        KeyCode::Char('l') | KeyCode::Right => app.pane = pane_at(cur + 1),
        KeyCode::Char('h') | KeyCode::Left => app.pane = pane_at(cur + Pane::ALL.len() - 1),
        _ => return false,
    }
    true
}

/// `A` in node detail: the alerts screen with this node's alerts only (a
/// filter of its name, which Esc on the heatmap clears), every one of them
/// in full where the detail has room for a few.
fn alerts_of_node(app: &mut App) {
    let Some(name) = app.detail().map(|n| n.target.name.clone()) else {
        return;
    };
    app.filter = view::Filter::Names([name.to_lowercase()].into_iter().collect());
    app.filter_text = name;
    app.screen = Screen::Alerts;
    app.alert_cursor = 0;
}

fn alerts_key(app: &mut App, k: KeyEvent) -> bool {
    let len = app.alerts().len();
    if let Some(d) = vertical(&k, 10) {
        app.alert_cursor = moved(app.alert_cursor, d, len);
        return true;
    }
    match k.code {
        KeyCode::Char('s') => app.alert_sort = app.alert_sort.next(),
        KeyCode::Char('z') => app.alerts_folded = !app.alerts_folded,
        KeyCode::Char('a') => quiet_alert(app, None),
        KeyCode::Char(c @ ('1' | '4' | '8')) => {
            let hours = i64::from(c as u8 - b'0');
            quiet_alert(app, Some(hours * 3_600_000));
        }
        KeyCode::Enter => {
            let target = app.alerts().get(app.alert_cursor).map(|r| {
                let gpu = match r.flag.subject {
                    Subject::Gpu(g) => Some(g),
                    _ => None,
                };
                (r.node, gpu)
            });
            if let Some((node, gpu)) = target {
                app.open_detail(node, gpu);
                app.select_node(node);
            }
        }
        _ => return false,
    }
    true
}

/// `a` acknowledges the selected alert (until it clears); `1` `4` `8`
/// silence its kind on its node for that many hours. Again on a quiet one
/// lifts it. Saved in the state dir and audited by `ops`.
fn quiet_alert(app: &mut App, for_ms: Option<i64>) {
    let Some((node, flag)) = app
        .alerts()
        .get(app.alert_cursor)
        .filter(|r| r.cleared_ms.is_none())
        .map(|r| (app.store.nodes[r.node].target.name.clone(), r.flag.clone()))
    else {
        return;
    };
    let now = app.now_ms;
    let before = app.silences.len();
    app.silences.retain(|s| !s.covers(&node, &flag, now));
    let made = if app.silences.len() < before {
        app.message = Some(format!("{} on {node}: no longer quiet", flag.kind.name()));
        Silence {
            node,
            kind: flag.kind,
            ack: None,
            until_ms: None,
            by: String::new(),
            at_ms: now,
        }
    } else {
        let s = Silence {
            node: node.clone(),
            kind: flag.kind,
            ack: for_ms.is_none().then(|| (flag.subject.key(), flag.since_ms)),
            until_ms: for_ms.map(|d| now + d),
            by: String::new(),
            at_ms: now,
        };
        app.message = Some(match for_ms {
            None => format!("{} on {node} acknowledged", flag.kind.name()),
            Some(d) => format!("{} on {node} silenced for {} h", flag.kind.name(), d / 3_600_000),
        });
        app.silences.push(s.clone());
        s
    };
    app.outgoing = Some(Request::Silences {
        all: app.silences.clone(),
        made,
    });
}

/// On the bench screen, `c` clears the selected node's finished run, and
/// with it its `burnin_failed` flag (the person has seen it).
fn clear_bench(app: &mut App) {
    let Some((&node, b)) = app.store.bench.iter().nth(app.bench_cursor) else {
        return;
    };
    if !b.finished {
        app.message = Some("still running: x cancels it".into());
        return;
    }
    let event = crate::model::bench::BenchUpdate::Cleared;
    app.store.apply(Update::Bench { node, event }, app.now_ms);
    app.bench_cursor = app.bench_cursor.min(app.store.bench.len().saturating_sub(1));
    app.changed = true;
}

/// The group view: move, `b` groups by the next of job, partition and
/// rack, and Enter shows the group's nodes on the heatmap (a filter of
/// exactly them, Esc clears it).
fn groups_key(app: &mut App, k: KeyEvent) -> bool {
    if k.code == KeyCode::Char('b') {
        app.group_by = app.group_by.next();
        app.group_cursor = 0;
        return true;
    }
    let rows = view::groups(&app.store, &app.visible(), app.group_by);
    if let Some(d) = vertical(&k, 10) {
        app.group_cursor = moved(app.group_cursor, d, rows.len());
        return true;
    }
    if k.code != KeyCode::Enter {
        return false;
    }
    if let Some(r) = rows.get(app.group_cursor) {
        let names: Vec<String> = r
            .nodes
            .iter()
            .map(|&i| app.store.nodes[i].target.name.clone())
            .collect();
        app.filter_text = crate::ingest::hostlist::compress(&names);
        app.filter = view::Filter::Names(names.into_iter().map(|n| n.to_lowercase()).collect());
        app.screen = Screen::Heatmap;
        app.select_row(0);
    }
    true
}
