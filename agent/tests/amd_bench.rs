//! Burn-in on AMD GPUs up to the library calls: the agent serving with
//! `--backend amd` on the fake AMD SMI (tests/fake-amdsmi) runs its suite
//! through the fake HIP and hipBLAS (tests/fake-hip), all three found in
//! `$ROCM_PATH/lib` as ROCm's tools find them, and is asked for a burn-in
//! over gRPC as the console asks. The fake's copies and GEMMs "take" the
//! time its profile says, so every figure is known: each is computed,
//! named as on NVIDIA and judged against the MI300X floors; a slow GPU
//! fails its floor; a missing library, or a call that fails, is a skipped
//! check that says why, in one printable line.
//!
//! None of this has run on a real AMD GPU: scripts/amd-gpu-check.sh is the
//! check for a real MI300X node.

// How a test learns the port the agent bound (docs/testing.md#ports).
#[allow(dead_code)]
#[path = "../../tests/support/ports.rs"]
mod ports;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fleetop_agent::bench::amd::NO_RCCL;
use fleetop_agent::bench::expect::Verdict;
use fleetop_agent::proto::BenchRequest;
use fleetop_agent::proto::BenchResult;
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::bench_event::Kind;
use fleetop_proto::bench::GPU_CHECKS;

#[path = "common/fake_amdsmi.rs"]
mod fake_amdsmi;

const TOKEN: &str = "amd-bench-token";
/// The fake HIP's pace: a fifth of a real GPU's (the burn still takes its 20 s).
const TIME_SCALE: &str = "0.2";
const GPUS: u32 = 8;

/// The fake libamdhip64.so, built once for this run.
fn fake_hip() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "fleetop-fake-hip"])
            .current_dir(fake_amdsmi::root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the fake HIP failed");
        // Beside the agent binary: the same target directory and profile.
        let lib = PathBuf::from(env!("CARGO_BIN_EXE_fleetop-agent")).with_file_name("libamdhip64.so");
        assert!(lib.exists(), "{} is missing", lib.display());
        lib
    })
}

fn hip_profile(name: &str) -> PathBuf {
    fake_amdsmi::root().join("tests/fake-hip/profiles").join(name)
}

/// Which of ROCm's libraries `$ROCM_PATH/lib` holds.
#[derive(Clone, Copy, PartialEq)]
enum Libs {
    /// AMD SMI, HIP and hipBLAS.
    All,
    /// AMD SMI and HIP.
    NoBlas,
    /// AMD SMI only.
    NoHip,
}

/// A process this test started, killed (by its pid) and reaped on drop.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An agent serving an 8 x MI300X node (the fake AMD SMI's default profile)
/// with the fake HIP on `profile`, and `env` added to its environment.
struct Agent {
    _child: Owned,
    port: u16,
    dir: tempfile::TempDir,
    _rocm: fake_amdsmi::Rocm,
}

