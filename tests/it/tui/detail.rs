//! Node detail: the GPUs, the panes, the history and the timeline.

use crossterm::event::KeyCode;
use fleetop::ingest::demo;
use fleetop::model::action::NodeAction;
use fleetop::model::update::{Event, Update};
use fleetop::tui::app::Action;
use fleetop::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

use super::*;

#[test]
fn node_detail_at_80x24_and_wide() {
    // Down twice, then open the third node.
    let mut a = keys("jj");
    a.push(key(KeyCode::Enter));
    let buf = shown(16, 600, (80, 24), a.clone());
    insta::assert_snapshot!("detail_80x24", text(&buf));
    a.extend(keys("2"));
    let buf = shown(16, 600, (200, 50), a);
    insta::assert_snapshot!("detail_200x50_nvlink", text(&buf));
}

#[test]
fn a_gpu_that_fell_off_the_bus_shows_its_nvlinks_as_unknown_never_up_and_without_rates() {
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
    let (buf, _) = drive_fleet(16, 60, (120, 50), steps, |_| {});
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
    // Its last rates are history, not now.
    let pane: Vec<&str> = screen.lines().skip_while(|l| !l.starts_with("link state")).collect();
    assert!(!pane.iter().any(|l| l.contains("B/s")), "{screen}");
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

#[test]
fn at_80_columns_node_detail_keeps_flags_ecc_xid_and_a_lost_gpu_says_so_whole() {
    let mut steps: Vec<Action> = keys("/gpu_lost");
    steps.push(key(KeyCode::Enter));
    steps.push(key(KeyCode::Enter));
    let buf = shown(16, 60, (80, 24), steps);
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
fn node_detail_says_the_most_urgent_action_and_the_xid_codes() {
    // The node whose GPU fell off the bus (XID 79), with the ten minutes of
    // history the XID happened in: the diagnosis, and the code beside the
    // reason on the lost GPU's row.
    let open = |filter: &str| {
        let mut steps: Vec<Action> = keys(filter);
        steps.push(key(KeyCode::Enter));
        steps.push(key(KeyCode::Enter));
        shown(16, 600, (80, 24), steps)
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

#[test]
fn node_detail_names_the_nodes_partitions_and_rack() {
    let mut steps = vec![partitions_arrive()];
    steps.extend(detail_of("gpu01"));
    let (buf, _) = drive_fleet(16, 60, (80, 24), steps, with_racks);
    let screen = text(&buf);
    assert!(screen.contains("slurm mixed in debug,gpu"), "{screen}");
    assert!(screen.contains("rack r01 · "), "{screen}");
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
    let (buf, _) = drive_fleet(16, 600, (80, 24), steps(""), |_| {});
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
    let (buf, _) = drive_fleet(16, 600, (80, 24), steps("j"), |_| {});
    let screen = text(&buf);
    assert!(
        screen.contains("newest first · 2-") && !screen.contains("now drained"),
        "{screen}"
    );
    // A node nothing has happened to says what will show there.
    let mut s = detail_of("gpu02");
    s.push(Step::Do(key(KeyCode::Char('5'))));
    s.extend(step_keys("jjG"));
    let (buf, _) = drive_fleet(4, 0, (80, 24), s, |_| {});
    assert!(
        text(&buf).contains("Nothing has happened to this node"),
        "{}",
        text(&buf)
    );
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
        let (buf, _) = drive_fleet(16, 600, (80, 24), detail_of(node), |_| {});
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

#[test]
fn node_detail_at_160_columns_shows_each_pane_title_once_over_two_panes() {
    let (buf, _) = drive_fleet(16, 600, (160, 50), detail_of("gpu03"), |_| {});
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

/// The process pane says who runs each GPU process and what it is, as
/// nvitop does: the owner on the node and the command line.
#[test]
fn the_process_pane_names_each_processs_owner_and_command_line() {
    let mut steps = detail_of("gpu11");
    steps.push(Step::Do(key(KeyCode::Char('4'))));
    let (buf, _) = drive_fleet(16, 60, (140, 40), steps, |_| {});
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
    let (buf, _) = drive_fleet(16, 600, (120, 40), steps, |_| {});
    let screen = text(&buf);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("CRIT") || l.starts_with("WARN") || l.starts_with("INFO"))
        .collect();
    assert!(rows.len() >= 2, "{screen}");
    assert!(rows.iter().all(|l| l.contains("gpu02")), "{screen}");
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
