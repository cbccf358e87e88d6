//! Detectors: turn a node's samples into flags, with debounce and hysteresis
//! so flags do not flap. They run once per sample, in the agent's time, so
//! history sent on connect raises flags with their true start times.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use fleetop_agent::proto::{GpuSample, NodeInfo, Sample};
use fleetop_agent::throttle;
use serde::Deserialize;

use crate::flags::{ClearedFlag, Flag, FlagKind, Severity, Subject};
use crate::sched::Job;
use crate::store::Derived;

/// Detector thresholds (`[thresholds]` in the config file). Every field is
/// optional there; these defaults are what an on-call SRE would pick.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// A held GPU under this utilization...
    pub idle_util_pct: u32,
    /// ...for this long is idle.
    #[serde(deserialize_with = "de_duration")]
    pub idle_window: Duration,
    /// Consecutive samples with a trouble throttle bit before `throttled`
    /// (HwSlowdown flickers during clock changes).
    pub throttle_raise_samples: u32,
    /// Consecutive clean samples before a raised flag clears.
    pub clear_samples: u32,
    /// Software power cap sustained this long raises `power_capped`.
    #[serde(deserialize_with = "de_duration")]
    pub power_cap_window: Duration,
    /// `hot` within this many degrees of the GPU's slowdown temperature.
    pub hot_margin_c: u32,
    /// Slowdown temperature to assume where the GPU does not report one.
    pub hot_fallback_slowdown_c: u32,
    /// How long an XID keeps its flag after the last one.
    #[serde(deserialize_with = "de_duration")]
    pub xid_hold: Duration,
    /// How long rising IB error counters keep their flag after the last rise.
    #[serde(deserialize_with = "de_duration")]
    pub ib_errors_hold: Duration,
    /// Consecutive samples a link must be down before it is flagged.
    pub link_down_samples: u32,
    /// A node is stale after this many sample intervals without a sample.
    pub stale_intervals: u32,
    /// A stale node whose agent cannot be reached this long is unreachable.
    #[serde(deserialize_with = "de_duration")]
    pub unreachable_after: Duration,
    /// How long cleared flags stay visible.
    #[serde(deserialize_with = "de_duration")]
    pub cleared_keep: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            idle_util_pct: 5,
            idle_window: Duration::from_secs(300),
            throttle_raise_samples: 3,
            clear_samples: 5,
            power_cap_window: Duration::from_secs(300),
            hot_margin_c: 5,
            hot_fallback_slowdown_c: 87,
            xid_hold: Duration::from_secs(3600),
            ib_errors_hold: Duration::from_secs(300),
            link_down_samples: 2,
            stale_intervals: 3,
            unreachable_after: Duration::from_secs(30),
            cleared_keep: Duration::from_secs(900),
        }
    }
}

pub fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s).map_err(|e| serde::de::Error::custom(format!("bad duration '{s}': {e}")))
}

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

/// A condition that must hold for `raise` consecutive samples to turn on and
/// fail for `clear` consecutive samples to turn off.
#[derive(Debug, Default, Clone)]
struct Debounce {
    on_run: u32,
    off_run: u32,
    run_start: i64,
    since: Option<i64>,
}

impl Debounce {
    /// Feeds one sample; returns when the raised condition began, if raised.
    fn update(&mut self, cond: bool, t: i64, raise: u32, clear: u32) -> Option<i64> {
        if cond {
            if self.on_run == 0 {
                self.run_start = t;
            }
            self.on_run += 1;
            self.off_run = 0;
            if self.since.is_none() && self.on_run >= raise.max(1) {
                self.since = Some(self.run_start);
            }
        } else {
            self.off_run += 1;
            self.on_run = 0;
            if self.off_run >= clear.max(1) {
                self.since = None;
            }
        }
        self.since
    }
}

/// Per-GPU detector memory.
#[derive(Debug, Default, Clone)]
struct GpuState {
    throttled: Debounce,
    hot: Debounce,
    lost: Debounce,
    nvlink: Debounce,
    capped: Debounce,
    ecc: Debounce,
    capped_run_start: Option<i64>,
    low_util_since: Option<i64>,
    idle: Debounce,
    xid_first: Option<i64>,
    xid_last: Option<i64>,
    xids: Vec<u32>,
}

#[derive(Debug, Default, Clone)]
struct IbState {
    down: Debounce,
    errors_first: Option<i64>,
    errors_last: Option<i64>,
    /// Error increments over the current episode, by counter name.
    errors_seen: BTreeMap<&'static str, u64>,
}

