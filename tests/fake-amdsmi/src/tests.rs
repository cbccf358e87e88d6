//! The fake through its C entry points, called directly (the library's
//! state is one per process: each test takes `LOCK` and starts it afresh).

use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::Mutex;

use super::*;

static LOCK: Mutex<()> = Mutex::new(());

fn profiles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles")
}

/// Starts the fake on a profile with its clock frozen at `t` seconds.
fn at(profile: &str, t: f64) -> MutexGuard<'static, ()> {
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    *state() = None;
    assert_eq!(
        start(&profiles().join(profile), Some(t), AMDSMI_INIT_AMD_GPUS),
        OK,
        "{profile}"
    );
    guard
}

fn sockets() -> Vec<amdsmi_socket_handle> {
    let mut n = 0u32;
    assert_eq!(amdsmi_get_socket_handles(&mut n, null_mut()), OK);
    let mut v = vec![null_mut(); n as usize];
    assert_eq!(amdsmi_get_socket_handles(&mut n, v.as_mut_ptr()), OK);
    v
}

/// Every processor, in amd-smi's order.
fn gpus() -> Vec<amdsmi_processor_handle> {
    let mut out = Vec::new();
    for s in sockets() {
        let mut n = 0u32;
        assert_eq!(amdsmi_get_processor_handles(s, &mut n, null_mut()), OK);
        let mut v = vec![null_mut(); n as usize];
        assert_eq!(amdsmi_get_processor_handles(s, &mut n, v.as_mut_ptr()), OK);
        out.extend(v);
    }
    out
}

