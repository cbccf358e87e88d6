use prost::Message;

use super::super::Decoder;
use super::*;
use crate::pb::{GpuEvent, GpuProcess, HostSample, MigInstance, PodRef, RasCount, XidEvent};

/// A node with something in every field: two GPUs, two ports.
fn node() -> Sample {
    let gpu = |index: u32| GpuSample {
        index,
        util_pct: 90,
        mem_util_pct: 40,
        mem_used_bytes: 70 << 30,
        temp_c: 60,
        power_mw: 500_000,
        power_limit_mw: 700_000,
        sm_clock_mhz: 1900,
        mem_clock_mhz: 2600,
        throttle_reasons: 4,
        energy_mj: 1 << 40,
        hbm_temp_c: 65,
        pcie_tx_kbps: 1_000_000,
        pcie_rx_kbps: 2_000_000,
        pcie_replay_count: 3,
        ecc_corrected_volatile: 5,
        retired_pages: 1,
        nvlink_tx_kib: vec![1 << 45, 2 << 45],
        nvlink_rx_kib: vec![3 << 45, 4 << 45],
        processes: vec![GpuProcess {
            pid: 100 + index,
            used_mem_bytes: 60 << 30,
            job_id: 7,
            user: "alice".into(),
            command: "python train.py".into(),
        }],
        gpm: Some(Gpm {
            sm_active_cpct: 9000,
            sm_occupancy_cpct: 4000,
            tensor_active_cpct: 6000,
            dram_bw_cpct: 5000,
        }),
        mig: vec![MigInstance {
            gpu_instance_id: 1,
            profile: "3g.40gb".into(),
            ..Default::default()
        }],
        pcie_gen: 5,
        pcie_width: 16,
        fabric_state: 4,
        persistence: 2,
        pods: vec![PodRef {
            namespace: "ml".into(),
            pod: "p".into(),
            container: "c".into(),
            mig_uuid: String::new(),
        }],
        // AMD's: an edge sensor, ECC per RAS block, XGMI, throttle words.
        edge_temp_c: Some(45),
        ras: vec![
            RasCount {
                block: "UMC".into(),
                correctable: 3,
                ..Default::default()
            },
            RasCount {
                block: "GFX".into(),
                ..Default::default()
            },
        ],
        xgmi_error_status: Some(0),
        throttle_detail: vec!["ppt_pwr".into(), "PPT0".into()],
        xcc_gfx_busy_pct: vec![88, 90],
        ..Default::default()
    };
    let port = |port: u32| IbSample {
        port,
        state: "ACTIVE".into(),
        phys_state: "LinkUp".into(),
        rate_gbps: 400,
        tx_bytes: 1 << 44,
        rx_bytes: 2 << 44,
        tx_packets: 1 << 30,
        rx_packets: 2 << 30,
        errors: vec![0, 1, 2],
        errors_present_mask: 7,
    };
    Sample {
        seq: 10,
        time_ms: 1_700_000_000_000,
        host: Some(HostSample {
            cpu_permille: 500,
            mem_used_bytes: 1 << 39,
            mem_total_bytes: 2 << 40,
            load1_x100: 900,
            uptime_s: 1_000_000,
        }),
        gpus: vec![gpu(0), gpu(1)],
        ib_ports: vec![port(0), port(1)],
        ..Default::default()
    }
}

/// The sample after `base`: one second on, its counters moved.
fn next(base: &Sample) -> Sample {
    let mut s = base.clone();
    s.seq += 1;
    s.time_ms += 1000;
    for g in &mut s.gpus {
        g.energy_mj += 500_000;
        g.nvlink_tx_kib.iter_mut().for_each(|c| *c += 1 << 20);
        g.nvlink_rx_kib.iter_mut().for_each(|c| *c += 1 << 21);
    }
    for p in &mut s.ib_ports {
        (p.tx_bytes, p.rx_bytes) = (p.tx_bytes + (1 << 33), p.rx_bytes + (1 << 32));
    }
    s
}

