//! One fleet, two vendors: AMD Instinct MI300X nodes beside NVIDIA's in one
//! console. The simulated MI300X goes the whole way (simulation, the wire,
//! decoding, the store, the detectors, the screens, the export); what the
//! simulation does not play (a GPU in CPX partitions, the HBM against its own
//! limit, link states not read, the XGMI error status, pending bad pages)
//! is written on the wire by hand, as the agent's AMD reader sends it.

use crossterm::event::KeyCode;
use fleetop::detect::Thresholds;
use fleetop::export::{GpuVendor, Snapshot};
use fleetop::ingest::decode;
use fleetop::ingest::demo::SimFleet;
use fleetop::model::flag::{Action, Flag, FlagKind, Severity, Subject};
use fleetop::model::target::Target;
use fleetop::model::update::{Event, Update};
use fleetop::store::Store;
use fleetop_agent::sim::{Model, Scenario, SimConfig};
use fleetop_proto::{absent, pb, throttle};

use crate::tui::{NOW, Step, drive_steps, key, keys, text, theme};

fn sim(name: &str, model: Model, scenario: Scenario, seed: u64) -> SimConfig {
    SimConfig {
        hostname: name.into(),
        gpus: 8,
        ib_ports: 8,
        model,
        scenario,
        seed,
        start_ms: NOW - 600_000,
        interval_ms: 1000,
        problem_ms: None,
    }
}

/// Two NVIDIA H100 nodes and two AMD MI300X nodes, one of each with an
/// uncorrectable memory error: the same fault in each vendor's words.
fn side_by_side() -> Vec<SimConfig> {
    vec![
        sim("gpu01", Model::H100, Scenario::Training, 11),
        sim("gpu02", Model::Mi300x, Scenario::Training, 12),
        sim("gpu03", Model::Mi300x, Scenario::RasUncorrectable, 13),
        sim("gpu04", Model::H100, Scenario::EccUncorrectable, 14),
    ]
}

fn targets(names: &[&str]) -> Vec<Target> {
    names
        .iter()
        .map(|n| Target {
            name: (*n).into(),
            host: "10.0.0.1".into(),
            port: 50051,
        })
        .collect()
}

/// Every update a console receives from `plan`'s agents, with ten minutes
/// of history ending at NOW.
fn fleet(plan: Vec<SimConfig>) -> (Vec<Target>, Vec<Update>) {
    let names: Vec<String> = plan.iter().map(|c| c.hostname.clone()).collect();
    let n = plan.len();
    let mut sims = SimFleet::new(plan);
    let mut updates = sims.connect(NOW);
    for t in (NOW - 600_000..=NOW).step_by(1000) {
        updates.extend(sims.sample(t));
    }
    updates.extend((0..n).map(|node| Update::Node {
        node,
        event: Event::CaughtUp,
    }));
    (targets(&names.iter().map(String::as_str).collect::<Vec<_>>()), updates)
}

fn store_of((targets, updates): (Vec<Target>, Vec<Update>)) -> Store {
    let mut store = Store::new(targets, Thresholds::default());
    for u in updates {
        store.apply(u, NOW);
    }
    store
}

fn screen(fleet: (Vec<Target>, Vec<Update>), size: (u16, u16), steps: Vec<fleetop::tui::app::Action>) -> String {
    let steps = steps.into_iter().map(Step::Do).collect();
    text(&drive_steps(theme(), fleet, size, steps, |_| {}).0)
}

fn flags_of(store: &Store, node: usize, kind: FlagKind) -> Vec<&Flag> {
    store.nodes[node].detector.active().filter(|f| f.kind == kind).collect()
}

#[test]
fn an_amd_and_an_nvidia_node_share_the_heatmap_at_80x24() {
    let s = screen(fleet(side_by_side()), (80, 24), vec![]);
    insta::assert_snapshot!("amd_fleet_heatmap_80x24", s);
    // Both vendors' GPUs are cells of one heatmap, sorted alike.
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        assert!(s.contains(n), "{s}");
    }
    // The sort by name puts them in name order whatever their vendor; by
    // the metric, the AMD node with the reset sorts among the NVIDIA ones.
    let by_util = screen(fleet(side_by_side()), (80, 24), keys("s"));
    let rows: Vec<&str> = by_util.lines().filter(|l| l.starts_with("  gpu0")).collect();
    assert_eq!(rows.len(), 4, "{by_util}");
}

