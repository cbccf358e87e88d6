//! The heatmap and the dense wall: rows, cells, colours, sort, marks.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::detect::Thresholds;
use fleetop::model::action::NodeAction;
use fleetop::model::target::Target;
use fleetop::model::update::{Event, Update};
use fleetop::store::Store;
use fleetop::tui::app::{Action, App};
use fleetop::tui::theme::{ColorDepth, Theme};
use ratatui::buffer::Buffer;
use ratatui::style::Color;

use super::*;

#[test]
fn heatmap_at_80x24() {
    let buf = shown(16, 600, (80, 24), vec![]);
    insta::assert_snapshot!("heatmap_80x24", text(&buf));
}

#[test]
fn heatmap_wide() {
    let buf = shown(16, 600, (200, 40), vec![]);
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
fn sort_by_flags_puts_critical_nodes_first_and_m_cycles_the_metric() {
    // The order the heatmap opens in.
    let (buf, _) = drive_as_opened(theme(), fleet_updates(16, 8, 600), (120, 30), step_keys("m"), |_| {});
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
    let screen = text(&shown(6, 30, (100, 24), keys("  ")));
    assert!(screen.contains("2 marked"), "{screen}");
    assert_eq!(screen.matches('●').count(), 2);
}

#[test]
fn a_thousand_nodes_become_a_wall_that_fits_80x24() {
    let buf = shown(1024, 2, (80, 24), vec![]);
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
    let screen = text(&shown(300, 2, (80, 24), keys("w")));
    assert!(screen.contains("300 nodes"), "{screen}");
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
    let (buf, _) = drive_fleet(4, 60, (100, 30), vec![arrive()], |_| {});
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
    let screen = text(&drive_fleet(4, 60, (100, 30), steps, |_| {}).0);
    assert!(
        screen.contains("slurm mixed · job 4411 alice train 8 GPUs 1h"),
        "{screen}"
    );
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
    let screen = text(&shown(4, 60, (120, 30), keys("mm")));
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with("gpu01"))
        .unwrap_or_default();
    assert!(row.contains("°C") && !row.contains('%'), "{row}");
    assert!(screen.contains("25°C") && screen.contains("slowdown °C"), "{screen}");
    // Power (m m m): watts, and the legend says of what the % is.
    let screen = text(&shown(4, 60, (120, 30), keys("mmm")));
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with("gpu01"))
        .unwrap_or_default();
    assert!(row.contains('W') && !row.contains('%'), "{row}");
    assert!(screen.contains("100% of the power limit"), "{screen}");
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

#[test]
fn s_sorts_by_the_metric_and_capital_s_reverses_it_lowest_utilization_first() {
    let rows = rows_with_mean(&shown(16, 60, (120, 40), keys("s")));
    let down: Vec<f64> = rows.iter().filter_map(|r| r.1).collect();
    assert!(down.len() > 10 && down.windows(2).all(|w| w[0] >= w[1]), "{rows:?}");
    let rows = rows_with_mean(&shown(16, 60, (120, 40), keys("sS")));
    let up: Vec<f64> = rows.iter().filter_map(|r| r.1).collect();
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "{rows:?}");
    // The idle node (held, unused) is first; nodes without a mean stay last.
    assert!(up[0] < 10.0, "{rows:?}");
    let first_missing = rows.iter().position(|r| r.1.is_none()).unwrap_or(rows.len());
    assert!(rows[first_missing..].iter().all(|r| r.1.is_none()), "{rows:?}");
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
    let (buf, _) = drive_fleet(16, 60, (120, 40), steps, setup.clone());
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
    drive_fleet(16, 60, (120, 40), steps, setup);
    assert_eq!(*copied.lock().expect("lock"), ["gpu[01-05]"]);
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
    let (buf, _) = drive_fleet(16, 60, (80, 24), vec![sched()], |_| {});
    let screen = text(&buf);
    // Who holds it and for how long, fleetop's drain or anyone's; someone
    // else's reason after the flags (fleetop's own is node detail's).
    assert!(row(&screen, "gpu02").contains("drained 2h fleetop"), "{screen}");
    assert!(!row(&screen, "gpu02").contains('“'), "{screen}");
    assert!(
        row(&screen, "gpu03").contains("drained 3h alice") && row(&screen, "gpu03").contains("“maintenance”"),
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
    let (buf, _) = drive_fleet(16, 60, (160, 30), vec![sched()], |_| {});
    let screen = text(&buf);
    assert!(
        row(&screen, "gpu02").contains("drained 2h fleetop ") && !row(&screen, "gpu02").contains("XID 79"),
        "the reason never widens the column: {screen}"
    );
    // Node detail: who, how long, why.
    let mut steps = vec![sched()];
    steps.extend(detail_of("gpu02"));
    let (buf, _) = drive_fleet(16, 60, (120, 30), steps, |_| {});
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
        let (buf, _) = drive_fleet(16, 60, (120, 30), steps, |_| {});
        assert!(text(&buf).contains(says), "{}", text(&buf));
    }
    let mut steps = vec![sched()];
    steps.extend(detail_of("gpu03"));
    let (buf, _) = drive_fleet(16, 60, (120, 30), steps, |_| {});
    assert!(
        text(&buf).contains("slurm drained by alice 3h00m: maintenance"),
        "{}",
        text(&buf)
    );
}

