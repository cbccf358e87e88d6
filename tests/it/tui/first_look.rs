//! What an SRE sees first, at 80x24 and wide: the worst node on top, rows
//! out of sight counted, no cell or flag cut or glued, another person's
//! reason on the row, the vendor's own words, and a return that says where
//! it stands. (A lost GPU's links: `detail`.)

use crossterm::event::KeyCode;
use fleetop::model::flag::FlagKind;
use fleetop::model::update::Update;
use ratatui::buffer::Buffer;

use super::{
    NOW, Step, detail_of, drive_as_opened, drive_steps, fleet_updates, key, mono, report, sched_arrives, sched_node,
    step_keys, text, theme,
};

/// The heatmap's node rows: those that start with a node's name.
fn node_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| l.trim_start_matches(['●', ' ']).starts_with("gpu"))
        .map(String::from)
        .collect()
}

/// The heatmap as it opens, after `steps`.
fn heatmap(nodes: u32, size: (u16, u16), steps: Vec<Step>) -> Buffer {
    drive_as_opened(theme(), fleet_updates(nodes, 8, 120), size, steps, |_| {}).0
}

#[test]
fn the_heatmap_opens_worst_first_and_name_order_is_one_s_away() {
    let screen = text(&heatmap(32, (80, 24), vec![]));
    let rows = node_rows(&screen);
    let rank = |row: &String| match row.split_whitespace().nth(1).unwrap_or("") {
        "crit" | "unrch" => 0,
        "warn" => 1,
        _ => 2,
    };
    let ranks: Vec<u8> = rows.iter().map(rank).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "worst first:\n{screen}");
    // Every crit node of the header is above the fold.
    let crit_in_header: usize = screen
        .lines()
        .next()
        .and_then(|l| l.split(" crit").next()?.split_whitespace().last()?.parse().ok())
        .expect("the header counts crit nodes");
    let crit_rows = rows
        .iter()
        .filter(|r| r.split_whitespace().nth(1) == Some("crit"))
        .count();
    assert_eq!(crit_rows, crit_in_header, "{screen}");
    assert!(screen.contains("sort flags"), "{screen}");
    let screen = text(&heatmap(32, (80, 24), step_keys("s")));
    assert!(screen.contains("sort name"), "{screen}");
    assert!(node_rows(&screen)[0].contains("gpu01"), "{screen}");
}

#[test]
fn rows_out_of_sight_are_counted_on_the_top_edge() {
    let screen = text(&heatmap(32, (80, 24), vec![]));
    let shown = node_rows(&screen).len();
    let edge = screen.lines().nth(2).unwrap_or_default();
    assert!(edge.contains(&format!("↓ {} below", 32 - shown)), "{screen}");
    assert!(!edge.contains("above"), "{screen}");
    // The cursor taken to the last row: all the rest are above.
    let screen = text(&heatmap(32, (80, 24), vec![Step::Do(key(KeyCode::End))]));
    let edge = screen.lines().nth(2).unwrap_or_default();
    assert!(edge.contains(&format!("↑ {} above", 32 - shown)), "{screen}");
    assert!(!edge.contains("below"), "{screen}");
    // All in view: nothing to count.
    let screen = text(&heatmap(4, (80, 24), vec![]));
    assert!(!screen.contains("above") && !screen.contains("below"), "{screen}");
}

/// The GPU cells of a heatmap row: the tokens between the status word and
/// the node's mean ("96%").
fn cells(row: &str) -> Vec<String> {
    let words: Vec<&str> = row.trim_start_matches(['●', ' ']).split_whitespace().collect();
    // A node with no numbers yet (connecting) has no cells.
    let Some(mean) = words.iter().position(|w| w.ends_with('%')) else {
        return Vec::new();
    };
    // name, status (and its age: "unrch 9m")
    let start = if words
        .get(2)
        .is_some_and(|w| w.ends_with('m') || w.ends_with('s') || w.ends_with('h'))
    {
        3
    } else {
        2
    };
    words[start.min(mean)..mean].iter().map(|w| w.to_string()).collect()
}

