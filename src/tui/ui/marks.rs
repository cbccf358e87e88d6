//! What a heatmap row says beyond the heat of its numbers: a node nobody
//! uses ("free", its cells dotted and muted, so 0% of a free node never
//! reads as a quiet but healthy busy one) and which GPU carries a flag
//! (`!` crit, `*` warn in its cell, the dense wall's glyphs). Neither
//! relies on colour: both are words or glyphs, legible with NO_COLOR.

use std::collections::BTreeMap;

use crate::detect::Thresholds;
use crate::model::flag::{Severity, Subject};
use crate::store::NodeState;

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

/// A cell's text `fitted` (already `w` columns) with `mark` just before
/// its value: "  94" becomes " !94". The value keeps its rule (a number
/// saturates, never cut): it is fitted again in one column less where
/// there is no gap to take.
pub fn mark_cell(fitted: &str, raw: &str, w: usize, mark: char, fit: impl Fn(&str, usize) -> String) -> String {
    if w <= 1 {
        return mark.to_string();
    }
    let value = match fitted.strip_prefix(' ') {
        Some(rest) => rest.to_string(),
        None => fit(raw, w - 1),
    };
    let lead = value.len() - value.trim_start().len();
    format!("{}{mark}{}", &value[..lead], value.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(s: &str, w: usize) -> String {
        let n = s.chars().count();
        if n < w {
            format!("{s:>w$}")
        } else if s.chars().all(|c| c.is_ascii_digit()) && n > w {
            "9".repeat(w)
        } else {
            s.chars().take(w).collect()
        }
    }

    #[test]
    fn a_mark_takes_the_gap_and_never_cuts_the_value() {
        assert_eq!(mark_cell("  94", "94", 4, '!', fit), " !94");
        assert_eq!(mark_cell(" 100", "100", 4, '*', fit), "*100");
        assert_eq!(mark_cell("100", "100", 3, '!', fit), "!99");
        assert_eq!(mark_cell(" ERR", "ERR", 4, '!', fit), "!ERR");
        assert_eq!(mark_cell("9", "94", 1, '!', fit), "!");
        assert_eq!(mark_cell("", "", 0, '!', fit), "!");
    }
}
