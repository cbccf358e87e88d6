//! Deltas of hardware counters, shared by the agent and the console.
//!
//! Counters travel as counters; rates are derived from two samples. Hardware
//! counters misbehave in three ways that must not turn into fake spikes: a
//! narrow counter wraps (InfiniBand's legacy 32-bit data counters), a small
//! error counter saturates at its maximum and stays there (IB PMA counters),
//! and any counter can be reset (driver reload, `perfquery -R`).

/// How a counter is stored in hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterWidth {
    /// Width of the raw hardware register in bits (64 for "never wraps").
    pub bits: u32,
    /// Units of the reported value per raw unit (4 for IB `port_*_data`, whose
    /// raw unit is four octets and which the agent reports in octets).
    pub scale: u64,
}

impl CounterWidth {
    pub const U64: CounterWidth = CounterWidth { bits: 64, scale: 1 };

    pub const fn bits(bits: u32) -> Self {
        CounterWidth { bits, scale: 1 }
    }

    /// Largest value the counter can report, in reported units.
    pub fn max(self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            ((1u64 << self.bits) - 1).saturating_mul(self.scale)
        }
    }
}

/// What happened to a counter between two readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// The counter moved by exactly this much (wraps accounted for).
    Exact(u64),
    /// The counter sits at its maximum: it moved by at least this much, and
    /// further increments are invisible until it is cleared.
    Saturated(u64),
    /// The counter went backwards in a way a wrap cannot explain: it was reset.
    /// No delta can be known for this interval.
    Reset,
}

impl Delta {
    /// The increase, where one is known (a saturated counter gives its lower bound).
    pub fn value(self) -> Option<u64> {
        match self {
            Delta::Exact(v) | Delta::Saturated(v) => Some(v),
            Delta::Reset => None,
        }
    }
}

/// The change from `prev` to `cur` of a counter of the given width.
///
/// A decrease counts as a wrap only for narrow counters whose previous value
/// was in the upper half of their range and whose new value is in the lower
/// half; anything else that goes down is a reset. This keeps a reset of a
/// small counter from being read as an enormous wrap. A value above the
/// width's maximum shows the counter is wider than assumed (IB's extended
/// 64-bit data counters): it cannot have wrapped at that width either.
pub fn delta(prev: u64, cur: u64, width: CounterWidth) -> Delta {
    let max = width.max();
    if cur >= prev {
        let d = cur - prev;
        if width.bits < 64 && cur == max {
            Delta::Saturated(d)
        } else {
            Delta::Exact(d)
        }
    } else if width.bits < 64 && prev <= max && prev > max / 2 && cur <= max / 2 {
        // Distance to the top, plus one raw step to reach zero, plus cur.
        Delta::Exact((max - prev) + width.scale + cur)
    } else {
        Delta::Reset
    }
}

/// Rate per second of a counter over `dt_ms`, or `None` when it cannot be
/// known (reset, no time elapsed).
pub fn rate_per_s(prev: u64, cur: u64, width: CounterWidth, dt_ms: i64) -> Option<f64> {
    if dt_ms <= 0 {
        return None;
    }
    match delta(prev, cur, width) {
        Delta::Exact(d) => Some(d as f64 * 1000.0 / dt_ms as f64),
        Delta::Saturated(_) | Delta::Reset => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA32: CounterWidth = CounterWidth { bits: 32, scale: 4 };

    #[test]
    fn plain_increase_is_exact() {
        assert_eq!(delta(100, 250, CounterWidth::U64), Delta::Exact(150));
        assert_eq!(delta(7, 7, CounterWidth::bits(16)), Delta::Exact(0));
    }

    #[test]
    fn narrow_data_counter_wraps() {
        // Raw 0xFFFF_FFF0 -> raw 0x10 is 0x20 raw steps, 0x80 octets.
        let prev = 0xFFFF_FFF0u64 * 4;
        let cur = 0x10u64 * 4;
        assert_eq!(delta(prev, cur, DATA32), Delta::Exact(0x20 * 4));
    }

    #[test]
    fn saturated_error_counter_is_not_a_rate() {
        let w = CounterWidth::bits(16);
        assert_eq!(delta(65_000, 65_535, w), Delta::Saturated(535));
        assert_eq!(delta(65_535, 65_535, w), Delta::Saturated(0));
        assert_eq!(rate_per_s(65_535, 65_535, w, 1000), None);
    }

    #[test]
    fn small_decrease_is_a_reset_not_a_wrap() {
        assert_eq!(delta(1_000, 10, DATA32), Delta::Reset);
        assert_eq!(delta(1_000, 10, CounterWidth::U64), Delta::Reset);
        assert_eq!(delta(200, 3, CounterWidth::bits(16)), Delta::Reset);
    }

    #[test]
    fn wider_than_assumed_counter_going_back_is_a_reset() {
        // A 64-bit extended data counter past the 32-bit range, then reset.
        let prev = 1u64 << 40;
        assert_eq!(delta(prev, 4_096, DATA32), Delta::Reset);
        assert_eq!(delta(prev, prev + 8, DATA32), Delta::Exact(8));
    }

    #[test]
    fn rate_uses_elapsed_time() {
        assert_eq!(rate_per_s(0, 500, CounterWidth::U64, 500), Some(1000.0));
        assert_eq!(rate_per_s(0, 500, CounterWidth::U64, 0), None);
    }
}