#[test]
fn a_stale_nodes_row_says_how_old_its_numbers_are_sorts_apart_and_stays_out_of_the_totals() {
    let screen = text(&shown(16, 600, (120, 30), vec![]));
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
    let head = header(&shown(16, 600, (200, 40), vec![]));
    assert!(head.contains(&format!("util {}%", sum / n)), "{} in {head}", sum / n);
    // Sorted by the metric, either way, the stale node comes after the live ones.
    for k in ["s", "sS"] {
        let rows = rows_with_mean(&shown(16, 600, (120, 40), keys(k)));
        assert_eq!(
            rows.last().map(|r| r.0.as_str()),
            Some(stale_name.as_str()),
            "{k}: {rows:?}"
        );
    }
}

#[test]
fn the_wall_keeps_the_order_of_the_last_sort_while_the_numbers_move() {
    let ((targets, updates), later) = fleet_and_later(16, 20);
    let mut app = App::new(Store::new(targets, Thresholds::default()), theme(), NOW);
    for u in updates {
        fleetop::tui::dispatch::update(&mut app, Action::Store(u, NOW));
    }
    // The wall, sorted by the metric (from the default, worst first: name, then metric).
    for k in keys("wss") {
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
        let buf = drive(t.clone(), fleet_updates(16, 8, 600), size, vec![]);
        let screen = text(&buf);
        let cells = |name: &str| {
            let (row, _) = heat_row(&buf, name);
            // The GPU cells: after the status word, before the mean.
            let end = row.find('%').unwrap_or(row.len());
            row[..end].to_string()
        };
        // gpu15: xid and gpu_lost (crit) on a GPU: "ERR" leaves no room for
        // the mark beside the cell's gap, so the cell is the crit block.
        assert!(
            cells("gpu15").contains("ERR") && !cells("gpu15").contains("!ERR"),
            "{screen}"
        );
        let (row, y) = heat_row(&buf, "gpu15");
        let x = row[..row.find("ERR").expect("the lost GPU's cell")].chars().count() as u16;
        let block = t.crit_block();
        let cell = &buf[(x, y)];
        assert_eq!(cell.bg, block.bg.unwrap_or(Color::Reset), "{screen}");
        assert!(cell.modifier.contains(block.add_modifier), "{screen}");
        // gpu12: hot (warn).
        assert!(cells("gpu12").contains('*'), "{screen}");
        // One marker a flagged GPU: gpu06's eight persistence_off (warn).
        assert_eq!(cells("gpu06").matches('*').count(), 8, "{screen}");
        // Info flags (underused, power_capped) mark nothing.
        assert!(!cells("gpu07").contains(['!', '*']), "{screen}");
        assert!(!cells("gpu16").contains(['!', '*']), "{screen}");
        assert!(screen.contains("! crit * warn"), "the legend says it\n{screen}");
    }
}
