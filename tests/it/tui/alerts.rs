//! The alerts screen: rows, folding, the full alert, quieting.

use crossterm::event::KeyCode;
use fleetop::ingest::demo;
use fleetop::model::request::Request;
use fleetop::model::update::{Event, Update};

use super::*;

#[test]
fn alerts_at_80x24_and_wide_and_enter_opens_the_node() {
    let buf = shown(16, 600, (80, 24), vec![key(KeyCode::Tab)]);
    insta::assert_snapshot!("alerts_80x24", text(&buf));
    let buf = shown(16, 600, (200, 40), vec![key(KeyCode::Tab)]);
    insta::assert_snapshot!("alerts_200x40", text(&buf));
    // The first alert (most severe, oldest) opens its node, GPU selected.
    let first_alert_node = text(&buf)
        .lines()
        .nth(4)
        .and_then(|l| l.split_whitespace().nth(1))
        .map(String::from)
        .expect("a row");
    let buf = shown(16, 600, (120, 30), vec![key(KeyCode::Tab), key(KeyCode::Enter)]);
    let screen = text(&buf);
    let title = screen.lines().nth(2).expect("title");
    assert!(
        title.contains(&first_alert_node),
        "{title} should name {first_alert_node}"
    );
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
    let (buf, _) = drive_fleet(20, 60, (140, 40), steps, |_| {});
    let screen = text(&buf);
    let do_now = screen.lines().find(|l| l.contains("do now")).unwrap_or_default();
    assert!(
        do_now.contains("replace the hardware (RMA), then T: burn-in and return (drained by fleetop 13m)"),
        "{screen}"
    );
    assert!(!do_now.contains("drain, then"), "never a step already done: {do_now}");
    // The alerts screen: the node's rows say it is handled, and how far.
    let steps = vec![drained(), Step::Do(key(KeyCode::Tab))];
    let (buf, _) = drive_fleet(20, 60, (160, 40), steps, |_| {});
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
    let (buf, _) = drive_fleet(20, 60, (140, 40), steps, |_| {});
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
    let (buf, _) = drive_fleet(20, 60, (140, 40), steps, |_| {});
    let screen = text(&buf);
    let do_now = screen.lines().find(|l| l.contains("do now")).unwrap_or_default();
    assert!(
        do_now.contains("T: return it to service (burn-in passed 23:59Z)"),
        "{screen}"
    );
}

#[test]
fn an_alert_says_what_it_means_what_to_do_and_where_the_runbook_is() {
    for size in [(80, 24), (160, 40)] {
        let buf = shown(16, 600, size, vec![key(KeyCode::Tab)]);
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
fn the_idle_gpus_of_one_job_are_one_alert_row_and_z_unfolds_them() {
    // The demo's idle node: a job holds all 8 GPUs at 0%.
    let buf = shown(16, 660, (120, 40), vec![key(KeyCode::Tab)]);
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
    let buf = shown(16, 660, (120, 40), vec![key(KeyCode::Tab), key(KeyCode::Char('z'))]);
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
    let (buf, asked) = drive_fleet(16, 60, (120, 40), steps, |_| {});
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
fn a_folded_idle_row_says_its_job_once() {
    let buf = shown(16, 660, (200, 40), vec![key(KeyCode::Tab)]);
    let screen = text(&buf);
    let row = screen
        .lines()
        .find(|l| l.starts_with("WARN") && l.contains(" idle "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(row.matches("4848").count(), 1, "{row}");
    assert!(row.contains("job 4848: 8 GPUs idle at 0% for "), "{row}");
}

#[test]
fn alerts_and_node_detail_speak_in_durations_and_sizes_and_one_name_for_a_stuck_gpu() {
    let buf = shown(16, 600, (200, 40), vec![key(KeyCode::Tab)]);
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
    let screen = text(&shown(16, 600, (200, 40), a));
    assert!(!screen.contains("nvml_stuck") && !screen.contains(" ms"), "{screen}");
    assert!(screen.contains("gpu_stuck: "), "{screen}");
}
