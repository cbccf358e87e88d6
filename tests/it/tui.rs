//! The console on `TestBackend`: the real event loop, fed a simulated fleet's
//! updates and key presses, at a fixed time. Text is snapshotted with insta;
//! colours, which text snapshots lose, are asserted on the buffer's styles.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::detect::Thresholds;
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::action::{ActionReport, Actor, NodeAction, NodeResult, Stage};
use fleetop::model::flag::FlagKind;
use fleetop::model::request::Request;
use fleetop::model::target::Target;
use fleetop::model::update::{Event, Update};
use fleetop::store::Store;
use fleetop::tui::app::{Action, App};
use fleetop::tui::event_loop;
use fleetop::tui::theme::{ColorDepth, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use tokio::sync::mpsc;

/// The fixed "now" of every test (2026-01-01T00:00:00Z).
pub(crate) const NOW: i64 = 1_767_225_600_000;

/// Every update a console would receive from `nodes` simulated agents with
/// `history_s` seconds of history ending at NOW.
pub(crate) fn fleet_updates(nodes: u32, gpus: u32, history_s: i64) -> (Vec<Target>, Vec<Update>) {
    let start = NOW - 600_000;
    let mut sims = SimFleet::new(demo::plan(nodes, gpus, 7, start));
    let targets = sims
        .plan
        .iter()
        .map(|cfg| Target {
            name: cfg.hostname.clone(),
            host: "10.0.0.1".into(),
            port: 50051,
        })
        .collect();
    let mut updates = sims.connect(NOW);
    for t in (NOW - history_s * 1000..=NOW).step_by(1000) {
        updates.extend(sims.sample(t));
    }
    updates.extend((0..nodes as usize).map(|node| Update::Node {
        node,
        event: Event::CaughtUp,
    }));
    (targets, updates)
}

pub(crate) fn key(code: KeyCode) -> Action {
    Action::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub(crate) fn keys(s: &str) -> Vec<Action> {
    s.chars().map(|c| key(KeyCode::Char(c))).collect()
}

/// One thing that happens to the app, in order.
pub(crate) enum Step {
    Do(Action),
    /// An update arriving (then a frame passes, so it is drawn).
    Arrive(Update),
}

/// Runs the app's event loop on a `width` x `height` test terminal: all
/// updates first, then the actions in order, then quit. Returns the screen.
fn drive(theme: Theme, fleet: (Vec<Target>, Vec<Update>), size: (u16, u16), actions: Vec<Action>) -> Buffer {
    drive_steps(theme, fleet, size, actions.into_iter().map(Step::Do).collect(), |_| {}).0
}

/// The same with steps after the fleet's updates, the app set up by
/// `setup`, and what the app asked the action task to do.
pub(crate) fn drive_steps(
    theme: Theme,
    fleet: (Vec<Target>, Vec<Update>),
    size: (u16, u16),
    steps: Vec<Step>,
    setup: impl FnOnce(&mut App),
) -> (Buffer, Vec<Request>) {
    let (targets, updates) = fleet;
    // Paused time: timers (the frame and tick intervals) advance only when
    // everything else waits, so every run sees the same frames.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut terminal = Terminal::new(TestBackend::new(size.0, size.1)).expect("terminal");
        let mut app = App::new(Store::new(targets, Thresholds::default()), theme, NOW);
        setup(&mut app);
        let (utx, urx) = mpsc::channel(updates.len() + 16);
        let (atx, arx) = mpsc::channel(64);
        let (ctx, mut crx) = mpsc::channel(16);
        let frame = || tokio::time::sleep(std::time::Duration::from_millis(300));
        let driver = async move {
            for u in updates {
                utx.send(u).await.expect("loop alive");
            }
            // Wait for the loop to take every update, and a frame to draw them.
            while utx.capacity() < utx.max_capacity() {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            frame().await;
            for step in steps {
                match step {
                    Step::Do(a) => {
                        atx.send(a).await.expect("loop alive");
                        tokio::task::yield_now().await;
                    }
                    Step::Arrive(u) => {
                        frame().await;
                        utx.send(u).await.expect("loop alive");
                        frame().await;
                    }
                }
            }
            atx.send(Action::Quit).await.expect("loop alive");
        };
        let (res, ()) = tokio::join!(
            event_loop(&mut terminal, &mut app, urx, arx, Some(ctx), || NOW, |_| {}),
            driver
        );
        res.expect("loop ends cleanly");
        let mut asked = Vec::new();
        while let Ok(o) = crx.try_recv() {
            asked.push(o);
        }
        (terminal.backend().buffer().clone(), asked)
    })
}

pub(crate) fn text(buf: &Buffer) -> String {
    let area = buf.area;
    (0..area.height)
        .map(|y| {
            let line: String = (0..area.width).map(|x| buf[(x, y)].symbol().to_string()).collect();
            line.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn theme() -> Theme {
    Theme::load("default", None, ColorDepth::TrueColor).expect("default theme")
}

fn buf_has(buf: &Buffer, needle: &str) -> bool {
    text(buf).contains(needle)
}

/// Position of the first occurrence of `needle` on the screen.
fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    text(buf).lines().enumerate().find_map(|(y, l)| {
        let col = l.find(needle)?;
        Some((l[..col].chars().count() as u16, y as u16))
    })
}

#[test]
fn heatmap_at_80x24() {
    let buf = drive(theme(), fleet_updates(16, 8, 600), (80, 24), vec![]);
    insta::assert_snapshot!("heatmap_80x24", text(&buf));
}

#[test]
fn heatmap_wide() {
    let buf = drive(theme(), fleet_updates(16, 8, 600), (200, 40), vec![]);
    insta::assert_snapshot!("heatmap_200x40", text(&buf));
}

#[test]
fn heat_cells_take_the_theme_colour_of_their_value_and_flags_their_severity() {
    let t = theme();
    let buf = drive(t.clone(), fleet_updates(16, 8, 600), (120, 30), vec![]);
    // gpu01's first GPU cell: the number, on the heat colour of that number.
    let (x, y) = find(&buf, "gpu01").expect("gpu01 row");
    let row: String = (0..120).map(|i| buf[(i, y)].symbol().to_string()).collect();
    let after_name = &row[(x as usize + 5)..];
    let first = after_name
        .split_whitespace()
        .find(|w| w.parse::<u32>().is_ok())
        .expect("a util cell");
    let col = x + 5 + after_name.find(first).expect("cell") as u16;
    let util: f64 = first.parse().expect("number");
    assert_eq!(buf[(col, y)].bg, t.heat(util / 100.0), "cell {first} at {col},{y}");
    // The cursor's node name is drawn selected.
    assert_eq!(buf[(x, y)].bg, t.selected.bg.unwrap_or(Color::Reset));
    // A crit flag in the list is drawn in the crit colour.
    let (fx, fy) = find(&buf, "gpu_lost").expect("a lost GPU is flagged");
    assert_eq!(buf[(fx, fy)].fg, t.crit.fg.unwrap_or(Color::Reset));
}

#[test]
fn node_detail_at_80x24_and_wide() {
    // Down twice, then open the third node.
    let mut a = keys("jj");
    a.push(key(KeyCode::Enter));
    let buf = drive(theme(), fleet_updates(16, 8, 600), (80, 24), a.clone());
    insta::assert_snapshot!("detail_80x24", text(&buf));
    a.extend(keys("2"));
    let buf = drive(theme(), fleet_updates(16, 8, 600), (200, 50), a);
    insta::assert_snapshot!("detail_200x50_nvlink", text(&buf));
}

#[test]
fn alerts_at_80x24_and_wide_and_enter_opens_the_node() {
    let buf = drive(theme(), fleet_updates(16, 8, 600), (80, 24), vec![key(KeyCode::Tab)]);
    insta::assert_snapshot!("alerts_80x24", text(&buf));
    let buf = drive(theme(), fleet_updates(16, 8, 600), (200, 40), vec![key(KeyCode::Tab)]);
    insta::assert_snapshot!("alerts_200x40", text(&buf));
    // The first alert (most severe, oldest) opens its node, GPU selected.
    let first_alert_node = text(&buf)
        .lines()
        .nth(4)
        .and_then(|l| l.split_whitespace().nth(1))
        .map(String::from)
        .expect("a row");
    let buf = drive(
        theme(),
        fleet_updates(16, 8, 600),
        (120, 30),
        vec![key(KeyCode::Tab), key(KeyCode::Enter)],
    );
    let screen = text(&buf);
    let title = screen.lines().nth(2).expect("title");
    assert!(
        title.contains(&first_alert_node),
        "{title} should name {first_alert_node}"
    );
}

#[test]
fn help_lists_the_keys() {
    let buf = drive(theme(), fleet_updates(4, 8, 60), (80, 24), keys("?"));
    insta::assert_snapshot!("help_80x24", text(&buf));
}

#[test]
fn q_in_help_closes_help_and_does_not_quit() {
    // `drive` ends with a Quit of its own; the screen it leaves is the
    // heatmap, with help closed, and the app was still running to draw it.
    let buf = drive(theme(), fleet_updates(4, 8, 60), (80, 24), keys("?qj"));
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
fn filter_by_flag_kind_and_by_hostlist() {
    let mut a = keys("/throttled");
    a.push(key(KeyCode::Enter));
    let buf = drive(theme(), fleet_updates(16, 8, 600), (120, 30), a);
    let screen = text(&buf);
    assert!(screen.contains("2 of 16 nodes"), "{screen}");
    let plan = fleetop::ingest::demo::plan(16, 8, 7, 0);
    for cfg in &plan {
        let throttled = matches!(
            cfg.scenario,
            fleetop_agent::sim::Scenario::ThermalThrottle | fleetop_agent::sim::Scenario::PowerBrake
        );
        let row = format!("  {} ", cfg.hostname);
        assert_eq!(
            screen.contains(&row),
            throttled,
            "{} ({:?})",
            cfg.hostname,
            cfg.scenario
        );
    }
    let mut a = keys("/gpu[01-03]");
    a.push(key(KeyCode::Enter));
    let screen = text(&drive(theme(), fleet_updates(16, 8, 60), (120, 30), a));
    assert!(
        screen.contains("3 of 16 nodes") && screen.contains("gpu03") && !screen.contains("gpu04"),
        "{screen}"
    );
    // A bad expression is said, not swallowed.
    let mut a = keys("/gpu[03-01]");
    a.push(key(KeyCode::Enter));
    let screen = text(&drive(theme(), fleet_updates(4, 8, 60), (120, 30), a));
    assert!(screen.contains("bad hostlist 'gpu[03-01]'"), "{screen}");
}

#[test]
fn sort_by_flags_puts_critical_nodes_first_and_m_cycles_the_metric() {
    let buf = drive(theme(), fleet_updates(16, 8, 600), (120, 30), keys("ssm"));
    let screen = text(&buf);
    // Each row's first flag (flags are drawn worst first), ranked by the
    // colour it is drawn in: the rows go from critical down to none, and
    // the top one is critical.
    let t = theme();
    let rank = |y: u16, row: &str| -> u8 {
        let Some(x) = fleetop::model::flag::FlagKind::ALL
            .iter()
            .filter_map(|k| {
                let word = format!(" {}", k.name());
                // Flags follow the mean column ("84%"), not the status word.
                let after = row.find("% ")?;
                let x = after + row[after..].find(&word)?;
                // The whole word: followed by a space, a count or the line's end.
                let next = row[x + word.len()..].chars().next();
                matches!(next, None | Some(' ' | '×')).then_some(x + 1)
            })
            .min()
        else {
            return 0;
        };
        let fg = buf[(row[..x].chars().count() as u16, y)].fg;
        if fg == t.crit.fg.unwrap_or(Color::Reset) {
            3
        } else if fg == t.warn.fg.unwrap_or(Color::Reset) {
            2
        } else {
            1
        }
    };
    let ranks: Vec<u8> = screen
        .lines()
        .enumerate()
        .skip(3)
        .filter(|(_, l)| l.contains("gpu"))
        .map(|(y, l)| rank(y as u16, l))
        .collect();
    assert_eq!(ranks.first(), Some(&3), "{screen}");
    assert!(ranks.windows(2).all(|w| w[0] >= w[1]), "{ranks:?}\n{screen}");
    assert!(ranks.contains(&0), "healthy nodes come last: {ranks:?}");
    assert!(screen.contains("memory used"), "m switched the metric: {screen}");
    assert!(screen.contains("sort flags"));
}

#[test]
fn space_marks_nodes_for_actions() {
    let screen = text(&drive(theme(), fleet_updates(6, 8, 30), (100, 24), keys("  ")));
    assert!(screen.contains("2 marked"), "{screen}");
    assert_eq!(screen.matches('●').count(), 2);
}

#[test]
fn a_thousand_nodes_become_a_wall_that_fits_80x24() {
    let buf = drive(theme(), fleet_updates(1024, 8, 2), (80, 24), vec![]);
    let screen = text(&buf);
    assert!(screen.contains("1024 wall"), "{screen}");
    // Every node has a cell: count the painted cells of the wall area.
    let t = theme();
    let mut cells = 0;
    for y in 3..22 {
        for x in 0..80 {
            let c = &buf[(x, y)];
            if c.bg != Color::Reset && c.bg != t.base.bg.unwrap_or(Color::Reset) {
                cells += 1;
            }
        }
    }
    assert!(cells >= 1000, "{cells} wall cells");
    insta::assert_snapshot!("wall_80x24", screen);
    // w toggles back to rows.
    let screen = text(&drive(theme(), fleet_updates(300, 8, 2), (80, 24), keys("w")));
    assert!(screen.contains("300 nodes"), "{screen}");
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
        let buf = drive(theme(), fleet_updates(16, 8, 600), (300, 100), keys);
        let screen = text(&buf);
        assert!(screen.contains(want), "{want}: {screen}");
        // The footer is on the last row, where it belongs.
        assert!(screen.lines().last().is_some_and(|l| l.contains("? help")), "{screen}");
    }
}

#[test]
fn drain_asks_a_reason_shows_the_exact_command_and_defaults_to_no() {
    let enabled = |app: &mut App| app.actions_enabled = true;
    let mut steps: Vec<Step> = vec![Step::Do(key(KeyCode::Char('D')))];
    steps.extend(keys("fan 'broken'").into_iter().map(Step::Do));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (80, 24), steps, enabled);
    insta::assert_snapshot!("confirm_drain_80x24", text(&buf));
    assert!(asked.is_empty(), "nothing runs before the confirmation");

    // Enter (or any key but y) cancels.
    let mut steps: Vec<Step> = vec![Step::Do(key(KeyCode::Char('D')))];
    steps.extend(keys("fan").into_iter().map(Step::Do));
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Enter))]);
    let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (80, 24), steps, enabled);
    assert!(asked.is_empty());
    assert!(text(&buf).contains("drain cancelled: nothing was run"));
    // With marks, the dialog says so and names them, even from node detail.
    let mut steps: Vec<Step> = keys(" j ").into_iter().map(Step::Do).collect();
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Char('D')))]);
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, enabled);
    assert!(
        text(&buf).contains("drain 2 marked nodes: gpu01 gpu03"),
        "{}",
        text(&buf)
    );
}

#[test]
fn a_drain_of_a_node_someone_holds_says_so_first_and_shows_no_command_it_will_not_run() {
    let enabled = |app: &mut App| app.actions_enabled = true;
    let sched = || {
        sched_arrives(
            vec![
                ("gpu01", sched_node("idle", None, None, None)),
                (
                    "gpu03",
                    sched_node("drained", Some("RMA 5521"), Some("bob"), Some(NOW - 3_600_000)),
                ),
            ],
            vec![],
        )
    };
    // gpu01 and gpu03 marked: the dialog warns of gpu03 before anything.
    let mut steps = vec![sched()];
    steps.extend(step_keys(" j D"));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, enabled);
    let screen = text(&buf);
    assert!(
        screen.contains("Already out of service, left as it is") && screen.contains("gpu03: drained by bob"),
        "{screen}"
    );
    // The confirmation shows gpu01's command only.
    let mut steps = vec![sched()];
    steps.extend(step_keys(" j Dfan"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, enabled);
    let screen = text(&buf);
    assert!(screen.contains("NodeName=gpu01"), "{screen}");
    assert!(!screen.contains("NodeName=gpu03"), "{screen}");
    // gpu03 alone: nothing to drain, nothing asked.
    let mut steps = vec![sched()];
    steps.extend(step_keys("jjDfan"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, enabled);
    assert!(asked.is_empty());
    assert!(
        text(&buf).contains("nothing to drain: gpu03 already out of service"),
        "{}",
        text(&buf)
    );
}

#[test]
fn yes_runs_the_plan_on_the_marked_nodes_and_shows_each_result() {
    let enabled = |app: &mut App| app.actions_enabled = true;
    let mut steps: Vec<Step> = keys(" j ").into_iter().map(Step::Do).collect(); // mark gpu01, skip gpu02, mark gpu03
    steps.push(Step::Do(key(KeyCode::Char('D'))));
    steps.extend(keys("psu").into_iter().map(Step::Do));
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Char('y')))]);
    let report = ActionReport {
        time: "2026-01-01T00:00:00.000Z".into(),
        stage: Stage::Done,
        actor: Actor {
            uid: 1000,
            name: Some("sre".into()),
            sudo_user: None,
            env_user: None,
        },
        action: NodeAction::Drain,
        nodes: vec!["gpu01".into(), "gpu03".into()],
        reason: Some("psu".into()),
        commands: vec![],
        refused: None,
        results: vec![
            NodeResult {
                node: "gpu01".into(),
                ok: true,
                message: "now drained (psu, by root)".into(),
                state_before: None,
                state_after: None,
            },
            NodeResult {
                node: "gpu03".into(),
                ok: false,
                message: "sinfo failed: Invalid node name specified".into(),
                state_before: None,
                state_after: None,
            },
        ],
        forced: false,
        policy: None,
        scheduler: Default::default(),
        overrides: Default::default(),
    };
    steps.push(Step::Arrive(Update::ActionDone(std::sync::Arc::new(report))));
    let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, enabled);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("one plan runs: {asked:?}")
    };
    assert_eq!(plan.nodes, ["gpu01", "gpu03"]);
    assert_eq!(
        plan.commands[1],
        [
            "scontrol",
            "update",
            "NodeName=gpu03",
            "State=DRAIN",
            "Reason=fleetop: psu"
        ]
    );
    let screen = text(&buf);
    assert!(screen.contains("drain failed on some nodes"), "{screen}");
    assert!(
        screen.contains("gpu01") && screen.contains("now drained") && screen.contains("FAIL"),
        "{screen}"
    );
}

