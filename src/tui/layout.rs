//! Screen geometry that drawing (`ui`) and mouse hit-testing (`mouse`) must
//! agree on: where a screen's body lies and how the dense wall packs its
//! cells. It lives here, below both, so that the state (`app`) never asks
//! the drawing code where things are.

use ratatui::layout::{Constraint, Layout, Rect};

/// Rows above and below the screens' body.
const HEADER: u16 = 2;
const FOOTER: u16 = 1;

/// The body of a screen in a terminal of this size.
pub(super) fn body_area(area: Rect) -> Rect {
    let [_, body, _] = split(area);
    body
}

/// The header, the body and the footer of a screen.
pub(super) fn split(area: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(HEADER),
        Constraint::Min(1),
        Constraint::Length(FOOTER),
    ])
    .areas(area)
}

/// Cells per row and cell width of the dense wall for `n` nodes in `area`
/// (the heatmap body): the widest cells (up to four columns) with which every
/// node still fits on the screen.
pub(super) fn wall_geometry(area: Rect, n: usize) -> (usize, usize) {
    // The wall sits inside the block (top border) above the legend and status lines.
    let w = area.width as usize;
    let h = area.height.saturating_sub(3) as usize;
    let cell_w = [4, 3, 2]
        .into_iter()
        .find(|&cw| n.div_ceil((w / cw).max(1)) <= h)
        .unwrap_or(1);
    ((w / cell_w).max(1), cell_w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_fits_a_thousand_nodes_at_80x24() {
        let body = Rect::new(0, 2, 80, 21);
        let (cols, w) = wall_geometry(body, 1024);
        assert_eq!(w, 1);
        assert!(cols * (21 - 3) >= 1024, "{cols} columns");
        let (cols, w) = wall_geometry(Rect::new(0, 0, 160, 43), 1024);
        assert_eq!(w, 4, "big terminals get big cells");
        assert!(cols * 40 >= 1024);
    }
}
