//! Debounce: a condition must hold for some samples to raise a flag and fail
//! for some to clear it, so flags do not flap.

/// A condition that must hold for `raise` consecutive samples to turn on and
/// fail for `clear` consecutive samples to turn off.
///
/// 24 bytes, not 32: a console holds 15 of these for every GPU (120,000 at
/// 10,000 nodes), so "not raised" is a time no sample has rather than an
/// `Option`'s tag.
#[derive(Debug, Clone)]
pub struct Debounce {
    on_run: u32,
    off_run: u32,
    run_start: i64,
    /// When the raised condition began; `NOT_RAISED` while it is not.
    since: i64,
}

const NOT_RAISED: i64 = i64::MIN;

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            on_run: 0,
            off_run: 0,
            run_start: 0,
            since: NOT_RAISED,
        }
    }
}

impl Debounce {
    /// Feeds one sample; returns when the raised condition began, if raised.
    pub fn update(&mut self, cond: bool, t: i64, raise: u32, clear: u32) -> Option<i64> {
        if cond {
            if self.on_run == 0 {
                self.run_start = t;
            }
            self.on_run += 1;
            self.off_run = 0;
            if !self.raised() && self.on_run >= raise.max(1) {
                self.since = self.run_start;
            }
        } else {
            self.off_run += 1;
            self.on_run = 0;
            if self.off_run >= clear.max(1) {
                self.since = NOT_RAISED;
            }
        }
        self.since()
    }

    /// Whether the flag is raised now.
    pub fn raised(&self) -> bool {
        self.since != NOT_RAISED
    }

    /// When the raised condition began; for a sample that cannot judge it
    /// (the flag's memory holds as it is).
    pub fn since(&self) -> Option<i64> {
        self.raised().then_some(self.since)
    }
}

/// Events that keep a flag up for a while after the last one (XIDs, rising
/// error counters): the flag starts at the first event of an episode and
/// clears once `hold` has passed without one.
#[derive(Debug, Default, Clone)]
pub struct Hold {
    first: Option<i64>,
    last: Option<i64>,
}

impl Hold {
    /// An event at `t`.
    pub fn event(&mut self, t: i64) {
        // Events may come out of order (the fault journal's beside the
        // samples'): the episode spans the earliest to the latest.
        self.first = Some(self.first.map_or(t, |f| f.min(t)));
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
    }

    /// Whether the episode held began before `t`.
    pub fn began_before(&self, t: i64) -> bool {
        self.first.is_some_and(|f| f < t)
    }

    /// When the episode began, while it is held at `t`; `None` (and the
    /// episode forgotten) once `hold_ms` has passed since the last event.
    pub fn held(&mut self, t: i64, hold_ms: i64) -> Option<i64> {
        match (self.first, self.last) {
            (Some(first), Some(last)) if t - last <= hold_ms => Some(first),
            _ => {
                *self = Hold::default();
                None
            }
        }
    }
}
