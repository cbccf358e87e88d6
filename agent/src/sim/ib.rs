//! One simulated InfiniBand port's readings at a time: its traffic, and a
//! port going down or counting symbol errors in the scenarios that say so.
//! Apart from the GPUs: ports have their own target and their own problems.

use fleetop_proto::ib;

use super::{ONSET_MS, Scenario, SimNode, target_ib_port};
use crate::proto::IbSample;

impl SimNode {
    pub(super) fn ib_sample(&self, port: u32, now_ms: i64) -> IbSample {
        let c = &self.cfg;
        let elapsed_s = ((now_ms - c.start_ms).max(0) as f64) / 1000.0;
        let target = port == target_ib_port(c.seed, c.ib_ports);
        let busy = !matches!(c.scenario, Scenario::Quiet | Scenario::Idle);
        let mut s = IbSample {
            port,
            state: "ACTIVE".into(),
            phys_state: "LinkUp".into(),
            rate_gbps: self.spec.ib_rate_gbps,
            errors: vec![0; ib::ERROR_COUNTERS.len()],
            errors_present_mask: (1 << ib::ERROR_COUNTERS.len()) - 1,
            ..Default::default()
        };
        let share = if busy { 0.3 } else { 0.001 };
        let bytes_per_s = f64::from(self.spec.ib_rate_gbps) * 1e9 / 8.0 * share;
        let mut t = elapsed_s;
        let onset_s = ONSET_MS as f64 / 1000.0;
        if target && c.scenario == Scenario::IbDown {
            t = t.min(onset_s);
            if self.problem_active(now_ms) {
                s.state = "DOWN".into();
                s.phys_state = "Polling".into();
                s.errors[2] = 1; // link_downed
            }
        }
        if target && c.scenario == Scenario::IbErrors && self.problem_active(now_ms) {
            // symbol_error climbs a few per second (a 16-bit counter: saturates).
            let since = elapsed_s - onset_s;
            s.errors[0] = ((since * 4.0) as u64).min(0xFFFF);
            s.errors[1] = (since / 30.0) as u64; // link_error_recovery
        }
        s.tx_bytes = (bytes_per_s * t) as u64 / 4 * 4;
        s.rx_bytes = (bytes_per_s * 0.97 * t) as u64 / 4 * 4;
        s.tx_packets = s.tx_bytes / 4096;
        s.rx_packets = s.rx_bytes / 4096;
        s
    }
}
