//! Rates from two samples of the same node. Counters travel as counters:
//! a wrap, a saturated counter or a reset gives an honest `None` or a marked
//! delta, never a spike.

use fleetop_proto::counters::{self, CounterWidth};
use fleetop_proto::ib;

use crate::model::rates::IbRates;
use crate::model::sample::NodeSample;

/// Bytes per second of KiB counters, link by link; NaN where unknown (as
/// `GpuRates` holds them).
pub fn kib_rates(before: &[u64], after: &[u64], dt_ms: i64) -> Vec<f32> {
    after
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            before
                .get(i)
                .and_then(|b| counters::rate_per_s(*b, v, CounterWidth::U64, dt_ms))
                .map_or(f32::NAN, |r| (r * 1024.0) as f32)
        })
        .collect()
}

/// InfiniBand rates and error deltas between two samples of the same node,
/// into `out` (the node's previous ones): written in place, as every node
/// does this every second, rather than a fresh list a port.
pub fn derive_ib(prev: &NodeSample, cur: &NodeSample, out: &mut Vec<IbRates>) {
    let dt = cur.time_ms - prev.time_ms;
    out.resize_with(cur.ib_ports.len(), IbRates::default);
    for (q, r) in cur.ib_ports.iter().zip(out.iter_mut()) {
        let Some(p) = prev.ib_ports.iter().find(|p| p.port == q.port) else {
            *r = IbRates::default();
            continue;
        };
        r.tx_bytes_per_s = counters::rate_per_s(p.tx_bytes, q.tx_bytes, ib::DATA_WIDTH, dt);
        r.rx_bytes_per_s = counters::rate_per_s(p.rx_bytes, q.rx_bytes, ib::DATA_WIDTH, dt);
        for (((d, a), b), (_, width)) in r
            .errors
            .iter_mut()
            .zip(&p.errors)
            .zip(&q.errors)
            .zip(&ib::ERROR_COUNTERS)
        {
            *d = match (a, b) {
                (Some(a), Some(b)) => Some(counters::delta(*a, *b, *width)),
                _ => None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rates::Delta;
    use crate::model::sample::IbReading;

    #[test]
    fn ib_rates_come_from_counters_and_resets_give_none() {
        let mut errors = [None; ib::ERROR_COUNTERS.len()];
        errors[0] = Some(0);
        let a = NodeSample {
            time_ms: 1000,
            ib_ports: vec![IbReading {
                tx_bytes: 4_000,
                rx_bytes: 1 << 40,
                errors,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.time_ms = 3000;
        b.ib_ports[0].tx_bytes = 8_000;
        b.ib_ports[0].rx_bytes = 5;
        b.ib_ports[0].errors[0] = Some(7);
        let derive = |p: &NodeSample, c: &NodeSample| {
            let mut out = Vec::new();
            derive_ib(p, c, &mut out);
            out
        };
        let d = derive(&a, &b);
        assert_eq!(d[0].tx_bytes_per_s, Some(2000.0));
        assert_eq!(d[0].rx_bytes_per_s, None, "a counter that went back is a reset");
        assert_eq!(d[0].errors[0], Some(Delta::Exact(7)));
        assert_eq!(d[0].errors[1], None, "unreadable counters have no delta");
        let mut c = b.clone();
        c.time_ms = 3000;
        assert_eq!(derive(&b, &c)[0].tx_bytes_per_s, None, "no time, no rate");
        // Written over the last rates in place: a port that no longer has
        // a counterpart has no rates, not the last ones.
        let mut out = derive(&a, &b);
        c.ib_ports[0].port = 9;
        derive_ib(&b, &c, &mut out);
        assert_eq!(out[0], IbRates::default());
    }
}
