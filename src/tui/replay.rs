//! `fleetop replay FILE`: the same console on a recording, with a time
//! cursor. The recorded updates are fed to the app's own store in time order
//! (so every screen and filter works as live); the cursor plays, pauses,
//! runs at 1x to 60x, jumps to a time or to the next flag raised. A replay
//! is read-only by construction: the app is marked read-only and the loop
//! has no channel to any action task, so nothing the app asks for can run.
//!
//! Keys (taken before the app's own, and only these): space play/pause,
//! `<` `>` slower/faster, `t` jump to a time, `]` the next flag raised.

use std::path::Path;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::detect::Thresholds;
use crate::model::time::rfc3339;
use crate::record::{Player, parse_at};
use crate::tui::app::{Action, App};
use crate::tui::dispatch;
use crate::tui::theme::{ColorDepth, Theme};

/// The speeds `<` and `>` step through.
pub const SPEEDS: [u32; 6] = [1, 2, 5, 10, 30, 60];
/// How often the cursor moves while playing (wall time).
const PLAY_STEP: Duration = Duration::from_millis(200);

/// The time cursor and what it drives.
pub struct Replay {
    pub player: Player,
    pub cursor_ms: i64,
    pub playing: bool,
    /// An index into `SPEEDS`.
    pub speed: usize,
    /// The time being typed after `t`.
    pub input: Option<String>,
    /// One line for the replay bar (where a jump landed, a bad time).
    pub message: Option<String>,
    thresholds: Thresholds,
    /// The replaying console's `[racks]`, like its thresholds.
    racks: crate::ingest::racks::Racks,
}

impl Replay {
    pub fn new(player: Player, thresholds: Thresholds) -> Replay {
        let start = player.start_ms();
        Replay {
            player,
            cursor_ms: start,
            playing: false,
            speed: 0,
            input: None,
            message: None,
            thresholds,
            racks: Default::default(),
        }
    }

    /// Racks from the replaying console's config.
    pub fn with_racks(mut self, racks: crate::ingest::racks::Racks) -> Replay {
        self.racks = racks;
        self
    }

    /// A new store for the recording's nodes, with their racks.
    fn new_store(&self) -> crate::store::Store {
        let mut store = self.player.new_store(self.thresholds.clone());
        store.set_racks(|n| self.racks.rack_of(n));
        store
    }

    /// An app on this recording's nodes, read-only, at its start.
    pub fn app(&mut self, theme: Theme) -> App {
        let mut app = App::new(self.new_store(), theme, self.cursor_ms);
        app.allowed.read_only = true;
        app.allowed.actions = false;
        app.allowed.bench = false;
        self.seek(&mut app, self.cursor_ms);
        app
    }

    pub fn speed(&self) -> u32 {
        SPEEDS[self.speed]
    }

    /// Moves the cursor to `t` (clamped to the recording): forward by
    /// playing on, back by playing again from the start into a new store.
    pub fn seek(&mut self, app: &mut App, t: i64) {
        let t = t.clamp(self.player.start_ms(), self.player.end_ms());
        if t < self.cursor_ms || app.store.nodes.iter().all(|n| n.info.is_none()) {
            self.player.rewind();
            app.store = self.new_store();
        }
        self.player.feed_until(&mut app.store, t);
        self.cursor_ms = t;
        dispatch::update(app, Action::Tick(t));
    }

    /// Plays `wall_ms` of wall time at the current speed; pauses at the end.
    pub fn advance(&mut self, app: &mut App, wall_ms: i64) {
        if !self.playing {
            return;
        }
        let t = self.cursor_ms + wall_ms * i64::from(self.speed());
        if t >= self.player.end_ms() {
            self.playing = false;
        }
        self.seek(app, t);
    }

    /// Plays on to the next flag raised.
    pub fn next_flag(&mut self, app: &mut App) {
        match self.player.next_flag(&mut app.store) {
            Some(r) => {
                self.cursor_ms = r.time_ms;
                self.playing = false;
                let node = app.store.nodes.get(r.node).map_or("?", |n| n.target.name.as_str());
                let what = match r.subject {
                    crate::model::flag::Subject::Node => String::new(),
                    crate::model::flag::Subject::Gpu(g) => format!(" gpu {g}"),
                    crate::model::flag::Subject::IbPort(p) => format!(" ib port {p}"),
                };
                self.message = Some(format!("{} on {node}{what}", r.kind.name()));
            }
            None => {
                self.cursor_ms = self.player.end_ms();
                self.message = Some("no flag raised after this".into());
            }
        }
        dispatch::update(app, Action::Tick(self.cursor_ms));
    }

    /// Takes the replay's keys; false for every other key (the app's).
    pub fn key(&mut self, app: &mut App, k: KeyEvent) -> bool {
        if let Some(text) = self.input.as_mut() {
            match k.code {
                KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => text.push(c),
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Esc => self.input = None,
                KeyCode::Enter => {
                    let text = self.input.take().unwrap_or_default();
                    match parse_at(&text, self.player.start_ms()) {
                        Ok(t) => {
                            self.message = None;
                            self.seek(app, t);
                        }
                        Err(e) => self.message = Some(e),
                    }
                }
                _ => {}
            }
            return true;
        }
        // The app's own prompts and dialogs keep their keys.
        if app.input.is_some() || app.dialog.is_some() || app.help.shown {
            return false;
        }
        match k.code {
            KeyCode::Char(' ') => {
                if self.cursor_ms >= self.player.end_ms() {
                    self.message = Some("at the end of the recording".into());
                } else {
                    self.playing = !self.playing;
                }
            }
            KeyCode::Char('>') => self.speed = (self.speed + 1).min(SPEEDS.len() - 1),
            KeyCode::Char('<') => self.speed = self.speed.saturating_sub(1),
            KeyCode::Char('t') => self.input = Some(String::new()),
            KeyCode::Char(']') => self.next_flag(app),
            _ => return false,
        }
        true
    }

