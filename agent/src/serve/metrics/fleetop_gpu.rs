//! The agent's own GPU families (`fleetop_gpu_*`): what dcgm-exporter does
//! not serve, under names of the agent's. Apart from `dcgm` because those
//! follow another exporter's names and these do not.

use fleetop_proto::{absent as a, throttle};

use super::Snapshot;
use super::gpu::Gpu;
use super::text::{Kind, Writer};

/// What dcgm-exporter does not serve: throttle reasons one by one, PCIe
/// throughput, per-link NVLink, GPU errors. An AMD GPU's XGMI links are
/// `amd`'s, under AMD's names and labels.
pub(super) fn fleetop_gpu(w: &mut Writer, gpus: &[Gpu], snap: &Snapshot) {
    const REASONS: [u64; 9] = [
        throttle::GPU_IDLE,
        throttle::APPLICATIONS_CLOCKS_SETTING,
        throttle::SW_POWER_CAP,
        throttle::HW_SLOWDOWN,
        throttle::SYNC_BOOST,
        throttle::SW_THERMAL_SLOWDOWN,
        throttle::HW_THERMAL_SLOWDOWN,
        throttle::HW_POWER_BRAKE_SLOWDOWN,
        throttle::DISPLAY_CLOCK_SETTING,
    ];
    w.family(
        "fleetop_gpu_throttle_reason",
        Kind::Gauge,
        "1 while NVML reports this clocks-event (throttle) reason, 0 otherwise; unknown bits are named by value.",
    );
    for g in gpus {
        let Some(mask) = g.opt(a::THROTTLE, g.s.throttle_reasons) else {
            continue;
        };
        for bit in REASONS {
            let name = throttle::names(bit);
            let name = name.first().map_or("", String::as_str);
            w.each(&g.labels, &[("reason", name)], u8::from(mask & bit != 0));
        }
        let known = REASONS.iter().fold(0, |m, b| m | b);
        for name in throttle::names(mask & !known) {
            w.each(&g.labels, &[("reason", &name)], 1);
        }
    }
    w.family(
        "fleetop_gpu_pcie_transmit_bytes_per_second",
        Kind::Gauge,
        "PCIe throughput out of the GPU over the last interval (in B/s).",
    );
    for g in gpus {
        if let Some(v) = g.opt(a::PCIE_THROUGHPUT, g.s.pcie_tx_kbps) {
            w.each(&g.labels, &[], u64::from(v) * 1000);
        }
    }
    w.family(
        "fleetop_gpu_pcie_receive_bytes_per_second",
        Kind::Gauge,
        "PCIe throughput into the GPU over the last interval (in B/s).",
    );
    for g in gpus {
        if let Some(v) = g.opt(a::PCIE_THROUGHPUT, g.s.pcie_rx_kbps) {
            w.each(&g.labels, &[], u64::from(v) * 1000);
        }
    }
    w.family(
        "fleetop_gpu_nvlink_state",
        Kind::Gauge,
        "Per NVLink link: 0 inactive, 1 active, 2 sleep (up, in low power).",
    );
    for g in gpus.iter().filter(|g| g.answered() && !g.amd) {
        let Some(info) = g.info else { continue };
        for (pos, link) in info.nvlinks.iter().enumerate() {
            // An empty list means every link is active (the common case).
            let state = g.s.nvlink_state.get(pos).copied().unwrap_or(1);
            w.each(&g.labels, &[("link", &link.link.to_string())], state);
        }
    }
    for (name, help, tx) in [
        (
            "fleetop_gpu_nvlink_transmitted_bytes_total",
            "Per NVLink link: bytes sent (NVML throughput counter, counted in KiB).",
            true,
        ),
        (
            "fleetop_gpu_nvlink_received_bytes_total",
            "Per NVLink link: bytes received (NVML throughput counter, counted in KiB).",
            false,
        ),
    ] {
        w.family(name, Kind::Counter, help);
        for g in gpus.iter().filter(|g| !g.amd) {
            let (Some(c), Some(info)) = (snap.nvlink.get(&g.s.index), g.info) else {
                continue;
            };
            let values = if tx { &c.tx_kib } else { &c.rx_kib };
            for (v, link) in values.iter().zip(&info.nvlinks) {
                w.each(&g.labels, &[("link", &link.link.to_string())], v.wrapping_mul(1024));
            }
        }
    }
    w.family(
        "fleetop_gpu_error",
        Kind::Gauge,
        "1 for a GPU that did not answer in the latest sample; `error` says how (gpu_lost, nvml_stuck, ...).",
    );
    for g in gpus.iter().filter(|g| !g.answered()) {
        let kind = g.s.error.split(':').next().unwrap_or_default();
        w.each(&g.labels, &[("error", kind)], 1);
    }
}
