//! The GPU flags, one function per kind. Each reads one GPU's sample and
//! its memory of earlier ones, and pushes the flag when it is raised.

use fleetop_proto::throttle;

use crate::detect::debounce::{Debounce, Hold};
use crate::detect::thresholds::Thresholds;
use crate::detect::{flag, ms};
use crate::model::flag::{Action, Flag, FlagKind, Severity, Subject};
use crate::model::sample::{Fabric, GpuDesc, GpuError, GpuReading, NodeHealth, Vendor};
use crate::model::sched::Job;
use crate::model::words::{Said, duration, shown};

/// Per-GPU detector memory.
#[derive(Debug, Default, Clone)]
pub struct GpuState {
    throttled: Debounce,
    hot: Debounce,
    lost: Debounce,
    stuck: Debounce,
    nvlink: Debounce,
    capped: Debounce,
    ecc: Debounce,
    remap_pending: Debounce,
    remap_failed: Debounce,
    capped_run_start: Option<i64>,
    low_util_since: Option<i64>,
    idle: Debounce,
    underused_since: Option<i64>,
    underused: Debounce,
    xid: Hold,
    xids: Vec<u32>,
    pcie: Debounce,
    replay: Hold,
    replay_last: Option<u64>,
    replays_seen: u64,
    fabric: Debounce,
    fabric_pending_since: Option<i64>,
    persistence: Debounce,
    event: Hold,
    /// The AMD fault catalog's entries behind the GPU's gpu_event flag
    /// while it is up, in the order seen.
    events: Vec<&'static fleetop_catalog::AmdFault>,
}

impl GpuState {
    /// The XID codes behind the GPU's xid flag while it is up, in the order seen.
    pub fn held_xids(&self) -> &[u32] {
        &self.xids
    }

    /// The AMD faults behind the GPU's gpu_event flag while it is up, in
    /// the order seen (their catalog codes: "gpu_reset", "xgmi_error", ...).
    pub fn held_events(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.events.iter().map(|e| e.code)
    }
}

/// What a GPU's flags are judged against.
pub struct Context<'a> {
    pub t: i64,
    pub desc: Option<&'a GpuDesc>,
    pub jobs: &'a [Job],
    /// Ray's work on this node (matched to the GPU's processes by pid).
    pub ray: &'a [crate::model::ray::RayWork],
    pub th: &'a Thresholds,
    /// The node's fault journal, for escalation.
    pub health: &'a NodeHealth,
    /// When the node last passed a burn-in: the XIDs before it are over.
    pub burnin_passed_ms: Option<i64>,
}

impl Context<'_> {
    /// Who made the GPU (NVIDIA without a description).
    fn vendor(&self) -> Vendor {
        self.desc.map(|d| d.vendor).unwrap_or_default()
    }
}

/// Every GPU flag for one sample.
pub fn flags(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // XIDs (AMD's events) first: they arrive with the sample that follows
    // them, lost GPU or not.
    xid(st, g, cx, out);
    gpu_event(st, g, cx, out);
    gpu_lost(st, g, cx, out);
    gpu_stuck(st, g, cx, out);
    if g.error.is_some() {
        // No readings to judge the rest by; keep their memory as it is.
        return;
    }
    throttled(st, g, cx, out);
    power_capped(st, g, cx, out);
    hot(st, g, cx, out);
    nvlink_down(st, g, cx, out);
    ecc_uncorrected(st, g, cx, out);
    remap(st, g, cx, out);
    idle(st, g, cx, out);
    underused(st, g, cx, out);
    pcie_degraded(st, g, cx, out);
    fabric_unhealthy(st, g, cx, out);
    persistence_off(st, g, cx, out);
}

/// Utilization at which a GPU's PCIe link should run at its full
/// generation: an idle link trains down to save power, which is no fault.
const PCIE_BUSY_UTIL_PCT: u32 = 50;

