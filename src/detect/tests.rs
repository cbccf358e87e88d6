use super::*;
use crate::model::sample::{GpuDesc, GpuProcess, GpuReading, IbPortDesc, IbReading};
use fleetop_proto::throttle;

fn info() -> NodeDesc {
    NodeDesc {
        gpus: vec![GpuDesc {
            index: 0,
            slowdown_temp_c: Some(87),
            ..Default::default()
        }],
        ib_ports: vec![IbPortDesc {
            device: "mlx5_0".into(),
            port: 1,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn gpu(f: impl FnOnce(&mut GpuReading)) -> GpuReading {
    let mut g = GpuReading {
        util_pct: Some(95),
        temp_c: Some(60),
        sm_clock_mhz: Some(1900),
        throttle_mask: Some(0),
        ..Default::default()
    };
    f(&mut g);
    g
}

/// Feeds one GPU sample per second from t=0 and returns the active kinds after each.
fn run(samples: Vec<GpuReading>, th: &Thresholds) -> Vec<Vec<FlagKind>> {
    let mut d = NodeDetector::default();
    let info = info();
    samples
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let s = NodeSample {
                time_ms: i as i64 * 1000,
                gpus: vec![g],
                ..Default::default()
            };
            d.on_sample(&info, &s, &Derived::default(), &[], th);
            d.active().map(|f| f.kind).collect()
        })
        .collect()
}

#[test]
fn a_flickering_hw_slowdown_bit_is_not_a_flag() {
    let th = Thresholds::default();
    let flick = |on: bool| gpu(|g| g.throttle_mask = Some(if on { throttle::HW_SLOWDOWN } else { 0 }));
    let seq = vec![
        flick(true),
        flick(false),
        flick(true),
        flick(true),
        flick(false),
        flick(true),
    ];
    assert!(run(seq, &th).iter().all(|k| k.is_empty()));
}

#[test]
fn sustained_throttle_raises_once_and_clears_after_clean_samples() {
    let th = Thresholds::default();
    let hot = || gpu(|g| g.throttle_mask = Some(throttle::HW_THERMAL_SLOWDOWN));
    let mut seq = vec![hot(), hot(), hot(), hot()];
    seq.extend((0..6).map(|_| gpu(|_| {})));
    let out = run(seq, &th);
    let raised: Vec<bool> = out.iter().map(|k| k.contains(&FlagKind::Throttled)).collect();
    // Raised on the 3rd sample, held through 4 clean ones, cleared on the 5th.
    assert_eq!(raised, [false, false, true, true, true, true, true, true, false, false]);
}

#[test]
fn throttle_flag_starts_when_the_condition_did() {
    let th = Thresholds::default();
    let mut d = NodeDetector::default();
    for t in 0..4 {
        let g = gpu(|g| g.throttle_mask = Some(throttle::HW_POWER_BRAKE_SLOWDOWN));
        let s = NodeSample {
            time_ms: 5000 + t * 1000,
            gpus: vec![g],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &Derived::default(), &[], &th);
    }
    let f = d.active().next().expect("flag");
    assert_eq!(
        (f.kind, f.since_ms, f.severity),
        (FlagKind::Throttled, 5000, Severity::Crit)
    );
    assert!(f.detail.contains("hw_power_brake_slowdown"), "{}", f.detail);
}

#[test]
fn a_stuck_gpu_warns_then_is_critical_after_30_s_and_clears_once_it_answers() {
    use crate::model::sample::GpuError;
    let th = Thresholds::default();
    let mut d = NodeDetector::default();
    let mut feed = |t: i64, g: GpuReading| {
        let s = NodeSample {
            time_ms: t,
            gpus: vec![g],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &Derived::default(), &[], &th);
        d.active().find(|f| f.kind == FlagKind::GpuStuck).cloned()
    };
    let stuck = |ms: u64| GpuReading {
        error: Some(GpuError::Stuck {
            text: format!("nvml_stuck: nvmlDeviceGetPowerUsage: no answer for {ms} ms"),
            for_ms: ms,
        }),
        ..Default::default()
    };
    let f = feed(1000, stuck(1000)).expect("raised at once");
    assert_eq!((f.severity, f.since_ms), (Severity::Warn, 1000));
    assert!(f.detail.contains("nvmlDeviceGetPowerUsage"), "{}", f.detail);
    let f = feed(31_000, stuck(31_000)).expect("still raised");
    assert_eq!((f.severity, f.since_ms), (Severity::Crit, 1000));
    // Answering again: cleared after the usual clean samples.
    let cleared = (0..10)
        .map(|i| feed(32_000 + i * 1000, gpu(|_| {})))
        .position(|f| f.is_none());
    assert_eq!(cleared, Some(th.clear_samples as usize - 1));
}

#[test]
fn hot_has_hysteresis_in_degrees() {
    let th = Thresholds::default(); // hot at 82 °C for an 87 °C slowdown
    let temps = [83, 83, 83, 81, 81, 81, 81, 81, 79, 79, 79, 79, 79];
    let seq = temps.iter().map(|&t| gpu(|g| g.temp_c = Some(t))).collect();
    let raised: Vec<bool> = run(seq, &th).iter().map(|k| k.contains(&FlagKind::Hot)).collect();
    // 81 °C keeps a raised flag (within 2 °C); five samples under 80 clear it.
    assert_eq!(
        raised,
        [
            false, false, true, true, true, true, true, true, true, true, true, true, false
        ]
    );
}

#[test]
fn idle_needs_a_held_gpu_for_the_whole_window() {
    let th = Thresholds {
        idle_window: Duration::from_secs(10),
        ..Default::default()
    };
    let held = || {
        gpu(|g| {
            g.util_pct = Some(0);
            g.processes = [GpuProcess {
                pid: 1,
                used_mem_bytes: 1,
                job_id: Some(4411),
                owner: None,
                command: None,
            }]
            .into();
        })
    };
    let empty = || gpu(|g| g.util_pct = Some(0));
    let out = run((0..12).map(|_| held()).collect(), &th);
    assert!(!out[9].contains(&FlagKind::Idle), "9 s < window");
    assert!(out[10].contains(&FlagKind::Idle));
    assert!(
        run((0..15).map(|_| empty()).collect(), &th)
            .iter()
            .all(|k| k.is_empty()),
        "an empty GPU is not waste"
    );
    let mut d = NodeDetector::default();
    for t in 0..12 {
        let s = NodeSample {
            time_ms: t * 1000,
            gpus: vec![held()],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &Derived::default(), &[], &th);
    }
    let f = d.active().next().expect("idle");
    assert!(f.words().contains("job 4411"), "{}", f.words());
    // With the scheduler's jobs, the user and the job's GPUs are named.
    let job = Job {
        id: 4411,
        user: "alice".into(),
        name: "train".into(),
        elapsed_s: 60,
        gpus_per_node: 8,
        nodes: vec![],
    };
    let s = NodeSample {
        time_ms: 12_000,
        gpus: vec![held()],
        ..Default::default()
    };
    d.on_sample(&info(), &s, &Derived::default(), &[job], &th);
    let f = d.active().next().expect("idle");
    assert!(
        f.words().starts_with("job 4411 (alice, 8 GPUs here) holds it at 0%"),
        "{}",
        f.words()
    );
    // The holder is the flag's, typed: where the job is said already (a
    // folded alert row), the detail says the idleness alone.
    let h = f.holder.as_ref().expect("held");
    assert_eq!(h.words(), "job 4411 (alice, 8 GPUs here)");
    assert!(h.is_job_alone(4411));
    assert!(f.detail.starts_with("at 0% for "), "{}", f.detail);
    let job = |id| crate::model::flag::HoldingJob { id, known: None };
    let held = |jobs| crate::model::flag::Holder {
        jobs,
        processes: 1,
        ..Default::default()
    };
    assert_eq!(held(vec![job(4411)]).words(), "job 4411");
    assert!(!held(vec![job(44110)]).is_job_alone(4411));
    assert!(!held(vec![job(4411), job(4412)]).is_job_alone(4411));
    assert_eq!(held(vec![job(4411), job(4412)]).words(), "job 4411, job 4412");
    assert!(!held(vec![]).is_job_alone(4411));
    assert_eq!(held(vec![]).words(), "1 process(es)");
    let with_pod = crate::model::flag::Holder {
        pods: vec!["ml/a".into()],
        ..held(vec![job(4411)])
    };
    assert!(!with_pod.is_job_alone(4411), "a pod too: not the job alone");
    assert_eq!(with_pod.words(), "job 4411, pod ml/a");
    // No Slurm job, but Ray's worker with that pid: its Ray job is named.
    let mut d = NodeDetector {
        ray: vec![crate::model::ray::RayWork {
            kind: crate::model::ray::RayWorkKind::Actor,
            job: "01000000".into(),
            what: "Trainer trainer0".into(),
            node: "ab".into(),
            pid: Some(1),
            gpus: 1.0,
        }],
        ..NodeDetector::default()
    };
    let ray_held = || {
        gpu(|g| {
            g.util_pct = Some(0);
            g.processes = [GpuProcess {
                pid: 1,
                used_mem_bytes: 1,
                job_id: None,
                owner: None,
                command: None,
            }]
            .into();
        })
    };
    for t in 0..12 {
        let s = NodeSample {
            time_ms: t * 1000,
            gpus: vec![ray_held()],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &Derived::default(), &[], &th);
    }
    let f = d.active().next().expect("idle");
    assert!(
        f.words()
            .starts_with("ray job 01000000 (Trainer trainer0) holds it at 0%"),
        "{}",
        f.words()
    );
}

#[test]
fn a_gpu_a_pod_holds_unused_is_idle_and_names_the_pod() {
    use crate::model::sample::PodRef;
    let th = Thresholds {
        idle_window: Duration::from_secs(10),
        ..Default::default()
    };
    let pod = |name: &str| PodRef {
        namespace: "ml".into(),
        pod: name.into(),
        container: "c".into(),
        mig_uuid: None,
    };
    // No process on it: the pod was given the GPU and runs nothing there.
    for (pods, says) in [
        (vec![pod("train-0")], "pod ml/train-0 holds it at 0%"),
        (vec![pod("a"), pod("b")], "pods ml/a, ml/b holds it at 0%"),
    ] {
        let mut d = NodeDetector::default();
        for t in 0..12 {
            let s = NodeSample {
                time_ms: t * 1000,
                gpus: vec![gpu(|g| {
                    g.util_pct = Some(0);
                    g.pods = pods.clone();
                })],
                ..Default::default()
            };
            d.on_sample(&info(), &s, &Derived::default(), &[], &th);
        }
        let f = d.active().next().expect("idle");
        assert_eq!(f.kind, FlagKind::Idle);
        assert!(f.words().starts_with(says), "{}", f.words());
    }
}

#[test]
fn ib_errors_hold_for_a_while_then_clear() {
    use crate::model::rates::Delta;
    let th = Thresholds {
        ib_errors_hold: Duration::from_secs(3),
        ..Default::default()
    };
    let mut d = NodeDetector::default();
    let port = IbReading {
        state: Some("ACTIVE".into()),
        ..Default::default()
    };
    let mut kinds = Vec::new();
    for t in 0..8 {
        let mut errors = [None; fleetop_proto::ib::ERROR_COUNTERS.len()];
        errors[0] = Some(Delta::Exact(if t == 1 { 5 } else { 0 }));
        let derived = Derived {
            ib: vec![crate::model::rates::IbRates {
                errors,
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = NodeSample {
            time_ms: t * 1000,
            ib_ports: vec![port.clone()],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &derived, &[], &th);
        kinds.push(d.active().any(|f| f.kind == FlagKind::IbErrors));
    }
    assert_eq!(kinds, [false, true, true, true, true, false, false, false]);
    assert_eq!(d.cleared().count(), 1, "the cleared flag is kept for display");
    assert!(d.cleared().all(|c| c.flag.detail.contains("symbol_error +5")));
}

/// Feeds one sample with `gpus` at `t` and returns the active flags.
fn feed(d: &mut NodeDetector, info: &NodeDesc, t: i64, gpus: Vec<GpuReading>) -> Vec<Flag> {
    let s = NodeSample {
        time_ms: t,
        gpus,
        ..Default::default()
    };
    d.on_sample(info, &s, &Derived::default(), &[], &Thresholds::default());
    d.active().cloned().collect()
}

fn xid_at(code: u32, t: i64) -> GpuReading {
    gpu(|g| g.xids.push(crate::model::sample::Xid { xid: code, time_ms: t }))
}

#[test]
fn xids_are_graded_by_the_catalog_not_all_crit() {
    use crate::model::flag::Action;
    for (code, sev) in [
        (63, Severity::Info),
        (92, Severity::Info),
        (43, Severity::Info),
        (94, Severity::Warn),
        (13, Severity::Warn),
        (79, Severity::Crit),
        (48, Severity::Crit),
        (95, Severity::Crit),
    ] {
        let mut d = NodeDetector::default();
        let f = feed(&mut d, &info(), 1000, vec![xid_at(code, 1000)]);
        let f = f.iter().find(|f| f.kind == FlagKind::Xid).expect("xid flag");
        assert_eq!(f.severity, sev, "XID {code}");
        assert_eq!(f.action.severity(), sev, "XID {code}: severity follows the action");
    }
    // Two codes on one GPU: the most urgent decides.
    let mut d = NodeDetector::default();
    let f = feed(
        &mut d,
        &info(),
        1000,
        vec![gpu(|g| {
            g.xids.push(crate::model::sample::Xid { xid: 13, time_ms: 1000 });
            g.xids.push(crate::model::sample::Xid { xid: 79, time_ms: 1000 });
        })],
    );
    assert_eq!(f[0].action, Action::RebootNode);
    assert_eq!(d.held_xids(0), [13, 79], "the codes are held for the view and export");
}

#[test]
fn the_same_xid_in_a_third_boot_asks_for_replace_and_says_why() {
    use crate::model::flag::Action;
    use crate::model::sample::FaultRecord;
    let rec = |boot: &str, t: i64| FaultRecord {
        gpu_uuid: "GPU-1".into(),
        kind: "xid".into(),
        code: 79,
        time_ms: t,
        boot_id: Some(boot.into()),
    };
    let mut info = info();
    info.gpus[0].uuid = "GPU-1".into();
    info.health.boot_id = Some("c".into());
    let now = 10 * 86_400_000;
    // One earlier boot: the catalog's reboot stands.
    info.health.fault_journal = vec![rec("a", now - 3_600_000)];
    let mut d = NodeDetector::default();
    let f = feed(&mut d, &info, now, vec![xid_at(79, now)]);
    assert_eq!((f[0].action, f[0].escalation.as_deref()), (Action::RebootNode, None));
    // Two earlier boots (and this one's record, counted once): replace.
    info.health.fault_journal = vec![rec("a", now - 86_400_000), rec("b", now - 3_600_000), rec("c", now)];
    let mut d = NodeDetector::default();
    let f = feed(&mut d, &info, now, vec![xid_at(79, now)]);
    assert_eq!(f[0].action, Action::Replace);
    assert_eq!(f[0].severity, Severity::Crit);
    let why = f[0].escalation.as_deref().expect("says why");
    assert!(why.starts_with("3rd XID 79 on this GPU in 7 days"), "{why}");
    assert!(f[0].action_detail().contains("3rd XID 79"), "{}", f[0].action_detail());
    // Boots older than the window do not count.
    info.health.fault_journal = vec![rec("a", now - 8 * 86_400_000), rec("b", now - 3_600_000)];
    let mut d = NodeDetector::default();
    assert_eq!(
        feed(&mut d, &info, now, vec![xid_at(79, now)])[0].action,
        Action::RebootNode
    );
}

#[test]
fn an_xid_held_comes_from_the_journal_too_so_every_console_says_the_same() {
    use crate::model::sample::FaultRecord;
    let mut info = info();
    info.gpus[0].uuid = "GPU-1".into();
    let now = 10 * 86_400_000;
    let rec = |t: i64| FaultRecord {
        gpu_uuid: "GPU-1".into(),
        kind: "xid".into(),
        code: 79,
        time_ms: t,
        boot_id: None,
    };
    // Twenty minutes ago: past the agent's ten minutes of history, so
    // a console started now sees it in the journal only, and holds it.
    info.health.fault_journal = vec![rec(now - 20 * 60_000)];
    let mut d = NodeDetector::default();
    let f = feed(&mut d, &info, now, vec![gpu(|_| {})]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].kind, f[0].since_ms), (FlagKind::Xid, now - 20 * 60_000));
    // Past the hold: nothing.
    info.health.fault_journal = vec![rec(now - 2 * 3_600_000)];
    let mut d = NodeDetector::default();
    assert!(feed(&mut d, &info, now, vec![gpu(|_| {})]).is_empty());
    // A burn-in that passed since ends it, journal or not.
    info.health.fault_journal = vec![rec(now - 20 * 60_000)];
    let mut d = NodeDetector {
        burnin_passed_ms: Some(now - 60_000),
        ..Default::default()
    };
    assert!(feed(&mut d, &info, now, vec![gpu(|_| {})]).is_empty());
}

/// An XID raised again after a burn-in passed is a new incident: its age
/// counts from its own first record, never from the incident before the
/// pass (whose record the journal still holds within `xid_hold`).
#[test]
fn a_re_raised_xid_is_aged_from_its_own_first_record() {
    use crate::model::sample::FaultRecord;
    let mut info = info();
    info.gpus[0].uuid = "GPU-1".into();
    let min = 60_000;
    let now = 10 * 86_400_000;
    let rec = |t: i64| FaultRecord {
        gpu_uuid: "GPU-1".into(),
        kind: "xid".into(),
        code: 79,
        time_ms: t,
        boot_id: None,
    };
    let xid = |f: &[Flag]| f.iter().find(|f| f.kind == FlagKind::Xid).map(|f| f.since_ms);
    // The first incident, 13 minutes ago; a burn-in passed 8 minutes ago.
    let (first, pass, second) = (now - 13 * min, now - 8 * min, now - 6 * min);
    info.health.fault_journal = vec![rec(first)];
    let mut d = NodeDetector::default();
    assert_eq!(xid(&feed(&mut d, &info, first, vec![xid_at(79, first)])), Some(first));
    d.burnin_passed_ms = Some(pass);
    assert_eq!(
        xid(&feed(&mut d, &info, pass + 1000, vec![gpu(|_| {})])),
        None,
        "the pass ends it"
    );
    // The same code again, 6 minutes ago: the journal holds both records.
    info.health.fault_journal = vec![rec(first), rec(second)];
    assert_eq!(
        xid(&feed(&mut d, &info, second, vec![xid_at(79, second)])),
        Some(second)
    );
    assert_eq!(
        xid(&feed(&mut d, &info, now, vec![gpu(|_| {})])),
        Some(second),
        "6m, not 13m"
    );
    // A console that learns of the pass and sees the new XID in one
    // sample, and one started after both: the same age.
    let mut d = NodeDetector::default();
    info.health.fault_journal = vec![rec(first)];
    feed(&mut d, &info, first, vec![gpu(|_| {})]);
    d.burnin_passed_ms = Some(pass);
    info.health.fault_journal = vec![rec(first), rec(second)];
    assert_eq!(
        xid(&feed(&mut d, &info, second, vec![xid_at(79, second)])),
        Some(second)
    );
    let mut d = NodeDetector {
        burnin_passed_ms: Some(pass),
        ..Default::default()
    };
    assert_eq!(xid(&feed(&mut d, &info, now, vec![gpu(|_| {})])), Some(second));
    // AMD's events are held the same way.
    let event = |t: i64| {
        gpu(|g| {
            g.events.push(crate::model::sample::GpuEvent {
                kind: "gpu_pre_reset".into(),
                time_ms: t,
                text: String::new(),
            })
        })
    };
    let ev = |f: &[Flag]| f.iter().find(|f| f.kind == FlagKind::GpuEvent).map(|f| f.since_ms);
    info.health.fault_journal.clear();
    let mut d = NodeDetector::default();
    assert_eq!(ev(&feed(&mut d, &info, first, vec![event(first)])), Some(first));
    d.burnin_passed_ms = Some(pass);
    assert_eq!(ev(&feed(&mut d, &info, second, vec![event(second)])), Some(second));
}

#[test]
fn a_narrow_pcie_link_is_flagged_and_a_slow_one_only_while_busy() {
    use crate::model::sample::PcieLink;
    let mut info = info();
    info.gpus[0].pcie_max = Some(PcieLink { gen_: 5, width: 16 });
    let at = |gen_, width, util| {
        gpu(|g| {
            g.pcie_link = Some(PcieLink { gen_, width });
            g.util_pct = Some(util);
        })
    };
    let pcie = |fl: &[Flag]| fl.iter().find(|f| f.kind == FlagKind::PcieDegraded).cloned();
    // Idle at gen 1: power saving, no fault, however long.
    let mut d = NodeDetector::default();
    assert!((0..10).all(|t| pcie(&feed(&mut d, &info, t * 1000, vec![at(1, 16, 0)])).is_none()));
    // Busy at gen 3: raised after the usual three samples.
    let raised: Vec<bool> = (0..4)
        .map(|t| pcie(&feed(&mut d, &info, 20_000 + t * 1000, vec![at(3, 16, 95)])).is_some())
        .collect();
    assert_eq!(raised, [false, false, true, true]);
    // x8 of x16 is a fault busy or idle.
    let mut d = NodeDetector::default();
    let f = (0..3).map(|t| feed(&mut d, &info, t * 1000, vec![at(5, 8, 0)])).last();
    let f = pcie(&f.unwrap_or_default()).expect("narrow link flagged");
    assert_eq!(f.detail, "PCIe gen 5 x8 of gen 5 x16");
    assert_eq!((f.severity, f.action.name()), (Severity::Warn, "check_link"));
}

#[test]
fn a_failed_fabric_registration_is_crit_and_a_slow_one_only_after_a_minute() {
    use crate::model::sample::Fabric;
    let with = |fab| gpu(|g| g.fabric = Some(fab));
    let fabric = |fl: &[Flag]| fl.iter().find(|f| f.kind == FlagKind::FabricUnhealthy).cloned();
    let mut d = NodeDetector::default();
    let f = fabric(&feed(&mut d, &info(), 0, vec![with(Fabric::Completed { status: 999 })])).expect("flag");
    assert_eq!((f.severity, f.action.name()), (Severity::Crit, "reboot_node"));
    let mut d = NodeDetector::default();
    assert!(fabric(&feed(&mut d, &info(), 0, vec![with(Fabric::InProgress)])).is_none());
    assert!(fabric(&feed(&mut d, &info(), 59_000, vec![with(Fabric::InProgress)])).is_none());
    assert!(fabric(&feed(&mut d, &info(), 60_000, vec![with(Fabric::InProgress)])).is_some());
    let mut d = NodeDetector::default();
    assert!(fabric(&feed(&mut d, &info(), 0, vec![with(Fabric::Completed { status: 0 })])).is_none());
}

#[test]
fn node_checks_missing_gpus_peermem_and_sxids() {
    use crate::model::sample::Sxid;
    let mut info = info();
    info.health.expect_gpus = Some(8);
    info.health.gpus_missing_pci = vec!["0000:3b:00.0".into()];
    info.health.peermem = Some(false);
    let mut d = NodeDetector::default();
    let s = NodeSample {
        time_ms: 1000,
        gpus: vec![gpu(|_| {})],
        sxids: vec![Sxid {
            sxid: 20034,
            time_ms: 1000,
            switch_pci: "0000:c8:00.0".into(),
            fatal: true,
            text: "Link 30 LTSSM Fault Up".into(),
        }],
        ..Default::default()
    };
    d.on_sample(&info, &s, &Derived::default(), &[], &Thresholds::default());
    let get = |k| d.active().find(|f| f.kind == k).cloned().expect("raised");
    let missing = get(FlagKind::GpuMissing);
    assert_eq!(
        missing.detail,
        "1 of 8 GPUs answer; on the PCI bus, not in NVML: 0000:3b:00.0"
    );
    assert_eq!((missing.severity, missing.subject), (Severity::Crit, Subject::Node));
    assert_eq!(get(FlagKind::PeermemMissing).severity, Severity::Warn);
    let sx = get(FlagKind::Sxid);
    assert_eq!((sx.severity, sx.action.name()), (Severity::Crit, "reboot_node"));
    assert!(
        sx.detail.contains("SXid 20034 (fatal) on switch 0000:c8:00.0"),
        "{}",
        sx.detail
    );
    // The config's count stands where the agent says none.
    let th = Thresholds {
        expect_gpus: Some(4),
        ..Default::default()
    };
    let mut fleet = info.clone();
    fleet.health.expect_gpus = None;
    let mut d2 = NodeDetector::default();
    d2.on_sample(&fleet, &s, &Derived::default(), &[], &th);
    let f = d2
        .active()
        .find(|f| f.kind == FlagKind::GpuMissing)
        .expect("raised by the config");
    assert!(f.detail.starts_with("1 of 4 GPUs answer"), "{}", f.detail);
    // Node-level flags a sample decides clear when it says otherwise.
    info.health = Default::default();
    let s = NodeSample {
        time_ms: 2000,
        gpus: vec![gpu(|_| {})],
        ..Default::default()
    };
    d.on_sample(&info, &s, &Derived::default(), &[], &Thresholds::default());
    assert!(
        d.active().all(|f| f.kind == FlagKind::Sxid),
        "held like an XID; the rest cleared"
    );
}

/// A node whose GPU library did not load (backend "none": the package's
/// `auto` on a broken driver) is never `ok` where GPUs are expected: on
/// its PCI bus, by the agent's `--expect-gpus`, or by the config's
/// `[thresholds] expect_gpus`. It carries `gpu_library` (crit, with the
/// catalog's action and the agent's words), not `gpu_missing` too. A node
/// with none expected (a login node) has no flag.
#[test]
fn a_gpu_library_that_did_not_load_where_gpus_are_expected_is_crit() {
    let note = "NVML: libnvidia-ml.so.1: cannot open shared object file; AMD SMI: not found; serving host and InfiniBand data only";
    let broken = |f: &dyn Fn(&mut NodeDesc)| {
        let mut d = NodeDesc {
            backend: "none".into(),
            gpu_note: Some(note.into()),
            ..Default::default()
        };
        f(&mut d);
        d
    };
    let sample = NodeSample {
        time_ms: 1000,
        ..Default::default()
    };
    let fleet = Thresholds {
        expect_gpus: Some(8),
        ..Default::default()
    };
    let flags = |info: &NodeDesc, th: &Thresholds| {
        let mut d = NodeDetector::default();
        d.on_sample(info, &sample, &Derived::default(), &[], th);
        d.active().cloned().collect::<Vec<Flag>>()
    };
    for (info, th, why) in [
        (
            broken(&|d| d.health.gpus_on_pci = Some(8)),
            Thresholds::default(),
            "8 GPUs on the PCI bus",
        ),
        (
            broken(&|d| d.health.gpus_missing_pci = vec!["0000:18:00.0".into()]),
            Thresholds::default(),
            "1 GPU on the PCI bus",
        ),
        (
            broken(&|d| d.health.expect_gpus = Some(4)),
            Thresholds::default(),
            "the agent expects 4 GPUs",
        ),
        (broken(&|_| {}), fleet.clone(), "expect_gpus = 8"),
    ] {
        let f = flags(&info, &th);
        assert_eq!(f.len(), 1, "gpu_library alone, not gpu_missing too: {f:?}");
        let f = &f[0];
        assert_eq!(
            (f.kind, f.severity, f.subject),
            (FlagKind::GpuLibrary, Severity::Crit, Subject::Node)
        );
        assert_eq!(
            f.action,
            fleetop_catalog::flag("gpu_library").expect("in the catalog").immediate
        );
        assert!(f.keeps_out(), "no return while it stands");
        assert_eq!(f.detail, format!("the GPU library did not load ({why}): {note}"));
    }
    // Nothing expected: a login node, not judged.
    assert!(flags(&broken(&|_| {}), &Thresholds::default()).is_empty());
    // A library that loaded is judged by the GPUs it lists (gpu_missing).
    let mut loaded = broken(&|d| d.health.expect_gpus = Some(4));
    loaded.backend = "nvml".into();
    let f = flags(&loaded, &Thresholds::default());
    assert_eq!(f.iter().map(|f| f.kind).collect::<Vec<_>>(), [FlagKind::GpuMissing]);
}

#[test]
fn an_ib_port_down_says_where_to_look() {
    let mut d = NodeDetector::default();
    let port = IbReading {
        state: Some("DOWN".into()),
        phys_state: Some("Polling".into()),
        ..Default::default()
    };
    for t in 0..4 {
        let s = NodeSample {
            time_ms: t * 1000,
            ib_ports: vec![port.clone()],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &Derived::default(), &[], &Thresholds::default());
    }
    let f = d.active().find(|f| f.kind == FlagKind::IbDown).expect("raised");
    assert_eq!(
        f.detail,
        "mlx5_0/1 DOWN (Polling: no link partner: cable or switch port)"
    );
    assert_eq!(f.action.name(), "check_link");
}
