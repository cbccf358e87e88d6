//! The keys every screen shares (quit, help, filter, Tab, the actions,
//! the next flagged node), before each screen's own (`screen::*::keys`).
//! `dispatch::update` hands every key here; the state the keys change
//! stays in `app`. What the keys are said to do is in `screen`'s tables;
//! a test there holds each table's keys taken.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::flag::Severity;
use crate::tui::actions::{dialog_key, drain_alert, drain_failed_bench_node, start_action, start_bench, start_return};
use crate::tui::app::{App, Screen, toggle_pause};
use crate::tui::screen;
use crate::tui::view::Filter;

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
    if app.help.shown {
        // Any key closes help, q included, as the help says: a person who
        // opened help to find the quit key must not quit by closing it.
        // `?` again turns to the flag names first.
        let legend = k.code == KeyCode::Char('?') && !app.help.legend;
        app.help.shown = legend;
        app.help.legend = legend;
        return true;
    }
    app.message = None;
    match k.code {
        KeyCode::Char('q') => app.quit = true,
        KeyCode::Char('?') => app.help.shown = true,
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
        KeyCode::Char('x') if app.screen == Screen::Bench => screen::bench::cancel_bench(app),
        KeyCode::Char('c') if app.screen == Screen::Bench => screen::bench::clear_bench(app),
        KeyCode::Char('D') if app.screen == Screen::Alerts => drain_alert(app),
        KeyCode::Char(c @ ('D' | 'R' | 'U')) if app.screen != Screen::Alerts => start_action(app, c),
        KeyCode::Char('T') if matches!(app.screen, Screen::Heatmap | Screen::Detail) => start_return(app),
        KeyCode::Char('B') if matches!(app.screen, Screen::Heatmap | Screen::Detail) => start_bench(app),
        KeyCode::Char('J') => {
            app.screen = Screen::Groups;
            app.groups.cursor = 0;
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
                Screen::Heatmap => screen::heatmap::on_key(app, k),
                Screen::Detail => screen::detail::on_key(app, k),
                Screen::Alerts => screen::alerts::on_key(app, k),
                Screen::Groups => screen::groups::on_key(app, k),
                Screen::Bench => screen::bench::on_key(app, k),
            };
        }
    }
    true
}

/// `n` / `N` (`c` / `C`): the next (previous) shown node with a flag of
/// warn or worse (crit), wrapping; the same on the heatmap and in node
/// detail, where it opens that node. Info flags (idle, underused) are not
/// what a person on call steps through.
fn jump_flagged(app: &mut App, forward: bool, at_least: Severity) {
    let vis = app.visible();
    let len = vis.len();
    let cur = match app.screen {
        Screen::Detail => vis.iter().position(|&i| i == app.detail.node).unwrap_or(0),
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