/// The PCIe link narrower than it can be (always a fault), slower while the
/// GPU is busy, or replaying (the replay counter rose within the hold).
fn pcie_degraded(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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
fn fabric_unhealthy(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

fn persistence_off(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

/// Busy by NVML's utilization (some kernel ran the whole time) while GPM
/// says most SMs had nothing to do, for the window: the waste util % hides.
/// Needs GPM: a GPU without it is never judged.
fn underused(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let (Some(util), Some(gpm)) = (g.util_pct, g.gpm) else {
        st.underused_since = None;
        let _ = st.underused.update(false, cx.t, 1, 1);
        return;
    };
    if util >= cx.th.underused_util_pct && gpm.sm_active_pct < cx.th.underused_sm_active_pct {
        st.underused_since.get_or_insert(cx.t);
    } else {
        st.underused_since = None;
    }
    let long = st
        .underused_since
        .is_some_and(|s| cx.t - s >= ms(cx.th.underused_window));
    let Some(since) = st.underused.update(long, cx.t, 1, 1) else {
        return;
    };
    let start = st.underused_since.unwrap_or(since);
    out.push(flag(
        FlagKind::Underused,
        Severity::Info,
        Subject::Gpu(g.index),
        start,
        format!(
            "{} at {util}% utilization but {:.0}% SM activity",
            holder(g, cx),
            gpm.sm_active_pct
        ),
        &[
            ("util_pct", f64::from(util)),
            ("sm_active_pct", gpm.sm_active_pct),
            ("sm_occupancy_pct", gpm.sm_occupancy_pct),
            ("tensor_active_pct", gpm.tensor_active_pct),
        ],
    ));
}

/// Who holds a GPU, as an SRE asks: the job, its user, and how many GPUs it
/// has here (or the Ray job of its processes); the Kubernetes pod(s)
/// given it; the processes where none is known.
fn holder(g: &GpuReading, cx: &Context) -> String {
    let mut ids: Vec<u64> = g.processes.iter().filter_map(|p| p.job_id).collect();
    ids.dedup();
    let mut named: Vec<String> = ids
        .iter()
        .map(|id| match cx.jobs.iter().find(|j| j.id == *id) {
            Some(j) => format!("job {id} ({}, {} GPUs here)", j.user, j.gpus_per_node),
            None => format!("job {id}"),
        })
        .collect();
    // Ray's work, by the pids Ray gives for it (where no Slurm job is).
    if named.is_empty() {
        let mut ray: Vec<String> = g
            .processes
            .iter()
            .filter_map(|p| cx.ray.iter().find(|w| w.pid == Some(p.pid)))
            .map(|w| format!("ray job {} ({})", w.job, w.what))
            .collect();
        ray.dedup();
        named.extend(ray);
    }
    let pods = g.pod_names();
    if !pods.is_empty() {
        let word = if pods.len() == 1 { "pod" } else { "pods" };
        named.push(format!("{word} {}", pods.join(", ")));
    }
    if named.is_empty() {
        format!("{} process(es)", g.processes.len())
    } else {
        named.join(", ")
    }
}

/// Splits a detail that begins with `holder`'s words for job `job` alone
/// into them ("job 4411 (alice, 8 GPUs here)") and the rest ("at 0% for 20
/// min", the idle detail's "holds it" dropped with them), for where the
/// job is said already (an alert row folding the job's GPUs); `None` where
/// the detail does not begin so (another job, several, processes).
pub fn split_holder(detail: &str, job: u64) -> Option<(&str, &str)> {
    let after = detail.strip_prefix(&format!("job {job}"))?;
    let who_len = match after.as_bytes().first() {
        None | Some(b' ') if !after.starts_with(" (") => 0,
        Some(b' ') => after.find(')')? + 1,
        _ => return None,
    };
    let cut = detail.len() - after.len() + who_len;
    let (who, rest) = detail.split_at(cut);
    let rest = rest.trim_start();
    Some((who, rest.strip_prefix("holds it ").unwrap_or(rest)))
}

fn xid(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // The agent's fault journal holds this GPU's XIDs across restarts: a
    // console started after the agent's history has moved past an XID
    // holds it as one that saw it does, and so does every export.
    let uuid = cx.desc.map(|d| d.uuid.as_str()).unwrap_or_default();
    let journal = cx
        .health
        .fault_journal
        .iter()
        .filter(|r| !uuid.is_empty() && r.gpu_uuid == uuid && r.kind == "xid")
        .filter(|r| cx.t - r.time_ms <= ms(cx.th.xid_hold))
        .map(|r| (r.code, r.time_ms));
    let seen = g.xids.iter().map(|x| (x.xid, x.time_ms));
    // A burn-in that passed ends the incident before it: the GPU was
    // measured good since. Its XIDs, still in the journal within the hold,
    // are not fed again, so an XID after the pass starts an incident of its
    // own, aged from its own first record.
    let before_pass = |t: i64| cx.burnin_passed_ms.is_some_and(|p| t < p);
    if cx.burnin_passed_ms.is_some_and(|p| st.xid.began_before(p)) {
        st.xid = Hold::default();
        st.xids.clear();
    }
    for (code, time_ms) in journal.chain(seen).filter(|&(_, t)| !before_pass(t)) {
        st.xid.event(time_ms);
        if !st.xids.contains(&code) {
            st.xids.push(code);
        }
    }
    let Some(first) = st.xid.held(cx.t, ms(cx.th.xid_hold)) else {
        st.xids.clear();
        return;
    };
    // The catalog grades each code; the most urgent decides, after the
    // GPU's history has had its say.
    let mut action: Option<(Action, Option<String>)> = None;
    for &code in &st.xids {
        let mut a = (fleetop_catalog::xid_action(code), None);
        if !uuid.is_empty() {
            let since = cx.t - fleetop_catalog::REPEAT_WINDOW_MS;
            let boots = cx.health.xid_boots(uuid, code, since, true);
            if let Some((up, why)) = fleetop_catalog::escalate(code, a.0, boots) {
                a = (up, Some(why));
            }
        }
        if action.as_ref().is_none_or(|(b, _)| a.0.urgency() > b.urgency()) {
            action = Some(a);
        }
    }
    let (action, escalation) = action.unwrap_or((Action::None, None));
    let text: Vec<String> = st
        .xids
        .iter()
        .map(|&x| format!("XID {x} ({})", fleetop_catalog::xid_meaning(x)))
        .collect();
    let ev: Vec<(&str, f64)> = st.xids.iter().map(|&x| ("xid", f64::from(x))).collect();
    let mut f = flag(
        FlagKind::Xid,
        action.severity(),
        Subject::Gpu(g.index),
        first,
        text.join("; "),
        &ev,
    );
    f.action = action;
    f.escalation = escalation;
    out.push(f);
}

/// AMD's XIDs: the events AMD SMI reports (a reset, a VM fault, a thermal
/// throttle) and the XGMI error status, held as XIDs are, each graded by
/// the AMD fault catalog; the most urgent one's action is the flag's.
fn gpu_event(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let seen = |st: &mut GpuState, f: &'static fleetop_catalog::AmdFault, t: i64| {
        st.event.event(t);
        if !st.events.iter().any(|e| e.code == f.code) {
            st.events.push(f);
        }
    };
    // As for XIDs: a pass ends the incident before it, and a new one is
    // aged from its own first event.
    if cx.burnin_passed_ms.is_some_and(|p| st.event.began_before(p)) {
        st.event = Hold::default();
        st.events.clear();
    }
    let before_pass = |t: i64| cx.burnin_passed_ms.is_some_and(|p| t < p);
    for e in g.events.iter().filter(|e| !before_pass(e.time_ms)) {
        seen(st, fleetop_catalog::amd::event(&e.kind), e.time_ms);
    }
    // A state, not an event: held while it says errors, and a while after.
    let xgmi = g.xgmi_error_status.filter(|&s| s != 0);
    if let Some(f) = xgmi.and_then(fleetop_catalog::amd::xgmi) {
        seen(st, f, cx.t);
    }
    let Some(first) = st.event.held(cx.t, ms(cx.th.xid_hold)) else {
        st.events.clear();
        return;
    };
    let Some(worst) = st.events.iter().copied().max_by_key(|f| f.immediate.urgency()) else {
        return;
    };
    let text: Vec<String> = st
        .events
        .iter()
        .map(|f| match (f.code, xgmi) {
            ("xgmi_error", Some(n)) => format!("{} ({}; status {n})", f.code, f.meaning),
            _ => format!("{} ({})", f.code, f.meaning),
        })
        .collect();
    let mut ev = Vec::new();
    ev.extend(xgmi.map(|n| ("xgmi_error_status", f64::from(n))));
    let mut f = flag(
        FlagKind::GpuEvent,
        worst.immediate.severity(),
        Subject::Gpu(g.index),
        first,
        text.join("; "),
        &ev,
    );
    f.action = worst.immediate;
    out.push(f);
}

fn gpu_lost(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    if let Some(since) = st.lost.update(g.is_lost(), cx.t, 1, cx.th.clear_samples) {
        out.push(flag(
            FlagKind::GpuLost,
            Severity::Crit,
            Subject::Gpu(g.index),
            since,
            "GPU does not answer (lost)".into(),
            &[],
        ));
    }
}

/// A stuck NVML call this long is no slow call that may yet return.
const STUCK_CRIT_MS: u64 = 30_000;

/// An NVML call on the GPU has not returned (the agent says so and serves
/// the others): its temperature, ECC and clocks are unknown meanwhile. Warn
/// at once, crit once it lasts `STUCK_CRIT_MS`.
fn gpu_stuck(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let stuck = match &g.error {
        Some(GpuError::Stuck { text, for_ms }) => Some((text, *for_ms)),
        _ => None,
    };
    let Some(since) = st.stuck.update(stuck.is_some(), cx.t, 1, cx.th.clear_samples) else {
        return;
    };
    let library = cx.vendor().library();
    let (detail, sev, ev) = match stuck {
        Some((text, ms)) => (
            format!("{library} call does not return: {}", stuck_words(text, ms)),
            if ms >= STUCK_CRIT_MS {
                Severity::Crit
            } else {
                Severity::Warn
            },
            vec![("no_answer_s", ms as f64 / 1000.0)],
        ),
        None => (
            format!("{library} answers again (clearing)"),
            Severity::Warn,
            Vec::new(),
        ),
    };
    out.push(flag(FlagKind::GpuStuck, sev, Subject::Gpu(g.index), since, detail, &ev));
}

/// The agent's "nvml_stuck: nvmlDeviceGetPowerUsage: no answer for
/// 594056 ms" for people: "nvmlDeviceGetPowerUsage: no answer for 9m54s"
/// (the flag's kind, `gpu_stuck`, is the one name on screen).
pub fn stuck_words(text: &str, for_ms: u64) -> String {
    let call = text.trim_start_matches("nvml_stuck: ");
    let call = call.split(": no answer for").next().unwrap_or(call);
    format!(
        "{call}: no answer for {}",
        duration(i64::try_from(for_ms).unwrap_or(i64::MAX), Said::ToSecond)
    )
}

fn throttled(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

fn power_capped(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

fn hot(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

fn nvlink_down(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

fn ecc_uncorrected(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let errors = g.ecc_uncorrected_volatile.unwrap_or(0);
    // AMD's RAS blocks with uncorrectable or deferred (poisoned: MI300's
    // HBM reports its uncorrectable errors so) errors.
    let blocks: Vec<&crate::model::sample::RasCount> =
        g.ras.iter().filter(|r| r.uncorrectable > 0 || r.deferred > 0).collect();
    let Some(since) = st.ecc.update(errors > 0 || !blocks.is_empty(), cx.t, 1, 1) else {
        return;
    };
    let mut ev = vec![("ecc_uncorrected", errors as f64)];
    let deferred: u64 = blocks.iter().map(|r| r.deferred).sum();
    let mut detail = match (errors, deferred) {
        (0, d) if d > 0 => format!("{d} deferred (poisoned) ECC errors"),
        (e, _) => format!("{e} uncorrectable ECC errors"),
    };
    if !blocks.is_empty() {
        if deferred > 0 {
            ev.push(("ecc_deferred", deferred as f64));
        }
        let each: Vec<String> = blocks
            .iter()
            .map(|r| match r.deferred {
                0 => format!("{} {}", r.block, r.uncorrectable),
                d => format!("{} {} (+{d} deferred)", r.block, r.uncorrectable),
            })
            .collect();
        let word = if blocks.len() == 1 { "block" } else { "blocks" };
        detail.push_str(&format!(" in RAS {word} {}", each.join(", ")));
    }
    if g.remap_pending == Some(true) {
        detail.push_str(", a row remap pending");
    }
    if let Some(n) = g.retired_pages_pending.filter(|&n| n > 0) {
        detail.push_str(&format!(", {n} bad pages pending retirement"));
    }
    let mut f = flag(
        FlagKind::EccUncorrected,
        Severity::Crit,
        Subject::Gpu(g.index),
        since,
        detail,
        &ev,
    );
    // Each block's action from the AMD fault catalog: the most urgent.
    if let Some(a) = blocks
        .iter()
        .map(|r| fleetop_catalog::amd::ras(&r.block).immediate)
        .max_by_key(|a| a.urgency())
    {
        f.action = a;
    }
    out.push(f);
}

/// Row remapping (Ampere and later): a pending remap needs a GPU reset
/// (warn); a failed one means the GPU needs replacing (crit).
fn remap(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let ev = [
        (
            "remapped_rows_uncorrectable",
            f64::from(g.remapped_rows_uncorrectable.unwrap_or(0)),
        ),
        (
            "remapped_rows_correctable",
            f64::from(g.remapped_rows_correctable.unwrap_or(0)),
        ),
    ];
    let rows = shown(g.remapped_rows_uncorrectable);
    let failed = g.remap_failed == Some(true);
    // AMD: HBM pages waiting for a reset to be retired, its like of a
    // pending remap (the action the AMD fault catalog's).
    let pages = g.retired_pages_pending.filter(|&n| n > 0);
    if let Some(n) = pages {
        let Some(since) = st.remap_pending.update(true, cx.t, 1, 1) else {
            return;
        };
        let entry = fleetop_catalog::amd::bad_pages_pending();
        let mut f = flag(
            FlagKind::RemapPending,
            Severity::Warn,
            Subject::Gpu(g.index),
            since,
            format!(
                "{n} bad pages pending retirement: reset the GPU ({} pages retired)",
                shown(g.retired_pages)
            ),
            &[("retired_pages_pending", f64::from(n))],
        );
        f.action = entry.immediate;
        out.push(f);
        return;
    }
    if let Some(since) = st.remap_pending.update(g.remap_pending == Some(true), cx.t, 1, 1) {
        // One plan: with a failed remap on the same GPU, the reset a pending
        // remap asks for is moot; the GPU is to be replaced.
        let (detail, action) = if failed {
            (
                format!(
                    "row remap pending, but a remap already failed: replace, a reset will not help ({rows} rows remapped for uncorrectable errors)"
                ),
                Action::Replace,
            )
        } else {
            (
                format!("row remap pending: reset the GPU ({rows} rows remapped for uncorrectable errors)"),
                Action::ResetGpu,
            )
        };
        let mut f = flag(
            FlagKind::RemapPending,
            Severity::Warn,
            Subject::Gpu(g.index),
            since,
            detail,
            &ev,
        );
        f.action = action;
        out.push(f);
    }
    if let Some(since) = st.remap_failed.update(g.remap_failed == Some(true), cx.t, 1, 1) {
        out.push(flag(
            FlagKind::RemapFailed,
            Severity::Crit,
            Subject::Gpu(g.index),
            since,
            format!("row remap failed: the GPU needs replacing ({rows} rows remapped for uncorrectable errors)"),
            &ev,
        ));
    }
}

fn idle(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // Idle: held (a process on it, or a Kubernetes pod given it: a pod
    // that holds a GPU it does not use keeps it from everyone else) yet
    // under the threshold for the whole window.
    let held = !g.processes.is_empty() || !g.pods.is_empty();
    let util = g.util_pct;
    if held && util.is_some_and(|u| u < cx.th.idle_util_pct) {
        st.low_util_since.get_or_insert(cx.t);
    } else {
        st.low_util_since = None;
    }
    let idle_long = st.low_util_since.is_some_and(|s| cx.t - s >= ms(cx.th.idle_window));
    let Some(since) = st.idle.update(idle_long, cx.t, 1, 1) else {
        return;
    };
    let start = st.low_util_since.unwrap_or(since);
    let mins = (cx.t - start) / 60_000;
    let holder = holder(g, cx);
    let mut ev = Vec::new();
    ev.extend(util.map(|u| ("util_pct", f64::from(u))));
    ev.extend(g.mem_used_bytes.map(|b| ("mem_used_bytes", b as f64)));
    out.push(flag(
        FlagKind::Idle,
        Severity::Warn,
        Subject::Gpu(g.index),
        start,
        format!("{holder} holds it at {}% for {mins} min", shown(util)),
        &ev,
    ));
}
