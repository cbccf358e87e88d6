//! `fleetop export --view summary`: the headline figures and every flag, a
//! small fraction of the full document, with unknown readings still null.

use std::collections::BTreeSet;

use fleetop::export::{Snapshot, Summary, SummaryView, summary};
use fleetop::ingest::demo;
use fleetop::model::flag::FlagKind;

use crate::fleetop;

/// A 64-node demo (8 GPUs each, every scenario), one ndjson line, full view.
fn full_64() -> (String, Snapshot) {
    let out = fleetop()
        .args(["export", "--demo", "--nodes", "64", "--once", "--format", "ndjson"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).expect("utf-8");
    let snap = serde_json::from_str(line.trim_end()).expect("a full snapshot");
    (line, snap)
}

#[test]
fn the_summary_of_64_nodes_is_under_a_tenth_and_keeps_flags_and_nulls() {
    let (full_line, full) = full_64();
    let sum = summary(&full);
    let sum_line = serde_json::to_string(&sum).expect("encodes");
    // About a tenth is the aim; under one eighth is what is asserted.
    assert!(
        sum_line.len() * 8 < full_line.len(),
        "summary {} bytes, full {} bytes",
        sum_line.len(),
        full_line.len()
    );
    assert_eq!(sum.nodes.len(), 64);
    let mut flags = 0;
    let mut nulls = 0;
    for (s, f) in sum.nodes.iter().zip(&full.nodes) {
        assert_eq!((&s.name, s.status), (&f.name, f.status));
        assert_eq!(s.flags, f.flags, "{}: every flag, as in the full view", s.name);
        flags += s.flags.len();
        assert_eq!(s.gpus.len(), f.gpus.len());
        for (sg, fg) in s.gpus.iter().zip(&f.gpus) {
            assert_eq!(sg.util_pct, fg.util_pct);
            assert_eq!(sg.temp_c, fg.temp_c);
            assert_eq!(sg.power_w, fg.power_w);
            assert_eq!(sg.sm_active_pct, fg.sm_active_pct);
            assert_eq!(sg.error, fg.error);
            nulls += usize::from(sg.temp_c.is_none());
        }
    }
    assert!(
        flags > 0 && nulls > 0,
        "the demo has flagged nodes and a GPU with no readings"
    );
    // Null stays null on the wire: a lost GPU's temperature is written as null.
    let v: serde_json::Value = serde_json::from_str(&sum_line).expect("JSON");
    let lost = v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["gpus"].as_array().into_iter().flatten())
        .find(|g| g["error"].is_string())
        .expect("a GPU with an error");
    assert!(lost["temp_c"].is_null() && lost.get("temp_c").is_some(), "{lost}");
}

#[test]
fn view_summary_writes_the_summary_document_with_each_scenarios_flags() {
    let (nodes, gpus, seed) = (16, 4, 7);
    let out = fleetop()
        .args(["export", "--demo", "--once", "--format", "ndjson", "--view", "summary"])
        .args([
            "--nodes",
            &nodes.to_string(),
            "--gpus",
            &gpus.to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 1, "one compact line");
    let sum: Summary = serde_json::from_str(text.trim_end()).expect("a summary document");
    assert_eq!(sum.view, SummaryView::Summary);
    assert_eq!(sum.schema_version, fleetop::export::SCHEMA_VERSION);
    assert!(
        serde_json::from_str::<Snapshot>(text.trim_end()).is_err(),
        "not a full snapshot"
    );
    let plan = demo::plan(nodes, gpus, seed, 0);
    let mut flagged = BTreeSet::new();
    for (node, cfg) in sum.nodes.iter().zip(&plan) {
        assert_eq!(node.name, cfg.hostname);
        assert!(node.address.starts_with("127.0.0.1:"), "{}", node.address);
        if cfg.scenario == fleetop_agent::sim::Scenario::Xid79 {
            assert_eq!(node.health, fleetop::export::Health::Crit, "a lost GPU is crit");
        }
        assert_eq!(node.gpus.len(), gpus as usize);
        flagged.extend(node.flags.iter().map(|f| f.kind));
    }
    for kind in [
        FlagKind::GpuLost,
        FlagKind::Throttled,
        FlagKind::IbDown,
        // The demo's hung agent, silent for minutes.
        FlagKind::Unreachable,
    ] {
        assert!(flagged.contains(&kind), "{kind:?} missing from {flagged:?}");
    }
}
