//! Per-stream delta encoding of samples, to keep the wire small.
//!
//! Counters are big numbers that change by small amounts: sent as they are,
//! a busy GPU's 36 NVLink counters alone cost ~200 bytes a second. On a
//! stream, each sample after the first is encoded against the previous one
//! sent on that same stream: counters become wrapping differences (exact
//! whatever the counter does, resets included) and unchanged IB state words
//! become empty. The console decodes before anything else sees the sample,
//! so counters still arrive as counters and rates are still derived from two
//! known samples.

use crate::proto::{GpuSample, IbSample, Sample};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("sample {seq} is encoded against sample {base}, but the last one received was {have}")]
pub struct OutOfSequence {
    pub seq: u64,
    pub base: u64,
    pub have: u64,
}

fn same_shape(prev: &Sample, cur: &Sample) -> bool {
    prev.gpus.len() == cur.gpus.len()
        && prev.ib_ports.len() == cur.ib_ports.len()
        && prev.gpus.iter().zip(&cur.gpus).all(|(a, b)| {
            a.index == b.index
                && a.nvlink_tx_kib.len() == b.nvlink_tx_kib.len()
                && a.nvlink_rx_kib.len() == b.nvlink_rx_kib.len()
        })
        && prev.ib_ports.iter().zip(&cur.ib_ports).all(|(a, b)| {
            a.port == b.port
                && a.errors.len() == b.errors.len()
                && word_can_travel_as_delta(&a.state, &b.state)
                && word_can_travel_as_delta(&a.phys_state, &b.phys_state)
        })
}

/// An empty word means "unchanged" in a delta: a word that really became
/// empty can only travel in a whole sample.
fn word_can_travel_as_delta(prev: &str, cur: &str) -> bool {
    !cur.is_empty() || prev.is_empty()
}

/// Applies `op` to every counter of `cur` with its counterpart in `prev`.
fn each_counter(prev: &Sample, cur: &mut Sample, op: fn(u64, u64) -> u64) {
    for (p, c) in prev.gpus.iter().zip(cur.gpus.iter_mut()) {
        gpu_counters(p, c, op);
    }
    for (p, c) in prev.ib_ports.iter().zip(cur.ib_ports.iter_mut()) {
        ib_counters(p, c, op);
    }
}

fn gpu_counters(p: &GpuSample, c: &mut GpuSample, op: fn(u64, u64) -> u64) {
    c.energy_mj = op(c.energy_mj, p.energy_mj);
    c.pcie_replay_count = op(c.pcie_replay_count, p.pcie_replay_count);
    c.ecc_corrected_volatile = op(c.ecc_corrected_volatile, p.ecc_corrected_volatile);
    c.ecc_uncorrected_volatile = op(c.ecc_uncorrected_volatile, p.ecc_uncorrected_volatile);
    for (x, y) in c.nvlink_tx_kib.iter_mut().zip(&p.nvlink_tx_kib) {
        *x = op(*x, *y);
    }
    for (x, y) in c.nvlink_rx_kib.iter_mut().zip(&p.nvlink_rx_kib) {
        *x = op(*x, *y);
    }
}

fn ib_counters(p: &IbSample, c: &mut IbSample, op: fn(u64, u64) -> u64) {
    c.tx_bytes = op(c.tx_bytes, p.tx_bytes);
    c.rx_bytes = op(c.rx_bytes, p.rx_bytes);
    c.tx_packets = op(c.tx_packets, p.tx_packets);
    c.rx_packets = op(c.rx_packets, p.rx_packets);
    for (x, y) in c.errors.iter_mut().zip(&p.errors) {
        *x = op(*x, *y);
    }
}