#[test]
fn no_heatmap_cell_touches_its_neighbour_at_any_width() {
    // 80 columns, and narrower until the cells are three columns wide.
    for width in [80, 72, 64, 60] {
        for t in [theme(), mono()] {
            let screen = text(&drive_as_opened(t, fleet_updates(32, 8, 120), (width, 40), vec![], |_| {}).0);
            for row in node_rows(&screen) {
                for cell in cells(&row) {
                    let value = cell.trim_start_matches(['!', '*']);
                    let whole = value.chars().all(|c| c.is_ascii_digit()) && value.len() <= 3
                        || ["ERR", "ER"].contains(&value)
                        || value.chars().all(|c| c == '┄');
                    assert!(
                        whole && cell.len() - value.len() <= 1,
                        "{width} columns: a glued cell {cell:?} in {row:?}\n{screen}"
                    );
                }
            }
        }
    }
}

/// Whether `word` is a flag's name (with "×8"), a count of those left out
/// ("+3"), or empty.
fn whole_flag(word: &str, short: bool) -> bool {
    let name = word.split('×').next().unwrap_or("");
    word.strip_prefix('+').is_some_and(|n| n.parse::<u32>().is_ok())
        || FlagKind::ALL
            .iter()
            .any(|k| name == if short { k.short() } else { k.name() })
}

#[test]
fn the_flags_on_a_heatmap_row_are_whole_names_or_a_count() {
    for width in [80, 100] {
        let screen = text(&heatmap(32, (width, 40), vec![]));
        for row in node_rows(&screen) {
            let after_mean = row.split('%').nth(1).unwrap_or("");
            for word in after_mean.split_whitespace() {
                assert!(
                    whole_flag(word, false) || whole_flag(word, true) || ["free", "stale"].contains(&word),
                    "{width} columns: {word:?} cut in {row:?}\n{screen}"
                );
            }
        }
    }
}

