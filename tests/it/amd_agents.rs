//! One fleet, two vendors, with real agents: `fleetop-agent --backend amd`
//! on the fake libamd_smi.so (an 8 x MI300X OAM node, and each of its fault
//! scripts) and `--backend nvml` on the fake libnvidia-ml.so, streaming
//! into one console export. Every value the AMD agent reads is checked
//! against AMD's own amdsmi by .ci/amdsmi_check.py; this holds the rest of
//! the way: the wire, the console, the flags and their actions.

use std::process::Stdio;
use std::time::{Duration, Instant};

use fleetop::export::{GpuVendor, Node, Snapshot, Status};
use fleetop::model::flag::{Action, FlagKind, Severity};

use crate::amd_exporter::{amd_agent, fake_rocm, profile};
use crate::nvml_fake::{flags, gpu, nvml_agent};
use crate::{Agent, fleetop};

/// An agent on the fake AMD SMI with `profile_name`, serving gRPC on a
/// port of its own (the fake's clock frozen after every fault its script
/// holds).
fn amd_node(rocm: &tempfile::TempDir, profile_name: &str) -> Agent {
    Agent::spawn(
        amd_agent(rocm, &profile(profile_name))
            .args(["--interval", "200ms", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null()),
        "warn",
    )
}

/// One export of `hosts`, again until `done` (30 s at most).
fn export_until(hosts: &str, what: &str, done: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let start = Instant::now();
    loop {
        let out = fleetop()
            .args(["export", "--once", "--hosts", hosts])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
        if done(&snap) {
            return snap;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never {what}: {snap:#?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn node(snap: &Snapshot, port: u16) -> &Node {
    let addr = format!("127.0.0.1:{port}");
    snap.nodes
        .iter()
        .find(|n| n.address == addr)
        .expect("the node is listed")
}

#[test]
fn an_mi300x_node_and_an_h100_node_stream_into_one_console_side_by_side() {
    let rocm = fake_rocm();
    let _amd = amd_node(&rocm, "mi300x-oam.toml");
    let _nvidia = nvml_agent("h100-sxm5.toml", Some("15"));
    let (a, n) = (_amd.port(), _nvidia.port());
    let hosts = format!("127.0.0.1:{a},127.0.0.1:{n}");
    let snap = export_until(&hosts, "both nodes with their GPUs", |s| {
        s.nodes.len() == 2 && s.nodes.iter().all(|n| n.status == Status::Ok && !n.gpus.is_empty())
    });

    let amd = node(&snap, a);
    let agent = amd.agent.as_ref().expect("described");
    assert_eq!(agent.backend, "amdsmi");
    assert!(
        agent.driver_version.is_some() && agent.cuda_version.is_none(),
        "{agent:?}"
    );
    assert_eq!(amd.gpus.len(), 8);
    for g in &amd.gpus {
        let what = format!("MI300X GPU {}: {g:#?}", g.index);
        assert_eq!(g.vendor, GpuVendor::Amd, "{what}");
        assert!(g.model.contains("MI300X"), "{what}");
        assert_eq!(g.mem_total_bytes, Some(205_822_885_888), "{what}");
        // Every reading an SRE needs, read; the edge sensor MI300X lacks, absent.
        for (name, v) in [
            ("util", g.util_pct.map(u64::from)),
            ("memory activity", g.mem_util_pct.map(u64::from)),
            ("VRAM used", g.mem_used_bytes),
            ("junction", g.temp_c.map(u64::from)),
            ("HBM", g.hbm_temp_c.map(u64::from)),
            ("GFX clock", g.sm_clock_mhz.map(u64::from)),
            ("memory clock", g.mem_clock_mhz.map(u64::from)),
            ("PCIe replays", g.pcie_replay_count),
            ("ECC corrected", g.ecc_corrected_volatile),
            ("ECC uncorrected", g.ecc_uncorrected_volatile),
        ] {
            assert!(v.is_some(), "{name} missing on {what}");
        }
        assert_eq!(g.edge_temp_c, None, "{what}");
        assert!(g.power_w.is_some() && g.power_limit_w == Some(750.0), "{what}");
        assert_eq!((g.pcie_link_gen, g.pcie_link_width), (Some(5), Some(16)), "{what}");
        assert_eq!(g.compute_partition.as_deref(), Some("SPX"), "{what}");
        assert_eq!(g.memory_partition.as_deref(), Some("NPS1"), "{what}");
        assert!(!g.firmware.is_empty() && g.vbios_version.is_some(), "{what}");
        assert!(!g.ras.is_empty(), "RAS blocks missing on {what}");
        // The XGMI mesh: a link to each of the seven other GPUs, all up.
        assert_eq!(g.nvlink.len(), 7, "{what}");
        assert!(g.nvlink.iter().all(|l| l.active == Some(true)), "{what}");
    }
    assert!(
        amd.gpus.iter().any(|g| !g.processes.is_empty()),
        "no GPU process on the MI300X node"
    );
    assert!(
        amd.flags.iter().all(|f| f.severity != Severity::Crit),
        "{:?}",
        amd.flags
    );

    let nvidia = node(&snap, n);
    assert_eq!(nvidia.agent.as_ref().map(|a| a.backend.as_str()), Some("nvml"));
    assert!(!nvidia.gpus.is_empty());
    for g in &nvidia.gpus {
        assert_eq!(g.vendor, GpuVendor::Nvidia, "{g:#?}");
        assert!(g.compute_partition.is_none() && g.ras.is_empty(), "{g:#?}");
    }
}

#[test]
fn amd_faults_from_a_real_agent_raise_the_flags_nvidias_would_with_their_actions() {
    let rocm = fake_rocm();
    // (fault script, the GPU it hits, the flag it must raise, its severity)
    let cases = [
        (
            "faults/ras-uncorrectable.toml",
            3,
            FlagKind::EccUncorrected,
            Severity::Crit,
        ),
        ("faults/ras-uncorrectable.toml", 3, FlagKind::GpuEvent, Severity::Crit),
        (
            "faults/ras-uncorrectable.toml",
            3,
            FlagKind::RemapPending,
            Severity::Warn,
        ),
        ("faults/xgmi-link-down.toml", 1, FlagKind::NvlinkDown, Severity::Crit),
        ("faults/thermal-throttle.toml", 5, FlagKind::Throttled, Severity::Warn),
        ("faults/gpu-lost.toml", 6, FlagKind::GpuLost, Severity::Crit),
    ];
    for script in [
        "faults/ras-uncorrectable.toml",
        "faults/xgmi-link-down.toml",
        "faults/thermal-throttle.toml",
        "faults/gpu-lost.toml",
    ] {
        let _agent = amd_node(&rocm, script);
        let port = _agent.port();
        let want: Vec<_> = cases.iter().filter(|c| c.0 == script).collect();
        let hosts = format!("127.0.0.1:{port}");
        let snap = export_until(&hosts, script, |s| {
            want.iter().all(|(_, g, kind, _)| {
                s.nodes
                    .first()
                    .is_some_and(|n| flags(n, *kind).iter().any(|f| f.gpu == Some(*g)))
            })
        });
        let n = &snap.nodes[0];
        for (_, g, kind, severity) in &want {
            let f = flags(n, *kind).into_iter().find(|f| f.gpu == Some(*g)).expect("raised");
            let what = format!("{script}: {kind:?} on GPU {g}: {f:#?}");
            assert!(f.severity >= *severity, "{what}");
            assert_ne!(f.action, Action::None, "{what}");
            assert!(!f.action_detail.is_empty() && !f.runbook.is_empty(), "{what}");
        }
        // Only the GPUs the script hits are hit: an XGMI link has two ends.
        let hit: Vec<u32> = n
            .flags
            .iter()
            .filter(|f| f.severity == Severity::Crit)
            .filter_map(|f| f.gpu)
            .collect();
        let ends: &[u32] = if script.contains("xgmi") { &[1, 4] } else { &[want[0].1] };
        assert!(hit.iter().all(|g| ends.contains(g)), "{script}: crit flags on {hit:?}");
        match script {
            "faults/xgmi-link-down.toml" => {
                let f = &flags(n, FlagKind::NvlinkDown)[0];
                assert!(f.detail.contains("XGMI"), "an AMD link is called XGMI: {}", f.detail);
            }
            "faults/gpu-lost.toml" => assert_eq!(gpu(n, 6).error.as_deref(), Some("gpu_lost")),
            "faults/thermal-throttle.toml" => {
                let g = gpu(n, 5);
                assert!(g.throttle_reasons.iter().any(|r| r.contains("thermal")), "{g:#?}");
                assert!(!g.throttle_detail.is_empty(), "AMD's words: {g:#?}");
            }
            _ => {}
        }
    }
}
