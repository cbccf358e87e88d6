//! `fleetop replay`: the console on a recording, on `TestBackend`: the time
//! cursor plays, pauses, changes speed, jumps to a time (forward and back)
//! and to the next flag raised; screens and filters work as live; actions
//! are refused.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::export;
use fleetop::model::time::rfc3339;
use fleetop::record::Player;
use fleetop::tui::app::{Action, App};
use fleetop::tui::replay::{Replay, replay_loop};
use fleetop::tui::theme::{ColorDepth, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use tokio::sync::mpsc;

use crate::record::{T0, append_empty_frame, write_sim};

fn theme() -> Theme {
    Theme::load("default", None, ColorDepth::TrueColor).expect("default theme")
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn typed(r: &mut Replay, app: &mut App, s: &str) {
    for c in s.chars() {
        let k = key(KeyCode::Char(c));
        if !r.key(app, k) {
            fleetop::tui::dispatch::update(app, Action::Key(k));
        }
    }
}

/// A two-minute recording of a 16-node simulated fleet (every demo problem
/// on one node), opened for replay.
fn opened() -> (tempfile::TempDir, Replay, App) {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("r.rec");
    write_sim(&file, 16, 2, 120, 200, None);
    let mut r = Replay::new(Player::open(&file).expect("opens"), Default::default());
    let app = r.app(theme());
    (dir, r, app)
}

fn snapshot_json(app: &App, t: i64) -> String {
    serde_json::to_string(&export::snapshot(&app.store, t)).expect("json")
}

#[test]
fn play_pause_and_speed_move_the_cursor() {
    let (_d, mut r, mut app) = opened();
    assert_eq!(r.cursor_ms, T0);
    assert_eq!(app.now_ms, T0);
    // Paused: time does not move.
    r.advance(&mut app, 1000);
    assert_eq!(r.cursor_ms, T0);
    typed(&mut r, &mut app, " ");
    assert!(r.playing);
    r.advance(&mut app, 200);
    assert_eq!(r.cursor_ms, T0 + 200);
    // Faster, up to 60x and no further.
    typed(&mut r, &mut app, ">>>>>>>>");
    assert_eq!(r.speed(), 60);
    r.advance(&mut app, 1000);
    assert_eq!(r.cursor_ms, T0 + 60_200);
    assert_eq!(app.now_ms, T0 + 60_200);
    typed(&mut r, &mut app, "<");
    assert_eq!(r.speed(), 30);
    // Played to the end: it stops there.
    r.advance(&mut app, 10_000);
    assert_eq!(r.cursor_ms, T0 + 119_000);
    assert!(!r.playing);
    typed(&mut r, &mut app, " ");
    assert!(!r.playing, "nothing to play after the end");
    // The store is exactly what a fresh replay to that time gives.
    let (_d2, mut fresh, mut fresh_app) = opened();
    fresh.seek(&mut fresh_app, T0 + 119_000);
    assert_eq!(
        snapshot_json(&app, r.cursor_ms),
        snapshot_json(&fresh_app, T0 + 119_000)
    );
}

#[test]
fn a_recording_ending_in_an_empty_frame_replays_to_its_end_without_a_panic() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("r.rec");
    write_sim(&file, 4, 2, 20, 20, None);
    append_empty_frame(&file);
    let mut r = Replay::new(Player::open(&file).expect("opens"), Default::default());
    let mut app = r.app(theme());
    r.seek(&mut app, T0 + 5_000);
    assert_eq!(r.cursor_ms, T0 + 5_000);
    typed(&mut r, &mut app, " ");
    r.advance(&mut app, 60_000);
    assert_eq!(r.cursor_ms, T0 + 19_000);
    r.seek(&mut app, 0);
    assert_eq!(r.cursor_ms, T0);
}

#[test]
fn jumping_to_a_time_goes_forward_and_back() {
    let (_d, mut r, mut app) = opened();
    typed(&mut r, &mut app, "t+90s");
    assert_eq!(r.input.as_deref(), Some("+90s"));
    r.key(&mut app, key(KeyCode::Enter));
    assert_eq!(r.cursor_ms, T0 + 90_000);
    let at90 = snapshot_json(&app, T0 + 90_000);
    // Back in time, by RFC 3339.
    typed(&mut r, &mut app, &format!("t{}", rfc3339(T0 + 30_000)));
    r.key(&mut app, key(KeyCode::Enter));
    assert_eq!(r.cursor_ms, T0 + 30_000);
    let (_d2, mut fresh, mut fresh_app) = opened();
    fresh.seek(&mut fresh_app, T0 + 30_000);
    assert_eq!(snapshot_json(&app, T0 + 30_000), snapshot_json(&fresh_app, T0 + 30_000));
    // And forward again to the same state as before.
    typed(&mut r, &mut app, "t+90s");
    r.key(&mut app, key(KeyCode::Enter));
    assert_eq!(snapshot_json(&app, T0 + 90_000), at90);
    // A bad time says why and leaves the cursor.
    typed(&mut r, &mut app, "tyesterday");
    r.key(&mut app, key(KeyCode::Enter));
    assert_eq!(r.cursor_ms, T0 + 90_000);
    assert!(
        r.message.as_deref().is_some_and(|m| m.contains("'yesterday'")),
        "{:?}",
        r.message
    );
}

#[test]
fn the_next_flag_key_stops_where_a_flag_is_raised() {
    let (_d, mut r, mut app) = opened();
    let flags_at = |app: &App, node: usize| -> Vec<String> {
        app.store.nodes[node]
            .detector
            .active()
            .map(|f| format!("{}:{:?}", f.kind.name(), f.subject))
            .collect()
    };
    let mut seen = 0;
    let mut last = r.cursor_ms;
    while seen < 3 {
        typed(&mut r, &mut app, "]");
        let msg = r.message.clone().expect("says what was raised");
        if msg.contains("no flag raised") {
            break;
        }
        assert!(r.cursor_ms >= last);
        last = r.cursor_ms;
        // The flag named is active now on the node named...
        let node = app
            .store
            .nodes
            .iter()
            .position(|n| msg.contains(&format!(" on {}", n.target.name)))
            .expect("names a node");
        let kind = msg.split(' ').next().expect("kind");
        assert!(
            flags_at(&app, node).iter().any(|f| f.starts_with(kind)),
            "{msg}: {:?}",
            flags_at(&app, node)
        );
        // ... and was not a moment before.
        let (_d2, mut before, mut before_app) = opened();
        before.seek(&mut before_app, r.cursor_ms - 1);
        let prior = flags_at(&before_app, node);
        let now = flags_at(&app, node);
        assert!(now.iter().any(|f| !prior.contains(f)), "{msg}: {prior:?} then {now:?}");
        seen += 1;
    }
    assert!(seen >= 1, "the simulated fleet raises flags");
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the replay loop on a test terminal with these key presses, then quits.
fn drive(r: &mut Replay, app: &mut App, keys: &str, special: &[KeyCode]) -> Buffer {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).expect("terminal");
        let (tx, rx) = mpsc::channel(256);
        for c in keys.chars() {
            tx.send(Action::Key(key(KeyCode::Char(c)))).await.expect("open");
        }
        for k in special {
            tx.send(Action::Key(key(*k))).await.expect("open");
        }
        // One more draw after the last key, then quit.
        tx.send(Action::Resize(120, 30)).await.expect("open");
        tx.send(Action::Quit).await.expect("open");
        app.quit = false;
        replay_loop(&mut terminal, app, r, rx).await.expect("loop");
        terminal.backend().buffer().clone()
    })
}

