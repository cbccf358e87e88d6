//! A busy simulated node for the agent's benchmarks: 8 x H100 and 8
//! InfiniBand ports, training.

use fleetop_agent::backend::{self, BackendOptions};
use fleetop_agent::collector::Collector;
use fleetop_agent::sim::{Model, Scenario, SimConfig};

pub const START_MS: i64 = 1_700_000_000_000;

/// The node's collector, its clock at `START_MS`, a sample a second.
pub fn busy_node() -> Collector {
    let sim = SimConfig {
        hostname: "gpu01".into(),
        gpus: 8,
        ib_ports: 8,
        model: Model::H100,
        scenario: Scenario::Training,
        seed: 1,
        start_ms: START_MS,
        interval_ms: 1000,
        problem_ms: None,
    };
    backend::build(&BackendOptions::sim(sim)).expect("sim").0
}
