//! `fleetop export --demo`: real agents on loopback with known scenarios; the
//! export must flag exactly what each scenario does, and nothing on healthy nodes.

use std::collections::BTreeSet;

use fleetop::export::{Health, Snapshot, Status};
use fleetop::ingest::demo;
use fleetop::model::flag::{FlagKind, Severity};
use fleetop_agent::sim::{self, Scenario};

use crate::fleetop;

fn expected(s: Scenario) -> &'static [FlagKind] {
    use FlagKind::*;
    match s {
        Scenario::Training | Scenario::Quiet => &[],
        Scenario::Idle => &[Idle],
        Scenario::ThermalThrottle => &[Throttled, Hot],
        Scenario::Hot => &[Hot],
        Scenario::PowerBrake => &[Throttled],
        Scenario::PowerCap => &[PowerCapped],
        Scenario::Xid79 => &[Xid, GpuLost],
        Scenario::Underused => &[Underused],
        Scenario::EccUncorrectable => &[Xid, EccUncorrected, RemapPending, RemapFailed],
        Scenario::NvlinkDown => &[NvlinkDown],
        Scenario::IbDown => &[IbDown],
        Scenario::IbErrors => &[IbErrors],
        // Connected but silent since long before the export: as blind as
        // an agent that does not answer.
        Scenario::Hang => &[Unreachable],
        Scenario::NvmlStuck => &[GpuStuck],
        Scenario::PcieDegraded => &[PcieDegraded],
        Scenario::FabricFailed => &[FabricUnhealthy],
        Scenario::PersistenceOff => &[PersistenceOff],
        Scenario::GpuMissing => &[GpuMissing],
        Scenario::SxidFatal => &[Sxid],
        Scenario::NoPeermem => &[PeermemMissing],
        Scenario::OldDriver => &[VersionSkew],
        // The demo plays it on its MI300X rack: the HBM's uncorrectable
        // error, and the reset the driver did for it.
        Scenario::RasUncorrectable => &[EccUncorrected, GpuEvent],
    }
}

