//! Where a busy simulated H100 node's wire bytes go, field by field, per
//! GPU-sample, as plain deltas and as column deltas (both as sent on a
//! stream after its first, whole, sample):
//! `cargo run --release -p fleetop-agent --example wire_breakdown`.
//! A figure for docs/PERFORMANCE.md, not a test.

use std::collections::BTreeMap;

use fleetop_agent::collector::Collector;
use fleetop_agent::proto::{GpuSample, IbSample, Sample};
use fleetop_agent::sim::{Model, Scenario, SimConfig, SimNode};
use fleetop_agent::sources::Sampler;
use fleetop_agent::wire::{encode, encode_columns};
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

/// What clearing a part of `m` saves, in bytes.
fn part<M: Message + Clone>(m: &M, clear: impl Fn(&mut M)) -> usize {
    let mut c = m.clone();
    clear(&mut c);
    m.encoded_len() - c.encoded_len()
}

fn plain(w: &Sample, by: &mut BTreeMap<&'static str, usize>) {
    for g in &w.gpus {
        let mut f = |k, clear: &dyn Fn(&mut GpuSample)| *by.entry(k).or_default() += part(g, clear);
        f("index", &|c| c.index = 0);
        f("util", &|c| c.util_pct = 0);
        f("mem_util", &|c| c.mem_util_pct = 0);
        f("mem_used", &|c| c.mem_used_bytes = 0);
        f("temp", &|c| c.temp_c = 0);
        f("power", &|c| c.power_mw = 0);
        f("sm_clock", &|c| c.sm_clock_mhz = 0);
        f("throttle", &|c| c.throttle_reasons = 0);
        f("energy", &|c| c.energy_mj = 0);
        f("hbm", &|c| c.hbm_temp_c = 0);
        f("pcie", &|c| (c.pcie_tx_kbps, c.pcie_rx_kbps) = (0, 0));
        f("nvlink", &|c| (c.nvlink_tx_kib, c.nvlink_rx_kib) = (vec![], vec![]));
        f("gpm", &|c| c.gpm = None);
        f("procs", &|c| (c.processes, c.processes_unchanged) = (vec![], false));
        *by.entry("gpu total").or_default() += g.encoded_len() + 2;
    }
    for p in &w.ib_ports {
        let mut f = |k, clear: &dyn Fn(&mut IbSample)| *by.entry(k).or_default() += part(p, clear);
        f("ib port", &|c| c.port = 0);
        f("ib bytes", &|c| (c.tx_bytes, c.rx_bytes) = (0, 0));
        f("ib packets", &|c| (c.tx_packets, c.rx_packets) = (0, 0));
        *by.entry("ib total").or_default() += p.encoded_len() + 2;
    }
    rest(w, by);
}

fn columns(w: &Sample, by: &mut BTreeMap<&'static str, usize>) {
    let Some(c) = &w.columns else { return };
    // Each reading's run of values, one a GPU (GPM four), in bit order.
    let names = [
        "util", "mem_util", "temp", "hbm", "power", "sm_clock", "pcie tx", "pcie rx", "throttle", "energy", "gpm",
    ];
    let n = w.gpus.len().max(c.nvlink_links.len()).max(8);
    let mut at = 0;
    for (bit, name) in names.iter().enumerate() {
        if c.readings & (1 << bit) != 0 {
            let len = if *name == "gpm" { 4 * n } else { n };
            let run = &c.values[at..at + len];
            at += len;
            *by.entry(name).or_default() += run
                .iter()
                .map(|&v| prost::encoding::encoded_len_varint(v))
                .sum::<usize>();
        }
    }
    *by.entry("values, readings (headers)").or_default() += part(c, |c| (c.values, c.readings) = (vec![], 0))
        - c.values
            .iter()
            .map(|&v| prost::encoding::encoded_len_varint(v))
            .sum::<usize>();
    *by.entry("nvlink").or_default() += part(c, |c| {
        (c.nvlink_links, c.nvlink_tx_kib, c.nvlink_rx_kib, c.nvlink_since_seq) = (vec![], vec![], vec![], 0)
    });
    *by.entry("ib bytes").or_default() += part(c, |c| c.ib_bytes.clear());
    *by.entry("listed GPUs and ports").or_default() += part(w, |s| (s.gpus, s.ib_ports) = (vec![], vec![]));
    rest(w, by);
}

fn rest(w: &Sample, by: &mut BTreeMap<&'static str, usize>) {
    *by.entry("host").or_default() += part(w, |s| s.host = None);
    let mut r = w.clone();
    (r.gpus, r.ib_ports, r.host, r.columns) = (vec![], vec![], None, None);
    *by.entry("sample header").or_default() += r.encoded_len()
        + w.columns
            .as_ref()
            .map_or(0, |c| 1 + prost::encoding::encoded_len_varint(c.encoded_len() as u64));
}

fn main() {
    let mut n = node();
    let (mut sent, mut links) = (None::<Sample>, None::<Sample>);
    let (mut gs, mut ns) = (0usize, 0usize);
    let (mut by_plain, mut by_columns) = (BTreeMap::new(), BTreeMap::new());
    let (mut total_plain, mut total_columns) = (0usize, 0usize);
    for t in (3_000_000..3_100_000).step_by(1000) {
        let Some(s) = n.sample(t) else { continue };
        let w = encode(sent.as_ref(), &s);
        let c = encode_columns(sent.as_ref(), links.as_ref(), &s);
        if fleetop_agent::wire::columns::carries_links(&s) {
            links = Some(s.clone());
        }
        // A stream's first sample is whole: the figures are for what follows.
        if sent.replace(s.clone()).is_none() {
            continue;
        }
        total_plain += w.encoded_len();
        total_columns += c.encoded_len();
        gs += s.gpus.len();
        ns += 1;
        plain(&w, &mut by_plain);
        columns(&c, &mut by_columns);
    }
    for (what, total, by) in [("plain", total_plain, by_plain), ("column", total_columns, by_columns)] {
        println!(
            "{what} deltas: {:.1} B per GPU-sample over {ns} samples",
            total as f64 / gs as f64
        );
        for (k, v) in by {
            println!("  {k:28} {:6.2}", v as f64 / gs as f64);
        }
    }
}
