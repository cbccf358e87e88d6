//! The cluster actions' dialogs: drain, resume, return, scancel, signals.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::model::action::{ActionReport, Actor, NodeAction, NodeResult, Stage};
use fleetop::model::request::Request;
use fleetop::model::update::{Event, Update};
use fleetop::tui::app::{Action, App};

use super::*;

#[test]
fn drain_asks_a_reason_shows_the_exact_command_and_defaults_to_no() {
    let enabled = |app: &mut App| app.allowed.actions = true;
    let mut steps: Vec<Step> = vec![Step::Do(key(KeyCode::Char('D')))];
    steps.extend(keys("fan 'broken'").into_iter().map(Step::Do));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_fleet(4, 60, (80, 24), steps, enabled);
    insta::assert_snapshot!("confirm_drain_80x24", text(&buf));
    assert!(asked.is_empty(), "nothing runs before the confirmation");

    // Enter (or any key but y) cancels.
    let mut steps: Vec<Step> = vec![Step::Do(key(KeyCode::Char('D')))];
    steps.extend(keys("fan").into_iter().map(Step::Do));
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Enter))]);
    let (buf, asked) = drive_fleet(4, 60, (80, 24), steps, enabled);
    assert!(asked.is_empty());
    assert!(text(&buf).contains("drain cancelled: nothing was run"));
    // With marks, the dialog says so and names them, even from node detail.
    let mut steps: Vec<Step> = keys(" j ").into_iter().map(Step::Do).collect();
    steps.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Char('D')))]);
    let (buf, _) = drive_fleet(4, 60, (100, 30), steps, enabled);
    assert!(
        text(&buf).contains("drain 2 marked nodes: gpu01 gpu03"),
        "{}",
        text(&buf)
    );
}

