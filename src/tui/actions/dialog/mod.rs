//! A key while a dialog is open, one module per kind of dialog: the
//! drain's reason (`reason`), a plan's confirmation (`confirm`), the
//! return to service (`returning`), burn-in (`bench`) and signals
//! (`signal`). Only an explicit `y`, or the held nodes' names typed,
//! sends anything.

mod bench;
mod confirm;
mod reason;
mod returning;
mod signal;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::action::NodeAction;
use crate::model::bench::Suite;
use crate::tui::app::App;
use crate::tui::modal::{Dialog, Guard};

/// A key while a dialog is open.
pub(crate) fn dialog_key(app: &mut App, k: KeyEvent) {
    let Some(d) = app.dialog.take() else { return };
    app.dialog = match d {
        Dialog::Reason {
            action,
            nodes,
            text,
            chosen,
        } => reason::key(app, action, nodes, text, chosen, k),
        Dialog::Confirm { plan, chosen, guard } => confirm::key(app, plan, chosen, guard, k),
        Dialog::ConfirmReturn {
            prepared,
            chosen,
            guard,
        } => returning::key(app, prepared, chosen, guard, k),
        // While running, keys wait; the result replaces it. A return's
        // burn-in takes minutes: Esc hides it, and the result still shows.
        Dialog::Running(plan) if plan.action == NodeAction::Return && k.code == KeyCode::Esc => {
            app.message = Some("the return goes on: its result shows when it is done".into());
            None
        }
        Dialog::Running(plan) => Some(Dialog::Running(plan)),
        Dialog::ConfirmBench { nodes, suite, guard } => bench::key(app, nodes, suite, guard, k),
        Dialog::ConfirmSignal { node, plan } => signal::key(app, node, plan, k),
        Dialog::ConfirmCancelBench { nodes } => bench::cancel_key(app, nodes, k),
        Dialog::Result => None,
    };
}

/// `y` or `Y`: the only keys that send what a dialog shows.
fn yes(k: &KeyEvent) -> bool {
    matches!(k.code, KeyCode::Char('y') | KeyCode::Char('Y'))
}

/// What a key does to a guard.
pub(super) enum Typed {
    Still(Guard),
    Confirmed,
    Cancelled,
}

/// A key while the held nodes' names are typed: Enter confirms only on
/// exactly those names; Enter on nothing and Esc cancel.
pub(super) fn guard_key(mut g: Guard, k: &KeyEvent) -> Typed {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Esc => return Typed::Cancelled,
        KeyCode::Enter if g.typed.trim() == g.names => return Typed::Confirmed,
        KeyCode::Enter if g.typed.trim().is_empty() => return Typed::Cancelled,
        KeyCode::Enter => g.wrong = true,
        KeyCode::Backspace => {
            g.typed.pop();
            g.wrong = false;
        }
        KeyCode::Char('u') if ctrl => g.typed.clear(),
        KeyCode::Char(c) if !ctrl => {
            g.typed.push(c);
            g.wrong = false;
        }
        _ => {}
    }
    Typed::Still(g)
}

/// The other burn-in suite (`s`, or Tab while names are typed).
pub(super) fn other(s: Suite) -> Suite {
    match s {
        Suite::Quick => Suite::Full,
        Suite::Full => Suite::Quick,
    }
}

pub(super) fn cancelled(app: &mut App, verb: &str) {
    app.message = Some(format!("{verb} cancelled: nothing was run"));
}
