//! The terminal console. State lives in one `App`; `dispatch::update` is pure;
//! `ui` renders `&App` as a widget; this module owns the terminal and the one
//! event channel that merges keys, ticks, signals and store updates.

pub mod actions;
pub mod app;
pub mod command;
pub mod dispatch;
mod keys;
mod layout;
pub mod modal;
mod mouse;
pub mod pause;
pub mod replay;
pub mod screen;
pub mod theme;
pub mod ui;
pub mod view;

use std::time::Duration;

use crossterm::event::{self, Event as TermEvent, KeyEventKind};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::ingest::source::Source;
use crate::model::request::Request;
use crate::model::time::now_ms;
use crate::model::update::Update;
use crate::ops::notify::Notifier;
use crate::record::RecorderOptions;
use crate::session::Session;
use crate::store::Store;
use app::{Action, App};
use theme::{ColorDepth, Theme};

/// Runs the console until the user quits, the terminal goes away, or SIGTERM.
/// The console was started without a terminal to draw on (cron, a pipe,
/// `setsid ... </dev/null`): a usage error, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("the console needs a terminal (stdin and stdout); without one, use `fleetop export`")]
pub struct NoTerminal;

pub fn run(
    rt: &tokio::runtime::Runtime,
    source: Source,
    record: Option<RecorderOptions>,
    theme: Option<&str>,
    read_only: bool,
    cfg: Config,
) -> anyhow::Result<()> {
    // Everything that can fail on bad input fails before the terminal is
    // taken, so the error prints plainly and nothing is left half-drawn.
    let depth = ColorDepth::detect();
    let spec = theme.or(cfg.theme.as_deref()).unwrap_or("default");
    let theme = Theme::load(spec, Theme::user_dir().as_deref(), depth)?;
    // Alerts go out from the console too when asked (`--alertmanager`,
    // `--webhook`, `[notify]`). Several consoles posting the same alert is
    // harmless: Alertmanager merges alerts with equal labels (as it does
    // for a Prometheus HA pair). A bad URL is refused here, before the
    // terminal is looked at.
    let mut notifier = match (&cfg.notify.alertmanager, &cfg.notify.webhook) {
        (None, None) => None,
        _ => Some(rt.block_on(async { Notifier::start(&cfg.notify) })?),
    };
    {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            return Err(NoTerminal.into());
        }
    }
    let log_path = crate::logging::to_file();
    let mut session = rt.block_on(Session::start(&source, &cfg))?;
    let recording = match record {
        Some(opts) => match rt.block_on(async { session.record(opts) }) {
            Ok(h) => Some(h),
            Err(e) => {
                rt.block_on(session.stop());
                return Err(e.into());
            }
        },
        None => None,
    };
    let (tx, rx) = mpsc::channel(1024);
    spawn_input_thread(tx.clone());
    let _signals = rt.spawn(forward_signals(tx));
    // The store moves to the app, not a copy of it: the session's own
    // would hold every node's state (1.2 KiB each) for nothing.
    let store = std::mem::replace(&mut session.store, Store::new(Vec::new(), cfg.thresholds.clone()));
    let mut app = App::new(store, theme, now_ms());
    app.files.log = log_path;
    app.out.bell = cfg.notify.bell.then(Default::default);
    app.allowed.read_only = read_only;
    app.allowed.actions = session.scheduler;
    app.allowed.bench = session.bench_token.is_some();
    app.refresh = cfg.refresh();
    app.alerts.silences = crate::ops::silences::load();
    app.out.clipboard_sink = Some(Box::new(osc52));
    let mut terminal = match init_terminal() {
        Ok(t) => t,
        Err(e) => {
            if let Some(h) = recording {
                let _ = rt.block_on(h.finish());
            }
            rt.block_on(session.stop());
            return Err(e.into());
        }
    };
    enable_mouse(cfg.mouse.unwrap_or(true));
    let updates = std::mem::replace(&mut session.updates, mpsc::channel(1).1);
    let outgoing = session.actions.take();
    // The demo's invented faults stay out of the state directory.
    if source.demo.is_none() {
        app.store.keep_timeline();
    }
    let on_tick = |app: &mut App| {
        crate::ops::timeline::save_in_background(app.live_store_mut().take_unsaved());
        ring_on_new_crit(app);
        if let Some(n) = notifier.as_mut() {
            n.observe(app.live_store_mut(), now_ms());
        }
    };
    let result = rt.block_on(event_loop(
        &mut terminal,
        &mut app,
        updates,
        rx,
        outgoing,
        now_ms,
        on_tick,
    ));
    restore_terminal();
    if let Some(n) = &notifier {
        // One last post; alerts are not resolved on the way out (the
        // conditions may well go on, and `fleetop watch` may be posting them).
        let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), n.flush()).await });
    }
    if let Some(h) = recording {
        match rt.block_on(h.finish()) {
            Ok(stats) => eprintln!("fleetop: recorded {} updates, {} bytes", stats.updates, stats.bytes),
            Err(e) => eprintln!("fleetop: recording: {e}"),
        }
    }
    rt.block_on(session.stop());
    result
}

