//! The InfiniBand flags: a port down, error counters rising.

use std::collections::BTreeMap;

use crate::detect::debounce::{Debounce, Hold};
use crate::detect::thresholds::Thresholds;
use crate::detect::{flag, ms};
use crate::model::flag::{Flag, FlagKind, Severity, Subject};
use crate::model::rates::Delta;
use crate::model::sample::{IbReading, NodeDesc};
use crate::model::words::shown;

#[derive(Debug, Default, Clone)]
pub struct IbState {
    down: Debounce,
    errors: Hold,
    /// Error increments over the current episode, by counter name.
    errors_seen: BTreeMap<&'static str, u64>,
}

/// What a port's flags are judged against.
pub struct Context<'a> {
    pub t: i64,
    /// The node, for the port's name: made only for a flag's text, not for
    /// every port of every sample.
    pub info: &'a NodeDesc,
    /// Its error counters' changes since the previous sample.
    pub deltas: &'a [Option<Delta>],
    pub th: &'a Thresholds,
}

/// Every flag of one port for one sample.
pub fn flags(st: &mut IbState, p: &IbReading, cx: &Context, out: &mut Vec<Flag>) {
    ib_down(st, p, cx, out);
    ib_errors(st, p, cx, out);
}

fn ib_down(st: &mut IbState, p: &IbReading, cx: &Context, out: &mut Vec<Flag>) {
    let (raise, clear) = (cx.th.link_down_samples, cx.th.clear_samples);
    let Some(since) = st.down.update(p.is_down(), cx.t, raise, clear) else {
        return;
    };
    let word = |s: &Option<std::borrow::Cow<str>>| shown(s.as_deref());
    let mut ev = Vec::new();
    ev.extend(p.rate_gbps.map(|r| ("rate_gbps", f64::from(r))));
    // The physical state says where to look ("Polling: no link partner").
    let says = p
        .phys_state
        .as_deref()
        .and_then(fleetop_catalog::ib_phys_state_says)
        .map(|s| format!(": {s}"))
        .unwrap_or_default();
    out.push(flag(
        FlagKind::IbDown,
        Severity::Crit,
        Subject::IbPort(p.port),
        since,
        format!(
            "{} {} ({}{says})",
            cx.info.ib_port_name(p.port),
            word(&p.state),
            word(&p.phys_state)
        ),
        &ev,
    ));
}

fn ib_errors(st: &mut IbState, p: &IbReading, cx: &Context, out: &mut Vec<Flag>) {
    let mut rose = false;
    for (i, d) in cx.deltas.iter().enumerate() {
        let Some(v) = d.and_then(|d| d.value()) else {
            continue;
        };
        if v > 0 {
            rose = true;
            *st.errors_seen.entry(fleetop_proto::ib::counter_name(i)).or_default() += v;
        }
    }
    if rose {
        st.errors.event(cx.t);
    }
    let Some(first) = st.errors.held(cx.t, ms(cx.th.ib_errors_hold)) else {
        st.errors_seen.clear();
        return;
    };
    let list: Vec<String> = st.errors_seen.iter().map(|(k, v)| format!("{k} +{v}")).collect();
    let ev: Vec<(&str, f64)> = st.errors_seen.iter().map(|(k, v)| (*k, *v as f64)).collect();
    out.push(flag(
        FlagKind::IbErrors,
        Severity::Warn,
        Subject::IbPort(p.port),
        first,
        // The window the deltas cover: from the episode's first rise to now.
        format!(
            "{}: {} in the last {} s",
            cx.info.ib_port_name(p.port),
            list.join(", "),
            (cx.t - first).max(0) / 1000
        ),
        &ev,
    ));
}
