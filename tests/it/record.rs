//! Recordings: `fleetop record` on the demo read back by `export --replay
//! --at`; damage (truncation at several offsets, a flipped byte) replayed up
//! to where it is, with where it stopped said; a newer schema refused;
//! rotation by size, each segment replayable on its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetop::export::Snapshot;
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::target::Target;
use fleetop::model::time::rfc3339;
use fleetop::model::update::{Event, Update};
use fleetop::record::writer::Stats;
use fleetop::record::{FRAME_HEAD, Recorder, RecorderOptions, Recording, SCHEMA_VERSION, segment_path};

use crate::fleetop;

/// 2026-01-01T00:00:00Z: the recordings' first update.
pub const T0: i64 = 1_767_225_600_000;

/// Records `seconds` of a simulated fleet (no network) to `path`, one frame
/// per `per_frame` updates, as the console would have received it: each
/// node's description, then a sample of every node every second.
pub fn write_sim(path: &Path, nodes: u32, gpus: u32, seconds: i64, per_frame: usize, rotate: Option<u64>) -> Stats {
    let mut sims = SimFleet::new(demo::plan(nodes, gpus, 7, T0 - 600_000));
    let targets: Vec<Target> = sims
        .plan
        .iter()
        .map(|c| Target {
            name: c.hostname.clone(),
            host: "10.0.0.1".into(),
            port: 50051,
        })
        .collect();
    let mut opts = RecorderOptions::new(path);
    // Frames by count only: the same file on every machine.
    opts.flush_every = Duration::from_secs(3600);
    opts.max_batch = per_frame;
    opts.rotate_size = rotate;
    let rec = Recorder::create(opts, &targets, false).expect("create");
    for u in sims.connect(T0) {
        assert!(rec.record(T0, &u));
    }
    for node in 0..nodes as usize {
        rec.record(
            T0,
            &Update::Node {
                node,
                event: Event::CaughtUp,
            },
        );
    }
    for s in 0..seconds {
        let t = T0 + s * 1000;
        for u in sims.sample(t) {
            assert!(rec.record(t, &u));
        }
    }
    rec.finish().expect("finish")
}

fn export_at(file: &Path, at: Option<&str>) -> (Snapshot, String) {
    let mut cmd = fleetop();
    cmd.args(["export", "--replay"]).arg(file);
    if let Some(a) = at {
        cmd.args(["--at", a]);
    }
    let out = cmd.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "export failed: {stderr}");
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("one JSON snapshot on stdout");
    (snap, stderr)
}

/// Appends one empty data frame (no update, a few bytes, as a writer that
/// flushed nothing or someone's hand would leave it) to the recording.
pub fn append_empty_frame(path: &Path) {
    use std::io::Write;
    // postcard's empty batch: base_ms 0, no entries, no columns.
    let packed = zstd::bulk::compress(&[0u8, 0, 0], 3).expect("zstd");
    let mut frame = b"FR\0".to_vec();
    frame.extend_from_slice(&(packed.len() as u32).to_le_bytes());
    frame.extend_from_slice(&packed);
    // 19 bytes here (the probe's was 16, its payload packed by hand): a
    // frame of no update either way.
    assert!(frame.len() <= 20, "{}", frame.len());
    let mut f = std::fs::OpenOptions::new().append(true).open(path).expect("open");
    f.write_all(&frame).expect("append");
}

fn copy_truncated(src: &Path, dir: &Path, len: u64) -> PathBuf {
    let bytes = std::fs::read(src).expect("read");
    let p = dir.join(format!("cut-{len}.rec"));
    std::fs::write(&p, &bytes[..len as usize]).expect("write");
    p
}

