//! What every screen shares: the header, the footer, help, colour depth, sizes, pause, and how often it draws.

use crossterm::event::KeyCode;
use fleetop::detect::Thresholds;
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::flag::FlagKind;
use fleetop::model::update::Update;
use fleetop::store::Store;
use fleetop::tui::app::{Action, App};
use fleetop::tui::event_loop;
use fleetop::tui::theme::{ColorDepth, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use tokio::sync::mpsc;

use super::*;

#[test]
fn help_lists_the_keys() {
    let buf = shown(4, 60, (80, 24), keys("?"));
    insta::assert_snapshot!("help_80x24", text(&buf));
}

#[test]
fn q_in_help_closes_help_and_does_not_quit() {
    // `drive` ends with a Quit of its own; the screen it leaves is the
    // heatmap, with help closed, and the app was still running to draw it.
    let buf = shown(4, 60, (80, 24), keys("?qj"));
    let screen = text(&buf);
    assert!(!screen.contains("keys") && screen.contains("4 nodes"), "{screen}");
    let (x, y) = find(&buf, "gpu02").expect("shown");
    assert_eq!(
        buf[(x, y)].bg,
        theme().selected.bg.unwrap_or(Color::Reset),
        "j after q still moved the cursor"
    );
}

#[test]
fn no_color_draws_without_colour_but_keeps_the_meaning() {
    let mono = Theme::load("default", None, ColorDepth::Mono).expect("mono");
    let buf = drive(mono, fleet_updates(16, 8, 600), (120, 30), vec![]);
    for y in 0..30 {
        for x in 0..120 {
            let c = &buf[(x, y)];
            assert!(
                matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset),
                "colour at {x},{y}: {c:?}"
            );
        }
    }
    let screen = text(&buf);
    assert!(screen.contains("gpu_lost") && screen.contains("ERR"));
}

#[test]
fn every_screen_fills_a_300x100_terminal() {
    for (keys, want) in [
        (vec![], "gpu16"),
        (vec![key(KeyCode::Enter)], "3 InfiniBand"),
        (vec![key(KeyCode::Tab)], "alerts ·"),
    ] {
        let buf = shown(16, 600, (300, 100), keys);
        let screen = text(&buf);
        assert!(screen.contains(want), "{want}: {screen}");
        // The footer is on the last row, where it belongs.
        assert!(screen.lines().last().is_some_and(|l| l.contains("? help")), "{screen}");
    }
}

#[test]
fn a_scheduler_that_cannot_be_read_says_so_in_the_header_and_the_detail() {
    use fleetop::model::sched::{SchedNode, Snapshot};
    let mut snap = Snapshot::default();
    snap.nodes.insert(
        "gpu01".into(),
        SchedNode {
            state: "mixed".into(),
            not_responding: false,
            reason: None,
            reason_user: None,
            reason_time: None,
            partitions: Vec::new(),
        },
    );
    let setup = |app: &mut App| app.store.scheduler_known = true;
    let steps = |then: Vec<Step>| {
        let mut v = vec![Step::Arrive(Update::Scheduler(std::sync::Arc::new(snap.clone())))];
        v.extend(then);
        v
    };
    // Read fine: nothing to say.
    let (buf, _) = drive_fleet(4, 60, (80, 24), steps(vec![]), setup);
    assert!(!text(&buf).contains("Slurm:"), "{}", text(&buf));
    // Then the controller hangs: the header says since when, and why.
    let hung = "sinfo did not answer within 10 s (killed)";
    let fail = Step::Arrive(Update::SchedulerError(hung.into()));
    let (buf, _) = drive_fleet(4, 60, (80, 24), steps(vec![fail]), setup);
    let screen = text(&buf);
    let header = screen.lines().nth(1).unwrap_or_default();
    assert!(
        header.contains("Slurm: last read 0s ago: sinfo did not answer"),
        "{screen}"
    );
    let (x, y) = find(&buf, "Slurm: last read").expect("shown");
    assert_eq!(
        buf[(x, y)].fg,
        theme().crit.fg.unwrap_or(Color::Reset),
        "in the crit colour"
    );
    // In node detail too, beside the (now old) Slurm state.
    let fail = Step::Arrive(Update::SchedulerError(hung.into()));
    let open = Step::Do(key(KeyCode::Enter));
    let (buf, _) = drive_fleet(4, 60, (120, 30), steps(vec![fail, open]), setup);
    let screen = text(&buf);
    let line = screen.lines().find(|l| l.contains("slurm mixed")).unwrap_or_default();
    assert!(line.contains("Slurm: last read 0s ago"), "{screen}");
}

