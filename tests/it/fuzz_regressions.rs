//! Inputs the fuzzers found (scripts/fuzz.sh copies them to
//! tests/fuzz-regressions/<target>/) replayed through the same entry points,
//! so a bug once found stays fixed. Each must simply not panic.

use std::path::Path;

/// A fuzz target's entry point.
type Target = fn(&[u8]);

#[test]
fn every_input_the_fuzzers_found_is_handled() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let targets: [(&str, Target); 7] = [
        ("hostlist", fleetop::fuzz::hostlist),
        ("config", fleetop::fuzz::config),
        ("theme", fleetop::fuzz::theme),
        ("slurm", fleetop::fuzz::slurm),
        ("wire", fleetop::fuzz::wire),
        ("agent_stream", fleetop::fuzz::agent_stream),
        ("promtext", fleetop::fuzz::promtext),
    ];
    let mut replayed = 0;
    for (name, run) in targets {
        for entry in std::fs::read_dir(dir.join(name)).into_iter().flatten().flatten() {
            let data = std::fs::read(entry.path()).expect("readable");
            run(&data);
            replayed += 1;
        }
    }
    // The seeds below are always there, so this test replays something.
    assert!(replayed >= targets.len(), "replayed {replayed}");
}

/// A real stream from the simulated backend (a node whose GPU falls off the
/// bus, with XIDs, delta-encoded both ways agents send it), whole and cut at every
/// few bytes, through decoding, the store, the export and every screen.
#[test]
fn a_real_agent_stream_and_its_truncations_never_panic_the_console() {
    use fleetop_agent::collector::Collector;
    use fleetop_agent::proto::agent_message::Kind;
    use fleetop_agent::proto::{AgentMessage, Sample};
    use fleetop_agent::sim::{Scenario, SimNode};
    use fleetop_agent::sources::Sampler;
    use prost::Message;

    let mut cfg = fleetop::ingest::demo::plan(1, 4, 3, 0).remove(0);
    cfg.scenario = Scenario::Xid79;
    let sim: Box<dyn Sampler> = Box::new(SimNode::new(cfg));
    let mut c = Collector::new(vec![sim], Default::default());
    let mut info = c.info().clone();
    info.sample_interval_ms = 1000;
    let mut bytes = AgentMessage {
        kind: Some(Kind::Info(info)),
    }
    .encode_length_delimited_to_vec();
    let mut columns = bytes.clone();
    let (mut last, mut links): (Option<Sample>, Option<Sample>) = (None, None);
    for t in (0..400).map(|i| 1_000_000 + i * 1000) {
        let Some(s) = c.sample(t) else { continue };
        // As plain deltas, and as column deltas (what this console asks for).
        for (out, wire) in [
            (&mut bytes, fleetop_agent::wire::encode(last.as_ref(), &s)),
            (
                &mut columns,
                fleetop_agent::wire::encode_columns(last.as_ref(), links.as_ref(), &s),
            ),
        ] {
            out.extend(
                AgentMessage {
                    kind: Some(Kind::Sample(wire)),
                }
                .encode_length_delimited_to_vec(),
            );
        }
        if fleetop_agent::wire::columns::carries_links(&s) {
            links = Some(s.clone());
        }
        last = Some(s);
    }
    for bytes in [bytes, columns] {
        fleetop::fuzz::agent_stream(&bytes);
        for cut in (0..bytes.len()).step_by(997) {
            fleetop::fuzz::agent_stream(&bytes[..cut]);
        }
    }
}
