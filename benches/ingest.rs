//! Ingest: one second of data from 1,024 nodes x 8 GPUs (simulated, every
//! scenario mixed in) through the store, its rate derivation and the
//! detectors, plus the clock tick. The time per iteration is the console's
//! CPU per second of fleet data. Samples are made outside the timing.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use fleetop::detect::Thresholds;
use fleetop::hostlist::Target;
use fleetop::store::{Event, Store, Update};
use fleetop_agent::sampler::{Collector, Sampler};
use fleetop_agent::sim::SimNode;

const NODES: u32 = 1024;
const GPUS: u32 = 8;

fn fleet(start_ms: i64) -> (Store, Vec<Collector>) {
    let plan = fleetop::demo::plan(NODES, GPUS, 42, start_ms);
    let targets = plan
        .iter()
        .map(|c| Target {
            name: c.hostname.clone(),
            host: "127.0.0.1".into(),
            port: 1,
        })
        .collect();
    let mut store = Store::new(targets, Thresholds::default());
    let collectors: Vec<Collector> = plan
        .into_iter()
        .map(|c| {
            let sim: Box<dyn Sampler> = Box::new(SimNode::new(c));
            Collector::new(vec![sim], Default::default())
        })
        .collect();
    for (i, c) in collectors.iter().enumerate() {
        let mut info = c.info().clone();
        info.sample_interval_ms = 1000;
        info.agent_time_ms = start_ms;
        store.apply(
            Update {
                node: i,
                event: Event::Info(Box::new(info)),
            },
            start_ms,
        );
    }
    (store, collectors)
}

fn ingest(c: &mut Criterion) {
    let start = 1_700_000_000_000;
    let (mut store, mut collectors) = fleet(start);
    let mut t = start;
    // Fill the history so the rings are at their bound, as in steady state.
    for _ in 0..fleetop::store::DEFAULT_HISTORY {
        t += 1000;
        for (i, col) in collectors.iter_mut().enumerate() {
            if let Some(s) = col.sample(t) {
                store.apply(
                    Update {
                        node: i,
                        event: Event::Sample(Box::new(s)),
                    },
                    t,
                );
            }
        }
    }
    let mut group = c.benchmark_group("ingest");
    group.sample_size(20);
    group.bench_function("1024 nodes x 8 GPUs, one second of samples", |b| {
        b.iter_batched(
            || {
                t += 1000;
                let updates: Vec<Update> = collectors
                    .iter_mut()
                    .enumerate()
                    .filter_map(|(i, col)| {
                        col.sample(t).map(|s| Update {
                            node: i,
                            event: Event::Sample(Box::new(s)),
                        })
                    })
                    .collect();
                (t, updates)
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
