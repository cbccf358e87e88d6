//! Words and units for people, in one place so every front end says them
//! alike: how long something took or has lasted (`duration`), and a
//! reading that is absent (`shown`). The TUI, the flags' details, the
//! export and `watch` all use these; none keeps its own.

use std::fmt::Display;

/// How finely a duration is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// One unit, rounded down: "45s", "3m", "2h", "4d" (how long ago).
    Roughly,
    /// To the minute, two units at most, seconds only under a minute:
    /// "45s", "13m", "2h13m", "3d04h" (how long a job has run).
    ToMinute,
    /// To the second, two units at most, under a second in ms: "850 ms",
    /// "12s", "9m54s", "2h05m", "1d02h" (how long a call has hung).
    ToSecond,
}

/// The units, largest first: seconds each and the letter.
const UNITS: [(i64, char); 4] = [(86_400, 'd'), (3_600, 'h'), (60, 'm'), (1, 's')];

/// `ms` milliseconds for people, as finely as `said` says (a negative
/// span, from a clock step, is 0).
pub fn duration(ms: i64, said: Said) -> String {
    let ms = ms.max(0);
    if said == Said::ToSecond && ms < 1000 {
        return format!("{ms} ms");
    }
    let s = ms / 1000;
    let i = UNITS.iter().position(|(u, _)| s >= *u).unwrap_or(UNITS.len() - 1);
    let (unit, letter) = UNITS[i];
    let mut out = format!("{}{letter}", s / unit);
    // The second unit, where said: never seconds past a minute to the minute.
    let finest = if said == Said::ToMinute && s >= 60 { 60 } else { 1 };
    if said != Said::Roughly
        && let Some(&(next, letter)) = UNITS.get(i + 1)
        && next >= finest
    {
        out.push_str(&format!("{:02}{letter}", s % unit / next));
    }
    out
}

/// What stands where a reading is absent (not taken, not supported, not
/// read): the TUI's columns and the flags' details alike.
pub const ABSENT: &str = "-";

/// A reading for people: the value, or `ABSENT`.
pub fn shown<T: Display>(v: Option<T>) -> String {
    v.map_or_else(|| ABSENT.to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_people_read_them() {
        let d = |ms, said| duration(ms, said);
        // How long ago: one unit.
        assert_eq!(d(125_000, Said::Roughly), "2m");
        assert_eq!(d(45_000, Said::Roughly), "45s");
        assert_eq!(d(7_300_000, Said::Roughly), "2h");
        assert_eq!(d(2 * 86_400_000 + 3_600_000, Said::Roughly), "2d");
        assert_eq!(d(-5, Said::Roughly), "0s");
        // To the minute.
        assert_eq!(d(2 * 3_600_000 + 13 * 60_000 + 5_000, Said::ToMinute), "2h13m");
        assert_eq!(d(3 * 3_600_000, Said::ToMinute), "3h00m");
        assert_eq!(d(125_000, Said::ToMinute), "2m");
        assert_eq!(d(45_000, Said::ToMinute), "45s");
        assert_eq!(d(-5, Said::ToMinute), "0s");
        assert_eq!(d(2 * 86_400_000 + 3_600_000, Said::ToMinute), "2d01h");
        // To the second.
        assert_eq!(d(594_056, Said::ToSecond), "9m54s");
        assert_eq!(d(850, Said::ToSecond), "850 ms");
        assert_eq!(d(0, Said::ToSecond), "0 ms");
        assert_eq!(d(12_000, Said::ToSecond), "12s");
        assert_eq!(d(7_500_000, Said::ToSecond), "2h05m");
        assert_eq!(d(26 * 3_600_000, Said::ToSecond), "1d02h");
    }

    #[test]
    fn an_absent_reading_is_a_dash() {
        assert_eq!(shown(Some(7)), "7");
        assert_eq!(shown(None::<u32>), "-");
    }
}
