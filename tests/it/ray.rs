//! `--ray` where no Ray answers, or where the answer is given to the
//! console directly: bad addresses are one-line errors, an unreachable Ray
//! leaves the export whole with `ray_error` saying why, and the console's
//! drain dialog sends Ray's DrainNode for the node's Ray id (no resume). A
//! real Ray (head, worker, GPU actors, drains through its GCS) is in
//! tests/env/ray.rs.

use std::time::Duration;

use fleetop::export::Snapshot;

use crate::{RefusedPort, fleetop, start_agent};

/// A loopback port that refuses connections.
fn closed() -> String {
    format!("127.0.0.1:{}", RefusedPort::for_the_run())
}

#[test]
fn a_bad_or_unreachable_ray_is_one_line_and_nothing_is_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let drain = |url: &str, gcs: &str| {
        fleetop()
            .env("FLEETOP_AUDIT_LOG", &audit)
            .args([
                "--ray",
                url,
                "--ray-gcs",
                gcs,
                "node",
                "drain",
                "gpu01",
                "--reason",
                "r",
                "--yes",
            ])
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs")
    };
    let out = drain("ftp://head:8265", &closed());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--ray ftp://head:8265: not an http(s) URL"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let out = drain(&format!("http://{}", closed()), &closed());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Ray's dashboard at") || err.contains("Ray's GCS at"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Nothing was planned, so nothing was logged as sent.
    assert!(!audit.exists(), "{:?}", std::fs::read_to_string(&audit));

    // Ray has no undrain: said before anything is read.
    let out = fleetop()
        .args(["--ray", "http://head:8265", "node", "resume", "gpu01", "--yes"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Ray has no undrain"));
}

#[test]
fn an_unreachable_ray_leaves_the_export_whole_and_says_why() {
    let _agent = start_agent(&crate::HERMETIC_AGENT);
    let port = _agent.port();
    let out = fleetop()
        .args(["export", "--once", "--hosts", &format!("127.0.0.1:{port}")])
        .args(["--ray", &format!("http://{}", closed()), "--ray-gcs", &closed()])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("export JSON");
    let why = snap.ray_error.unwrap_or_default();
    assert!(why.starts_with("Ray's"), "{why}");
    assert!(snap.ray_read_at.is_none());
    assert_eq!(snap.nodes.len(), 1);
    assert!(snap.nodes[0].ray.is_none());
    assert!(!snap.nodes[0].gpus.is_empty(), "the node's own data is all there");
}

/// A port that accepts and then says nothing (a hung GCS, a dashboard
/// that never answers), or trickles a byte a second after its headers.
fn silent(trickle: bool) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().take(32).flatten() {
            if trickle {
                let mut c = c.try_clone().expect("clone");
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut buf = [0u8; 4096];
                    let _ = c.read(&mut buf);
                    let _ = c.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
                    );
                    for _ in 0..60 {
                        std::thread::sleep(Duration::from_secs(1));
                        if c.write_all(b" ").is_err() {
                            return;
                        }
                    }
                });
            }
            held.push(c);
        }
    });
    addr
}