/// Puts `text` on the clipboard of the terminal the person sits at, over
/// SSH too: OSC 52 (xterm, iTerm2, kitty, WezTerm, Windows Terminal; tmux
/// passes it on with `set -g set-clipboard on`).
fn osc52(text: &str) {
    use base64::Engine;
    use std::io::Write;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text);
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "\x1b]52;c;{b64}\x07");
    let _ = out.flush();
}

/// Hands what the app asked for (a confirmed plan, a refusal to log) to the
/// session's action task.
async fn send_outgoing(app: &mut App, cluster: Option<&mpsc::Sender<Request>>) {
    let Some(out) = app.out.request.take() else { return };
    let sent = match cluster {
        Some(tx) => tx.send(out.clone()).await.is_ok(),
        None => false,
    };
    if !sent && matches!(out, Request::Run(_) | Request::Return(_)) {
        app.dialog = None;
        app.message = Some("no scheduler to run the action".into());
    }
}

/// The terminal could not be set up (raw mode, the alternate screen, its
/// size): a usage error in one line, with the terminal left as it was.
#[derive(Debug, thiserror::Error)]
#[error(
    "the terminal cannot be set up ({0}); check TERM and that stdin and stdout are a terminal, or use `fleetop export`"
)]
pub struct TerminalSetup(String);

/// Raw mode and the alternate screen, with a panic hook that gives the
/// terminal back before the panic is printed. A step that fails undoes the
/// ones before it and is an error, never a panic.
fn init_terminal() -> Result<ratatui::DefaultTerminal, TerminalSetup> {
    use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
    let failed = |e: std::io::Error| TerminalSetup(e.to_string());
    enable_raw_mode().map_err(failed)?;
    if let Err(e) = crossterm::execute!(std::io::stdout(), EnterAlternateScreen) {
        let _ = disable_raw_mode();
        return Err(failed(e));
    }
    let terminal = ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()));
    let terminal = match terminal {
        Ok(t) => t,
        Err(e) => {
            let _ = crossterm::execute!(std::io::stdout(), LeaveAlternateScreen);
            let _ = disable_raw_mode();
            return Err(failed(e));
        }
    };
    // Leave raw mode and the alternate screen, and show the cursor, before
    // a panic is printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        ratatui::restore();
        show_cursor();
        hook(info);
    }));
    Ok(terminal)
}

fn show_cursor() {
    // Mouse reporting off too (a no-op where it was never on): a shell left
    // with it on prints escape codes on every click.
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::event::DisableMouseCapture,
        crossterm::cursor::Show
    );
}

/// Clicks and the wheel, unless `--no-mouse` (or `mouse = false`): with
/// them on, the terminal's own text selection needs Shift held.
fn enable_mouse(on: bool) {
    if on {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableMouseCapture);
    }
}

/// Gives the terminal back as it was: cooked mode, normal screen, cursor shown.
fn restore_terminal() {
    ratatui::restore();
    show_cursor();
}