#[test]
fn read_only_turns_actions_off_and_reports_the_attempt() {
    let ro = |app: &mut App| {
        app.actions_enabled = true;
        app.read_only = true;
    };
    let (buf, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 60),
        (80, 24),
        vec![Step::Do(key(KeyCode::Char('R')))],
        ro,
    );
    assert!(text(&buf).contains("read-only mode: resume is off"));
    let [Request::Refused(plan, why)] = asked.as_slice() else {
        panic!("the refusal is logged: {asked:?}")
    };
    assert_eq!((plan.action, why.as_str()), (NodeAction::Resume, "read-only mode"));
    // Without a scheduler there is nothing to act on, and the screen says how to get one.
    let (buf, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 60),
        (80, 24),
        vec![Step::Do(key(KeyCode::Char('D')))],
        |_| {},
    );
    assert!(asked.is_empty());
    assert!(text(&buf).contains("no scheduler: start with --slurm"));
}

#[test]
fn scheduler_state_shows_in_rows_and_in_the_detail() {
    use fleetop::model::sched::{Job, SchedNode, Snapshot};
    let node = |state: &str, reason: Option<&str>| SchedNode {
        state: state.into(),
        not_responding: false,
        reason: reason.map(String::from),
        reason_user: reason.map(|_| "root".into()),
        reason_time: None,
        partitions: Vec::new(),
    };
    let mut snap = Snapshot::default();
    snap.nodes.insert("gpu01".into(), node("mixed", None));
    snap.nodes.insert("gpu02".into(), node("drained", Some("fan broken")));
    snap.jobs.push(Job {
        id: 4411,
        user: "alice".into(),
        name: "train".into(),
        elapsed_s: 3700,
        gpus_per_node: 8,
        nodes: vec!["gpu01".into()],
    });
    let arrive = || Step::Arrive(Update::Scheduler(std::sync::Arc::new(snap.clone())));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), vec![arrive()], |_| {});
    let screen = text(&buf);
    let row = |n: &str| screen.lines().find(|l| l.contains(n)).unwrap_or_default().to_string();
    assert!(row("gpu02").contains("drained"), "{screen}");
    assert!(row("gpu01").contains("mixed"), "{screen}");
    let t = theme();
    let (x, y) = find(&buf, "drained").expect("drained shown");
    assert_eq!(
        buf[(x, y)].fg,
        t.warn.fg.unwrap_or(Color::Reset),
        "a drained node stands out"
    );
    let steps = vec![arrive(), Step::Do(key(KeyCode::Enter))];
    let screen = text(&drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, |_| {}).0);
    assert!(
        screen.contains("slurm mixed · job 4411 alice train 8 GPUs 1h"),
        "{screen}"
    );
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
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (80, 24), steps(vec![]), setup);
    assert!(!text(&buf).contains("Slurm:"), "{}", text(&buf));
    // Then the controller hangs: the header says since when, and why.
    let hung = "sinfo did not answer within 10 s (killed)";
    let fail = Step::Arrive(Update::SchedulerError(hung.into()));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (80, 24), steps(vec![fail]), setup);
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
    let (buf, _) = drive_steps(
        theme(),
        fleet_updates(4, 8, 60),
        (120, 30),
        steps(vec![fail, open]),
        setup,
    );
    let screen = text(&buf);
    let line = screen.lines().find(|l| l.contains("slurm mixed")).unwrap_or_default();
    assert!(line.contains("Slurm: last read 0s ago"), "{screen}");
}

#[test]
fn a_drained_nodes_alert_says_where_the_response_stands_and_do_now_is_the_next_step() {
    use fleetop_agent::sim::Scenario;
    let plan = demo::plan(20, 8, 7, NOW - 600_000);
    let node = plan
        .iter()
        .find(|c| c.scenario == Scenario::EccUncorrectable)
        .map(|c| c.hostname.clone())
        .expect("the demo has an ECC node");
    let drained = || {
        sched_arrives(
            vec![(
                node.as_str(),
                sched_node(
                    "drained",
                    Some("fleetop: ecc_uncorrected on gpu3: reset_gpu"),
                    Some("root"),
                    Some(NOW - 13 * 60_000),
                ),
            )],
            vec![],
        )
    };
    let mut steps = vec![drained()];
    steps.extend(detail_of(&node));
    let (buf, _) = drive_steps(theme(), fleet_updates(20, 8, 60), (140, 40), steps, |_| {});
    let screen = text(&buf);
    let do_now = screen.lines().find(|l| l.contains("do now")).unwrap_or_default();
    assert!(
        do_now.contains("replace the hardware (RMA), then T: burn-in and return (drained by fleetop 13m)"),
        "{screen}"
    );
    assert!(!do_now.contains("drain, then"), "never a step already done: {do_now}");
    // The alerts screen: the node's rows say it is handled, and how far.
    let steps = vec![drained(), Step::Do(key(KeyCode::Tab))];
    let (buf, _) = drive_steps(theme(), fleet_updates(20, 8, 60), (160, 40), steps, |_| {});
    let screen = text(&buf);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains(&format!(" {node} ")) && l.starts_with("CRIT"))
        .collect();
    assert!(
        !rows.is_empty() && rows.iter().all(|l| l.contains("drained by fleetop 13m")),
        "{screen}"
    );
    // A burn-in passed since (run from anywhere: the node's agent says so).
    let (targets, _) = fleet_updates(20, 8, 60);
    let passed = |node: &str| {
        let at = targets.iter().position(|t| t.name == node).expect("the node");
        let b = fleetop::model::bench::BurnIn {
            started_ms: NOW - 90_000,
            ended_ms: NOW - 60_000,
            suite: Some(fleetop::model::bench::Suite::Quick),
            passed: true,
            requested_by: "alice@console2".into(),
            node: Default::default(),
            checks: Vec::new(),
            error: None,
        };
        Step::Arrive(Update::Node {
            node: at,
            event: Event::BurnIn(Box::new(b)),
        })
    };
    let mut steps = vec![drained(), passed(&node)];
    steps.extend(detail_of(&node));
    let (buf, _) = drive_steps(theme(), fleet_updates(20, 8, 60), (140, 40), steps, |_| {});
    let screen = text(&buf);
    let do_now = screen.lines().find(|l| l.contains("do now")).unwrap_or_default();
    assert!(
        do_now.contains("replace the hardware") && !do_now.contains("T: return"),
        "a row that cannot be remapped keeps it out, whatever passed: {screen}"
    );
    // A node drained for an SXid (an event, not a state) that passed: return it.
    let sxid = plan
        .iter()
        .find(|c| c.scenario == Scenario::SxidFatal)
        .map(|c| c.hostname.clone())
        .expect("the demo has an SXid node");
    let held = sched_arrives(
        vec![(
            sxid.as_str(),
            sched_node(
                "drained",
                Some("fleetop: sxid on node"),
                Some("root"),
                Some(NOW - 13 * 60_000),
            ),
        )],
        vec![],
    );
    let mut steps = vec![held, passed(&sxid)];
    steps.extend(detail_of(&sxid));
    let (buf, _) = drive_steps(theme(), fleet_updates(20, 8, 60), (140, 40), steps, |_| {});
    let screen = text(&buf);
    let do_now = screen.lines().find(|l| l.contains("do now")).unwrap_or_default();
    assert!(
        do_now.contains("T: return it to service (burn-in passed 23:59Z)"),
        "{screen}"
    );
}

#[test]
fn a_gpu_that_fell_off_the_bus_shows_its_nvlinks_as_unknown_never_up() {
    use fleetop_agent::sim::Scenario;
    let plan = demo::plan(16, 8, 7, NOW - 600_000);
    let cfg = plan
        .iter()
        .find(|c| c.scenario == Scenario::Xid79)
        .expect("the XID 79 node");
    let lost = fleetop_agent::sim::target_gpu(cfg.seed, 8);
    let mut steps = detail_of(&cfg.hostname);
    steps.extend((0..lost).map(|_| Step::Do(key(KeyCode::Char('j')))));
    steps.push(Step::Do(key(KeyCode::Char('2'))));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 50), steps, |_| {});
    let screen = text(&buf);
    let link_rows = |state: &str| {
        let below = screen.lines().skip_while(|l| !l.starts_with("link state"));
        below
            .filter(|l| {
                let mut w = l.split_whitespace();
                w.next().is_some_and(|n| n.parse::<u32>().is_ok()) && w.next() == Some(state)
            })
            .count()
    };
    assert_eq!(link_rows("up"), 0, "{screen}");
    assert!(link_rows("?") >= 1, "{screen}");
}

#[test]
fn burn_in_on_a_node_with_a_job_or_someone_elses_hold_names_them_and_needs_the_name_typed() {
    let setup = |app: &mut App| {
        app.bench_enabled = true;
        app.actions_enabled = true;
    };
    let sched = || {
        sched_arrives(
            vec![
                ("gpu01", sched_node("mixed", None, None, None)),
                (
                    "gpu02",
                    sched_node("drained", Some("RMA 5521"), Some("bob"), Some(NOW - 3_600_000)),
                ),
            ],
            vec![job(4411, "gpu01", 600)],
        )
    };
    // gpu01 (the one in view) runs job 4411: `y` alone runs nothing.
    let steps = vec![
        sched(),
        Step::Do(key(KeyCode::Char('B'))),
        Step::Do(key(KeyCode::Char('y'))),
    ];
    let (buf, asked) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, setup);
    let screen = text(&buf);
    assert!(asked.is_empty(), "{asked:?}");
    assert!(
        screen.contains("gpu01: job 4411 · alice · train · 10m runs on it") && screen.contains("type gpu01"),
        "{screen}"
    );
    // Its name typed: it runs.
    let mut steps = vec![sched(), Step::Do(key(KeyCode::Char('B')))];
    steps.extend(step_keys("gpu01"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (_, asked) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, setup);
    assert!(matches!(asked.as_slice(), [Request::Bench { .. }]), "{asked:?}");
    // Someone else's hold is named with who and why.
    let mut steps = vec![sched()];
    steps.extend(step_keys("jB"));
    let (buf, asked) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, setup);
    assert!(asked.is_empty());
    assert!(
        text(&buf).contains("gpu02: drained by bob") && text(&buf).contains("RMA 5521"),
        "{}",
        text(&buf)
    );
}

#[test]
fn burn_in_is_confirmed_shows_progress_and_offers_to_drain_a_failure() {
    use fleetop::model::bench::BenchUpdate;
    use fleetop::model::bench::{BenchResult, Verdict};
    let setup = |app: &mut App| {
        app.bench_enabled = true;
        app.actions_enabled = true;
    };
    // Any key but y cancels.
    let steps = vec![Step::Do(key(KeyCode::Char('B'))), Step::Do(key(KeyCode::Enter))];
    let (buf, asked) = drive_steps(theme(), fleet_updates(3, 8, 30), (100, 30), steps, setup);
    assert!(asked.is_empty() && text(&buf).contains("burn-in cancelled"));

    let result = |name: &str, verdict: Verdict, reason: Option<&str>| BenchResult {
        name: name.into(),
        gpu: Some(2),
        peer: None,
        value: Some(812.0),
        unit: Some("GB/s".into()),
        expected_min: Some(1000.0),
        expected_source: None,
        verdict,
        reason: reason.map(String::from),
    };
    let ev = |node: usize, event: BenchUpdate| Step::Arrive(Update::Bench { node, event });
    let mut steps: Vec<Step> = keys(" ").into_iter().map(Step::Do).collect(); // mark gpu01
    steps.extend(keys(" ").into_iter().map(Step::Do)); // and gpu02
    steps.extend([Step::Do(key(KeyCode::Char('B'))), Step::Do(key(KeyCode::Char('y')))]);
    steps.extend([
        ev(0, BenchUpdate::Started { suite: "quick".into() }),
        ev(1, BenchUpdate::Started { suite: "quick".into() }),
        ev(
            0,
            BenchUpdate::Progress {
                step: "GPU 2 HBM copy".into(),
                done: 5,
                total: 10,
            },
        ),
        ev(
            1,
            BenchUpdate::Result(result(
                "hbm_d2d",
                Verdict::Fail,
                Some("812.0 GB/s is below the minimum 1000.0"),
            )),
        ),
        ev(1, BenchUpdate::Finished { error: None }),
    ]);
    let (buf, asked) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, setup);
    let [Request::Bench { nodes, .. }] = asked.as_slice() else {
        panic!("one suite starts: {asked:?}")
    };
    assert_eq!(nodes, &[0, 1]);
    let screen = text(&buf);
    assert!(screen.contains("burn-in · 2 nodes"), "{screen}");
    assert!(
        screen.contains("running") && screen.contains(" 5/10 ") && screen.contains("GPU 2 HBM copy"),
        "{screen}"
    );
    assert!(
        screen.contains("FAILED") && screen.contains("hbm_d2d GPU 2: 812.0 GB/s is below the minimum 1000.0"),
        "{screen}"
    );

    // D on the failed node: a drain with the failure as its reason.
    let mut steps2: Vec<Step> = keys("  ").into_iter().map(Step::Do).collect();
    steps2.extend([Step::Do(key(KeyCode::Char('B'))), Step::Do(key(KeyCode::Char('y')))]);
    steps2.extend([
        ev(1, BenchUpdate::Started { suite: "quick".into() }),
        ev(
            1,
            BenchUpdate::Result(result(
                "hbm_d2d",
                Verdict::Fail,
                Some("812.0 GB/s is below the minimum 1000.0"),
            )),
        ),
        ev(1, BenchUpdate::Finished { error: None }),
    ]);
    steps2.extend([Step::Do(key(KeyCode::Char('D'))), Step::Do(key(KeyCode::Enter))]);
    let (buf, _) = drive_steps(theme(), fleet_updates(3, 8, 30), (140, 30), steps2, setup);
    let screen = text(&buf);
    assert!(
        screen.contains("NodeName=gpu02 State=DRAIN 'Reason=fleetop: burn-in quick failed: hbm_d2d GPU 2"),
        "{screen}"
    );
}

#[test]
fn x_asks_then_cancels_a_running_burn_in_which_ends_cancelled_not_failed() {
    use fleetop::model::bench::BenchUpdate;
    let setup = |app: &mut App| {
        app.bench_enabled = true;
        app.actions_enabled = true;
    };
    let ev = |event: BenchUpdate| Step::Arrive(Update::Bench { node: 0, event });
    let start = || {
        vec![
            Step::Do(key(KeyCode::Char('B'))),
            Step::Do(key(KeyCode::Char('y'))),
            ev(BenchUpdate::Started { suite: "quick".into() }),
            ev(BenchUpdate::Progress {
                step: "host memory copy".into(),
                done: 1,
                total: 9,
            }),
        ]
    };
    // x asks first: any key but y lets the suite run.
    let mut steps = start();
    steps.extend([Step::Do(key(KeyCode::Char('x'))), Step::Do(key(KeyCode::Char('n')))]);
    let (buf, asked) = drive_steps(theme(), fleet_updates(2, 8, 30), (120, 30), steps, setup);
    assert!(matches!(asked.as_slice(), [Request::Bench { .. }]), "{asked:?}");
    assert!(text(&buf).contains("running"), "{}", text(&buf));

    let mut steps = start();
    steps.extend([
        Step::Do(key(KeyCode::Char('x'))),
        Step::Do(key(KeyCode::Char('y'))),
        ev(BenchUpdate::Cancelled),
        // A cancelled run is not a failure: nothing to drain, no flag.
        Step::Do(key(KeyCode::Char('D'))),
    ]);
    let (buf, asked) = drive_steps(theme(), fleet_updates(2, 8, 30), (120, 30), steps, setup);
    assert!(
        matches!(asked.as_slice(), [Request::Bench { .. }, Request::CancelBench]),
        "{asked:?}"
    );
    let screen = text(&buf);
    assert!(screen.contains("cancelled") && !screen.contains("FAILED"), "{screen}");
    assert!(screen.contains("nothing to drain for"), "{screen}");
    assert!(!screen.contains("burnin_failed"), "{screen}");
}

