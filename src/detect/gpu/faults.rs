//! The GPU's faults: XIDs and AMD's events, a lost or stuck GPU,
//! uncorrectable ECC errors and row remaps.

use super::{Context, GpuState};
use crate::detect::debounce::Hold;
use crate::detect::{flag, ms};
use crate::model::flag::{Action, Flag, FlagKind, Severity, Subject};
use crate::model::sample::{GpuError, GpuReading};
use crate::model::words::{Said, duration, shown};

pub(super) fn xid(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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
pub(super) fn gpu_event(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

pub(super) fn gpu_lost(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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
pub(super) fn gpu_stuck(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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

pub(super) fn ecc_uncorrected(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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
pub(super) fn remap(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
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
