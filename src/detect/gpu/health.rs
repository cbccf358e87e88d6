//! The GPU's running state: its links (PCIe, the NVLink fabric, NVLink),
//! persistence mode, throttling, the power cap and heat.

use fleetop_proto::throttle;

use super::{Context, GpuState};
use crate::detect::{flag, ms};
use crate::model::flag::{Action, Flag, FlagKind, Severity, Subject};
use crate::model::sample::{Fabric, GpuReading, Vendor};
use crate::model::words::shown;

/// Utilization at which a GPU's PCIe link should run at its full
/// generation: an idle link trains down to save power, which is no fault.
const PCIE_BUSY_UTIL_PCT: u32 = 50;

/// The PCIe link narrower than it can be (always a fault), slower while the
/// GPU is busy, or replaying (the replay counter rose within the hold).
pub(super) fn pcie_degraded(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    if let Some(now) = g.pcie_replay_count {
        if let Some(prev) = st.replay_last
            && now > prev
        {
            st.replay.event(cx.t);
            st.replays_seen += now - prev;
        }
        st.replay_last = Some(now);
    }
    let replaying = st.replay.held(cx.t, ms(cx.th.ib_errors_hold));
    if replaying.is_none() {
        st.replays_seen = 0;
    }
    let (cur, max) = (g.pcie_link, cx.desc.and_then(|d| d.pcie_max));
    let narrow = matches!((cur, max), (Some(c), Some(m)) if c.width < m.width);
    let busy = g.util_pct.is_some_and(|u| u >= PCIE_BUSY_UTIL_PCT);
    let slow = matches!((cur, max), (Some(c), Some(m)) if c.gen_ < m.gen_);
    let since = if busy || narrow || replaying.is_some() {
        let cond = narrow || (busy && slow) || replaying.is_some();
        let (raise, clear) = (cx.th.throttle_raise_samples, cx.th.clear_samples);
        st.pcie.update(cond, cx.t, raise, clear)
    } else {
        // Idle: the generation cannot be judged; the flag holds as it is.
        st.pcie.since()
    };
    let Some(since) = since else {
        return;
    };
    let mut what = Vec::new();
    let mut ev = Vec::new();
    if let (Some(c), Some(m)) = (cur, max) {
        if c.width < m.width || c.gen_ < m.gen_ {
            what.push(format!(
                "PCIe gen {} x{} of gen {} x{}",
                c.gen_, c.width, m.gen_, m.width
            ));
        }
        ev.extend([
            ("pcie_gen", f64::from(c.gen_)),
            ("pcie_width", f64::from(c.width)),
            ("pcie_max_gen", f64::from(m.gen_)),
            ("pcie_max_width", f64::from(m.width)),
        ]);
    }
    if let Some(first) = replaying {
        what.push(format!(
            "PCIe replays +{} in the last {} s",
            st.replays_seen,
            (cx.t - first).max(0) / 1000
        ));
        ev.push(("pcie_replays", st.replays_seen as f64));
    }
    if what.is_empty() {
        what.push("PCIe link back at full speed (clearing)".into());
    }
    out.push(flag(
        FlagKind::PcieDegraded,
        Severity::Warn,
        Subject::Gpu(g.index),
        since,
        what.join("; "),
        &ev,
    ));
}

/// How long a GPU may take to register with the fabric after the agent
/// sees it start before that is a fault.
const FABRIC_PENDING_MS: i64 = 60_000;

/// NVSwitch systems: a GPU whose fabric registration failed, or has not
/// finished for a minute, cannot run CUDA.
pub(super) fn fabric_unhealthy(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let pending = matches!(g.fabric, Some(Fabric::NotStarted | Fabric::InProgress));
    if pending {
        st.fabric_pending_since.get_or_insert(cx.t);
    } else {
        st.fabric_pending_since = None;
    }
    let failed = match g.fabric {
        Some(Fabric::Completed { status }) if status != 0 => Some(status),
        _ => None,
    };
    let stuck = st.fabric_pending_since.is_some_and(|s| cx.t - s >= FABRIC_PENDING_MS);
    let Some(since) = st
        .fabric
        .update(failed.is_some() || stuck, cx.t, 1, cx.th.clear_samples)
    else {
        return;
    };
    let detail = match failed {
        Some(status) => format!("fabric registration failed (NVML error {status}): CUDA will not start"),
        None if stuck => "fabric registration not finished after 60 s: CUDA will not start".to_string(),
        None => "fabric registered (clearing)".to_string(),
    };
    out.push(flag(
        FlagKind::FabricUnhealthy,
        Severity::Crit,
        Subject::Gpu(g.index),
        since,
        detail,
        &[],
    ));
}