/// A GCS that accepts and never answers, a dashboard that trickles: the
/// export still ends, with every agent's data and `ray_error` saying why.
#[test]
fn a_hung_gcs_or_a_trickling_dashboard_still_gives_ray_error() {
    let _agent = start_agent(&crate::HERMETIC_AGENT);
    let port = _agent.port();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[ray]\ntimeout = \"2s\"\n").expect("config");
    // Ray's own bound longer than the export's wait: the document still
    // says why Ray's part is missing.
    let slow = dir.path().join("slow.toml");
    std::fs::write(&slow, "[ray]\ntimeout = \"60s\"\n").expect("config");
    let out = fleetop()
        .arg("--config")
        .arg(&slow)
        .args([
            "export",
            "--once",
            "--timeout",
            "2s",
            "--hosts",
            &format!("127.0.0.1:{port}"),
        ])
        .args([
            "--ray",
            &format!("http://{}", silent(true)),
            "--ray-gcs",
            &silent(false),
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("export JSON");
    assert_eq!(
        snap.ray_error.as_deref(),
        Some("Ray did not answer within --timeout 2s"),
        "{snap:?}"
    );
    // Both hung: nothing fails fast, only the deadline ends the read.
    for (dashboard, gcs) in [(silent(true), silent(false)), (silent(false), silent(false))] {
        let out = fleetop()
            .arg("--config")
            .arg(&cfg)
            .args(["export", "--once", "--hosts", &format!("127.0.0.1:{port}")])
            .args(["--ray", &format!("http://{dashboard}"), "--ray-gcs", &gcs])
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("export JSON");
        let why = snap.ray_error.unwrap_or_default();
        // Whichever 2 s bound spoke first: the read's, the dashboard's, or
        // tonic's for the GCS request.
        assert!(
            why.contains("within 2 s") || why.contains("Timeout expired"),
            "dashboard {dashboard}, gcs {gcs}: {why:?}"
        );
        assert!(!snap.nodes[0].gpus.is_empty());
    }
}

mod console {
    use std::sync::Arc;

    use crossterm::event::KeyCode;
    use fleetop::model::action::{NodeAction, Scheduler};
    use fleetop::model::ray::{RayNode, RayNodeStatus, RaySnapshot};
    use fleetop::model::request::Request;
    use fleetop::model::update::Update;
    use fleetop::store::ray::RayState;
    use fleetop::tui::app::App;

    use crate::tui::{Step, drive_steps, fleet_updates, key, keys, text, theme};

    fn ray_node(i: u8, name: &str, status: RayNodeStatus) -> RayNode {
        RayNode {
            id: format!("{i:02x}").repeat(28),
            name: name.into(),
            ip: format!("10.0.0.{i}"),
            head: i == 1,
            status,
            gpus_total: Some(8.0),
            gpus_used: Some(6.0),
            activity: Vec::new(),
        }
    }

    /// gpu01 (head) and gpu02 running in Ray, gpu03 draining; gpu04 not in Ray.
    fn arrive() -> Step {
        Step::Arrive(Update::Ray(Arc::new(RaySnapshot {
            nodes: vec![
                ray_node(1, "gpu01", RayNodeStatus::Running),
                ray_node(2, "gpu02", RayNodeStatus::Running),
                ray_node(3, "gpu03", RayNodeStatus::Draining),
            ],
            ..RaySnapshot::default()
        })))
    }

    fn with_ray(app: &mut App) {
        app.store.ray = Some(RayState::new("head:6379".into()));
    }

    #[test]
    fn node_detail_says_what_ray_says_of_the_node() {
        // gpu03 (the third): draining.
        let steps = vec![
            arrive(),
            Step::Do(key(KeyCode::Char('j'))),
            Step::Do(key(KeyCode::Char('j'))),
            Step::Do(key(KeyCode::Enter)),
        ];
        let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, with_ray);
        let screen = text(&buf);
        assert!(screen.contains("ray draining · 6/8 GPUs in use"), "{screen}");
        // A Ray that cannot be read says so where Ray's line goes.
        let steps = vec![
            Step::Arrive(Update::RayError("Ray's GCS at head:6379: cannot connect".into())),
            Step::Do(key(KeyCode::Enter)),
        ];
        let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (100, 30), steps, with_ray);
        assert!(
            text(&buf).contains("ray not read (0s ago): Ray's GCS at head:6379: cannot connect"),
            "{}",
            text(&buf)
        );
    }

    /// Ray's side on the timeline (node detail, pane 5): a node Ray drains,
    /// one whose raylet left (dead), and one that came back, each once.
    #[test]
    fn the_timeline_shows_ray_draining_losing_and_taking_back_a_node() {
        let read = |nodes: Vec<RayNode>| {
            Step::Arrive(Update::Ray(Arc::new(RaySnapshot {
                nodes,
                ..RaySnapshot::default()
            })))
        };
        let screen_of = |down: usize, reads: Vec<Step>| {
            let mut steps = reads;
            steps.extend((0..down).map(|_| Step::Do(key(KeyCode::Char('j')))));
            steps.push(Step::Do(key(KeyCode::Enter)));
            steps.push(Step::Do(key(KeyCode::Char('5'))));
            let (buf, _) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 30), steps, with_ray);
            text(&buf)
        };
        let reads = || {
            vec![
                arrive(),
                // gpu02's raylet is gone (dead); gpu03 drained and left Ray's list.
                read(vec![
                    ray_node(1, "gpu01", RayNodeStatus::Running),
                    ray_node(2, "gpu02", RayNodeStatus::Dead),
                ]),
                read(vec![
                    ray_node(1, "gpu01", RayNodeStatus::Idle),
                    ray_node(2, "gpu02", RayNodeStatus::Dead),
                    ray_node(9, "gpu02", RayNodeStatus::Idle),
                ]),
            ]
        };
        let gpu02 = screen_of(1, reads());
        assert!(
            gpu02.contains("Ray: dead: its raylet has left Ray's cluster"),
            "{gpu02}"
        );
        assert!(gpu02.contains("Ray: idle: back in Ray's cluster"), "{gpu02}");
        let gpu03 = screen_of(2, reads());
        assert!(gpu03.contains("Ray: draining: drained in Ray"), "{gpu03}");
        assert!(gpu03.contains("Ray: absent: Ray no longer lists it"), "{gpu03}");
        // Busy to idle is no event.
        let gpu01 = screen_of(0, reads());
        assert!(!gpu01.contains("Ray:"), "{gpu01}");

        // A live console keeps them for timeline.jsonl, once each.
        let (targets, _) = fleet_updates(4, 8, 60);
        let mut store = fleetop::store::Store::new(targets, Default::default());
        store.ray = Some(RayState::new("head:6379".into()));
        store.keep_timeline();
        for r in reads() {
            let Step::Arrive(u) = r else { unreachable!() };
            store.apply(u, 1_000);
        }
        let kept: Vec<String> = store
            .take_unsaved()
            .iter()
            .filter(|e| matches!(e.what, fleetop::model::timeline::What::SchedulerState { .. }))
            .map(|e| format!("{} {}", e.node, e.line()))
            .collect();
        assert_eq!(kept.len(), 4, "{kept:#?}");
        assert!(kept.iter().any(|l| l.starts_with("gpu02 Ray: dead")), "{kept:#?}");
    }

    #[test]
    fn the_drain_dialog_sends_rays_drain_for_the_nodes_ray_id_and_offers_no_resume() {
        let steps = |yes: bool| {
            let mut v = vec![
                arrive(),
                Step::Do(key(KeyCode::Char('j'))),
                Step::Do(key(KeyCode::Char('D'))),
            ];
            v.extend(keys("xid 79").into_iter().map(Step::Do));
            v.push(Step::Do(key(KeyCode::Enter)));
            if yes {
                v.push(Step::Do(key(KeyCode::Char('y'))));
            }
            v
        };
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 30), steps(false), with_ray);
        let screen = text(&buf);
        assert!(screen.contains("AutoscalerStateService/DrainNode"), "{screen}");
        assert!(screen.contains(&format!("node_id={}", "02".repeat(28))), "{screen}");
        assert!(asked.is_empty(), "nothing before the y: {asked:?}");
        let (_, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 30), steps(true), with_ray);
        let Some(Request::Run(plan)) = asked.first() else {
            panic!("{asked:?}")
        };
        assert_eq!((plan.action, plan.scheduler), (NodeAction::Drain, Scheduler::Ray));
        assert_eq!(plan.nodes, ["gpu02"]);
        assert!(plan.commands[0].contains(&"reason_message=fleetop: xid 79".to_string()));

        // gpu04 is not in Ray: refused before anything is asked.
        let mut v = vec![arrive()];
        v.extend(keys("jjjD").into_iter().map(Step::Do));
        v.extend(keys("x").into_iter().map(Step::Do));
        v.push(Step::Do(key(KeyCode::Enter)));
        v.push(Step::Do(key(KeyCode::Char('y'))));
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 30), v, with_ray);
        assert!(asked.is_empty(), "{asked:?}");
        assert!(text(&buf).contains("Ray has no node named gpu04"), "{}", text(&buf));

        // Resume: Ray has none, and says why.
        let v = vec![arrive(), Step::Do(key(KeyCode::Char('R')))];
        let (buf, asked) = drive_steps(theme(), fleet_updates(4, 8, 60), (120, 30), v, with_ray);
        assert!(asked.is_empty(), "{asked:?}");
        assert!(text(&buf).contains("Ray has no undrain"), "{}", text(&buf));
    }
}

