//! Recording size and cost: a 256-node x 8-GPU simulated fleet (the demo's
//! nodes, every scenario mixed in, decoded as a connection decodes them)
//! recorded for two minutes of samples, one frame a second as `fleetop
//! record` writes them live. Prints bytes per node-second and what an hour
//! of the fleet takes on disk; then times the writer's CPU per second of
//! fleet data (criterion).
//!
//! `cargo bench --bench record` (add `-- --quick` for the figure alone).

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::target::Target;
use fleetop::model::update::Update;
use fleetop::record::{Recorder, RecorderOptions};

const NODES: u32 = 256;
const GPUS: u32 = 8;
const SECONDS: i64 = 120;
static RUNS: AtomicUsize = AtomicUsize::new(0);
const T0: i64 = 1_767_225_600_000;

/// Every update of `seconds` of the fleet, second by second (after the
/// descriptions), with its time.
fn fleet(seconds: i64) -> (Vec<Target>, Vec<(i64, Update)>) {
    let mut sims = SimFleet::new(demo::plan(NODES, GPUS, 1, T0 - 600_000));
    let targets = sims
        .plan
        .iter()
        .map(|c| Target {
            name: c.hostname.clone(),
            host: "10.0.0.1".into(),
            port: 50051,
        })
        .collect();
    let mut out: Vec<(i64, Update)> = sims.connect(T0).into_iter().map(|u| (T0, u)).collect();
    for s in 0..seconds {
        let t = T0 + s * 1000;
        out.extend(sims.sample(t).into_iter().map(|u| (t, u)));
    }
    (targets, out)
}

/// Records `updates` one frame per second of fleet time; returns the bytes
/// of the descriptions and of the samples.
fn record(dir: &std::path::Path, name: &str, targets: &[Target], updates: &[(i64, Update)]) -> (u64, u64) {
    let path = dir.join(name);
    let mut opts = RecorderOptions::new(&path);
    opts.flush_every = Duration::from_secs(3600);
    // One frame per second of the fleet: every node once.
    opts.max_batch = NODES as usize;
    let rec = Recorder::create(opts, targets, false).expect("create");
    for (t, u) in updates {
        rec.record(*t, u);
    }
    let stats = rec.finish().expect("finish");
    (0, stats.bytes)
}

fn size(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tmp");
    let (targets, updates) = fleet(SECONDS);
    let (descs, samples) = updates.split_at(NODES as usize);
    let (_, head) = record(dir.path(), "head.rec", &targets, descs);
    let (_, all) = record(dir.path(), "all.rec", &targets, &updates);
    let per_node_s = (all - head) as f64 / f64::from(NODES) / SECONDS as f64;
    let hour = head as f64 + per_node_s * f64::from(NODES) * 3600.0;
    println!(
        "record: {NODES} nodes x {GPUS} GPUs, {SECONDS} s: {all} bytes ({head} for header and descriptions); \
         {per_node_s:.1} bytes per node-second; one hour: {:.1} MB",
        hour / 1e6
    );
    let second: Vec<(i64, Update)> = samples[..NODES as usize].to_vec();
    let mut group = c.benchmark_group("record");
    group.sample_size(10);
    group.bench_function("256 nodes x 8 GPUs, one second of samples to disk", |b| {
        b.iter(|| {
            let n = RUNS.fetch_add(1, Ordering::Relaxed);
            black_box(record(dir.path(), &format!("s{n}.rec"), &targets, &second))
        })
    });
    group.finish();
}

criterion_group!(benches, size);
criterion_main!(benches);