/// The sample after `base`, one of those that carry no NVLink counters.
fn next_without_links(base: &Sample) -> Sample {
    let mut s = next(base);
    for g in &mut s.gpus {
        (g.nvlink_tx_kib, g.nvlink_rx_kib) = (vec![], vec![]);
    }
    s
}

/// Sends `base` whole then `cur` as a column delta; what the console makes of it.
fn round_trip(base: &Sample, cur: &Sample) -> (Sample, Sample) {
    let mut rx = Decoder::default();
    rx.decode(base.clone()).expect("whole");
    let wire = encode(Some(base), Some(base), cur);
    (wire.clone(), rx.decode(wire).expect("decodes").clone())
}

#[test]
fn a_steady_node_lists_nothing_and_every_field_outside_the_columns_travels_when_it_alone_changes() {
    let base = node();
    let steady = next(&base);
    let (wire, back) = round_trip(&base, &steady);
    assert!(wire.columns.is_some() && wire.gpus.is_empty() && wire.ib_ports.is_empty());
    assert_eq!(back, steady);

    type Gpu = fn(&mut GpuSample);
    let gpu_changes: [(&str, Gpu); 37] = [
        ("error", |g| g.error = "not_supported: temp".into()),
        ("memory used", |g| g.mem_used_bytes += 1),
        ("power limit", |g| g.power_limit_mw = 600_000),
        ("memory clock", |g| g.mem_clock_mhz = 1000),
        ("PCIe replays", |g| g.pcie_replay_count += 1),
        ("ECC corrected", |g| g.ecc_corrected_volatile += 1),
        ("ECC uncorrected", |g| g.ecc_uncorrected_volatile += 1),
        ("retired pages", |g| g.retired_pages += 1),
        ("remap pending", |g| g.remapped_rows_pending = 1),
        ("remap failed", |g| g.remapped_rows_failed = 1),
        ("rows remapped, correctable", |g| g.remapped_rows_correctable = 2),
        ("rows remapped, uncorrectable", |g| g.remapped_rows_uncorrectable = 2),
        ("an XID", |g| {
            g.xids.push(XidEvent {
                xid: 79,
                time_ms: 1,
                source: 0,
            })
        }),
        ("link down mask", |g| g.nvlink_down_mask = 2),
        ("link states", |g| g.nvlink_state = vec![1, 0]),
        ("a process's memory", |g| g.processes[0].used_mem_bytes += 1),
        ("another process", |g| {
            g.processes.push(GpuProcess {
                pid: 999,
                ..Default::default()
            })
        }),
        ("no process", |g| g.processes.clear()),
        ("readings absent", |g| g.absent = 1),
        ("MIG", |g| g.mig[0].mem_used_bytes = 5),
        ("PCIe generation", |g| g.pcie_gen = 1),
        ("PCIe width", |g| g.pcie_width = 8),
        ("fabric state", |g| g.fabric_state = 3),
        ("fabric status", |g| g.fabric_status = 9),
        ("persistence", |g| g.persistence = 1),
        ("pods", |g| g.pods[0].pod = "q".into()),
        ("edge temperature", |g| g.edge_temp_c = Some(46)),
        ("edge sensor gone", |g| g.edge_temp_c = None),
        ("an uncorrectable RAS error", |g| g.ras[0].uncorrectable += 1),
        ("no RAS counts", |g| g.ras.clear()),
        ("XGMI error", |g| g.xgmi_error_status = Some(1)),
        ("XGMI error status unread", |g| g.xgmi_error_status = None),
        ("throttle words", |g| g.throttle_detail = vec!["socket_thrm".into()]),
        ("a page retirement pending", |g| g.retired_pages_pending = 1),
        ("an XCC busier", |g| g.xcc_gfx_busy_pct[1] = 97),
        ("per-XCC busy unread", |g| g.xcc_gfx_busy_pct.clear()),
        ("an AMD event", |g| {
            g.events.push(GpuEvent {
                kind: "gpu_pre_reset".into(),
                time_ms: 5,
                text: "RAS: reset".into(),
            })
        }),
    ];
    for (what, change) in gpu_changes {
        let mut cur = steady.clone();
        change(&mut cur.gpus[1]);
        let (wire, back) = round_trip(&base, &cur);
        assert_eq!(back, cur, "{what}");
        if wire.columns.is_some() {
            let listed: Vec<u32> = wire.gpus.iter().map(|g| g.index).collect();
            assert_eq!(listed, [1], "{what}: the GPU that changed, alone");
        }
    }
    type Port = fn(&mut IbSample);
    let port_changes: [(&str, Port); 5] = [
        ("state", |p| p.state = "DOWN".into()),
        ("physical state", |p| p.phys_state = "Polling".into()),
        ("rate", |p| p.rate_gbps = 200),
        ("an error counter", |p| p.errors[1] += 1),
        ("counters readable", |p| p.errors_present_mask = 3),
    ];
    for (what, change) in port_changes {
        let mut cur = steady.clone();
        change(&mut cur.ib_ports[0]);
        let (wire, back) = round_trip(&base, &cur);
        assert_eq!(back, cur, "{what}");
        if wire.columns.is_some() {
            let listed: Vec<u32> = wire.ib_ports.iter().map(|p| p.port).collect();
            assert_eq!(listed, [0], "{what}");
        }
    }
}

