//! What a heatmap row says beyond the heat of its numbers: a node nobody
//! uses ("free", its cells dotted and muted, so 0% of a free node never
//! reads as a quiet but healthy busy one) and which GPU carries a flag
//! (`!` crit, `*` warn in its cell, the dense wall's glyphs). Neither
//! relies on colour: both are words or glyphs, legible with NO_COLOR.

use std::collections::BTreeMap;

use crate::detect::Thresholds;
use ratatui::style::{Modifier, Style};

use crate::model::flag::{Severity, Subject};
use crate::store::NodeState;
use crate::tui::theme::Theme;

/// A free GPU cell's dots (cut to the cell's width).
pub const FREE: &str = "┄┄┄";

/// A node nobody uses: a sample in which every GPU answers under the idle
/// threshold with no process on it, and no Slurm job on the node (where a
/// scheduler is known, it neither lists a job there nor calls it
/// allocated). A GPU that gives no utilization (an error, MIG) cannot be
/// judged, so its node is never called free.
pub fn is_free(n: &NodeState, th: &Thresholds) -> bool {
    let Some(s) = &n.last else { return false };
    let gpus_free = !s.gpus.is_empty()
        && s.gpus.iter().all(|g| {
            g.error.is_none()
                && g.processes.is_empty()
                && g.mig.is_empty()
                && g.util_pct.is_some_and(|u| u < th.idle_util_pct)
        });
    let no_job = n.scheduler.as_ref().is_none_or(|v| {
        let state = v.node.state.to_ascii_lowercase();
        v.jobs.is_empty() && !state.contains("alloc") && !state.contains("mix")
    });
    gpus_free && no_job
}

/// Each GPU's worst flag of warn or worse, by GPU index.
pub fn gpu_marks(n: &NodeState) -> BTreeMap<u32, Severity> {
    let mut out: BTreeMap<u32, Severity> = BTreeMap::new();
    for f in n.detector.active().filter(|f| f.severity >= Severity::Warn) {
        if let Subject::Gpu(g) = f.subject {
            let e = out.entry(g).or_insert(f.severity);
            *e = (*e).max(f.severity);
        }
    }
    out
}

/// The glyph of a flag's severity in a cell, as on the dense wall.
pub fn glyph(s: Severity) -> char {
    match s {
        Severity::Crit => '!',
        _ => '*',
    }
}

/// A cell's text with `mark` just before its value: "94" in four columns
/// is " !94". The gap before a cell is never taken ("93!ERR" and "96!99"
/// read as one number) and the value is never cut or saturated under a
/// mark: where the gap, the mark and the value do not all fit, `None`, and
/// the cell's style carries the flag instead (`unmarked_style`).
pub fn mark_cell(raw: &str, w: usize, mark: char) -> Option<String> {
    let room = w.checked_sub(2).filter(|r| *r > 0)?;
    (raw.chars().count() <= room).then(|| format!("{:>w$}", format!("{mark}{raw}")))
}

/// A flagged cell with no room for its mark: the severity's colour
/// reversed, so it stands out with and without colour.
pub fn unmarked_style(t: &Theme, s: Severity) -> Style {
    match s {
        Severity::Crit => t.crit_block(),
        _ => t.warn.add_modifier(Modifier::REVERSED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_never_takes_the_gap_nor_cuts_the_value() {
        assert_eq!(mark_cell("94", 4, '!').as_deref(), Some(" !94"));
        assert_eq!(mark_cell("5", 4, '*').as_deref(), Some("  *5"));
        // No room for gap, mark and value: the style says it instead.
        assert_eq!(mark_cell("100", 4, '*'), None);
        assert_eq!(mark_cell("ERR", 4, '!'), None);
        assert_eq!(mark_cell("94", 3, '!'), None);
        assert_eq!(mark_cell("9", 1, '!'), None);
    }
}