/// A finished suite on node 0 with these results (GPU 2, in GB/s).
fn bench_run(results: Vec<(&str, fleetop::model::bench::Verdict)>) -> Vec<Step> {
    use fleetop::model::bench::{BenchResult, BenchUpdate, Verdict};
    let ev = |event: BenchUpdate| Step::Arrive(Update::Bench { node: 0, event });
    let mut steps = vec![ev(BenchUpdate::Started { suite: "quick".into() })];
    for (name, verdict) in results {
        let measured = verdict != Verdict::Skipped;
        steps.push(ev(BenchUpdate::Result(BenchResult {
            name: name.into(),
            gpu: measured.then_some(2),
            peer: None,
            value: measured.then_some(812.0),
            unit: measured.then(|| "GB/s".into()),
            expected_min: Some(1000.0),
            expected_source: None,
            verdict,
            reason: Some(
                if measured {
                    "below the minimum 1000.0"
                } else {
                    "no CUDA driver"
                }
                .into(),
            ),
        })));
    }
    steps.push(ev(BenchUpdate::Finished { error: None }));
    steps
}

#[test]
fn a_burn_in_that_skipped_every_gpu_check_is_incomplete_not_passed() {
    use fleetop::model::bench::Verdict;
    let mut steps = bench_run(vec![
        ("host_memcpy", Verdict::Pass),
        ("hbm_d2d", Verdict::Skipped),
        ("gemm_tflops", Verdict::Skipped),
    ]);
    steps.extend([
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
    ]);
    let (buf, _) = drive_steps(theme(), fleet_updates(2, 8, 30), (120, 30), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("incomplete") && !screen.contains("passed"), "{screen}");
    assert!(screen.contains("no GPU check ran"), "{screen}");
}

#[test]
fn a_failed_burn_in_is_an_alert_a_filter_match_and_can_be_cleared() {
    use fleetop::model::bench::Verdict;
    let failed = || bench_run(vec![("hbm_d2d", Verdict::Fail)]);
    // In the alerts screen, with the failure.
    let mut steps = failed();
    steps.push(Step::Do(key(KeyCode::Tab)));
    let (buf, _) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, |_| {});
    let screen = text(&buf);
    assert!(
        screen.contains("burnin_failed") && screen.contains("burn-in quick failed: hbm_d2d GPU 2"),
        "{screen}"
    );
    // The filter finds the node, and only it.
    let mut steps = failed();
    steps.push(Step::Do(key(KeyCode::Char('/'))));
    steps.extend(keys("burnin_failed").into_iter().map(Step::Do));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("gpu01") && !screen.contains("gpu02"), "{screen}");
    // `c` on the bench screen clears it.
    let mut steps = failed();
    steps.extend([
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
    ]);
    steps.push(Step::Do(key(KeyCode::Char('c'))));
    // With no run left, the bench screen leaves the cycle: Tab goes to alerts.
    steps.push(Step::Do(key(KeyCode::Tab)));
    let (buf, _) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, |_| {});
    let screen = text(&buf);
    let active = |screen: &str| {
        screen
            .lines()
            .any(|l| l.starts_with("CRIT") && l.contains("burnin_failed"))
    };
    assert!(screen.contains("alerts") && !active(&screen), "{screen}");
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("gone") && l.contains("burnin_failed")),
        "{screen}"
    );
    // So does a later run that passes.
    let mut steps = failed();
    steps.extend(bench_run(vec![("hbm_d2d", Verdict::Pass)]));
    steps.push(Step::Do(key(KeyCode::Tab)));
    let (buf, _) = drive_steps(theme(), fleet_updates(3, 8, 30), (120, 30), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("alerts") && !active(&screen), "{screen}");
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

#[test]
fn a_bench_progress_past_its_total_draws_a_full_bar_not_a_panic() {
    use fleetop::model::bench::BenchUpdate;
    let ev = |event: BenchUpdate| Step::Arrive(Update::Bench { node: 0, event });
    let steps = vec![
        ev(BenchUpdate::Started { suite: "quick".into() }),
        ev(BenchUpdate::Progress {
            step: "an agent that miscounts".into(),
            done: 50,
            total: 10,
        }),
        // Heatmap -> alerts -> detail -> the bench screen.
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
    ];
    let setup = |app: &mut App| app.bench_enabled = true;
    let (buf, _) = drive_steps(theme(), fleet_updates(2, 8, 30), (120, 30), steps, setup);
    let screen = text(&buf);
    assert!(screen.contains(&"█".repeat(20)) && screen.contains("50/10"), "{screen}");
}

/// `nodes` simulated nodes of 8 GPUs whose GPU 2 is in MIG mode: no
/// whole-GPU utilization, two instances (30 of 40 GiB used, 0 of 20; GPM
/// SM activity 40 % on the first, none on the second).
fn mig_fleet(nodes: u32) -> (Vec<Target>, Vec<Update>) {
    use fleetop::model::sample::{Gpm, MigReading};
    let (targets, mut updates) = fleet_updates(nodes, 8, 30);
    for u in &mut updates {
        if let Update::Node {
            event: Event::Sample(s),
            ..
        } = u
        {
            let g = &mut s.gpus[2];
            g.util_pct = None;
            g.mig = vec![
                MigReading {
                    gpu_instance_id: 1,
                    profile: "3g.40gb".into(),
                    uuid: "MIG-a".into(),
                    mem_used_bytes: Some(30 << 30),
                    mem_total_bytes: Some(40 << 30),
                    gpm: Some(Gpm {
                        sm_active_pct: 40.0,
                        sm_occupancy_pct: 20.0,
                        tensor_active_pct: 10.0,
                        dram_bw_pct: 5.0,
                    }),
                    util_pct: None,
                },
                MigReading {
                    gpu_instance_id: 2,
                    profile: "2g.20gb".into(),
                    uuid: "MIG-b".into(),
                    mem_used_bytes: Some(0),
                    mem_total_bytes: Some(20 << 30),
                    gpm: None,
                    util_pct: None,
                },
            ];
        }
    }
    (targets, updates)
}

#[test]
fn node_detail_lists_a_mig_gpus_instances_under_it() {
    let buf = drive(theme(), mig_fleet(1), (120, 40), vec![key(KeyCode::Enter)]);
    let screen = text(&buf);
    let lines: Vec<&str> = screen.lines().collect();
    let gpu2 = lines
        .iter()
        .position(|l| l.starts_with("2 "))
        .unwrap_or_else(|| panic!("GPU 2's row:\n{screen}"));
    assert!(
        lines[gpu2].contains(" -%"),
        "no utilization in MIG mode: {}",
        lines[gpu2]
    );
    let gi1 = lines[gpu2 + 1].split_whitespace().collect::<Vec<_>>();
    // The instance's own GPM SM activity, "-" without.
    assert_eq!(gi1, ["gi1", "30.0/40", "3g.40gb", "40%"], "{screen}");
    let gi2 = lines[gpu2 + 2].split_whitespace().collect::<Vec<_>>();
    assert_eq!(gi2, ["gi2", "0.0/20", "2g.20gb", "-"], "{screen}");
    assert!(lines[gpu2 + 3].starts_with("3 "), "GPU 3 follows: {screen}");
}

/// Under "sort by metric" a live fleet re-sorts as samples arrive: the
/// cursor stays on the node it was on, so Enter (and space, D, B) act on
/// exactly that node, never on whatever moved into its row.
#[test]
fn the_selection_follows_the_node_when_the_list_re_sorts_under_it() {
    let fleet = || fleet_updates(6, 8, 30);
    // Sort by utilization, cursor two rows down.
    let keys_sjj = || keys("sjj").into_iter().map(Step::Do).collect::<Vec<_>>();
    let (buf, _) = drive_steps(theme(), fleet(), (120, 30), keys_sjj(), |_| {});
    let screen = text(&buf);
    let sel_bg = theme().selected.bg.unwrap_or(Color::Reset);
    let rows: Vec<(u16, String)> = screen
        .lines()
        .enumerate()
        .skip(3)
        .filter_map(|(y, l)| {
            let name = l.split_whitespace().next().filter(|w| w.starts_with("gpu"))?;
            Some((y as u16, name.to_string()))
        })
        .collect();
    let top = rows[0].1.clone();
    let (sel_y, chosen) = rows
        .iter()
        .find(|(y, _)| buf[(2, *y)].bg == sel_bg)
        .cloned()
        .expect("a selected row");
    assert!(sel_y > rows[0].0, "the cursor is below the top row: {screen}");
    // The top node's GPUs go idle: it drops to the bottom, and every row
    // below it moves up one.
    let (targets, updates) = fleet();
    let top_index = targets.iter().position(|t| t.name == top).expect("top node");
    let mut idle = updates
        .iter()
        .rev()
        .find_map(|u| match u {
            Update::Node {
                node,
                event: Event::Sample(s),
            } if *node == top_index => Some(s.clone()),
            _ => None,
        })
        .expect("a sample of the top node");
    idle.seq += 1;
    idle.time_ms += 1;
    for g in &mut idle.gpus {
        g.util_pct = Some(0);
    }
    // Sort, move, then the re-sort arrives, then `then`.
    let steps = |then: Option<KeyCode>| {
        let mut v = keys_sjj();
        v.push(Step::Arrive(Update::Node {
            node: top_index,
            event: Event::Sample(idle.clone()),
        }));
        v.extend(then.map(|k| Step::Do(key(k))));
        v
    };
    let run = |then| {
        drive_steps(
            theme(),
            (targets.clone(), updates.clone()),
            (120, 30),
            steps(then),
            |_| {},
        )
        .0
    };
    // The re-sorted list is drawn with the cursor still on the chosen node.
    let buf = run(None);
    let screen = text(&buf);
    let (x, y) = find(&buf, &chosen).expect("the chosen node is shown");
    assert_eq!(buf[(x, y)].bg, sel_bg, "{top} {chosen} {screen}");
    let at = |name: &str| {
        screen
            .lines()
            .skip(3)
            .position(|l| l.split_whitespace().next() == Some(name))
    };
    let was = usize::from(sel_y) - 3;
    assert_eq!(at(&chosen), Some(was - 1), "the chosen node moved up a row: {screen}");
    // Enter opens it, and space marks it, not the node now on its old row.
    let screen = text(&run(Some(KeyCode::Enter)));
    let title = screen.lines().nth(2).unwrap_or_default();
    assert!(
        title.contains(&format!(" {chosen} ")),
        "opened {title:?}, chose {chosen}"
    );
    let screen = text(&run(Some(KeyCode::Char(' '))));
    let marked = screen.lines().find(|l| l.contains('●')).unwrap_or_default();
    assert!(marked.contains(&chosen), "marked {marked:?}, chose {chosen}");
}

#[test]
fn a_mig_gpu_gets_a_heatmap_cell_per_instance_and_a_count_when_narrow() {
    // The node's row: the cells follow the status column.
    let row = |buf: &Buffer| -> String {
        let screen = text(buf);
        let (_, y) = find(buf, "gpu01 ").unwrap_or_else(|| panic!("a node row:\n{screen}"));
        screen.lines().nth(y as usize).unwrap_or_default().to_string()
    };
    // Memory: the instances' own shares (75 %, 0 %), a cell each, 9 cells
    // for 8 GPUs, at 80x24 too.
    for size in [(120, 40), (80, 24)] {
        let buf = drive(theme(), mig_fleet(1), size, keys("m"));
        let r = row(&buf);
        assert!(r.contains("  75   0 "), "instance cells at {size:?}: {r}");
        assert!(r.chars().count() <= size.0 as usize, "{r}");
    }
    // Utilization: NVML gives none in MIG mode, per instance neither; that
    // is "-", muted, not the red of a GPU that failed to answer.
    let buf = drive(theme(), mig_fleet(1), (80, 24), vec![]);
    let r = row(&buf);
    let (x, y) = find(&buf, "   -   -").unwrap_or_else(|| panic!("two instance cells: {r}"));
    assert!(
        !buf[(x + 3, y)].modifier.contains(ratatui::style::Modifier::REVERSED),
        "{r}"
    );
    assert!(!r.contains("ERR"), "{r}");
    // GPM SM activity: each instance's own; none is "-".
    let buf = drive(theme(), mig_fleet(1), (80, 24), keys("mmmmm"));
    let r = row(&buf);
    assert!(buf_has(&buf, "SM activity (GPM)"), "{r}");
    assert!(r.contains("  40   - "), "instance GPM cells: {r}");
    // Too narrow for a cell per instance: one cell, "m2", for the two.
    let buf = drive(theme(), mig_fleet(1), (50, 24), keys("m"));
    let r = row(&buf);
    assert!(r.contains("m2"), "instance count when narrow: {r}");
}

#[test]
fn the_mean_column_and_the_legend_speak_in_units() {
    // Temperature (m m): the mean is in °C, not the scale's position in %.
    let screen = text(&drive(theme(), fleet_updates(4, 8, 60), (120, 30), keys("mm")));
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with("gpu01"))
        .unwrap_or_default();
    assert!(row.contains("°C") && !row.contains('%'), "{row}");
    assert!(screen.contains("25°C") && screen.contains("slowdown °C"), "{screen}");
    // Power (m m m): watts, and the legend says of what the % is.
    let screen = text(&drive(theme(), fleet_updates(4, 8, 60), (120, 30), keys("mmm")));
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with("gpu01"))
        .unwrap_or_default();
    assert!(row.contains('W') && !row.contains('%'), "{row}");
    assert!(screen.contains("100% of the power limit"), "{screen}");
}

#[test]
fn a_node_with_a_critical_flag_is_not_ok_and_the_filters_say_health() {
    // The status column says the worst severity of a reachable node.
    let screen = text(&drive(theme(), fleet_updates(16, 8, 600), (120, 30), vec![]));
    let word = |name: &str| {
        let row = screen
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default();
        row.split_whitespace().nth(1).unwrap_or_default().to_string()
    };
    let crit_rows = screen
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("crit"))
        .count();
    assert!(crit_rows > 0, "{screen}");
    let lost = screen
        .lines()
        .skip(3)
        .find(|l| l.contains("gpu_lost"))
        .expect("a node with a lost GPU");
    let lost_name = lost.split_whitespace().next().unwrap_or_default().to_string();
    assert_eq!(word(&lost_name), "crit", "{screen}");
    // /ok: healthy nodes only; /crit: the critical ones.
    let filtered = |f: &str| {
        let mut a = keys(&format!("/{f}"));
        a.push(key(KeyCode::Enter));
        text(&drive(theme(), fleet_updates(16, 8, 600), (120, 30), a))
    };
    let ok = filtered("ok");
    assert!(!ok.contains(&format!(" {lost_name} ")), "{ok}");
    assert!(
        // The rows (the legend names the cells' marks).
        ok.lines()
            .skip(3)
            .filter(|l| l.trim_start().starts_with("gpu"))
            .all(|l| !l.contains(" crit ") && !l.contains(" warn ")),
        "{ok}"
    );
    let crit = filtered("crit");
    assert!(
        crit.contains(&format!("{crit_rows} of 16 nodes")) && crit.contains(&lost_name),
        "{crit}"
    );
}

/// The colour a cell shows as its background (its fg when reversed).
fn shown_bg(c: &ratatui::buffer::Cell) -> Color {
    if c.modifier.contains(ratatui::style::Modifier::REVERSED) {
        c.fg
    } else {
        c.bg
    }
}

#[test]
fn on_the_wall_red_means_crit_and_nothing_else_in_every_theme_at_256_and_16_colours() {
    for name in Theme::SHIPPED.into_iter().filter(|n| *n != "mono") {
        for depth in [ColorDepth::Ansi256, ColorDepth::Ansi16] {
            let t = Theme::load(name, None, depth).expect("theme");
            let crit = shown_bg(&{
                let mut c = ratatui::buffer::Cell::default();
                c.set_style(t.crit_block());
                c
            });
            let buf = drive(t.clone(), fleet_updates(300, 8, 30), (80, 24), vec![]);
            let (mut crit_cells, mut heat_cells) = (0, 0);
            // The wall: below the header and the block's border, above the
            // status line and the legend.
            for y in 3..21 {
                for x in 0..80 {
                    let c = &buf[(x, y)];
                    let starts_cell = x == 0 || shown_bg(&buf[(x - 1, y)]) != shown_bg(c) || c.symbol() != " ";
                    if shown_bg(c) == crit {
                        if starts_cell && c.symbol() != " " {
                            assert_eq!(c.symbol(), "!", "{name} at {depth}: crit colour at {x},{y}");
                            crit_cells += 1;
                        }
                    } else if c.symbol() == " " && c.bg != Color::Reset && c.bg != t.base.bg.unwrap_or(Color::Reset) {
                        heat_cells += 1;
                    }
                }
            }
            assert!(
                crit_cells > 0 && heat_cells > 100,
                "{name} at {depth}: {crit_cells} crit, {heat_cells} heat"
            );
        }
    }
}

#[test]
fn a_crit_gpu_cell_is_drawn_in_the_crit_colour_not_the_heat_of_its_number() {
    let t = Theme::load("default", None, ColorDepth::Ansi256).expect("theme");
    let crit = shown_bg(&{
        let mut c = ratatui::buffer::Cell::default();
        c.set_style(t.crit_block());
        c
    });
    let buf = drive(t.clone(), fleet_updates(16, 8, 60), (120, 30), vec![]);
    let (mut marked, mut in_crit) = (0, 0);
    let rows: Vec<u16> = text(&buf)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("  gpu"))
        .map(|(y, _)| y as u16)
        .collect();
    for &y in &rows {
        for x in 0..buf.area.width {
            if buf[(x, y)].symbol() == "!" {
                marked += 1;
                in_crit += usize::from(shown_bg(&buf[(x, y)]) == crit);
            }
        }
    }
    assert!(marked > 0, "{}", text(&buf));
    assert_eq!(in_crit, marked, "every `!` cell in the crit colour");
}

