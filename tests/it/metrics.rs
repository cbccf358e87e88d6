//! The agent's /metrics on the NVML path (the fake libnvidia-ml.so): what
//! a GPU does not report is no series, and MIG instances carry
//! dcgm-exporter's GPU_I_PROFILE and GPU_I_ID labels.

use crate::nvml_fake::{fake_lib, profile};
use crate::{Agent, agent_bin};

#[path = "../../agent/tests/common/scrape.rs"]
mod scrape;

/// An agent on the fake NVML with `profile_name`, serving /metrics on the
/// returned port.
fn nvml_metrics_agent(profile_name: &str) -> (Agent, u16) {
    let mut agent = Agent::spawn(
        std::process::Command::new(agent_bin())
            .args(["--backend", "nvml", "--interval", "200ms", "--ib-sysfs", "/nonexistent"])
            .args(crate::HERMETIC_AGENT)
            .arg("--nvml-lib")
            .arg(fake_lib())
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .env("FAKE_NVML_PROFILE", profile(profile_name))
            .env("FAKE_NVML_TIME_S", "100")
            .stdout(std::process::Stdio::null()),
        "warn",
    );
    let port = agent.log.metrics().port();
    (agent, port)
}

#[test]
fn a_memory_temperature_the_gpu_does_not_support_is_no_series_not_zero() {
    let (_a, port) = nvml_metrics_agent("faults/degraded.toml");
    let s = scrape::scrape_until(port, &[], |s| s.named("DCGM_FI_DEV_GPU_TEMP").len() == 8);
    // GPU 0 answers NOT_SUPPORTED for its HBM temperature; the others read.
    assert!(s.one("DCGM_FI_DEV_MEMORY_TEMP", &[("gpu", "0")]).is_none());
    assert_eq!(s.named("DCGM_FI_DEV_MEMORY_TEMP").len(), 7);
    assert!(
        s.one("DCGM_FI_DEV_GPU_TEMP", &[("gpu", "0")])
            .is_some_and(|x| x.value > 0.0)
    );
    // GPU 1's processes are refused: no Slurm job is known, so no label.
    let g1 = s.one("DCGM_FI_DEV_GPU_TEMP", &[("gpu", "1")]).expect("GPU 1");
    assert!(!g1.labels.contains_key("hpc_job"), "{g1:?}");
}

#[test]
fn mig_instances_are_series_of_their_own_with_profile_and_id() {
    let (_a, port) = nvml_metrics_agent("h100-sxm5-mig.toml");
    let s = scrape::scrape_until(port, &[], |s| {
        s.named("DCGM_FI_PROF_SM_ACTIVE")
            .iter()
            .any(|x| x.labels.contains_key("GPU_I_ID"))
    });
    let fb: Vec<_> = s
        .named("DCGM_FI_DEV_FB_USED")
        .into_iter()
        .filter(|x| x.labels["gpu"] == "3")
        .collect();
    let profiles: Vec<&str> = fb.iter().map(|x| x.labels["GPU_I_PROFILE"].as_str()).collect();
    assert_eq!(profiles, ["3g.40gb", "2g.20gb", "1g.10gb"], "{fb:?}");
    assert!(fb.iter().all(|x| !x.labels["GPU_I_ID"].is_empty()));
    // 38,000,000,000 bytes used, in MiB.
    assert_eq!(fb[0].value, (38_000_000_000u64 >> 20) as f64);
    let busy = s
        .one("DCGM_FI_PROF_SM_ACTIVE", &[("gpu", "3"), ("GPU_I_PROFILE", "3g.40gb")])
        .expect("instance GPM");
    assert!((busy.value - 0.91).abs() < 1e-9, "{busy:?}");
    // The other GPUs are whole: no instance labels.
    let g0 = s.one("DCGM_FI_DEV_FB_USED", &[("gpu", "0")]).expect("GPU 0");
    assert!(!g0.labels.contains_key("GPU_I_ID"));
}