#[test]
fn a_16_colour_terminal_gets_only_the_16_ansi_colours() {
    let t = Theme::load("default", None, ColorDepth::Ansi16).expect("theme");
    for keys in [vec![], vec![key(KeyCode::Enter)], vec![key(KeyCode::Tab)]] {
        let buf = drive(t.clone(), fleet_updates(8, 8, 60), (120, 30), keys);
        for y in 0..30 {
            for x in 0..120 {
                let c = &buf[(x, y)];
                for col in [c.fg, c.bg] {
                    assert!(!matches!(col, Color::Rgb(..) | Color::Indexed(_)), "{col:?} at {x},{y}");
                }
            }
        }
    }
}

/// The header's flag counts as (name, style) pairs, in screen order.
fn header_flags(buf: &Buffer) -> Vec<(String, ratatui::style::Style)> {
    let y = 1;
    let mut out: Vec<(String, ratatui::style::Style)> = Vec::new();
    let mut word = String::new();
    let mut style = ratatui::style::Style::default();
    for x in 0..buf.area.width {
        let c = &buf[(x, y)];
        if c.symbol() == " " {
            if !word.is_empty() {
                out.push((std::mem::take(&mut word), style));
            }
        } else {
            if word.is_empty() {
                style = c.style();
            }
            word.push_str(c.symbol());
        }
    }
    if !word.is_empty() {
        out.push((word, style));
    }
    // Names only (counts and the "flags" label dropped).
    out.into_iter()
        .filter(|(w, _)| w != "flags" && w.parse::<u64>().is_err())
        .collect()
}

#[test]
fn at_80_columns_the_header_keeps_every_critical_flag_and_puts_the_worst_first() {
    let t = theme();
    let fleet = || fleet_updates(300, 8, 60);
    let wide = header_flags(&drive(t.clone(), fleet(), (240, 40), vec![]));
    let narrow_buf = drive(t.clone(), fleet(), (80, 24), vec![]);
    let narrow = header_flags(&narrow_buf);
    let crit = |v: &[(String, ratatui::style::Style)]| {
        v.iter()
            .filter(|(w, s)| s.fg == t.crit.fg && !w.starts_with('+') && w != "more")
            .map(|(w, _)| {
                FlagKind::ALL
                    .into_iter()
                    .find(|k| k.name() == w || k.short() == w)
                    .unwrap_or_else(|| panic!("{w} is a flag name"))
            })
            .collect::<Vec<_>>()
    };
    let (wide_crit, narrow_crit) = (crit(&wide), crit(&narrow));
    assert!(wide_crit.len() >= 3, "{wide:?}");
    // As many crit kinds as fit, in the wide header's order; those that do
    // not fit are counted in a "+N more" as loud as they are.
    assert!(narrow_crit.len() >= 8, "{}", text(&narrow_buf));
    assert_eq!(narrow_crit, wide_crit[..narrow_crit.len()], "{}", text(&narrow_buf));
    if narrow_crit.len() < wide_crit.len() {
        let more = narrow.iter().find(|(w, _)| w == "more").expect("+N more");
        assert_eq!(more.1.fg, t.crit.fg, "hidden crit kinds make '+N more' crit");
    }
    // The worst first: no crit after a non-crit.
    let first_other = narrow
        .iter()
        .position(|(_, s)| s.fg != t.crit.fg)
        .unwrap_or(narrow.len());
    assert!(
        narrow[first_other..].iter().all(|(_, s)| s.fg != t.crit.fg),
        "{narrow:?}"
    );
}

#[test]
fn the_header_has_a_clock_and_read_only_says_so() {
    let setup = |app: &mut App| app.allowed.read_only = true;
    let (buf, _) = drive_fleet(4, 30, (80, 24), vec![], setup);
    let header = text(&buf).lines().next().unwrap_or_default().to_string();
    assert!(header.contains("00:00:00Z") && header.contains("READ-ONLY"), "{header}");
    let header = text(&shown(4, 30, (80, 24), vec![]));
    assert!(!header.contains("READ-ONLY"), "{header}");
}

