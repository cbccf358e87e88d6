//! The fault catalog: what every flag kind and every XID means and what to
//! do about it, as data. Detectors raise flags; this says what they mean.
//! The console's view, its export and notifications, and the agent's
//! `/metrics` read the same entry, so a person meets the same words and the
//! same action wherever they look. `docs/faults.md` is generated from it
//! (a test fails when the two differ).
//!
//! The facts (XID codes and NVIDIA's resolution buckets) come from NVIDIA's
//! XID catalog, AMD's (events, RAS blocks, XGMI, throttling) from AMD SMI's
//! reference and the amdgpu driver's RAS documentation (`amd`); the words
//! are ours.

pub mod amd;
pub mod doc;
mod flags;
pub mod xid;

pub use amd::{AMD_FAULTS, AmdFault};
pub use flags::{FLAGS, ib_phys_state_says};
pub use xid::{XIDS, XidEntry};

use serde::{Deserialize, Serialize};

/// How urgent a flag is. A node's health is its worst flag's severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warn,
    Crit,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Crit => "crit",
        }
    }
}

/// What to do about a fault: one small set, used everywhere (the export's
/// `action`, the `action` label on `/metrics` and alerts, the alerts screen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Nothing to do now: recorded, worth knowing.
    None,
    /// The application faulted or wastes the GPU: tell the job's owner.
    RestartApp,
    /// Driver, firmware or configuration: fix it at the next window.
    UpdateSoftware,
    /// The node or its agent does not answer: is it up?
    CheckNode,
    /// A link: cable, transceiver, switch port (PCIe: the slot, the riser).
    CheckLink,
    /// Fans, airflow, inlet temperature.
    CheckCooling,
    /// Power supplies and power delivery.
    CheckPower,
    /// Drain the node, then reset the GPU, then burn it in.
    ResetGpu,
    /// Drain the node, then reboot it, then burn it in.
    RebootNode,
    /// The hardware is failing: RMA, the vendor's support.
    Replace,
}

impl Action {
    /// Every action, least urgent first (the order of `urgency`).
    pub const ALL: [Action; 10] = [
        Action::None,
        Action::RestartApp,
        Action::UpdateSoftware,
        Action::CheckNode,
        Action::CheckLink,
        Action::CheckCooling,
        Action::CheckPower,
        Action::ResetGpu,
        Action::RebootNode,
        Action::Replace,
    ];

    /// The enum's name, as the export and labels carry it.
    pub fn name(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::RestartApp => "restart_app",
            Action::UpdateSoftware => "update_software",
            Action::CheckNode => "check_node",
            Action::CheckLink => "check_link",
            Action::CheckCooling => "check_cooling",
            Action::CheckPower => "check_power",
            Action::ResetGpu => "reset_gpu",
            Action::RebootNode => "reboot_node",
            Action::Replace => "replace",
        }
    }

    pub fn from_name(s: &str) -> Option<Action> {
        Self::ALL.into_iter().find(|a| a.name() == s)
    }

    /// What a person does, as an imperative.
    pub fn says(self) -> &'static str {
        match self {
            Action::None => "nothing to do now",
            Action::RestartApp => "tell the job's owner; restart the application",
            Action::UpdateSoftware => "fix the driver, firmware or configuration",
            Action::CheckNode => "check that the node is up and its agent runs",
            Action::CheckLink => "check the link: cable, transceiver, switch port",
            Action::CheckCooling => "check cooling: fans, airflow, inlet temperature",
            Action::CheckPower => "check power: supplies and power delivery",
            Action::ResetGpu => "drain, then reset the GPU",
            Action::RebootNode => "drain, then reboot the node",
            Action::Replace => "drain, then replace the hardware (RMA)",
        }
    }

    /// Severity follows the action: nothing to do is info; the job's owner
    /// or a fix at the next window is warn; anything done to the node now is
    /// crit. A detector may grade a fault lower while it is mild (a GPU
    /// nearing its slowdown temperature, a stale node not yet unreachable),
    /// never higher.
    pub fn severity(self) -> Severity {
        match self {
            Action::None => Severity::Info,
            Action::RestartApp | Action::UpdateSoftware => Severity::Warn,
            _ => Severity::Crit,
        }
    }

    /// Whether it takes the node (or a GPU of it) out of service.
    pub fn takes_node(self) -> bool {
        matches!(self, Action::ResetGpu | Action::RebootNode | Action::Replace)
    }

    /// Higher is more urgent: the node's diagnosis names its most urgent action.
    pub fn urgency(self) -> usize {
        Self::ALL.iter().position(|&a| a == self).unwrap_or(0)
    }
}

/// One flag kind's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The flag kind's name ("gpu_lost").
    pub kind: &'static str,
    /// What it means, in one short line.
    pub meaning: &'static str,
    pub immediate: Action,
    /// What to do after, or if it recurs.
    pub investigate: Option<Action>,
    /// The runbook: steps, one per line, for docs/faults.md.
    pub runbook: &'static [&'static str],
}

