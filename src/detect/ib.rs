//! The InfiniBand flags: a port down, error counters rising.

use std::collections::BTreeMap;

use crate::detect::debounce::Debounce;
use crate::detect::thresholds::Thresholds;
use crate::detect::{flag, ms};
use crate::model::flag::{Flag, FlagKind, Severity, Subject};
use crate::model::rates::Delta;
use crate::model::sample::IbReading;

#[derive(Debug, Default, Clone)]
pub struct IbState {
    down: Debounce,
    errors_first: Option<i64>,
    errors_last: Option<i64>,
    /// Error increments over the current episode, by counter name.
    errors_seen: BTreeMap<&'static str, u64>,
}

/// Every flag of one port for one sample; `deltas` are its error counters'
/// changes since the previous sample, `name` how people call the port.
pub fn flags(
    st: &mut IbState,
    p: &IbReading,
    name: &str,
    deltas: &[Option<Delta>],
    t: i64,
    th: &Thresholds,
    out: &mut Vec<Flag>,
) {
    ib_down(st, p, name, t, th, out);
    ib_errors(st, p, name, deltas, t, th, out);
}

fn ib_down(st: &mut IbState, p: &IbReading, name: &str, t: i64, th: &Thresholds, out: &mut Vec<Flag>) {
    let Some(since) = st.down.update(p.is_down(), t, th.link_down_samples, th.clear_samples) else {
        return;
    };
    let word = |s: &Option<String>| s.clone().unwrap_or_else(|| "?".into());
    let mut ev = Vec::new();
    ev.extend(p.rate_gbps.map(|r| ("rate_gbps", f64::from(r))));
    out.push(flag(
        FlagKind::IbDown,
        Severity::Crit,
        Subject::IbPort(p.port),
        since,
        format!("{name} {} ({})", word(&p.state), word(&p.phys_state)),
        &ev,
    ));
}

fn ib_errors(
    st: &mut IbState,
    p: &IbReading,
    name: &str,
    deltas: &[Option<Delta>],
    t: i64,
    th: &Thresholds,
    out: &mut Vec<Flag>,
) {
    let mut rose = false;
    for (i, d) in deltas.iter().enumerate() {
        let Some(v) = d.and_then(|d| d.value()) else {
            continue;
        };
        if v > 0 {
            rose = true;
            *st.errors_seen.entry(fleetop_proto::ib::counter_name(i)).or_default() += v;
        }
    }
    if rose {
        st.errors_last = Some(t);
        st.errors_first.get_or_insert(t);
    }
    match (st.errors_first, st.errors_last) {
        (Some(first), Some(last)) if t - last <= ms(th.ib_errors_hold) => {
            let list: Vec<String> = st.errors_seen.iter().map(|(k, v)| format!("{k} +{v}")).collect();
            let ev: Vec<(&str, f64)> = st.errors_seen.iter().map(|(k, v)| (*k, *v as f64)).collect();
            out.push(flag(
                FlagKind::IbErrors,
                Severity::Warn,
                Subject::IbPort(p.port),
                first,
                format!("{name}: {}", list.join(", ")),
                &ev,
            ));
        }
        _ => {
            st.errors_first = None;
            st.errors_last = None;
            st.errors_seen.clear();
        }
    }
}
