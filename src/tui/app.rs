//! The console's state and the pure function that changes it.

use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::store::{Store, Update};

/// Everything that can happen to the app.
#[derive(Debug, Clone)]
pub enum Action {
    Quit,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// The clock moved (ages, stale judgement).
    Tick(i64),
    /// The terminal needs a full redraw (resize).
    Redraw,
    /// Something arrived from a node.
    Store(Update),
}

pub struct App {
    pub store: Store,
    pub now_ms: i64,
    /// Index of the selected node.
    pub selected: usize,
    pub quit: bool,
    pub log_path: Option<PathBuf>,
    changed: bool,
}

impl App {
    pub fn new(store: Store, log_path: Option<PathBuf>) -> Self {
        App {
            store,
            now_ms: fleetop_agent::now_ms(),
            selected: 0,
            quit: false,
            log_path,
            changed: true,
        }
    }

    /// Whether the store changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}

pub fn key_action(k: KeyEvent) -> Option<Action> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    Some(match k.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        KeyCode::Char('j') | KeyCode::Down => Action::Down,
        KeyCode::Char('k') | KeyCode::Up => Action::Up,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::Char('g') | KeyCode::Home => Action::Top,
        KeyCode::Char('G') | KeyCode::End => Action::Bottom,
        _ => return None,
    })
}

pub fn update(app: &mut App, action: Action) {
    let last = app.store.nodes.len().saturating_sub(1);
    match action {
        Action::Quit => app.quit = true,
        Action::Up => app.selected = app.selected.saturating_sub(1),
        Action::Down => app.selected = (app.selected + 1).min(last),
        Action::PageUp => app.selected = app.selected.saturating_sub(10),
        Action::PageDown => app.selected = (app.selected + 10).min(last),
        Action::Top => app.selected = 0,
        Action::Bottom => app.selected = last,
        Action::Tick(now) => {
            app.now_ms = now;
            app.store.tick(now);
        }
        Action::Redraw => {}
        Action::Store(u) => {
            app.store.apply(u, fleetop_agent::now_ms());
            app.changed = true;
        }
    }
}
