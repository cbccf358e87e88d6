//! What a /metrics scrape costs the agent: rendering the Prometheus text
//! for an 8-GPU node (18 NVLink links a GPU, 8 InfiniBand ports, a Slurm
//! job), from a published sample, as the endpoint does; and the same with
//! gzip, as Prometheus asks for it. Target: under 1 ms of CPU a scrape.

use std::hint::black_box;
use std::io::Write;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use fleetop_agent::serve::metrics::{Publisher, render};

#[path = "support/node.rs"]
mod support;

fn node() -> (fleetop_agent::proto::NodeInfo, Publisher, i64) {
    let start = support::START_MS;
    let mut c = support::busy_node();
    let mut info = c.info().clone();
    info.sample_interval_ms = 1000;
    let p = Publisher::default();
    let mut t = start;
    // The first sample carries the NVLink counters; a few more for GPM.
    for _ in 0..3 {
        if let Some(s) = c.sample(t) {
            p.publish(&Arc::new(s));
        }
        t += 1000;
    }
    (info, p, t - 1000)
}

fn bench(c: &mut Criterion) {
    let (info, p, now) = node();
    let mut probe = String::new();
    render(&info, &p.latest(), now, &mut probe);
    eprintln!(
        "scrape: {} series, {} bytes",
        probe.lines().filter(|l| !l.starts_with('#')).count(),
        probe.len()
    );
    c.bench_function("metrics_render_8_gpus", |b| {
        b.iter(|| {
            let mut out = String::with_capacity(64 * 1024);
            render(&info, &p.latest(), now, &mut out);
            black_box(out)
        })
    });
    c.bench_function("metrics_render_gzip_8_gpus", |b| {
        b.iter(|| {
            let mut out = String::with_capacity(64 * 1024);
            render(&info, &p.latest(), now, &mut out);
            let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(16 * 1024), flate2::Compression::fast());
            gz.write_all(out.as_bytes()).expect("gzip");
            black_box(gz.finish().expect("gzip"))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
