//! Burn-in: the suite about to run and on which nodes; stopping it.

use std::collections::BTreeSet;

use ratatui::buffer::Buffer;
use ratatui::text::Line;

use super::{Room, answers, guard_lines, wrap};
use crate::model::bench::Suite;
use crate::model::sample::Vendor;
use crate::tui::app::App;
use crate::tui::modal::Guard;
use crate::tui::ui::popup;
use crate::tui::view::count;

pub(super) fn render(app: &App, nodes: &[usize], suite: Suite, guard: Option<&Guard>, room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, inner, area } = room;
    let names: Vec<&str> = nodes
        .iter()
        .filter_map(|&i| app.store.nodes.get(i))
        .map(|n| n.target.name.as_str())
        .collect();
    let suite = suite.name();
    let mut lines = vec![
        Line::from(format!(
            " Run the {suite} burn-in suite on {}?",
            count(names.len(), "node")
        )),
        Line::from(format!("   {}", names.join(" "))),
        Line::from(""),
    ];
    let vendors: BTreeSet<Vendor> = nodes
        .iter()
        .filter_map(|&i| app.store.nodes.get(i)?.info.as_ref())
        .map(|info| info.vendor())
        .collect();
    lines.extend(wrap(&checks(&vendors), inner, " ").into_iter().map(Line::from));
    lines.push(Line::from(
        " The GPUs are busy for a few minutes: jobs on them will slow down.",
    ));
    lines.push(Line::from(""));
    match guard {
        Some(g) => lines.extend(guard_lines(t, g, Some(("Tab", "quick/full")), inner)),
        None => lines.push(answers(t, "run", &[("s", "quick/full")], "cancel")),
    }
    popup(t, "confirm burn-in", lines, width, area, buf);
}

/// What a burn-in checks, in the words of the chosen nodes' vendors: AMD
/// nodes have XGMI and RAS events, and no collective test yet.
fn checks(vendors: &BTreeSet<Vendor>) -> String {
    let nvidia = vendors.is_empty() || vendors.contains(&Vendor::Nvidia);
    let amd = vendors.contains(&Vendor::Amd);
    let (links, collective, faults) = match (nvidia, amd) {
        (true, false) => ("NVLink", "NCCL all-reduce, ", "XIDs"),
        (false, _) => ("XGMI", "", "RAS events"),
        (true, true) => ("NVLink or XGMI", "NCCL all-reduce (NVIDIA), ", "XIDs, RAS events"),
    };
    format!(
        " GPU copies (HBM, PCIe, {links}), {collective}a GEMM burn watched for throttling, {faults} and ECC errors, host memory, and TCP to the next node."
    )
}

pub(super) fn cancel(app: &App, nodes: &[String], room: Room, buf: &mut Buffer) {
    let t = &app.theme;
    let Room { width, area, .. } = room;
    let lines = vec![
        Line::from(format!(" Stop the burn-in on {}?", count(nodes.len(), "node"))),
        Line::from(format!("   {}", nodes.join(" "))),
        Line::from(" They end as cancelled: no verdict on the hardware."),
        Line::from(""),
        answers(t, "stop it", &[], "let it run"),
    ];
    popup(t, "cancel burn-in", lines, width, area, buf);
}
