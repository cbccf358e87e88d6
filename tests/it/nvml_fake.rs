//! The agent's NVML path on the fake libnvidia-ml.so (tests/fake-nvml): an
//! agent process per profile and fault script, `--backend nvml --nvml-lib`,
//! read through a real console export. No GPU needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fleetop::export::{FlagOut, Gpu, Node, Snapshot, Status};
use fleetop::model::flag::{FlagKind, Severity};

use crate::{Agent, agent_bin, fleetop};

/// The fake library, built once for this test run (cargo does not build
/// workspace members that are not default members for `cargo test`).
pub(crate) fn fake_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "fleetop-fake-nvml"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the fake NVML failed");
        // Built beside the binaries under test (same target dir and profile).
        let lib = PathBuf::from(env!("CARGO_BIN_EXE_fleetop")).with_file_name("libnvidia_ml.so");
        assert!(lib.exists(), "{} is missing", lib.display());
        lib
    })
}

pub(crate) fn profile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-nvml/profiles")
        .join(name)
}

/// An agent on the fake NVML with `profile`, its clock frozen at
/// `frozen_s` seconds (every fault due by then in effect) or running, on a
/// port of its own.
pub(crate) fn nvml_agent(profile_name: &str, frozen_s: Option<&str>) -> Agent {
    let mut cmd = std::process::Command::new(agent_bin());
    cmd.args(["--backend", "nvml", "--interval", "200ms", "--ib-sysfs", "/nonexistent"])
        .args(crate::HERMETIC_AGENT)
        .arg("--nvml-lib")
        .arg(fake_lib())
        .args(["--listen", "127.0.0.1:0"])
        .env("FAKE_NVML_PROFILE", profile(profile_name))
        .stdout(std::process::Stdio::null());
    match frozen_s {
        Some(t) => cmd.env("FAKE_NVML_TIME_S", t),
        None => cmd.env_remove("FAKE_NVML_TIME_S"),
    };
    Agent::spawn(&mut cmd, "warn")
}

fn export_once(port: u16) -> Node {
    let out = fleetop()
        .args(["export", "--once", "--hosts", &format!("127.0.0.1:{port}")])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    snap.nodes.remove(0)
}

