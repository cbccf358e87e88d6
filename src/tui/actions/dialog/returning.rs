//! The return to service, waiting for `y` (`s` switches the suite) or
//! the held nodes' names typed.

use crossterm::event::{KeyCode, KeyEvent};

use crate::model::request::Request;
use crate::model::returning::Prepared;
use crate::tui::actions::prepare_return;
use crate::tui::app::App;
use crate::tui::modal::{Dialog, Guard};

use super::{Typed, cancelled, guard_key, other};

/// A key in the return dialog: `s` (Tab while names are typed) switches
/// the suite, decided again from the store; `y`, or the guard, sends it.
pub(super) fn key(
    app: &mut App,
    prepared: Box<Prepared>,
    chosen: String,
    guard: Option<Guard>,
    k: KeyEvent,
) -> Option<Dialog> {
    let switch = match guard {
        Some(_) => k.code == KeyCode::Tab,
        None => k.code == KeyCode::Char('s'),
    };
    if switch {
        let names: Vec<String> = prepared.nodes.iter().map(|n| n.node.clone()).collect();
        let again = prepare_return(app, &names, other(prepared.suite), prepared.force);
        return Some(Dialog::ConfirmReturn {
            prepared: Box::new(again),
            chosen,
            guard,
        });
    }
    let send = |app: &mut App, prepared: Box<Prepared>| {
        let plan = prepared.plan.clone();
        app.out.request = Some(Request::Return(prepared));
        Some(Dialog::Running(plan))
    };
    match guard {
        None if matches!(k.code, KeyCode::Char('y') | KeyCode::Char('Y')) => send(app, prepared),
        None => {
            cancelled(app, "return");
            None
        }
        Some(g) => match guard_key(g, &k) {
            Typed::Still(g) => Some(Dialog::ConfirmReturn {
                prepared,
                chosen,
                guard: Some(g),
            }),
            Typed::Confirmed => send(app, prepared),
            Typed::Cancelled => {
                cancelled(app, "return");
                None
            }
        },
    }
}
