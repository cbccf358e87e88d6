//! The groups screen's keys.

use crossterm::event::{KeyCode, KeyEvent};

use crate::tui::app::{App, Screen, moved};
use crate::tui::screen::vertical;
use crate::tui::view;

/// The group view: move, `b` groups by the next of job, partition and
/// rack, and Enter shows the group's nodes on the heatmap (a filter of
/// exactly them, Esc clears it).
pub(crate) fn on_key(app: &mut App, k: KeyEvent) -> bool {
    if k.code == KeyCode::Char('b') {
        app.groups.by = app.groups.by.next();
        app.groups.cursor = 0;
        return true;
    }
    let rows = view::groups(&app.store, &app.visible(), app.groups.by);
    if let Some(d) = vertical(&k, 10) {
        app.groups.cursor = moved(app.groups.cursor, d, rows.len());
        return true;
    }
    if k.code != KeyCode::Enter {
        return false;
    }
    if let Some(r) = rows.get(app.groups.cursor) {
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
