//! A simulated fleet fed straight into a store (no network), for benchmarks.

use fleetop::detect::Thresholds;
use fleetop::hostlist::Target;
use fleetop::store::{Event, Store, Update};
use fleetop_agent::sampler::{Collector, Sampler};
use fleetop_agent::sim::SimNode;

pub const NODES: u32 = 1024;
pub const GPUS: u32 = 8;
pub const START_MS: i64 = 1_700_000_000_000;

/// A store for `NODES` x `GPUS` (the demo's scenario mix) and the collectors
/// that make its samples, with the node descriptions already applied.
pub fn fleet() -> (Store, Vec<Collector>) {
    let plan = fleetop::demo::plan(NODES, GPUS, 42, START_MS);
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
        info.agent_time_ms = START_MS;
        store.apply(
            Update::Node {
                node: i,
                event: Event::Info(Box::new(info)),
            },
            START_MS,
        );
    }
    (store, collectors)
}

/// One second of samples from every node, at `t`.
pub fn second(collectors: &mut [Collector], t: i64) -> Vec<Update> {
    collectors
        .iter_mut()
        .enumerate()
        .filter_map(|(i, c)| {
            c.sample(t).map(|s| Update::Node {
                node: i,
                event: Event::Sample(Box::new(s)),
            })
        })
        .collect()
}

/// Feeds `seconds` of samples, ending at the returned time.
pub fn run_for(store: &mut Store, collectors: &mut [Collector], seconds: i64) -> i64 {
    let mut t = START_MS;
    for _ in 0..seconds {
        t += 1000;
        for u in second(collectors, t) {
            store.apply(u, t);
        }
    }
    store.apply_all_caught_up(t);
    t
}
