//! Bounded per-GPU history, compact enough that a whole fleet's ten minutes
//! fit comfortably in memory.

use std::collections::VecDeque;

use crate::model::sample::{NodeDesc, NodeSample};

/// One GPU's reading in the history. 255 means "no reading".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub util_pct: u8,
    pub mem_pct: u8,
    pub temp_c: u8,
    pub power_pct: u8,
}

impl Point {
    pub const NONE: Point = Point {
        util_pct: 255,
        mem_pct: 255,
        temp_c: 255,
        power_pct: 255,
    };
}

/// Bounded history of a node: sample times (console clock) and, per GPU
/// position, points aligned with them.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Milliseconds after `base_ms`: half the memory of whole times, for
    /// ten minutes of every node of a large fleet.
    offsets: VecDeque<u32>,
    base_ms: i64,
    pub gpus: Vec<VecDeque<Point>>,
}

/// A percentage in 0..=254, or 255 where either side is unknown.
fn pct(v: Option<f64>, total: Option<f64>) -> u8 {
    match (v, total) {
        (Some(v), Some(t)) if t > 0.0 => (v / t * 100.0).round().clamp(0.0, 254.0) as u8,
        _ => 255,
    }
}

fn byte(v: Option<u32>) -> u8 {
    v.map(|v| v.min(254) as u8).unwrap_or(255)
}

impl History {
    /// How many samples are held.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The time of the `i`-th sample held, oldest first.
    pub fn time_ms(&self, i: usize) -> Option<i64> {
        self.offsets.get(i).map(|&o| self.base_ms + i64::from(o))
    }

    /// The times of the samples held, oldest first.
    pub fn times_ms(&self) -> impl Iterator<Item = i64> + '_ {
        self.offsets.iter().map(|&o| self.base_ms + i64::from(o))
    }

    pub fn newest_ms(&self) -> Option<i64> {
        self.len().checked_sub(1).and_then(|i| self.time_ms(i))
    }

    fn pop_front(&mut self) {
        self.offsets.pop_front();
        for g in &mut self.gpus {
            g.pop_front();
        }
    }

    /// Keeps `t` as an offset, moving the base where `t` falls outside what
    /// an offset from it can say (a console up for 49 days, a clock that
    /// stepped back). Every time held is within `u32::MAX` ms of `t`.
    fn push_time(&mut self, t: i64) {
        let offset = match u32::try_from(t - self.base_ms).ok().filter(|_| !self.is_empty()) {
            Some(o) => o,
            None => {
                let (was, oldest) = (self.base_ms, self.time_ms(0).unwrap_or(t).min(t));
                let offset = |x: i64| u32::try_from(x - oldest).unwrap_or(u32::MAX);
                for o in &mut self.offsets {
                    *o = offset(was + i64::from(*o));
                }
                self.base_ms = oldest;
                offset(t)
            }
        };
        self.offsets.push_back(offset);
    }

    /// Appends a sample, dropping the oldest beyond `cap`.
    pub fn push(&mut self, s: &NodeSample, desc: Option<&NodeDesc>, cap: usize) {
        // Samples 49 days apart cannot share a base: the old ones go (a
        // node silent that long, or a clock that stepped that far).
        let far = |held: Option<i64>| held.is_some_and(|x| (s.time_ms - x).unsigned_abs() > u64::from(u32::MAX));
        while far(self.time_ms(0)) || far(self.newest_ms()) {
            self.pop_front();
        }
        if self.offsets.len() >= cap {
            self.pop_front();
        }
        self.push_time(s.time_ms);
        // Exactly `cap` from the start: grown by doubling, a ring of 600
        // would end with room for 1,024 (40% of a fleet's history unused).
        if self.offsets.capacity() < cap {
            self.offsets.reserve_exact(cap - self.offsets.len());
        }
        let n = self.offsets.len();
        if self.gpus.len() < s.gpus.len() {
            self.gpus.resize_with(s.gpus.len(), || VecDeque::with_capacity(cap));
        }
        for (i, ring) in self.gpus.iter_mut().enumerate() {
            let p = s
                .gpus
                .get(i)
                .filter(|g| g.error.is_none())
                .map(|g| {
                    let total = desc.and_then(|d| d.gpu(g.index)).and_then(|d| d.mem_total_bytes);
                    Point {
                        util_pct: byte(g.util_pct.map(|u| u.min(100))),
                        mem_pct: pct(g.mem_used_bytes.map(|b| b as f64), total.map(|t| t as f64)),
                        temp_c: byte(g.temp_c),
                        power_pct: pct(g.power_w, g.power_limit_w),
                    }
                })
                .unwrap_or(Point::NONE);
            // Keep every GPU ring aligned with `times`.
            while ring.len() + 1 < n {
                ring.push_back(Point::NONE);
            }
            ring.push_back(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_kept_across_a_long_uptime_and_a_clock_that_steps_back() {
        let mut h = History::default();
        let at = |t: i64| NodeSample {
            time_ms: t,
            gpus: vec![Default::default()],
            ..Default::default()
        };
        let held = |h: &History| h.times_ms().collect::<Vec<_>>();
        let start = 1_767_225_600_000;
        let day = 86_400_000;
        h.push(&at(start), None, 3);
        h.push(&at(start + 1000), None, 3);
        // Back by 5 s: before the base.
        h.push(&at(start - 5000), None, 3);
        assert_eq!(held(&h), [start, start + 1000, start - 5000]);
        // 30 days on: past an offset from the first base, within one from the held.
        h.push(&at(start + 30 * day), None, 3);
        h.push(&at(start + 60 * day), None, 3);
        // A node silent for 50 days: what it had before cannot share a base.
        h.push(&at(start + 110 * day), None, 3);
        assert_eq!(held(&h), [start + 110 * day]);
        assert_eq!(h.newest_ms(), Some(start + 110 * day));
        assert!(
            h.gpus.iter().all(|g| g.len() == h.len()),
            "points stay aligned with times"
        );
    }
}