/// A GCS that accepts the connection and never speaks: a drain ends at the
/// reader's deadline, saying so, instead of waiting on its handshake.
#[tokio::test]
async fn a_drain_sent_to_a_gcs_that_never_answers_ends_at_its_deadline() {
    let gcs = silent(false);
    let ray = fleetop::ingest::ray::Ray::new(&format!("http://{}", closed()), Some(&gcs), Duration::from_secs(1))
        .expect("a Ray");
    let id = "ab".repeat(28);
    let r = tokio::time::timeout(Duration::from_secs(30), ray.drain(&id, "test", 0, false))
        .await
        .expect("ends");
    let e = r.expect_err("an error").to_string();
    // Ended by its deadline, whichever bound (the call's, or tonic's for
    // the request) spoke first.
    assert!(e.contains("within 1 s") || e.contains("Timeout expired"), "{e}");
}

/// `node return --ray`: Ray has no undrain, so nothing is returned (exit
/// non-zero, one line saying so and the `ray start` that brings a node
/// back); what fleetop can do it does: the burn-in on the node's own agent,
/// found through `[agents]`, with its verdict. Read-only refuses it; both
/// are in the audit log as Ray's.
#[test]
fn a_return_on_ray_runs_the_burn_in_says_what_only_ray_start_can_do_and_is_logged() {
    use fleetop::model::action::{AuditLine, NodeAction, Scheduler, Stage};
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("bench.token");
    crate::write_secret(&token, "s3cret\n");
    let agent = crate::support::start_bench_agent(&token, "training");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, format!("[agents]\nray-w1 = \"127.0.0.1:{}\"\n", agent.port())).expect("config");
    let audit = dir.path().join("audit.jsonl");
    let gcs = closed();
    let ret = |extra: &[&str]| {
        fleetop()
            .env("FLEETOP_AUDIT_LOG", &audit)
            .arg("--config")
            .arg(&cfg)
            .args(extra)
            .args(["--ray", &format!("http://{}", closed()), "--ray-gcs", &gcs])
            .args(["node", "return", "ray-w1", "--yes", "--insecure", "--token-file"])
            .arg(&token)
            .timeout(Duration::from_secs(240))
            .output()
            .expect("runs")
    };
    let lines = || -> Vec<AuditLine> {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("an audit line"))
            .collect()
    };
    let out = ret(&["--read-only"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("read-only mode: return refused"), "{err}");
    let refused = lines();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].scheduler, Scheduler::Ray);
    assert_eq!(refused[0].report.stage, Stage::Refused);

    let out = ret(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "nothing was returned: {text}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("1 node(s) not returned: Ray has no undrain")
            && last.contains(&format!("ray start --address={gcs}")),
        "{err}"
    );
    assert!(err.contains("burn-in [") || text.contains("burn-in quick"), "{err}");
    assert!(text.contains("burn-in quick passed on its own agent"), "{text}");
    assert!(
        text.contains("Ray could not be read") && text.contains("ray start --address="),
        "{text}"
    );
    let done: Vec<AuditLine> = lines()
        .into_iter()
        .filter(|l| l.report.action == NodeAction::Return && l.report.stage == Stage::Done)
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].scheduler, Scheduler::Ray);
    assert!(!done[0].report.results[0].ok, "nothing was returned");
}
