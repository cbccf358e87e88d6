//! The node detail's table of GPUs, a row each (and one per MIG instance).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, Widget};

use super::super::{line_at, severity_style, whole_words};
use crate::model::flag::{FlagKind, Subject};
use crate::store::NodeState;
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::tui::view::{gpu_info, opt};
use fleetop_proto::throttle;

use super::GIB;

/// Throttle reasons for people, without the noise of "gpu_idle".
/// The throttle reasons in `w` columns: whole names only, never one cut
/// mid-word ("hw_power_brake_slowdow"); those that do not fit are counted
/// ("sw_thermal,+2").
pub(super) fn throttle_text(mask: u64, w: usize) -> String {
    let names = throttle::names(mask & !throttle::GPU_IDLE);
    if names.is_empty() {
        return "-".into();
    }
    fit_names(&names, w)
}

/// `names` joined by commas in `w` columns, whole, the rest as "+N".
pub(super) fn fit_names<S: AsRef<str>>(names: &[S], w: usize) -> String {
    let mut out = String::new();
    for (i, n) in names.iter().enumerate() {
        let n = n.as_ref();
        let sep = if out.is_empty() { "" } else { "," };
        let left = names.len() - i - 1;
        let more = if left > 0 { format!(",+{left}").len() } else { 0 };
        if out.len() + sep.len() + n.len() + more > w {
            let rest = format!("+{}", names.len() - i);
            return if out.is_empty() { rest } else { format!("{out},{rest}") };
        }
        out.push_str(sep);
        out.push_str(n);
    }
    out
}