#[test]
fn a_recorded_demo_replays_its_nodes_and_gpus_at_a_time() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("demo.rec");
    let out = fleetop()
        .args([
            "record",
            "--demo",
            "--nodes",
            "3",
            "--gpus",
            "2",
            "--duration",
            "6s",
            "--out",
        ])
        .arg(&file)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("recorded"), "{stderr}");
    assert!(out.stdout.is_empty(), "record prints nothing on stdout");

    let rec = Recording::open(&file).expect("opens");
    assert!(rec.damage.is_none());
    // Frames at least every second: a 6 s recording has several.
    assert!(rec.frames.len() >= 3, "{} frames", rec.frames.len());

    let (snap, stderr) = export_at(&file, None);
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(snap.generated_at, rfc3339(rec.end_ms()));
    let names: Vec<&str> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu01", "gpu02", "gpu03"]);
    for n in &snap.nodes {
        assert_eq!(n.gpus.len(), 2, "{}: {:?}", n.name, n.gpus);
        assert!(n.gpus.iter().all(|g| g.uuid.starts_with("GPU-")), "{:?}", n.gpus);
    }

    // An offset from the start, and RFC 3339, name the same moment.
    let at = rec.start_ms() + 2000;
    let (by_offset, _) = export_at(&file, Some("+2s"));
    let (by_time, _) = export_at(&file, Some(&rfc3339(at)));
    assert_eq!(by_offset.generated_at, rfc3339(at));
    assert_eq!(
        serde_json::to_string(&by_offset).expect("json"),
        serde_json::to_string(&by_time).expect("json")
    );

    // A time outside the recording is refused with its range.
    let out = fleetop()
        .args(["export", "--replay"])
        .arg(&file)
        .args(["--at", "+1h"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the recording covers"), "{err}");
    // Recording refuses to overwrite.
    let out = fleetop()
        .args(["record", "--demo", "--nodes", "1", "--duration", "1s", "--out"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("demo.rec"));
}

#[test]
fn a_truncated_recording_replays_up_to_the_damage_and_says_where() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("full.rec");
    let stats = write_sim(&file, 4, 2, 30, 20, None);
    let rec = Recording::open(&file).expect("opens");
    assert!(rec.damage.is_none());
    assert_eq!(rec.frames.len() as u64, stats.frames);
    assert!(rec.frames.len() > 5);
    let start = |i: usize| rec.frames[i].offset - FRAME_HEAD as u64;
    let size = std::fs::metadata(&file).expect("meta").len();

    // In the middle of frame 3, in its head, and the last byte gone.
    let last = rec.frames.len() - 1;
    for (cut, frame) in [(start(3) + 40, 3), (start(3) + 3, 3), (size - 1, last)] {
        let cut_file = copy_truncated(&file, dir.path(), cut);
        let (snap, stderr) = export_at(&cut_file, None);
        let line = format!("cut-{cut}.rec: damaged at byte {} (frame {frame}): ", start(frame));
        assert!(stderr.contains(&line), "cut at {cut}: {stderr}");
        assert!(stderr.contains("truncated"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        // What came before the damage is there, up to its last update.
        assert_eq!(
            snap.generated_at,
            rfc3339(rec.frames[frame - 1].last_ms),
            "cut at {cut}"
        );
        assert_eq!(snap.nodes.len(), 4);
        assert!(snap.nodes.iter().all(|n| n.gpus.len() == 2));
    }

    // Cut at a frame's end: nothing is damaged, the recording is shorter.
    let clean = copy_truncated(&file, dir.path(), start(4));
    let (snap, stderr) = export_at(&clean, None);
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(snap.generated_at, rfc3339(rec.frames[3].last_ms));

    // Cut inside the header: nothing to replay, one line.
    let head = copy_truncated(&file, dir.path(), 20);
    let out = fleetop()
        .args(["export", "--replay"])
        .arg(&head)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut-20.rec: damaged header"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn an_empty_frame_at_the_end_changes_no_time_and_every_at_still_answers() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("empty-tail.rec");
    write_sim(&file, 4, 2, 30, 20, None);
    append_empty_frame(&file);
    let rec = Recording::open(&file).expect("opens");
    assert!(rec.damage.is_none(), "{:?}", rec.damage);
    assert_eq!((rec.start_ms(), rec.end_ms()), (T0, T0 + 29_000));
    let (snap, _) = export_at(&file, None);
    assert_eq!(snap.generated_at, rfc3339(T0 + 29_000));
    let (snap, _) = export_at(&file, Some("+10s"));
    assert_eq!(snap.generated_at, rfc3339(T0 + 10_000));
    // A recording of nothing but its header and that frame: one time, no nodes' data.
    let only = dir.path().join("only-empty.rec");
    write_sim(&only, 1, 1, 0, 1, None);
    let bytes = std::fs::read(&only).expect("read");
    let first = Recording::open(&only).expect("opens").frames[0].offset as usize - FRAME_HEAD;
    std::fs::write(&only, &bytes[..first]).expect("header only");
    append_empty_frame(&only);
    let rec = Recording::open(&only).expect("opens");
    assert!(rec.start_ms() <= rec.end_ms());
    export_at(&only, None);
}

#[test]
fn a_flipped_byte_stops_the_replay_at_its_frame() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("full.rec");
    write_sim(&file, 4, 2, 30, 20, None);
    let rec = Recording::open(&file).expect("opens");
    let mut bytes = std::fs::read(&file).expect("read");
    let fr = rec.frames[2];
    let at = (fr.offset + u64::from(fr.len) / 2) as usize;
    bytes[at] ^= 0x10;
    let flipped = dir.path().join("flipped.rec");
    std::fs::write(&flipped, &bytes).expect("write");

    let (snap, stderr) = export_at(&flipped, None);
    let line = format!(
        "flipped.rec: damaged at byte {} (frame 2): ",
        fr.offset - FRAME_HEAD as u64
    );
    assert!(stderr.contains(&line), "{stderr}");
    assert_eq!(snap.generated_at, rfc3339(rec.frames[1].last_ms));
}

#[test]
fn a_recording_of_a_newer_schema_is_refused_in_one_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("new.rec");
    write_sim(&file, 2, 1, 3, 100, None);
    let mut bytes = std::fs::read(&file).expect("read");
    bytes[8..10].copy_from_slice(&(SCHEMA_VERSION + 1).to_le_bytes());
    std::fs::write(&file, &bytes).expect("write");
    for args in [vec!["export", "--replay"], vec!["replay"]] {
        let out = fleetop().args(&args).arg(&file).output().expect("runs");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!(
                "new.rec: recording schema version {} is newer",
                SCHEMA_VERSION + 1
            )),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    // Not a recording at all.
    let other = dir.path().join("other.rec");
    std::fs::write(&other, b"hello, world").expect("write");
    let out = fleetop()
        .args(["export", "--replay"])
        .arg(&other)
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a fleetop recording"));
}

#[test]
fn a_fifo_or_a_device_named_as_a_recording_is_refused_at_once() {
    // A FIFO nobody writes to would block a plain open for ever; /dev/zero
    // would never end. Each is refused in one line, before any terminal.
    let dir = tempfile::tempdir().expect("tmp");
    let fifo = dir.path().join("rec.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    for file in [fifo.as_path(), Path::new("/dev/zero")] {
        for args in [vec!["export", "--replay"], vec!["replay"]] {
            let out = fleetop().args(&args).arg(file).output().expect("runs");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?} {file:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("not a regular file"), "{err}");
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn recordings_rotate_by_size_and_each_segment_replays_alone() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("rot.rec");
    let rotate = 6_000;
    let stats = write_sim(&file, 4, 2, 60, 16, Some(rotate));
    assert!(stats.segments >= 3, "{stats:?}");
    let mut total = 0;
    for n in 0..stats.segments {
        let p = segment_path(&file, n);
        let len = std::fs::metadata(&p).expect("segment exists").len();
        total += len;
        // A segment ends with the frame that took it past the size.
        let biggest = Recording::open(&file)
            .expect("opens")
            .frames
            .iter()
            .map(|f| u64::from(f.len))
            .max()
            .unwrap_or(0);
        assert!(len < rotate + biggest + FRAME_HEAD as u64, "{}: {len}", p.display());
    }
    assert!(!segment_path(&file, stats.segments).exists());
    assert_eq!(total, stats.bytes);

    // From the first segment, the whole recording, carried-over frames skipped.
    let rec = Recording::open(&file).expect("opens");
    assert_eq!(rec.segments.len() as u32, stats.segments);
    let entries: u64 = rec.frames.iter().map(|f| u64::from(f.entries)).sum();
    assert_eq!(entries, stats.updates);
    assert_eq!(rec.end_ms(), T0 + 59_000);

    // The last segment alone still knows every node and its GPUs.
    let last = segment_path(&file, stats.segments - 1);
    let (snap, stderr) = export_at(&last, None);
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(snap.generated_at, rfc3339(T0 + 59_000));
    assert_eq!(snap.nodes.len(), 4);
    assert!(snap.nodes.iter().all(|n| n.gpus.len() == 2), "{:?}", snap.nodes);
    // ... and matches the whole recording's view of the samples at its end.
    let (whole, _) = export_at(&file, None);
    let gpus =
        |s: &Snapshot| serde_json::to_string(&s.nodes.iter().map(|n| &n.gpus).collect::<Vec<_>>()).expect("json");
    assert_eq!(gpus(&snap), gpus(&whole));
}

#[test]
fn record_flags_are_checked() {
    let out = fleetop()
        .args(["record", "--demo", "--out", "/tmp/x.rec", "--rotate-size", "12 parsecs"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'12 parsecs'"));
    // --record belongs to the console, not to another subcommand.
    let out = fleetop()
        .args(["--record", "/tmp/x.rec", "export", "--demo", "--once"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fleetop record SOURCE --out FILE"));
}

/// Samples are deltas against the node's last one, so frames are read in
/// order; asked out of order (a jump back, a segment's middle), the reader
/// reads up to the frame first and gives the same updates as in order.
#[test]
fn frames_read_out_of_order_are_the_frames_read_in_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("order.rec");
    let stats = write_sim(&file, 3, 2, 30, 8, Some(4_000));
    assert!(stats.segments >= 2, "{stats:?}");
    let mut rec = Recording::open(&file).expect("opens");
    let n = rec.frames.len();
    let bytes = |u: Vec<(i64, Update)>| serde_json::to_string(&u).expect("json");
    let in_order: Vec<String> = (0..n).map(|i| bytes(rec.load(i).expect("loads"))).collect();
    for i in (0..n).rev().step_by(3) {
        assert_eq!(bytes(rec.load(i).expect("loads")), in_order[i], "frame {i}");
    }
    // The samples really differ from second to second (the deltas are not all zero).
    assert_ne!(in_order[n - 1], in_order[n - 2]);
}

/// A node's Slurm partitions travel beside the scheduler's view (they are
/// not in its positional encoding) and come back with it.
#[test]
fn slurm_partitions_are_recorded_with_the_schedulers_view() {
    use fleetop::model::sched::{SchedNode, Snapshot};
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("parts.rec");
    let targets = vec![Target {
        name: "gpu01".into(),
        host: "10.0.0.1".into(),
        port: 50051,
    }];
    let node = |parts: &[&str]| SchedNode {
        state: "idle".into(),
        partitions: parts.iter().map(|p| p.to_string()).collect(),
        ..SchedNode::default()
    };
    let snap = Snapshot {
        nodes: [
            ("gpu01".to_string(), node(&["debug", "gpu"])),
            ("gpu02".to_string(), node(&[])),
        ]
        .into_iter()
        .collect(),
        jobs: vec![],
    };
    let rec = Recorder::create(RecorderOptions::new(&file), &targets, true).expect("create");
    assert!(rec.record(T0, &Update::Scheduler(std::sync::Arc::new(snap.clone()))));
    rec.finish().expect("finish");
    let mut r = Recording::open(&file).expect("opens");
    match &r.load(0).expect("loads")[..] {
        [(_, Update::Scheduler(back))] => assert_eq!(**back, snap),
        other => panic!("{other:?}"),
    }
}

/// A node's timeline read from disk at start (`Update::Timeline`) and the
/// actions done while recording (`Update::ActionDone`) are in the
/// recording: a replay shows them on the node's timeline.
#[test]
fn a_replay_shows_the_nodes_timeline() {
    use fleetop::model::action::{ActionReport, Actor, NodeAction, NodeResult, Stage};
    use fleetop::model::timeline::{Event as TlEvent, What};
    use fleetop::record::player::Player;
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("timeline.rec");
    let targets = vec![Target {
        name: "gpu01".into(),
        host: "10.0.0.1".into(),
        port: 50051,
    }];
    let earlier = TlEvent {
        time_ms: T0 - 3_600_000,
        node: "gpu01".into(),
        what: What::FlagCleared {
            kind: fleetop::model::flag::FlagKind::Xid,
            subject: "gpu3".into(),
        },
        by: "fleetop".into(),
    };
    let drain = ActionReport {
        time: rfc3339(T0 + 1000),
        stage: Stage::Done,
        actor: Actor {
            uid: 1000,
            name: Some("alice".into()),
            sudo_user: None,
            env_user: None,
        },
        action: NodeAction::Drain,
        nodes: vec!["gpu01".into()],
        reason: Some("fleetop: xid on gpu3".into()),
        commands: vec![],
        refused: None,
        results: vec![NodeResult {
            node: "gpu01".into(),
            ok: true,
            message: "now drained".into(),
            state_before: Some("idle".into()),
            state_after: Some("drained".into()),
        }],
        forced: false,
        policy: None,
        scheduler: Default::default(),
        overrides: Default::default(),
    };
    let rec = Recorder::create(RecorderOptions::new(&file), &targets, true).expect("create");
    assert!(rec.record(T0, &Update::Timeline(vec![earlier.clone()])));
    assert!(rec.record(T0 + 1000, &Update::ActionDone(std::sync::Arc::new(drain))));
    rec.finish().expect("finish");
    let mut p = Player::open(&file).expect("opens");
    let mut store = p.new_store(Default::default());
    p.feed_until(&mut store, T0 + 2000);
    let lines: Vec<String> = store.nodes[0].timeline.events().map(TlEvent::line).collect();
    assert_eq!(
        lines,
        [
            "xid on gpu3 cleared".to_string(),
            "drain ok (fleetop: xid on gpu3): now drained by alice".to_string()
        ]
    );
}