/// Exports until `done` holds for the node (the agent's clock runs), or
/// fails after a generous while with the last node seen.
fn export_until(port: u16, what: &str, done: impl Fn(&Node) -> bool) -> Node {
    let start = Instant::now();
    loop {
        let n = export_once(port);
        if done(&n) {
            return n;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never {what}: {n:#?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(crate) fn gpu(n: &Node, i: u32) -> &Gpu {
    n.gpus.iter().find(|g| g.index == i).expect("the GPU is listed")
}

pub(crate) fn flags(n: &Node, kind: FlagKind) -> Vec<&FlagOut> {
    n.flags.iter().filter(|f| f.kind == kind).collect()
}

#[test]
fn h100_profile_reads_through_to_the_export() {
    let _a = nvml_agent("h100-sxm5.toml", Some("15"));
    let port = _a.port();
    let n = export_once(port);
    let agent = n.agent.as_ref().expect("described");
    assert_eq!(agent.backend, "nvml");
    assert_eq!(agent.driver_version.as_deref(), Some("550.90.07"));
    assert_eq!(agent.cuda_version.as_deref(), Some("12.4"));
    assert_eq!(n.gpus.len(), 8);
    let g = gpu(&n, 0);
    assert_eq!(g.model, "NVIDIA H100 80GB HBM3");
    assert_eq!(g.pci_bus_id, "00000000:18:00.0");
    assert!(g.uuid.starts_with("GPU-"), "{}", g.uuid);
    assert_eq!(g.error, None);
    assert_eq!(g.mem_total_bytes, Some(85_520_809_984));
    assert_eq!(g.mem_used_bytes, Some(71_000_000_000));
    assert_eq!(g.power_limit_w, Some(700.0));
    assert_eq!(g.slowdown_temp_c, Some(89));
    assert_eq!(g.hbm_temp_c, Some(70));
    assert_eq!(g.sm_clock_mhz, Some(1980));
    assert_eq!(g.sm_clock_max_mhz, Some(1980));
    assert_eq!(g.mem_clock_mhz, Some(2619));
    assert_eq!(g.ecc_uncorrected_volatile, Some(0));
    assert_eq!(g.remapped_rows_uncorrectable, Some(0));
    assert_eq!(g.remap_pending, Some(false));
    // The moving values, at the frozen moment: 90 % ± 8, 610 W ± 40.
    let util = g.util_pct.expect("util");
    assert!((82..=98).contains(&util), "{util}");
    let p = g.power_w.expect("power");
    assert!((570.0..=650.0).contains(&p), "{p}");
    assert_eq!(g.nvlink.len(), 18);
    assert!(g.nvlink.iter().all(|l| l.active == Some(true)), "{:?}", g.nvlink);
    assert_eq!(g.processes.len(), 1);
    assert_eq!(g.processes[0].pid, 4242);
    assert_eq!(g.processes[0].used_mem_bytes, 70_000_000_000);
    // GPU 7 idles with no process: GPU-idle clocks event, nothing flagged.
    assert_eq!(gpu(&n, 7).util_pct, Some(0));
    assert_eq!(gpu(&n, 7).throttle_reasons, vec!["gpu_idle".to_string()]);
    assert!(n.flags.is_empty(), "{:?}", n.flags);
}

#[test]
fn gpm_metrics_reach_the_export_and_busy_gpus_with_idle_sms_are_underused() {
    // The clock runs: GPM metrics are over the interval between two samples.
    let _a = nvml_agent("h100-sxm5.toml", None);
    let port = _a.port();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[thresholds]\nunderused_window = \"1s\"\n").expect("config written");
    let start = Instant::now();
    let n = loop {
        let out = fleetop()
            .arg("--config")
            .arg(&config)
            .args(["export", "--once", "--hosts", &format!("127.0.0.1:{port}")])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
        let n = snap.nodes.remove(0);
        if !flags(&n, FlagKind::Underused).is_empty() {
            break n;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never underused: {n:#?}");
        std::thread::sleep(Duration::from_millis(300));
    };
    let g = gpu(&n, 0);
    assert_eq!(g.sm_active_pct, Some(78.5));
    assert_eq!(g.sm_occupancy_pct, Some(41.0));
    assert_eq!(g.tensor_active_pct, Some(55.25));
    assert_eq!(g.dram_bw_pct, Some(62.0));
    // GPU 6: a kernel always running (util ~90 %), 12 % of SMs active.
    let u = flags(&n, FlagKind::Underused);
    assert_eq!(u.len(), 1, "{u:?}");
    assert_eq!((u[0].gpu, u[0].severity), (Some(6), Severity::Info));
    assert!(u[0].detail.contains("12% SM activity"), "{}", u[0].detail);
    assert_eq!(u[0].evidence.get("sm_active_pct"), Some(&12.0));
}

#[test]
fn gpus_without_gpm_have_no_gpm_readings_not_zero() {
    let _a = nvml_agent("a100-sxm4-80gb-mig.toml", None);
    let port = _a.port();
    // Two samples at least, so that a GPU with GPM would have its metrics.
    let first = export_once(port);
    let n = export_until(port, "a second sample", |n| n.sampled_at != first.sampled_at);
    for g in &n.gpus {
        assert_eq!(g.sm_active_pct, None, "GPU {}", g.index);
        assert_eq!(g.dram_bw_pct, None, "GPU {}", g.index);
    }
    assert!(flags(&n, FlagKind::Underused).is_empty());
}

#[test]
fn h200_profile_reads_through_to_the_export() {
    let _a = nvml_agent("h200.toml", Some("15"));
    let port = _a.port();
    let n = export_once(port);
    assert_eq!(n.gpus.len(), 8);
    let g = gpu(&n, 3);
    assert_eq!(g.model, "NVIDIA H200");
    assert_eq!(g.mem_total_bytes, Some(150_754_820_096));
    assert_eq!(g.mem_clock_mhz, Some(3201));
    assert_eq!(g.nvlink.len(), 18);
    // This driver has dropped the deprecated threshold call: the slowdown
    // temperature comes from the T.Limit fields and the margin (87 °C max
    // operating, slowdown T.Limit -2).
    assert_eq!(g.slowdown_temp_c, Some(89));
}

#[test]
fn mig_gpus_without_utilization_keep_every_other_reading_and_flag() {
    let _a = nvml_agent("a100-sxm4-80gb-mig.toml", Some("15"));
    let port = _a.port();
    let n = export_once(port);
    assert_eq!(n.gpus.len(), 8);
    for i in [2, 5] {
        let g = gpu(&n, i);
        assert_eq!(g.model, "NVIDIA A100-SXM4-80GB");
        // NOT_SUPPORTED for utilization on a MIG GPU: that reading only.
        assert_eq!(g.error, None, "GPU {i}");
        assert_eq!(g.util_pct, None, "GPU {i}");
        assert_eq!(g.mem_util_pct, None, "GPU {i}");
        assert!(g.temp_c.is_some(), "GPU {i}");
        assert_eq!(g.hbm_temp_c, Some(63), "GPU {i}");
        // No T.Limit fields on this driver: the deprecated thresholds.
        assert_eq!(g.slowdown_temp_c, Some(89), "GPU {i}");
        assert_eq!(g.ecc_corrected_volatile, Some(3), "GPU {i}");
        assert_eq!(g.remapped_rows_correctable, Some(1), "GPU {i}");
        assert_eq!(g.nvlink.len(), 12);
    }
    // Memory used on a MIG GPU is its instances' together.
    assert_eq!(gpu(&n, 2).mem_used_bytes, Some(39_000_000_000));
    // Its instances, each with its profile and memory.
    let mig: Vec<(u32, &str, Option<u64>)> = gpu(&n, 2)
        .mig
        .iter()
        .map(|m| (m.gpu_instance_id, m.profile.as_str(), m.mem_used_bytes))
        .collect();
    assert_eq!(
        mig,
        vec![
            (1, "3g.40gb", Some(30_000_000_000)),
            (2, "2g.20gb", Some(9_000_000_000)),
            (3, "1g.10gb", Some(0)),
        ]
    );
    assert_eq!(gpu(&n, 5).mig[0].mem_total_bytes, Some(42_949_672_960));
    assert!(gpu(&n, 5).mig[0].uuid.starts_with("MIG-"));
    assert!(gpu(&n, 0).mig.is_empty());
    assert_eq!(gpu(&n, 0).util_pct.map(|u| u <= 100), Some(true));
    assert_eq!(gpu(&n, 0).power_limit_w, Some(400.0));
}

#[test]
fn xids_79_48_94_13_and_999_are_flagged_on_their_gpus() {
    let _a = nvml_agent("faults/xids.toml", Some("15"));
    let port = _a.port();
    let n = export_until(port, "five XID flags", |n| flags(n, FlagKind::Xid).len() == 5);
    // Graded by NVIDIA's XID catalog: the action decides the severity.
    for (i, xid, sev, action) in [
        (0, 79, Severity::Crit, "reboot_node"),
        (1, 48, Severity::Crit, "reset_gpu"),
        // A contained error: the application's, not the GPU's.
        (2, 94, Severity::Warn, "restart_app"),
        (3, 13, Severity::Warn, "restart_app"),
        // Not in the catalog: looked at with a drain until known otherwise.
        (4, 999, Severity::Crit, "reset_gpu"),
    ] {
        let f = flags(&n, FlagKind::Xid)
            .into_iter()
            .find(|f| f.gpu == Some(i))
            .unwrap_or_else(|| panic!("no XID flag on GPU {i}: {:?}", n.flags));
        assert!(f.detail.contains(&format!("XID {xid} ")), "GPU {i}: {}", f.detail);
        assert_eq!(f.evidence.get("xid"), Some(&f64::from(xid)), "GPU {i}");
        assert_eq!(f.severity, sev, "GPU {i}");
        assert_eq!(f.action.name(), action, "GPU {i}");
        // The export lists the code on the GPU, not only in the flag.
        assert!(gpu(&n, i).xids.contains(&xid), "GPU {i}: {:?}", gpu(&n, i).xids);
    }
}

#[test]
fn a_gpu_lost_mid_run_is_flagged_and_the_others_still_report_xids() {
    // The clock runs: GPU 3 is lost 2 s in (XID 79), GPU 5 reports XID 48 at 3 s.
    let _a = nvml_agent("faults/gpu-lost-mid-run.toml", None);
    let port = _a.port();
    let n = export_until(port, "GPU 3 lost and XID 48 on GPU 5", |n| {
        flags(n, FlagKind::GpuLost).iter().any(|f| f.gpu == Some(3))
            && flags(n, FlagKind::Xid).iter().any(|f| f.gpu == Some(5))
    });
    assert_eq!(gpu(&n, 3).error.as_deref(), Some("gpu_lost"));
    assert_eq!(gpu(&n, 3).util_pct, None);
    let xid3 = flags(&n, FlagKind::Xid).into_iter().find(|f| f.gpu == Some(3));
    let xid3 = xid3.expect("XID 79 of the lost GPU, attributed by its handle");
    assert!(xid3.detail.contains("XID 79"), "{}", xid3.detail);
    // The other GPUs answer on.
    assert_eq!(gpu(&n, 4).error, None);
    assert!(gpu(&n, 4).util_pct.is_some());
}

#[test]
fn gpus_that_cannot_be_opened_show_as_themselves() {
    let _a = nvml_agent("faults/gpu-lost-at-start.toml", Some("15"));
    let port = _a.port();
    let n = export_until(port, "GPU 6 flagged lost", |n| !flags(n, FlagKind::GpuLost).is_empty());
    assert_eq!(n.gpus.len(), 8, "every GPU NVML counts is listed");
    assert_eq!(gpu(&n, 6).error.as_deref(), Some("gpu_lost"));
    assert_eq!(gpu(&n, 7).error.as_deref(), Some("no_permission"));
    let lost: Vec<_> = flags(&n, FlagKind::GpuLost).iter().map(|f| f.gpu).collect();
    assert_eq!(lost, vec![Some(6)]);
    assert!(gpu(&n, 5).util_pct.is_some());
}

#[test]
fn nvlink_sleep_is_up_and_links_unused_from_the_start_are_not_flagged() {
    let _a = nvml_agent("faults/nvlink.toml", None);
    let port = _a.port();
    // GPU 3 link 9 goes inactive 2 s in: that one is flagged, by its NVML id.
    let n = export_until(port, "GPU 3 link 9 flagged", |n| {
        flags(n, FlagKind::NvlinkDown).iter().any(|f| f.gpu == Some(3))
    });
    let down = flags(&n, FlagKind::NvlinkDown);
    assert_eq!(down.len(), 1, "{down:?}");
    assert_eq!(down[0].severity, Severity::Crit);
    assert_eq!(down[0].detail, "NVLink link 9 down");
    let link = |g: u32, l: u32| {
        gpu(&n, g)
            .nvlink
            .iter()
            .find(|x| x.link == l)
            .cloned()
            .expect("link listed")
    };
    // Asleep (NVML_NVLINK_STATE_SLEEP) is up.
    assert_eq!(link(1, 4).active, Some(true));
    // Inactive from the start: listed as such, not flagged.
    assert_eq!(link(2, 17).active, Some(false));
    assert!(link(2, 17).inactive_at_start);
    assert_eq!(link(3, 9).active, Some(false));
    assert!(!link(3, 9).inactive_at_start);
}

#[test]
fn remap_pending_warns_and_remap_failure_is_critical() {
    let _a = nvml_agent("faults/remap.toml", Some("15"));
    let port = _a.port();
    let n = export_until(port, "remap flags", |n| {
        !flags(n, FlagKind::RemapPending).is_empty() && !flags(n, FlagKind::RemapFailed).is_empty()
    });
    let p = flags(&n, FlagKind::RemapPending);
    assert_eq!((p.len(), p[0].gpu, p[0].severity), (1, Some(0), Severity::Warn));
    let f = flags(&n, FlagKind::RemapFailed);
    assert_eq!((f.len(), f[0].gpu, f[0].severity), (1, Some(1), Severity::Crit));
    assert_eq!(gpu(&n, 0).remap_pending, Some(true));
    assert_eq!(gpu(&n, 0).remapped_rows_uncorrectable, Some(1));
    assert_eq!(gpu(&n, 1).remap_failed, Some(true));
    assert_eq!(gpu(&n, 1).remap_pending, Some(false));
}

#[test]
fn unsupported_and_refused_readings_are_absent_and_a_hung_call_does_not_end_the_agent() {
    // The clock runs: GPU 2's power reading hangs 3 s once, 1 s in.
    let started = Instant::now();
    let _a = nvml_agent("faults/degraded.toml", None);
    let port = _a.port();
    // Past the hang (1 s to 4 s of the agent's life), sampling goes on.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(started.elapsed()));
    let after = export_once(port);
    let n = export_until(port, "a sample after the hang", |n| n.sampled_at != after.sampled_at);
    let g0 = gpu(&n, 0);
    assert_eq!(g0.error, None);
    // PCIe throughput from the byte counters over the interval: the
    // profile's mean of 1.2 GB/s out, 3.4 GB/s in (NVML's 20 ms window sees
    // bursts: twice that, or nothing). Within 2 %: the agent's interval and
    // the fake's clock are read at slightly different moments.
    let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v / want - 1.0).abs() < 0.02);
    assert!(near(g0.pcie_tx_bytes_per_s, 1.2e9), "{:?}", g0.pcie_tx_bytes_per_s);
    assert!(near(g0.pcie_rx_bytes_per_s, 3.4e9), "{:?}", g0.pcie_rx_bytes_per_s);
    assert_eq!(g0.hbm_temp_c, None, "NOT_SUPPORTED is no reading, not 0");
    assert!(g0.temp_c.is_some());
    let g1 = gpu(&n, 1);
    assert_eq!(g1.error, None);
    assert!(g1.processes.is_empty());
    assert!(g1.util_pct.is_some());
    assert!(gpu(&n, 2).power_w.is_some());
    assert_eq!(n.gpus.len(), 8);
}

/// The stuck GPU's error ("nvml_stuck: <call>: no answer for N ms"), if stuck.
fn stuck_ms(n: &Node, i: u32) -> Option<u64> {
    let e = gpu(n, i).error.as_deref()?;
    let rest = e.strip_prefix("nvml_stuck: nvmlDeviceGetPowerUsage: no answer for ")?;
    rest.strip_suffix(" ms")?.parse().ok()
}

#[test]
fn a_gpu_whose_nvml_call_hangs_is_reported_stuck_while_the_others_keep_reporting() {
    // The clock runs: GPU 2's power reading hangs for 8 s, 1 s in.
    let _a = nvml_agent("faults/hang-long.toml", None);
    let port = _a.port();
    let first = export_until(port, "GPU 2 reported stuck", |n| stuck_ms(n, 2).is_some());
    // Still during the hang: newer samples, the other GPUs read in them, GPU
    // 2 stuck for longer, its XID (from the event thread) still reported.
    let during = export_until(port, "a later sample with GPU 2 still stuck", |n| {
        n.sampled_at != first.sampled_at && stuck_ms(n, 2) > stuck_ms(&first, 2)
    });
    for n in [&first, &during] {
        assert_eq!(n.status, Status::Ok, "{n:#?}");
        assert_eq!(n.gpus.len(), 8);
        for g in n.gpus.iter().filter(|g| g.index != 2) {
            assert_eq!(g.error, None, "GPU {}", g.index);
            assert!(g.util_pct.is_some() && g.power_w.is_some(), "GPU {}: {g:?}", g.index);
        }
        assert_eq!(gpu(n, 2).power_w, None, "no readings from a stuck GPU");
        assert!(
            flags(n, FlagKind::GpuLost).is_empty(),
            "stuck is not lost: {:?}",
            n.flags
        );
        let f = flags(n, FlagKind::GpuStuck);
        assert_eq!(f.len(), 1, "{:?}", n.flags);
        // Stuck for seconds, not yet the 30 s that make it critical.
        assert_eq!((f[0].gpu, f[0].severity), (Some(2), Severity::Warn));
        assert!(f[0].detail.contains("nvmlDeviceGetPowerUsage"), "{}", f[0].detail);
    }
    let during = export_until(port, "GPU 2's XID while it is stuck", |n| {
        stuck_ms(n, 2).is_some() && flags(n, FlagKind::Xid).iter().any(|f| f.gpu == Some(2))
    });
    assert!(gpu(&during, 0).util_pct.is_some());
    // When the call returns, GPU 2 reads normally again.
    let after = export_until(port, "GPU 2 answering again, its flag cleared", |n| {
        gpu(n, 2).error.is_none() && flags(n, FlagKind::GpuStuck).is_empty()
    });
    assert!(gpu(&after, 2).power_w.is_some(), "{:?}", gpu(&after, 2));
    assert!(gpu(&after, 2).util_pct.is_some());
}

/// A GPU whose first NVML calls hang (GPU 3's nvmlDeviceGetName blocks
/// 300 s from the start): the agent serves at once, the console flags that
/// GPU stuck by its bus id, and the other seven report.
#[test]
fn a_gpu_that_hangs_at_start_is_flagged_stuck_by_its_bus_id_and_the_rest_reports() {
    let _a = nvml_agent("faults/hang-at-start.toml", None);
    let port = _a.port();
    let n = export_until(port, "GPU 3 flagged stuck", |n| {
        flags(n, FlagKind::GpuStuck).iter().any(|f| f.gpu == Some(3))
    });
    assert_eq!(n.status, Status::Ok, "{n:#?}");
    assert_eq!(n.gpus.len(), 8);
    let g = gpu(&n, 3);
    assert!(g.pci_bus_id.eq_ignore_ascii_case("00000000:5D:00.0"), "{g:?}");
    assert!(
        g.error
            .as_deref()
            .is_some_and(|e| e.starts_with("nvml_stuck: nvmlDeviceGetName")),
        "{g:?}"
    );
    let f = flags(&n, FlagKind::GpuStuck);
    assert_eq!(f.len(), 1, "{:?}", n.flags);
    assert!(f[0].detail.contains("nvmlDeviceGetName"), "{}", f[0].detail);
    for g in n.gpus.iter().filter(|g| g.index != 3) {
        assert_eq!(g.error, None, "GPU {}", g.index);
        assert!(g.util_pct.is_some() && !g.model.is_empty(), "GPU {}: {g:?}", g.index);
    }
}

#[test]
fn gpm_per_mig_instance_reaches_the_export_and_gpus_without_gpm_have_none() {
    let _a = nvml_agent("h100-sxm5-mig.toml", Some("15"));
    let port = _a.port();
    // GPM needs two samples: the first has none.
    let n = export_until(port, "MIG GPM", |n| {
        gpu(n, 3).mig.iter().all(|m| m.sm_active_pct.is_some())
    });
    let g = gpu(&n, 3);
    type Row<'a> = (u32, &'a str, Option<f64>, Option<f64>, Option<f64>, Option<f64>);
    let got: Vec<Row> = g
        .mig
        .iter()
        .map(|m| {
            (
                m.gpu_instance_id,
                m.profile.as_str(),
                m.sm_active_pct,
                m.sm_occupancy_pct,
                m.tensor_active_pct,
                m.dram_bw_pct,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "3g.40gb", Some(91.0), Some(52.5), Some(70.0), Some(66.0)),
            (2, "2g.20gb", Some(8.25), Some(3.0), Some(1.5), Some(2.0)),
            // No figures of its own in the profile: the GPU's.
            (3, "1g.10gb", Some(78.5), Some(41.0), Some(55.25), Some(62.0)),
        ]
    );
    assert_eq!(g.util_pct, None, "no whole-GPU utilization in MIG mode");
    assert!(gpu(&n, 0).mig.is_empty());
    // An A100 has no GPM: its MIG instances say so (null), not 0.
    let _b = nvml_agent("a100-sxm4-80gb-mig.toml", Some("15"));
    let port = _b.port();
    let _ = export_until(port, "a second sample", |n| n.gpus.len() == 8);
    std::thread::sleep(Duration::from_millis(600));
    let n = export_once(port);
    for m in &gpu(&n, 2).mig {
        assert_eq!(
            (m.sm_active_pct, m.sm_occupancy_pct, m.tensor_active_pct, m.dram_bw_pct),
            (None, None, None, None),
            "{m:?}"
        );
    }
}

/// SignalProcess: the agent signals a process only if its latest sample
/// shows it on a GPU, only with the control token, and only TERM or KILL.
#[test]
fn signal_process_reaches_only_a_gpu_process_and_only_with_the_token() {
    use fleetop_agent::proto::SignalRequest;
    use fleetop_agent::proto::agent_client::AgentClient;
    let dir = tempfile::tempdir().expect("tempdir");
    crate::write_secret(&dir.path().join("token"), "s3cret\n");
    // The process "on GPU 0" is a real one of ours.
    // In a process group of its own: the agent (our child too) refuses to
    // signal anything in its own group.
    let mut victim = std::os::unix::process::CommandExt::process_group(&mut std::process::Command::new("sleep"), 0)
        .arg("300")
        .spawn()
        .expect("sleep");
    let text = std::fs::read_to_string(profile("h100-sxm5.toml")).expect("profile");
    assert!(text.contains("pid = 4242"));
    let custom = dir.path().join("h100.toml");
    std::fs::write(&custom, text.replace("pid = 4242", &format!("pid = {}", victim.id()))).expect("write");
    let _agent = Agent::spawn(
        std::process::Command::new(agent_bin())
            .args(["--backend", "nvml", "--interval", "200ms", "--ib-sysfs", "/nonexistent"])
            .args(crate::HERMETIC_AGENT)
            .arg("--nvml-lib")
            .arg(fake_lib())
            .args(["--listen", "127.0.0.1:0", "--insecure", "--bench-token-file"])
            .arg(dir.path().join("token"))
            .env("FAKE_NVML_PROFILE", &custom)
            .stdout(std::process::Stdio::null()),
        "warn",
    );
    let port = _agent.port();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let start = Instant::now();
        let mut c = loop {
            match AgentClient::connect(format!("http://127.0.0.1:{port}")).await {
                Ok(c) => break c,
                Err(e) => assert!(start.elapsed() < Duration::from_secs(20), "{e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // A sample must exist for the agent to know its GPUs' processes.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let ask = |token: &str, pid: u32, signal: &str| SignalRequest {
            token: token.into(),
            pid,
            signal: signal.into(),
        };
        let e = c
            .signal_process(ask("guess", victim.id(), "TERM"))
            .await
            .expect_err("wrong token");
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        let e = c
            .signal_process(ask("s3cret", std::process::id(), "TERM"))
            .await
            .expect_err("not a GPU process");
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
        let e = c
            .signal_process(ask("s3cret", victim.id(), "HUP"))
            .await
            .expect_err("HUP");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(victim.try_wait().expect("wait").is_none(), "nothing was sent yet");
        let ok = c
            .signal_process(ask("s3cret", victim.id(), "TERM"))
            .await
            .expect("sent");
        assert!(ok.into_inner().outcome.contains("SIGTERM sent"));
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = victim.try_wait().expect("wait") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the process is still running"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

/// What `fleetop-agent sample --once --format json` prints for `profile_name`
/// at the fake's frozen moment: the agent's description and its first sample.
fn agent_sample(profile_name: &str) -> serde_json::Value {
    let out = std::process::Command::new(agent_bin())
        .args(["sample", "--once", "--format", "json", "--backend", "nvml"])
        .args(crate::HERMETIC_AGENT)
        .args(["--ib-sysfs", "/nonexistent", "--nvml-lib"])
        .arg(fake_lib())
        .env("FAKE_NVML_PROFILE", profile(profile_name))
        .env("FAKE_NVML_TIME_S", "15")
        .env("FLEETOP_LOG", "error")
        .output()
        .expect("the agent runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// Per GPU, in index order, these fields of the description (`info`) or
/// the sample, as integers.
fn per_gpu(doc: &serde_json::Value, part: &str, fields: &[&str]) -> Vec<Vec<u64>> {
    let gpus = doc[part]["gpus"].as_array().expect("gpus");
    gpus.iter()
        .map(|g| {
            fields
                .iter()
                .map(|f| g[*f].as_u64().unwrap_or_else(|| panic!("{part}.{f}: {g}")))
                .collect()
        })
        .collect()
}

/// (max gen, max width, gen, width) of every GPU.
fn links(doc: &serde_json::Value) -> Vec<[u64; 4]> {
    let max = per_gpu(doc, "info", &["pcie_max_gen", "pcie_max_width"]);
    let now = per_gpu(doc, "sample", &["pcie_gen", "pcie_width"]);
    max.iter().zip(&now).map(|(m, n)| [m[0], m[1], n[0], n[1]]).collect()
}

#[test]
fn a_degraded_pcie_link_reads_below_its_maximum_and_only_on_that_gpu() {
    let doc = agent_sample("faults/pcie-degraded.toml");
    let l = links(&doc);
    assert_eq!(l.len(), 8);
    // GPU 2, busy: Gen3 x8 where it and its slot can do Gen5 x16.
    assert_eq!(l[2], [5, 16, 3, 8]);
    assert_eq!(doc["sample"]["gpus"][2]["error"], "");
    assert!(doc["sample"]["gpus"][2]["util_pct"].as_u64() > Some(50), "busy");
    // GPU 4 in a Gen4 slot runs at its maximum; GPU 7 idles at Gen1, full width.
    assert_eq!(l[4], [4, 16, 4, 16]);
    assert_eq!(l[7], [5, 16, 1, 16]);
    for i in [0, 1, 3, 5, 6] {
        assert_eq!(l[i], [5, 16, 5, 16], "GPU {i}");
    }
    let vbios = doc["info"]["gpus"][0]["vbios_version"].as_str();
    assert_eq!(vbios, Some("96.00.74.00.1C"));
}

#[test]
fn fabric_registration_failures_show_on_their_gpus_and_are_absent_without_a_fabric() {
    let doc = agent_sample("faults/fabric.toml");
    let f = per_gpu(&doc, "sample", &["fabric_state", "fabric_status"]);
    // NVML's state + 1: 2 not started, 3 in progress, 4 completed; the
    // status once completed (999: NVML_ERROR_UNKNOWN, the GPU is not on the fabric).
    assert_eq!(f[1], [4, 999], "completed with a failure");
    assert_eq!(f[3], [2, 0], "never started");
    assert_eq!(f[5], [3, 0], "still in progress");
    for i in [0, 2, 4, 6, 7] {
        assert_eq!(f[i], [4, 0], "GPU {i}: registered");
    }
    // An A100 (no fabric call: NOT_SUPPORTED) reports nothing, which is
    // not "not supported" (1) and not a failure; its other readings stand.
    let a100 = agent_sample("a100-sxm4-80gb-mig.toml");
    let f = per_gpu(&a100, "sample", &["fabric_state", "fabric_status"]);
    assert!(f.iter().all(|x| *x == [0, 0]), "{f:?}");
    assert_eq!(links(&a100)[0], [4, 16, 4, 16]);
}

#[test]
fn persistence_off_shows_on_every_gpu_and_on_shows_as_on() {
    let off = per_gpu(&agent_sample("faults/persistence-off.toml"), "sample", &["persistence"]);
    assert_eq!(off, vec![vec![1]; 8], "1: off");
    let on = per_gpu(&agent_sample("h100-sxm5.toml"), "sample", &["persistence"]);
    assert_eq!(on, vec![vec![2]; 8], "2: on");
}

/// On the agent's stream, in column deltas after the first sample, the link,
/// fabric and persistence readings arrive in every decoded sample: an
/// unchanged reading is elided on the wire and restored by the decoder.
#[test]
fn link_fabric_and_persistence_survive_the_delta_encoded_stream() {
    use fleetop_agent::proto::SubscribeRequest;
    use fleetop_agent::proto::agent_client::AgentClient;
    use fleetop_agent::proto::agent_message::Kind;
    let _a = nvml_agent("faults/fabric.toml", None);
    let port = _a.port();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (info, wire, decoded) = rt.block_on(async {
        let mut c = AgentClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .expect("connects");
        let req = SubscribeRequest {
            no_backfill: true,
            columns: true,
            ..Default::default()
        };
        let mut stream = c.subscribe(req).await.expect("subscribes").into_inner();
        let (mut info, mut wire, mut decoded) = (None, Vec::new(), Vec::new());
        let mut rx = fleetop_agent::wire::Decoder::default();
        let deadline = Instant::now() + Duration::from_secs(30);
        while decoded.len() < 4 {
            assert!(Instant::now() < deadline, "too few samples");
            match stream.message().await.expect("ok").and_then(|m| m.kind) {
                Some(Kind::Info(i)) => info = Some(i),
                Some(Kind::Sample(s)) => {
                    wire.push(s.clone());
                    decoded.push(rx.decode(s).expect("in sequence").clone());
                }
                Some(_) => {}
                None => panic!("the stream ended"),
            }
        }
        (info.expect("described first"), wire, decoded)
    });
    assert_eq!(info.gpus[1].pcie_max_gen, 5);
    assert_eq!(info.gpus[1].pcie_max_width, 16);
    assert_eq!(info.gpus[1].vbios_version, "96.00.74.00.1C");
    assert!(
        wire[1..].iter().any(|s| s.columns.is_some()),
        "the stream sends column deltas"
    );
    for s in &decoded {
        let g = |i: usize| {
            let g = &s.gpus[i];
            (g.pcie_gen, g.pcie_width, g.fabric_state, g.fabric_status, g.persistence)
        };
        assert_eq!(g(0), (5, 16, 4, 0, 2), "seq {}", s.seq);
        assert_eq!(g(1), (5, 16, 4, 999, 2), "seq {}", s.seq);
        assert_eq!(g(3), (5, 16, 2, 0, 2), "seq {}", s.seq);
        assert_eq!(g(7), (1, 16, 4, 0, 2), "seq {}", s.seq);
    }
    // Unchanged since the previous sample: nothing on the wire.
    for s in wire.iter().filter(|s| s.delta_from_seq != 0) {
        let any = s
            .gpus
            .iter()
            .any(|g| g.pcie_gen + g.pcie_width + g.fabric_state + g.fabric_status + g.persistence != 0);
        assert!(!any, "seq {}: elided", s.seq);
    }
}

/// A node's procfs as the agent reads it for the boot: its id and its time.
fn boot(proc_root: &Path, id: &str, btime_s: i64) {
    let random = proc_root.join("sys/kernel/random");
    std::fs::create_dir_all(&random).expect("mkdir");
    std::fs::write(random.join("boot_id"), format!("{id}\n")).expect("boot_id");
    std::fs::write(proc_root.join("stat"), format!("cpu 1 2 3 4\nbtime {btime_s}\n")).expect("stat");
}

#[test]
fn the_same_xid_in_a_third_boot_escalates_to_replace_across_agent_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proc_root, state) = (dir.path().join("proc"), dir.path().join("state"));
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    // The kernel's record of GPU 2 (bus 3a) falling off the bus, 95 s after boot.
    let kmsg = dir.path().join("kmsg");
    std::fs::write(
        &kmsg,
        "4,900,95000000,-;NVRM: Xid (PCI:0000:3a:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n \
         SUBSYSTEM=pci\n DEVICE=+pci:0000:3a:00.0\n",
    )
    .expect("kmsg");
    // `first`: the subcommand, if any, goes before the node's flags.
    let agent = |first: &[&str], extra: &[&str]| {
        let mut cmd = std::process::Command::new(agent_bin());
        cmd.args(first)
            .args(["--backend", "nvml", "--ib-sysfs", "/nonexistent", "--nvml-lib"])
            .arg(fake_lib())
            .arg("--kmsg")
            .arg(&kmsg)
            .arg("--state-dir")
            .arg(&state)
            .arg("--proc-root")
            .arg(&proc_root)
            .args(extra)
            .env("FAKE_NVML_PROFILE", profile("h100-sxm5.toml"))
            .env("FAKE_NVML_TIME_S", "15")
            .env("FLEETOP_LOG", "warn");
        cmd
    };
    // Two earlier boots, each with the fault: the agent journals it (one
    // sample each, as a node that rebooted soon after).
    let ids = [
        "0000000a-0000-4000-8000-00000000000a",
        "0000000b-0000-4000-8000-00000000000b",
    ];
    for (id, ago_s) in ids.into_iter().zip([3 * 3600, 2 * 3600]) {
        boot(&proc_root, id, now_s - ago_s);
        let out = agent(&["sample", "--once", "--format", "json"], &[])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // The third boot: the console sees the journal and the fault again.
    boot(&proc_root, "0000000c-0000-4000-8000-00000000000c", now_s - 100);
    let _a = Agent::spawn(
        agent(&[], &["--interval", "200ms", "--listen", "127.0.0.1:0"]).stdout(std::process::Stdio::null()),
        "warn",
    );
    let port = _a.port();
    let n = export_until(port, "the XID 79 flag", |n| {
        flags(n, FlagKind::Xid).iter().any(|f| f.gpu == Some(2))
    });
    let f = flags(&n, FlagKind::Xid)
        .into_iter()
        .find(|f| f.gpu == Some(2))
        .expect("flag");
    assert_eq!(f.action.name(), "replace", "{f:?}");
    let why = f.escalation.as_deref().unwrap_or_default();
    assert!(why.starts_with("3rd XID 79 on this GPU in 7 days"), "{f:?}");
    assert!(f.action_detail.contains("3rd XID 79"), "{f:?}");
    assert_eq!(gpu(&n, 2).xids, [79]);
    // The node's history holds the journal too: the earlier boots' XIDs,
    // asked of the agent (nothing else is on record for this node).
    let audit = dir.path().join("console").join("audit.jsonl");
    let out = crate::fleetop()
        .env("FLEETOP_AUDIT_LOG", &audit)
        .args(["--hosts", &format!("127.0.0.1:{port}"), "node", "history", &n.name])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let journal: Vec<&str> = text.lines().filter(|l| l.contains("(agent's fault journal)")).collect();
    assert!(journal.len() >= 2, "{text}");
    assert!(journal.iter().all(|l| l.contains("XID 79 on GPU-")), "{text}");
    assert!(journal.iter().any(|l| l.contains("boot 0000000a")), "{text}");
}

/// The package's `backend = "auto"` on a node whose NVML is broken (a file
/// that is no library) and with NVIDIA GPUs on its PCI bus: the agent
/// serves host data with backend "none" and says why; the console never
/// calls the node `ok`. It carries `gpu_library` (crit, the catalog's
/// action, the agent's words), and the agent's /metrics flags it too.
#[test]
fn a_gpu_library_that_did_not_load_on_a_node_with_gpus_is_crit_not_ok() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("libnvidia-ml.so.1");
    std::fs::write(&broken, "not a library\n").expect("write");
    let sysfs = dir.path().join("sys");
    for bus in ["0000:18:00.0", "0000:2a:00.0"] {
        let d = sysfs.join("bus/pci/devices").join(bus);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("vendor"), "0x10de\n").expect("w");
        std::fs::write(d.join("class"), "0x030200\n").expect("w");
    }
    let mut _agent = Agent::spawn(
        std::process::Command::new(agent_bin())
            .args(["--backend", "auto", "--interval", "200ms", "--ib-sysfs", "/nonexistent"])
            .args(crate::HERMETIC_AGENT)
            .arg("--nvml-lib")
            .arg(&broken)
            .arg("--sysfs-root")
            .arg(&sysfs)
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            // No AMD SMI to find either.
            .env("ROCM_PATH", dir.path())
            .stdout(std::process::Stdio::null()),
        "warn",
    );
    let (port, metrics) = (_agent.port(), _agent.log.metrics().port());
    let n = export_until(port, "sampled", |n| n.sampled_at.is_some());
    assert_eq!(n.agent.as_ref().map(|a| a.backend.as_str()), Some("none"));
    assert!(n.gpus.is_empty());
    assert_eq!(n.health, fleetop::export::Health::Crit, "never ok: {n:#?}");
    let f = flags(&n, FlagKind::GpuLibrary);
    let [f] = f[..] else {
        panic!("one gpu_library flag: {:#?}", n.flags)
    };
    assert_eq!(f.severity, fleetop::model::flag::Severity::Crit);
    assert_eq!(f.action.name(), "reboot_node");
    assert!(
        f.detail
            .starts_with("the GPU library did not load (2 GPUs on the PCI bus): NVML")
            && f.detail.contains("libnvidia-ml.so.1"),
        "the agent's words: {}",
        f.detail
    );
    assert!(
        flags(&n, FlagKind::GpuMissing).is_empty(),
        "one flag for one cause: {:#?}",
        n.flags
    );

    let page = scrape_metrics(metrics);
    assert!(
        page.lines().any(|l| l.starts_with("fleetop_flag{")
            && l.contains("kind=\"gpu_library\",severity=\"crit\"")
            && l.ends_with(" 1")),
        "{page}"
    );
    assert!(
        page.lines()
            .any(|l| l.starts_with("fleetop_node_health{") && l.ends_with(" 2")),
        "{page}"
    );
}

/// The agent's /metrics page, as plain HTTP/1.0 (10 s at most).
fn scrape_metrics(port: u16) -> String {
    use std::io::{Read, Write};
    let start = Instant::now();
    loop {
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
            c.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
                .expect("request");
            let mut page = String::new();
            let _ = c.read_to_string(&mut page);
            if page.contains("fleetop_node_health") {
                return page;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no /metrics page on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