/// The entry of a flag kind, by name.
pub fn flag(kind: &str) -> Option<&'static Entry> {
    FLAGS.iter().find(|e| e.kind == kind)
}

/// The entry of an XID code; `None` for a code the catalog does not list.
pub fn xid(code: u32) -> Option<&'static XidEntry> {
    xid::lookup(code)
}

/// What an XID the catalog does not list is taken to ask for: look at it
/// with a drain (crit), since nothing says it is harmless.
pub const UNKNOWN_XID: Action = Action::ResetGpu;

/// The immediate action for an XID code.
pub fn xid_action(code: u32) -> Action {
    xid(code).map_or(UNKNOWN_XID, |e| e.immediate)
}

/// The one-line meaning of an XID code.
pub fn xid_meaning(code: u32) -> &'static str {
    xid(code).map_or("not in NVIDIA's XID catalog as fleetop knows it", |e| e.meaning)
}

/// Where the runbook for a flag kind is: a section of docs/faults.md.
pub fn runbook(kind: &str) -> String {
    format!("docs/faults.md#{kind}")
}

/// The window escalation counts repeats over.
pub const REPEAT_WINDOW_MS: i64 = 7 * 24 * 3_600_000;
/// The occurrence (counted in distinct boots) that escalates to `Replace`.
pub const REPEAT_ESCALATES_AT: usize = 3;

/// A fault asking again for what did not help: the same XID asking for a
/// reset or a reboot in its third boot within the window means the reset
/// and the reboots did not cure it: replace. `boots` are the boot ids the
/// code was seen in on this GPU within the window (this one included); an
/// empty boot id (unknown) counts as a boot of its own.
pub fn escalate(code: u32, action: Action, boots: usize) -> Option<(Action, String)> {
    if !matches!(action, Action::ResetGpu | Action::RebootNode) || boots < REPEAT_ESCALATES_AT {
        return None;
    }
    Some((
        Action::Replace,
        format!(
            "{} XID {code} on this GPU in 7 days (each after a reboot): replace",
            ordinal(boots)
        ),
    ))
}

/// 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The sentence for an action on a fault: "drain, then reboot the node: XID
/// 79 on GPU 1; if it recurs: drain, then replace the hardware (RMA)".
pub fn action_detail(immediate: Action, what: &str, investigate: Option<Action>) -> String {
    let mut s = format!("{}: {what}", immediate.says());
    if let Some(next) = investigate.filter(|&n| n != immediate && n != Action::None) {
        s.push_str("; if it recurs: ");
        s.push_str(next.says());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_follows_the_action() {
        assert_eq!(Action::None.severity(), Severity::Info);
        assert_eq!(Action::RestartApp.severity(), Severity::Warn);
        for a in [Action::ResetGpu, Action::RebootNode, Action::Replace, Action::CheckLink] {
            assert_eq!(a.severity(), Severity::Crit, "{a:?}");
        }
    }

    #[test]
    fn names_round_trip_and_urgency_orders_replace_last() {
        for a in Action::ALL {
            assert_eq!(Action::from_name(a.name()), Some(a));
        }
        assert!(Action::Replace.urgency() > Action::RebootNode.urgency());
        assert!(Action::RebootNode.urgency() > Action::ResetGpu.urgency());
        assert!(Action::ResetGpu.urgency() > Action::RestartApp.urgency());
    }

    #[test]
    fn the_catalog_grades_xids_as_nvidia_does() {
        for quiet in [63, 92, 94, 43] {
            assert_ne!(xid_action(quiet).severity(), Severity::Crit, "XID {quiet}");
        }
        for loud in [79, 48, 95] {
            assert_eq!(xid_action(loud).severity(), Severity::Crit, "XID {loud}");
        }
        assert_eq!(xid_action(94), Action::RestartApp);
        assert_eq!(xid(92).and_then(|e| e.investigate), Some(Action::Replace));
    }

    #[test]
    fn a_third_reboot_for_the_same_xid_escalates_to_replace() {
        assert_eq!(escalate(79, Action::RebootNode, 2), None);
        let (a, why) = escalate(79, Action::RebootNode, 3).expect("escalates");
        assert_eq!(a, Action::Replace);
        assert!(why.starts_with("3rd XID 79 on this GPU in 7 days"), "{why}");
        assert_eq!(
            escalate(13, Action::RestartApp, 9),
            None,
            "the application's fault is not the GPU's"
        );
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).into();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }

    #[test]
    fn the_detail_says_the_plan_in_order() {
        let s = action_detail(Action::RebootNode, "XID 79 on GPU 1", Some(Action::Replace));
        assert_eq!(
            s,
            "drain, then reboot the node: XID 79 on GPU 1; if it recurs: drain, then replace the hardware (RMA)"
        );
        assert_eq!(
            action_detail(Action::None, "x", Some(Action::None)),
            "nothing to do now: x"
        );
    }
}
