//! The one pure function that changes the console's state: each `Action`
//! to its handler. Keys go to `keys` (the key handlers), the mouse to
//! `mouse`, time and what nodes send to the store. Kept apart from `app`
//! (the state) so that the handlers depend on the state and never the
//! other way.

use crate::model::update::Update;
use crate::tui::app::{Action, App, Dialog, clamp_cursors};
use crate::tui::{keys, mouse};

pub fn update(app: &mut App, action: Action) {
    match action {
        Action::Quit => app.quit = true,
        // Paused: the clock and the updates go to the live store behind
        // the frozen display (and nothing redraws).
        Action::Tick(now) if app.paused.is_some() => {
            if let Some(p) = app.paused.as_mut() {
                p.tick(now);
            }
        }
        Action::Store(u, now) if app.paused.is_some() && !matches!(u, Update::ActionDone(_)) => {
            if let Some(p) = app.paused.as_mut() {
                p.apply(u, now);
            }
        }
        Action::Tick(now) => {
            app.now_ms = now;
            app.store.tick(now);
            clamp_cursors(app);
        }
        // The hot path (a fleet's history arrives as hundreds of thousands of
        // these): no per-update work beyond the store's.
        Action::Store(u, now) => {
            let done = match &u {
                Update::ActionDone(r) => Some((r.action.verb(), r.ok())),
                _ => None,
            };
            // An action's result is shown now, paused or not, and kept
            // in the live store too.
            if let Some(p) = app.paused.as_mut() {
                p.apply(u.clone(), now);
            }
            app.store.apply(u, now);
            match (done, &app.dialog) {
                (None, _) => {}
                // A dialog being filled in is not taken away by a result
                // (a return hidden with Esc ends minutes later).
                (Some((verb, ok)), Some(d)) if !matches!(d, Dialog::Running(_) | Dialog::Result) => {
                    let how = if ok { "done" } else { "failed on some nodes" };
                    app.message = Some(format!("{verb} {how}: see the node's timeline (5) and the audit log"));
                }
                (Some(_), _) => app.dialog = Some(Dialog::Result),
            }
            app.changed = true;
        }
        Action::Resize(w, h) => app.size = (w, h),
        Action::Mouse(m) => {
            mouse::on_mouse(app, m);
            clamp_cursors(app);
        }
        Action::Key(k) => {
            // A key no handler knows does nothing.
            let _ = keys::on_key(app, k);
            clamp_cursors(app);
        }
    }
}