#[test]
fn a_drain_of_a_node_someone_holds_says_so_first_and_shows_no_command_it_will_not_run() {
    let enabled = |app: &mut App| app.allowed.actions = true;
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
    let (buf, _) = drive_fleet(4, 60, (100, 30), steps, enabled);
    let screen = text(&buf);
    assert!(
        screen.contains("Already out of service, left as it is") && screen.contains("gpu03: drained by bob"),
        "{screen}"
    );
    // The confirmation shows gpu01's command only.
    let mut steps = vec![sched()];
    steps.extend(step_keys(" j Dfan"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_fleet(4, 60, (100, 30), steps, enabled);
    let screen = text(&buf);
    assert!(screen.contains("NodeName=gpu01"), "{screen}");
    assert!(!screen.contains("NodeName=gpu03"), "{screen}");
    // gpu03 alone: nothing to drain, nothing asked.
    let mut steps = vec![sched()];
    steps.extend(step_keys("jjDfan"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_fleet(4, 60, (100, 30), steps, enabled);
    assert!(asked.is_empty());
    assert!(
        text(&buf).contains("nothing to drain: gpu03 already out of service"),
        "{}",
        text(&buf)
    );
}

#[test]
fn yes_runs_the_plan_on_the_marked_nodes_and_shows_each_result() {
    let enabled = |app: &mut App| app.allowed.actions = true;
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
    let (buf, asked) = drive_fleet(4, 60, (100, 30), steps, enabled);
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
        app.allowed.actions = true;
        app.allowed.read_only = true;
    };
    let (buf, asked) = drive_fleet(4, 60, (80, 24), vec![Step::Do(key(KeyCode::Char('R')))], ro);
    assert!(text(&buf).contains("read-only mode: resume is off"));
    let [Request::Refused(plan, why)] = asked.as_slice() else {
        panic!("the refusal is logged: {asked:?}")
    };
    assert_eq!((plan.action, why.as_str()), (NodeAction::Resume, "read-only mode"));
    // Without a scheduler there is nothing to act on, and the screen says how to get one.
    let (buf, asked) = drive_fleet(4, 60, (80, 24), vec![Step::Do(key(KeyCode::Char('D')))], |_| {});
    assert!(asked.is_empty());
    assert!(text(&buf).contains("no scheduler: start with --slurm"));
}

#[test]
fn a_click_while_a_dialog_is_open_changes_nothing_it_acts_on() {
    let setup = |app: &mut App| app.allowed.actions = true;
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
    let (_, asked) = drive_fleet(16, 60, (120, 40), steps, setup);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.nodes, ["gpu01"]);
}

#[test]
fn capital_k_in_node_detail_cancels_the_gpus_job_after_showing_the_exact_scancel() {
    // gpu11 is the idle node: job 4848 holds its GPUs.
    let open = || {
        let mut s = detail_of("gpu11");
        s.push(Step::Do(key(KeyCode::Char('K'))));
        s
    };
    let setup = |app: &mut App| app.allowed.actions = true;
    let (buf, asked) = drive_fleet(16, 60, (120, 40), open(), setup);
    let screen = text(&buf);
    assert!(
        screen.contains("confirm scancel") && screen.contains("scancel 4848"),
        "{screen}"
    );
    assert!(asked.is_empty(), "nothing runs before y: {asked:?}");
    let mut steps = open();
    steps.push(Step::Do(key(KeyCode::Char('y'))));
    let (_, asked) = drive_fleet(16, 60, (120, 40), steps, setup);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.commands, [["scancel", "4848"]]);
    // Read-only: refused and logged, nothing asked.
    let ro = |app: &mut App| {
        app.allowed.actions = true;
        app.allowed.read_only = true;
    };
    let (buf, asked) = drive_fleet(16, 60, (120, 40), open(), ro);
    assert!(matches!(asked.as_slice(), [Request::Refused(..)]), "{asked:?}");
    assert!(text(&buf).contains("read-only mode: scancel is off"));
}

#[test]
fn x_in_node_detail_signals_the_gpus_processes_through_the_agent_after_asking() {
    let open = || detail_of("gpu11");
    let setup = |app: &mut App| app.allowed.bench = true;
    let mut steps = open();
    steps.push(Step::Do(key(KeyCode::Char('X'))));
    let (buf, asked) = drive_fleet(16, 60, (140, 40), steps, setup);
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
    let (_, asked) = drive_fleet(16, 60, (140, 40), steps, setup);
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
        app.allowed.bench = true;
        app.allowed.read_only = true;
    };
    let mut steps = open();
    steps.push(Step::Do(key(KeyCode::Char('x'))));
    let (_, asked) = drive_fleet(16, 60, (140, 40), steps, ro);
    assert!(matches!(asked.as_slice(), [Request::Refused(..)]), "{asked:?}");
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
    let (buf, asked) = drive_fleet(16, 600, (80, 24), on_alerts(), enabled);
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
    let (buf, asked) = drive_fleet(16, 600, (120, 30), steps, enabled);
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
    let (_, asked) = drive_fleet(16, 600, (120, 30), steps, enabled);
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
    let (_, asked) = drive_fleet(16, 600, (120, 30), steps, enabled);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(plan.reason.as_deref(), Some("fleetop: psu"));
    // Read-only: refused and logged, as a drain anywhere; no scheduler: said.
    let ro = |app: &mut App| {
        app.allowed.actions = true;
        app.allowed.read_only = true;
    };
    let (buf, asked) = drive_fleet(16, 600, (80, 24), on_alerts(), ro);
    let [Request::Refused(plan, why)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!((plan.action, why.as_str()), (NodeAction::Drain, "read-only mode"));
    assert!(text(&buf).contains("read-only mode: drain is off"));
    let (buf, asked) = drive_fleet(16, 600, (80, 24), on_alerts(), |_| {});
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
    let (buf, _) = drive_fleet(16, 600, (120, 30), steps, enabled);
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
    let (buf, _) = drive_fleet(4, 0, (120, 30), steps, enabled);
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
    let (buf, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jRy")), enabled);
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
    let (_, asked) = drive_fleet(4, 30, (100, 30), steps, enabled);
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
    let (buf, asked) = drive_fleet(4, 30, (100, 30), steps, enabled);
    assert!(asked.is_empty(), "{asked:?}");
    assert!(text(&buf).contains("not gpu02: nothing was run"), "{}", text(&buf));
    // Two such nodes marked: their names as a hostlist.
    let (buf, _) = drive_fleet(4, 30, (100, 30), with(step_keys("j jj R")), enabled);
    assert!(text(&buf).contains("type gpu[02,04] and Enter"), "{}", text(&buf));
    // A node fleetop drained keeps the plain y.
    let (_, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jjRy")), enabled);
    let [Request::Run(plan)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(
        (plan.nodes.as_slice(), plan.force),
        (["gpu03".to_string()].as_slice(), false)
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
    let (buf, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jT")), enabled);
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
    let (buf, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jTy")), enabled);
    let p = returned(&asked);
    assert!(matches!(p.nodes[0].step, Do::Bench { .. }), "{p:?}");
    assert_eq!((p.plan.commands[0][0].as_str(), p.force), ("RunBench", false));
    assert!(text(&buf).contains("return 1 node… a burn-in"), "{}", text(&buf));
    // s: the full suite.
    let (_, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jTsy")), enabled);
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
    let (_, asked) = drive_fleet(4, 30, (100, 30), steps, enabled);
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
    let (_, asked) = drive_fleet(4, 30, (100, 30), steps, enabled);
    assert!(matches!(returned(&asked).nodes[0].step, Do::Bench { .. }));
    assert_eq!(
        p.plan.commands,
        [["scontrol", "update", "NodeName=gpu02", "State=RESUME"]]
    );
    // Someone else's drain: y does nothing; the name typed forces it.
    let (_, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jjTy")), enabled);
    assert!(asked.is_empty(), "{asked:?}");
    let mut steps = with(step_keys("jjTgpu03"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (_, asked) = drive_fleet(4, 30, (100, 30), steps, enabled);
    let p = returned(&asked);
    assert!(
        p.force && p.plan.force && matches!(p.nodes[0].step, Do::Bench { .. }),
        "{p:?}"
    );
    // Read-only: refused and logged; no scheduler: said.
    let ro = |app: &mut App| {
        app.allowed.actions = true;
        app.allowed.read_only = true;
    };
    let (buf, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jT")), ro);
    let [Request::Refused(plan, why)] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!((plan.action, why.as_str()), (NodeAction::Return, "read-only mode"));
    assert!(text(&buf).contains("read-only mode: return to service is off"));
    let (buf, asked) = drive_fleet(4, 30, (100, 30), with(step_keys("jT")), |_| {});
    assert!(asked.is_empty());
    assert!(
        text(&buf).contains("no scheduler: start with --slurm"),
        "{}",
        text(&buf)
    );
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
            drive_fleet(4, 30, size, v, enabled);
        }
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
    let (buf, asked) = drive_fleet(16, 60, (120, 40), steps, enabled);
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
    let (buf, asked) = drive_fleet(16, 60, (120, 40), steps, enabled);
    let screen = text(&buf);
    assert!(!screen.contains("confirm scancel"), "{screen}");
    assert!(asked.is_empty(), "nothing runs: {asked:?}");
    assert!(
        screen.contains("job 4848 is not on gpu11 in Slurm, which lists jobs 4411, 4412 there"),
        "{screen}"
    );
}
