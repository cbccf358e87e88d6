//! The group view (`J`): one line per Slurm job, partition, rack,
//! Kubernetes pod or Ray job (`b` cycles) on the shown nodes, the least busy first, so "job 4152 holds 64
//! idle GPUs" is one line. Enter shows the group's nodes on the heatmap.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, Widget};

use super::{block, cut, line_at, severity_style};
use crate::ingest::hostlist;
use crate::tui::app::App;
use crate::tui::view::{self, GroupBy};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let by = app.groups.by;
    let rows = view::groups(&app.store, &app.visible(), by);
    let what = match by {
        GroupBy::Job | GroupBy::RayJob => {
            let gpus: usize = rows.iter().map(|r| r.gpus).sum();
            let jobs = if by == GroupBy::Job { "jobs" } else { "ray jobs" };
            format!("{jobs} · {} holding {}", rows.len(), view::count(gpus, "GPU"))
        }
        GroupBy::Pod => format!("pods · {}", rows.len()),
        GroupBy::Partition => format!("partitions · {}", rows.len()),
        GroupBy::Rack => format!("racks · {}", rows.len()),
    };
    let b = block(t, format!(" {what} · least busy first · b: by {} ", by.next().name()));
    let inner = b.inner(area);
    b.render(area, buf);
    if rows.is_empty() {
        let msg = match by {
            GroupBy::Job => "no GPU process belongs to a Slurm job on the shown nodes",
            GroupBy::RayJob if app.store.ray.is_none() => "Ray is not read: start with --ray URL",
            GroupBy::RayJob => "no GPU process belongs to a Ray actor or task on the shown nodes",
            _ => "no node is shown",
        };
        line_at(Line::from(Span::styled(msg, t.muted)), inner, 0, buf);
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let first = app.groups.cursor.saturating_sub(height.saturating_sub(1));
    let shown: Vec<(usize, &view::GroupRow)> = rows.iter().enumerate().skip(first).take(height).collect();
    // The columns are sized by what the shown rows hold, so nothing in
    // them is ever cut; where they do not all fit, whole columns give way.
    let texts: Vec<RowText> = shown.iter().map(|(_, r)| RowText::of(r, by)).collect();
    let lay = Layout::fit(&texts, by, inner.width as usize);
    let lines = shown.iter().zip(&texts).map(|(&(pos, r), tx)| {
        let names: Vec<String> = r
            .nodes
            .iter()
            .map(|&i| app.store.nodes[i].target.name.clone())
            .collect();
        let flags = match r.worst {
            Some(s) => Span::styled(
                if lay.short_flags {
                    tx.flags_short.clone()
                } else {
                    tx.flags.clone()
                },
                severity_style(t, s),
            ),
            None => Span::styled("-", t.muted),
        };
        let mut cells = vec![Cell::from(cut(&tx.key, lay.key))];
        if by.is_job() {
            if lay.user > 0 {
                cells.push(Cell::from(cut(&tx.user, lay.user)));
            }
            if lay.name > 0 {
                cells.push(Cell::from(cut(&tx.name, lay.name)));
            }
        } else {
            cells.push(Cell::from(format!("{:>w$}", tx.nodes, w = lay.nodes)));
        }
        cells.extend([
            Cell::from(format!("{:>w$}", tx.gpus, w = lay.gpus)),
            Cell::from(format!("{:>w$}", tx.idle, w = lay.idle)),
            Cell::from(format!("{:>w$}", tx.util, w = lay.util)),
            Cell::from(flags),
            Cell::from(fit_hosts(&names, lay.hosts)),
        ]);
        let row = Row::new(cells);
        if pos == app.groups.cursor {
            row.style(t.selected)
        } else {
            row
        }
    });
    let mut widths = vec![Constraint::Length(lay.key as u16)];
    let mut header = vec![if by.is_job() { "job" } else { by.name() }];
    if by.is_job() {
        for (w, h) in [(lay.user, "user"), (lay.name, "name")] {
            if w > 0 {
                widths.push(Constraint::Length(w as u16));
                header.push(h);
            }
        }
    } else {
        widths.push(Constraint::Length(lay.nodes as u16));
        header.push("nodes");
    }
    for (w, h) in [
        (lay.gpus, "GPUs"),
        (lay.idle, "idle"),
        (lay.util, "util"),
        (lay.flags, "flags"),
    ] {
        widths.push(Constraint::Length(w as u16));
        header.push(h);
    }
    widths.push(Constraint::Min(0));
    header.push(if by.is_job() { "nodes" } else { "hosts" });
    Table::new(lines, widths)
        .header(Row::new(header).style(t.title))
        .column_spacing(1)
        .render(inner, buf);
}

/// One group row's cells as text, before the columns are sized.
struct RowText {
    key: String,
    user: String,
    name: String,
    nodes: String,
    gpus: String,
    idle: String,
    util: String,
    /// "3 crit 12 warn", and by the short rule "3c 12w" (the severity's
    /// first letter, as help says) where the words do not fit.
    flags: String,
    flags_short: String,
}

