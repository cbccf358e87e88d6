//! Node detail's Kubernetes lines (`--kubernetes`): schedulable or cordoned
//! and by whom, the GPUs Kubernetes counts, conditions that are not OK and
//! the taints; a failed read said first, with the age of what is shown.

use ratatui::text::{Line, Span};

use crate::model::sched::Hold;
use crate::store::kube::KubeOverlay;
use crate::tui::theme::Theme;
use crate::tui::view::human_age;

/// At most three lines for node `i`; none without `--kubernetes`.
pub fn lines<'a>(t: &Theme, kube: &KubeOverlay, i: usize, now_ms: i64) -> Vec<Line<'a>> {
    if !kube.known {
        return Vec::new();
    }
    let mut first = vec![Span::styled("kubernetes ", t.muted)];
    if let Some(e) = &kube.health.error {
        let age = match kube.health.read_ms {
            Some(r) => format!("last read {} ago: ", human_age(now_ms - r)),
            None => "never read: ".into(),
        };
        first.push(Span::styled(format!("{age}{e} │ "), t.crit));
    }
    let Some(k) = kube.of(i) else {
        if kube.health.read_ms.is_some() {
            first.push(Span::styled("not among Kubernetes' GPU nodes", t.muted));
        }
        return vec![Line::from(first)];
    };
    // The GPUs first: at 80 columns the cut falls in the reason's words.
    let gpus = |v: Option<u32>| v.map_or("?".to_string(), |n| n.to_string());
    let short = k.gpu_allocatable.zip(k.gpu_capacity).is_some_and(|(a, c)| a < c);
    first.push(Span::styled(
        format!("{}/{} GPUs allocatable", gpus(k.gpu_allocatable), gpus(k.gpu_capacity)),
        if short { t.warn } else { t.muted },
    ));
    first.push(Span::styled(" · ", t.muted));
    let style = match k.hold() {
        Hold::InService => t.ok,
        Hold::Fleetop { .. } => t.warn,
        Hold::Other => t.crit,
    };
    first.push(Span::styled(k.held_by(), style));
    let mut out = vec![Line::from(first)];
    let problems: Vec<String> = k.problems().map(|c| c.line()).collect();
    if !problems.is_empty() {
        out.push(Line::from(vec![
            Span::styled("  not OK: ", t.muted),
            Span::styled(problems.join(" · "), t.crit),
        ]));
    }
    if !k.taints.is_empty() {
        let taints: Vec<String> = k.taints.iter().map(|x| x.line()).collect();
        out.push(Line::from(vec![
            Span::styled("  taints: ", t.muted),
            Span::raw(taints.join(", ")),
        ]));
    }
    out
}
