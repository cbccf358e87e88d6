//! Signalling a GPU's processes through the node's agent, waiting for `y`.

use crossterm::event::KeyEvent;

use crate::model::action::Plan;
use crate::model::request::Request;
use crate::tui::app::App;
use crate::tui::modal::Dialog;

use super::yes;

pub(super) fn key(app: &mut App, node: usize, plan: Plan, k: KeyEvent) -> Option<Dialog> {
    if yes(&k) {
        app.out.request = Some(Request::Signal {
            node,
            plan: plan.clone(),
        });
        Some(Dialog::Running(plan))
    } else {
        app.message = Some("signal cancelled: nothing was sent".into());
        None
    }
}