pub(super) fn persistence_off(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let Some(since) = st.persistence.update(g.persistence == Some(false), cx.t, 1, 1) else {
        return;
    };
    out.push(flag(
        FlagKind::PersistenceOff,
        Severity::Warn,
        Subject::Gpu(g.index),
        since,
        "persistence mode off".into(),
        &[],
    ));
}

pub(super) fn throttled(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let mask = g.throttle_mask.unwrap_or(0);
    let trouble = mask & throttle::TROUBLE;
    let (raise, clear) = (cx.th.throttle_raise_samples, cx.th.clear_samples);
    let Some(since) = st.throttled.update(trouble != 0, cx.t, raise, clear) else {
        return;
    };
    // While raised, name what the latest sample shows (or what raised it).
    let hw = throttle::HW_SLOWDOWN | throttle::HW_THERMAL_SLOWDOWN | throttle::HW_POWER_BRAKE_SLOWDOWN;
    let sev = if trouble == 0 || trouble & hw != 0 {
        Severity::Crit
    } else {
        Severity::Warn
    };
    // AMD's own words where the GPU gives them (the bits are what they
    // map to); NVML's reasons otherwise.
    let amd = cx.vendor() == Vendor::Amd && !g.throttle_detail.is_empty();
    let names = if trouble == 0 {
        "clearing".to_string()
    } else if amd {
        g.throttle_detail.join(", ")
    } else {
        throttle::names(trouble).join(", ")
    };
    let mut ev = vec![("throttle_mask", mask as f64)];
    ev.extend(g.sm_clock_mhz.map(|c| ("sm_clock_mhz", f64::from(c))));
    ev.extend(g.temp_c.map(|c| ("temp_c", f64::from(c))));
    let clock = if cx.vendor() == Vendor::Amd { "GFX" } else { "SM" };
    let mut f = flag(
        FlagKind::Throttled,
        sev,
        Subject::Gpu(g.index),
        since,
        format!("{names}; {clock} {} MHz, {} °C", shown(g.sm_clock_mhz), shown(g.temp_c)),
        &ev,
    );
    // By reason: heat is cooling's, a brake or a hardware slowdown power's.
    let thermal = throttle::SW_THERMAL_SLOWDOWN | throttle::HW_THERMAL_SLOWDOWN;
    if trouble != 0 && trouble & thermal == 0 {
        f.action = Action::CheckPower;
    }
    // AMD's words by the AMD fault catalog: heat first, as above, else the
    // most urgent of the rest.
    if trouble != 0 && amd {
        let entries: Vec<&fleetop_catalog::AmdFault> = g
            .throttle_detail
            .iter()
            .filter_map(|w| fleetop_catalog::amd::throttle(w))
            .filter(|e| e.immediate != Action::None)
            .collect();
        let heat = entries.iter().find(|e| e.code == "thermal");
        if let Some(e) = heat.or_else(|| entries.iter().max_by_key(|e| e.immediate.urgency())) {
            f.action = e.immediate;
        }
    }
    out.push(f);
}

pub(super) fn power_capped(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // A power cap is normal at full load: flag only when it lasts.
    let mask = g.throttle_mask.unwrap_or(0);
    let capped = mask & throttle::SW_POWER_CAP != 0 && mask & throttle::TROUBLE == 0;
    if capped {
        st.capped_run_start.get_or_insert(cx.t);
    } else {
        st.capped_run_start = None;
    }
    let sustained = st
        .capped_run_start
        .is_some_and(|s| cx.t - s >= ms(cx.th.power_cap_window));
    let Some(since) = st.capped.update(sustained, cx.t, 1, cx.th.clear_samples) else {
        return;
    };
    let start = st.capped_run_start.unwrap_or(since);
    let mut ev = Vec::new();
    ev.extend(g.power_w.map(|w| ("power_w", w)));
    ev.extend(g.power_limit_w.map(|w| ("power_limit_w", w)));
    let w = |v: Option<f64>| shown(v.map(|v| format!("{v:.0}")));
    out.push(flag(
        FlagKind::PowerCapped,
        Severity::Info,
        Subject::Gpu(g.index),
        start,
        format!("at its power cap: {} of {} W", w(g.power_w), w(g.power_limit_w)),
        &ev,
    ));
}

