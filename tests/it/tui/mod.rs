//! The console on `TestBackend`: the real event loop, fed a simulated fleet's
//! updates and key presses, at a fixed time. Text is snapshotted with insta;
//! colours, which text snapshots lose, are asserted on the buffer's styles.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::detect::Thresholds;
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::action::{ActionReport, Actor, NodeAction, NodeResult, Stage};
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

mod alerts;
mod bench;
mod detail;
mod dialogs;
mod first_look;
mod frame;
mod groups;
mod heatmap;
mod input;

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

/// The demo fleet of `nodes` nodes of 8 GPUs with `history_s` seconds of
/// history, on a `size` terminal, after `actions`: the screen. Most tests
/// start so.
pub(crate) fn shown(nodes: u32, history_s: i64, size: (u16, u16), actions: Vec<Action>) -> Buffer {
    drive(theme(), fleet_updates(nodes, 8, history_s), size, actions)
}

/// The same fleet with `steps`, the app set up by `setup`: the screen and
/// what the app asked the action task to do.
pub(crate) fn drive_fleet(
    nodes: u32,
    history_s: i64,
    size: (u16, u16),
    steps: Vec<Step>,
    setup: impl FnOnce(&mut App),
) -> (Buffer, Vec<Request>) {
    drive_steps(theme(), fleet_updates(nodes, 8, history_s), size, steps, setup)
}

/// The same with steps after the fleet's updates, the app set up by
/// `setup`, and what the app asked the action task to do. The heatmap is
/// in name order: most tests walk it by name (`j` from gpu01 is gpu02).
/// The order it opens in (worst first) has its own tests (`first_look`),
/// through `drive_as_opened`.
pub(crate) fn drive_steps(
    theme: Theme,
    fleet: (Vec<Target>, Vec<Update>),
    size: (u16, u16),
    steps: Vec<Step>,
    setup: impl FnOnce(&mut App),
) -> (Buffer, Vec<Request>) {
    drive_as_opened(theme, fleet, size, steps, |app| {
        app.sort = fleetop::tui::view::Sort::Name;
        setup(app)
    })
}

/// `drive_steps` with the app as it opens for a person: its default order.
pub(crate) fn drive_as_opened(
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

fn click(column: u16, row: u16) -> Action {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    Action::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    })
}

/// Filters to `node` and opens it: the steps.
fn detail_of(node: &str) -> Vec<Step> {
    let mut s: Vec<Step> = keys(&format!("/{node}")).into_iter().map(Step::Do).collect();
    s.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Enter))]);
    s
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

fn row<'a>(rows: &'a [Vec<String>], group: &str) -> &'a [String] {
    rows.iter()
        .find(|r| r[0] == group)
        .unwrap_or_else(|| panic!("no row {group}: {rows:?}"))
}

/// A Slurm node as `sinfo` gives it.
fn sched_node(
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
fn sched_arrives(nodes: Vec<(&str, fleetop::model::sched::SchedNode)>, jobs: Vec<fleetop::model::sched::Job>) -> Step {
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

fn mono() -> Theme {
    Theme::load("default", None, ColorDepth::Mono).expect("mono")
}

/// No cell of `buf` has a colour.
fn colourless(buf: &Buffer) -> bool {
    buf.content()
        .iter()
        .all(|c| matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset))
}

fn step_keys(s: &str) -> Vec<Step> {
    keys(s).into_iter().map(Step::Do).collect()
}

fn enabled(app: &mut App) {
    app.allowed.actions = true;
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

fn footer(buf: &Buffer) -> String {
    text(buf).lines().last().unwrap_or_default().to_string()
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
