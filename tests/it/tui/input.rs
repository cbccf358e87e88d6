//! The `/` filter, the `:` command line and the mouse.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::model::request::Request;
use fleetop::tui::app::Action;

use super::*;

#[test]
fn filter_by_flag_kind_and_by_hostlist() {
    let mut a = keys("/throttled");
    a.push(key(KeyCode::Enter));
    let buf = shown(16, 600, (120, 30), a);
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
    let screen = text(&shown(16, 60, (120, 30), a));
    assert!(
        screen.contains("3 of 16 nodes") && screen.contains("gpu03") && !screen.contains("gpu04"),
        "{screen}"
    );
    // A bad expression is said, not swallowed.
    let mut a = keys("/gpu[03-01]");
    a.push(key(KeyCode::Enter));
    let screen = text(&shown(4, 60, (120, 30), a));
    assert!(screen.contains("bad hostlist 'gpu[03-01]'"), "{screen}");
}

#[test]
fn a_node_with_a_critical_flag_is_not_ok_and_the_filters_say_health() {
    // The status column says the worst severity of a reachable node.
    let screen = text(&shown(16, 600, (120, 30), vec![]));
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
        text(&shown(16, 600, (120, 30), a))
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

#[test]
fn tab_completes_command_and_node_names_on_the_colon_line() {
    let run = |line: &str| drive_fleet(16, 60, (80, 24), command_steps(line), |_| {}).0;
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
    let (buf, _) = drive_fleet(16, 60, (80, 24), steps, |_| {});
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
        let (buf, _) = drive_fleet(16, 60, (80, 24), steps, |_| {});
        let screen = text(&buf);
        assert!(
            screen.lines().nth(2).is_some_and(|l| l.starts_with(" gpu07 ")),
            "{line}\n{screen}"
        );
    }
    let mut steps = command_steps("node nosuch");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_fleet(16, 60, (80, 24), steps, |_| {});
    assert_eq!(footer(&buf).trim(), "no node nosuch");
}

#[test]
fn colon_drain_opens_the_drain_dialog_with_the_reason_and_runs_nothing() {
    let mut steps = command_steps("node gpu03");
    steps.push(Step::Do(key(KeyCode::Enter)));
    steps.extend(command_steps("drain xid"));
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_fleet(16, 60, (80, 24), steps, enabled);
    let screen = text(&buf);
    assert!(screen.contains("drain the node in view: gpu03"), "{screen}");
    assert!(screen.contains("xid"), "{screen}");
    assert!(asked.is_empty(), "nothing runs before the confirmation");
    // Enter: the exact command, waiting for y.
    let mut more = command_steps("drain xid");
    more.extend([Step::Do(key(KeyCode::Enter)), Step::Do(key(KeyCode::Enter))]);
    let (buf, asked) = drive_fleet(16, 60, (80, 24), more, enabled);
    assert!(text(&buf).contains("'Reason=fleetop: xid'"), "{}", text(&buf));
    assert!(asked.is_empty());
    // Read-only: refused and logged, as D is.
    let mut ro = command_steps("drain xid");
    ro.push(Step::Do(key(KeyCode::Enter)));
    let (buf, asked) = drive_fleet(16, 60, (80, 24), ro, |app| {
        app.allowed.actions = true;
        app.allowed.read_only = true;
    });
    assert!(footer(&buf).contains("read-only mode: drain is off"), "{}", text(&buf));
    assert!(matches!(asked.as_slice(), [Request::Refused(..)]), "{asked:?}");
}

#[test]
fn an_unknown_command_says_so_in_one_footer_line_and_filter_sort_q_work() {
    let mut steps = command_steps("frobnicate now");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_fleet(16, 60, (80, 24), steps, |_| {});
    let f = footer(&buf);
    assert!(f.starts_with(" unknown command :frobnicate"), "{}", text(&buf));
    assert!(
        f.chars().count() <= 80 && f.contains("node") && f.contains("drain"),
        "{f}"
    );
    // :filter is /.
    let mut steps = command_steps("filter xid");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_fleet(16, 600, (120, 30), steps, |_| {});
    let names: Vec<String> = rows_with_mean(&buf).into_iter().map(|r| r.0).collect();
    assert!(!names.is_empty() && names.len() < 16, "{}", text(&buf));
    assert!(footer(&buf).contains("filter xid"), "{}", text(&buf));
    // :sort -metric is s then S.
    let mut steps = command_steps("sort -metric");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_fleet(16, 600, (120, 30), steps, |_| {});
    assert!(footer(&buf).contains("sort metric reversed"), "{}", text(&buf));
    // :help opens help.
    let mut steps = command_steps("help");
    steps.push(Step::Do(key(KeyCode::Enter)));
    let (buf, _) = drive_fleet(4, 60, (80, 24), steps, |_| {});
    assert!(text(&buf).contains("command: node NAME"), "{}", text(&buf));
}