pub(super) fn hot(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // The GPU's temperature (AMD: the junction) against its slowdown; the
    // HBM against its own, where the GPU gives that limit (AMD).
    let hbm_slowdown = cx.desc.and_then(|d| d.hbm_slowdown_temp_c);
    let hbm = g.hbm_temp_c.zip(hbm_slowdown);
    if g.temp_c.is_none() && hbm.is_none() {
        // No temperature, nothing to judge: the flag's memory holds.
        return;
    }
    let slowdown_c = cx.th.slowdown_c(cx.desc);
    // Hysteresis in degrees: raised at slowdown - margin, cleared 2 °C below.
    let raised = st.hot.raised();
    let is_hot = |temp: u32, slowdown: u32| {
        let hot_at = slowdown.saturating_sub(cx.th.hot_margin_c);
        if raised { temp + 2 > hot_at } else { temp >= hot_at }
    };
    let core_hot = g.temp_c.is_some_and(|t| is_hot(t, slowdown_c));
    let hbm_hot = hbm.is_some_and(|(t, s)| is_hot(t, s));
    let (raise, clear) = (cx.th.throttle_raise_samples, cx.th.clear_samples);
    let Some(since) = st.hot.update(core_hot || hbm_hot, cx.t, raise, clear) else {
        return;
    };
    let at_limit = g.temp_c.is_some_and(|t| t >= slowdown_c) || hbm.is_some_and(|(t, s)| t >= s);
    let sev = if at_limit { Severity::Crit } else { Severity::Warn };
    let core = if cx.vendor() == Vendor::Amd { "junction " } else { "" };
    let mut what = Vec::new();
    let mut ev = Vec::new();
    if let Some(temp) = g.temp_c.filter(|_| core_hot || !hbm_hot) {
        what.push(format!("{core}{temp} °C, slowdown at {slowdown_c} °C"));
        ev.extend([("temp_c", f64::from(temp)), ("slowdown_temp_c", f64::from(slowdown_c))]);
    }
    if let Some((t, s)) = hbm.filter(|_| hbm_hot) {
        what.push(format!("HBM {t} °C, slowdown at {s} °C"));
        ev.extend([("hbm_temp_c", f64::from(t)), ("hbm_slowdown_temp_c", f64::from(s))]);
    }
    out.push(flag(
        FlagKind::Hot,
        sev,
        Subject::Gpu(g.index),
        since,
        what.join("; "),
        &ev,
    ));
}

pub(super) fn nvlink_down(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // Links inactive when the agent started (unused by design) are listed
    // as inactive but are not links that went down.
    let unused = |pos: usize| {
        cx.desc
            .and_then(|d| d.nvlinks.get(pos))
            .is_some_and(|l| l.inactive_at_start)
    };
    let word = cx.vendor().links_word();
    if g.links_unknown {
        // The link states were not read: none is known down (or up); the
        // flag's memory holds as it is.
        if let Some(since) = st.nvlink.since() {
            out.push(flag(
                FlagKind::NvlinkDown,
                Severity::Crit,
                Subject::Gpu(g.index),
                since,
                format!("{word} link states not read now (a link was down)"),
                &[],
            ));
        }
        return;
    }
    let down: Vec<usize> = g.nvlinks_down.iter().copied().filter(|&p| !unused(p)).collect();
    let down = &down;
    let (raise, clear) = (cx.th.link_down_samples, cx.th.clear_samples);
    let Some(since) = st.nvlink.update(!down.is_empty(), cx.t, raise, clear) else {
        return;
    };
    // Name links by NVML's link id, where the description has it.
    let links: Vec<String> = down
        .iter()
        .map(|&pos| {
            cx.desc
                .and_then(|d| d.nvlinks.get(pos))
                .map(|l| l.link)
                .unwrap_or(pos as u32)
                .to_string()
        })
        .collect();
    out.push(flag(
        FlagKind::NvlinkDown,
        Severity::Crit,
        Subject::Gpu(g.index),
        since,
        format!("{word} link {} down", links.join(", ")),
        &[("links_down", down.len() as f64)],
    ));
}
