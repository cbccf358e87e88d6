//! Node detail's keys: the GPU, the pane, the history's span, and the
//! node's actions that start dialogs (`actions`).

use crossterm::event::{KeyCode, KeyEvent};

use crate::tui::actions::{start_scancel, start_signal};
use crate::tui::app::{App, Screen, moved};
use crate::tui::screen::vertical;
use crate::tui::view;

use super::Pane;

pub(crate) fn on_key(app: &mut App, k: KeyEvent) -> bool {
    let len = app.gpu_count();
    // The timeline is a list of its own: the list keys scroll it (the
    // other panes are about the selected GPU, so there they pick one).
    if app.detail.pane == Pane::Timeline {
        let events = app.node_in_detail().map_or(0, |n| n.timeline.events().len());
        if let Some(d) = vertical(&k, 10) {
            app.detail.timeline_scroll = moved(app.detail.timeline_scroll, d, events);
            return true;
        }
    } else if let Some(d) = vertical(&k, 8) {
        app.detail.gpu = moved(app.detail.gpu, d, len);
        return true;
    }
    let pane_at = |i: usize| Pane::ALL[i % Pane::ALL.len()];
    let cur = Pane::ALL.iter().position(|p| *p == app.detail.pane).unwrap_or(0);
    match k.code {
        KeyCode::Char(c @ '1'..='5') => app.detail.pane = pane_at(c as usize - '1' as usize),
        KeyCode::Char('z') => app.detail.zoom = app.detail.zoom.next(),
        KeyCode::Char('K') => start_scancel(app),
        KeyCode::Char('A') => alerts_of_node(app),
        KeyCode::Char(c @ ('x' | 'X')) => start_signal(app, c == 'X'),
        KeyCode::Char('l') | KeyCode::Right => app.detail.pane = pane_at(cur + 1),
        KeyCode::Char('h') | KeyCode::Left => app.detail.pane = pane_at(cur + Pane::ALL.len() - 1),
        _ => return false,
    }
    true
}

/// `A` in node detail: the alerts screen with this node's alerts only (a
/// filter of its name, which Esc on the heatmap clears), every one of them
/// in full where the detail has room for a few.
fn alerts_of_node(app: &mut App) {
    let Some(name) = app.node_in_detail().map(|n| n.target.name.clone()) else {
        return;
    };
    app.filter = view::Filter::Names([name.to_lowercase()].into_iter().collect());
    app.filter_text = name;
    app.screen = Screen::Alerts;
    app.alerts.cursor = 0;
}
