//! The agent's CPU per sample on the NVML path: 8 GPUs of the fake
//! libnvidia-ml.so (tests/fake-nvml, the 8x H100 SXM5 profile: 18 NVLink
//! links each). The time reported is the sampling thread's CPU time
//! (CLOCK_THREAD_CPUTIME_ID), not wall time. The fake answers from memory,
//! so this is the agent's own cost plus a cheap library; a real driver's
//! calls cost more (ioctls). On a GPU machine, `FLEETOP_BENCH_NVML_LIB=
//! libnvidia-ml.so.1` samples the real driver's GPUs instead (however many
//! it has), with the same clock.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fleetop_agent::backend::{self, Backend, BackendOptions};

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "no thread CPU clock");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn fake_lib() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "fleetop-fake-nvml"])
        .current_dir(&root)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the fake NVML failed");
    root.join("target/debug/libnvidia_ml.so")
}

fn nvml_sample(c: &mut Criterion) {
    let real = std::env::var_os("FLEETOP_BENCH_NVML_LIB").map(PathBuf::from);
    if real.is_none() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        // SAFETY: set before any thread of ours reads the environment.
        unsafe {
            std::env::set_var(
                "FAKE_NVML_PROFILE",
                root.join("tests/fake-nvml/profiles/h100-sxm5.toml"),
            );
        }
    }
    let mut opts = BackendOptions::sim(fleetop_agent::sim::SimConfig {
        hostname: "bench".into(),
        gpus: 8,
        ib_ports: 0,
        model: fleetop_agent::sim::Model::H100,
        scenario: fleetop_agent::sim::Scenario::Training,
        seed: 1,
        start_ms: 0,
        problem_ms: None,
        interval_ms: 1000,
    });
    opts.backend = Backend::Nvml;
    let name = match &real {
        Some(_) => "nvml sample, every GPU of the real driver, CPU",
        None => "nvml sample, 8 GPUs x 18 NVLink links (fake NVML), CPU",
    };
    opts.nvml_lib = Some(real.unwrap_or_else(fake_lib));
    opts.ib_sysfs = "/nonexistent".into();
    opts.proc_root = "/nonexistent".into();
    let (mut collector, _) = backend::build(&opts).expect("the NVML library loads");
    let mut group = c.benchmark_group("agent");
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let t0 = thread_cpu();
            for _ in 0..iters {
                black_box(collector.sample(fleetop_agent::now_ms()));
            }
            thread_cpu() - t0
        })
    });
    group.finish();
}

criterion_group!(benches, nvml_sample);
criterion_main!(benches);
