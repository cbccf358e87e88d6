//! Burn-in: a suite on the chosen nodes, waiting for `y` (`s` switches
//! the suite) or the names typed; and stopping the running ones.

use crossterm::event::{KeyCode, KeyEvent};

use crate::model::bench::Suite;
use crate::model::request::Request;
use crate::tui::app::{App, Screen};
use crate::tui::modal::{Dialog, Guard};
use crate::tui::view;

use super::{Typed, guard_key, other, yes};

/// A key in the burn-in dialog.
pub(super) fn key(app: &mut App, nodes: Vec<usize>, suite: Suite, guard: Option<Guard>, k: KeyEvent) -> Option<Dialog> {
    let Some(g) = guard else {
        return match k.code {
            KeyCode::Char('s') => Some(Dialog::ConfirmBench {
                nodes,
                suite: other(suite),
                guard: None,
            }),
            _ if yes(&k) => {
                run_bench(app, nodes, suite);
                None
            }
            _ => {
                app.message = Some("burn-in cancelled: nothing was run".into());
                None
            }
        };
    };
    match k.code {
        KeyCode::Tab => Some(Dialog::ConfirmBench {
            nodes,
            suite: other(suite),
            guard: Some(g),
        }),
        _ => match guard_key(g, &k) {
            Typed::Still(g) => Some(Dialog::ConfirmBench {
                nodes,
                suite,
                guard: Some(g),
            }),
            Typed::Confirmed => {
                run_bench(app, nodes, suite);
                None
            }
            Typed::Cancelled => {
                app.message = Some("burn-in cancelled: nothing was run".into());
                None
            }
        },
    }
}

/// A key in the dialog that stops the running burn-in.
pub(super) fn cancel_key(app: &mut App, nodes: Vec<String>, k: KeyEvent) -> Option<Dialog> {
    if yes(&k) {
        app.out.request = Some(Request::CancelBench);
        app.message = Some(format!(
            "cancelling the burn-in on {}",
            view::count(nodes.len(), "node")
        ));
    } else {
        app.message = Some("the burn-in goes on".into());
    }
    None
}

/// Sends a confirmed burn-in and shows its screen.
fn run_bench(app: &mut App, nodes: Vec<usize>, suite: Suite) {
    app.out.request = Some(Request::Bench { nodes, suite });
    app.screen = Screen::Bench;
    app.bench.cursor = 0;
}