pub(super) fn render_gpu_table(app: &App, n: &NodeState, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let Some(s) = &n.last else {
        line_at(Line::from(Span::styled("no sample yet", t.muted)), area, 0, buf);
        return;
    };
    // Columns in screen order, each with how much it matters: when narrow
    // the least important go first, so at 80 columns the faults (throttle,
    // ECC, XID) and the flags stay and clocks and power give way.
    // Narrow terminals get narrower throttle and flag columns (long reasons
    // are cut, the flag names still fit), so memory stays too at 80.
    let narrow = area.width < 110;
    // AMD's word for the clock the column shows.
    let clock_head = match super::panes::vendor(n) {
        crate::model::sample::Vendor::Amd => "GFX MHz",
        crate::model::sample::Vendor::Nvidia => "SM MHz",
    };
    // The flags take what the other columns leave at 200 columns.
    let flags_w: u16 = if narrow {
        16
    } else {
        18u16.max(area.width.saturating_sub(120).min(40))
    };
    let all: [(&str, u16, u8); 11] = [
        ("GPU", 4, 10),
        ("util", 5, 9),
        ("mem GiB", 11, 5),
        ("temp", 8, 7),
        ("power W", 10, 3),
        (clock_head, 10, 2),
        ("throttle", if narrow { 14 } else { 22 }, 6),
        ("ECC c/u", 8, 8),
        ("XID", 5, 8),
        // GPM's SM activity ("-" without GPM).
        ("SM act", 6, 1),
        ("flags", flags_w, 9),
    ];
    let mut shown = [true; 11];
    let width = |shown: &[bool; 11]| -> u16 { all.iter().zip(shown).filter(|(_, s)| **s).map(|(c, _)| c.1 + 1).sum() };
    let mut by_importance: Vec<usize> = (0..all.len()).collect();
    by_importance.sort_by_key(|&i| all[i].2);
    for i in by_importance {
        if width(&shown) <= area.width || shown.iter().filter(|s| **s).count() <= 4 {
            break;
        }
        shown[i] = false;
    }
    let keep_cols = |cells: Vec<Cell<'static>>| -> Vec<Cell<'static>> {
        cells
            .into_iter()
            .zip(shown)
            .filter(|(_, s)| *s)
            .map(|(c, _)| c)
            .collect()
    };
    let cols: Vec<(&str, u16)> = all
        .iter()
        .zip(shown)
        .filter(|(_, s)| *s)
        .map(|(c, _)| (c.0, c.1))
        .collect();
    // Rows (of the flattened table) of GPUs that gave no reading, with why:
    // drawn whole across the reading columns after the table, never cut to
    // a column's width ("gpu_l").
    let mut errors: Vec<(usize, usize, String)> = Vec::new();
    let mut rows: Vec<Row<'static>> = Vec::new();
    for (pos, g) in s.gpus.iter().enumerate() {
        let gi = gpu_info(n, g.index);
        let mut flags: Vec<&crate::model::flag::Flag> = n
            .detector
            .active()
            .filter(|f| f.subject == Subject::Gpu(g.index))
            .collect();
        flags.sort_by_key(|f| std::cmp::Reverse(f.severity));
        // Short names (the legend is under `?`), worst first, whole: the
        // full list is above the table.
        let flags: Vec<Span<'static>> = whole_words(
            flags
                .into_iter()
                .map(|f| Span::styled(format!("{} ", f.kind.short()), severity_style(t, f.severity)))
                .collect(),
            usize::from(flags_w),
            t.muted,
        );
        let cells: Vec<Cell<'static>> = if let Some(e) = &g.error {
            // The XIDs it reported on the way out stay visible with the reason.
            // One name on screen for a stuck GPU: the flag's kind.
            let mut why = match e {
                crate::model::sample::GpuError::Stuck { text, for_ms } => {
                    format!(
                        "{}: {}",
                        FlagKind::GpuStuck.name(),
                        crate::detect::gpu::stuck_words(text, *for_ms)
                    )
                }
                e => e.name().to_string(),
            };
            let codes: Vec<String> = n.xid_codes(g.index).iter().map(u32::to_string).collect();
            if !codes.is_empty() {
                why.push_str(&format!(" · XID {}", codes.join(",")));
            }
            errors.push((rows.len(), pos, why));
            let mut cells = vec![Cell::from(g.index.to_string())];
            cells.resize(all.len() - 1, Cell::from(""));
            cells.push(Cell::from(Line::from(flags.clone())));
            cells
        } else {
            let th = &app.store.thresholds;
            let total = gi.and_then(|i| i.mem_total_bytes).map(|b| b as f64 / GIB);
            let amd = gi.is_some_and(|d| d.vendor == crate::model::sample::Vendor::Amd);
            // AMD has no XIDs: its column holds the AMD faults its events
            // raised ("gpu_reset", "xgmi_error"), in the gpu_event flag's colour.
            let (xids, xid_style) = if amd {
                let codes: Vec<String> = n
                    .event_codes(g.index)
                    .iter()
                    .map(|c| event_short(c).to_string())
                    .collect();
                let style = event_style(t, n, g.index, !codes.is_empty());
                (codes, style)
            } else {
                let xids: Vec<String> = n.xid_codes(g.index).iter().map(u32::to_string).collect();
                let style = xid_style(t, n, g.index, !xids.is_empty());
                (xids, style)
            };
            // The same line the `hot` flag draws: the slowdown temperature less the margin.
            let hot_at = th.slowdown_c(gi).saturating_sub(th.hot_margin_c);
            let hot = g.temp_c.is_some_and(|c| c >= hot_at);
            let mask = g.throttle_mask.unwrap_or(0);
            let hbm = g.hbm_temp_c.map(|c| format!(" {c}")).unwrap_or_default();
            vec![
                Cell::from(g.index.to_string()),
                Cell::from(format!("{:>3}%", opt(g.util_pct))),
                Cell::from(format!(
                    "{:>4}/{}",
                    opt(g.mem_used_bytes.map(|b| format!("{:.1}", b as f64 / GIB))),
                    opt(total.map(|t| format!("{t:.0}")))
                )),
                Cell::from(Span::styled(
                    format!("{}°C{hbm}", opt(g.temp_c)),
                    if hot { t.warn } else { Style::new() },
                )),
                Cell::from(format!(
                    "{}/{}",
                    opt(g.power_w.map(|w| format!("{w:.0}"))),
                    opt(g.power_limit_w.map(|w| format!("{w:.0}")))
                )),
                Cell::from(format!(
                    "{}/{}",
                    opt(g.sm_clock_mhz),
                    opt(gi.and_then(|i| i.max_sm_clock_mhz))
                )),
                Cell::from(Span::styled(
                    // AMD's own words where it gives them.
                    if amd && !g.throttle_detail.is_empty() {
                        fit_names(&g.throttle_detail, if narrow { 14 } else { 22 })
                    } else {
                        throttle_text(mask, if narrow { 14 } else { 22 })
                    },
                    if mask & throttle::TROUBLE != 0 {
                        t.crit
                    } else {
                        Style::new()
                    },
                )),
                Cell::from(Span::styled(
                    format!("{}/{}", opt(g.ecc_corrected_volatile), opt(g.ecc_uncorrected_volatile)),
                    if g.ecc_uncorrected_volatile.unwrap_or(0) > 0 {
                        t.crit
                    } else {
                        Style::new()
                    },
                )),
                Cell::from(Span::styled(
                    if xids.is_empty() { "-".into() } else { xids.join(",") },
                    xid_style,
                )),
                Cell::from(match g.gpm {
                    Some(m) => format!("{:>3.0}%", m.sm_active_pct),
                    None => "   -".into(),
                }),
                Cell::from(Line::from(flags.clone())),
            ]
        };
        let row = Row::new(keep_cols(cells));
        let row = if pos == app.detail.gpu {
            row.style(t.selected)
        } else {
            row
        };
        // A GPU in MIG mode: a row per instance under it, with its profile,
        // memory and GPM SM activity, in the GPU's SM act column (the GPU's
        // utilization is not given in MIG mode).
        let mig = g.mig.iter().map(|m| {
            let mem = format!(
                "{:>4}/{}",
                opt(m.mem_used_bytes.map(|b| format!("{:.1}", b as f64 / GIB))),
                opt(m.mem_total_bytes.map(|b| format!("{:.0}", b as f64 / GIB)))
            );
            let mut cells = vec![
                Cell::from(""),
                Cell::from(format!("gi{}", m.gpu_instance_id)),
                Cell::from(mem),
                Cell::from(m.profile.clone()),
            ];
            cells.resize(9, Cell::from(""));
            cells.push(Cell::from(match m.gpm {
                Some(x) => format!("{:>3.0}%", x.sm_active_pct),
                None => "   -".into(),
            }));
            cells.resize(all.len(), Cell::from(""));
            Row::new(keep_cols(cells)).style(t.muted)
        });
        rows.push(row);
        rows.extend(mig);
    }
    let widths: Vec<Constraint> = cols.iter().map(|(_, w)| Constraint::Length(*w)).collect();
    let header = Row::new(cols.iter().map(|(h, _)| Cell::from(*h))).style(t.title);
    Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .render(area, buf);
    // Why a GPU gave nothing, across the columns between its index and its flags.
    let first = cols[0].1 + 1;
    let last = cols.iter().take(cols.len() - 1).map(|c| c.1 + 1).sum::<u16>();
    for (row, pos, why) in errors {
        let y = area.y + 1 + row as u16;
        if y < area.bottom() && last > first + 1 {
            let w = usize::from(last - first - 1);
            let style = if pos == app.detail.gpu { t.selected } else { t.crit };
            buf.set_stringn(area.x + first, y, format!("{why:<w$}"), w, style);
        }
    }
}