#[test]
fn without_colour_the_wall_glyphs_are_distinct() {
    let mono = Theme::load("default", None, ColorDepth::Mono).expect("mono");
    let screen = text(&drive(mono, fleet_updates(300, 8, 30), (80, 24), vec![]));
    let wall: String = screen.lines().skip(3).take(18).collect();
    // A warn node is `*`, never `•` (which NO_COLOR's lowest shade `·` resembles).
    assert!(
        wall.contains('*') && wall.contains('!') && !wall.contains('•'),
        "{screen}"
    );
    assert!(screen.contains("! crit  * warn"), "{screen}");
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
fn at_80_columns_node_detail_keeps_flags_ecc_xid_and_a_lost_gpu_says_so_whole() {
    let mut steps: Vec<Action> = keys("/gpu_lost");
    steps.push(key(KeyCode::Enter));
    steps.push(key(KeyCode::Enter));
    let buf = drive(theme(), fleet_updates(16, 8, 60), (80, 24), steps);
    let screen = text(&buf);
    let header = screen.lines().find(|l| l.starts_with("GPU")).unwrap_or_default();
    for col in ["util", "mem GiB", "temp", "ECC", "XID", "flags"] {
        assert!(header.contains(col), "{col} in {header}");
    }
    let lost = screen
        .lines()
        .find(|l| l.starts_with(char::is_numeric) && l.contains("gpu_lost"))
        .unwrap_or_default();
    // The reason in full in the row, and the flag (short) in the flags column.
    assert!(lost.trim_end().ends_with("lost"), "{screen}");
    // The flag's full name and its action above the table.
    assert!(
        screen
            .lines()
            .any(|l| l.contains("gpu_lost gpu") && l.contains("reboot_node")),
        "{screen}"
    );
}

#[test]
fn an_alert_says_what_it_means_what_to_do_and_where_the_runbook_is() {
    for size in [(80, 24), (160, 40)] {
        let buf = drive(theme(), fleet_updates(16, 8, 600), size, vec![key(KeyCode::Tab)]);
        let screen = text(&buf);
        let header = screen
            .lines()
            .find(|l| l.trim_start().starts_with("sev"))
            .unwrap_or_default();
        assert!(header.contains("action"), "{header}");
        // Every row names its action, from the catalog's own words.
        let names: Vec<&str> = fleetop_catalog::Action::ALL.iter().map(|a| a.name()).collect();
        let rows: Vec<&str> = screen
            .lines()
            .filter(|l| ["CRIT ", "WARN ", "INFO "].iter().any(|s| l.starts_with(s)))
            .collect();
        assert!(!rows.is_empty(), "{screen}");
        for r in &rows {
            assert!(names.iter().any(|n| r.contains(&format!(" {n} "))), "no action in {r}");
        }
        // The selected alert's entry in full under the list.
        for label in ["means ", "do now ", "runbook docs/faults.md#"] {
            assert!(screen.contains(label), "{label} at {size:?}:\n{screen}");
        }
    }
}

#[test]
fn node_detail_says_the_most_urgent_action_and_the_xid_codes() {
    // The node whose GPU fell off the bus (XID 79), with the ten minutes of
    // history the XID happened in: the diagnosis, and the code beside the
    // reason on the lost GPU's row.
    let open = |filter: &str| {
        let mut steps: Vec<Action> = keys(filter);
        steps.push(key(KeyCode::Enter));
        steps.push(key(KeyCode::Enter));
        drive(theme(), fleet_updates(16, 8, 600), (80, 24), steps)
    };
    let screen = text(&open("/gpu_lost"));
    let diag = screen.lines().find(|l| l.contains("do now ")).unwrap_or_default();
    assert!(diag.contains("do now drain, then reboot the node: "), "{screen}");
    assert!(screen.contains("xid gpu"), "the xid flag listed: {screen}");
    assert!(screen.contains("gpu_lost · XID 79"), "{screen}");
    // The node with an application XID (94) on a GPU that answers: the code
    // in the XID column in the flag's (warn) style; a healthy GPU's "-" is
    // painted nothing.
    let buf = open("/ecc_uncorrected");
    let screen = text(&buf);
    let header = screen.lines().position(|l| l.starts_with("GPU")).expect("table");
    let xid_x = screen
        .lines()
        .nth(header)
        .and_then(|l| l.find("XID"))
        .expect("XID column") as u16;
    let rows: Vec<(u16, String)> = (header + 1..header + 9)
        .map(|y| {
            let cell: String = (xid_x..xid_x + 5)
                .map(|x| buf[(x, y as u16)].symbol().to_string())
                .collect();
            (y as u16, cell.trim().to_string())
        })
        .collect();
    assert!(rows.iter().any(|(_, c)| c == "94"), "{rows:?}\n{screen}");
    let t = theme();
    for (y, c) in &rows {
        let fg = buf[(xid_x, *y)].style().fg;
        match c.as_str() {
            "94" => assert_eq!(fg, t.warn.fg, "row {y}"),
            _ => assert_ne!(fg, t.crit.fg, "row {y}: {c:?} painted crit"),
        }
    }
}

/// The node rows of the heatmap: (name, mean column) in screen order.
fn rows_with_mean(buf: &Buffer) -> Vec<(String, Option<f64>)> {
    text(buf)
        .lines()
        .filter_map(|l| {
            let name = l
                .split_whitespace()
                .next()
                .filter(|w| w.starts_with("gpu") && w.len() == 5)?;
            let mean = l
                .split_whitespace()
                .find(|w| w.ends_with('%'))
                .and_then(|w| w.trim_end_matches('%').parse().ok());
            Some((name.to_string(), mean))
        })
        .collect()
}

#[test]
fn s_sorts_by_the_metric_and_capital_s_reverses_it_lowest_utilization_first() {
    let rows = rows_with_mean(&drive(theme(), fleet_updates(16, 8, 60), (120, 40), keys("s")));
    let down: Vec<f64> = rows.iter().filter_map(|r| r.1).collect();
    assert!(down.len() > 10 && down.windows(2).all(|w| w[0] >= w[1]), "{rows:?}");
    let rows = rows_with_mean(&drive(theme(), fleet_updates(16, 8, 60), (120, 40), keys("sS")));
    let up: Vec<f64> = rows.iter().filter_map(|r| r.1).collect();
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "{rows:?}");
    // The idle node (held, unused) is first; nodes without a mean stay last.
    assert!(up[0] < 10.0, "{rows:?}");
    let first_missing = rows.iter().position(|r| r.1.is_none()).unwrap_or(rows.len());
    assert!(rows[first_missing..].iter().all(|r| r.1.is_none()), "{rows:?}");
}

/// The name of the node under the cursor (drawn selected) on the heatmap.
fn cursor_node(buf: &Buffer, t: &Theme) -> Option<String> {
    let sel = t.selected.bg?;
    (0..buf.area.height).find_map(|y| {
        let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_string()).collect();
        let name = row.split_whitespace().next()?;
        let x = row.find(name)? as u16;
        (buf[(x, y)].bg == sel && name.starts_with("gpu")).then(|| name.to_string())
    })
}

#[test]
fn n_and_capital_n_jump_to_the_next_and_previous_flagged_node() {
    let t = theme();
    let fleet = || fleet_updates(16, 8, 60);
    // The nodes flagged warn or worse, and the crit ones, in list order
    // (sort by name), from the filter. Info flags (idle, underused) are
    // not stops.
    let shown = |f: &str| -> Vec<String> {
        let mut steps = keys(&format!("/{f}"));
        steps.push(key(KeyCode::Enter));
        rows_with_mean(&drive(t.clone(), fleet(), (120, 40), steps))
            .into_iter()
            .map(|r| r.0)
            .collect()
    };
    let flagged = shown("crit,warn");
    let crit = shown("crit");
    assert!(flagged.len() > crit.len() && crit.len() >= 3, "{flagged:?} {crit:?}");
    let at = |k: &str| cursor_node(&drive(t.clone(), fleet(), (120, 40), keys(k)), &t);
    let after = |list: &[String], nth: usize| list.iter().filter(|n| n.as_str() > "gpu01").nth(nth).cloned();
    // From gpu01 (the first row), n goes to the next flagged node after it.
    assert_eq!(at("n"), after(&flagged, 0));
    assert_eq!(at("nn"), after(&flagged, 1));
    // N from the top wraps to the last flagged node.
    assert_eq!(at("N"), flagged.last().cloned());
    assert_eq!(at("c"), after(&crit, 0));
    assert_eq!(at("cc"), after(&crit, 1));
    assert_eq!(at("C"), crit.last().cloned());
    // In node detail, n means the same and opens that node.
    let title = |k: &str| {
        let mut a = vec![key(KeyCode::Enter)];
        a.extend(keys(k));
        let screen = text(&drive(t.clone(), fleet(), (120, 40), a));
        screen
            .lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().next())
            .map(String::from)
    };
    assert_eq!(title("n"), after(&flagged, 0));
    assert_eq!(title("c"), after(&crit, 0));
    assert_eq!(title("N"), flagged.last().cloned());
}

#[test]
fn the_filter_applies_as_typed_matches_any_term_ignores_case_and_ctrl_u_clears() {
    let t = theme();
    let names = |steps: Vec<Action>| -> Vec<String> {
        rows_with_mean(&drive(t.clone(), fleet_updates(16, 8, 60), (120, 40), steps))
            .into_iter()
            .map(|r| r.0)
            .collect()
    };
    // Not yet confirmed with Enter: the list already follows.
    assert_eq!(names(keys("/GPU0[1-2]")), ["gpu01", "gpu02"]);
    // Any term: a name or a flag kind.
    let mut steps = keys("/gpu05,hot");
    steps.push(key(KeyCode::Enter));
    let either = names(steps);
    let mut steps = keys("/hot");
    steps.push(key(KeyCode::Enter));
    let hot = names(steps);
    assert!(!hot.is_empty() && !hot.contains(&"gpu05".to_string()), "{hot:?}");
    let mut want = hot.clone();
    want.push("gpu05".into());
    want.sort();
    assert_eq!(either, want);
    // Ctrl-U empties the line (all nodes again); Esc puts back the filter before `/`.
    let mut steps = keys("/gpu01");
    steps.push(Action::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)));
    assert_eq!(names(steps).len(), 16);
    let mut steps = keys("/gpu01");
    steps.push(key(KeyCode::Enter));
    steps.extend(keys("/gpu02"));
    steps.push(key(KeyCode::Esc));
    assert_eq!(names(steps), ["gpu01"]);
}

#[test]
fn a_marks_what_the_filter_shows_ctrl_space_a_range_and_y_copies_a_hostlist() {
    use std::sync::{Arc, Mutex};
    let copied = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = copied.clone();
    let setup = move |app: &mut App| {
        app.clipboard_sink = Some(Box::new(move |s: &str| sink.lock().expect("lock").push(s.to_string())));
    };
    let mut steps: Vec<Step> = keys("/gpu0[2-4]").into_iter().map(Step::Do).collect();
    steps.push(Step::Do(key(KeyCode::Enter)));
    steps.extend(keys("a").into_iter().map(Step::Do));
    steps.push(Step::Do(key(KeyCode::Esc))); // the filter goes; the marks stay
    steps.extend(keys("y").into_iter().map(Step::Do));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, setup.clone());
    assert_eq!(*copied.lock().expect("lock"), ["gpu[02-04]"]);
    assert!(text(&buf).contains("copied gpu[02-04]"), "{}", text(&buf));

    // A range: mark gpu01, move to gpu05, Ctrl-Space marks gpu01..gpu05.
    copied.lock().expect("lock").clear();
    let mut steps: Vec<Step> = keys(" jjj").into_iter().map(Step::Do).collect();
    steps.push(Step::Do(Action::Key(KeyEvent::new(
        KeyCode::Char(' '),
        KeyModifiers::CONTROL,
    ))));
    steps.extend(keys("y").into_iter().map(Step::Do));
    drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, setup);
    assert_eq!(*copied.lock().expect("lock"), ["gpu[01-05]"]);
}

#[test]
fn the_header_has_a_clock_and_read_only_says_so() {
    let setup = |app: &mut App| app.read_only = true;
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 30), (80, 24), vec![], setup);
    let header = text(&buf).lines().next().unwrap_or_default().to_string();
    assert!(header.contains("00:00:00Z") && header.contains("READ-ONLY"), "{header}");
    let header = text(&drive(theme(), fleet_updates(4, 8, 30), (80, 24), vec![]));
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
fn enter_on_the_bench_screen_shows_each_check_with_its_figure_and_floor() {
    use fleetop::model::bench::Verdict;
    let mut steps = bench_run(vec![("hbm_d2d", Verdict::Fail), ("gemm_tflops", Verdict::Skipped)]);
    steps.extend([
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Tab)),
    ]);
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(2, 8, 30), (120, 30), steps, |_| {});
    let screen = text(&buf);
    let hbm = screen
        .lines()
        .find(|l| l.trim_start().starts_with("hbm_d2d"))
        .unwrap_or_default();
    assert!(
        hbm.contains("812.0 GB/s")
            && hbm.contains("1000.0")
            && hbm.contains("fail")
            && hbm.contains("below the minimum"),
        "{screen}"
    );
    let gemm = screen
        .lines()
        .find(|l| l.trim_start().starts_with("gemm_tflops"))
        .unwrap_or_default();
    assert!(gemm.contains("skipped") && gemm.contains("no CUDA driver"), "{screen}");
}

#[test]
fn the_idle_gpus_of_one_job_are_one_alert_row_and_z_unfolds_them() {
    // The demo's idle node: a job holds all 8 GPUs at 0%.
    let buf = drive(theme(), fleet_updates(16, 8, 660), (120, 40), vec![key(KeyCode::Tab)]);
    let screen = text(&buf);
    let idle: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("WARN") && l.contains(" idle "))
        .collect();
    assert_eq!(idle.len(), 1, "{screen}");
    assert!(
        idle[0].contains("8 GPUs") && idle[0].contains(": 8 GPUs idle"),
        "{screen}"
    );
    let buf = drive(
        theme(),
        fleet_updates(16, 8, 660),
        (120, 40),
        vec![key(KeyCode::Tab), key(KeyCode::Char('z'))],
    );
    let screen = text(&buf);
    assert_eq!(
        screen
            .lines()
            .filter(|l| l.starts_with("WARN") && l.contains(" idle "))
            .count(),
        8,
        "{screen}"
    );
}