impl Agent {
    fn start(libs: Libs, profile: &str, env: &[(&str, &OsStr)]) -> Agent {
        let rocm = fake_amdsmi::Rocm::new();
        let lib = rocm.dir.path().join("lib");
        if libs != Libs::NoHip {
            std::os::unix::fs::symlink(fake_hip(), lib.join("libamdhip64.so")).expect("symlink");
        }
        if libs == Libs::All {
            // hipBLAS's symbols are in the same fake: one library, one state.
            std::os::unix::fs::symlink(fake_hip(), lib.join("libhipblas.so")).expect("symlink");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).expect("write");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        for d in ["proc", "sys", "ib"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        let p = |d: &str| dir.path().join(d);
        let mut cmd = rocm.agent(&fake_amdsmi::profile("mi300x-oam.toml"));
        cmd.args(["--backend", "amd", "--listen", "127.0.0.1:0"])
            // One sample at start (the one the burn's watcher reads).
            .args([
                "--interval",
                "1h",
                "--kmsg",
                "none",
                "--state-dir",
                "none",
                "--insecure",
            ])
            .arg("--bench-token-file")
            .arg(&token)
            .arg("--proc-root")
            .arg(p("proc"))
            .arg("--sysfs-root")
            .arg(p("sys"))
            .arg("--ib-sysfs")
            .arg(p("ib"))
            .env("FAKE_HIP_PROFILE", hip_profile(profile))
            .env("FAKE_HIP_TIME_SCALE", TIME_SCALE)
            .env("FLEETOP_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(p("agent.err")).expect("stderr file"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = Owned(cmd.spawn().expect("the agent starts"));
        let port = ports::wait_listening_port(child.0.id(), "the agent");
        Agent {
            _child: child,
            port,
            dir,
            _rocm: rocm,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.err")).unwrap_or_default()
    }

    /// A quick suite, as the console asks for it: its results once done.
    async fn quick(&self) -> Vec<BenchResult> {
        let start = Instant::now();
        let mut c = loop {
            match AgentClient::connect(format!("http://127.0.0.1:{}", self.port)).await {
                Ok(c) => break c,
                Err(_) if start.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("the agent never listened: {e}\n{}", self.stderr()),
            }
        };
        let req = BenchRequest {
            token: TOKEN.into(),
            suite: "quick".into(),
            timeout_s: 0,
            net_target: String::new(),
            ..Default::default()
        };
        let mut stream = c.run_bench(req).await.expect("starts").into_inner();
        let mut results = Vec::new();
        while let Some(ev) = stream.message().await.expect("stream") {
            match ev.kind {
                Some(Kind::Result(r)) => results.push(r),
                Some(Kind::Done(d)) => {
                    assert!(!d.cancelled && d.error.is_empty(), "{d:?}");
                    return results;
                }
                _ => {}
            }
        }
        panic!("no done event\n{}", self.stderr());
    }
}

fn gpu_checks(results: &[BenchResult]) -> Vec<&BenchResult> {
    results
        .iter()
        .filter(|r| GPU_CHECKS.contains(&r.name.as_str()))
        .collect()
}

fn named<'a>(results: &'a [BenchResult], name: &str) -> Vec<&'a BenchResult> {
    results.iter().filter(|r| r.name == name).collect()
}

/// `value` is `want` within the rounding of an event's f32 milliseconds.
fn close(value: f64, want: f64) -> bool {
    (value - want).abs() <= want * 1e-3
}

/// What every result of a healthy MI300X's check says, and its figure.
fn assert_measured(r: &BenchResult, unit: &str, want: f64, min: f64) {
    assert!(close(r.value, want), "{want} {unit} expected: {r:?}");
    assert_eq!(r.unit, unit, "{r:?}");
    assert_eq!(r.expected_min, min, "the MI300X floor: {r:?}");
    assert!(
        r.expected_source.contains("MI300X") && r.expected_source.contains("AMD"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mi300x_node_runs_the_suite_through_hip_against_amds_floors() {
    let agent = Agent::start(Libs::All, "mi300x-oam.toml", &[]);
    let results = agent.quick().await;
    let err = agent.stderr();
    assert!(!err.contains("panicked"), "{err}");

    let hbm = named(&results, "hbm_d2d");
    assert_eq!(hbm.len(), GPUS as usize, "{results:#?}");
    for (g, r) in hbm.iter().enumerate() {
        assert_eq!((r.gpu, r.peer), (g as i32, -1), "{r:?}");
        assert_measured(r, "GB/s", 1900.0, 1250.0);
        assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
    }
    for (name, want) in [("pcie_h2d", 53.0), ("pcie_d2h", 54.0)] {
        let rs = named(&results, name);
        assert_eq!(rs.len(), GPUS as usize, "{name}");
        for r in rs {
            assert_measured(r, "GB/s", want, 35.0);
            assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
        }
    }
    // The peer copies over XGMI, under NVIDIA's name: each GPU to the next.
    let p2p = named(&results, "nvlink_p2p");
    assert_eq!(p2p.len(), GPUS as usize);
    for (g, r) in p2p.iter().enumerate() {
        assert_eq!((r.gpu, r.peer), (g as i32, ((g + 1) % GPUS as usize) as i32), "{r:?}");
        assert_measured(r, "GB/s", 48.0, 30.0);
        assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
    }
    // The burn, each GPU under AMD SMI's index (the PCI addresses match).
    let gemm = named(&results, "gemm_tflops");
    assert_eq!(gemm.len(), GPUS as usize);
    let mut seen: Vec<i32> = gemm.iter().map(|r| r.gpu).collect();
    seen.sort();
    assert_eq!(seen, (0..GPUS as i32).collect::<Vec<_>>());
    for r in gemm {
        assert_measured(r, "TFLOP/s", 620.0, 350.0);
        assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
    }
    // No RCCL: said so, not passed.
    let nccl = named(&results, "nccl_allreduce_busbw");
    assert_eq!(nccl.len(), 1);
    assert_eq!(nccl[0].verdict(), Verdict::Skipped);
    assert_eq!(nccl[0].reason, NO_RCCL);
    for r in gpu_checks(&results) {
        assert!(!r.reason.contains("CUDA"), "HIP, not CUDA: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_with_slow_memory_fails_its_floor_and_no_other_check_does() {
    let agent = Agent::start(Libs::All, "mi300x-slow-hbm.toml", &[]);
    let results = agent.quick().await;
    for r in gpu_checks(&results) {
        if r.name == "hbm_d2d" && r.gpu == 1 {
            assert_eq!(r.verdict(), Verdict::Fail, "{r:?}");
            assert!(close(r.value, 640.0), "{r:?}");
            assert!(r.reason.contains("below the minimum 1250.0"), "{r:?}");
        } else if r.name != "nccl_allreduce_busbw" {
            assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_libamdhip64_every_gpu_check_is_skipped_and_says_why() {
    let agent = Agent::start(Libs::NoHip, "mi300x-oam.toml", &[]);
    let results = agent.quick().await;
    let gpu = gpu_checks(&results);
    assert_eq!(gpu.len(), GPU_CHECKS.len(), "one line per check: {gpu:#?}");
    for r in gpu {
        assert_eq!(r.verdict(), Verdict::Skipped, "{r:?}");
        assert!(
            r.reason
                .starts_with("no HIP runtime: libamdhip64.so could not be loaded"),
            "{r:?}"
        );
        assert!(r.reason.contains("ROCM_PATH") && !r.reason.contains('\n'), "{r:?}");
    }
    let host = named(&results, "host_memcpy");
    assert!(host[0].value > 0.0, "the host is measured still: {host:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hip_that_sees_no_gpu_is_no_runtime_not_a_failure() {
    let fail: &OsStr = OsStr::new("hipInit=100");
    let agent = Agent::start(Libs::All, "mi300x-oam.toml", &[("FAKE_HIP_FAIL", fail)]);
    let results = agent.quick().await;
    for r in gpu_checks(&results) {
        assert_eq!(r.verdict(), Verdict::Skipped, "{r:?}");
        assert_eq!(
            r.reason, "no HIP runtime: hipInit: hipErrorNoDevice (100): no ROCm-capable device is detected",
            "{r:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hipblas_the_copies_run_and_the_burn_says_why() {
    let agent = Agent::start(Libs::NoBlas, "mi300x-oam.toml", &[]);
    let results = agent.quick().await;
    assert_eq!(named(&results, "hbm_d2d").len(), GPUS as usize);
    for r in gpu_checks(&results) {
        match r.name.as_str() {
            "gemm_tflops" => {
                assert_eq!(r.verdict(), Verdict::Skipped, "{r:?}");
                assert!(
                    r.reason
                        .starts_with("libhipblas not available: libhipblas.so could not be loaded"),
                    "{r:?}"
                );
            }
            "nccl_allreduce_busbw" => assert_eq!(r.verdict(), Verdict::Skipped),
            _ => assert_eq!(r.verdict(), Verdict::Pass, "{r:?}"),
        }
    }
    assert_eq!(named(&results, "gemm_tflops").len(), GPUS as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_call_is_skipped_with_the_librarys_words_made_printable() {
    // The library's text for the error: a newline, an escape sequence that
    // would repaint a terminal, and a byte that is not UTF-8.
    let text: &OsStr = OsStr::from_bytes(b"peer link gone\n\x1b[2Jcheck XGMI \xff");
    let fail: &OsStr = OsStr::new("hipMemcpyPeerAsync=217");
    let agent = Agent::start(
        Libs::All,
        "mi300x-2.toml",
        &[("FAKE_HIP_FAIL", fail), ("FAKE_HIP_ERROR_TEXT", text)],
    );
    let results = agent.quick().await;
    let p2p = named(&results, "nvlink_p2p");
    assert_eq!(p2p.len(), 2, "{results:#?}");
    for r in p2p {
        assert_eq!(r.verdict(), Verdict::Skipped, "{r:?}");
        assert!(
            r.reason
                .starts_with("HIP error: hipMemcpyPeerAsync: hipErrorPeerAccessUnsupported (217): peer link gone"),
            "{r:?}"
        );
        assert!(r.reason.contains("check XGMI"), "{r:?}");
        assert!(!r.reason.chars().any(char::is_control), "printable: {:?}", r.reason);
    }
    // The rest of the suite ran on: one check's failure is that check's.
    for r in gpu_checks(&results) {
        if !matches!(r.name.as_str(), "nvlink_p2p" | "nccl_allreduce_busbw") {
            assert_eq!(r.verdict(), Verdict::Pass, "{r:?}");
        }
    }
}