#[test]
fn an_amd_event_travels_once_and_steady_amd_fields_list_no_gpu() {
    let mut base = node();
    base.gpus[0].events.push(GpuEvent {
        kind: "thermal_throttle".into(),
        time_ms: 1,
        text: "thermal throttling: junction 104 C".into(),
    });
    // The next sample: the event was the base's, not this one's.
    let mut cur = next(&base);
    cur.gpus[0].events.clear();
    let (wire, back) = round_trip(&base, &cur);
    assert!(
        wire.columns.is_some() && wire.gpus.is_empty(),
        "nothing but readings changed"
    );
    assert_eq!(back, cur);
    assert!(back.gpus[0].events.is_empty(), "an event is not repeated");
}

#[test]
fn readings_travel_in_columns_gpm_figures_come_and_go_and_packet_counters_stay_behind() {
    let base = node();
    let mut cur = next(&base);
    cur.gpus[0].temp_c = 99;
    cur.gpus[1].throttle_reasons = 0;
    cur.gpus[1].gpm = None;
    cur.gpus[0].util_pct = u32::MAX;
    cur.ib_ports[1].tx_packets += 1_000;
    let (wire, back) = round_trip(&base, &cur);
    assert!(
        wire.columns.is_some() && wire.gpus.is_empty(),
        "readings alone: nothing listed"
    );
    let mut want = cur.clone();
    want.ib_ports[1].tx_packets = base.ib_ports[1].tx_packets;
    assert_eq!(back, want, "lossless, but for the packet counters");
    // And GPM back on the GPU that had none.
    let (_, back) = round_trip(&cur, &next(&base));
    assert_eq!(back.gpus[1].gpm, base.gpus[1].gpm);
}

#[test]
fn nvlink_counters_travel_as_differences_from_the_last_that_carried_them() {
    let carried = node();
    let quiet = next_without_links(&carried);
    let again = next(&next(&carried));
    let mut rx = Decoder::default();
    rx.decode(carried.clone()).expect("whole");
    rx.decode(encode(Some(&carried), Some(&carried), &quiet))
        .expect("quiet");
    let wire = encode(Some(&quiet), Some(&carried), &again);
    let cols = wire.columns.as_ref().expect("columns");
    assert_eq!(cols.nvlink_since_seq, carried.seq);
    assert_eq!(cols.nvlink_tx_kib, [2 << 20; 4], "ten seconds' worth, not the counters");
    assert_eq!(rx.decode(wire.clone()).expect("decodes"), &again);
    // A console that holds other counters refuses rather than invents.
    let mut fresh = Decoder::default();
    fresh.decode(quiet.clone()).expect("whole");
    assert!(matches!(fresh.decode(wire), Err(BadDelta::Malformed { seq: 12, .. })));
    // A link more than the base had: whole counters.
    let mut more = again.clone();
    more.gpus[0].nvlink_tx_kib.push(5);
    more.gpus[0].nvlink_rx_kib.push(6);
    let wire = encode(Some(&quiet), Some(&carried), &more);
    assert_eq!(wire.columns.as_ref().map(|c| c.nvlink_since_seq), Some(0));
}

