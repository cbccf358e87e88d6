//! The groups screen: by job, partition, rack and pod.

use crossterm::event::KeyCode;
use fleetop::tui::theme::{ColorDepth, Theme};
use ratatui::style::Color;

use super::*;

#[test]
fn capital_j_lists_jobs_the_idlest_first_and_enter_shows_their_nodes() {
    let buf = shown(16, 60, (120, 40), keys("J"));
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
    let names: Vec<String> = rows_with_mean(&shown(16, 60, (120, 40), steps))
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(names, ["gpu11"]);
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
    let (buf, _) = drive_fleet(16, 60, (80, 24), by_partition(), |_| {});
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
    let (buf, _) = drive_fleet(16, 60, (80, 24), steps, |_| {});
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
    let (buf, _) = drive_fleet(16, 60, (80, 24), by_rack(), with_racks);
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
    let (buf, _) = drive_fleet(16, 60, (80, 24), steps, with_racks);
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
        let (buf, _) = drive_fleet(16, 60, (80, 24), steps, with_racks);
        rows_with_mean(&buf).into_iter().map(|r| r.0).collect::<Vec<_>>()
    };
    assert_eq!(filter("debug"), ["gpu01"]);
    assert_eq!(filter("R02"), ["gpu05", "gpu06", "gpu07", "gpu08"]);
    assert_eq!(filter("debug,r02"), ["gpu01", "gpu05", "gpu06", "gpu07", "gpu08"]);
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
            let (buf, _) = drive_fleet(16, 60, (width, 40), steps, with_racks);
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