#[test]
fn a_refresh_out_of_range_is_refused_with_the_value() {
    let out = crate::fleetop()
        .args(["--refresh", "1ms", "demo"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'1ms'") && err.contains("--refresh"), "{err}");
}

#[test]
fn every_screens_help_fits_80x24_whole() {
    use fleetop::tui::app::Screen;
    for screen in [
        Screen::Heatmap,
        Screen::Detail,
        Screen::Alerts,
        Screen::Bench,
        Screen::Groups,
    ] {
        let lines = fleetop::tui::ui::help_lines(screen);
        // The popup: a border each side, the key column 17 wide.
        assert!(lines.len() + 2 <= 24, "{screen:?}: {} lines", lines.len());
        for (k, what) in lines {
            assert!(
                k.chars().count() <= 16 && what.chars().count() <= 61,
                "{screen:?}: {k} {what}"
            );
        }
    }
}

#[test]
fn a_tripped_remediation_breaker_says_remediation_stopped_in_the_header() {
    use fleetop::model::remediation::{Mode, State, Tripped};
    let arrive = |tripped: bool| {
        Step::Arrive(Update::Remediation(Box::new(State {
            tripped: tripped.then(|| Tripped {
                at_ms: NOW - 60_000,
                why: "3 drains in 10 min".into(),
            }),
            mode: Some(Mode::Drain),
            limit: Some(3),
            ..State::default()
        })))
    };
    let (buf, _) = drive_fleet(16, 60, (80, 24), vec![arrive(true)], |_| {});
    let screen = text(&buf);
    let header = screen.lines().nth(1).unwrap_or_default();
    assert!(header.starts_with(" REMEDIATION STOPPED"), "{screen}");
    let (x, y) = find(&buf, "REMEDIATION STOPPED").expect("shown");
    let t = theme();
    assert_eq!(
        buf[(x, y)].style(),
        buf[(x, y)].style().patch(t.crit_block()),
        "in the crit style"
    );
    let (buf, _) = drive_fleet(16, 60, (120, 30), vec![arrive(true)], |_| {});
    assert!(
        text(&buf).contains("REMEDIATION STOPPED  fleetop remediate reset"),
        "{}",
        text(&buf)
    );
    // A policy that runs and has not tripped, or none: nothing.
    for steps in [vec![arrive(false)], vec![]] {
        let (buf, _) = drive_fleet(16, 60, (80, 24), steps, |_| {});
        assert!(!text(&buf).contains("REMEDIATION"), "{}", text(&buf));
    }
}

#[test]
fn header_totals_come_from_live_nodes_and_say_how_many_they_leave_out() {
    // Every node unreachable: no number at all, at any width.
    let all: Vec<usize> = (0..16).collect();
    for size in [(80, 24), (200, 40)] {
        let head = header(&drive(theme(), fleet_with_down(16, &all), size, vec![]));
        assert!(head.contains("16 nodes: 0 ok 16 unreachable"), "{head}");
        assert!(head.ends_with("│ no live data"), "{head}");
        for number in ["GPU", "util", "kW"] {
            assert!(!head.contains(number), "{number} in {head}");
        }
    }
    // Four of sixteen gone (gpu01-04): the twelve others' 96 GPUs, and the
    // four said, in full where there is room and short at 80 columns.
    let head = header(&drive(theme(), fleet_with_down(16, &[0, 1, 2, 3]), (200, 40), vec![]));
    assert!(head.contains(" ok 4 unreachable"), "{head}");
    assert!(head.contains("│ 96 GPUs  util "), "{head}");
    assert!(head.ends_with(" kW · 4 nodes not counted"), "{head}");
    let head = header(&drive(theme(), fleet_with_down(16, &[0, 1, 2, 3]), (80, 24), vec![]));
    // The health counts take the room first; what is left out is still said.
    assert!(head.ends_with("│ 4 not counted"), "{head}");
    assert!(head.chars().count() <= 80, "{head}");
    // A wider fleet at 80 columns keeps the count of what is left out
    // (the numbers give way first: 12 down and the demo's hung agent, 13
    // unreachable, short) and never runs off the edge.
    let down: Vec<usize> = (0..12).collect();
    let head = header(&drive(theme(), fleet_with_down(300, &down), (80, 24), vec![]));
    assert!(head.contains(" 13 unrch │ 13 not counted"), "{head}");
    assert!(!head.contains("GPU") && !head.contains("util"), "{head}");
    assert!(head.chars().count() <= 80, "{head}");
}

#[test]
fn the_filter_takes_every_short_flag_name_and_help_lists_them() {
    use fleetop::tui::view::Filter;
    for k in FlagKind::ALL {
        assert_eq!(Filter::parse(k.short()), Filter::parse(k.name()), "{}", k.short());
    }
    // Typed on the heatmap: the header's "rmp_fail" finds gpu02, not a
    // node named so.
    let mut a = keys("/rmp_fail");
    a.push(key(KeyCode::Enter));
    let screen = text(&shown(16, 600, (120, 30), a));
    assert!(
        screen.contains("1 of 16 nodes") && screen.contains("  gpu02 "),
        "{screen}"
    );
    let mut a = keys("/thr");
    a.push(key(KeyCode::Enter));
    let screen = text(&shown(16, 600, (120, 30), a));
    assert!(screen.contains("2 of 16 nodes"), "{screen}");
    // `?` twice: the legend, each short name with its kind, whole at 80x24.
    let buf = shown(4, 60, (80, 24), keys("??"));
    let screen = text(&buf);
    assert!(screen.contains("flag names"), "{screen}");
    for k in FlagKind::ALL {
        let listed = screen.lines().any(|l| {
            let words: Vec<&str> = l.split([' ', ':', '│']).collect();
            words.contains(&k.short()) && words.contains(&k.name())
        });
        assert!(listed, "{} = {}:\n{screen}", k.short(), k.name());
    }
    let legend = fleetop::tui::ui::flag_legend();
    assert!(legend.len() + 2 <= 24, "{}", legend.len());
    for (k, what) in legend {
        assert!(k.chars().count() <= 16 && what.chars().count() <= 61, "{k} {what}");
    }
    // A third `?` closes it.
    let screen = text(&shown(4, 60, (80, 24), keys("???")));
    assert!(!screen.contains("flag names") && !screen.contains("keys ·"), "{screen}");
}

#[test]
fn one_node_is_one_node_not_one_nodes() {
    for size in [(80, 24), (200, 40)] {
        let buf = shown(1, 60, size, vec![]);
        let screen = text(&buf);
        assert!(header(&buf).contains(" 1 node: "), "{screen}");
        assert!(screen.contains(" 1 node · utilization"), "{screen}");
        assert!(!screen.contains("1 nodes"), "{screen}");
    }
}

/// The status column's words, counted over the node rows.
fn status_words(screen: &str) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for l in screen.lines().skip(3) {
        let mut w = l.split_whitespace();
        if w.next().is_some_and(|n| n.starts_with("gpu") && n.len() == 5)
            && let Some(s) = w.next()
        {
            *m.entry(s.to_string()).or_default() += 1;
        }
    }
    m
}

#[test]
fn the_header_counts_nodes_by_health_as_the_status_column_does() {
    let buf = shown(16, 600, (200, 40), vec![]);
    let screen = text(&buf);
    let words = status_words(&screen);
    let c = |w: &str| words.get(w).copied().unwrap_or(0);
    // The demo's hung agent: silent for minutes, so unreachable.
    assert!(c("crit") > 0 && c("warn") > 0 && c("unrch") == 1, "{words:?}");
    let want = format!(
        "16 nodes: {} crit {} warn {} ok 1 unreachable │",
        c("crit"),
        c("warn"),
        c("ok")
    );
    assert_eq!(c("crit") + c("warn") + c("ok") + 1, 16, "{words:?}");
    assert!(header(&buf).contains(&want), "{want} in {}", header(&buf));
    // At 80 columns the counts stay whole; the totals give way first.
    let head = header(&shown(16, 600, (80, 24), vec![]));
    assert!(head.contains(&want), "{want} in {head}");
    assert!(head.chars().count() <= 80, "{head}");
}

#[test]
fn p_freezes_the_display_while_updates_arrive_and_p_again_shows_them() {
    let (fleet, later) = fleet_and_later(16, 5);
    let arrive = |first: Vec<Step>| {
        let mut v = first;
        v.extend(later.iter().cloned().map(Step::Arrive));
        v
    };
    let screen = |steps: Vec<Step>| text(&drive_steps(theme(), fleet.clone(), (120, 30), steps, |_| {}).0);
    let before = screen(vec![Step::Do(key(KeyCode::Char('p')))]);
    assert!(
        before.lines().next().unwrap_or_default().contains(" PAUSED "),
        "{before}"
    );
    // Paused: the samples that arrive change nothing on screen.
    let paused = screen(arrive(vec![Step::Do(key(KeyCode::Char('p')))]));
    assert_eq!(paused, before);
    // Not paused, they do; and `p` again shows what arrived meanwhile.
    let live = screen(arrive(vec![]));
    assert_ne!(
        live.lines().skip(3).collect::<Vec<_>>(),
        before.lines().skip(3).collect::<Vec<_>>()
    );
    let mut steps = arrive(vec![Step::Do(key(KeyCode::Char('p')))]);
    steps.push(Step::Do(key(KeyCode::Char('p'))));
    let resumed = screen(steps);
    assert!(
        !resumed.lines().next().unwrap_or_default().contains("PAUSED"),
        "{resumed}"
    );
    assert_eq!(
        resumed.lines().skip(3).take(16).collect::<Vec<_>>(),
        live.lines().skip(3).take(16).collect::<Vec<_>>()
    );
    assert!(resumed.contains("updates arrived while paused"), "{resumed}");
}

#[test]
fn a_console_behind_says_so_in_the_header() {
    let behind = |app: &mut App| app.store.lag = fleetop::store::Lag::judged(8_000, NOW);
    let (buf, _) = drive_fleet(16, 60, (80, 24), vec![], behind);
    let screen = text(&buf);
    let header = screen.lines().nth(1).unwrap_or_default();
    assert!(header.starts_with(" console behind 8s │"), "{screen}");
    // Not behind: nothing said.
    let (buf, _) = drive_fleet(16, 60, (80, 24), vec![], |_| {});
    assert!(!text(&buf).contains("behind"), "{}", text(&buf));
    // Its runtime late: it says too, where there is room, that it calls no
    // node silent meanwhile.
    let held = |app: &mut App| {
        let ran = tokio::time::Instant::now();
        app.store.pace.beat(ran - std::time::Duration::from_millis(8_300), ran);
    };
    let (buf, _) = drive_fleet(16, 60, (100, 30), vec![], held);
    let screen = text(&buf);
    let header = screen.lines().nth(1).unwrap_or_default();
    assert!(
        header.starts_with(" console behind 8s (silence not judged) │"),
        "{screen}"
    );
}

/// A terminal that takes `took` to draw each frame, as a large fleet's
/// wall does; it notes when each frame was drawn.
struct SlowTerminal {
    inner: TestBackend,
    took: std::time::Duration,
    drawn: std::sync::Arc<std::sync::Mutex<Vec<std::time::Instant>>>,
}

impl ratatui::backend::Backend for SlowTerminal {
    type Error = <TestBackend as ratatui::backend::Backend>::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<ratatui::layout::Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<ratatui::layout::Position>>(&mut self, p: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(p)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, c: ratatui::backend::ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(c)
    }
    fn size(&self) -> Result<ratatui::layout::Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<ratatui::backend::WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.drawn.lock().expect("lock").push(std::time::Instant::now());
        std::thread::sleep(self.took);
        self.inner.flush()
    }
}

