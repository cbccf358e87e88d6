//! A plan's exact commands, waiting for `y`, or for the held nodes'
//! names typed.

use crossterm::event::KeyEvent;

use crate::model::action::Plan;
use crate::model::request::Request;
use crate::tui::app::App;
use crate::tui::modal::{Dialog, Guard};

use super::{Typed, cancelled, guard_key, yes};

/// Only an explicit yes runs anything: Enter, Esc, n or any other key cancel.
pub(super) fn key(app: &mut App, plan: Plan, chosen: String, guard: Option<Guard>, k: KeyEvent) -> Option<Dialog> {
    let Some(g) = guard else {
        if yes(&k) {
            app.out.request = Some(Request::Run(plan.clone()));
            return Some(Dialog::Running(plan));
        }
        cancelled(app, plan.action.verb());
        return None;
    };
    match guard_key(g, &k) {
        Typed::Still(g) => Some(Dialog::Confirm {
            plan,
            chosen,
            guard: Some(g),
        }),
        Typed::Confirmed => {
            app.out.request = Some(Request::Run(plan.clone()));
            Some(Dialog::Running(plan))
        }
        Typed::Cancelled => {
            cancelled(app, plan.action.verb());
            None
        }
    }
}