/// The flags of one node and the memory behind them.
#[derive(Debug, Default, Clone)]
pub struct NodeDetector {
    gpus: Vec<GpuState>,
    ib: Vec<IbState>,
    active: BTreeMap<(FlagKind, Subject), Flag>,
    cleared: VecDeque<ClearedFlag>,
}

/// What XIDs mean, for the ones an SRE meets (NVIDIA's XID catalogue).
/// The second field: whether it points at the hardware (crit) rather than
/// the application (warn).
pub fn xid_meaning(xid: u32) -> (&'static str, bool) {
    match xid {
        13 => ("graphics engine exception (often the application)", false),
        31 => ("GPU memory page fault (often the application)", false),
        43 => ("GPU stopped processing (often the application)", false),
        45 => ("preemptive cleanup after a fault", false),
        48 => ("double-bit ECC error", true),
        61 | 62 => ("internal micro-controller error", true),
        63 | 64 => ("ECC page retirement or row remapping event", true),
        74 => ("NVLink error", true),
        79 => ("GPU has fallen off the bus", true),
        92 => ("high single-bit ECC error rate", true),
        94 => ("contained uncorrectable ECC error", true),
        95 => ("uncontained uncorrectable ECC error", true),
        119 | 120 => ("GSP firmware error", true),
        _ => ("see NVIDIA's XID catalogue", true),
    }
}

impl NodeDetector {
    /// Flags active now, in a stable order (kind, then subject).
    pub fn active(&self) -> impl Iterator<Item = &Flag> {
        self.active.values()
    }

    /// Flags cleared recently, newest last.
    pub fn cleared(&self) -> impl Iterator<Item = &ClearedFlag> {
        self.cleared.iter()
    }

    /// Feeds one sample (with the rates the store derived from it).
    /// `jobs` are the scheduler's jobs on this node (to name who holds an idle GPU).
    pub fn on_sample(&mut self, info: &NodeInfo, s: &Sample, derived: &Derived, jobs: &[Job], th: &Thresholds) {
        let t = s.time_ms;
        let mut want: Vec<Flag> = Vec::new();
        self.gpus
            .resize_with(s.gpus.len().max(self.gpus.len()), Default::default);
        for g in &s.gpus {
            let Some(st) = self.gpus.get_mut(g.index as usize) else {
                continue;
            };
            let slowdown = info
                .gpus
                .iter()
                .find(|i| i.index == g.index)
                .map(|i| i.slowdown_temp_c)
                .filter(|&c| c > 0)
                .unwrap_or(th.hot_fallback_slowdown_c);
            gpu_flags(st, g, t, slowdown, jobs, th, &mut want);
        }
        self.ib
            .resize_with(s.ib_ports.len().max(self.ib.len()), Default::default);
        for p in &s.ib_ports {
            let Some(st) = self.ib.get_mut(p.port as usize) else {
                continue;
            };
            let name = info
                .ib_ports
                .get(p.port as usize)
                .map(|i| format!("{}/{}", i.device, i.port))
                .unwrap_or_else(|| format!("port {}", p.port));
            let deltas = derived
                .ib
                .get(p.port as usize)
                .map(|r| r.errors.as_slice())
                .unwrap_or(&[]);
            ib_flags(st, p, &name, deltas, t, th, &mut want);
        }
        // Node-level flags (stale) are not decided by samples: keep them.
        let keep_node = |k: &(FlagKind, Subject)| k.1 == Subject::Node;
        self.reconcile(want, keep_node, t, th);
    }

    /// Raises or clears the node's `stale` flag (decided by the store's clock).
    /// `stale` is (since, age in ms, detail) while the node is stale.
    pub fn set_stale(&mut self, stale: Option<(i64, i64, String)>, now_ms: i64, th: &Thresholds) {
        let key = (FlagKind::Stale, Subject::Node);
        match stale {
            Some((since_ms, age_ms, detail)) => {
                let f = self.active.entry(key).or_insert_with(|| Flag {
                    kind: FlagKind::Stale,
                    severity: Severity::Warn,
                    subject: Subject::Node,
                    since_ms,
                    detail: String::new(),
                    evidence: BTreeMap::new(),
                });
                f.detail = detail;
                f.evidence.insert("age_s".into(), (age_ms / 1000) as f64);
            }
            None => {
                if let Some(f) = self.active.remove(&key) {
                    self.push_cleared(f, now_ms, th);
                }
            }
        }
    }

