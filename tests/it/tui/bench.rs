//! Burn-in: the dialog, the bench screen, its verdicts and flags.

use crossterm::event::KeyCode;
use fleetop::model::request::Request;
use fleetop::model::update::Update;
use fleetop::tui::app::App;

use super::*;

#[test]
fn burn_in_on_a_node_with_a_job_or_someone_elses_hold_names_them_and_needs_the_name_typed() {
    let setup = |app: &mut App| {
        app.allowed.bench = true;
        app.allowed.actions = true;
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
    let (buf, asked) = drive_fleet(3, 30, (120, 30), steps, setup);
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
    let (_, asked) = drive_fleet(3, 30, (120, 30), steps, setup);
    assert!(matches!(asked.as_slice(), [Request::Bench { .. }]), "{asked:?}");
    // Someone else's hold is named with who and why.
    let mut steps = vec![sched()];
    steps.extend(step_keys("jB"));
    let (buf, asked) = drive_fleet(3, 30, (120, 30), steps, setup);
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
        app.allowed.bench = true;
        app.allowed.actions = true;
    };
    // Any key but y cancels.
    let steps = vec![Step::Do(key(KeyCode::Char('B'))), Step::Do(key(KeyCode::Enter))];
    let (buf, asked) = drive_fleet(3, 30, (100, 30), steps, setup);
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
    let (buf, asked) = drive_fleet(3, 30, (120, 30), steps, setup);
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
    let (buf, _) = drive_fleet(3, 30, (140, 30), steps2, setup);
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
        app.allowed.bench = true;
        app.allowed.actions = true;
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
    let (buf, asked) = drive_fleet(2, 30, (120, 30), steps, setup);
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
    let (buf, asked) = drive_fleet(2, 30, (120, 30), steps, setup);
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
    let (buf, _) = drive_fleet(2, 30, (120, 30), steps, |_| {});
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
    let (buf, _) = drive_fleet(3, 30, (120, 30), steps, |_| {});
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
    let (buf, _) = drive_fleet(3, 30, (120, 30), steps, |_| {});
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
    let (buf, _) = drive_fleet(3, 30, (120, 30), steps, |_| {});
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
    let (buf, _) = drive_fleet(3, 30, (120, 30), steps, |_| {});
    let screen = text(&buf);
    assert!(screen.contains("alerts") && !active(&screen), "{screen}");
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
    let setup = |app: &mut App| app.allowed.bench = true;
    let (buf, _) = drive_fleet(2, 30, (120, 30), steps, setup);
    let screen = text(&buf);
    assert!(screen.contains(&"█".repeat(20)) && screen.contains("50/10"), "{screen}");
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
    let (buf, _) = drive_fleet(2, 30, (120, 30), steps, |_| {});
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
