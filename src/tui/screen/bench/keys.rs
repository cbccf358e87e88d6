//! The bench screen's keys: move, open a node's checks, clear a finished
//! run, stop the running ones (`D` is in `actions`).

use crossterm::event::{KeyCode, KeyEvent};

use crate::model::update::Update;
use crate::tui::app::{App, Dialog, moved};
use crate::tui::screen::vertical;

pub(crate) fn on_key(app: &mut App, k: KeyEvent) -> bool {
    if let Some(d) = vertical(&k, 10) {
        app.bench.cursor = moved(app.bench.cursor, d, app.store.bench.len());
        if app.bench.open.is_some() {
            app.bench.open = app.store.bench.keys().nth(app.bench.cursor).copied();
        }
    } else if k.code == KeyCode::Enter {
        let node = app.store.bench.keys().nth(app.bench.cursor).copied();
        app.bench.open = if app.bench.open == node { None } else { node };
    } else {
        return false;
    }
    true
}

/// On the bench screen, `x` asks to stop every burn-in still running.
pub(crate) fn cancel_bench(app: &mut App) {
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

/// On the bench screen, `c` clears the selected node's finished run, and
/// with it its `burnin_failed` flag (the person has seen it).
pub(crate) fn clear_bench(app: &mut App) {
    let Some((&node, b)) = app.store.bench.iter().nth(app.bench.cursor) else {
        return;
    };
    if !b.finished {
        app.message = Some("still running: x cancels it".into());
        return;
    }
    let event = crate::model::bench::BenchUpdate::Cleared;
    app.store.apply(Update::Bench { node, event }, app.now_ms);
    app.bench.cursor = app.bench.cursor.min(app.store.bench.len().saturating_sub(1));
    app.changed = true;
}