#[test]
fn amd_node_detail_says_xgmi_its_partition_and_temperatures_at_80x24_and_wide() {
    // The second node: the MI300X.
    let mut open = keys("j");
    open.push(key(KeyCode::Enter));
    let s = screen(fleet(side_by_side()), (80, 24), open.clone());
    insta::assert_snapshot!("amd_fleet_detail_80x24", s);
    assert!(s.contains("2 XGMI") && !s.contains("NVLink"), "{s}");
    assert!(s.contains("gpu0 SPX/NPS1 · junction "), "the AMD GPU's own line: {s}");
    assert!(s.contains("driver 6.10.5") && !s.contains("CUDA"), "{s}");

    open.extend(keys("2"));
    let s = screen(fleet(side_by_side()), (200, 50), open);
    insta::assert_snapshot!("amd_fleet_detail_200x50_xgmi", s);
    assert!(s.contains("2 XGMI") && !s.contains("NVLink"), "{s}");
    assert!(s.contains("edge -"), "no edge sensor on an MI300X: {s}");
    // Seven XGMI links, each up.
    let up = s.lines().filter(|l| l.split_whitespace().nth(1) == Some("up")).count();
    assert_eq!(up, 7, "{s}");

    // The MI300X with the fault: its GPU's reset in the XID column, its
    // RAS counts by block on its line (the sim's target GPU: seed 13 of 8).
    let t = fleetop_agent::sim::target_gpu(13, 8);
    let mut open = keys("jj");
    open.push(key(KeyCode::Enter));
    open.extend(keys(&"j".repeat(t as usize)));
    let s = screen(fleet(side_by_side()), (160, 50), open);
    let row = s
        .lines()
        .find(|l| l.starts_with(&format!("{t}  ")))
        .unwrap_or_else(|| panic!("GPU {t}'s row: {s}"));
    assert!(row.contains("reset") && row.contains("ecc event"), "{row}");
    assert!(s.contains(&format!("gpu{t} SPX/NPS1 · junction ")), "{s}");
    assert!(s.contains("RAS c/u UMC 1/1"), "one corrected, one not: {s}");

    // The NVIDIA node beside it keeps NVIDIA's words.
    let mut nv = vec![key(KeyCode::Enter)];
    nv.extend(keys("2"));
    let s = screen(fleet(side_by_side()), (200, 50), nv);
    assert!(
        s.contains("2 NVLink") && !s.contains("XGMI") && s.contains("CUDA 12.8"),
        "{s}"
    );
    assert!(!s.contains("junction"), "no AMD line for an NVIDIA GPU: {s}");
}

#[test]
fn the_amd_fault_asks_what_nvidias_does_in_amds_words() {
    let store = store_of(fleet(side_by_side()));
    let (amd, nv) = (2, 3);
    let ecc = |node| {
        *flags_of(&store, node, FlagKind::EccUncorrected)
            .first()
            .expect("ecc_uncorrected")
    };
    let (a, n) = (ecc(amd), ecc(nv));
    assert_eq!((a.action, a.severity), (n.action, n.severity));
    assert_eq!(a.action, Action::ResetGpu);
    assert!(a.detail.contains("in RAS block UMC 1"), "{}", a.detail);
    assert_eq!(
        a.action_detail(),
        format!(
            "drain, then reset the GPU: {}; if it recurs: drain, then replace the hardware (RMA)",
            a.detail
        )
    );
    // The reset the driver did for it, from the AMD fault catalog.
    let ev = flags_of(&store, amd, FlagKind::GpuEvent);
    let ev = ev.first().expect("gpu_event");
    let entry = fleetop_catalog::amd::event("gpu_post_reset");
    assert_eq!((ev.action, ev.severity), (entry.immediate, Severity::Crit));
    assert!(
        ev.detail.starts_with("gpu_reset (The driver reset the GPU"),
        "{}",
        ev.detail
    );
    assert!(
        ev.drain_reason().starts_with("gpu_event on gpu"),
        "{}",
        ev.drain_reason()
    );
    // NVIDIA's node has no AMD event; AMD's no XID.
    assert!(flags_of(&store, nv, FlagKind::GpuEvent).is_empty());
    assert!(flags_of(&store, amd, FlagKind::Xid).is_empty());
    // The healthy nodes of either vendor have no flag.
    assert_eq!(store.nodes[0].detector.active().count(), 0);
    assert_eq!(store.nodes[1].detector.active().count(), 0);
}

