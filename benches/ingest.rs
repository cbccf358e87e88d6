//! Ingest: one second of data from 1,024 nodes x 8 GPUs (simulated, every
//! scenario mixed in) through the store, its rate derivation and the
//! detectors, plus the clock tick. The time per iteration is the console's
//! CPU per second of fleet data. Samples are made outside the timing.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

#[path = "support/fleet.rs"]
mod fleet;

fn ingest(c: &mut Criterion) {
    let (mut store, mut collectors) = fleet::fleet();
    // Fill the history so the rings are at their bound, as in steady state.
    let mut t = fleet::run_for(&mut store, &mut collectors, fleetop::store::DEFAULT_HISTORY as i64);
    let mut group = c.benchmark_group("ingest");
    group.sample_size(20);
    group.bench_function("1024 nodes x 8 GPUs, one second of samples", |b| {
        b.iter_batched(
            || {
                t += 1000;
                (t, collectors.sample(t))
            },
            |(now, updates)| {
                for u in updates {
                    store.apply(u, now);
                }
                store.tick(now);
                black_box(&store);
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, ingest);
criterion_main!(benches);