    /// Makes the active set match `want`, keeping the start time of flags
    /// that stay and moving the ones that go to the cleared list.
    fn reconcile(&mut self, want: Vec<Flag>, keep: impl Fn(&(FlagKind, Subject)) -> bool, t: i64, th: &Thresholds) {
        let mut next: BTreeMap<(FlagKind, Subject), Flag> = BTreeMap::new();
        for f in want {
            next.insert((f.kind, f.subject), f);
        }
        let old = std::mem::take(&mut self.active);
        for (k, f) in old {
            if next.contains_key(&k) || keep(&k) {
                next.entry(k).or_insert(f);
            } else {
                self.push_cleared(f, t, th);
            }
        }
        self.active = next;
    }

    fn push_cleared(&mut self, flag: Flag, t: i64, th: &Thresholds) {
        self.cleared.push_back(ClearedFlag { flag, cleared_ms: t });
        while let Some(front) = self.cleared.front() {
            if t - front.cleared_ms > ms(th.cleared_keep) || self.cleared.len() > 64 {
                self.cleared.pop_front();
            } else {
                break;
            }
        }
    }
}

fn flag(
    kind: FlagKind,
    severity: Severity,
    subject: Subject,
    since_ms: i64,
    detail: String,
    ev: &[(&str, f64)],
) -> Flag {
    Flag {
        kind,
        severity,
        subject,
        since_ms,
        detail,
        evidence: ev.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
    }
}