#[test]
fn a_acknowledges_an_alert_and_a_number_silences_it_both_dimmed_last_and_kept() {
    use fleetop::model::flag::Silence;
    let steps = vec![
        Step::Do(key(KeyCode::Tab)),
        Step::Do(key(KeyCode::Char('a'))), // the first alert: acknowledged
        Step::Do(key(KeyCode::Char('4'))), // the next first: silenced 4 h
    ];
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, |_| {});
    let screen = text(&buf);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| {
            ["CRIT", "WARN", "INFO", "ack", "quiet"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    // The two quiet ones go after every other active alert, keep their
    // severity, say why they are quiet and until when, and are not
    // counted as active.
    let n = rows.len();
    assert!(
        n > 4 && rows[n - 2].starts_with("CRIT") && rows[n - 1].starts_with("CRIT"),
        "{screen}"
    );
    assert!(rows[n - 2].contains(" acked · "), "{screen}");
    assert!(rows[n - 1].contains(" silenced until 04:00Z · "), "{screen}");
    assert!(
        screen.contains(&format!(" {} active, 2 acked/silenced,", n - 2)),
        "{screen}"
    );
    // Each was handed to ops to keep and log: the whole list, and the one made.
    let made: Vec<&Silence> = asked
        .iter()
        .filter_map(|r| match r {
            Request::Silences { made, .. } => Some(made),
            _ => None,
        })
        .collect();
    assert_eq!(made.len(), 2, "{asked:?}");
    assert!(made[0].ack.is_some() && made[0].until_ms.is_none());
    assert_eq!(made[1].until_ms, Some(NOW + 4 * 3_600_000));
    let Some(Request::Silences { all, .. }) = asked.last() else {
        panic!()
    };
    assert_eq!(all.len(), 2);
}

#[test]
fn the_history_has_a_time_axis_and_z_zooms_between_one_minute_ten_and_all() {
    let open = || vec![key(KeyCode::Enter)];
    let axis = |buf: &Buffer| {
        text(buf)
            .lines()
            .find(|l| l.starts_with("GPU 0 ·"))
            .unwrap_or_default()
            .to_string()
    };
    let fleet = || fleet_updates(4, 8, 600);
    let ten = axis(&drive(theme(), fleet(), (120, 40), open()));
    assert!(
        ten.contains("10 min") && ten.contains("-9m") && ten.contains("now"),
        "{ten}"
    );
    let mut steps = open();
    steps.push(key(KeyCode::Char('z')));
    let all = axis(&drive(theme(), fleet(), (120, 40), steps.clone()));
    assert!(all.contains("all") && all.contains("-9m"), "{all}");
    steps.push(key(KeyCode::Char('z')));
    let one = axis(&drive(theme(), fleet(), (120, 40), steps));
    assert!(
        one.contains("1 min") && one.contains("-59s") && one.contains("now"),
        "{one}"
    );
}

#[test]
fn ten_minutes_of_history_draw_without_gaps_and_an_old_spike_stays_on_screen() {
    // One GPU at 10% for ten minutes but for one second at 97%, eight
    // minutes ago: past the two minutes kept as they came, so it is folded
    // with four other seconds into one point. The spike must still show
    // where it was, and no column may be empty. (Columns narrower than a
    // folded point: the unit test of `history_columns`.)
    let (targets, mut updates) = fleet_updates(1, 1, 600);
    let spike_at = NOW - 480_000;
    for u in &mut updates {
        if let Update::Node {
            event: Event::Sample(s),
            ..
        } = u
        {
            let util = if s.time_ms == spike_at { 97 } else { 10 };
            s.gpus[0].util_pct = Some(util);
        }
    }
    let buf = drive(theme(), (targets, updates), (240, 60), vec![key(KeyCode::Enter)]);
    let screen = text(&buf);
    let rows: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let find = |label: &str| {
        rows.iter()
            .enumerate()
            .find_map(|(y, r)| r.iter().collect::<String>().find(label).map(|x| (y, r[..x].len())))
            .unwrap_or_else(|| panic!("no {label} row\n{screen}"))
    };
    let ((util_y, x), (mem_y, _), (axis_y, _)) = (find("util %"), find("mem %"), find("GPU 0 · 10 min"));
    let from = x + 16;
    // The data's columns end where the time axis says "now".
    let axis: String = rows[axis_y][from..].iter().collect();
    let width = axis
        .find("now")
        .map(|i| axis[..i].chars().count() + 3)
        .expect("now on the axis");
    let cells = |y: usize| -> String { rows[y][from..from + width].iter().collect() };
    let (top, bottom) = (cells(util_y), cells(mem_y.saturating_sub(2).max(util_y)));
    assert!(width >= 90, "the ten minutes fill the pane:\n{screen}");
    assert!(!bottom.contains(' '), "no column without a point: {bottom:?}\n{screen}");
    let high: Vec<usize> = (top.chars().enumerate())
        .filter(|(_, c)| *c != ' ')
        .map(|(i, _)| i)
        .collect();
    assert!(
        !high.is_empty() && high.len() <= 5,
        "the spike, and only it, reaches the top: {top:?}\n{screen}"
    );
    // Eight minutes of ten from the left edge: about a fifth of the way.
    let at = high[0] as f64 / width as f64;
    assert!(
        (0.15..0.25).contains(&at),
        "the spike at {at:.2} of the width\n{screen}"
    );
}

fn click(column: u16, row: u16) -> Action {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    Action::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    })
}

#[test]
fn a_click_selects_the_node_under_it_a_second_opens_it_and_the_wheel_moves() {
    use crossterm::event::{MouseEvent, MouseEventKind};
    let t = theme();
    let fleet = || fleet_updates(16, 8, 60);
    // Rows start under the header (2 lines) and the block's title: gpu05 is on line 7.
    let buf = drive(t.clone(), fleet(), (120, 40), vec![click(10, 7)]);
    assert_eq!(cursor_node(&buf, &t).as_deref(), Some("gpu05"), "{}", text(&buf));
    let buf = drive(t.clone(), fleet(), (120, 40), vec![click(10, 7), click(10, 7)]);
    let title = text(&buf).lines().nth(2).unwrap_or_default().to_string();
    assert!(title.trim_start().starts_with("gpu05 "), "{}", text(&buf));
    let wheel = Action::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: 10,
        row: 7,
        modifiers: KeyModifiers::NONE,
    });
    let buf = drive(t.clone(), fleet(), (120, 40), vec![wheel.clone(), wheel]);
    assert_eq!(cursor_node(&buf, &t).as_deref(), Some("gpu03"));
    // Below the last node, and on the wall, a click lands where it should.
    let buf = drive(t.clone(), fleet(), (120, 40), vec![click(10, 30)]);
    assert_eq!(
        cursor_node(&buf, &t).as_deref(),
        Some("gpu01"),
        "nothing there: no move"
    );
}

#[test]
fn a_click_while_a_dialog_is_open_changes_nothing_it_acts_on() {
    let setup = |app: &mut App| app.actions_enabled = true;
    let steps = vec![
        Step::Do(key(KeyCode::Char('R'))), // resume gpu01: the dialog lists it
        Step::Do(click(10, 7)),            // a click on gpu05 behind the dialog
    ];
    // gpu01 has lost a GPU (the demo's first scenario): `y` alone does not
    // put it back; its name, typed, does.
    let steps: Vec<Step> = steps
        .into_iter()
        .chain("gpu01".chars().map(|c| Step::Do(key(KeyCode::Char(c)))))
        .chain([Step::Do(key(KeyCode::Enter))])
        .collect();
    let (_, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, setup);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.nodes, ["gpu01"]);
}

/// Filters to `node` and opens it: the steps.
pub(crate) fn detail_of(node: &str) -> Vec<Step> {
    let mut s: Vec<Step> = keys(&format!("/{node}")).into_iter().map(Step::Do).collect();
    s.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Enter))]);
    s
}

#[test]
fn capital_k_in_node_detail_cancels_the_gpus_job_after_showing_the_exact_scancel() {
    // gpu11 is the idle node: job 4848 holds its GPUs.
    let open = || {
        let mut s = detail_of("gpu11");
        s.push(Step::Do(key(KeyCode::Char('K'))));
        s
    };
    let setup = |app: &mut App| app.actions_enabled = true;
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), open(), setup);
    let screen = text(&buf);
    assert!(
        screen.contains("confirm scancel") && screen.contains("scancel 4848"),
        "{screen}"
    );
    assert!(asked.is_empty(), "nothing runs before y: {asked:?}");
    let mut steps = open();
    steps.push(Step::Do(key(KeyCode::Char('y'))));
    let (_, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, setup);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.commands, [["scancel", "4848"]]);
    // Read-only: refused and logged, nothing asked.
    let ro = |app: &mut App| {
        app.actions_enabled = true;
        app.read_only = true;
    };
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), open(), ro);
    assert!(matches!(asked.as_slice(), [Request::Refused(..)]), "{asked:?}");
    assert!(text(&buf).contains("read-only mode: scancel is off"));
}

#[test]
fn capital_j_lists_jobs_the_idlest_first_and_enter_shows_their_nodes() {
    let buf = drive(theme(), fleet_updates(16, 8, 60), (120, 40), keys("J"));
    let screen = text(&buf);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<u64>().is_ok()))
        .collect();
    // The idle job (8 GPUs at 0% on gpu11) is the first line.
    assert!(rows.len() > 3, "{screen}");
    let first: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(first[0], "4848", "{screen}");
    assert!(
        rows[0].contains("   8 ") && rows[0].contains("0%") && rows[0].contains("gpu11"),
        "{screen}"
    );
    let mut steps = keys("J");
    steps.push(key(KeyCode::Enter));
    let names: Vec<String> = rows_with_mean(&drive(theme(), fleet_updates(16, 8, 60), (120, 40), steps))
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(names, ["gpu11"]);
}

#[test]
fn x_in_node_detail_signals_the_gpus_processes_through_the_agent_after_asking() {
    let open = || detail_of("gpu11");
    let setup = |app: &mut App| app.bench_enabled = true;
    let mut steps = open();
    steps.push(Step::Do(key(KeyCode::Char('X'))));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (140, 40), steps, setup);
    let screen = text(&buf);
    assert!(
        screen.contains("confirm signal") && screen.contains("signal=KILL"),
        "{screen}"
    );
    // Whose work ends, before the `y`: pid, owner, job, command line.
    assert!(
        screen
            .lines()
            .any(|l| l.contains("pid ") && l.contains(" job ") && l.contains("python train.py --rank")),
        "{screen}"
    );
    assert!(asked.is_empty(), "{asked:?}");
    let mut steps = open();
    steps.extend([Step::Do(key(KeyCode::Char('x'))), Step::Do(key(KeyCode::Char('y')))]);
    let (_, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (140, 40), steps, setup);
    let [Request::Signal { plan, .. }] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert!(!plan.commands.is_empty());
    assert!(
        plan.commands
            .iter()
            .all(|c| c[0] == "SignalProcess" && c.contains(&"signal=TERM".to_string()))
    );
    // Read-only: refused and logged.
    let ro = |app: &mut App| {
        app.bench_enabled = true;
        app.read_only = true;
    };
    let mut steps = open();
    steps.push(Step::Do(key(KeyCode::Char('x'))));
    let (_, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (140, 40), steps, ro);
    assert!(matches!(asked.as_slice(), [Request::Refused(..)]), "{asked:?}");
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

/// gpu01 in the partitions `debug` and `gpu`, gpu02-gpu04 in `gpu`, the
/// others unknown to the scheduler.
fn partitions_arrive() -> Step {
    use fleetop::model::sched::{SchedNode, Snapshot};
    let mut snap = Snapshot::default();
    for (name, parts) in [
        ("gpu01", vec!["debug", "gpu"]),
        ("gpu02", vec!["gpu"]),
        ("gpu03", vec!["gpu"]),
        ("gpu04", vec!["gpu"]),
    ] {
        let node = SchedNode {
            state: "mixed".into(),
            partitions: parts.into_iter().map(String::from).collect(),
            ..SchedNode::default()
        };
        snap.nodes.insert(name.into(), node);
    }
    Step::Arrive(Update::Scheduler(std::sync::Arc::new(snap)))
}

/// gpu01-04 in rack r01, gpu05-08 in r02, the rest in none.
fn with_racks(app: &mut App) {
    app.store.set_racks(|n| {
        let i: u32 = n.trim_start_matches("gpu").parse().ok()?;
        match i {
            1..=4 => Some("r01".into()),
            5..=8 => Some("r02".into()),
            _ => None,
        }
    });
}

/// The group view's rows: (group, node count, GPUs, idle, util, flags, hosts).
fn group_rows(screen: &str) -> Vec<Vec<String>> {
    screen
        .lines()
        .map(|l| l.trim_matches('│').trim())
        .filter(|l| l.contains("gpu") && l.split_whitespace().nth(1).is_some_and(|w| w.parse::<u32>().is_ok()))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

fn row<'a>(rows: &'a [Vec<String>], group: &str) -> &'a [String] {
    rows.iter()
        .find(|r| r[0] == group)
        .unwrap_or_else(|| panic!("no row {group}: {rows:?}"))
}

fn utils(rows: &[Vec<String>]) -> Vec<f64> {
    rows.iter()
        .filter_map(|r| r.iter().find(|w| w.ends_with('%'))?.trim_end_matches('%').parse().ok())
        .collect()
}

#[test]
fn b_groups_by_partition_a_node_in_two_counts_in_both_and_enter_shows_the_group() {
    let by_partition = || {
        vec![
            partitions_arrive(),
            Step::Do(key(KeyCode::Char('J'))),
            Step::Do(key(KeyCode::Char('b'))),
        ]
    };
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), by_partition(), |_| {});
    let screen = text(&buf);
    assert!(screen.contains("partitions · 3 · least busy first"), "{screen}");
    let rows = group_rows(&screen);
    assert_eq!(rows.len(), 3, "{screen}");
    // gpu01 is in debug and in gpu: counted in both.
    assert_eq!(row(&rows, "debug")[1..3], ["1", "8"], "{screen}");
    assert_eq!(row(&rows, "debug").last().map(String::as_str), Some("gpu01"));
    assert_eq!(row(&rows, "gpu")[1], "4", "{screen}");
    assert_eq!(row(&rows, "gpu").last().map(String::as_str), Some("gpu[01-04]"));
    // Nodes the scheduler puts in no partition: one group of their own.
    assert_eq!(row(&rows, "(none)")[1], "12", "{screen}");
    assert_eq!(row(&rows, "(none)").last().map(String::as_str), Some("gpu[05-16]"));
    let u = utils(&rows);
    assert!(u.windows(2).all(|w| w[0] <= w[1]), "least busy first: {u:?}");
    // Flag counts, the worst severity first.
    let gpu = row(&rows, "gpu").join(" ");
    assert!(gpu.contains(" crit") && gpu.find("crit") < gpu.find("warn"), "{screen}");
    // Enter on a group: its nodes on the heatmap.
    let at = rows.iter().position(|r| r[0] == "gpu").expect("gpu row");
    let mut steps = by_partition();
    steps.extend(std::iter::repeat_with(|| Step::Do(key(KeyCode::Char('j')))).take(at));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, |_| {});
    let names: Vec<String> = rows_with_mean(&buf).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["gpu01", "gpu02", "gpu03", "gpu04"], "{}", text(&buf));
}

#[test]
fn racks_from_the_config_group_nodes_and_those_in_none_are_in_none() {
    let by_rack = || {
        vec![
            Step::Do(key(KeyCode::Char('J'))),
            Step::Do(key(KeyCode::Char('b'))),
            Step::Do(key(KeyCode::Char('b'))),
        ]
    };
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), by_rack(), with_racks);
    let screen = text(&buf);
    assert!(screen.contains("racks · 3 · least busy first"), "{screen}");
    let rows = group_rows(&screen);
    assert_eq!(
        row(&rows, "r01").last().map(String::as_str),
        Some("gpu[01-04]"),
        "{screen}"
    );
    assert_eq!(row(&rows, "r02")[1..3], ["4", "32"], "{screen}");
    assert_eq!(row(&rows, "(none)")[1], "8", "{screen}");
    // The least busy rack's nodes on the heatmap.
    let mut steps = by_rack();
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, with_racks);
    let names: Vec<String> = rows_with_mean(&buf).into_iter().map(|r| r.0).collect();
    let want = fleetop::ingest::hostlist::expand(rows[0].last().expect("hosts")).expect("a hostlist");
    assert_eq!(names, want, "{}", text(&buf));
}

#[test]
fn the_group_view_keeps_its_meaning_in_16_colours_and_without_colour() {
    let steps = || {
        vec![
            Step::Do(key(KeyCode::Char('J'))),
            Step::Do(key(KeyCode::Char('b'))),
            Step::Do(key(KeyCode::Char('b'))),
        ]
    };
    let t16 = Theme::load("default", None, ColorDepth::Ansi16).expect("theme");
    let (buf, _) = drive_steps(t16.clone(), fleet_updates(16, 8, 60), (80, 24), steps(), with_racks);
    let screen = text(&buf);
    let y = screen.lines().position(|l| l.starts_with("r01")).expect("r01 row") as u16;
    let x = screen
        .lines()
        .nth(y as usize)
        .and_then(|l| l.find(" crit"))
        .expect("a crit count") as u16;
    assert_eq!(buf[(x - 1, y)].fg, t16.crit.fg.unwrap_or(Color::Reset), "{screen}");
    let mono = Theme::load("default", None, ColorDepth::Mono).expect("mono");
    let (buf, _) = drive_steps(mono, fleet_updates(16, 8, 60), (80, 24), steps(), with_racks);
    for y in 0..24 {
        for x in 0..80 {
            let c = &buf[(x, y)];
            assert!(
                matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset),
                "colour at {x},{y}"
            );
        }
    }
    assert!(text(&buf).contains(" crit"), "the words carry the severity");
}

#[test]
fn the_filter_matches_a_partition_or_a_rack_by_name() {
    let filter = |what: &str| {
        let mut steps = vec![partitions_arrive(), Step::Do(key(KeyCode::Char('/')))];
        steps.extend(keys(what).into_iter().map(Step::Do));
        steps.push(Step::Do(key(KeyCode::Enter)));
        let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, with_racks);
        rows_with_mean(&buf).into_iter().map(|r| r.0).collect::<Vec<_>>()
    };
    assert_eq!(filter("debug"), ["gpu01"]);
    assert_eq!(filter("R02"), ["gpu05", "gpu06", "gpu07", "gpu08"]);
    assert_eq!(filter("debug,r02"), ["gpu01", "gpu05", "gpu06", "gpu07", "gpu08"]);
}

#[test]
fn node_detail_names_the_nodes_partitions_and_rack() {
    let mut steps = vec![partitions_arrive()];
    steps.extend(detail_of("gpu01"));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, with_racks);
    let screen = text(&buf);
    assert!(screen.contains("slurm mixed in debug,gpu"), "{screen}");
    assert!(screen.contains("rack r01 · "), "{screen}");
}

/// A Slurm node as `sinfo` gives it.
pub(crate) fn sched_node(
    state: &str,
    reason: Option<&str>,
    user: Option<&str>,
    since_ms: Option<i64>,
) -> fleetop::model::sched::SchedNode {
    fleetop::model::sched::SchedNode {
        state: state.into(),
        not_responding: false,
        reason: reason.map(String::from),
        reason_user: user.map(String::from),
        reason_time: since_ms.map(fleetop::model::time::rfc3339),
        partitions: Vec::new(),
    }
}

/// The scheduler's view arriving: `nodes` by name, and `jobs`.
pub(crate) fn sched_arrives(nodes: Vec<(&str, fleetop::model::sched::SchedNode)>, jobs: Vec<fleetop::model::sched::Job>) -> Step {
    let mut snap = fleetop::model::sched::Snapshot::default();
    for (name, n) in nodes {
        snap.nodes.insert(name.into(), n);
    }
    snap.jobs = jobs;
    Step::Arrive(Update::Scheduler(std::sync::Arc::new(snap)))
}

