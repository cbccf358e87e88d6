//! The wire codec on real simulated samples: exact round trips, and the
//! size a busy node costs (a size, which is deterministic for the simulation).

use fleetop_agent::collector::Collector;
use fleetop_agent::proto::Sample;
use fleetop_agent::sim::{Model, Scenario, SimConfig, SimNode};
use fleetop_agent::sources::Sampler;
use fleetop_agent::wire::{Decoder, decode, encode, encode_columns};
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

/// `s` with its InfiniBand packet counters as column deltas leave them: at
/// the figures of `base`, the last sample that carried them.
fn packets_as_in(s: &Sample, base: &Sample) -> Sample {
    let mut s = s.clone();
    for (p, b) in s.ib_ports.iter_mut().zip(&base.ib_ports) {
        (p.tx_packets, p.rx_packets) = (b.tx_packets, b.rx_packets);
    }
    s
}

#[test]
fn column_deltas_round_trip_every_scenario_through_a_lagging_stream() {
    let mut listed = 0;
    for &scenario in Scenario::all() {
        let mut n = node(scenario);
        let (mut sent, mut links) = (None::<Sample>, None::<Sample>);
        // The last sample sent otherwise than as a column delta.
        let mut packets: Option<Sample> = None;
        let mut rx = Decoder::default();
        // Across the problem's onset, when XIDs, links and states change.
        let window = (fleetop_agent::sim::ONSET_MS - 30_000..fleetop_agent::sim::ONSET_MS + 60_000).step_by(1000);
        for (i, t) in window.enumerate() {
            let Some(s) = n.sample(t) else { continue };
            // A subscriber that lags skips samples: they are in neither
            // end's chain (one of them carries NVLink counters).
            if (40..43).contains(&i) {
                continue;
            }
            let wire = encode_columns(sent.as_ref(), links.as_ref(), &s);
            match &wire.columns {
                None => {
                    // Whole (a first sample, or one that no delta can say),
                    // never a plain delta.
                    assert_eq!(wire.delta_from_seq, 0, "{scenario:?} at {t}: every delta fits columns");
                    packets = Some(s.clone());
                }
                Some(_) => listed += wire.gpus.len() + wire.ib_ports.len(),
            }
            let back = rx.decode(wire).expect("in sequence").clone();
            let base = packets.as_ref().expect("the first sample is whole");
            assert_eq!(back, packets_as_in(&s, base), "{scenario:?} at {t}");
            if fleetop_agent::wire::columns::carries_links(&s) {
                links = Some(s.clone());
            }
            sent = Some(s);
        }
    }
    // The problems changed something besides the readings, and it travelled.
    assert!(listed > 10, "{listed} GPUs and ports listed");
}

#[test]
fn a_busy_h100_node_costs_under_60_bytes_per_gpu_sample_in_column_deltas() {
    // Not a timing: a size, which is deterministic for the simulation.
    let mut n = node(Scenario::Training);
    let (mut sent, mut links) = (None::<Sample>, None::<Sample>);
    let (mut plain, mut columns, mut gpu_samples) = (0usize, 0usize, 0usize);
    for t in (3_000_000..3_100_000).step_by(1000) {
        let Some(s) = n.sample(t) else { continue };
        let wire = encode_columns(sent.as_ref(), links.as_ref(), &s);
        if fleetop_agent::wire::columns::carries_links(&s) {
            links = Some(s.clone());
        }
        // After the stream's first sample, which is whole.
        if let Some(prev) = sent.replace(s.clone()) {
            assert!(
                wire.gpus.is_empty() && wire.ib_ports.is_empty(),
                "nothing but readings changed"
            );
            columns += wire.encoded_len();
            plain += encode(Some(&prev), &s).encoded_len();
            gpu_samples += s.gpus.len();
        }
    }
    let per = columns / gpu_samples;
    assert!(per < 60, "{per} bytes per GPU-sample");
    assert!(
        columns * 10 < plain * 6,
        "{columns} B as columns, {plain} B as plain deltas"
    );
}

/// A simulated MI300X node's samples (RAS counts, XGMI status, throttle
/// words, AMD's events) cross the wire exactly, as deltas and as column
/// deltas, in every scenario, across the problem's onset.
#[test]
fn an_mi300x_node_round_trips_every_scenario() {
    for &scenario in Scenario::all() {
        let sim = SimNode::new(SimConfig {
            hostname: "w".into(),
            gpus: 8,
            ib_ports: 8,
            model: Model::Mi300x,
            scenario,
            seed: 11,
            start_ms: 0,
            problem_ms: None,
            interval_ms: 1000,
        });
        let mut n = Collector::new(vec![Box::new(sim) as Box<dyn Sampler>], Default::default());
        let (mut sent, mut received) = (None::<Sample>, None::<Sample>);
        let mut rx = Decoder::default();
        let (mut links, mut packets) = (None::<Sample>, None::<Sample>);
        let window = (fleetop_agent::sim::ONSET_MS - 5_000..fleetop_agent::sim::ONSET_MS + 10_000).step_by(1000);
        for t in window {
            let Some(s) = n.sample(t) else { continue };
            let back = decode(received.as_mut(), encode(sent.as_ref(), &s)).expect("in sequence");
            assert_eq!(back, s, "{scenario:?} at {t}");
            let wire = encode_columns(sent.as_ref(), links.as_ref(), &s);
            if wire.columns.is_none() {
                packets = Some(s.clone());
            }
            let cols = rx.decode(wire).expect("in sequence").clone();
            let base = packets.as_ref().expect("the first sample is whole");
            assert_eq!(cols, packets_as_in(&s, base), "{scenario:?} at {t}, columns");
            if fleetop_agent::wire::columns::carries_links(&s) {
                links = Some(s.clone());
            }
            sent = Some(s);
            received = Some(back);
        }
    }
}