/// The XID column's style: held codes in their flag's severity (a code
/// not held yet, in its catalog severity); "-" plain, because red is crit
/// and nothing else, and a healthy GPU has nothing to shout about.
fn xid_style(t: &Theme, n: &NodeState, gpu: u32, any: bool) -> Style {
    if !any {
        return Style::new();
    }
    let flag = n
        .detector
        .active()
        .find(|f| f.kind == FlagKind::Xid && f.subject == Subject::Gpu(gpu));
    let severity = match flag {
        Some(f) => f.severity,
        None => n
            .xid_codes(gpu)
            .iter()
            .map(|&c| fleetop_catalog::xid_action(c).severity())
            .max()
            .unwrap_or(crate::model::flag::Severity::Info),
    };
    severity_style(t, severity)
}

/// An AMD fault's code in the XID column's five characters.
fn event_short(code: &str) -> &str {
    match code {
        "gpu_reset" => "reset",
        "vmfault" => "vmflt",
        "xgmi_error" => "xgmi",
        "thermal_throttle" => "therm",
        c => c,
    }
}

/// The XID column of an AMD GPU: its events, in the gpu_event flag's
/// severity (an event not held yet, in its catalog severity).
fn event_style(t: &Theme, n: &NodeState, gpu: u32, any: bool) -> Style {
    if !any {
        return Style::new();
    }
    let flag = n
        .detector
        .active()
        .find(|f| f.kind == FlagKind::GpuEvent && f.subject == Subject::Gpu(gpu));
    let severity = match flag {
        Some(f) => f.severity,
        None => n
            .event_codes(gpu)
            .iter()
            .filter_map(|c| fleetop_catalog::amd::lookup(c))
            .map(|f| f.immediate.severity())
            .max()
            .unwrap_or(crate::model::flag::Severity::Info),
    };
    severity_style(t, severity)
}

#[cfg(test)]
mod tests {
    use super::fit_names;

    #[test]
    fn throttle_names_are_never_cut_mid_word() {
        assert_eq!(fit_names(&["sw_thermal", "hw_slowdown"], 22), "sw_thermal,hw_slowdown");
        assert_eq!(
            fit_names(&["sw_thermal", "hw_power_brake_slowdown"], 22),
            "sw_thermal,+1"
        );
        assert_eq!(fit_names(&["hw_power_brake_slowdown"], 14), "+1");
        assert_eq!(fit_names(&["a", "b", "c"], 4), "a,+2");
    }
}