fn job(id: u64, node: &str, elapsed_s: u64) -> fleetop::model::sched::Job {
    fleetop::model::sched::Job {
        id,
        user: "alice".into(),
        name: "train".into(),
        elapsed_s,
        gpus_per_node: 8,
        nodes: vec![node.into()],
    }
}

pub(crate) fn mono() -> Theme {
    Theme::load("default", None, ColorDepth::Mono).expect("mono")
}

/// No cell of `buf` has a colour.
fn colourless(buf: &Buffer) -> bool {
    buf.content()
        .iter()
        .all(|c| matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset))
}

pub(crate) fn step_keys(s: &str) -> Vec<Step> {
    keys(s).into_iter().map(Step::Do).collect()
}

fn enabled(app: &mut App) {
    app.actions_enabled = true;
}

#[test]
fn capital_d_on_an_alert_drains_its_node_with_the_catalog_reason_and_names_its_jobs() {
    // gpu01's NVLink link is down (the first alert), and job 4411 runs there.
    let on_alerts = || {
        vec![
            sched_arrives(
                vec![("gpu01", sched_node("mixed", None, None, None))],
                vec![job(4411, "gpu01", 7980)],
            ),
            Step::Do(key(KeyCode::Tab)),
            Step::Do(key(KeyCode::Char('D'))),
        ]
    };
    let reason = "nvlink_down on gpu3: reset_gpu (NVLink link 3 down)";
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 600), (80, 24), on_alerts(), enabled);
    let screen = text(&buf);
    insta::assert_snapshot!("alerts_drain_80x24", screen);
    assert!(asked.is_empty(), "{asked:?}");
    assert!(screen.contains(&format!("reason: fleetop: {reason}")), "{screen}");
    assert!(
        screen.contains("4411") && screen.contains("alice") && screen.contains("train") && screen.contains("2h13m"),
        "{screen}"
    );
    assert!(
        screen.contains("running jobs finish; nothing new starts here"),
        "{screen}"
    );
    // The same without colour: the same words, no colour anywhere.
    let (plain, _) = drive_steps(mono(), fleet_updates(16, 8, 600), (80, 24), on_alerts(), enabled);
    assert_eq!(text(&plain), screen);
    assert!(colourless(&plain));

    // Enter: the exact command, the reason with fleetop's prefix, the job again.
    let mut steps = on_alerts();
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 30), steps, enabled);
    let screen = text(&buf);
    assert!(asked.is_empty(), "{asked:?}");
    // The command, wrapped in the dialog: joined back, exactly the plan's.
    let joined: String = screen
        .lines()
        .filter_map(|l| l.split('│').nth(1))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        joined.contains(&format!("NodeName=gpu01 State=DRAIN 'Reason=fleetop: {reason}'")),
        "{screen}"
    );
    assert!(
        screen.contains("(the alert's node)") && screen.contains("4411"),
        "{screen}"
    );
    // y: that plan runs.
    let mut steps = on_alerts();
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Char('y')))]);
    let (_, asked) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 30), steps, enabled);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.nodes, ["gpu01"]);
    assert_eq!(plan.reason.as_deref(), Some(format!("fleetop: {reason}").as_str()));
    assert!(plan.reason.as_deref().is_some_and(|r| r.starts_with("fleetop: ")));
    // The reason is the person's to change: Ctrl-U, then their words.
    let mut steps = on_alerts();
    steps.push(Step::Do(Action::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    ))));
    steps.extend(step_keys("psu"));
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Char('y')))]);
    let (_, asked) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 30), steps, enabled);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.reason.as_deref(), Some("fleetop: psu"));
    // Read-only: refused and logged, as a drain anywhere; no scheduler: said.
    let ro = |app: &mut App| {
        app.actions_enabled = true;
        app.read_only = true;
    };
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 600), (80, 24), on_alerts(), ro);
    let [Request::Refused(plan, why)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!((plan.action, why.as_str()), (NodeAction::Drain, "read-only mode"));
    assert!(text(&buf).contains("read-only mode: drain is off"));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 600), (80, 24), on_alerts(), |_| {});
    assert!(asked.is_empty());
    assert!(
        text(&buf).contains("no scheduler: start with --slurm, --kubernetes or --ray to drain"),
        "{}",
        text(&buf)
    );
}

#[test]
fn capital_d_in_node_detail_fills_in_the_most_urgent_flags_reason_or_nothing() {
    // gpu02: an uncorrectable ECC error (reset the GPU) and a failed row
    // remap (replace it): replace is the more urgent.
    let mut steps = detail_of("gpu02");
    steps.push(Step::Do(key(KeyCode::Char('D'))));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 30), steps, enabled);
    let screen = text(&buf);
    assert!(
        screen.contains("reason: fleetop: remap_failed on gpu5: replace ("),
        "{screen}"
    );
    assert!(
        screen.contains("no Slurm job runs here") || screen.contains("Slurm has not listed"),
        "{screen}"
    );
    // A node without a flag: nothing filled in.
    let mut steps = detail_of("gpu02");
    steps.push(Step::Do(key(KeyCode::Char('D'))));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 0), (120, 30), steps, enabled);
    assert!(text(&buf).contains("reason: fleetop: █"), "{}", text(&buf));
}

#[test]
fn resuming_a_node_someone_else_drained_takes_its_name_typed_not_y_and_is_forced() {
    let sched = || {
        sched_arrives(
            vec![
                (
                    "gpu02",
                    sched_node("drained", Some("maintenance"), Some("alice"), Some(NOW - 3 * 3_600_000)),
                ),
                (
                    "gpu03",
                    sched_node(
                        "drained",
                        Some("fleetop: xid on gpu3"),
                        Some("root"),
                        Some(NOW - 600_000),
                    ),
                ),
                ("gpu04", sched_node("down", Some("psu swap"), Some("bob"), None)),
            ],
            vec![],
        )
    };
    let with = |then: Vec<Step>| {
        let mut v = vec![sched()];
        v.extend(then);
        v
    };
    // y alone: nothing runs, and the dialog says who holds it and why.
    let (buf, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jRy")),
        enabled,
    );
    let screen = text(&buf);
    assert!(asked.is_empty(), "y alone ran it: {asked:?}");
    assert!(
        screen.contains("gpu02: drained by alice at 2025-12-31T21:00:00.000Z: maintenance"),
        "{screen}"
    );
    assert!(
        screen.contains("y alone does not run this: type gpu02 and Enter"),
        "{screen}"
    );
    // The name typed and Enter: the plan runs, forced.
    let mut steps = with(step_keys("jRgpu02"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), steps, enabled);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!((plan.action, plan.force), (NodeAction::Resume, true));
    assert_eq!(
        plan.commands,
        [["scontrol", "update", "NodeName=gpu02", "State=RESUME"]]
    );
    // Another name: nothing runs, and it says so.
    let mut steps = with(step_keys("jUgpu03"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), steps, enabled);
    assert!(asked.is_empty(), "{asked:?}");
    assert!(text(&buf).contains("not gpu02: nothing was run"), "{}", text(&buf));
    // Two such nodes marked: their names as a hostlist.
    let (buf, _) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("j jj R")),
        enabled,
    );
    assert!(text(&buf).contains("type gpu[02,04] and Enter"), "{}", text(&buf));
    // A node fleetop drained keeps the plain y.
    let (_, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jjRy")),
        enabled,
    );
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(
        (plan.nodes.as_slice(), plan.force),
        (["gpu03".to_string()].as_slice(), false)
    );
}

#[test]
fn rows_and_node_detail_say_who_drained_a_node_for_how_long_and_why() {
    let sched = || {
        sched_arrives(
            vec![
                (
                    "gpu02",
                    sched_node(
                        "drained",
                        Some("fleetop: xid on gpu3: reboot_node (XID 79)"),
                        Some("root"),
                        Some(NOW - (2 * 60 + 13) * 60_000),
                    ),
                ),
                (
                    "gpu03",
                    sched_node("drained", Some("maintenance"), Some("alice"), Some(NOW - 3 * 3_600_000)),
                ),
                ("gpu01", sched_node("mixed", None, None, None)),
            ],
            vec![],
        )
    };
    let row = |screen: &str, n: &str| {
        screen
            .lines()
            .find(|l| l.starts_with(&format!("  {n}")))
            .unwrap_or_default()
            .to_string()
    };
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), vec![sched()], |_| {});
    let screen = text(&buf);
    // Who holds it and for how long, fleetop's drain or anyone's; the
    // reason is node detail's (a row's room goes to its flags).
    assert!(row(&screen, "gpu02").contains("drained 2h fleetop"), "{screen}");
    assert!(
        row(&screen, "gpu03").contains("drained 3h alice") && !screen.contains("maintenance"),
        "{screen}"
    );
    // Every GPU cell still there at 80 columns.
    assert_eq!(
        // A flagged GPU's mark ("99!97") is not part of a number.
        row(&screen, "gpu01")
            .replace(['!', '*'], " ")
            .split_whitespace()
            .filter(|w| w.parse::<u32>().is_ok())
            .count(),
        8,
        "{screen}"
    );
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (160, 30), vec![sched()], |_| {});
    let screen = text(&buf);
    assert!(
        row(&screen, "gpu02").contains("drained 2h fleetop ") && !row(&screen, "gpu02").contains("XID 79"),
        "the reason never widens the column: {screen}"
    );
    // Node detail: who, how long, why.
    let mut steps = vec![sched()];
    steps.extend(detail_of("gpu02"));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 30), steps, |_| {});
    let screen = text(&buf);
    assert!(
        screen.contains("slurm drained by fleetop 2h13m: xid on gpu3: reboot_node (XID 79)"),
        "{screen}"
    );
    // Who made fleetop's drain, from the timeline (the audit log, read as
    // it grows): the policy, or a person through fleetop.
    use fleetop::model::timeline::{Event as TEvent, What};
    for (policy, by, says) in [
        (
            Some("remediate"),
            "root",
            "slurm drained by fleetop's policy 2h13m: xid on gpu3",
        ),
        (None, "alice", "slurm drained by alice via fleetop 2h13m: xid on gpu3"),
    ] {
        let drained = Step::Arrive(Update::Timeline(vec![TEvent {
            time_ms: NOW - (2 * 60 + 13) * 60_000,
            node: "gpu02".into(),
            what: What::Action {
                action: NodeAction::Drain,
                ok: true,
                reason: Some("fleetop: xid on gpu3: reboot_node (XID 79)".into()),
                message: String::new(),
                policy: policy.map(String::from),
            },
            by: by.into(),
        }]));
        let mut steps = vec![sched(), drained];
        steps.extend(detail_of("gpu02"));
        let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 30), steps, |_| {});
        assert!(text(&buf).contains(says), "{}", text(&buf));
    }
    let mut steps = vec![sched()];
    steps.extend(detail_of("gpu03"));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 30), steps, |_| {});
    assert!(
        text(&buf).contains("slurm drained by alice 3h00m: maintenance"),
        "{}",
        text(&buf)
    );
}

fn report(action: NodeAction, node: &str, reason: &str, message: &str) -> ActionReport {
    ActionReport {
        time: "2026-01-01T00:00:00.000Z".into(),
        stage: Stage::Done,
        actor: Actor {
            uid: 1000,
            name: Some("alice".into()),
            sudo_user: None,
            env_user: None,
        },
        action,
        nodes: vec![node.into()],
        reason: Some(reason.into()),
        commands: vec![],
        refused: None,
        results: vec![NodeResult {
            node: node.into(),
            ok: true,
            message: message.into(),
            state_before: None,
            state_after: None,
        }],
        forced: false,
        policy: None,
        scheduler: Default::default(),
        overrides: Default::default(),
    }
}

#[test]
fn the_timeline_pane_shows_raised_flags_and_what_people_did_newest_first() {
    let steps = |t: &str| {
        let mut s = detail_of("gpu15");
        s.push(Step::Do(key(KeyCode::Char('5'))));
        let r = report(NodeAction::Drain, "gpu15", "fleetop: xid on gpu4", "now drained");
        s.push(Step::Arrive(Update::ActionDone(std::sync::Arc::new(r))));
        // Any key closes the result.
        s.push(Step::Do(key(KeyCode::Esc)));
        s.extend(step_keys(t));
        s
    };
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (80, 24), steps(""), |_| {});
    let screen = text(&buf);
    insta::assert_snapshot!("detail_timeline_80x24", screen);
    let drain = screen
        .lines()
        .position(|l| l.contains("alice") && l.contains("drain ok (fleetop: xid on gpu4): now drained"));
    let raised = screen
        .lines()
        .position(|l| l.contains("fleetop") && l.contains("xid on gpu4 raised"));
    assert!(drain.is_some() && raised.is_some() && drain < raised, "{screen}");
    assert!(
        screen.contains("00:00:00") && screen.contains("2025-12-31 23:5"),
        "{screen}"
    );
    let (plain, _) = drive_steps(mono(), fleet_updates(16, 8, 600), (80, 24), steps(""), |_| {});
    assert_eq!(text(&plain), screen);
    assert!(colourless(&plain));
    // j scrolls: the newest goes off the top.
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (80, 24), steps("j"), |_| {});
    let screen = text(&buf);
    assert!(
        screen.contains("newest first · 2-") && !screen.contains("now drained"),
        "{screen}"
    );
    // A node nothing has happened to says what will show there.
    let mut s = detail_of("gpu02");
    s.push(Step::Do(key(KeyCode::Char('5'))));
    s.extend(step_keys("jjG"));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 0), (80, 24), s, |_| {});
    assert!(
        text(&buf).contains("Nothing has happened to this node"),
        "{}",
        text(&buf)
    );
}

#[test]
fn capital_t_returns_a_node_to_service_with_a_burn_in_where_none_passed_since_the_drain() {
    use fleetop::model::returning::Step as Do;
    use fleetop::model::timeline::{Event as TEvent, What};
    let drained_at = NOW - 2 * 3_600_000;
    let sched = || {
        sched_arrives(
            vec![
                (
                    "gpu02",
                    sched_node(
                        "drained",
                        Some("fleetop: xid on gpu3: reboot_node"),
                        Some("root"),
                        Some(drained_at),
                    ),
                ),
                (
                    "gpu03",
                    sched_node("drained", Some("maintenance"), Some("alice"), Some(drained_at)),
                ),
            ],
            vec![],
        )
    };
    let with = |then: Vec<Step>| {
        let mut v = vec![sched()];
        v.extend(then);
        v
    };
    let returned = |asked: &[Request]| match asked {
        [Request::Return(p)] => (**p).clone(),
        other => panic!("{other:?}"),
    };
    // The dialog: what happens to the node, and the exact commands.
    let (buf, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jT")),
        enabled,
    );
    let screen = text(&buf);
    assert!(asked.is_empty(), "{asked:?}");
    assert!(
        screen.contains("return to service")
            && screen.contains("gpu02: burn-in (quick) first")
            && screen.contains("RunBench suite=quick agent=10.0.0.1:50051")
            && screen.contains("scontrol update NodeName=gpu02 State=RESUME"),
        "{screen}"
    );
    // y: the return goes, and the running dialog waits for its result.
    let (buf, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jTy")),
        enabled,
    );
    let p = returned(&asked);
    assert!(matches!(p.nodes[0].step, Do::Bench { .. }), "{p:?}");
    assert_eq!((p.plan.commands[0][0].as_str(), p.force), ("RunBench", false));
    assert!(text(&buf).contains("return 1 node… a burn-in"), "{}", text(&buf));
    // s: the full suite.
    let (_, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jTsy")),
        enabled,
    );
    let p = returned(&asked);
    assert_eq!(p.suite, fleetop::model::bench::Suite::Full);
    assert!(p.plan.commands[0].contains(&"suite=full".to_string()), "{p:?}");
    // A burn-in passed since the drain, as the node's own agent says
    // (another console ran it): resumed without another.
    let (targets, updates) = fleet_updates(4, 8, 30);
    let at = targets.iter().position(|t| t.name == "gpu02").expect("gpu02");
    let node_now = updates
        .iter()
        .find_map(|u| match u {
            Update::Node {
                node,
                event: Event::Info(d),
            } if *node == at => Some(d.identity()),
            _ => None,
        })
        .expect("gpu02 described");
    let burn_in = |passed: bool| fleetop::model::bench::BurnIn {
        started_ms: drained_at + 590_000,
        ended_ms: drained_at + 600_000,
        suite: Some(fleetop::model::bench::Suite::Quick),
        passed,
        requested_by: "alice@console2".into(),
        node: node_now.clone(),
        checks: Vec::new(),
        error: None,
    };
    let arrive = |b| {
        Step::Arrive(Update::Node {
            node: at,
            event: Event::BurnIn(Box::new(b)),
        })
    };
    let mut steps = with(vec![arrive(burn_in(true))]);
    steps.extend(step_keys("jTy"));
    let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), steps, enabled);
    let p = returned(&asked);
    assert!(matches!(p.nodes[0].step, Do::Resume { .. }), "{p:?}");
    // The same pass as a line in an audit log (a console's own file) is no
    // evidence: a burn-in runs first.
    let said = Step::Arrive(Update::Timeline(vec![TEvent {
        time_ms: drained_at + 600_000,
        node: "gpu02".into(),
        what: What::Action {
            action: NodeAction::Bench,
            ok: true,
            reason: Some("suite quick".into()),
            message: String::new(),
            policy: None,
        },
        by: "alice".into(),
    }]));
    let mut steps = with(vec![said]);
    steps.extend(step_keys("jTy"));
    let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), steps, enabled);
    assert!(matches!(returned(&asked).nodes[0].step, Do::Bench { .. }));
    assert_eq!(
        p.plan.commands,
        [["scontrol", "update", "NodeName=gpu02", "State=RESUME"]]
    );
    // Someone else's drain: y does nothing; the name typed forces it.
    let (_, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jjTy")),
        enabled,
    );
    assert!(asked.is_empty(), "{asked:?}");
    let mut steps = with(step_keys("jjTgpu03"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), steps, enabled);
    let p = returned(&asked);
    assert!(
        p.force && p.plan.force && matches!(p.nodes[0].step, Do::Bench { .. }),
        "{p:?}"
    );
    // Read-only: refused and logged; no scheduler: said.
    let ro = |app: &mut App| {
        app.actions_enabled = true;
        app.read_only = true;
    };
    let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), with(step_keys("jT")), ro);
    let [Request::Refused(plan, why)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!((plan.action, why.as_str()), (NodeAction::Return, "read-only mode"));
    assert!(text(&buf).contains("read-only mode: return to service is off"));
    let (buf, asked) = drive_steps(
        theme(),
        fleet_updates(4, 8, 30),
        (100, 30),
        with(step_keys("jT")),
        |_| {},
    );
    assert!(asked.is_empty());
    assert!(
        text(&buf).contains("no scheduler: start with --slurm"),
        "{}",
        text(&buf)
    );
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
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), vec![arrive(true)], |_| {});
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
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 30), vec![arrive(true)], |_| {});
    assert!(
        text(&buf).contains("REMEDIATION STOPPED  fleetop remediate reset"),
        "{}",
        text(&buf)
    );
    // A policy that runs and has not tripped, or none: nothing.
    for steps in [vec![arrive(false)], vec![]] {
        let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, |_| {});
        assert!(!text(&buf).contains("REMEDIATION"), "{}", text(&buf));
    }
}

