//! Debounce: a condition must hold for some samples to raise a flag and fail
//! for some to clear it, so flags do not flap.

/// A condition that must hold for `raise` consecutive samples to turn on and
/// fail for `clear` consecutive samples to turn off.
#[derive(Debug, Default, Clone)]
pub struct Debounce {
    on_run: u32,
    off_run: u32,
    run_start: i64,
    since: Option<i64>,
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
            if self.since.is_none() && self.on_run >= raise.max(1) {
                self.since = Some(self.run_start);
            }
        } else {
            self.off_run += 1;
            self.on_run = 0;
            if self.off_run >= clear.max(1) {
                self.since = None;
            }
        }
        self.since
    }

    /// Whether the flag is raised now.
    pub fn raised(&self) -> bool {
        self.since.is_some()
    }
}