/// Key presses and resizes, read on a thread of their own (crossterm's read blocks).
fn spawn_input_thread(tx: mpsc::Sender<Action>) {
    std::thread::spawn(move || {
        loop {
            let action = match event::read() {
                Ok(TermEvent::Key(k)) if k.kind != KeyEventKind::Release => Some(Action::Key(k)),
                Ok(TermEvent::Resize(w, h)) => Some(Action::Resize(w, h)),
                Ok(TermEvent::Mouse(m)) => Some(Action::Mouse(m)),
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
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    let _ = tx.send(Action::Quit).await;
}

/// The terminal bell (BEL: moves nothing on screen) when a crit flag was
/// raised since the last tick.
fn ring_on_new_crit(app: &mut App) {
    use std::io::Write;
    let live = match app.paused.as_ref() {
        Some(p) => &*p.live,
        None => &app.store,
    };
    if let Some(bell) = app.out.bell.as_mut()
        && bell.check(live)
    {
        let mut out = std::io::stdout();
        let _ = out.write_all(b"\x07").and_then(|_| out.flush());
    }
}

/// Updates applied between two looks at the keyboard.
const UPDATE_BATCH: usize = 2048;

/// How long updates wait once the channel was emptied: a tenth of a frame.
const UPDATE_REST: Duration = Duration::from_millis(20);

/// Frames drawn for new data take at most this share of the time (one in
/// 40): one that took 10 ms (a wall of 10,240 nodes) is followed by the next
/// for data 400 ms later, not at the next `--refresh`. A large fleet's
/// samples change the screen all the time, and drawing it as often as a
/// small one's took a seventh of the console's CPU. Keys and the
/// once-a-second tick still draw at once.
const DRAW_SHARE: u32 = 40;

/// The main loop, generic over the backend so tests drive the real app on
/// `TestBackend`; `clock` gives the time (tests give a fixed one); `on_tick`
/// runs once a second after the store was judged (the bell, notifications).
pub async fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    mut updates: mpsc::Receiver<Update>,
    mut actions: mpsc::Receiver<Action>,
    cluster: Option<mpsc::Sender<Request>>,
    clock: impl Fn() -> i64,
    mut on_tick: impl FnMut(&mut App),
) -> anyhow::Result<()>
where
    B::Error: Send + Sync + 'static,
{
    let size = terminal.size()?;
    dispatch::update(app, Action::Resize(size.width, size.height));
    dispatch::update(app, Action::Tick(clock()));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    // Updates are coalesced: the screen is redrawn at most this often.
    let mut frame = tokio::time::interval(app.refresh);
    let mut updates_open = true;
    // After the channel was emptied, updates wait a moment to be taken
    // together: a large fleet's samples arrive spread over the second, and
    // taking each as it comes woke this thread thousands of times a second.
    let mut rest = Box::pin(tokio::time::sleep(Duration::ZERO));
    let mut resting = false;
    let mut dirty = true;
    // On tokio's clock, so tests on a paused clock draw every frame.
    let mut data_frame_at = tokio::time::Instant::now();
    while !app.quit {
        if dirty {
            let started = tokio::time::Instant::now();
            terminal.draw(|f| f.render_widget(&*app, f.area()))?;
            data_frame_at = started + started.elapsed() * DRAW_SHARE;
            dirty = false;
        }
        // Keys first: the person at the keyboard is never queued behind a
        // fleet's worth of updates, and what they did is handled in order.
        tokio::select! {
            biased;
            a = actions.recv() => match a {
                Some(a) => {
                    dispatch::update(app, a);
                    dirty = true;
                    send_outgoing(app, cluster.as_ref()).await;
                    if let (Some(text), Some(sink)) = (app.out.clipboard.take(), app.out.clipboard_sink.as_mut()) {
                        sink(&text);
                    }
                }
                None => app.quit = true,
            },
            () = &mut rest, if resting => resting = false,
            u = updates.recv(), if updates_open && !resting => match u {
                Some(u) => {
                    let now = clock();
                    dispatch::update(app, Action::Store(u, now));
                    // Take what is already waiting, in batches small enough
                    // that a key press is seen between them (a big fleet's
                    // history is hundreds of thousands of updates); draw on
                    // the next frame.
                    let mut emptied = false;
                    for _ in 0..UPDATE_BATCH {
                        match updates.try_recv() {
                            Ok(u) => dispatch::update(app, Action::Store(u, now)),
                            Err(_) => {
                                emptied = true;
                                break;
                            }
                        }
                    }
                    if emptied {
                        rest.as_mut().reset(tokio::time::Instant::now() + UPDATE_REST);
                        resting = true;
                    }
                }
                None => updates_open = false,
            },
            _ = frame.tick() => {
                // Not yet: the changes wait for a later frame.
                if tokio::time::Instant::now() >= data_frame_at {
                    dirty |= app.take_changed();
                }
            }
            _ = tick.tick() => {
                dispatch::update(app, Action::Tick(clock()));
                dirty = true;
                on_tick(app);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Where there is no terminal to set up (no tty on stdin, no
    /// controlling terminal: CI, cron, `setsid`), setting one up is an
    /// error in one line, not the panic `ratatui::init` gave. Skipped where
    /// the tests run in a real terminal, which this must not take.
    #[test]
    fn a_terminal_that_cannot_be_set_up_is_a_one_line_error_not_a_panic() {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() || std::fs::File::open("/dev/tty").is_ok() {
            eprintln!("a terminal is here: not taken by a test");
            return;
        }
        let e = match super::init_terminal() {
            Ok(_) => panic!("a terminal was set up without one"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with("the terminal cannot be set up ("), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