#[test]
fn the_new_dialogs_and_the_timeline_draw_at_any_size_without_a_panic() {
    let sched = || {
        sched_arrives(
            vec![
                (
                    "gpu01",
                    sched_node("drained", Some("fleetop: xid on gpu3"), None, Some(NOW - 60_000)),
                ),
                ("gpu02", sched_node("down", None, None, Some(NOW + 60_000))),
                ("gpu03", sched_node("drained", Some("x"), Some("bob"), None)),
            ],
            vec![job(1, "gpu01", u64::MAX)],
        )
    };
    for size in [(1, 1), (12, 4), (30, 8), (60, 12), (80, 24)] {
        for k in ["T", "jT", "jjT", "R", "jjR", "D", "\t\tD", "\n5", "\n5G", "\nD"] {
            let mut v = vec![sched()];
            v.extend(k.chars().map(|c| {
                Step::Do(match c {
                    '\n' => key(KeyCode::Enter),
                    '\t' => key(KeyCode::Tab),
                    c => key(KeyCode::Char(c)),
                })
            }));
            drive_steps(theme(), fleet_updates(4, 8, 30), size, v, enabled);
        }
    }
}

/// The demo fleet with `down` (node indices) silent for the last minute
/// and their connections broken: unreachable at NOW, the rest live.
fn fleet_with_down(nodes: u32, down: &[usize]) -> (Vec<Target>, Vec<Update>) {
    let (targets, updates) = fleet_updates(nodes, 8, 600);
    let cut = NOW - 60_000;
    let mut kept: Vec<Update> = updates
        .into_iter()
        .filter(|u| match u {
            Update::Node {
                node,
                event: Event::Sample(s),
            } if down.contains(node) => s.time_ms < cut,
            _ => true,
        })
        .collect();
    kept.extend(down.iter().map(|&node| Update::Node {
        node,
        event: Event::Down("connection refused".into()),
    }));
    (targets, kept)
}

fn header(buf: &Buffer) -> String {
    text(buf).lines().next().unwrap_or_default().to_string()
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

/// The XID column's cells of node detail's GPU rows: (row y, text).
fn xid_cells(buf: &Buffer) -> (u16, Vec<(u16, String)>) {
    let screen = text(buf);
    let header = screen.lines().position(|l| l.starts_with("GPU")).expect("GPU table");
    let x = screen
        .lines()
        .nth(header)
        .and_then(|l| l.find("XID"))
        .expect("XID column") as u16;
    let rows = (header + 1..header + 9)
        .map(|y| {
            let cell: String = (x..x + 5).map(|c| buf[(c, y as u16)].symbol().to_string()).collect();
            (y as u16, cell.trim().to_string())
        })
        .collect();
    (x, rows)
}

#[test]
fn the_xid_column_paints_a_healthy_gpus_dash_plain_and_held_codes_in_their_severity() {
    use ratatui::style::Modifier;
    // gpu01: healthy XID-wise (its fault is an NVLink link); gpu02 holds
    // XID 94 (warn) on GPU 5.
    let open = |t: Theme, node: &str| {
        let steps: Vec<Step> = detail_of(node);
        drive_steps(t, fleet_updates(16, 8, 600), (80, 24), steps, |_| {}).0
    };
    for t in [theme(), mono()] {
        let buf = open(t.clone(), "gpu01");
        let (x, rows) = xid_cells(&buf);
        assert!(rows.iter().all(|(_, c)| c == "-"), "{rows:?}");
        // The first row is the selected GPU (reversed by the selection, not
        // by the XID): the others say what the column paints.
        for (y, _) in rows.iter().skip(1) {
            let s = buf[(x, *y)].style();
            assert_ne!(s.fg, t.crit.fg.filter(|c| *c != Color::Reset), "row {y} in {}", t.name);
            assert!(
                !s.add_modifier.intersects(Modifier::BOLD | Modifier::REVERSED),
                "row {y} in {}: {s:?}",
                t.name
            );
        }
        let buf = open(t.clone(), "gpu02");
        let (x, rows) = xid_cells(&buf);
        let (y, _) = rows.iter().find(|(_, c)| c == "94").expect("XID 94 held");
        let s = buf[(x, *y)].style();
        assert_eq!(s.fg, t.warn.fg.or(Some(Color::Reset)), "{}", t.name);
        assert!(s.add_modifier.contains(t.warn.add_modifier), "{}: {s:?}", t.name);
    }
}

#[test]
fn node_detail_lists_node_level_flags_with_evidence_and_age_above_the_gpus() {
    // gpu13's mlx5_2/1 is down; gpu09's mlx5_7/1 counts symbol errors.
    // Every GPU row of both is clean: the lines above the table say why
    // the node is not, with the numbers and how long, at 80x24.
    for (node, want) in [
        ("gpu13", ["ib_down mlx5_2/1 9m", "[rate_gbps=400]"]),
        ("gpu09", ["ib_errors mlx5_7/1 9m", "symbol_error=+2320"]),
    ] {
        let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (80, 24), detail_of(node), |_| {});
        let screen = text(&buf);
        let table = screen.lines().position(|l| l.starts_with("GPU")).expect("GPU table");
        let line = screen
            .lines()
            .take(table)
            .find(|l| l.contains(want[0]))
            .unwrap_or_else(|| panic!("{} above the table:\n{screen}", want[0]));
        assert!(line.contains(want[1]), "{line}\n{screen}");
    }
}

#[test]
fn capital_k_names_the_jobs_owner_name_and_run_time_from_slurm() {
    let mut steps = vec![sched_arrives(
        vec![("gpu11", sched_node("mixed", None, None, None))],
        vec![job(4848, "gpu11", 2 * 3600 + 13 * 60 + 5)],
    )];
    steps.extend(detail_of("gpu11"));
    steps.push(Step::Do(key(KeyCode::Char('K'))));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, enabled);
    let screen = text(&buf);
    assert!(
        screen.contains("confirm scancel") && screen.contains("job 4848 · alice · train · 2h13m"),
        "{screen}"
    );
    assert!(screen.contains("scancel 4848"), "{screen}");
    assert!(asked.is_empty(), "{asked:?}");
}

#[test]
fn capital_k_refuses_a_job_slurm_does_not_list_on_the_node_and_names_those_it_does() {
    // The agent maps gpu11's processes to job 4848; Slurm says 4411 and
    // 4412 run there: cancelling 4848 could hit someone else's job.
    let mut steps = vec![sched_arrives(
        vec![("gpu11", sched_node("mixed", None, None, None))],
        vec![job(4411, "gpu11", 60), job(4412, "gpu11", 60)],
    )];
    steps.extend(detail_of("gpu11"));
    steps.push(Step::Do(key(KeyCode::Char('K'))));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (120, 40), steps, enabled);
    let screen = text(&buf);
    assert!(!screen.contains("confirm scancel"), "{screen}");
    assert!(asked.is_empty(), "nothing runs: {asked:?}");
    assert!(
        screen.contains("job 4848 is not on gpu11 in Slurm, which lists jobs 4411, 4412 there"),
        "{screen}"
    );
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
    let screen = text(&drive(theme(), fleet_updates(16, 8, 600), (120, 30), a));
    assert!(
        screen.contains("1 of 16 nodes") && screen.contains("  gpu02 "),
        "{screen}"
    );
    let mut a = keys("/thr");
    a.push(key(KeyCode::Enter));
    let screen = text(&drive(theme(), fleet_updates(16, 8, 600), (120, 30), a));
    assert!(screen.contains("2 of 16 nodes"), "{screen}");
    // `?` twice: the legend, each short name with its kind, whole at 80x24.
    let buf = drive(theme(), fleet_updates(4, 8, 60), (80, 24), keys("??"));
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
    let screen = text(&drive(theme(), fleet_updates(4, 8, 60), (80, 24), keys("???")));
    assert!(!screen.contains("flag names") && !screen.contains("keys ·"), "{screen}");
}

#[test]
fn one_node_is_one_node_not_one_nodes() {
    for size in [(80, 24), (200, 40)] {
        let buf = drive(theme(), fleet_updates(1, 8, 60), size, vec![]);
        let screen = text(&buf);
        assert!(header(&buf).contains(" 1 node: "), "{screen}");
        assert!(screen.contains(" 1 node · utilization"), "{screen}");
        assert!(!screen.contains("1 nodes"), "{screen}");
    }
}

