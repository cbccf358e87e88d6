//! What the agent judges from its latest sample: `fleetop_flag` (one series
//! per condition, graded by the fault catalog) and `fleetop_node_health`
//! (their worst). Apart from the families of readings: these are verdicts
//! on them, and the stale path of a scrape writes them too.

use fleetop_catalog::{Action, Severity};
use fleetop_proto::{absent as a, throttle};

use super::gpu::Gpu;
use super::text::{Kind, Writer, push_label};
use crate::proto::{IbSample, NodeInfo};

pub(super) const FLAG_HELP: &str = "1 for each condition the agent sees in its latest sample, by kind, severity and action (the fault catalog's, docs/faults.md; no debounce or time window: the console's detectors add those).";

const HEALTH_HELP: &str = "The node's health as the agent judges its latest sample: 0 ok, 1 warn, 2 crit (its worst fleetop_flag's severity; info counts as ok).";

/// `fleetop_node_health`: what `fleetop_flag` adds up to, one series a node,
/// so an alert rule or a dashboard needs no aggregation.
pub(super) fn node_health(w: &mut Writer, info: &NodeInfo, worst: Severity) {
    let mut l = String::new();
    push_label(&mut l, "Hostname", &info.hostname);
    w.family("fleetop_node_health", Kind::Gauge, HEALTH_HELP);
    let v = match worst {
        Severity::Crit => 2,
        Severity::Warn => 1,
        Severity::Info => 0,
    };
    w.sample(&l, &[], v);
}

/// What the agent can tell from its latest sample alone. Flags that need a
/// window or thresholds held by the console (idle, underused, hot,
/// power_capped, ib_errors, stuck for long) are raised by the console only.
/// Returns the worst severity raised (`Info` for none).
pub(super) fn flags(w: &mut Writer, info: &NodeInfo, gpus: &[Gpu], ports: &[IbSample]) -> Severity {
    w.family("fleetop_flag", Kind::Gauge, FLAG_HELP);
    let mut worst = Severity::Info;
    for g in gpus {
        for (kind, sev, action) in gpu_flags(g) {
            worst = worst.max(sev);
            // The action label is the fault catalog's, as on the console.
            w.each(
                &g.labels,
                &[("kind", kind), ("severity", sev.name()), ("action", action.name())],
                1,
            );
        }
    }
    for p in ports {
        let Some(pi) = info.ib_ports.get(p.port as usize) else {
            continue;
        };
        if p.state.is_empty() || p.state == "ACTIVE" {
            continue;
        }
        let mut l = String::new();
        push_label(&mut l, "device", &pi.device);
        l.push(',');
        push_label(&mut l, "port", &pi.port.to_string());
        l.push(',');
        push_label(&mut l, "Hostname", &info.hostname);
        let action = fleetop_catalog::flag("ib_down").map_or(Action::None, |e| e.immediate);
        w.sample(
            &l,
            &[("kind", "ib_down"), ("severity", "crit"), ("action", action.name())],
            1,
        );
        worst = Severity::Crit;
    }
    if let Some(sev) = gpu_library(info) {
        let mut l = String::new();
        push_label(&mut l, "Hostname", &info.hostname);
        let action = fleetop_catalog::flag("gpu_library").map_or(Action::None, |e| e.immediate);
        w.sample(
            &l,
            &[
                ("kind", "gpu_library"),
                ("severity", sev.name()),
                ("action", action.name()),
            ],
            1,
        );
        worst = worst.max(sev);
    }
    worst
}

/// `gpu_library` (crit) where no GPU library loaded (backend "none") on a
/// node that has GPUs: on its PCI bus, or as many as `--expect-gpus` says.
/// A node with neither (a login node) is not judged.
fn gpu_library(info: &NodeInfo) -> Option<Severity> {
    let expected = info.gpus_on_pci > 0 || info.expect_gpus > 0 || !info.gpus_missing_pci.is_empty();
    (info.backend == "none" && expected).then_some(Severity::Crit)
}

