//! The drain's reason being typed (and the other plans' first step).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::ingest::hostlist;
use crate::model::action::NodeAction;
use crate::tui::actions::{already_held, drainable, plan_for};
use crate::tui::app::App;
use crate::tui::modal::Dialog;

use super::cancelled;

/// A key while the reason is typed: Enter plans it, Esc cancels.
pub(super) fn key(
    app: &mut App,
    action: NodeAction,
    nodes: Vec<String>,
    mut text: String,
    chosen: String,
    k: KeyEvent,
) -> Option<Dialog> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Esc => {
            cancelled(app, action.verb());
            None
        }
        // A node already held out of service is left as it is: the
        // plan (and the confirmation) names no command that will not run.
        KeyCode::Enter if action == NodeAction::Drain && already_held(app, &nodes).len() == nodes.len() => {
            app.message = Some(format!(
                "nothing to drain: {} already out of service, left as it is",
                hostlist::compress(&nodes)
            ));
            None
        }
        KeyCode::Enter => match plan_for(app, action, drainable(app, action, &nodes), Some(text.clone())) {
            Ok(plan) => Some(Dialog::Confirm {
                plan,
                chosen,
                guard: None,
            }),
            Err(e) => {
                app.message = Some(e);
                Some(Dialog::Reason {
                    action,
                    nodes,
                    text,
                    chosen,
                })
            }
        },
        // The filled-in reason is long: Ctrl-U starts afresh.
        KeyCode::Char('u') if ctrl => {
            text.clear();
            Some(Dialog::Reason {
                action,
                nodes,
                text,
                chosen,
            })
        }
        KeyCode::Backspace => {
            text.pop();
            Some(Dialog::Reason {
                action,
                nodes,
                text,
                chosen,
            })
        }
        KeyCode::Char(c) if !ctrl => {
            text.push(c);
            Some(Dialog::Reason {
                action,
                nodes,
                text,
                chosen,
            })
        }
        _ => Some(Dialog::Reason {
            action,
            nodes,
            text,
            chosen,
        }),
    }
}
