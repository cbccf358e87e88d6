//! Burn-in on simulated agents over gRPC, as the console runs it: the GPU
//! checks are answered by the simulation (said so in every reason), pass on
//! a healthy node and fail where the node's scenario breaks a GPU.

use fleetop_agent::bench::expect::{Expectations, Verdict};
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::bench_event::Kind;
use fleetop_agent::proto::{BenchRequest, BenchResult};
use fleetop_agent::serve::server::{AgentOptions, BenchSettings, serve_sim};
use fleetop_agent::sim::{Model, ONSET_MS, Scenario, SimConfig, target_gpu};
use fleetop_proto::bench::GPU_CHECKS;

const GPUS: u32 = 4;

/// A quick suite on a simulated 4-GPU node whose problem has been on for a
/// minute; its results, once the suite is done.
async fn quick(scenario: Scenario, seed: u64) -> Vec<BenchResult> {
    let sim = SimConfig {
        hostname: "sim-bench".into(),
        gpus: GPUS,
        ib_ports: 1,
        model: Model::H100,
        scenario,
        seed,
        start_ms: fleetop_agent::now_ms() - ONSET_MS - 60_000,
        interval_ms: 1000,
        problem_ms: None,
    };
    let opts = AgentOptions {
        bench: Some(BenchSettings {
            token: "t".into(),
            expectations: Expectations::load(None).expect("shipped"),
            max_duration: std::time::Duration::from_secs(600),
        }),
        // Plaintext: the client is in this process.
        insecure: true,
        ..Default::default()
    };
    let agent = serve_sim(sim, opts).await.expect("serves");
    let mut c = AgentClient::connect(format!("http://{}", agent.addr))
        .await
        .expect("connects");
    let req = BenchRequest {
        token: "t".into(),
        suite: "quick".into(),
        timeout_s: 0,
        net_target: String::new(),
        ..Default::default()
    };
    let mut stream = c.run_bench(req).await.expect("starts").into_inner();
    let (mut results, mut done) = (Vec::new(), None);
    // Read up to the done event, as the console does (the agent keeps the
    // stream open until the suite's time limit or the client leaves).
    while let Some(ev) = stream.message().await.expect("stream") {
        match ev.kind {
            Some(Kind::Result(r)) => results.push(r),
            Some(Kind::Done(d)) => {
                done = Some(d);
                break;
            }
            _ => {}
        }
    }
    let done = done.expect("a done event");
    assert!(!done.cancelled && done.error.is_empty(), "{done:?}");
    // The client goes first: the server's shutdown waits for its connections.
    drop((stream, c));
    agent.stop().await;
    results
}

fn gpu_checks(results: &[BenchResult]) -> Vec<&BenchResult> {
    results
        .iter()
        .filter(|r| GPU_CHECKS.contains(&r.name.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_sim_node_passes_every_gpu_check_as_simulated() {
    let results = quick(Scenario::Training, 21).await;
    let gpu = gpu_checks(&results);
    // Per GPU: HBM, both PCIe directions, a copy to the next GPU and the
    // burn; and the all-reduce's two figures.
    assert_eq!(gpu.len(), (GPUS * 5 + 2) as usize, "{gpu:#?}");
    for &name in GPU_CHECKS {
        assert!(gpu.iter().any(|r| r.name == name), "{name} missing: {gpu:#?}");
    }
    for r in &gpu {
        assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
        assert!(r.value > 0.0 && !r.unit.is_empty(), "measured: {r:?}");
        assert!(r.reason.contains("simulated (sim backend)"), "{r:?}");
    }
    let hbm = gpu.iter().find(|r| r.name == "hbm_d2d").expect("hbm");
    assert!(hbm.expected_min > 0.0 && hbm.value > hbm.expected_min, "{hbm:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pcie_degraded_sim_node_fails_pcie_for_that_gpu_only() {
    let seed = 6;
    let t = target_gpu(seed, GPUS) as i32;
    let results = quick(Scenario::PcieDegraded, seed).await;
    let gpu = gpu_checks(&results);
    let failed: Vec<(&str, i32)> = gpu
        .iter()
        .filter(|r| r.verdict() == Verdict::Fail)
        .map(|r| (r.name.as_str(), r.gpu))
        .collect();
    assert_eq!(failed, vec![("pcie_h2d", t), ("pcie_d2h", t)], "{gpu:#?}");
    for r in &gpu {
        if r.verdict() == Verdict::Fail {
            assert!(r.reason.contains("pcie-degraded"), "names the fault: {r:?}");
            assert!(r.value < r.expected_min, "{r:?}");
        } else {
            assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
        }
        assert!(r.reason.contains("simulated"), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xid79_sim_node_fails_the_lost_gpus_checks() {
    let seed = 9;
    let t = target_gpu(seed, GPUS) as i32;
    let results = quick(Scenario::Xid79, seed).await;
    let gpu = gpu_checks(&results);
    let own: Vec<&&BenchResult> = gpu.iter().filter(|r| r.gpu == t).collect();
    let names: Vec<&str> = own.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["hbm_d2d", "pcie_h2d", "pcie_d2h", "nvlink_p2p", "gemm_tflops"],
        "{gpu:#?}"
    );
    for r in own {
        assert_eq!(r.verdict(), Verdict::Fail, "{r:?}");
        assert!(r.reason.contains("fell off the bus"), "{r:?}");
    }
    // The other GPUs' own checks (nothing that needs the lost one) pass.
    for r in gpu.iter().filter(|r| r.gpu >= 0 && r.gpu != t && r.peer != t) {
        assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
    }
}