/// `cur` as sent after `prev` on the same stream: a delta when the two have
/// the same shape, the sample whole otherwise.
pub fn encode(prev: Option<&Sample>, cur: &Sample) -> Sample {
    let mut out = cur.clone();
    let Some(prev) = prev.filter(|p| same_shape(p, cur)) else {
        return out;
    };
    each_counter(prev, &mut out, u64::wrapping_sub);
    for (p, c) in prev.ib_ports.iter().zip(out.ib_ports.iter_mut()) {
        if c.state == p.state {
            c.state.clear();
        }
        if c.phys_state == p.phys_state {
            c.phys_state.clear();
        }
    }
    out.delta_from_seq = prev.seq;
    out
}

/// The whole sample from what arrived and the previous whole sample of the
/// same stream.
pub fn decode(prev: Option<&Sample>, mut got: Sample) -> Result<Sample, OutOfSequence> {
    if got.delta_from_seq == 0 {
        return Ok(got);
    }
    let have = prev.map(|p| p.seq).unwrap_or(0);
    let Some(prev) = prev.filter(|p| p.seq == got.delta_from_seq && same_shape_for_decode(p, &got))
    else {
        return Err(OutOfSequence {
            seq: got.seq,
            base: got.delta_from_seq,
            have,
        });
    };
    each_counter(prev, &mut got, u64::wrapping_add);
    for (p, c) in prev.ib_ports.iter().zip(got.ib_ports.iter_mut()) {
        if c.state.is_empty() {
            c.state.clone_from(&p.state);
        }
        if c.phys_state.is_empty() {
            c.phys_state.clone_from(&p.phys_state);
        }
    }
    got.delta_from_seq = 0;
    Ok(got)
}

fn same_shape_for_decode(prev: &Sample, got: &Sample) -> bool {
    prev.gpus.len() == got.gpus.len() && prev.ib_ports.len() == got.ib_ports.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::Sampler;
    use crate::sim::{Model, Scenario, SimConfig, SimNode};
    use prost::Message;

    fn node(scenario: Scenario) -> SimNode {
        SimNode::new(SimConfig {
            hostname: "w".into(),
            gpus: 8,
            ib_ports: 8,
            model: Model::H100,
            scenario,
            seed: 11,
            start_ms: 0,
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
            for (seq, t) in (3_000_000..3_060_000).step_by(1000).enumerate() {
                let mut s = Sample {
                    seq: seq as u64 + 1,
                    time_ms: t,
                    ..Default::default()
                };
                n.sample(t, &mut s);
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
                let back = decode(received.as_ref(), wire).expect("in sequence");
                assert_eq!(back, s, "{scenario:?} at {t}");
                sent = Some(s);
                received = Some(back);
            }
        }
    }

    #[test]
    fn counters_that_go_backwards_survive() {
        let a = Sample {
            seq: 1,
            ib_ports: vec![IbSample {
                tx_bytes: 1 << 40,
                state: "ACTIVE".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.ib_ports[0].tx_bytes = 5;
        let back = decode(Some(&a), encode(Some(&a), &b)).expect("decodes");
        assert_eq!(back, b);
    }

    #[test]
    fn a_state_that_becomes_empty_travels_whole() {
        let a = Sample {
            seq: 1,
            ib_ports: vec![IbSample {
                state: "ACTIVE".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.ib_ports[0].state.clear();
        let wire = encode(Some(&a), &b);
        assert_eq!(wire.delta_from_seq, 0);
        assert_eq!(decode(Some(&a), wire).expect("whole"), b);
    }

    #[test]
    fn a_delta_against_the_wrong_base_is_refused() {
        let a = Sample {
            seq: 1,
            ..Default::default()
        };
        let b = Sample {
            seq: 2,
            ..Default::default()
        };
        let c = Sample {
            seq: 3,
            ..Default::default()
        };
        let wire = encode(Some(&b), &c);
        assert_eq!(
            decode(Some(&a), wire),
            Err(OutOfSequence {
                seq: 3,
                base: 2,
                have: 1
            })
        );
        assert!(decode(None, encode(Some(&b), &c)).is_err());
    }
}