#[test]
fn the_replay_bar_shows_the_cursor_and_the_screens_work_as_live() {
    let (_d, mut r, mut app) = opened();
    let buf = drive(&mut r, &mut app, ">>", &[]);
    let screen = text(&buf);
    let bar = screen.lines().last().expect("a last line");
    assert!(bar.contains("REPLAY"), "{bar}");
    assert!(bar.contains("‖ 5x"), "{bar}");
    assert!(bar.contains(&rfc3339(T0)), "{bar}");
    assert!(bar.contains("+00:00 / 01:59"), "{bar}");
    assert!(screen.contains("gpu16"), "{screen}");

    // A filter, typed as live, narrows the heatmap to one node.
    let buf = drive(&mut r, &mut app, "/gpu03", &[KeyCode::Enter]);
    assert_eq!(app.visible().len(), 1);
    let screen = text(&buf);
    assert!(screen.contains("gpu03") && !screen.contains("gpu04"), "{screen}");
}

#[test]
fn a_replay_refuses_actions() {
    let (_d, mut r, mut app) = opened();
    assert!(app.allowed.read_only && !app.allowed.actions && !app.allowed.bench);
    // Drain the node in view: no dialog opens, nothing is sent.
    let buf = drive(&mut r, &mut app, "D", &[]);
    assert!(app.dialog.is_none());
    assert!(app.out.request.is_none(), "nothing leaves a replay");
    let screen = text(&buf);
    assert!(screen.contains("read-only mode: drain is off"), "{screen}");
}
