//! Notifications: what `fleetop watch` (and the TUI's bell) spend judging a
//! 1,024-node x 8-GPU fleet (the demo's scenario mix, its flags active)
//! once a second, in steady state: no flag raised or cleared, every alert's
//! annotations refreshed.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fleetop::ops::notify::{Rules, Tracker, bell::Bell};

#[path = "support/fleet.rs"]
mod fleet;

fn notify(c: &mut Criterion) {
    let (mut store, mut sims) = fleet::fleet();
    let t = fleet::run_for(&mut store, &mut sims, 360);
    let mut tracker = Tracker::new(Rules::default());
    let first = tracker.observe(&store, t);
    let mut bell = Bell::default();
    bell.check(&store);
    eprintln!("{} alerts firing", first.len());
    let mut group = c.benchmark_group("notify");
    group.bench_function("tracker: 1024 nodes x 8 GPUs, one look", |b| {
        b.iter(|| black_box(tracker.observe(&store, t)))
    });
    group.bench_function("bell: 1024 nodes x 8 GPUs, one look", |b| {
        b.iter(|| black_box(bell.check(&store)))
    });
    group.finish();
}

criterion_group!(benches, notify);
criterion_main!(benches);