#[test]
fn every_scenario_is_flagged_as_it_happened_and_healthy_nodes_are_clean() {
    // More nodes than problem scenarios, so that healthy ones are judged too.
    let (nodes, gpus, seed) = (24, 4, 7);
    let out = fleetop()
        .args(["export", "--demo", "--once", "--format", "json"])
        .args([
            "--nodes",
            &nodes.to_string(),
            "--gpus",
            &gpus.to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .output()
        .expect("runs");
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("stdout is one JSON snapshot, nothing else");
    assert_eq!(snap.schema_version, fleetop::export::SCHEMA_VERSION);
    assert_eq!(snap.schema_version, 2);
    assert_eq!(snap.nodes.len(), nodes as usize);

    let plan = demo::plan(nodes, gpus, seed, 0);
    let mut seen = BTreeSet::new();
    for (node, cfg) in snap.nodes.iter().zip(&plan) {
        assert_eq!(node.name, cfg.hostname);
        let kinds: BTreeSet<FlagKind> = node.flags.iter().map(|f| f.kind).collect();
        let want: BTreeSet<FlagKind> = expected(cfg.scenario).iter().copied().collect();
        assert_eq!(
            kinds, want,
            "{} ({:?}) flags: {:#?}",
            node.name, cfg.scenario, node.flags
        );
        seen.extend(kinds);

        let target = sim::target_gpu(cfg.seed, gpus);
        for f in &node.flags {
            match f.kind {
                // A job holds every GPU of an idle node; persistence is
                // off on every GPU of its node.
                FlagKind::Idle | FlagKind::PersistenceOff => assert!(f.gpu.is_some()),
                FlagKind::Stale
                | FlagKind::Unreachable
                | FlagKind::GpuMissing
                | FlagKind::Sxid
                | FlagKind::PeermemMissing
                | FlagKind::VersionSkew => assert_eq!((f.gpu, &f.ib_port), (None, &None)),
                FlagKind::IbDown | FlagKind::IbErrors => {
                    let port = sim::target_ib_port(cfg.seed, cfg.ib_ports);
                    assert_eq!(f.ib_port.as_deref(), Some(format!("mlx5_{port}/1").as_str()), "{f:?}");
                }
                _ => assert_eq!(f.gpu, Some(target), "{} {f:?}", node.name),
            }
            assert!(!f.detail.is_empty());
            // Every flag says what to do, in the catalog's words, and where
            // its runbook is.
            let entry = fleetop_catalog::flag(f.kind.name()).expect("in the catalog");
            assert!(f.action_detail.starts_with(f.action.says()), "{f:?}");
            assert!(f.action_detail.contains(&f.detail), "{f:?}");
            assert_eq!(f.runbook, format!("docs/faults.md#{}", entry.kind));
            assert!(f.severity <= f.action.severity(), "graded lower, never higher: {f:?}");
        }
        // A GPU flagged xid lists its codes.
        for f in node.flags.iter().filter(|f| f.kind == FlagKind::Xid) {
            let g = node.gpus.iter().find(|g| Some(g.index) == f.gpu).expect("the GPU");
            assert!(
                !g.xids.is_empty(),
                "{} GPU {} flagged xid, no codes",
                node.name,
                g.index
            );
            for x in &g.xids {
                assert!(f.detail.contains(&format!("XID {x}")), "{f:?}");
            }
        }
        match cfg.scenario {
            Scenario::Hang => assert_eq!(node.status, Status::Unreachable),
            _ => assert_eq!(node.status, Status::Ok, "{}", node.name),
        }
        // `status` says the node can be judged; `health` what was judged:
        // its worst flag (info is ok), so a broken node is never "ok".
        // A node that cannot be judged (the hung agent) is `unknown`.
        let worst = node.flags.iter().map(|f| f.severity).max();
        let want = match worst {
            _ if node.status != Status::Ok => Health::Unknown,
            Some(Severity::Crit) => Health::Crit,
            Some(Severity::Warn) => Health::Warn,
            _ => Health::Ok,
        };
        assert_eq!(node.health, want, "{} {:?}", node.name, cfg.scenario);
        match cfg.scenario {
            Scenario::Xid79 | Scenario::EccUncorrectable | Scenario::IbDown => {
                assert_eq!((node.status, node.health), (Status::Ok, Health::Crit), "{}", node.name)
            }
            Scenario::Training | Scenario::Quiet => assert_eq!(node.health, Health::Ok),
            _ => {}
        }
        if cfg.scenario == Scenario::Idle {
            assert_eq!(node.flags.len(), gpus as usize, "every held GPU of the idle node");
        }
    }
    // Every kind but `stale` (the demo's hung agent has been silent past
    // `unreachable_after`: unreachable; stale_restart tests a stale node),
    // `burnin_failed` (raised by a burn-in someone ran: tests/it/tui.rs)
    // and `gpu_library` (a real agent whose GPU library did not load; a
    // simulated node has no library: tests/it/nvml_fake.rs).
    let all: BTreeSet<FlagKind> = FlagKind::ALL
        .into_iter()
        .filter(|k| !matches!(k, FlagKind::Stale | FlagKind::BurninFailed | FlagKind::GpuLibrary))
        .collect();
    assert_eq!(seen, all, "the demo shows every kind of flag");
}

#[test]
fn evidence_and_readings_are_plausible() {
    let out = fleetop()
        .args([
            "export", "--demo", "--once", "--nodes", "12", "--gpus", "2", "--seed", "3",
        ])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("json");
    let plan = demo::plan(12, 2, 3, 0);
    for (node, cfg) in snap.nodes.iter().zip(&plan) {
        let agent = node.agent.as_ref().expect("agent description");
        assert_eq!(agent.backend, format!("sim:{}", cfg.scenario.name()));
        for g in &node.gpus {
            if g.error.is_some() {
                assert_eq!(g.util_pct, None, "a lost GPU has no readings");
                continue;
            }
            let (used, total) = (g.mem_used_bytes.expect("mem"), g.mem_total_bytes.expect("total"));
            assert!(used <= total && total > 70 << 30, "{used} of {total}");
            assert!(g.power_w.expect("power") <= g.power_limit_w.expect("limit"));
            if cfg.scenario == Scenario::Training {
                assert!(g.util_pct.expect("util") >= 90);
                assert_eq!(g.processes.len(), 1);
                // Who runs it and what, as nvitop shows: sent once per pid
                // on the wire, there in every snapshot.
                let p = &g.processes[0];
                assert!(p.owner.as_deref().is_some_and(|o| !o.is_empty()), "{p:?}");
                assert_eq!(
                    p.command.as_deref(),
                    Some(format!("python train.py --rank {}", g.index).as_str())
                );
                // Rates come from counters in consecutive samples.
                assert!(
                    g.nvlink
                        .iter()
                        .all(|l| l.active == Some(true) && l.tx_bytes_per_s.is_some_and(|r| r > 1e9))
                );
            }
        }
        for p in &node.ib_ports {
            if p.state.as_deref() == Some("ACTIVE") && cfg.scenario == Scenario::Training {
                assert!(p.tx_bytes_per_s.is_some_and(|r| r > 1e9), "{p:?}");
            }
        }
    }
}

#[test]
fn ndjson_count_gives_one_compact_document_per_line() {
    let out = fleetop()
        .args(["export", "--demo", "--nodes", "3", "--gpus", "1", "--count", "3"])
        .args(["--interval", "300ms", "--format", "ndjson"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let times: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Snapshot>(l)
                .expect("each line is a snapshot")
                .generated_at
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

/// `fleetop export ... | head -1` (a reader that has had enough) ends the
/// export quietly with success, as grep and jq do: `set -o pipefail`
/// scripts must not fail on it.
#[test]
fn a_closed_stdout_ends_the_export_quietly_and_successfully() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .args(["export", "--demo", "--nodes", "2", "--gpus", "1", "--format", "ndjson"])
        .args(["--interval", "200ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut first = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    out.read_line(&mut first).expect("a line");
    assert!(first.starts_with('{'), "{first}");
    drop(out);
    let done = child.wait_with_output().expect("ends");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{:?}: {stderr}", done.status);
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    // The schema too (it used to panic in print!).
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .args(["export", "--print-schema"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    let done = child.wait_with_output().expect("ends");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
}

#[test]
fn the_committed_schema_matches_the_export_types() {
    let out = fleetop().args(["export", "--print-schema"]).output().expect("runs");
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/export.schema.json"))
        .expect("docs/export.schema.json exists");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        committed,
        "regenerate with: cargo run -- export --print-schema > docs/export.schema.json"
    );
}

/// `--backfill`: the idle flag needs five minutes of history. Read whole,
/// the demo's history has them; read for ten seconds, it does not, and the
/// GPUs are not yet called idle (a large fleet's quick `--once` pays that).
#[test]
fn a_short_backfill_reads_too_little_history_to_call_a_gpu_idle() {
    let idle_flags = |extra: &[&str]| {
        let out = fleetop()
            .args(["export", "--demo", "--once", "--nodes", "1", "--gpus", "2"])
            .args(["--demo-scenarios", "idle"])
            .args(extra)
            .output()
            .expect("runs");
        assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
        let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("one JSON snapshot");
        assert!(!snap.nodes[0].gpus.is_empty(), "the node answered: {:?}", snap.nodes[0]);
        snap.nodes[0].flags.iter().filter(|f| f.kind == FlagKind::Idle).count()
    };
    assert!(idle_flags(&[]) > 0, "the whole history: idle");
    assert_eq!(idle_flags(&["--backfill", "10s"]), 0, "ten seconds of it: not yet");
}

/// 64 in-process demo agents: the one-shot export writes its document and
/// ends, although the demo's agents still hold the streams its session
/// opened (it used to wait on them for ever once its settle ran out with
/// nodes still reading their history).
#[test]
fn a_one_shot_export_of_64_demo_nodes_ends_after_its_document() {
    let started = std::time::Instant::now();
    let out = fleetop()
        .args(["export", "--demo", "--nodes", "64", "--once", "--timeout", "10s"])
        .args(["--format", "ndjson"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "exit {:?} after {:?}; stderr: {}",
        out.status.code(),
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("one document");
    assert_eq!(snap.nodes.len(), 64);
}
