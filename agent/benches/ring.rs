//! What the agent's history costs it: one sample pushed into a full
//! ten-minute ring (a busy simulated 8-GPU node with 8 InfiniBand ports,
//! the oldest dropped and the next made whole), as each tick does; and a
//! new subscriber's backlog of the last 10 s and of all of it, made and
//! encoded as the stream sends it, as each console's connect does.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use fleetop_agent::keep::ring::Ring;

#[path = "support/node.rs"]
mod support;
use support::START_MS;

/// Samples of a busy node, one a second from `START_MS`.
fn samples(n: usize) -> Vec<Arc<fleetop_agent::proto::Sample>> {
    let mut c = support::busy_node();
    (0..n as i64)
        .filter_map(|i| c.sample(START_MS + i * 1000))
        .map(Arc::new)
        .collect()
}

fn bench(c: &mut Criterion) {
    let all = samples(1200);
    let (first, later) = all.split_at(600);
    let mut full = Ring::new(600, 64 << 20);
    for s in first {
        full.push(s.clone());
    }
    eprintln!("ring: {} samples, {} bytes", full.len(), full.bytes());
    // Each iteration pushes the next sample into a ring as full as ever.
    let mut ring = Ring::new(600, 64 << 20);
    for s in first {
        ring.push(s.clone());
    }
    let mut next = later.iter().cycle();
    c.bench_function("ring_push_full_10_min", |b| {
        b.iter(|| ring.push(next.next().expect("cycles").clone()))
    });
    let last_ms = START_MS + 599 * 1000;
    for (name, since) in [("ring_backlog_10_s", last_ms - 9_000), ("ring_backlog_all", i64::MIN)] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let backlog = full.backlog(since);
                let bytes: usize = backlog.encoded().map(|e| e.expect("decodes").len()).sum();
                black_box(bytes)
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