#[test]
fn node_details_gpu_flags_are_whole_at_80_and_at_200_columns() {
    use fleetop_agent::sim::Scenario;
    let plan = fleetop::ingest::demo::plan(32, 8, 7, NOW - 600_000);
    let cfg = plan
        .iter()
        .find(|c| c.scenario == Scenario::EccUncorrectable)
        .expect("the ECC node");
    for size in [(80, 24), (200, 50)] {
        let (buf, _) = drive_steps(
            theme(),
            fleet_updates(32, 8, 60),
            size,
            detail_of(&cfg.hostname),
            |_| {},
        );
        let screen = text(&buf);
        let head = screen.lines().find(|l| l.starts_with("GPU ")).expect("the GPU table");
        let at = head.find("flags").expect("a flags column");
        let rows: Vec<&str> = screen
            .lines()
            .skip_while(|l| !l.starts_with("GPU "))
            .skip(1)
            .take_while(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .collect();
        let mut any = false;
        for row in rows {
            for word in row.get(at..).unwrap_or("").split_whitespace() {
                any = true;
                assert!(whole_flag(word, true), "{size:?}: {word:?} cut in {row:?}\n{screen}");
            }
        }
        assert!(any, "the ECC node's GPU has flags\n{screen}");
    }
}

#[test]
fn someone_elses_drain_shows_their_reason_on_the_row() {
    let steps = vec![sched_arrives(
        vec![
            (
                "gpu02",
                sched_node("drained", Some("fan swap TKT-7"), Some("bob"), Some(NOW - 3_600_000)),
            ),
            ("gpu03", sched_node("idle", None, None, None)),
        ],
        vec![],
    )];
    let screen = text(&heatmap(4, (120, 24), steps));
    let row = node_rows(&screen)
        .into_iter()
        .find(|r| r.contains("gpu02"))
        .expect("gpu02");
    assert!(row.contains("bob") && row.contains("“fan swap TKT-7”"), "{screen}");
    let row = node_rows(&screen)
        .into_iter()
        .find(|r| r.contains("gpu03"))
        .expect("gpu03");
    assert!(!row.contains('“'), "{screen}");
}

#[test]
fn do_now_is_wrapped_not_cut_at_80_columns() {
    use fleetop_agent::sim::Scenario;
    let plan = fleetop::ingest::demo::plan(16, 8, 7, NOW - 600_000);
    let cfg = plan
        .iter()
        .find(|c| c.scenario == Scenario::Xid79)
        .expect("the XID 79 node");
    let (buf, _) = drive_steps(
        theme(),
        fleet_updates(16, 8, 60),
        (80, 24),
        detail_of(&cfg.hostname),
        |_| {},
    );
    let screen = text(&buf);
    let said: String = screen
        .lines()
        .skip_while(|l| !l.starts_with("do now "))
        .take(2)
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    // The do-now's last words ("... replace the hardware (RMA)").
    assert!(said.ends_with("(RMA)"), "{said:?}\n{screen}");
}

#[test]
fn an_amd_node_speaks_amd_and_names_each_xgmi_peer() {
    let fleet = || fleet_updates(32, 8, 60);
    let (_, updates) = fleet();
    let amd = updates
        .iter()
        .find_map(|u| match u {
            Update::Node {
                event: fleetop::model::update::Event::Info(info),
                node,
            } if info.vendor() == fleetop::model::sample::Vendor::Amd => Some(*node),
            _ => None,
        })
        .expect("the demo's MI300X rack");
    let name = format!("gpu{:02}", amd + 1);
    let mut steps = detail_of(&name);
    steps.extend(step_keys("2"));
    let (buf, _) = drive_steps(theme(), fleet(), (200, 50), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("GFX MHz") && !screen.contains("SM MHz"), "{screen}");
    assert!(screen.contains("2 XGMI") && !screen.contains("NVLink"), "{screen}");
    let head = screen
        .lines()
        .find(|l| l.starts_with("link state"))
        .expect("the links pane");
    assert!(head.contains("peer"), "{screen}");
    // Each link names its peer's bus ("28:00"), not "-".
    let at = head.find("peer").unwrap_or(0);
    let links: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.starts_with("link state"))
        .skip(1)
        .take_while(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    assert!(!links.is_empty(), "{screen}");
    for l in links {
        let peer = l.get(at..).unwrap_or("").split_whitespace().next().unwrap_or("");
        assert!(peer.contains(':'), "{l:?}\n{screen}");
    }
    // Its burn-in says what runs there: XGMI, no NCCL.
    let setup = |app: &mut fleetop::tui::app::App| {
        app.allowed.bench = true;
        app.allowed.actions = true;
    };
    let mut steps = detail_of(&name);
    steps.extend(step_keys("B"));
    let screen = text(&drive_steps(theme(), fleet(), (120, 40), steps, setup).0);
    assert!(screen.contains("XGMI") && !screen.contains("NCCL"), "{screen}");
}

#[test]
fn a_return_shows_each_nodes_burn_in_as_it_runs_and_its_result_whole() {
    use fleetop::model::action::NodeAction;
    use fleetop::model::bench::BenchUpdate;
    let setup = |app: &mut fleetop::tui::app::App| {
        app.allowed.actions = true;
        app.allowed.bench = true;
        app.sort = fleetop::tui::view::Sort::Name;
    };
    let drained = sched_node(
        "drained",
        Some("fleetop: xid on gpu3: reboot_node"),
        Some("root"),
        Some(NOW - 7_200_000),
    );
    let bench = |event: BenchUpdate| Step::Arrive(Update::Bench { node: 1, event });
    let running = || {
        let mut steps = vec![sched_arrives(vec![("gpu02", drained.clone())], vec![])];
        steps.extend(step_keys("jTy"));
        steps.push(bench(BenchUpdate::Started { suite: "quick".into() }));
        steps.push(bench(BenchUpdate::Progress {
            step: "nvlink_bw".into(),
            done: 3,
            total: 10,
        }));
        steps
    };
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 30), (100, 30), running(), setup);
    let screen = text(&buf);
    assert!(screen.contains("gpu02  burn-in [3/10] nvlink_bw"), "{screen}");
    // The result: a long why wrapped under its node, its last words shown.
    let why = "burn-in failed: nvlink_bw GPU 3: 212 GB/s, under the floor of 300 GB/s for an H100 SXM; \
               the node stays drained until a person looks at its links";
    let mut report = report(NodeAction::Return, "gpu02", "", why);
    report.results[0].ok = false;
    let mut steps = running();
    steps.push(Step::Arrive(Update::ActionDone(std::sync::Arc::new(report))));
    let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 30), (80, 24), steps, setup);
    let screen = text(&buf);
    assert!(
        screen.contains("FAIL") && screen.contains("looks at its links"),
        "{screen}"
    );
}