/// A screen that is slow to draw is drawn for new data at most a 40th of
/// the time, so a large fleet's samples never keep the console drawing;
/// a key is still drawn at once. On the real clock: a slower machine only
/// draws less, so no bound below can be missed by being slow.
#[test]
fn a_screen_slow_to_draw_is_drawn_for_data_less_often_and_for_keys_at_once() {
    use std::time::{Duration, Instant};
    let (targets, mut updates) = fleet_updates(4, 8, 0);
    let mut sims = SimFleet::new(demo::plan(4, 8, 7, NOW - 600_000));
    sims.connect(NOW);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let drawn = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let slow = SlowTerminal {
        inner: TestBackend::new(80, 24),
        took: Duration::from_millis(20),
        drawn: drawn.clone(),
    };
    let start = Instant::now();
    let key_at = rt.block_on(async move {
        let mut terminal = Terminal::new(slow).expect("terminal");
        let mut app = App::new(Store::new(targets, Thresholds::default()), theme(), NOW);
        let (utx, urx) = mpsc::channel(4096);
        let (atx, arx) = mpsc::channel(64);
        let driver = async move {
            // New samples every 50 ms for 0.9 s (each changes the screen),
            // a key press halfway.
            let mut key_at = None;
            for i in 0..18 {
                for u in updates.drain(..).chain(sims.sample(NOW + i * 1000)) {
                    utx.send(u).await.expect("loop alive");
                }
                if i == 9 {
                    key_at = Some(Instant::now());
                    atx.send(key(KeyCode::Char('j'))).await.expect("loop alive");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            atx.send(Action::Quit).await.expect("loop alive");
            key_at.expect("a key")
        };
        let (res, key_at) = tokio::join!(
            event_loop(&mut terminal, &mut app, urx, arx, None, || NOW, |_| {}),
            driver
        );
        res.expect("loop ends cleanly");
        key_at
    });
    let drawn = drawn.lock().expect("lock").clone();
    // Before the tick a second in: the first frame and the key's, not one
    // for each --refresh (200 ms) with new data.
    let early: Vec<Duration> = drawn
        .iter()
        .map(|t| t.duration_since(start))
        .filter(|d| *d < Duration::from_millis(950))
        .collect();
    assert!(early.len() <= 2, "drawn at {early:?}");
    assert!(
        drawn
            .iter()
            .any(|t| *t >= key_at && t.duration_since(key_at) < Duration::from_millis(400)),
        "the key drawn at once: key at {:?}, drawn at {:?}",
        key_at.duration_since(start),
        drawn.iter().map(|t| t.duration_since(start)).collect::<Vec<_>>()
    );
}
