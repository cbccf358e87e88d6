//! The heatmap's keys (the dense wall's included): move, open, sort, the
//! wall, marks and the hostlist.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::tui::actions::action_targets;
use crate::tui::app::App;
use crate::tui::screen::vertical;
use crate::tui::view;

use super::Wall;

pub(crate) fn on_key(app: &mut App, k: KeyEvent) -> bool {
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
            app.heatmap.wall = if app.wall_active() { Wall::Off } else { Wall::On };
            app.freeze_wall_order();
        }
        KeyCode::Char(' ') if ctrl => mark_range(app),
        KeyCode::Char(' ') => {
            if let Some(n) = app.current_node() {
                if app.marked.contains(&n) {
                    app.marked.remove(&n);
                } else {
                    app.marked.insert(n);
                    app.heatmap.mark_anchor = Some(n);
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
            app.heatmap.mark_anchor = None;
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
        .heatmap
        .mark_anchor
        .and_then(|a| vis.iter().position(|&i| i == a))
        .unwrap_or(cur);
    let (lo, hi) = (from.min(cur), from.max(cur));
    app.marked.extend(&vis[lo..=hi.min(vis.len().saturating_sub(1))]);
    app.message = Some(format!("marked {}", view::count(hi - lo + 1, "node")));
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
    app.out.clipboard = Some(list);
}
