//! The help popup: every key of the screen in view, and on its second
//! page (`?` again) the short flag names the header and the flags column
//! print, each with its kind and what it means in a few words.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::popup;
use crate::model::flag::FlagKind;
use crate::tui::app::{App, Screen};

/// Every key of the current screen.
pub fn help_lines(screen: Screen) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("?", "this help; ? again: flag short names; other keys close"),
        ("q  Ctrl-C  p", "quit · p: pause the display (data still arrives)"),
        ("Tab  Shift-Tab", "next / previous screen: heatmap, alerts, node"),
        ("Esc", "back to the heatmap; on the heatmap, clear the filter"),
        ("/", "filter as you type: name, gpu[01-08], flag or short (thr),"),
        ("", "  crit, warn, ok, partition, rack; a,b = either; ^U clears"),
        (":", "command: node NAME, filter F, sort K, drain [why], resume,"),
        ("", "  return, help, q; Tab completes names, Esc cancels"),
        ("m", "metric: util, memory, temperature, power, SM clock"),
        ("J", "group by Slurm or Ray job, partition, rack or pod"),
    ];
    match screen {
        Screen::Heatmap | Screen::Detail => v.extend([
            ("D R U", "drain (with a reason), resume, undrain: marked or this"),
            ("T", "return to service: resume after a passing burn-in"),
            ("B", "burn-in on the marked nodes or this one (s: quick/full)"),
        ]),
        Screen::Alerts | Screen::Groups => {}
        Screen::Bench => v.extend([
            ("j k  ↓ ↑", "move"),
            ("D", "drain the selected failed node, the failure as reason"),
            ("Enter", "each check of this node: figure, floor, verdict, why"),
            ("c", "clear this finished run and its burnin_failed flag"),
            ("x", "stop the running burn-in (asks; cancelled, not failed)"),
        ]),
    }
    match screen {
        Screen::Heatmap => v.extend([
            (
                "j k g G  PgDn",
                "move, top, bottom, page (PgUp); on the wall a row of cells",
            ),
            ("h l  ← →", "move along the wall"),
            ("Enter", "open the node"),
            ("s  S", "sort by name, metric, flags, age, Slurm state; S reverses"),
            ("n N  c C", "next / previous node flagged warn or worse; c C: crit"),
            ("w", "toggle the dense wall (one cell per node)"),
            ("space", "mark / unmark the node (for actions), then move down"),
            (
                "a u  Ctrl-Space",
                "mark all shown / unmark all / from the last mark here",
            ),
            ("y", "copy the marked nodes (or this one) as a Slurm hostlist"),
        ]),
        Screen::Detail => v.extend([
            ("j k  ↓ ↑", "select a GPU"),
            ("1-5  h l", "pane: history, NVLink, InfiniBand, processes, timeline"),
            ("", "  in the timeline (5) j k PgUp PgDn g G scroll it"),
            ("n N  c C", "open the next / previous node flagged warn+; c C: crit"),
            ("z", "history: the last minute, ten minutes, or all of it"),
            ("K  A", "scancel this GPU's Slurm job (asks) / A: this node's alerts"),
            ("x  X", "SIGTERM / SIGKILL the GPU's processes via its agent (asks)"),
        ]),
        Screen::Alerts => v.extend([
            ("j k  ↓ ↑", "move"),
            ("g G  PgUp PgDn", "top, bottom, page"),
            ("Enter", "open the node of the alert"),
            ("D", "drain the alert's node, the catalog's reason filled in"),
            ("s", "sort by severity, age, node, kind"),
            ("z", "fold / unfold identical flags of one job into one row"),
            ("a", "acknowledge the alert (until it clears); again to undo"),
            ("1 4 8", "silence this kind on this node for 1, 4 or 8 hours"),
        ]),
        Screen::Groups => v.extend([
            ("j k  ↓ ↑", "move"),
            ("b", "by job, partition, rack, pod, Ray job (cycles)"),
            ("", "  the least busy first; nodes in none: \"(none)\""),
            ("", "  flags: 3 crit 1 warn, or 3c 1w where the words do not fit"),
            ("Enter", "show the group's nodes on the heatmap (Esc clears)"),
        ]),
        Screen::Bench => {}
    }
    v
}

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let (title, lines) = if app.help_legend {
        ("flag names · / takes either", flag_legend())
    } else {
        let keys = help_lines(app.screen).into_iter().map(|(k, w)| (k, w.to_string()));
        ("keys · ? again: flag names", keys.collect())
    };
    let text: Vec<Line<'_>> = lines
        .into_iter()
        .map(|(k, what)| Line::from(vec![Span::styled(format!(" {k:<16}"), t.title), Span::raw(what)]))
        .collect();
    popup(t, title, text, 86, area, buf);
}

/// The legend of the short flag names: "thr" = "throttled: slowed for heat
/// or power", one a line; the kinds whose short name is their name are
/// listed together at the end.
pub fn flag_legend() -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> = FlagKind::ALL
        .into_iter()
        .filter(|k| k.short() != k.name())
        .map(|k| (k.short(), format!("{}: {}", k.name(), few_words(k))))
        .collect();
    let same: Vec<&str> = FlagKind::ALL
        .into_iter()
        .filter(|k| k.short() == k.name())
        .map(|k| k.name())
        .collect();
    if !same.is_empty() {
        v.push((" ", format!("{}: their own names", same.join(" "))));
    }
    v
}

/// What a kind means, in a few words (the catalog's `meaning` is the long
/// form, on the alerts screen). Every kind has its words: a new kind does
/// not compile without them.
fn few_words(k: FlagKind) -> &'static str {
    match k {
        FlagKind::Idle => "held by a job, not used",
        FlagKind::Throttled => "slowed down for heat or power",
        FlagKind::PowerCapped => "at its power cap a long time",
        FlagKind::Xid => "the driver reported an XID error",
        FlagKind::EccUncorrected => "uncorrectable ECC memory errors",
        FlagKind::GpuLost => "the GPU fell off the bus",
        FlagKind::NvlinkDown => "an NVLink link is down",
        FlagKind::IbDown => "an InfiniBand port is not active",
        FlagKind::IbErrors => "InfiniBand error counters rising",
        FlagKind::Stale => "no fresh sample from the node",
        FlagKind::Hot => "near its slowdown temperature",
        FlagKind::RemapPending => "a row remap waits for a GPU reset",
        FlagKind::RemapFailed => "a row remap failed: replace the GPU",
        FlagKind::Underused => "busy by NVML, SMs mostly idle (GPM)",
        FlagKind::GpuStuck => "an NVML call on the GPU hangs",
        FlagKind::Unreachable => "the node's agent cannot be reached",
        FlagKind::BurninFailed => "the last burn-in failed or did not end",
        FlagKind::Sxid => "an NVSwitch error",
        FlagKind::PcieDegraded => "PCIe link narrower or slower, or replays",
        FlagKind::GpuMissing => "fewer GPUs than the node has",
        FlagKind::GpuLibrary => "no GPU library loaded where GPUs are",
        FlagKind::FabricUnhealthy => "the GPU is not in the NVLink fabric",
        FlagKind::PersistenceOff => "persistence mode is off",
        FlagKind::PeermemMissing => "nvidia_peermem not loaded: no GPUDirect",
        FlagKind::VersionSkew => "driver or VBIOS differs from its peers",
        FlagKind::GpuEvent => "an AMD GPU's driver reported a fault",
    }
}
