//! A simulated fleet fed straight into a store (no network), for benchmarks.

use fleetop::detect::Thresholds;
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::target::Target;
use fleetop::store::Store;

pub const NODES: u32 = 1024;
pub const GPUS: u32 = 8;
pub const START_MS: i64 = 1_700_000_000_000;

/// A store for `NODES` x `GPUS` (the demo's scenario mix) and the fleet that
/// makes its samples, with the node descriptions already applied.
pub fn fleet() -> (Store, SimFleet) {
    let mut sims = SimFleet::new(demo::plan(NODES, GPUS, 42, START_MS));
    let targets = sims
        .plan
        .iter()
        .map(|c| Target {
            name: c.hostname.clone(),
            host: "127.0.0.1".into(),
            port: 1,
        })
        .collect();
    let mut store = Store::new(targets, Thresholds::default());
    for u in sims.connect(START_MS) {
        store.apply(u, START_MS);
    }
    (store, sims)
}

/// Feeds `seconds` of samples, ending at the returned time.
pub fn run_for(store: &mut Store, sims: &mut SimFleet, seconds: i64) -> i64 {
    let mut t = START_MS;
    for _ in 0..seconds {
        t += 1000;
        for u in sims.sample(t) {
            store.apply(u, t);
        }
    }
    store.apply_all_caught_up(t);
    t
}
