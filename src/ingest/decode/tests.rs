use super::sample::*;
use super::*;
use crate::model::sample::*;
use std::sync::Arc;

#[test]
fn an_sxids_kernel_log_text_is_escaped_once_decoded() {
    let s = pb::Sample {
        sxids: vec![pb::SxidEvent {
            sxid: 12028,
            text: "Non-fatal \u{202e}lortnoc \u{1b}[2J".into(),
            switch_pci: "0000:05:00.0\u{7}".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let d = sample(&s, 0);
    assert_eq!(d.sxids[0].text, "Non-fatal \\u{202e}lortnoc \\u{1b}[2J");
    assert_eq!(d.sxids[0].switch_pci, "0000:05:00.0\\u{7}");
}

#[test]
fn an_agents_description_and_errors_are_made_printable_once_decoded() {
    // A hostile agent (or a GPU's firmware) names its node, GPUs and
    // MIG profiles: none of it reaches the screen raw, and a name of a
    // megabyte is cut.
    let evil = "x\u{1b}]0;t\u{7}\u{202e}";
    let d = node_desc(pb::NodeInfo {
        hostname: format!("{evil}{}", "h".repeat(1 << 20)),
        driver_version: evil.into(),
        gpus: vec![pb::GpuInfo {
            model: evil.into(),
            uuid: evil.into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let escaped = "x\\u{1b}]0;t\\u{7}\\u{202e}";
    assert!(
        d.hostname.starts_with(escaped) && d.hostname.len() < 400,
        "{}",
        &d.hostname[..60]
    );
    assert_eq!(d.driver_version.as_deref(), Some(escaped));
    assert_eq!((d.gpus[0].model.as_str(), d.gpus[0].uuid.as_str()), (escaped, escaped));
    let s = sample(
        &pb::Sample {
            gpus: vec![pb::GpuSample {
                error: format!("nvml: {evil}"),
                mig: vec![pb::MigInstance {
                    profile: evil.into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
        0,
    );
    assert_eq!(s.gpus[0].error, Some(GpuError::Other(format!("nvml: {escaped}"))));
    let ok = sample(
        &pb::Sample {
            gpus: vec![pb::GpuSample {
                mig: vec![pb::MigInstance {
                    profile: evil.into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
        0,
    );
    assert_eq!(ok.gpus[0].mig[0].profile, escaped);
}

#[test]
fn a_second_stream_from_the_same_process_keeps_the_clock_skew() {
    // The agent's clock an hour ahead, measured from its description.
    let hour = 3_600_000;
    let mut first = Stream::default();
    first.info(
        pb::NodeInfo {
            agent_time_ms: hour + 1_000,
            ..Default::default()
        },
        1_000,
    );
    // The live stream that follows is not described again.
    let mut second = first.rejoining();
    let s = second
        .sample(
            pb::Sample {
                seq: 7,
                time_ms: hour + 2_000,
                ..Default::default()
            },
            2_000,
        )
        .expect("a whole sample");
    assert_eq!(s.time_ms, 2_000, "on the console's clock");
}

#[test]
fn a_description_holds_one_copy_of_each_nvlink_peer_and_no_spare_room() {
    use prost::Message;
    let switch = |l: u32| format!("00000000:{:02X}:00.0", 0xA0 + l % 4);
    let gpu = |index: u32| pb::GpuInfo {
        index,
        nvlinks: (0..18)
            .map(|l| pb::NvLinkInfo {
                link: l,
                // Link 17 of GPU 1 does not say what it connects to.
                peer_pci_bus_id: if index == 1 && l == 17 {
                    String::new()
                } else {
                    switch(l)
                },
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let info = pb::NodeInfo {
        gpus: vec![gpu(0), gpu(1)],
        ..Default::default()
    };
    // As it arrives: prost grows each list as it reads it (room for 32 links).
    let desc = node_desc(pb::NodeInfo::decode(info.encode_to_vec().as_slice()).expect("decodes"));
    let peer = |g: usize, l: usize| desc.gpus[g].nvlinks[l].peer_pci_bus_id.clone();
    assert_eq!(peer(0, 5).as_deref(), Some("00000000:A1:00.0"));
    assert_eq!(peer(1, 17), None, "unknown stays unknown");
    let (a, b) = (peer(0, 1).expect("named"), peer(1, 5).expect("named"));
    assert!(Arc::ptr_eq(&a, &b), "links to one switch share its name");
    assert!(
        !Arc::ptr_eq(&a, &peer(0, 2).expect("named")),
        "another switch, another name"
    );
    for g in &desc.gpus {
        assert_eq!(g.nvlinks.capacity(), g.nvlinks.len(), "GPU {}: no spare room", g.index);
    }
    assert_eq!(desc.gpus.capacity(), desc.gpus.len());
}

#[test]
fn pods_are_decoded_once_printable_and_kept_on_a_gpu_that_did_not_answer() {
    let p = |pod: &str, mig: &str| pb::PodRef {
        namespace: "ml".into(),
        pod: pod.into(),
        container: "c".into(),
        mig_uuid: mig.into(),
    };
    let g = pb::GpuSample {
        error: "gpu_lost".into(),
        pods: vec![p("b\x1b[2J", ""), p("a", "MIG-1")],
        ..Default::default()
    };
    let r = gpu_reading(&g, 0, &mut Default::default(), false);
    let got: Vec<(String, Option<String>)> = r.pods.iter().map(|x| (x.pod.clone(), x.mig_uuid.clone())).collect();
    assert_eq!(
        got,
        [("a".into(), Some("MIG-1".into())), ("b\\u{1b}[2J".into(), None)],
        "sorted, MIG instance kept, no escape sequence reaches the screen"
    );
}

#[test]
fn zero_means_unknown_only_where_the_wire_says_so() {
    let g = pb::GpuSample {
        util_pct: 0,
        hbm_temp_c: 0,
        power_limit_mw: 0,
        ..Default::default()
    };
    let r = gpu_reading(&g, 0, &mut Default::default(), false);
    assert_eq!(r.util_pct, Some(0), "0% busy is a reading");
    assert_eq!(r.hbm_temp_c, None);
    assert_eq!(r.power_limit_w, None);
    let lost = gpu_reading(
        &pb::GpuSample {
            error: "gpu_lost".into(),
            xids: vec![pb::XidEvent {
                xid: 79,
                time_ms: 5000,
                source: 0,
            }],
            ..Default::default()
        },
        1000,
        &mut Default::default(),
        false,
    );
    assert!(lost.is_lost());
    assert_eq!((lost.util_pct, lost.temp_c), (None, None));
    assert_eq!(lost.xids, [Xid { xid: 79, time_ms: 4000 }], "XIDs on the console clock");
}

#[test]
fn a_host_the_agent_could_not_read_is_absent_not_an_idle_empty_machine() {
    // An agent without /proc (a chroot, a sandbox) sent zeros for the host.
    let unread = pb::Sample {
        host: Some(pb::HostSample::default()),
        ..Default::default()
    };
    assert!(sample(&unread, 0).host.is_none());
    let read = pb::Sample {
        host: Some(pb::HostSample {
            mem_total_bytes: 1 << 40,
            uptime_s: 9,
            ..Default::default()
        }),
        ..Default::default()
    };
    let h = sample(&read, 0).host.expect("read");
    assert_eq!((h.mem_total_bytes, h.uptime_s, h.cpu_pct), (1 << 40, 9, 0.0));
}

#[test]
fn a_stuck_gpu_keeps_the_agents_words_and_how_long() {
    let stuck = |e: &str| {
        gpu_reading(
            &pb::GpuSample {
                error: e.into(),
                ..Default::default()
            },
            0,
            &mut Default::default(),
            false,
        )
        .error
    };
    let text = "nvml_stuck: nvmlDeviceGetPowerUsage: no answer for 2400 ms";
    assert_eq!(
        stuck(text),
        Some(GpuError::Stuck {
            text: text.into(),
            for_ms: 2400
        })
    );
    assert_eq!(
        stuck("nvml_stuck: something else"),
        Some(GpuError::Stuck {
            text: "nvml_stuck: something else".into(),
            for_ms: 0
        })
    );
}

#[test]
fn ib_counters_that_cannot_be_read_are_none() {
    let r = ib_reading(&pb::IbSample {
        errors: vec![3; fleetop_proto::ib::ERROR_COUNTERS.len()],
        errors_present_mask: 0b101,
        ..Default::default()
    });
    assert_eq!(&r.errors[..3], [Some(3), None, Some(3)]);
    assert_eq!((r.state, r.rate_gbps), (None, None));
}

/// Process names carried from one sample to the next are the same
/// names, shared; a name that changed, a new process on a known pid and
/// a name that needs escaping are each what the sample says.
#[test]
fn process_names_are_shared_while_they_last_and_never_stale() {
    let mut st = Stream::default();
    let proc_ = |pid, user: &str, command: &str| pb::GpuProcess {
        pid,
        user: user.into(),
        command: command.into(),
        ..Default::default()
    };
    let s = |seq, procs: Vec<pb::GpuProcess>| pb::Sample {
        seq,
        gpus: vec![pb::GpuSample {
            processes: procs,
            ..Default::default()
        }],
        ..Default::default()
    };
    let names = |x: &NodeSample| -> Vec<(Option<String>, Option<String>)> {
        x.gpus[0]
            .processes
            .iter()
            .map(|p| {
                (
                    p.owner.as_deref().map(str::to_string),
                    p.command.as_deref().map(str::to_string),
                )
            })
            .collect()
    };
    let pair = |o: &str, c: &str| (Some(o.to_string()), Some(c.to_string()));
    let a = st
        .sample(
            s(
                1,
                vec![proc_(7, "alice", "python train.py"), proc_(8, "bob", "evil\x1b[2J")],
            ),
            0,
        )
        .expect("whole");
    let b = st
        .sample(
            s(
                2,
                vec![proc_(7, "alice", "python train.py"), proc_(8, "bob", "evil\x1b[2J")],
            ),
            0,
        )
        .expect("whole");
    assert_eq!(
        names(&b),
        [pair("alice", "python train.py"), pair("bob", "evil\\u{1b}[2J")]
    );
    assert_eq!(names(&a), names(&b));
    let (pa, pb_) = (&a.gpus[0].processes[0], &b.gpus[0].processes[0]);
    assert!(
        Arc::ptr_eq(
            pa.command.as_ref().expect("a command"),
            pb_.command.as_ref().expect("a command")
        ),
        "shared"
    );
    // pid 7 is now another process; pid 8 is gone and comes back.
    let c = st.sample(s(3, vec![proc_(7, "carol", "./bench")]), 0).expect("whole");
    assert_eq!(names(&c), [pair("carol", "./bench")]);
    // A list as it was is the last sample's list itself.
    let same = st.sample(s(3, vec![proc_(7, "carol", "./bench")]), 0).expect("whole");
    assert!(Arc::ptr_eq(&c.gpus[0].processes, &same.gpus[0].processes));
    // The memory a process holds moves: its new figure, in a new list
    // (the last sample's stays as it was), the names still shared.
    let mut more = proc_(7, "carol", "./bench");
    more.used_mem_bytes = 5 << 30;
    let moved = st.sample(s(3, vec![more]), 0).expect("whole");
    let (now, was) = (&moved.gpus[0].processes[0], &c.gpus[0].processes[0]);
    assert_eq!((now.used_mem_bytes, was.used_mem_bytes), (5 << 30, 0));
    assert!(Arc::ptr_eq(
        now.command.as_ref().expect("a command"),
        was.command.as_ref().expect("a command")
    ));
    let d = st
        .sample(
            s(4, vec![proc_(7, "carol", "./bench"), proc_(8, "bob", "evil\x1b[2J")]),
            0,
        )
        .expect("whole");
    assert_eq!(names(&d), [pair("carol", "./bench"), pair("bob", "evil\\u{1b}[2J")]);
    // A name that reads as the escaped form of the last one (backslash
    // is printable) prints as itself, as it would without the last.
    let e = st
        .sample(s(5, vec![proc_(8, "bob", "evil\\u{1b}[2J")]), 0)
        .expect("whole");
    assert_eq!(names(&e), [pair("bob", "evil\\u{1b}[2J")]);
    assert_eq!(
        names(&e),
        names(&sample(&s(5, vec![proc_(8, "bob", "evil\\u{1b}[2J")]), 0))
    );
}

/// Where the wire says a GPU's processes did not change, the console
/// takes its last list without looking; every sample still shows the
/// processes the agent had, through a name changed on the same pid and
/// a sample in which the GPU did not answer, in plain and column deltas.
#[test]
fn processes_the_wire_says_are_unchanged_are_the_agents_in_every_sample() {
    use fleetop_proto::wire;
    let proc_ = |pid, command: &str| pb::GpuProcess {
        pid,
        used_mem_bytes: 1 << 30,
        user: "alice".into(),
        command: command.into(),
        ..Default::default()
    };
    let gpu = |error: &str, procs: Vec<pb::GpuProcess>| pb::GpuSample {
        error: error.into(),
        processes: procs,
        util_pct: 90,
        ..Default::default()
    };
    // What the agent had, sample by sample: GPU 0 changes, GPU 1 stays.
    let train = || vec![proc_(7, "python train.py")];
    let eval = || vec![proc_(7, "python eval.py")];
    let timeline = [
        (train(), ""),
        (train(), ""),
        (eval(), ""),
        (eval(), ""),
        (vec![proc_(9, "python serve.py")], "gpu_lost"),
        (vec![proc_(9, "python serve.py")], ""),
        (vec![proc_(9, "python serve.py")], ""),
        (train(), ""),
    ];
    let commands = |x: &NodeSample, i: usize| -> Vec<String> {
        x.gpus[i]
            .processes
            .iter()
            .map(|p| p.command.as_deref().unwrap_or("").to_string())
            .collect()
    };
    for columns in [false, true] {
        let (mut st, mut prev) = (Stream::default(), None::<pb::Sample>);
        let mut kept = 0;
        for (seq, (procs, error)) in (1..).zip(timeline.clone()) {
            let cur = pb::Sample {
                seq,
                time_ms: 1000 * seq as i64,
                gpus: vec![gpu(error, procs.clone()), gpu("", train())],
                ..Default::default()
            };
            let sent = match columns {
                true => wire::encode_columns(prev.as_ref(), None, &cur),
                false => wire::encode(prev.as_ref(), &cur),
            };
            let got = st.sample(sent, 0).expect("decodes");
            kept += st.wire.processes_kept().iter().filter(|k| **k).count();
            let want = match error {
                "" => procs.iter().map(|p| p.command.clone()).collect(),
                _ => vec![],
            };
            assert_eq!(commands(&got, 0), want, "sample {seq}, columns {columns}");
            assert_eq!(commands(&got, 1), ["python train.py"], "sample {seq}");
            prev = Some(cur);
        }
        // Else the case this is about was never on the wire.
        assert!(kept >= 6, "lists said unchanged: {kept}, columns {columns}");
    }
}

#[test]
fn agent_time_becomes_console_time_and_follows_a_clock_step() {
    let mut st = Stream::default();
    // The agent's clock is 90 s ahead.
    let desc = st.info(
        pb::NodeInfo {
            agent_time_ms: 190_000,
            ..Default::default()
        },
        100_000,
    );
    assert_eq!(desc.interval_ms, 1000, "no interval means the default, never 0");
    let s = |seq, t| pb::Sample {
        seq,
        time_ms: t,
        ..Default::default()
    };
    assert_eq!(st.sample(s(1, 189_000), 100_000).map(|x| x.time_ms), Ok(99_000));
    st.caught_up();
    assert_eq!(st.sample(s(2, 191_000), 101_000).map(|x| x.time_ms), Ok(101_000));
    // The agent's clock steps back by 90 s: the sample is still "now".
    assert_eq!(st.sample(s(3, 102_000), 102_000).map(|x| x.time_ms), Ok(102_000));
    assert_eq!(st.sample(s(4, 103_000), 103_000).map(|x| x.time_ms), Ok(103_000));
}

/// An agent before AMD sends no vendor: NVIDIA, with none of AMD's fields;
/// an AMD GPU's description and readings decode once, absent as `None`.
#[test]
fn amds_fields_decode_once_and_an_empty_vendor_is_nvidias() {
    let d = node_desc(pb::NodeInfo {
        gpus: vec![
            pb::GpuInfo::default(),
            pb::GpuInfo {
                index: 1,
                pci_bus_id: "0000:26:00.3".into(),
                vendor: "AMD".into(),
                compute_partition: "CPX".into(),
                memory_partition: "NPS4".into(),
                partition_id: 3,
                hbm_slowdown_temp_c: 95,
                board_part_number: "102-G30211-0C".into(),
                serial_number: "692351000\u{1b}7".into(),
                firmware: vec![pb::Firmware {
                    name: "PM".into(),
                    version: "00.85.107.00".into(),
                }],
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    let (nv, amd) = (&d.gpus[0], &d.gpus[1]);
    assert_eq!(
        (nv.vendor, nv.partition.as_ref(), nv.hbm_slowdown_temp_c),
        (Vendor::Nvidia, None, None)
    );
    assert_eq!(amd.vendor, Vendor::Amd);
    assert_eq!(
        amd.partition.as_ref().map(Partition::words).as_deref(),
        Some("CPX/NPS4 partition 3")
    );
    assert_eq!((amd.physical_id(), amd.hbm_slowdown_temp_c), ("0000:26:00", Some(95)));
    assert_eq!(amd.firmware[0].version, "00.85.107.00");
    // The board's part number as sent; its serial made printable.
    assert_eq!(amd.board_part_number.as_deref(), Some("102-G30211-0C"));
    assert!(amd.serial_number.as_deref().is_some_and(|s| !s.contains('\u{1b}')));
    assert_eq!((nv.serial_number.as_ref(), nv.board_part_number.as_ref()), (None, None));
    let g = |g: pb::GpuSample| {
        sample(
            &pb::Sample {
                gpus: vec![g],
                ..Default::default()
            },
            1000,
        )
        .gpus
        .remove(0)
    };
    let nv = g(pb::GpuSample::default());
    assert_eq!(
        (nv.edge_temp_c, nv.xgmi_error_status, nv.retired_pages_pending),
        (None, None, None)
    );
    assert!(nv.ras.is_empty() && nv.events.is_empty() && !nv.links_unknown);
    let amd = g(pb::GpuSample {
        edge_temp_c: Some(41),
        xgmi_error_status: Some(1),
        retired_pages_pending: 2,
        throttle_detail: vec!["socket_thrm".into()],
        absent: fleetop_proto::absent::REMAPPED_ROWS | fleetop_proto::absent::LINKS,
        ras: vec![pb::RasCount {
            block: "UMC".into(),
            uncorrectable: 1,
            ..Default::default()
        }],
        events: vec![pb::GpuEvent {
            kind: "gpu_post_reset".into(),
            time_ms: 5000,
            text: "reset".into(),
        }],
        ..Default::default()
    });
    assert_eq!(
        (amd.edge_temp_c, amd.xgmi_error_status, amd.retired_pages_pending),
        (Some(41), Some(1), Some(2))
    );
    assert!(
        matches!(amd.throttle_detail[0], std::borrow::Cow::Borrowed("socket_thrm")),
        "a known word is not copied"
    );
    assert_eq!((amd.ras[0].block.as_ref(), amd.ras[0].uncorrectable), ("UMC", 1));
    assert_eq!(
        (amd.events[0].kind.as_ref(), amd.events[0].time_ms),
        ("gpu_post_reset", 4000),
        "on the console's clock"
    );
    assert!(
        amd.links_unknown && amd.nvlink_up(0).is_none(),
        "link states not read are unknown"
    );
    // A lost GPU's events still count, as its XIDs do.
    let lost = g(pb::GpuSample {
        error: "gpu_lost".into(),
        events: vec![pb::GpuEvent {
            kind: "gpu_pre_reset".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    assert_eq!(lost.events.len(), 1);
}