impl RowText {
    fn of(r: &view::GroupRow, by: GroupBy) -> RowText {
        let dash = || "-".to_string();
        let short: Vec<String> = r
            .flags
            .iter()
            .zip(['c', 'w', 'i'])
            .filter(|(c, _)| **c > 0)
            .map(|(c, w)| format!("{c}{w}"))
            .collect();
        RowText {
            key: r.key.clone(),
            user: if by.is_job() {
                r.user.clone().unwrap_or_else(dash)
            } else {
                String::new()
            },
            name: if by.is_job() {
                r.name.clone().unwrap_or_else(dash)
            } else {
                String::new()
            },
            nodes: r.nodes.len().to_string(),
            gpus: r.gpus.to_string(),
            idle: r.idle.to_string(),
            util: r.util_pct.map_or_else(dash, |u| format!("{u:.0}%")),
            flags: r.flags_text(),
            flags_short: if short.is_empty() { dash() } else { short.join(" ") },
        }
    }
}

/// The columns' widths (0: dropped) and the flags' form.
#[derive(Debug, PartialEq)]
struct Layout {
    key: usize,
    user: usize,
    name: usize,
    nodes: usize,
    gpus: usize,
    idle: usize,
    util: usize,
    flags: usize,
    short_flags: bool,
    /// What is left for the hostlist.
    hosts: usize,
}

/// A user or job name longer than this is cut, with "…" to say so.
const USER_MAX: usize = 12;
const NAME_MAX: usize = 20;
const KEY_MAX: usize = 16;
/// The hostlist's least room before other columns give way.
const HOSTS_MIN: usize = 12;

impl Layout {
    /// The widest layout of `rows` that leaves the hostlist its room in
    /// `width`: the flags' words give way to their short form first, then
    /// the job's name, then its user; never a cut count or word.
    fn fit(rows: &[RowText], by: GroupBy, width: usize) -> Layout {
        let w = |h: &str, f: &dyn Fn(&RowText) -> &str, max: usize| {
            rows.iter()
                .map(|r| f(r).chars().count())
                .chain([h.chars().count()])
                .max()
                .unwrap_or(0)
                .min(max)
        };
        let job = by.is_job();
        let full = Layout {
            key: w(by.name(), &|r| &r.key, KEY_MAX),
            user: if job { w("user", &|r| &r.user, USER_MAX) } else { 0 },
            name: if job { w("name", &|r| &r.name, NAME_MAX) } else { 0 },
            nodes: if job { 0 } else { w("nodes", &|r| &r.nodes, usize::MAX) },
            gpus: w("GPUs", &|r| &r.gpus, usize::MAX),
            idle: w("idle", &|r| &r.idle, usize::MAX),
            util: w("util", &|r| &r.util, usize::MAX),
            flags: w("flags", &|r| &r.flags, usize::MAX),
            short_flags: false,
            hosts: 0,
        };
        let short = Layout {
            flags: w("flags", &|r| &r.flags_short, usize::MAX),
            short_flags: true,
            ..full
        };
        let no_name = Layout { name: 0, ..short };
        let no_user = Layout { user: 0, ..no_name };
        let mut tries = vec![full, short, no_name, no_user];
        let used = |l: &Layout| {
            let cols = [l.key, l.user, l.name, l.nodes, l.gpus, l.idle, l.util, l.flags];
            // One space after each shown column.
            cols.iter().filter(|&&c| c > 0).map(|c| c + 1).sum::<usize>()
        };
        let at = tries
            .iter()
            .position(|l| used(l) + HOSTS_MIN <= width)
            .unwrap_or(tries.len() - 1);
        let mut lay = tries.swap_remove(at);
        lay.hosts = width.saturating_sub(used(&lay));
        lay
    }
}

/// The group's nodes as a hostlist in `w` columns: whole, or as many whole
/// names as fit then ",…" (never a name or a range cut mid-way).
fn fit_hosts(names: &[String], w: usize) -> String {
    let all = hostlist::compress(names);
    if all.chars().count() <= w {
        return all;
    }
    let with_more = |k: usize| format!("{},…", hostlist::compress(&names[..k]));
    // The most names whose hostlist still fits (a longer prefix is
    // never a shorter list, so a binary search finds it).
    let (mut lo, mut hi) = (0, names.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if with_more(mid).chars().count() <= w {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == 0 { "…".into() } else { with_more(lo) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(flags: [usize; 3]) -> RowText {
        let r = view::GroupRow {
            key: "4416".into(),
            flags,
            worst: Some(crate::model::flag::Severity::Crit),
            ..Default::default()
        };
        RowText::of(&r, GroupBy::Job)
    }

    #[test]
    fn columns_give_way_whole_short_flags_first_then_the_name_then_the_user() {
        let rows = [row([5, 12, 3])];
        let wide = Layout::fit(&rows, GroupBy::Job, 160);
        assert!(!wide.short_flags && wide.flags == "5 crit 12 warn 3 info".len());
        let narrow = Layout::fit(&rows, GroupBy::Job, 50);
        assert!(narrow.short_flags, "{narrow:?}");
        assert_eq!(narrow.flags, "5c 12w 3i".len());
        let tiny = Layout::fit(&rows, GroupBy::Job, 30);
        assert_eq!((tiny.user, tiny.name), (0, 0), "{tiny:?}");
        // Nothing at all: no panic.
        let _ = Layout::fit(&[], GroupBy::Rack, 0);
    }

    #[test]
    fn a_hostlist_too_long_keeps_whole_names_then_says_there_are_more() {
        let names: Vec<String> = (1..=40).step_by(2).map(|i| format!("gpu{i:02}")).collect();
        let s = fit_hosts(&names, 20);
        assert!(s.chars().count() <= 20 && s.ends_with(",…"), "{s}");
        assert!(hostlist::expand(s.trim_end_matches(",…")).is_ok(), "{s}");
        assert_eq!(fit_hosts(&names, 2), "…");
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