#[test]
fn the_export_carries_each_gpus_vendor_and_amds_own_readings() {
    let store = store_of(fleet(side_by_side()));
    let snap = fleetop::export::snapshot(&store, NOW);
    let json = serde_json::to_string(&snap).expect("serializes");
    let back: Snapshot = serde_json::from_str(&json).expect("reads back");
    let (nv, amd, faulty) = (&back.nodes[0].gpus[0], &back.nodes[1].gpus[0], &back.nodes[2]);
    assert_eq!((nv.vendor, amd.vendor), (GpuVendor::Nvidia, GpuVendor::Amd));
    assert_eq!(
        (
            amd.compute_partition.as_deref(),
            amd.memory_partition.as_deref(),
            amd.partition_id
        ),
        (Some("SPX"), Some("NPS1"), Some(0))
    );
    assert_eq!(amd.firmware.get("PM").map(String::as_str), Some("00.85.107.00"));
    assert_eq!(amd.ras[0].block, "UMC");
    assert_eq!(
        (amd.xgmi_error_status, amd.edge_temp_c, amd.hbm_slowdown_temp_c),
        (Some(0), None, Some(95))
    );
    assert_eq!(amd.nvlink.len(), 7, "XGMI links, under the export's NVLink name");
    // The board's serial and part number (the simulated agent's).
    assert!(
        amd.serial_number.as_ref().is_some_and(|s| s.len() == 16),
        "{:?}",
        amd.serial_number
    );
    assert_eq!(amd.board_part_number.as_deref(), Some("102-G30211-0C"));
    // NVIDIA's GPU has none of AMD's fields, not even as null.
    let nv_json = serde_json::to_value(nv).expect("value");
    assert_eq!(nv_json["vendor"], "nvidia");
    assert!(
        nv_json.get("compute_partition").is_none()
            && nv_json.get("ras").is_none()
            && nv_json.get("serial_number").is_none(),
        "{nv_json}"
    );
    // The AMD fault: its event and its flags, with the catalog's action.
    let target = faulty
        .flags
        .iter()
        .find(|f| f.kind == FlagKind::GpuEvent)
        .expect("gpu_event");
    let g = faulty
        .gpus
        .iter()
        .find(|g| Some(g.index) == target.gpu)
        .expect("the GPU");
    assert_eq!(g.events, ["gpu_reset"]);
    assert_eq!(
        g.ras.iter().find(|r| r.block == "UMC").map(|r| r.uncorrectable),
        Some(1)
    );
    assert_eq!(
        (target.action, target.runbook.as_str()),
        (Action::ResetGpu, "docs/faults.md#gpu_event")
    );
    // The summary view carries the vendor too, and the schema says so.
    let sum = fleetop::export::summary(&back);
    assert_eq!(sum.nodes[1].gpus[0].vendor, GpuVendor::Amd);
    let schema = fleetop::export::schema_json();
    for field in [
        "\"vendor\"",
        "\"compute_partition\"",
        "\"xgmi_error_status\"",
        "\"gpu_event\"",
        "\"serial_number\"",
        "\"board_part_number\"",
    ] {
        assert!(schema.contains(field), "{field}");
    }
}

// The wire, by hand: an AMD node as the agent's AMD reader describes it.

const GIB: u64 = 1 << 30;

