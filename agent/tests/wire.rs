//! The wire codec on real simulated samples: exact round trips, and the
//! size a busy node costs (a size, which is deterministic for the simulation).

use fleetop_agent::proto::Sample;
use fleetop_agent::sampler::{Collector, Sampler};
use fleetop_agent::sim::{Model, Scenario, SimConfig, SimNode};
use fleetop_agent::wire::{decode, encode};
use prost::Message;

fn node(scenario: Scenario) -> Collector {
    let sim: Box<dyn Sampler> = Box::new(node_sim(scenario));
    Collector::new(vec![sim], Default::default())
}

fn node_sim(scenario: Scenario) -> SimNode {
    SimNode::new(SimConfig {
        hostname: "w".into(),
        gpus: 8,
        ib_ports: 8,
        model: Model::H100,
        scenario,
        seed: 11,
        start_ms: 0,
        problem_ms: None,
        interval_ms: 1000,
    })
}

#[test]
fn round_trip_is_exact_and_smaller() {
    for scenario in [
        Scenario::Training,
        Scenario::IbDown,
        Scenario::Xid79,
        Scenario::IbErrors,
    ] {
        let mut n = node(scenario);
        let mut sent: Option<Sample> = None;
        let mut received: Option<Sample> = None;
        for t in (3_000_000..3_060_000).step_by(1000) {
            let Some(s) = n.sample(t) else { continue };
            let wire = encode(sent.as_ref(), &s);
            if sent.is_some() {
                assert_ne!(wire.delta_from_seq, 0);
                assert!(
                    wire.encoded_len() < s.encoded_len(),
                    "{} vs {}",
                    wire.encoded_len(),
                    s.encoded_len()
                );
            }
            let back = decode(received.as_mut(), wire).expect("in sequence");
            assert_eq!(back, s, "{scenario:?} at {t}");
            sent = Some(s);
            received = Some(back);
        }
    }
}

#[test]
fn a_busy_h100_node_costs_under_100_bytes_per_gpu_sample() {
    // Not a timing: a size, which is deterministic for the simulation.
    let mut n = node(Scenario::Training);
    let (mut sent, mut total, mut gpu_samples) = (None::<Sample>, 0usize, 0usize);
    for t in (3_000_000..3_100_000).step_by(1000) {
        let Some(s) = n.sample(t) else { continue };
        total += encode(sent.as_ref(), &s).encoded_len();
        gpu_samples += s.gpus.len();
        sent = Some(s);
    }
    let per = total / gpu_samples;
    assert!(per < 100, "{per} bytes per GPU-sample");
}