#[test]
fn a_folded_idle_row_says_its_job_once() {
    let buf = drive(theme(), fleet_updates(16, 8, 660), (200, 40), vec![key(KeyCode::Tab)]);
    let screen = text(&buf);
    let row = screen
        .lines()
        .find(|l| l.starts_with("WARN") && l.contains(" idle "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(row.matches("4848").count(), 1, "{row}");
    assert!(row.contains("job 4848: 8 GPUs idle at 0% for "), "{row}");
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
    let buf = drive(theme(), fleet_updates(16, 8, 600), (200, 40), vec![]);
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
    let head = header(&drive(theme(), fleet_updates(16, 8, 600), (80, 24), vec![]));
    assert!(head.contains(&want), "{want} in {head}");
    assert!(head.chars().count() <= 80, "{head}");
}

#[test]
fn a_stale_nodes_row_says_how_old_its_numbers_are_sorts_apart_and_stays_out_of_the_totals() {
    let screen = text(&drive(theme(), fleet_updates(16, 8, 600), (120, 30), vec![]));
    // The demo's hung agent, silent for minutes: unreachable, its numbers old.
    let stale = screen
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("unrch"))
        .expect("the demo's hung node");
    let age = stale.split_whitespace().nth(2).unwrap_or_default();
    assert!(age.ends_with('s') || age.ends_with('m'), "{stale}");
    let stale_name = stale.split_whitespace().next().unwrap_or_default().to_string();
    // The header's mean utilization is the live rows' cells' mean.
    let (mut sum, mut n) = (0u64, 0u64);
    for l in screen.lines().skip(3) {
        // A flagged GPU's mark ("!97", "*0") is not part of its number.
        let l = l.replace(['!', '*'], " ");
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 10 || !w[0].starts_with("gpu") || w[1] == "unrch" {
            continue;
        }
        for c in &w[2..10] {
            if let Ok(u) = c.parse::<u64>() {
                sum += u;
                n += 1;
            }
        }
    }
    let head = header(&drive(theme(), fleet_updates(16, 8, 600), (200, 40), vec![]));
    assert!(head.contains(&format!("util {}%", sum / n)), "{} in {head}", sum / n);
    // Sorted by the metric, either way, the stale node comes after the live ones.
    for k in ["s", "sS"] {
        let rows = rows_with_mean(&drive(theme(), fleet_updates(16, 8, 600), (120, 40), keys(k)));
        assert_eq!(
            rows.last().map(|r| r.0.as_str()),
            Some(stale_name.as_str()),
            "{k}: {rows:?}"
        );
    }
}

#[test]
fn node_detail_says_why_an_agent_cannot_be_reached_from_the_first_failure() {
    // gpu01 never answered: its first attempt was refused just now, so it
    // is still `connecting`; and gpu02 went unreachable after answering.
    let (targets, updates) = fleet_with_down(16, &[1]);
    let mut updates: Vec<Update> = updates
        .into_iter()
        .filter(|u| !matches!(u, Update::Node { node: 0, .. }))
        .collect();
    updates.push(Update::Node {
        node: 0,
        event: Event::Down("tcp connect error: Connection refused (os error 111)".into()),
    });
    let screen = text(&drive(
        theme(),
        (targets.clone(), updates.clone()),
        (80, 24),
        vec![key(KeyCode::Enter)],
    ));
    assert!(screen.contains("gpu01 conn"), "{screen}");
    assert!(
        screen.contains("agent unreachable for 0s: tcp connect error"),
        "{screen}"
    );
    let mut a = keys("j");
    a.push(key(KeyCode::Enter));
    let screen = text(&drive(theme(), (targets, updates), (120, 30), a));
    assert!(screen.contains("gpu02 unrch"), "{screen}");
    assert!(screen.contains(": connection refused"), "{screen}");
}

/// The demo fleet up to NOW, and what its agents send in the `later_s`
/// seconds after.
fn fleet_and_later(nodes: u32, later_s: i64) -> ((Vec<Target>, Vec<Update>), Vec<Update>) {
    let (targets, mut updates) = fleet_updates(nodes, 8, 0);
    let mut sims = SimFleet::new(demo::plan(nodes, 8, 7, NOW - 600_000));
    updates.clear();
    updates.extend(sims.connect(NOW));
    for t in (NOW - 60_000..=NOW).step_by(1000) {
        updates.extend(sims.sample(t));
    }
    updates.extend((0..nodes as usize).map(|node| Update::Node {
        node,
        event: Event::CaughtUp,
    }));
    let mut later = Vec::new();
    for t in (NOW + 1000..=NOW + later_s * 1000).step_by(1000) {
        later.extend(sims.sample(t));
    }
    ((targets, updates), later)
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
fn the_wall_keeps_the_order_of_the_last_sort_while_the_numbers_move() {
    let ((targets, updates), later) = fleet_and_later(16, 20);
    let mut app = App::new(Store::new(targets, Thresholds::default()), theme(), NOW);
    for u in updates {
        fleetop::tui::dispatch::update(&mut app, Action::Store(u, NOW));
    }
    for k in keys("ws") {
        fleetop::tui::dispatch::update(&mut app, k);
    }
    assert!(app.wall_active());
    let order = app.visible();
    let live = |app: &App| {
        fleetop::tui::view::visible(
            &app.store,
            &app.filter,
            app.sort,
            app.sort_reverse,
            app.metric,
            app.now_ms,
        )
    };
    let mut moved = false;
    for (k, u) in later.into_iter().enumerate() {
        fleetop::tui::dispatch::update(&mut app, Action::Store(u, NOW));
        fleetop::tui::dispatch::update(&mut app, Action::Tick(NOW + k as i64 * 50));
        assert_eq!(app.visible(), order, "the wall moved");
        moved |= live(&app) != order;
    }
    assert!(moved, "the live sort never changed: the test shows nothing");
    // Sorting again takes the order of now.
    for k in keys("sssss") {
        fleetop::tui::dispatch::update(&mut app, k);
    }
    assert_eq!(app.visible(), live(&app));
}

#[test]
fn alerts_and_node_detail_speak_in_durations_and_sizes_and_one_name_for_a_stuck_gpu() {
    let buf = drive(theme(), fleet_updates(16, 8, 600), (200, 40), vec![key(KeyCode::Tab)]);
    let screen = text(&buf);
    let stuck = screen.lines().find(|l| l.contains("gpu_stuck")).expect("a stuck GPU");
    assert!(!stuck.contains(" ms") && !stuck.contains("nvml_stuck"), "{stuck}");
    assert!(
        stuck.contains("no answer for ") && stuck.contains("no_answer="),
        "{stuck}"
    );
    assert!(!screen.contains("_bytes="), "{screen}");
    // The stuck GPU's row in node detail: the flag's name, a duration.
    let name = stuck.split_whitespace().nth(1).unwrap_or_default().to_string();
    let mut a = keys(&format!("/{name}"));
    a.push(key(KeyCode::Enter));
    a.push(key(KeyCode::Enter));
    let screen = text(&drive(theme(), fleet_updates(16, 8, 600), (200, 40), a));
    assert!(!screen.contains("nvml_stuck") && !screen.contains(" ms"), "{screen}");
    assert!(screen.contains("gpu_stuck: "), "{screen}");
}

/// The words of a group row's flags column and its hosts: what follows the
/// util cell ("93%").
fn group_flag_words(row: &[String]) -> (Vec<String>, String) {
    let at = row.iter().position(|w| w.ends_with('%')).expect("a util cell");
    let rest = &row[at + 1..];
    let (hosts, flags) = rest.split_last().expect("a hosts cell");
    (flags.to_vec(), hosts.clone())
}

#[test]
fn the_group_view_gives_way_by_whole_columns_and_never_cuts_a_word_at_160_and_80() {
    for by in ["", "b", "bb"] {
        for width in [160u16, 120, 100, 80] {
            let mut steps = vec![partitions_arrive(), Step::Do(key(KeyCode::Char('J')))];
            steps.extend(step_keys(by));
            let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (width, 40), steps, with_racks);
            let screen = text(&buf);
            let rows: Vec<Vec<String>> = screen
                .lines()
                .skip(3)
                .filter(|l| l.contains('%') && !l.starts_with(' '))
                .map(|l| l.split_whitespace().map(String::from).collect())
                .collect();
            assert!(!rows.is_empty(), "{width} {by}\n{screen}");
            for r in &rows {
                let (flags, hosts) = group_flag_words(r);
                if flags != ["-"] {
                    // "3 crit 12 warn" or by the short rule "3c 12w 1i": a
                    // count always with its whole severity.
                    let long = flags.len() % 2 == 0
                        && flags
                            .chunks(2)
                            .all(|p| p[0].parse::<u32>().is_ok() && ["crit", "warn", "info"].contains(&p[1].as_str()));
                    let short = flags.iter().all(|w| {
                        w.len() > 1
                            && w[..w.len() - 1].parse::<u32>().is_ok()
                            && ["c", "w", "i"].contains(&&w[w.len() - 1..])
                    });
                    assert!(long || short, "{width} {by}: flags {flags:?}\n{screen}");
                }
                // The hosts: a whole hostlist, or whole names then "…".
                let whole = hosts.trim_end_matches('…').trim_end_matches(',');
                let names = fleetop::ingest::hostlist::expand(
                    &(whole.to_string()
                        + if whole.matches('[').count() > whole.matches(']').count() {
                            "]"
                        } else {
                            ""
                        }),
                );
                assert!(names.is_ok(), "{width} {by}: hosts {hosts:?}\n{screen}");
            }
            if width == 160 {
                assert!(!screen.contains("…"), "160 columns hold every word\n{screen}");
            }
        }
    }
}
#[test]
fn node_detail_at_160_columns_shows_each_pane_title_once_over_two_panes() {
    let (buf, _) = drive_steps(
        theme(),
        fleet_updates(16, 8, 600),
        (160, 50),
        detail_of("gpu03"),
        |_| {},
    );
    let screen = text(&buf);
    for title in ["1 history", "3 InfiniBand", "4 processes", "5 timeline"] {
        assert_eq!(screen.matches(title).count(), 1, "{title}\n{screen}");
    }
    // The right-hand pane (the next one, NVLink) is named over it.
    let (_, y) = find(&buf, "1 history").expect("the tabs");
    let tabs = screen.lines().nth(y as usize).expect("the tabs' row");
    let x = tabs.rfind("─ 2 NVLink ─").expect("the right pane's name");
    assert!(tabs[..x].chars().count() >= 79, "{screen}");
    insta::assert_snapshot!("detail_160x50", screen);
}

/// The demo fleet with node `free` left free: no GPU process (so no
/// Slurm job on it) and every GPU at 0%.
fn fleet_with_free(nodes: u32, free: usize) -> (Vec<Target>, Vec<Update>) {
    let (targets, mut updates) = fleet_updates(nodes, 8, 60);
    for u in &mut updates {
        if let Update::Node {
            node,
            event: Event::Sample(s),
        } = u
            && *node == free
        {
            for g in &mut s.gpus {
                g.processes = Default::default();
                g.util_pct = Some(0);
            }
        }
    }
    (targets, updates)
}

/// The heatmap row of `name` (its text) and its y.
fn heat_row(buf: &Buffer, name: &str) -> (String, u16) {
    let (_, y) = find(buf, &format!(" {name} ")).unwrap_or_else(|| panic!("no row {name}\n{}", text(buf)));
    (text(buf).lines().nth(y as usize).unwrap_or_default().to_string(), y)
}

#[test]
fn a_free_node_says_free_and_its_cells_are_muted_dots_not_the_heat_of_a_busy_one() {
    let t = theme();
    // gpu07 (index 6): no process, no job, 0%.
    let buf = drive(t.clone(), fleet_with_free(16, 6), (120, 30), vec![]);
    let (row, y) = heat_row(&buf, "gpu07");
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(words[1], "free", "{}", text(&buf));
    // Its cells: dots, muted, never a heat colour.
    let dotted = |row: &str| row.split_whitespace().filter(|w| w.chars().all(|c| c == '┄')).count();
    let x = row[..row.find('┄').expect("a dotted cell")].chars().count() as u16;
    assert_eq!(buf[(x, y)].fg, t.muted.fg.unwrap_or(Color::Reset), "{row}");
    assert_ne!(buf[(x, y)].bg, t.heat(0.0), "{row}");
    assert_eq!(dotted(&row), 8, "{row}");
    // A busy node and an idle one holding a job (gpu11) are not free.
    assert!(!heat_row(&buf, "gpu16").0.contains("free"));
    assert!(!heat_row(&buf, "gpu11").0.contains("free"));
    // Without colour the words and the dots carry it.
    let buf = drive(mono(), fleet_with_free(16, 6), (80, 24), vec![]);
    let (row, _) = heat_row(&buf, "gpu07");
    assert!(row.contains(" free ") && dotted(&row) == 8, "{}", text(&buf));
    assert!(colourless(&buf));
    assert!(
        text(&buf).contains("┄ free"),
        "the legend says what the dots are\n{}",
        text(&buf)
    );
}

#[test]
fn a_gpu_with_a_warn_or_crit_flag_is_marked_in_its_heatmap_cell_with_and_without_colour() {
    for (t, size) in [(theme(), (120, 30)), (mono(), (80, 24)), (theme(), (80, 24))] {
        let buf = drive(t, fleet_updates(16, 8, 600), size, vec![]);
        let screen = text(&buf);
        let cells = |name: &str| {
            let (row, _) = heat_row(&buf, name);
            // The GPU cells: after the status word, before the mean.
            let end = row.find('%').unwrap_or(row.len());
            row[..end].to_string()
        };
        // gpu15: xid and gpu_lost (crit) on GPUs; gpu12: hot (warn).
        assert!(cells("gpu15").contains('!'), "{screen}");
        assert!(cells("gpu12").contains('*'), "{screen}");
        // One marker a flagged GPU: gpu06's eight persistence_off (warn).
        assert_eq!(cells("gpu06").matches('*').count(), 8, "{screen}");
        // Info flags (underused, power_capped) mark nothing.
        assert!(!cells("gpu07").contains(['!', '*']), "{screen}");
        assert!(!cells("gpu16").contains(['!', '*']), "{screen}");
        assert!(screen.contains("! crit * warn"), "the legend says it\n{screen}");
    }
}

/// `:` then `line` typed (Tab as `\t`), without Enter.
fn command_steps(line: &str) -> Vec<Step> {
    let mut steps = vec![Step::Do(key(KeyCode::Char(':')))];
    steps.extend(line.chars().map(|c| {
        Step::Do(match c {
            '\t' => key(KeyCode::Tab),
            c => key(KeyCode::Char(c)),
        })
    }));
    steps
}

fn footer(buf: &Buffer) -> String {
    text(buf).lines().last().unwrap_or_default().to_string()
}

#[test]
fn tab_completes_command_and_node_names_on_the_colon_line() {
    let run = |line: &str| drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), command_steps(line), |_| {}).0;
    assert!(footer(&run("no\t")).starts_with(":node █"), "{}", footer(&run("no\t")));
    // Many nodes: as far as they agree, and the candidates listed.
    let buf = run("no\tgpu\t");
    assert!(footer(&buf).starts_with(":node gpu█"), "{}", text(&buf));
    let buf = run("no\tgpu1\t");
    assert!(
        footer(&buf).starts_with(":node gpu1█   gpu10 gpu11 gpu12"),
        "{}",
        text(&buf)
    );
    let buf = run("no\tGPU07\t");
    assert!(footer(&buf).starts_with(":node gpu07█"), "{}", text(&buf));
    // Command names: `re` is resume or return.
    let buf = run("re\t");
    assert!(footer(&buf).starts_with(":re█   resume return"), "{}", text(&buf));
    assert!(footer(&run("so\tfl\t")).starts_with(":sort flags█"));
    // Esc cancels: the footer's keys are back, nothing changed.
    let mut steps = command_steps("node gpu07");
    steps.push(Step::Do(key(KeyCode::Esc)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, |_| {});
    assert!(
        footer(&buf).contains("? help") && buf_has(&buf, "16 nodes · utilization"),
        "{}",
        text(&buf)
    );
}

#[test]
fn colon_node_opens_that_node_and_a_hostlist_opens_its_first() {
    for line in ["node gpu07", "no\tgpu07", "node gpu[07-09]"] {
        let mut steps = command_steps(line);
        steps.push(Step::Do(key(KeyCode::Enter)));
        let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, |_| {});
        let screen = text(&buf);
        assert!(
            screen.lines().nth(2).is_some_and(|l| l.starts_with(" gpu07 ")),
            "{line}\n{screen}"
        );
    }
    let mut steps = command_steps("node nosuch");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, |_| {});
    assert_eq!(footer(&buf).trim(), "no node nosuch");
}

#[test]
fn colon_drain_opens_the_drain_dialog_with_the_reason_and_runs_nothing() {
    let mut steps = command_steps("node gpu03");
    steps.push(Step::Do(key(KeyCode::Enter)));
    steps.extend(command_steps("drain xid"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, enabled);
    let screen = text(&buf);
    assert!(screen.contains("drain the node in view: gpu03"), "{screen}");
    assert!(screen.contains("xid"), "{screen}");
    assert!(asked.is_empty(), "nothing runs before the confirmation");
    // Enter: the exact command, waiting for y.
    let mut more = command_steps("drain xid");
    more.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Enter))]);
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), more, enabled);
    assert!(text(&buf).contains("'Reason=fleetop: xid'"), "{}", text(&buf));
    assert!(asked.is_empty());
    // Read-only: refused and logged, as D is.
    let mut ro = command_steps("drain xid");
    ro.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), ro, |app| {
        app.actions_enabled = true;
        app.read_only = true;
    });
    assert!(footer(&buf).contains("read-only mode: drain is off"), "{}", text(&buf));
    assert!(matches!(asked.as_slice(), [Request::Refused(..)]), "{asked:?}");
}

#[test]
fn an_unknown_command_says_so_in_one_footer_line_and_filter_sort_q_work() {
    let mut steps = command_steps("frobnicate now");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), steps, |_| {});
    let f = footer(&buf);
    assert!(f.starts_with(" unknown command :frobnicate"), "{}", text(&buf));
    assert!(
        f.chars().count() <= 80 && f.contains("node") && f.contains("drain"),
        "{f}"
    );
    // :filter is /.
    let mut steps = command_steps("filter xid");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 30), steps, |_| {});
    let names: Vec<String> = rows_with_mean(&buf).into_iter().map(|r| r.0).collect();
    assert!(!names.is_empty() && names.len() < 16, "{}", text(&buf));
    assert!(footer(&buf).contains("filter xid"), "{}", text(&buf));
    // :sort -metric is s then S.
    let mut steps = command_steps("sort -metric");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 30), steps, |_| {});
    assert!(footer(&buf).contains("sort metric reversed"), "{}", text(&buf));
    // :help opens help.
    let mut steps = command_steps("help");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (80, 24), steps, |_| {});
    assert!(text(&buf).contains("command: node NAME"), "{}", text(&buf));
}

/// The process pane says who runs each GPU process and what it is, as
/// nvitop does: the owner on the node and the command line.
#[test]
fn the_process_pane_names_each_processs_owner_and_command_line() {
    let mut steps = detail_of("gpu11");
    steps.push(Step::Do(key(KeyCode::Char('4'))));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (140, 40), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("user") && screen.contains("command"), "{screen}");
    let row = screen
        .lines()
        .find(|l| l.starts_with("0 ") && l.contains("python train.py"))
        .unwrap_or_else(|| panic!("no process row with its command: {screen}"));
    assert!(
        ["alice", "bob", "chen", "dana"].iter().any(|u| row.contains(u)),
        "{row}"
    );
}

/// `A` in node detail: every alert of that node, on the alerts screen (the
/// detail lists a few above the GPUs and says how many more there are).
#[test]
fn capital_a_in_node_detail_lists_that_nodes_alerts_only() {
    let mut steps = detail_of("gpu02");
    steps.push(Step::Do(key(KeyCode::Char('A'))));
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 600), (120, 40), steps, |_| {});
    let screen = text(&buf);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("CRIT") || l.starts_with("WARN") || l.starts_with("INFO"))
        .collect();
    assert!(rows.len() >= 2, "{screen}");
    assert!(rows.iter().all(|l| l.contains("gpu02")), "{screen}");
}

/// The fleet of `fleet_updates` with Kubernetes pods on gpu01's and
/// gpu02's GPUs, as their agents would send them from the kubelet: a
/// training pod on gpu01's GPUs 0 and 1 and all of gpu02's, two notebooks
/// on replicas of gpu01's GPU 5.
fn fleet_with_pods() -> (Vec<Target>, Vec<Update>) {
    use fleetop::model::sample::PodRef;
    let pod = |ns: &str, name: &str, c: &str| PodRef {
        namespace: ns.into(),
        pod: name.into(),
        container: c.into(),
        mig_uuid: None,
    };
    let (targets, mut updates) = fleet_updates(16, 8, 60);
    for u in &mut updates {
        let Update::Node {
            node,
            event: Event::Sample(s),
        } = u
        else {
            continue;
        };
        for g in &mut s.gpus {
            g.pods = match (*node, g.index) {
                (0, 0 | 1) | (1, _) => vec![pod("ml", "train-0", "trainer")],
                (0, 5) => vec![pod("a", "notebook-1", "jupyter"), pod("b", "notebook-2", "jupyter")],
                _ => vec![],
            };
        }
    }
    (targets, updates)
}

#[test]
fn node_detail_names_the_pods_holding_its_gpus() {
    let (buf, _) = drive_steps(theme(), fleet_with_pods(), (120, 30), detail_of("gpu01"), |_| {});
    let screen = text(&buf);
    assert!(
        screen.contains("pods gpu0,1 ml/train-0 (trainer) · gpu5 a/notebook-1 (jupyter), b/notebook-2 (jupyter)"),
        "{screen}"
    );
    insta::assert_snapshot!("detail_pods_120x30", screen);
    // A node no pod holds a GPU of: no such line.
    let (buf, _) = drive_steps(theme(), fleet_with_pods(), (120, 30), detail_of("gpu03"), |_| {});
    assert!(!text(&buf).contains("pods "), "{}", text(&buf));
}

#[test]
fn the_group_view_groups_gpus_by_pod_and_the_rest_in_none() {
    // b cycles job, partition, rack, pod.
    let mut steps = vec![Step::Do(key(KeyCode::Char('J')))];
    steps.extend((0..3).map(|_| Step::Do(key(KeyCode::Char('b')))));
    let (buf, _) = drive_steps(theme(), fleet_with_pods(), (100, 24), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("pods · 4 · least busy first"), "{screen}");
    let rows = group_rows(&screen);
    // (group, nodes, GPUs, ...): train-0 on 2 nodes, 10 GPUs.
    assert_eq!(row(&rows, "ml/train-0")[1..3], ["2", "10"], "{screen}");
    assert_eq!(row(&rows, "ml/train-0").last().map(String::as_str), Some("gpu[01-02]"));
    assert_eq!(row(&rows, "a/notebook-1")[1..3], ["1", "1"], "{screen}");
    assert_eq!(row(&rows, "b/notebook-2")[1..3], ["1", "1"], "{screen}");
    // Every other GPU the fleet reports (120, one node not connected):
    // gpu01's 5 others and the rest, on 14 nodes.
    assert_eq!(row(&rows, "(none)")[1..3], ["14", "109"], "{screen}");
    insta::assert_snapshot!("groups_by_pod_100x24", screen);
}

#[test]
fn a_console_behind_says_so_in_the_header() {
    let behind = |app: &mut App| app.store.lag = fleetop::store::Lag::judged(8_000, NOW);
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), vec![], behind);
    let screen = text(&buf);
    let header = screen.lines().nth(1).unwrap_or_default();
    assert!(header.starts_with(" console behind 8s │"), "{screen}");
    // Not behind: nothing said.
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (80, 24), vec![], |_| {});
    assert!(!text(&buf).contains("behind"), "{}", text(&buf));
    // Its runtime late: it says too, where there is room, that it calls no
    // node silent meanwhile.
    let held = |app: &mut App| {
        let ran = tokio::time::Instant::now();
        app.store.pace.beat(ran - std::time::Duration::from_millis(8_300), ran);
    };
    let (buf, _) = drive_steps(theme(), fleet_updates(16, 8, 60), (100, 30), vec![], held);
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