/// An MI300X node of `physical` GPUs, each split into `parts` compute
/// partitions (1: SPX/NPS1; 8: CPX/NPS4), as the agent describes it.
fn amd_info(physical: u32, parts: u32) -> pb::NodeInfo {
    let (compute, memory) = if parts == 1 { ("SPX", "NPS1") } else { ("CPX", "NPS4") };
    let gpus = (0..physical)
        .flat_map(|p| (0..parts).map(move |k| (p, k)))
        .enumerate()
        .map(|(i, (p, k))| pb::GpuInfo {
            index: i as u32,
            uuid: format!("GPU-{i:02}"),
            model: "AMD Instinct MI300X".into(),
            pci_bus_id: format!("0000:{:02x}:00.{k}", 0x18 + p * 0x10),
            mem_total_bytes: 192 * GIB / u64::from(parts),
            power_limit_mw: 750_000,
            slowdown_temp_c: 100,
            shutdown_temp_c: 110,
            vendor: "AMD".into(),
            compute_partition: compute.into(),
            memory_partition: memory.into(),
            partition_id: k,
            hbm_slowdown_temp_c: 95,
            hbm_shutdown_temp_c: 105,
            board_part_number: "102-G30211-0C".into(),
            serial_number: format!("69235100{p:02}"),
            nvlinks: (0..3)
                .map(|l| pb::NvLinkInfo {
                    link: l,
                    peer_pci_bus_id: format!("0000:{:02x}:00.0", 0x48 + l * 0x10),
                    inactive_at_start: false,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    pb::NodeInfo {
        hostname: "mi01".into(),
        agent_version: "0.1.0".into(),
        backend: "amdsmi".into(),
        driver_version: "6.10.5".into(),
        sample_interval_ms: 1000,
        agent_time_ms: NOW,
        agent_instance: 1,
        gpus,
        ..Default::default()
    }
}

/// A healthy MI300X reading, as the AMD reader sends it (no PCIe
/// throughput, no row remapping: AMD has its bad pages instead).
fn amd_gpu(index: u32) -> pb::GpuSample {
    pb::GpuSample {
        index,
        util_pct: 90,
        mem_used_bytes: 20 * GIB,
        temp_c: 70,
        hbm_temp_c: 60,
        power_mw: 700_000,
        power_limit_mw: 750_000,
        sm_clock_mhz: 2000,
        absent: absent::PCIE_THROUGHPUT | absent::REMAPPED_ROWS,
        ras: ["UMC", "SDMA", "GFX"]
            .into_iter()
            .map(|b| pb::RasCount {
                block: b.into(),
                ..Default::default()
            })
            .collect(),
        xgmi_error_status: Some(0),
        ..Default::default()
    }
}

fn amd_sample(gpus: Vec<pb::GpuSample>, t: i64) -> pb::Sample {
    pb::Sample {
        seq: ((t - NOW) / 1000 + 1000) as u64,
        time_ms: t,
        gpus,
        ..Default::default()
    }
}

/// The updates of an AMD node described by `info` whose GPUs read, second
/// by second up to NOW, what `at` says for each time.
fn amd_updates(info: pb::NodeInfo, secs: i64, at: impl Fn(i64) -> Vec<pb::GpuSample>) -> Vec<Update> {
    let mut stream = decode::Stream::default();
    let mut updates = vec![Update::Node {
        node: 0,
        event: Event::Info(Box::new(stream.info(info, NOW))),
    }];
    for t in (NOW - secs * 1000..=NOW).step_by(1000) {
        let s = stream.sample(amd_sample(at(t), t), t).expect("a whole sample");
        updates.push(Update::Node {
            node: 0,
            event: Event::Sample(Box::new(s)),
        });
    }
    updates.push(Update::Node {
        node: 0,
        event: Event::CaughtUp,
    });
    updates
}

/// The flags of a 2-GPU MI300X node whose GPU 1 reads what `change` makes
/// of a healthy reading (at time `t`), for `secs` seconds.
fn judge(info: pb::NodeInfo, secs: i64, change: impl Fn(&mut pb::GpuSample, i64)) -> Vec<Flag> {
    let updates = amd_updates(info, secs, |t| {
        let mut g = vec![amd_gpu(0), amd_gpu(1)];
        change(&mut g[1], t);
        g
    });
    let store = store_of((targets(&["mi01"]), updates));
    store.nodes[0].detector.active().cloned().collect()
}

fn one(flags: &[Flag], kind: FlagKind) -> &Flag {
    let f: Vec<&Flag> = flags.iter().filter(|f| f.kind == kind).collect();
    assert_eq!(f.len(), 1, "{kind:?} in {flags:#?}");
    assert_eq!(f[0].subject, Subject::Gpu(1), "{:?}", f[0]);
    f[0]
}

#[test]
fn every_flag_means_the_same_on_an_amd_gpu_from_its_wire_fields() {
    let spx = || amd_info(2, 1);
    // Healthy: nothing.
    assert_eq!(judge(spx(), 30, |_, _| {}), []);

    // Idle: a process holds it at 0% for the window.
    let f = judge(spx(), 400, |g, _| {
        g.util_pct = 0;
        g.processes = vec![pb::GpuProcess {
            pid: 4242,
            used_mem_bytes: 10 * GIB,
            job_id: 77,
            ..Default::default()
        }];
    });
    assert_eq!(one(&f, FlagKind::Idle).action, Action::RestartApp);

    // Throttled, from throttle_reasons' bits, said in AMD's words.
    let f = judge(spx(), 30, |g, _| {
        g.throttle_reasons = throttle::SW_THERMAL_SLOWDOWN | throttle::HW_SLOWDOWN;
        g.throttle_detail = vec!["prochot_thrm".into(), "socket_thrm".into()];
        g.sm_clock_mhz = 1200;
    });
    let t = one(&f, FlagKind::Throttled);
    assert_eq!((t.action, t.severity), (Action::CheckCooling, Severity::Crit));
    assert!(
        t.detail.starts_with("prochot_thrm, socket_thrm; GFX 1200 MHz"),
        "{}",
        t.detail
    );
    // A voltage regulator's limit alone is power's.
    let f = judge(spx(), 30, |g, _| {
        g.throttle_reasons = throttle::HW_SLOWDOWN;
        g.throttle_detail = vec!["vr_thrm".into()];
    });
    assert_eq!(one(&f, FlagKind::Throttled).action, Action::CheckPower);
    // A power cap alone is no trouble (power_capped, after its window).
    assert_eq!(
        judge(spx(), 30, |g, _| {
            g.throttle_reasons = throttle::SW_POWER_CAP;
            g.throttle_detail = vec!["ppt_pwr".into()];
        }),
        []
    );

    // Hot: the junction against its slowdown, the HBM against its own.
    let f = judge(spx(), 30, |g, _| g.temp_c = 97);
    let h = one(&f, FlagKind::Hot);
    assert_eq!(h.detail, "junction 97 °C, slowdown at 100 °C");
    let f = judge(spx(), 30, |g, _| g.hbm_temp_c = 94);
    let h = one(&f, FlagKind::Hot);
    assert_eq!(
        (h.detail.as_str(), h.action),
        ("HBM 94 °C, slowdown at 95 °C", Action::CheckCooling)
    );

    // ECC: the sums, with the RAS blocks named and the block's action.
    let f = judge(spx(), 30, |g, _| {
        g.ecc_uncorrected_volatile = 3;
        g.ras[0].uncorrectable = 2;
        g.ras[1].uncorrectable = 1;
    });
    let e = one(&f, FlagKind::EccUncorrected);
    assert_eq!(e.detail, "3 uncorrectable ECC errors in RAS blocks UMC 2, SDMA 1");
    assert_eq!(e.action, Action::ResetGpu);
    // HBM errors MI300X reports as deferred (poisoned) count too.
    let f = judge(spx(), 30, |g, _| g.ras[0].deferred = 1);
    assert!(one(&f, FlagKind::EccUncorrected).detail.contains("UMC 0 (+1 deferred)"));
    // An uncorrectable error on the XGMI links: reset now, the link after.
    let f = judge(spx(), 30, |g, _| {
        g.ecc_uncorrected_volatile = 1;
        g.ras.push(pb::RasCount {
            block: "XGMI_WAFL".into(),
            uncorrectable: 1,
            ..Default::default()
        });
    });
    assert_eq!(one(&f, FlagKind::EccUncorrected).action, Action::ResetGpu);

    // Link down: an XGMI link's state, in XGMI's words.
    let f = judge(spx(), 30, |g, _| g.nvlink_state = vec![1, 0, 1]);
    let l = one(&f, FlagKind::NvlinkDown);
    assert_eq!((l.detail.as_str(), l.action), ("XGMI link 1 down", Action::ResetGpu));
    // Link states not read: unknown, never down (nor up).
    assert_eq!(
        judge(spx(), 30, |g, _| {
            g.absent |= absent::LINKS;
            g.nvlink_down_mask = 0b10;
        }),
        []
    );

    // GPU lost: the same word as NVIDIA's.
    let f = judge(spx(), 30, |g, t| {
        if t > NOW - 10_000 {
            *g = pb::GpuSample {
                index: 1,
                error: "gpu_lost".into(),
                ..Default::default()
            };
        }
    });
    assert_eq!(one(&f, FlagKind::GpuLost).action, Action::RebootNode);

    // An AMD SMI call that does not return: stuck, in AMD SMI's words.
    let f = judge(spx(), 30, |g, _| {
        *g = pb::GpuSample {
            index: 1,
            error: "nvml_stuck: amdsmi_get_power_info: no answer for 40000 ms".into(),
            ..Default::default()
        };
    });
    let s = one(&f, FlagKind::GpuStuck);
    assert_eq!(
        s.detail,
        "AMD SMI call does not return: amdsmi_get_power_info: no answer for 40s"
    );
    assert_eq!(s.severity, Severity::Crit);

    // AMD's events and the XGMI error status: gpu_event, the catalog's action.
    let event = |kind: &'static str| {
        move |g: &mut pb::GpuSample, t: i64| {
            if t == NOW - 5_000 {
                g.events = vec![pb::GpuEvent {
                    kind: kind.into(),
                    time_ms: t,
                    text: "\u{1b}[31mfrom the driver".into(),
                }];
            }
        }
    };
    let f = judge(spx(), 30, event("gpu_pre_reset"));
    assert_eq!(one(&f, FlagKind::GpuEvent).action, Action::ResetGpu);
    let f = judge(spx(), 30, event("vmfault"));
    let v = one(&f, FlagKind::GpuEvent);
    assert_eq!((v.action, v.severity), (Action::RestartApp, Severity::Warn));
    let f = judge(spx(), 30, event("event_77"));
    assert_eq!(one(&f, FlagKind::GpuEvent).severity, Severity::Info);
    let f = judge(spx(), 30, |g, _| g.xgmi_error_status = Some(2));
    let x = one(&f, FlagKind::GpuEvent);
    assert_eq!((x.action, x.entry().kind), (Action::ResetGpu, "gpu_event"));
    assert!(
        x.detail.starts_with("xgmi_error (") && x.detail.ends_with("; status 2)"),
        "{}",
        x.detail
    );

    // Bad pages pending retirement: AMD's pending remap, warn, reset.
    let f = judge(spx(), 30, |g, _| {
        g.retired_pages = 3;
        g.retired_pages_pending = 1;
    });
    let p = one(&f, FlagKind::RemapPending);
    assert_eq!((p.action, p.severity), (Action::ResetGpu, Severity::Warn));
    assert_eq!(
        p.detail,
        "1 bad pages pending retirement: reset the GPU (3 pages retired)"
    );
}

#[test]
fn gpu_missing_counts_physical_gpus_and_names_amd_smi() {
    let node = |info: pb::NodeInfo| {
        let n = info.gpus.len() as u32;
        let updates = amd_updates(info, 5, |_| (0..n).map(amd_gpu).collect());
        store_of((targets(&["mi01"]), updates))
    };
    // Two GPUs in CPX: sixteen on the wire, two against what it should have.
    let mut info = amd_info(2, 8);
    info.expect_gpus = 2;
    assert!(flags_of(&node(info.clone()), 0, FlagKind::GpuMissing).is_empty());
    info.expect_gpus = 3;
    let store = node(info.clone());
    let m = flags_of(&store, 0, FlagKind::GpuMissing);
    assert_eq!(m[0].detail, "2 of 3 GPUs answer");
    info.expect_gpus = 0;
    info.gpus_missing_pci = vec!["0000:38:00.0".into()];
    let store = node(info);
    let m = flags_of(&store, 0, FlagKind::GpuMissing);
    assert_eq!(m[0].detail, "on the PCI bus, not in AMD SMI: 0000:38:00.0");
    assert_eq!(m[0].action, Action::RebootNode);
}

#[test]
fn a_cpx_gpus_socket_readings_count_once_in_the_totals_and_its_partition_shows() {
    // Two MI300X in CPX/NPS4: sixteen GPUs on the wire, each partition
    // repeating its GPU's 700 W.
    let info = amd_info(2, 8);
    let updates = amd_updates(info, 5, |_| (0..16).map(amd_gpu).collect());
    let store = store_of((targets(&["mi01"]), updates.clone()));
    let t = fleetop::tui::view::totals(&store, NOW);
    assert_eq!((t.gpus, t.power_w), (2, 1400.0));

    // On screen: the header's totals, and partition 3 in node detail.
    let mut open = vec![key(KeyCode::Enter)];
    open.extend(keys("jjj"));
    let s = screen((targets(&["mi01"]), updates), (120, 30), open);
    assert!(s.contains("2 GPUs  util 90%  1.4 kW"), "{s}");
    assert!(
        s.contains("gpu3 CPX/NPS4 partition 3 · junction 70°C HBM 60°C edge -"),
        "{s}"
    );
}

#[test]
fn text_from_the_wire_is_made_printable_once_where_it_comes_in() {
    let mut info = amd_info(1, 1);
    info.gpus[0].compute_partition = "SPX\u{1b}]0;owned\u{7}".into();
    info.gpus[0].firmware = vec![pb::Firmware {
        name: "PM\u{202e}".into(),
        version: "x".repeat(500),
    }];
    let d = decode::node_desc(info);
    let g = &d.gpus[0];
    let p = g.partition.as_ref().expect("a partition");
    assert!(
        !p.compute.contains('\u{1b}') && !p.compute.contains('\u{7}'),
        "{:?}",
        p.compute
    );
    assert!(!g.firmware[0].name.contains('\u{202e}'));
    // Bounded: 64 characters, the rest counted.
    assert!(
        g.firmware[0].version.starts_with(&"x".repeat(64)),
        "{}",
        g.firmware[0].version
    );
    assert!(
        g.firmware[0].version.ends_with("(436 more characters)"),
        "{}",
        g.firmware[0].version
    );
    let mut gs = amd_gpu(0);
    gs.throttle_detail = vec!["socket_thrm".into(), "\u{1b}[2Jevil".into()];
    gs.events = vec![pb::GpuEvent {
        kind: "vmfault".into(),
        time_ms: NOW,
        text: "\u{1b}[31mred".repeat(100),
    }];
    let s = decode::sample(&amd_sample(vec![gs], NOW), 0);
    let r = &s.gpus[0];
    assert_eq!(r.throttle_detail[0], "socket_thrm");
    assert!(!r.throttle_detail[1].contains('\u{1b}'));
    assert!(!r.events[0].text.contains('\u{1b}') && r.events[0].text.ends_with("more characters)"));
    // Absent is None, never 0: no edge sensor, no pending count on NVIDIA.
    assert_eq!(r.edge_temp_c, None);
    assert_eq!(r.retired_pages_pending, Some(0), "AMD reads its pending pages");
    let nv = decode::sample(&amd_sample(vec![pb::GpuSample::default()], NOW), 0);
    assert_eq!(
        (nv.gpus[0].retired_pages_pending, nv.gpus[0].xgmi_error_status),
        (None, None)
    );
}
