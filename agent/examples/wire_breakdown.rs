//! Where a busy simulated H100 node's wire bytes go, field by field, per
//! GPU-sample (the delta encoding as sent on a stream after its first
//! sample): `cargo run --release -p fleetop-agent --example wire_breakdown`.
//! A figure for docs/PERFORMANCE.md, not a test.

use fleetop_agent::proto::{GpuSample, IbSample, Sample};
use fleetop_agent::sampler::{Collector, Sampler};
use fleetop_agent::sim::{Model, Scenario, SimConfig, SimNode};
use fleetop_agent::wire::encode;
use prost::Message;

fn node() -> Collector {
    let sim: Box<dyn Sampler> = Box::new(SimNode::new(SimConfig {
        hostname: "w".into(),
        gpus: 8,
        ib_ports: 8,
        model: Model::H100,
        scenario: Scenario::Training,
        seed: 11,
        start_ms: 0,
        problem_ms: None,
        interval_ms: 1000,
    }));
    Collector::new(vec![sim], Default::default())
}
fn main() {
    let mut n = node();
    let mut sent = None::<Sample>;
    let (mut total, mut gs, mut ns) = (0usize, 0usize, 0usize);
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in (3_000_000..3_100_000).step_by(1000) {
        let Some(s) = n.sample(t) else { continue };
        let w = encode(sent.as_ref(), &s);
        total += w.encoded_len();
        gs += s.gpus.len();
        ns += 1;
        for g in &w.gpus {
            let f = |set: &dyn Fn(&mut GpuSample)| {
                let mut c = g.clone();
                set(&mut c);
                g.encoded_len() - c.encoded_len()
            };
            *by.entry("gpu total").or_default() += g.encoded_len() + 2;
            *by.entry("index").or_default() += f(&|c| c.index = 0);
            *by.entry("util").or_default() += f(&|c| c.util_pct = 0);
            *by.entry("mem_util").or_default() += f(&|c| c.mem_util_pct = 0);
            *by.entry("mem_used").or_default() += f(&|c| c.mem_used_bytes = 0);
            *by.entry("temp").or_default() += f(&|c| c.temp_c = 0);
            *by.entry("power").or_default() += f(&|c| c.power_mw = 0);
            *by.entry("sm_clock").or_default() += f(&|c| c.sm_clock_mhz = 0);
            *by.entry("throttle").or_default() += f(&|c| c.throttle_reasons = 0);
            *by.entry("energy").or_default() += f(&|c| c.energy_mj = 0);
            *by.entry("hbm").or_default() += f(&|c| c.hbm_temp_c = 0);
            *by.entry("pcie").or_default() += f(&|c| (c.pcie_tx_kbps, c.pcie_rx_kbps) = (0, 0));
            *by.entry("nvlink").or_default() += f(&|c| {
                c.nvlink_tx_kib.clear();
                c.nvlink_rx_kib.clear()
            });
            *by.entry("gpm").or_default() += f(&|c| c.gpm = None);
            *by.entry("procs").or_default() += f(&|c| {
                c.processes.clear();
                c.processes_unchanged = false
            });
            *by.entry("absent").or_default() += f(&|c| c.absent = 0);
        }
        for p in &w.ib_ports {
            let f = |set: &dyn Fn(&mut IbSample)| {
                let mut c = p.clone();
                set(&mut c);
                p.encoded_len() - c.encoded_len()
            };
            *by.entry("ib total").or_default() += p.encoded_len() + 2;
            *by.entry("ib port").or_default() += f(&|c| c.port = 0);
            *by.entry("ib bytes").or_default() += f(&|c| (c.tx_bytes, c.rx_bytes) = (0, 0));
            *by.entry("ib packets").or_default() += f(&|c| (c.tx_packets, c.rx_packets) = (0, 0));
        }
        let mut rest = w.clone();
        rest.gpus.clear();
        rest.ib_ports.clear();
        *by.entry("sample rest").or_default() += rest.encoded_len();
        *by.entry("host").or_default() += w.host.as_ref().map(|h| h.encoded_len() + 2).unwrap_or(0);
        sent = Some(s);
    }
    println!("per GPU-sample: {:.1} B over {ns} samples", total as f64 / gs as f64);
    for (k, v) in by {
        println!("{k:12} {:6.2}", v as f64 / gs as f64);
    }
}
