//! How far behind the console is (`Lag`): the age of the samples it takes
//! in, and how late its runtime gets to its tasks. A node's silence counts
//! for that much less.

/// How far behind the console is, the more of two measures:
/// - what waits in its queue: the median age of the live samples it took
///   in over the last second, when taken in. Most samples are old only when
///   the console (not an agent, nor the network) has fallen behind. Not the
///   freshest: a starved console that reads each stream's backlog in a
///   burst takes in some fresh sample every second while most waited
///   seconds, and the freshest would never say so. Under `LAG_SAID` it is
///   the network's ordinary delay and counts as none.
/// - how late its runtime gets to its tasks (`model::pace`): a console
///   starved outright takes nothing in, and what it never read has no age.
///   From `LATE_SAID`; while so late, it judges no node's silence
///   (`JUDGING_HELD`).
#[derive(Debug, Clone, Default)]
pub struct Lag {
    /// The current window's samples by age, in `AGE_STEP_MS` steps (the
    /// last step holds anything older); empty until a sample is seen.
    ages: Vec<u32>,
    seen: u32,
    window_start_ms: i64,
    /// What the last whole window of samples found: 0 when not behind.
    queued_ms: i64,
    /// The lag as last judged: 0 when not behind.
    pub behind_ms: i64,
    /// How much less a node's silence counts for it (`NodeState::status`):
    /// the queue's lag, or `JUDGING_HELD` while the runtime is late.
    pub discount_ms: i64,
}

/// A discount no silence outlasts: while its runtime is late the console
/// judges no node stale or unreachable. It cannot tell a silent node from
/// one it did not get to: it reads each stream once a round of seconds
/// (one read early in a round may be read late in the next), and agents
/// close connections whose handshake or pings it answers that late. It
/// says `console behind` instead, and judges again once it has been on
/// time a while (`model::pace`).
const JUDGING_HELD: i64 = i64::MAX / 4;

/// A lag under this is no lag: agents' clocks are matched to the console's
/// to within a few hundred milliseconds, and a sample takes that to arrive.
pub const LAG_SAID: i64 = 2_000;

/// A runtime this late is behind: on time it is late by a millisecond or
/// two, and a second late its streams are read late enough for a node to
/// look silent (stale after three intervals).
pub const LATE_SAID: i64 = 1_000;

/// Ages are told apart to a quarter of a second, up to a minute.
const AGE_STEP_MS: i64 = 250;
const AGE_STEPS: usize = 240;

impl Lag {
    /// A lag of `behind_ms` in the queue as judged at `at_ms` (a console's
    /// header in a test).
    pub fn judged(behind_ms: i64, at_ms: i64) -> Lag {
        Lag {
            window_start_ms: at_ms,
            queued_ms: behind_ms,
            behind_ms,
            discount_ms: behind_ms,
            ..Lag::default()
        }
    }

    /// Whether no node's silence is judged now (the runtime is late).
    pub fn judging_held(&self) -> bool {
        self.discount_ms == JUDGING_HELD
    }

    pub(super) fn saw(&mut self, age_ms: i64, now_ms: i64) {
        if self.seen == 0 && now_ms - self.window_start_ms > 1_000 {
            self.window_start_ms = now_ms;
        }
        if self.ages.is_empty() {
            self.ages = vec![0; AGE_STEPS];
        }
        let step = (age_ms.max(0) / AGE_STEP_MS).min(AGE_STEPS as i64 - 1) as usize;
        self.ages[step] += 1;
        self.seen += 1;
    }

    /// The age half the window's samples reach, to its step.
    fn median_ms(&self) -> i64 {
        let half = self.seen.div_ceil(2);
        let mut counted = 0;
        let step = self.ages.iter().position(|&n| {
            counted += n;
            counted >= half
        });
        step.unwrap_or(0) as i64 * AGE_STEP_MS
    }

    /// The lag at `now_ms`, the runtime being `late_ms` late; returns the
    /// discount. The queue's measure moves at the end of a window of at
    /// least a second that saw live samples; after two seconds with none
    /// taken in at all, nothing waits in the queue (a node that went silent
    /// is judged without a discount).
    pub(super) fn judge(&mut self, now_ms: i64, late_ms: i64) -> i64 {
        let elapsed = now_ms - self.window_start_ms;
        let median = match self.seen {
            0 if elapsed >= 2_000 => Some(0),
            n if n > 0 && elapsed >= 1_000 => Some(self.median_ms()),
            _ => None,
        };
        if let Some(median) = median {
            self.ages.fill(0);
            self.seen = 0;
            self.window_start_ms = now_ms;
            self.queued_ms = if median >= LAG_SAID { median } else { 0 };
        }
        let late_ms = if late_ms >= LATE_SAID { late_ms } else { 0 };
        self.behind_ms = self.queued_ms.max(late_ms);
        self.discount_ms = if late_ms > 0 { JUDGING_HELD } else { self.queued_ms };
        self.discount_ms
    }
}