/// The base is held for a stream's whole life, one a node: between the
/// samples that carry NVLink counters it holds none (they are in
/// `links`), and its lists are as long as they are, not as prost grew
/// them.
#[test]
fn a_base_holds_no_room_it_does_not_use() {
    let carried = node();
    let quiet = next_without_links(&carried);
    // Received as prost decodes it: its lists grown one at a time.
    let mut rx = Decoder::default();
    let arrived = Sample::decode(carried.encode_to_vec().as_slice()).expect("protobuf");
    rx.decode(arrived).expect("whole");
    let room = |s: &Sample| {
        s.gpus
            .iter()
            .map(|g| {
                g.processes.capacity() - g.processes.len() + g.nvlink_state.capacity() - g.nvlink_state.len()
                    + g.pods.capacity()
                    - g.pods.len()
            })
            .sum::<usize>()
            + s.ib_ports
                .iter()
                .map(|p| p.errors.capacity() - p.errors.len())
                .sum::<usize>()
    };
    assert_eq!(room(rx.base().expect("base")), 0);
    let base = rx
        .decode(encode(Some(&carried), Some(&carried), &quiet))
        .expect("quiet");
    assert_eq!(base, &quiet);
    let links: usize = base
        .gpus
        .iter()
        .map(|g| g.nvlink_tx_kib.capacity() + g.nvlink_rx_kib.capacity())
        .sum();
    assert_eq!(links, 0, "no NVLink room kept between the samples that carry counters");
}

fn cols(s: &mut Sample) -> &mut Columns {
    s.columns.get_or_insert_default()
}

#[test]
fn a_malformed_column_delta_is_refused_by_name_and_a_wrong_base_by_seq() {
    let base = node();
    let good = encode(Some(&base), None, &next(&base));
    type Break = fn(&mut Sample);
    let breaks: [(&str, Break); 10] = [
        ("an unknown reading", |s| cols(s).readings |= 1 << 20),
        ("a value short", |s| {
            cols(s).values.pop();
        }),
        ("a value over", |s| cols(s).values.push(1)),
        ("a reading out of range", |s| {
            let c = cols(s);
            c.readings |= 1;
            c.values.splice(0..0, [u64::MAX, 1]);
        }),
        ("link counts", |s| cols(s).nvlink_links.push(1)),
        ("a link counter short", |s| {
            cols(s).nvlink_tx_kib.pop();
        }),
        ("port counters", |s| {
            cols(s).ib_bytes.pop();
        }),
        ("a GPU the base has not", |s| {
            s.gpus.push(GpuSample {
                index: 7,
                ..Default::default()
            })
        }),
        ("GPUs out of order", |s| {
            s.gpus = vec![
                GpuSample {
                    index: 1,
                    ..Default::default()
                },
                GpuSample::default(),
            ]
        }),
        ("columns in a whole sample", |s| s.delta_from_seq = 0),
    ];
    for (what, damage) in breaks {
        let mut bad = good.clone();
        damage(&mut bad);
        let mut rx = Decoder::default();
        rx.decode(base.clone()).expect("whole");
        assert!(
            matches!(rx.decode(bad), Err(BadDelta::Malformed { .. })),
            "{what}: refused as malformed"
        );
    }
    let mut rx = Decoder::default();
    rx.decode(next(&base)).expect("whole");
    assert_eq!(
        rx.decode(good).map(|s| s.seq),
        Err(BadDelta::OutOfSequence {
            seq: 11,
            base: 10,
            have: 11
        })
    );
}