fn gpu_flags(
    st: &mut GpuState,
    g: &GpuSample,
    t: i64,
    slowdown_c: u32,
    jobs: &[Job],
    th: &Thresholds,
    out: &mut Vec<Flag>,
) {
    let subject = Subject::Gpu(g.index);
    let (raise, clear) = (th.throttle_raise_samples, th.clear_samples);

    // XIDs first: they arrive with the sample that follows them, lost GPU or not.
    for x in &g.xids {
        st.xid_first.get_or_insert(x.time_ms);
        st.xid_last = Some(x.time_ms);
        if !st.xids.contains(&x.xid) {
            st.xids.push(x.xid);
        }
    }
    match (st.xid_first, st.xid_last) {
        (Some(first), Some(last)) if t - last <= ms(th.xid_hold) => {
            let hw = st.xids.iter().any(|&x| xid_meaning(x).1);
            let text: Vec<String> = st
                .xids
                .iter()
                .map(|&x| format!("XID {x} ({})", xid_meaning(x).0))
                .collect();
            let ev: Vec<(&str, f64)> = st.xids.iter().map(|&x| ("xid", f64::from(x))).collect();
            let sev = if hw { Severity::Crit } else { Severity::Warn };
            out.push(flag(FlagKind::Xid, sev, subject, first, text.join("; "), &ev));
        }
        _ => {
            st.xid_first = None;
            st.xid_last = None;
            st.xids.clear();
        }
    }

    let lost = g.error == "gpu_lost";
    if let Some(since) = st.lost.update(lost, t, 1, clear) {
        out.push(flag(
            FlagKind::GpuLost,
            Severity::Crit,
            subject,
            since,
            "GPU does not answer (lost)".into(),
            &[],
        ));
    }
    if !g.error.is_empty() {
        // No readings to judge the rest by; keep their memory as it is.
        return;
    }

    let trouble = g.throttle_reasons & throttle::TROUBLE;
    if let Some(since) = st.throttled.update(trouble != 0, t, raise, clear) {
        // While raised, name what the latest sample shows (or what raised it).
        let hw = throttle::HW_SLOWDOWN | throttle::HW_THERMAL_SLOWDOWN | throttle::HW_POWER_BRAKE_SLOWDOWN;
        let sev = if trouble == 0 || trouble & hw != 0 {
            Severity::Crit
        } else {
            Severity::Warn
        };
        let names = if trouble == 0 {
            "clearing".to_string()
        } else {
            throttle::names(trouble).join(", ")
        };
        out.push(flag(
            FlagKind::Throttled,
            sev,
            subject,
            since,
            format!("{names}; SM {} MHz, {} °C", g.sm_clock_mhz, g.temp_c),
            &[
                ("throttle_mask", g.throttle_reasons as f64),
                ("sm_clock_mhz", f64::from(g.sm_clock_mhz)),
                ("temp_c", f64::from(g.temp_c)),
            ],
        ));
    }

    // A power cap is normal at full load: flag only when it lasts.
    let capped = g.throttle_reasons & throttle::SW_POWER_CAP != 0 && trouble == 0;
    if capped {
        st.capped_run_start.get_or_insert(t);
    } else {
        st.capped_run_start = None;
    }
    let sustained = st.capped_run_start.is_some_and(|s| t - s >= ms(th.power_cap_window));
    if let Some(since) = st.capped.update(sustained, t, 1, clear) {
        let start = st.capped_run_start.unwrap_or(since);
        out.push(flag(
            FlagKind::PowerCapped,
            Severity::Info,
            subject,
            start,
            format!(
                "at its power cap: {:.0} of {:.0} W",
                f64::from(g.power_mw) / 1e3,
                f64::from(g.power_limit_mw) / 1e3
            ),
            &[
                ("power_w", f64::from(g.power_mw) / 1e3),
                ("power_limit_w", f64::from(g.power_limit_mw) / 1e3),
            ],
        ));
    }

    // Hysteresis in degrees: raised at slowdown - margin, cleared 2 °C below.
    let hot_at = slowdown_c.saturating_sub(th.hot_margin_c);
    let hot_now = if st.hot.since.is_some() {
        g.temp_c + 2 > hot_at
    } else {
        g.temp_c >= hot_at
    };
    if let Some(since) = st.hot.update(hot_now, t, raise, clear) {
        let sev = if g.temp_c >= slowdown_c {
            Severity::Crit
        } else {
            Severity::Warn
        };
        out.push(flag(
            FlagKind::Hot,
            sev,
            subject,
            since,
            format!("{} °C, slowdown at {slowdown_c} °C", g.temp_c),
            &[
                ("temp_c", f64::from(g.temp_c)),
                ("slowdown_temp_c", f64::from(slowdown_c)),
            ],
        ));
    }

    let down = g.nvlink_down_mask.count_ones();
    if let Some(since) = st.nvlink.update(down > 0, t, th.link_down_samples, clear) {
        let links: Vec<String> = (0..32)
            .filter(|b| g.nvlink_down_mask & (1 << b) != 0)
            .map(|b| b.to_string())
            .collect();
        out.push(flag(
            FlagKind::NvlinkDown,
            Severity::Crit,
            subject,
            since,
            format!("NVLink link {} down", links.join(", ")),
            &[("links_down", f64::from(down))],
        ));
    }

    if let Some(since) = st.ecc.update(g.ecc_uncorrected_volatile > 0, t, 1, 1) {
        out.push(flag(
            FlagKind::EccUncorrected,
            Severity::Crit,
            subject,
            since,
            format!(
                "{} uncorrectable ECC errors, {} rows pending remap",
                g.ecc_uncorrected_volatile, g.remapped_rows_pending
            ),
            &[
                ("ecc_uncorrected", g.ecc_uncorrected_volatile as f64),
                ("remapped_rows_pending", f64::from(g.remapped_rows_pending)),
            ],
        ));
    }

    // Idle: held (a process on it) yet under the threshold for the whole window.
    let held = !g.processes.is_empty();
    if held && g.util_pct < th.idle_util_pct {
        st.low_util_since.get_or_insert(t);
    } else {
        st.low_util_since = None;
    }
    let idle_long = st.low_util_since.is_some_and(|s| t - s >= ms(th.idle_window));
    if let Some(since) = st.idle.update(idle_long, t, 1, 1) {
        let start = st.low_util_since.unwrap_or(since);
        let mins = (t - start) / 60_000;
        // Who holds it, as an SRE asks: the job, its user, and how many GPUs it has here.
        let mut ids: Vec<u64> = g.processes.iter().map(|p| p.job_id).filter(|&j| j != 0).collect();
        ids.dedup();
        let named: Vec<String> = ids
            .iter()
            .map(|id| match jobs.iter().find(|j| j.id == *id) {
                Some(j) => format!("job {id} ({}, {} GPUs here)", j.user, j.gpus_per_node),
                None => format!("job {id}"),
            })
            .collect();
        let holder = if named.is_empty() {
            format!("{} process(es)", g.processes.len())
        } else {
            named.join(", ")
        };
        out.push(flag(
            FlagKind::Idle,
            Severity::Warn,
            subject,
            start,
            format!("{holder} holds it at {}% for {mins} min", g.util_pct),
            &[
                ("util_pct", f64::from(g.util_pct)),
                ("mem_used_bytes", g.mem_used_bytes as f64),
            ],
        ));
    }
}

