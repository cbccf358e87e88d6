//! Node detail's Ray line (`--ray`): the node's status in Ray, its GPUs
//! in use, and the actors and tasks holding them; a failed read said
//! instead, with its age.

use ratatui::text::{Line, Span};

use crate::model::ray::RayNodeStatus;
use crate::store::ray::RayState;
use crate::tui::theme::Theme;
use crate::tui::view::human_age;

/// "ray running · 2/2 GPUs in use · Trainer trainer0 (job 01000000, pid
/// 17290) · ..."; draining first and in warning colours; where Ray has no
/// such node, or cannot be read, it says so.
pub fn line<'a>(t: &Theme, ray: &RayState, node: usize, now_ms: i64) -> Line<'a> {
    let mut spans = vec![Span::styled("ray ", t.muted)];
    if let Some(e) = &ray.health.error {
        let age = ray.health.error_ms.map(|ms| human_age(now_ms - ms)).unwrap_or_default();
        spans.push(Span::styled(format!("not read ({age} ago): {e}"), t.crit));
        return Line::from(spans);
    }
    if ray.health.read_ms.is_none() {
        spans.push(Span::styled("not read yet", t.muted));
        return Line::from(spans);
    }
    let Some(r) = ray.node(node) else {
        spans.push(Span::styled("no Ray node here (by name or address)", t.muted));
        return Line::from(spans);
    };
    let style = match r.status {
        RayNodeStatus::Dead => t.crit,
        RayNodeStatus::Draining => t.warn,
        _ => t.ok,
    };
    spans.push(Span::styled(r.status.word().to_string(), style));
    if r.head {
        spans.push(Span::styled(" (head)", t.muted));
    }
    if let (Some(used), Some(total)) = (r.gpus_used, r.gpus_total) {
        spans.push(Span::raw(format!(" · {used}/{total} GPUs in use")));
    }
    let mut any = false;
    for w in ray.work(node) {
        any = true;
        let pid = w.pid.map(|p| format!(", pid {p}")).unwrap_or_default();
        spans.push(Span::styled(" · ", t.muted));
        spans.push(Span::raw(format!("{} (job {}{pid})", w.what, w.job)));
    }
    if !any {
        spans.push(Span::styled(" · no GPU work", t.muted));
    }
    Line::from(spans)
}
