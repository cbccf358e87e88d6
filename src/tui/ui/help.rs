//! The help popup: every key of the screen in view, and on its second
//! page (`?` again) the short flag names the header and the flags column
//! print, each with its kind and what it means in a few words.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::popup;
use crate::model::flag::FlagKind;
use crate::tui::app::{App, Screen};

/// Every key of the current screen, from the screens' key tables.
pub fn help_lines(screen: Screen) -> Vec<(&'static str, &'static str)> {
    crate::tui::screen::help_rows(screen)
}

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let (title, lines) = if app.help.legend {
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