fn all_profiles(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("profiles dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            all_profiles(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

#[test]
fn every_profile_parses() {
    let mut files = Vec::new();
    all_profiles(&profiles(), &mut files);
    assert!(files.len() >= 6, "{files:?}");
    for f in files {
        let p = profile::load(&f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.gpus.len(), p.count as usize, "{}", f.display());
    }
}

#[test]
fn the_default_node() {
    let _g = at("mi300x-oam.toml", 20.0);
    let h = gpus();
    assert_eq!(h.len(), 8);
    let mut asic = amdsmi_asic_info_t::zeroed();
    assert_eq!(amdsmi_get_gpu_asic_info(h[0], &mut asic), OK);
    assert_eq!(c_str(&asic.market_name), "AMD Instinct MI300X");
    assert_eq!(asic.num_of_compute_units, 304);
    let mut total = 0u64;
    assert_eq!(amdsmi_get_gpu_memory_total(h[0], AMDSMI_MEM_TYPE_VRAM, &mut total), OK);
    assert_eq!(total, 205_822_885_888);
    let mut bdf = amdsmi_bdf_t::default();
    assert_eq!(amdsmi_get_gpu_device_bdf(h[5], &mut bdf), OK);
    assert_eq!(bdf.to_bus_id(), "0000:a6:00.0");
    // No edge sensor; a junction one.
    let mut t = 0i64;
    assert_eq!(
        amdsmi_get_temp_metric(h[0], AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CURRENT, &mut t),
        NOT_SUPPORTED
    );
    assert_eq!(
        amdsmi_get_temp_metric(h[0], AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CRITICAL, &mut t),
        OK
    );
    assert_eq!(t, 100);
    // A full XGMI mesh: 7 peers, the 8th link disabled.
    let mut ls = amdsmi_xgmi_link_status_t::zeroed();
    assert_eq!(amdsmi_get_gpu_xgmi_link_status(h[3], &mut ls), OK);
    assert_eq!(ls.total_links, 8);
    assert_eq!(ls.status[..7], [AMDSMI_XGMI_LINK_UP; 7]);
    assert_eq!(ls.status[7], AMDSMI_XGMI_LINK_DISABLE);
    let mut lm = amdsmi_link_metrics_t::zeroed();
    assert_eq!(amdsmi_get_link_metrics(h[3], &mut lm), OK);
    assert_eq!(lm.num_links, 7);
    let peers: Vec<String> = lm.links[..7].iter().map(|l| l.bdf.to_bus_id()).collect();
    assert!(!peers.contains(&"0000:65:00.0".to_string()), "{peers:?}");
    let mut cap = amdsmi_power_cap_info_t::zeroed();
    assert_eq!(amdsmi_get_power_cap_info(h[0], 0, &mut cap), OK);
    assert_eq!(cap.power_cap, 750_000_000);
    // Two processes on GPU 6, none on GPU 7.
    let mut n = AMDSMI_MAX_NUM_PROCESSES as u32;
    let mut list = vec![amdsmi_proc_info_t::zeroed(); n as usize];
    assert_eq!(amdsmi_get_gpu_process_list(h[6], &mut n, list.as_mut_ptr()), OK);
    assert_eq!(n, 2);
    assert_eq!(list[1].memory_usage.vram_mem, 64_000_000_000);
    let mut n = 4u32;
    assert_eq!(amdsmi_get_gpu_process_list(h[7], &mut n, list.as_mut_ptr()), OK);
    assert_eq!(n, 0);
    // One room for two: the one written, and OUT_OF_RESOURCES.
    let mut n = 1u32;
    assert_eq!(
        amdsmi_get_gpu_process_list(h[6], &mut n, list.as_mut_ptr()),
        AMDSMI_STATUS_OUT_OF_RESOURCES
    );
    assert_eq!(n, 1);
    let mut buf = [0 as c_char; 8];
    assert_eq!(amdsmi_get_gpu_compute_partition(h[0], buf.as_mut_ptr(), 8), OK);
    assert_eq!(c_str(&buf), "SPX");
    assert_eq!(
        amdsmi_get_gpu_memory_partition(h[0], buf.as_mut_ptr(), 4),
        AMDSMI_STATUS_INSUFFICIENT_SIZE
    );
    // The board: its part number, and a serial of its own per GPU.
    let board = |g: amdsmi_processor_handle| {
        let mut b = amdsmi_board_info_t::zeroed();
        assert_eq!(amdsmi_get_gpu_board_info(g, &mut b), OK);
        (c_str(&b.model_number), c_str(&b.product_serial))
    };
    let (part, serial0) = board(h[0]);
    assert_eq!(part, "102-G30211-0C");
    assert_eq!(serial0.len(), 16);
    assert_ne!(board(h[1]).1, serial0);
    // GFX busy per XCC: 8 of them, differing, their mean the activity.
    let mut m = amdsmi_gpu_metrics_t::zeroed();
    assert_eq!(amdsmi_get_gpu_metrics_info(h[2], &mut m), OK);
    let mut u = amdsmi_engine_usage_t::zeroed();
    assert_eq!(amdsmi_get_gpu_activity(h[2], &mut u), OK);
    let busy = m.xcp_stats[0].gfx_busy_inst;
    assert_eq!(m.num_partition, 1);
    assert!(busy.iter().all(|&v| v <= 100) && busy[0] != busy[1], "{busy:?}");
    assert_eq!(busy.iter().sum::<u32>(), 8 * u.gfx_activity);
    assert_eq!(m.xcp_stats[1].gfx_busy_inst, [u32::MAX; AMDSMI_MAX_NUM_XCC]);
}

#[test]
fn values_move_and_repeat() {
    let read = |t: f64| {
        let _g = at("mi300x-oam.toml", t);
        let h = gpus();
        let mut u = amdsmi_engine_usage_t::zeroed();
        assert_eq!(amdsmi_get_gpu_activity(h[0], &mut u), OK);
        let mut p = amdsmi_power_info_t::zeroed();
        assert_eq!(amdsmi_get_power_info(h[0], &mut p), OK);
        (u.gfx_activity, p.current_socket_power)
    };
    assert_eq!(read(7.0), read(7.0));
    assert_ne!(read(7.0), read(22.0));
}

#[test]
fn cpx_partitions_are_processors() {
    let _g = at("mi300x-cpx-nps4.toml", 20.0);
    assert_eq!(sockets().len(), 8);
    let h = gpus();
    assert_eq!(h.len(), 64);
    for (i, &p) in h.iter().enumerate() {
        let mut bdf = amdsmi_bdf_t::default();
        assert_eq!(amdsmi_get_gpu_device_bdf(p, &mut bdf), OK);
        assert_eq!(bdf.function_number() as usize, i % 8);
        let mut kfd = amdsmi_kfd_info_t::zeroed();
        assert_eq!(amdsmi_get_gpu_kfd_info(p, &mut kfd), OK);
        assert_eq!(kfd.current_partition_id as usize, i % 8);
    }
    let mut total = 0u64;
    assert_eq!(amdsmi_get_gpu_memory_total(h[9], AMDSMI_MEM_TYPE_VRAM, &mut total), OK);
    assert_eq!(total, 205_822_885_888 / 8);
    let mut asic = amdsmi_asic_info_t::zeroed();
    assert_eq!(amdsmi_get_gpu_asic_info(h[9], &mut asic), OK);
    assert_eq!(asic.num_of_compute_units, 38);
    let mut buf = [0 as c_char; 16];
    assert_eq!(amdsmi_get_gpu_memory_partition(h[9], buf.as_mut_ptr(), 16), OK);
    assert_eq!(c_str(&buf), "NPS4");
    // One XCC a partition, each its partition's activity.
    let mut m = amdsmi_gpu_metrics_t::zeroed();
    assert_eq!(amdsmi_get_gpu_metrics_info(h[9], &mut m), OK);
    assert_eq!(m.num_partition, 8);
    for q in 0..8 {
        let mut u = amdsmi_engine_usage_t::zeroed();
        assert_eq!(amdsmi_get_gpu_activity(h[8 + q], &mut u), OK);
        assert_eq!(m.xcp_stats[q].gfx_busy_inst[..2], [u.gfx_activity, u32::MAX]);
    }
    // Partition 6 of each GPU idles; GPU 6 runs two partitions only.
    let mut n = 8u32;
    let mut list = vec![amdsmi_proc_info_t::zeroed(); 8];
    assert_eq!(amdsmi_get_gpu_process_list(h[6], &mut n, list.as_mut_ptr()), OK);
    assert_eq!(n, 0);
    let mut n = 8u32;
    assert_eq!(amdsmi_get_gpu_process_list(h[6 * 8 + 3], &mut n, list.as_mut_ptr()), OK);
    assert_eq!((n, list[0].pid), (1, 62203));
    // Partitions of one GPU: no link between them; other GPUs: XGMI.
    let (mut hops, mut kind) = (9u64, 9u32);
    assert_eq!(amdsmi_topo_get_link_type(h[0], h[1], &mut hops, &mut kind), OK);
    assert_eq!((hops, kind), (0, AMDSMI_LINK_TYPE_INTERNAL));
    assert_eq!(amdsmi_topo_get_link_type(h[0], h[8], &mut hops, &mut kind), OK);
    assert_eq!((hops, kind), (1, AMDSMI_LINK_TYPE_XGMI));
}

/// Reads the events due now on every processor.
fn events() -> Vec<(amdsmi_processor_handle, u32, String)> {
    let h = gpus();
    for &p in &h {
        assert_eq!(amdsmi_init_gpu_event_notification(p), OK);
        assert_eq!(amdsmi_set_gpu_event_notification_mask(p, u64::MAX), OK);
    }
    let mut n = 16u32;
    let mut data = vec![amdsmi_evt_notification_data_t::zeroed(); 16];
    let r = amdsmi_get_gpu_event_notification(0, &mut n, data.as_mut_ptr());
    assert!(r == OK || r == AMDSMI_STATUS_NO_DATA, "{r}");
    // Delivered once: a second read has none.
    let mut m = 16u32;
    assert_eq!(
        amdsmi_get_gpu_event_notification(0, &mut m, data[8..].as_mut_ptr()),
        AMDSMI_STATUS_NO_DATA
    );
    for &p in &h {
        assert_eq!(amdsmi_stop_gpu_event_notification(p), OK);
    }
    data[..n as usize]
        .iter()
        .map(|d| (d.processor_handle, d.event, c_str(&d.message)))
        .collect()
}

#[test]
fn ras_error_shows_at_its_time() {
    let umc = |t: f64| {
        let _g = at("faults/ras-uncorrectable.toml", t);
        let h = gpus();
        let mut ec = amdsmi_error_count_t::zeroed();
        assert_eq!(amdsmi_get_gpu_ecc_count(h[3], AMDSMI_GPU_BLOCK_UMC, &mut ec), OK);
        let mut total = amdsmi_error_count_t::zeroed();
        assert_eq!(amdsmi_get_gpu_total_ecc_count(h[3], &mut total), OK);
        let mut pages = 0u32;
        assert_eq!(amdsmi_get_gpu_bad_page_info(h[3], &mut pages, null_mut()), OK);
        let mut state = 0u32;
        assert_eq!(amdsmi_get_gpu_ecc_status(h[3], AMDSMI_GPU_BLOCK_UMC, &mut state), OK);
        let ev: Vec<u32> = events().into_iter().filter(|e| e.0 == h[3]).map(|e| e.1).collect();
        (ec.uncorrectable_count, total.uncorrectable_count, pages, state, ev)
    };
    assert_eq!(umc(9.5), (0, 0, 0, AMDSMI_RAS_ERR_STATE_ENABLED, vec![]));
    assert_eq!(
        umc(10.0),
        (
            1,
            1,
            1,
            AMDSMI_RAS_ERR_STATE_MULT_UC,
            vec![AMDSMI_EVT_NOTIF_GPU_PRE_RESET]
        )
    );
    assert_eq!(
        umc(11.0).4,
        vec![AMDSMI_EVT_NOTIF_GPU_PRE_RESET, AMDSMI_EVT_NOTIF_GPU_POST_RESET]
    );
}

#[test]
fn xgmi_link_down_shows_at_its_time() {
    let link = |t: f64| {
        let _g = at("faults/xgmi-link-down.toml", t);
        let h = gpus();
        let (mut a, mut b) = (amdsmi_xgmi_link_status_t::zeroed(), amdsmi_xgmi_link_status_t::zeroed());
        assert_eq!(amdsmi_get_gpu_xgmi_link_status(h[1], &mut a), OK);
        assert_eq!(amdsmi_get_gpu_xgmi_link_status(h[4], &mut b), OK);
        let mut err = 9u32;
        assert_eq!(amdsmi_gpu_xgmi_error_status(h[4], &mut err), OK);
        // GPU 1's link 3 goes to GPU 4; GPU 4's link 1 to GPU 1.
        (a.status[3], b.status[1], a.status[2], err)
    };
    assert_eq!(
        link(7.9),
        (AMDSMI_XGMI_LINK_UP, AMDSMI_XGMI_LINK_UP, AMDSMI_XGMI_LINK_UP, 0)
    );
    assert_eq!(
        link(8.0),
        (AMDSMI_XGMI_LINK_DOWN, AMDSMI_XGMI_LINK_DOWN, AMDSMI_XGMI_LINK_UP, 1)
    );
    // Its counters stop.
    let kb = |t: f64| {
        let _g = at("faults/xgmi-link-down.toml", t);
        let mut m = amdsmi_link_metrics_t::zeroed();
        assert_eq!(amdsmi_get_link_metrics(gpus()[1], &mut m), OK);
        (m.links[3].write, m.links[2].write)
    };
    let (a, b) = (kb(20.0), kb(30.0));
    assert_eq!(a.0, b.0);
    assert!(b.1 > a.1);
}

#[test]
fn thermal_throttle_shows_at_its_time() {
    let hot = |t: f64| {
        let _g = at("faults/thermal-throttle.toml", t);
        let h = gpus();
        let mut temp = 0i64;
        assert_eq!(
            amdsmi_get_temp_metric(h[5], AMDSMI_TEMPERATURE_TYPE_JUNCTION, AMDSMI_TEMP_CURRENT, &mut temp),
            OK
        );
        let mut clk = amdsmi_clk_info_t::zeroed();
        assert_eq!(amdsmi_get_clock_info(h[5], AMDSMI_CLK_TYPE_GFX, &mut clk), OK);
        let mut v = amdsmi_violation_status_t::zeroed();
        assert_eq!(amdsmi_get_violation_status(h[5], &mut v), OK);
        let mut m = amdsmi_gpu_metrics_t::zeroed();
        assert_eq!(amdsmi_get_gpu_metrics_info(h[5], &mut m), OK);
        let ev = events().iter().any(|e| e.1 == AMDSMI_EVT_NOTIF_THERMAL_THROTTLE);
        (
            temp,
            clk.clk,
            v.active_socket_thrm,
            m.indep_throttle_status >> throttler::TEMP_HOTSPOT & 1,
            ev,
        )
    };
    let before = hot(4.9);
    assert!(before.0 < 100, "{before:?}");
    assert_eq!((before.1, before.2, before.3, before.4), (2100, 0, 0, false));
    assert_eq!(hot(5.0), (104, 1350, 1, 1, true));
    let _g = at("faults/thermal-throttle.toml", 15.0);
    let mut v = amdsmi_violation_status_t::zeroed();
    assert_eq!(amdsmi_get_violation_status(gpus()[5], &mut v), OK);
    assert_eq!((v.acc_socket_thrm, v.per_socket_thrm), (10_000, 100));
}

#[test]
fn lost_gpu_stops_answering_at_its_time() {
    let read = |t: f64| {
        let _g = at("faults/gpu-lost.toml", t);
        let h = gpus();
        let mut asic = amdsmi_asic_info_t::zeroed();
        let mut bdf = amdsmi_bdf_t::default();
        let mut u = amdsmi_engine_usage_t::zeroed();
        (
            amdsmi_get_gpu_asic_info(h[6], &mut asic),
            amdsmi_get_gpu_activity(h[6], &mut u),
            amdsmi_get_gpu_device_bdf(h[6], &mut bdf),
            amdsmi_get_gpu_activity(h[5], &mut u),
        )
    };
    assert_eq!(read(11.9), (OK, OK, OK, OK));
    assert_eq!(read(12.0), (AMDSMI_STATUS_NOT_FOUND, AMDSMI_STATUS_NOT_FOUND, OK, OK));
}

#[test]
fn null_pointers_and_bad_handles_are_inval() {
    let _g = at("mi300x-oam.toml", 1.0);
    let h = gpus()[0];
    let bad = 0x1234 as amdsmi_processor_handle;
    let checks: Vec<(&str, amdsmi_status_t)> = vec![
        ("socket_handles", amdsmi_get_socket_handles(null_mut(), null_mut())),
        (
            "processor_handles",
            amdsmi_get_processor_handles(sockets()[0], null_mut(), null_mut()),
        ),
        (
            "processor_handles bad socket",
            amdsmi_get_processor_handles(null_mut(), &mut 0, null_mut()),
        ),
        ("status string", amdsmi_status_code_to_string(0, null_mut())),
        ("lib version", amdsmi_get_lib_version(null_mut())),
        ("socket info", amdsmi_get_socket_info(sockets()[0], 16, null_mut())),
        ("processor type", amdsmi_get_processor_type(h, null_mut())),
        ("asic", amdsmi_get_gpu_asic_info(h, null_mut())),
        ("board", amdsmi_get_gpu_board_info(h, null_mut())),
        ("uuid len", amdsmi_get_gpu_device_uuid(h, null_mut(), null_mut())),
        ("uuid buf", amdsmi_get_gpu_device_uuid(h, &mut 38, null_mut())),
        ("bdf", amdsmi_get_gpu_device_bdf(h, null_mut())),
        ("driver", amdsmi_get_gpu_driver_info(h, null_mut())),
        ("vbios", amdsmi_get_gpu_vbios_info(h, null_mut())),
        ("fw", amdsmi_get_fw_info(h, null_mut())),
        ("kfd", amdsmi_get_gpu_kfd_info(h, null_mut())),
        ("enumeration", amdsmi_get_gpu_enumeration_info(h, null_mut())),
        ("activity", amdsmi_get_gpu_activity(h, null_mut())),
        (
            "memory total",
            amdsmi_get_gpu_memory_total(h, AMDSMI_MEM_TYPE_VRAM, null_mut()),
        ),
        (
            "memory usage",
            amdsmi_get_gpu_memory_usage(h, AMDSMI_MEM_TYPE_VRAM, null_mut()),
        ),
        ("vram usage", amdsmi_get_gpu_vram_usage(h, null_mut())),
        ("vram info", amdsmi_get_gpu_vram_info(h, null_mut())),
        (
            "temp",
            amdsmi_get_temp_metric(h, AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CURRENT, null_mut()),
        ),
        (
            "temp unsupported",
            amdsmi_get_temp_metric(h, AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CURRENT, null_mut()),
        ),
        ("power", amdsmi_get_power_info(h, null_mut())),
        ("power cap", amdsmi_get_power_cap_info(h, 0, null_mut())),
        ("energy", amdsmi_get_energy_count(h, null_mut(), null_mut(), null_mut())),
        ("clock", amdsmi_get_clock_info(h, AMDSMI_CLK_TYPE_GFX, null_mut())),
        ("metrics", amdsmi_get_gpu_metrics_info(h, null_mut())),
        ("violation", amdsmi_get_violation_status(h, null_mut())),
        (
            "ecc count",
            amdsmi_get_gpu_ecc_count(h, AMDSMI_GPU_BLOCK_UMC, null_mut()),
        ),
        (
            "ecc bad block",
            amdsmi_get_gpu_ecc_count(h, 3, &mut amdsmi_error_count_t::zeroed()),
        ),
        ("ecc total", amdsmi_get_gpu_total_ecc_count(h, null_mut())),
        ("ecc enabled", amdsmi_get_gpu_ecc_enabled(h, null_mut())),
        (
            "ecc status",
            amdsmi_get_gpu_ecc_status(h, AMDSMI_GPU_BLOCK_UMC, null_mut()),
        ),
        ("bad pages", amdsmi_get_gpu_bad_page_info(h, null_mut(), null_mut())),
        ("pcie", amdsmi_get_pcie_info(h, null_mut())),
        ("replay", amdsmi_get_gpu_pci_replay_counter(h, null_mut())),
        ("link metrics", amdsmi_get_link_metrics(h, null_mut())),
        ("xgmi link status", amdsmi_get_gpu_xgmi_link_status(h, null_mut())),
        ("xgmi info", amdsmi_get_xgmi_info(h, null_mut())),
        ("xgmi error", amdsmi_gpu_xgmi_error_status(h, null_mut())),
        ("link type", amdsmi_topo_get_link_type(h, h, null_mut(), null_mut())),
        ("link type bad dst", amdsmi_topo_get_link_type(h, bad, &mut 0, &mut 0)),
        ("processes", amdsmi_get_gpu_process_list(h, null_mut(), null_mut())),
        ("compute partition", amdsmi_get_gpu_compute_partition(h, null_mut(), 8)),
        ("memory partition", amdsmi_get_gpu_memory_partition(h, null_mut(), 8)),
        ("events", amdsmi_get_gpu_event_notification(0, null_mut(), null_mut())),
        ("gpu id", amdsmi_get_gpu_id(h, null_mut())),
        ("from bdf", amdsmi_get_processor_handle_from_bdf(0x0500, null_mut())),
        (
            "by type",
            amdsmi_get_processor_handles_by_type(sockets()[0], 1, null_mut(), null_mut()),
        ),
        // A handle that is none of the fake's, and a null one.
        (
            "bad handle",
            amdsmi_get_gpu_activity(bad, &mut amdsmi_engine_usage_t::zeroed()),
        ),
        (
            "null handle",
            amdsmi_get_gpu_activity(null_mut(), &mut amdsmi_engine_usage_t::zeroed()),
        ),
        (
            "socket as processor",
            amdsmi_get_gpu_activity(sockets()[0], &mut amdsmi_engine_usage_t::zeroed()),
        ),
        ("events bad handle", amdsmi_init_gpu_event_notification(bad)),
    ];
    let wrong: Vec<_> = checks.iter().filter(|(_, r)| *r != INVAL).collect();
    assert!(wrong.is_empty(), "not INVAL: {wrong:?}");
}

#[test]
fn calls_before_init_are_not_init() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    *state() = None;
    let h = processor_handle(0, 0);
    assert_eq!(
        amdsmi_get_gpu_activity(h, &mut amdsmi_engine_usage_t::zeroed()),
        AMDSMI_STATUS_NOT_INIT
    );
    assert_eq!(amdsmi_get_socket_handles(&mut 0, null_mut()), AMDSMI_STATUS_NOT_INIT);
    // The status strings need no init.
    let mut s: *const c_char = null();
    assert_eq!(amdsmi_status_code_to_string(AMDSMI_STATUS_NOT_SUPPORTED, &mut s), OK);
    // SAFETY: the fake returned a static NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(s) };
    assert_eq!(text.to_str().ok(), Some("AMDSMI_STATUS_NOT_SUPPORTED"));
    // Init, shut down: NOT_INIT again; init again: the same clock.
    assert_eq!(
        start(&profiles().join("mi300x-oam.toml"), Some(3.0), AMDSMI_INIT_AMD_GPUS),
        OK
    );
    assert_eq!(amdsmi_shut_down(), OK);
    assert_eq!(
        amdsmi_get_gpu_activity(h, &mut amdsmi_engine_usage_t::zeroed()),
        AMDSMI_STATUS_NOT_INIT
    );
    assert_eq!(amdsmi_shut_down(), AMDSMI_STATUS_NOT_INIT);
}

#[test]
fn init_without_gpus_sees_none() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    *state() = None;
    assert_eq!(
        start(&profiles().join("mi300x-oam.toml"), Some(3.0), AMDSMI_INIT_AMD_CPUS),
        OK
    );
    assert!(sockets().is_empty());
    assert_eq!(
        amdsmi_get_gpu_activity(processor_handle(0, 0), &mut amdsmi_engine_usage_t::zeroed()),
        INVAL
    );
}

#[test]
fn every_amdsmi_symbol_is_implemented_or_stubbed() {
    // The functions the fake implements (its modules), by name.
    let src = [
        include_str!("init.rs"),
        include_str!("identity.rs"),
        include_str!("memory.rs"),
        include_str!("power.rs"),
        include_str!("metrics.rs"),
        include_str!("ras.rs"),
        include_str!("links.rs"),
        include_str!("events.rs"),
    ];
    let mut mine: Vec<&str> = src
        .iter()
        .flat_map(|s| s.split("pub extern \"C\" fn ").skip(1))
        .filter_map(|s| s.split('(').next())
        .chain(stubs::NAMES.iter().copied())
        .collect();
    mine.sort_unstable();
    let mut want = ALL_SYMBOLS.to_vec();
    want.sort_unstable();
    assert_eq!(mine, want);
}
