//! The terminal console. State lives in one `App`; `app::update` is pure;
//! `ui` renders `&App` as a widget; this module owns the terminal and the one
//! event channel that merges keys, ticks, signals and store updates.

pub mod app;
pub mod ui;

use std::time::Duration;

use crossterm::event::{self, Event as TermEvent, KeyEventKind};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;

use crate::cli::SourceArgs;
use crate::config::Config;
use crate::session::Session;
use app::{Action, App};

/// Runs the console until the user quits, the terminal goes away, or SIGTERM.
pub fn run(rt: &tokio::runtime::Runtime, source: SourceArgs, cfg: Config) -> anyhow::Result<()> {
    let log_path = crate::logging::to_file();
    // Start before taking the terminal, so a bad hostlist prints plainly.
    let session = rt.block_on(Session::start(&source, &cfg))?;
    let (tx, rx) = mpsc::channel(1024);
    spawn_input_thread(tx.clone());
    let _signals = rt.spawn(forward_signals(tx));
    // ratatui::init installs a panic hook that restores the terminal first.
    let mut terminal = ratatui::init();
    let mut app = App::new(session.store.clone(), log_path);
    let result = rt.block_on(event_loop(&mut terminal, &mut app, session, rx));
    ratatui::restore();
    result
}

/// Key presses and resizes, read on a thread of their own (crossterm's read blocks).
fn spawn_input_thread(tx: mpsc::Sender<Action>) {
    std::thread::spawn(move || {
        loop {
            let action = match event::read() {
                Ok(TermEvent::Key(k)) if k.kind != KeyEventKind::Release => app::key_action(k),
                Ok(TermEvent::Resize(..)) => Some(Action::Redraw),
                Ok(_) => None,
                // The terminal is gone (SSH dropped): quit.
                Err(_) => Some(Action::Quit),
            };
            if let Some(a) = action
                && tx.blocking_send(a).is_err()
            {
                return;
            }
        }
    });
}

async fn forward_signals(tx: mpsc::Sender<Action>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    let _ = tx.send(Action::Quit).await;
}

/// The main loop, generic over the backend so tests can drive it on `TestBackend`.
pub async fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    mut session: Session,
    mut actions: mpsc::Receiver<Action>,
) -> anyhow::Result<()>
where
    B::Error: Send + Sync + 'static,
{
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Updates are coalesced: the screen is redrawn at most this often.
    let mut frame = tokio::time::interval(Duration::from_millis(200));
    let mut dirty = true;
    while !app.quit {
        if dirty {
            terminal.draw(|f| f.render_widget(&*app, f.area()))?;
            dirty = false;
        }
        tokio::select! {
            a = actions.recv() => match a {
                Some(a) => {
                    app::update(app, a);
                    dirty = true;
                }
                None => app.quit = true,
            },
            u = session.updates.recv() => {
                if let Some(u) = u {
                    app::update(app, Action::Store(u));
                }
                // Take everything already waiting, then draw on the next frame.
                while let Ok(u) = session.updates.try_recv() {
                    app::update(app, Action::Store(u));
                }
            }
            _ = frame.tick() => {
                dirty |= app.take_changed();
            }
            _ = tick.tick() => {
                app::update(app, Action::Tick(fleetop_agent::now_ms()));
                dirty = true;
            }
        }
    }
    if let Some(d) = session.demo.take() {
        d.stop().await;
    }
    Ok(())
}