    /// Draws the replay bar (one line) with `app`'s theme.
    pub fn render(&self, app: &App, area: Rect, buf: &mut Buffer) {
        let t = &app.theme;
        buf.set_style(area, t.base);
        let (start, end) = (self.player.start_ms(), self.player.end_ms());
        if let Some(text) = &self.input {
            Line::from(vec![
                Span::styled(" jump to: ", t.title),
                Span::raw(text.clone()),
                Span::styled("█", t.muted),
                Span::styled("   RFC 3339 or +5m from the start   Enter go  Esc cancel", t.muted),
            ])
            .render(area, buf);
            return;
        }
        let state = if self.playing { "▶" } else { "‖" };
        let mut spans = vec![
            Span::styled(" REPLAY ", t.selected),
            Span::styled(format!(" {state} {}x ", self.speed()), t.title),
            Span::raw(format!("{} ", rfc3339(self.cursor_ms))),
            Span::styled(
                format!("+{} / {}  ", clock(self.cursor_ms - start), clock(end - start)),
                t.muted,
            ),
        ];
        if let Some(m) = &self.message {
            spans.push(Span::styled(format!("{m}  "), t.warn));
        }
        if let Some(d) = self.player.damage() {
            let file = d
                .path
                .file_name()
                .map_or_else(|| d.path.display().to_string(), |f| f.to_string_lossy().into());
            spans.push(Span::styled(
                format!("stopped at damage: {file} byte {}  ", d.offset),
                t.crit,
            ));
        }
        spans.push(Span::styled("space play  < > speed  t jump  ] next flag", t.muted));
        Line::from(spans).render(area, buf);
    }
}

/// "1:02:03" or "02:03".
fn clock(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// Splits the screen: the console above, the replay bar on the last line.
fn split(area: Rect) -> (Rect, Rect) {
    let h = area.height.saturating_sub(1);
    (
        Rect { height: h, ..area },
        Rect {
            y: area.y + h,
            height: area.height - h,
            ..area
        },
    )
}

/// The replay's loop, generic over the backend (tests drive it on
/// `TestBackend`): keys go to the replay first, then to the app; the cursor
/// moves every `PLAY_STEP` while playing. There is no action channel.
pub async fn replay_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    replay: &mut Replay,
    mut actions: mpsc::Receiver<Action>,
) -> anyhow::Result<()>
where
    B::Error: Send + Sync + 'static,
{
    let size = terminal.size()?;
    dispatch::update(app, Action::Resize(size.width, size.height.saturating_sub(1)));
    let mut play = tokio::time::interval(PLAY_STEP);
    play.tick().await;
    while !app.quit {
        terminal.draw(|f| {
            let (main, bar) = split(f.area());
            f.render_widget(&*app, main);
            replay.render(app, bar, f.buffer_mut());
        })?;
        tokio::select! {
            biased;
            a = actions.recv() => match a {
                Some(Action::Key(k)) => {
                    if !replay.key(app, k) {
                        dispatch::update(app, Action::Key(k));
                    }
                }
                Some(Action::Resize(w, h)) => dispatch::update(app, Action::Resize(w, h.saturating_sub(1))),
                Some(Action::Mouse(m)) => dispatch::update(app, Action::Mouse(m)),
                // The wall clock is not the replay's: time is the cursor.
                Some(Action::Tick(_) | Action::Store(..)) => {}
                Some(Action::Quit) | None => app.quit = true,
            },
            _ = play.tick(), if replay.playing => {
                replay.advance(app, PLAY_STEP.as_millis() as i64);
            }
        }
        // Read-only by construction: whatever the app asked for (a refusal
        // to log) goes nowhere; no cluster is reachable from here.
        app.out.request = None;
    }
    Ok(())
}

/// Opens the console on the recording `file` until the person quits, the
/// cursor at `at` (RFC 3339 or an offset from the start; default the start).
pub fn run(
    rt: &tokio::runtime::Runtime,
    file: &Path,
    at: Option<&str>,
    theme: Option<&str>,
    cfg: Config,
) -> anyhow::Result<()> {
    // Bad input fails before the terminal is taken.
    let depth = ColorDepth::detect();
    let spec = theme.or(cfg.theme.as_deref()).unwrap_or("default");
    let theme = Theme::load(spec, Theme::user_dir().as_deref(), depth)?;
    let player = Player::open(file)?;
    let start = match at {
        Some(a) => parse_at(a, player.start_ms()).map_err(|e| anyhow::anyhow!("--at {e}"))?,
        None => player.start_ms(),
    };
    {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            return Err(super::NoTerminal.into());
        }
    }
    let log_path = crate::logging::to_file();
    let mut replay =
        Replay::new(player, cfg.thresholds.clone()).with_racks(crate::ingest::racks::Racks::from_config(&cfg)?);
    let mut app = replay.app(theme);
    replay.seek(&mut app, start);
    app.files.log = log_path;
    let (tx, rx) = mpsc::channel(1024);
    super::spawn_input_thread(tx.clone());
    let _signals = rt.spawn(super::forward_signals(tx));
    let mut terminal = super::init_terminal()?;
    let result = rt.block_on(replay_loop(&mut terminal, &mut app, &mut replay, rx));
    super::restore_terminal();
    if let Some(d) = replay.player.damage() {
        eprintln!("fleetop: {d}; replayed up to {}", rfc3339(replay.player.end_ms()));
    }
    result
}
