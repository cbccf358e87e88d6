//! A burn-in's verdict as its agent keeps it (`BurnInRecord`, in the
//! node's description, live on its stream and at the end of a RunBench
//! answer), and each check of a suite (`BenchResult`), decoded once.

use fleetop_proto::pb;

use super::text;
use crate::model::bench::{BenchResult, BurnIn, Identity, Suite, Verdict};

/// One measurement of a suite.
pub fn check(r: pb::BenchResult) -> BenchResult {
    let verdict = match r.verdict() {
        pb::Verdict::Pass => Verdict::Pass,
        pb::Verdict::Warn => Verdict::Warn,
        pb::Verdict::Fail => Verdict::Fail,
        // An agent that gives no verdict has not measured anything we can trust.
        pb::Verdict::Skipped | pb::Verdict::Unspecified => Verdict::Skipped,
    };
    let measured = verdict != Verdict::Skipped;
    BenchResult {
        name: r.name,
        gpu: u32::try_from(r.gpu).ok(),
        peer: u32::try_from(r.peer).ok(),
        value: measured.then_some(r.value),
        unit: (measured && !r.unit.is_empty()).then_some(r.unit),
        expected_min: (r.expected_min > 0.0).then_some(r.expected_min),
        expected_source: (!r.expected_source.is_empty()).then_some(r.expected_source),
        verdict,
        reason: (!r.reason.is_empty()).then_some(r.reason),
    }
}

/// A burn-in's record; `skew_ms` (the agent's clock minus the console's)
/// puts its times on the console's clock. Its text is made printable by
/// `NodeDesc::printable` where it comes in a description; `printable`
/// here for one that comes alone.
pub fn burn_in(r: pb::BurnInRecord, skew_ms: i64) -> BurnIn {
    BurnIn {
        started_ms: r.started_ms - skew_ms,
        ended_ms: r.ended_ms - skew_ms,
        suite: Suite::parse(&r.suite),
        passed: r.passed,
        requested_by: r.requested_by,
        node: Identity {
            hostname: r.hostname,
            machine_id: text(r.machine_id),
            boot_id: text(r.boot_id),
            gpu_uuids: r.gpu_uuids,
        },
        checks: r.checks.into_iter().map(check).collect(),
        error: text(r.error),
    }
}

/// A record that came alone (live, or at the end of a burn-in), made
/// printable and bounded as a description's are.
pub fn burn_in_alone(r: pb::BurnInRecord, skew_ms: i64) -> BurnIn {
    let desc = crate::model::sample::NodeDesc {
        health: crate::model::sample::NodeHealth {
            burn_ins: vec![burn_in(r, skew_ms)],
            ..Default::default()
        },
        ..Default::default()
    };
    let mut d = desc.printable();
    d.health.burn_ins.remove(0)
}
