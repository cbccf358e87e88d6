//! How promptly the console gets to its own work. A probe task on the
//! runtime that reads the agents' streams asks to be woken every
//! `PROBE_PERIOD` and notes how late it is woken (`ingest::pace` runs it).
//! A console starved of CPU polls every task late, the probe's among them:
//! its nodes' streams are read seconds apart and their handshakes outlast
//! any timeout, though their agents are sound. Samples that were never
//! taken in have no age to count, so the lag measured on samples (the
//! store's `Lag`) cannot see this; the probe does. The store says it as
//! the console's lag and judges no node's silence meanwhile, and the
//! console's own timeouts do not count the time it was late.
//!
//! A `Pace` that no probe beats for (a test, a replay) is never late.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How often the probe asks to be woken.
pub const PROBE_PERIOD: Duration = Duration::from_millis(100);

/// Lateness up to this is the timer's and the scheduler's ordinary jitter.
const JITTER: Duration = Duration::from_millis(20);

/// How long a lateness is remembered, and twice as long as it was more: a
/// console late in bursts (a starved process gets the CPU in slices, a
/// backlog is worked through in rounds of many seconds) stays behind
/// between them, and its header does not flicker.
const REMEMBERED: Duration = Duration::from_secs(5);

fn remembered(at: Instant, late: Duration, now: Instant) -> bool {
    now.saturating_duration_since(at) <= REMEMBERED + 2 * late
}

#[derive(Debug, Default)]
pub struct Pace {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When the probe last ran; `None` while none has.
    beat: Option<Instant>,
    /// The lateness of every run past `JITTER`, added up.
    lost: Duration,
    /// The runs late past `JITTER` still remembered: when, how late.
    recent: VecDeque<(Instant, Duration)>,
}

impl State {
    /// How late the probe's next run is already at `now`, past `JITTER`.
    fn overdue(&self, now: Instant) -> Duration {
        self.beat
            .map(|b| now.saturating_duration_since(b + PROBE_PERIOD))
            .filter(|&d| d > JITTER)
            .unwrap_or_default()
    }
}

impl Pace {
    /// The probe, due at `due`, ran at `ran`.
    pub fn beat(&self, due: Instant, ran: Instant) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.beat = Some(ran);
        let late = ran.saturating_duration_since(due);
        if late > JITTER {
            s.lost += late;
            s.recent.push_back((ran, late));
        }
        s.recent.retain(|&(at, late)| remembered(at, late, ran));
    }

    /// How late the console is: the worst its probe was that is still
    /// remembered, or how overdue the probe is now if more.
    pub fn late(&self) -> Duration {
        let now = Instant::now();
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let recent = s.recent.iter().filter(|&&(at, late)| remembered(at, late, now));
        recent.map(|&(_, late)| late).fold(s.overdue(now), Duration::max)
    }

    /// All the time the console was late since its probe started, now
    /// included: what a deadline on the console's own time adds.
    pub fn lost(&self) -> Duration {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.lost + s.overdue(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_pace_no_probe_beats_for_is_never_late() {
        let p = Pace::default();
        assert_eq!((p.late(), p.lost()), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn a_probe_on_time_is_not_late() {
        let p = Pace::default();
        let now = Instant::now();
        p.beat(now - Duration::from_millis(5), now);
        assert_eq!((p.late(), p.lost()), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn a_late_probe_is_remembered_a_while_and_added_up() {
        let p = Pace::default();
        let now = Instant::now();
        // Late 1 s eight seconds ago (forgotten), 2 s a second ago, on
        // time now.
        p.beat(now - 9 * S, now - 8 * S);
        p.beat(now - 3 * S, now - S);
        p.beat(now, now);
        let late = p.late();
        assert!(late >= 2 * S && late < 3 * S, "{late:?}");
        assert!(p.lost() >= 3 * S, "{:?}", p.lost());
        // A long lateness is remembered longer: 10 s, 20 s ago.
        let p = Pace::default();
        p.beat(now - 30 * S, now - 20 * S);
        p.beat(now, now);
        let late = p.late();
        assert!(late >= 10 * S && late < 11 * S, "{late:?}");
    }

    #[test]
    fn a_probe_not_woken_at_all_is_late_by_how_overdue_it_is() {
        let p = Pace::default();
        p.beat(Instant::now() - 4 * S, Instant::now() - 4 * S);
        // Its next run was due 3.9 s ago: the console is late that much now.
        let (late, lost) = (p.late(), p.lost());
        assert!(late >= 3 * S && late <= 4 * S, "{late:?}");
        assert!(lost >= 3 * S && lost <= 4 * S, "{lost:?}");
    }
}