/// What the agent raises on one GPU from its latest sample: each flag's
/// kind, severity and action (the fault catalog's). AMD's `gpu_health`
/// is this GPU's verdict too.
pub(super) fn gpu_flags(g: &Gpu) -> Vec<(&'static str, Severity, Action)> {
    let mut out = Vec::new();
    let catalog = |kind: &str| fleetop_catalog::flag(kind).map_or(Action::None, |e| e.immediate);
    if g.s.error == "gpu_lost" {
        out.push(("gpu_lost", Severity::Crit, catalog("gpu_lost")));
    } else if !g.answered() {
        // An NVML error on the GPU, in the agent's words: a reset is
        // the first thing to try (the console's detectors grade it).
        out.push(("gpu_error", Severity::Crit, Action::ResetGpu));
    }
    // XIDs graded by the catalog: the most urgent code decides.
    if let Some(a) =
        g.s.xids
            .iter()
            .map(|x| fleetop_catalog::xid_action(x.xid))
            .max_by_key(|a| a.urgency())
    {
        out.push(("xid", a.severity(), a));
    }
    let mut raise = |kind: &'static str, sev: Severity| out.push((kind, sev, catalog(kind)));
    if let Some(mask) = g.opt(a::THROTTLE, g.s.throttle_reasons) {
        let trouble = mask & throttle::TROUBLE;
        let hw = throttle::HW_SLOWDOWN | throttle::HW_THERMAL_SLOWDOWN | throttle::HW_POWER_BRAKE_SLOWDOWN;
        if trouble & hw != 0 {
            raise("throttled", Severity::Crit);
        } else if trouble != 0 {
            raise("throttled", Severity::Warn);
        }
    }
    if g.opt(a::ECC, g.s.ecc_uncorrected_volatile).is_some_and(|n| n > 0) {
        raise("ecc_uncorrected", Severity::Crit);
    }
    if g.has(a::REMAPPED_ROWS) {
        if g.s.remapped_rows_failed != 0 {
            raise("remap_failed", Severity::Crit);
        }
        if g.s.remapped_rows_pending != 0 {
            raise("remap_pending", Severity::Warn);
        }
    }
    if g.answered()
        && let Some(gi) = g.info
    {
        let down =
            g.s.nvlink_state
                .iter()
                .zip(&gi.nvlinks)
                .any(|(&st, l)| st == 0 && !l.inactive_at_start);
        if down {
            raise("nvlink_down", Severity::Crit);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::proto::Sample;
    use crate::serve::metrics::tests::{info, lines, scrape};

    /// No GPU library loaded on a node with GPUs on its bus (or told to
    /// expect some): `gpu_library`, crit, and the node's health says so. A
    /// node with neither (a login node) has no flag.
    #[test]
    fn a_gpu_library_that_did_not_load_where_gpus_are_is_crit() {
        let s = Sample {
            time_ms: 10_000,
            ..Default::default()
        };
        let mut i = info(0);
        i.backend = "none".into();
        let t = scrape(&i, std::slice::from_ref(&s), 10_100);
        assert!(lines(&t, "fleetop_flag").is_empty(), "{t}");
        assert!(lines(&t, "fleetop_node_health")[0].ends_with(" 0"), "{t}");
        for (on_pci, expect) in [(8, 0), (0, 8)] {
            i.gpus_on_pci = on_pci;
            i.expect_gpus = expect;
            let t = scrape(&i, std::slice::from_ref(&s), 10_100);
            let flags = lines(&t, "fleetop_flag");
            assert_eq!(flags.len(), 1, "{t}");
            assert!(
                flags[0].contains("kind=\"gpu_library\",severity=\"crit\",action=\"reboot_node\""),
                "{t}"
            );
            assert!(lines(&t, "fleetop_node_health")[0].ends_with(" 2"), "{t}");
        }
        // A library that loaded is judged by its GPUs, not by this.
        i.backend = "nvml".into();
        let t = scrape(&i, std::slice::from_ref(&s), 10_100);
        assert!(lines(&t, "fleetop_flag").is_empty(), "{t}");
    }
}