fn ib_flags(
    st: &mut IbState,
    p: &fleetop_agent::proto::IbSample,
    name: &str,
    deltas: &[Option<fleetop_agent::counters::Delta>],
    t: i64,
    th: &Thresholds,
    out: &mut Vec<Flag>,
) {
    let subject = Subject::IbPort(p.port);
    let down = !p.state.is_empty() && p.state != "ACTIVE";
    if let Some(since) = st.down.update(down, t, th.link_down_samples, th.clear_samples) {
        out.push(flag(
            FlagKind::IbDown,
            Severity::Crit,
            subject,
            since,
            format!("{name} {} ({})", p.state, p.phys_state),
            &[("rate_gbps", f64::from(p.rate_gbps))],
        ));
    }
    let mut rose = false;
    for (i, d) in deltas.iter().enumerate() {
        let Some(v) = d.and_then(|d| d.value()) else {
            continue;
        };
        if v > 0 {
            rose = true;
            *st.errors_seen.entry(fleetop_agent::ib::counter_name(i)).or_default() += v;
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
                subject,
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

#[cfg(test)]
mod tests {
    use super::*;
    use fleetop_agent::proto::{GpuInfo, GpuProcess, IbPortInfo, IbSample};

    fn info() -> NodeInfo {
        NodeInfo {
            gpus: vec![GpuInfo {
                index: 0,
                slowdown_temp_c: 87,
                ..Default::default()
            }],
            ib_ports: vec![IbPortInfo {
                device: "mlx5_0".into(),
                port: 1,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn gpu(f: impl FnOnce(&mut GpuSample)) -> GpuSample {
        let mut g = GpuSample {
            util_pct: 95,
            temp_c: 60,
            sm_clock_mhz: 1900,
            ..Default::default()
        };
        f(&mut g);
        g
    }

    /// Feeds one GPU sample per second from t=0 and returns the active kinds after each.
    fn run(samples: Vec<GpuSample>, th: &Thresholds) -> Vec<Vec<FlagKind>> {
        let mut d = NodeDetector::default();
        let info = info();
        samples
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let s = Sample {
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
        let flick = |on: bool| gpu(|g| g.throttle_reasons = if on { throttle::HW_SLOWDOWN } else { 0 });
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
        let hot = || gpu(|g| g.throttle_reasons = throttle::HW_THERMAL_SLOWDOWN);
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
            let g = gpu(|g| g.throttle_reasons = throttle::HW_POWER_BRAKE_SLOWDOWN);
            let s = Sample {
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
    fn hot_has_hysteresis_in_degrees() {
        let th = Thresholds::default(); // hot at 82 °C for an 87 °C slowdown
        let temps = [83, 83, 83, 81, 81, 81, 81, 81, 79, 79, 79, 79, 79];
        let seq = temps.iter().map(|&t| gpu(|g| g.temp_c = t)).collect();
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
                g.util_pct = 0;
                g.processes.push(GpuProcess {
                    pid: 1,
                    used_mem_bytes: 1,
                    job_id: 4411,
                });
            })
        };
        let empty = || gpu(|g| g.util_pct = 0);
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
            let s = Sample {
                time_ms: t * 1000,
                gpus: vec![held()],
                ..Default::default()
            };
            d.on_sample(&info(), &s, &Derived::default(), &[], &th);
        }
        let f = d.active().next().expect("idle");
        assert!(f.detail.contains("job 4411"), "{}", f.detail);
        // With the scheduler's jobs, the user and the job's GPUs are named.
        let job = Job {
            id: 4411,
            user: "alice".into(),
            name: "train".into(),
            elapsed_s: 60,
            gpus_per_node: 8,
            nodes: vec![],
        };
        let s = Sample {
            time_ms: 12_000,
            gpus: vec![held()],
            ..Default::default()
        };
        d.on_sample(&info(), &s, &Derived::default(), &[job], &th);
        let f = d.active().next().expect("idle");
        assert!(
            f.detail.starts_with("job 4411 (alice, 8 GPUs here) holds it at 0%"),
            "{}",
            f.detail
        );
    }

    #[test]
    fn ib_errors_hold_for_a_while_then_clear() {
        use fleetop_agent::counters::Delta;
        let th = Thresholds {
            ib_errors_hold: Duration::from_secs(3),
            ..Default::default()
        };
        let mut d = NodeDetector::default();
        let port = IbSample {
            state: "ACTIVE".into(),
            ..Default::default()
        };
        let mut kinds = Vec::new();
        for t in 0..8 {
            let mut errors = vec![None; fleetop_agent::ib::ERROR_COUNTERS.len()];
            errors[0] = Some(Delta::Exact(if t == 1 { 5 } else { 0 }));
            let derived = Derived {
                ib: vec![crate::store::IbRates {
                    errors,
                    ..Default::default()
                }],
                ..Default::default()
            };
            let s = Sample {
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
}
