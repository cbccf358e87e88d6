//! Mouse handling: the wheel and left clicks, hit-tested against the same
//! geometry the heatmap is drawn with (`layout`), so that a click lands on
//! the node drawn under it without `app` asking the drawing code.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use crate::tui::app::{App, Screen, moved};
use crate::tui::layout;

/// On the heatmap and the wall: the wheel moves the cursor, a click selects
/// the node under it, a click on the selected node opens it. Elsewhere the
/// wheel moves like j/k. Never while a dialog, help or the filter is open:
/// a stray click must not change what a dialog acts on.
pub(super) fn on_mouse(app: &mut App, m: MouseEvent) {
    if app.dialog.is_some() || app.help.shown || app.input.is_some() || app.command.is_some() {
        return;
    }
    let wall = app.wall_active();
    let step = if wall { app.wall_columns() as isize } else { 1 };
    let wheel = match m.kind {
        MouseEventKind::ScrollDown => 1,
        MouseEventKind::ScrollUp => -1,
        MouseEventKind::Down(MouseButton::Left) => 0,
        _ => return,
    };
    match (app.screen, wheel) {
        (Screen::Heatmap, 0) => {
            let Some(pos) = node_at(app, m.column, m.row) else {
                return;
            };
            let vis = app.visible();
            if vis.get(pos).copied() == app.current_node() {
                if let Some(n) = app.current_node() {
                    app.open_detail(n, None);
                }
            } else {
                app.select_row(pos);
            }
        }
        (Screen::Heatmap, d) => app.move_cursor(d * step),
        (Screen::Detail, d) if d != 0 => app.detail.gpu = moved(app.detail.gpu, d, app.gpu_count()),
        (Screen::Alerts, d) if d != 0 => app.alerts.cursor = moved(app.alerts.cursor, d, app.alert_rows().len()),
        _ => {}
    }
}

/// The position in the visible list of the node drawn at (x, y), as the
/// heatmap draws it: rows under the block's title, or the wall's cells.
fn node_at(app: &App, x: u16, y: u16) -> Option<usize> {
    let area = Rect::new(0, 0, app.size.0, app.size.1);
    let body = layout::body_area(area);
    // The block's title row above, the legend row below.
    let top = body.y + 1;
    let height = body.height.saturating_sub(2) as usize;
    if y < top || x >= body.right() {
        return None;
    }
    let r = usize::from(y - top);
    let len = app.visible().len();
    let cursor = app.cursor_pos();
    let pos = if app.wall_active() {
        let (cols, cell_w) = app.wall_cell();
        // The wall's last row is its status line.
        let rows = height.saturating_sub(1);
        if r >= rows {
            return None;
        }
        let first_row = (cursor / cols).saturating_sub(rows.saturating_sub(1));
        (first_row + r) * cols + usize::from(x - body.x) / cell_w
    } else {
        if r >= height {
            return None;
        }
        cursor.saturating_sub(height.saturating_sub(1)) + r
    };
    (pos < len).then_some(pos)
}
