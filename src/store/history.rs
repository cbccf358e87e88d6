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

    /// The higher of each reading, a missing one (255) giving way to any.
    fn max(self, o: Point) -> Point {
        let m = |a: u8, b: u8| match (a, b) {
            (255, x) | (x, 255) => x,
            (a, b) => a.max(b),
        };
        Point {
            util_pct: m(self.util_pct, o.util_pct),
            mem_pct: m(self.mem_pct, o.mem_pct),
            temp_c: m(self.temp_c, o.temp_c),
            power_pct: m(self.power_pct, o.power_pct),
        }
    }
}

/// How many of the newest samples are kept as they came: two minutes at
/// the agents' usual 1 s, the span of the detail pane's short zoom.
pub const FINE: usize = 120;
/// Older samples are kept as the highest of every `COARSE` in a row (5 s
/// at 1 s): the pane draws each column as the highest of its points, and
/// a ten-minute window on a 200-column terminal has three or more seconds
/// a column, so a spike stays on screen and little is lost. Ten minutes of
/// a node take 216 points instead of 600 (about 14 KB less a node of 8 GPUs:
/// 140 MB of a 10,240-node console).
pub const COARSE: u8 = 5;

/// One tier of the history: times and, per GPU position, points aligned
/// with them.
#[derive(Debug, Clone, Default)]
struct Tier {
    /// Milliseconds after the history's `base_ms`: half the memory of whole
    /// times, for ten minutes of every node of a large fleet.
    offsets: VecDeque<u32>,
    gpus: Vec<VecDeque<Point>>,
}

impl Tier {
    fn pop_front(&mut self) {
        self.offsets.pop_front();
        for g in &mut self.gpus {
            g.pop_front();
        }
    }

    /// Appends one entry, GPU position `i`'s point `point(i)` for `gpus`
    /// positions (more where held), each ring held at exactly `cap` (grown
    /// by doubling, a ring of 600 would end with room for 1,024).
    fn push(&mut self, offset: u32, gpus: usize, point: impl Fn(usize) -> Point, cap: usize) {
        if self.offsets.capacity() < cap {
            self.offsets.reserve_exact(cap - self.offsets.len());
        }
        self.offsets.push_back(offset);
        let n = self.offsets.len();
        if self.gpus.len() < gpus {
            self.gpus.resize_with(gpus, || VecDeque::with_capacity(cap));
        }
        for (i, ring) in self.gpus.iter_mut().enumerate() {
            // Keep every GPU ring aligned with the times.
            while ring.len() + 1 < n {
                ring.push_back(Point::NONE);
            }
            ring.push_back(point(i));
        }
    }

    /// GPU position `i`'s oldest point.
    fn front(&self, i: usize) -> Point {
        self.gpus.get(i).and_then(|r| r.front()).copied().unwrap_or(Point::NONE)
    }
}

/// Bounded history of a node: the newest `FINE` samples as they came,
/// older ones folded `COARSE` to a point, `cap` samples in all.
#[derive(Debug, Clone, Default)]
pub struct History {
    base_ms: i64,
    /// Older samples, each entry the highest of up to `COARSE` samples at
    /// the time of its oldest; the newest entry may still be filling.
    coarse: Tier,
    /// How many samples the newest coarse entry holds.
    filling: u8,
    fine: Tier,
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
    /// How many samples are held (a coarse entry counts as the samples it holds).
    pub fn samples(&self) -> usize {
        let folded = match self.coarse.offsets.len() {
            0 => 0,
            n => (n - 1) * usize::from(COARSE) + usize::from(self.filling),
        };
        folded + self.fine.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fine.offsets.is_empty()
    }

    /// How many GPU positions have points.
    pub fn gpus(&self) -> usize {
        self.fine.gpus.len().max(self.coarse.gpus.len())
    }

    /// The times held, oldest first (a coarse entry at its oldest sample's).
    pub fn times_ms(&self) -> impl Iterator<Item = i64> + '_ {
        let base = self.base_ms;
        (self.coarse.offsets.iter().chain(&self.fine.offsets)).map(move |&o| base + i64::from(o))
    }

    /// GPU position `gpu`'s points with their times, oldest first.
    pub fn points(&self, gpu: usize) -> impl Iterator<Item = (i64, Point)> + '_ {
        let base = self.base_ms;
        [&self.coarse, &self.fine].into_iter().flat_map(move |t| {
            let ring = t.gpus.get(gpu);
            let point = move |i: usize| ring.and_then(|r| r.get(i)).copied().unwrap_or(Point::NONE);
            (t.offsets.iter().enumerate()).map(move |(i, &o)| (base + i64::from(o), point(i)))
        })
    }

    fn oldest_ms(&self) -> Option<i64> {
        self.times_ms().next()
    }

    pub fn newest_ms(&self) -> Option<i64> {
        self.fine.offsets.back().map(|&o| self.base_ms + i64::from(o))
    }

    /// Drops the oldest entry: a coarse one while there are any.
    fn pop_front(&mut self) {
        if self.coarse.offsets.is_empty() {
            self.fine.pop_front();
        } else {
            self.coarse.pop_front();
            if self.coarse.offsets.is_empty() {
                self.filling = 0;
            }
        }
    }

    /// `t` as an offset, moving the base where `t` falls outside what an
    /// offset from it can say (a console up for 49 days, a clock that
    /// stepped back). Every time held is within `u32::MAX` ms of `t`.
    fn offset_of(&mut self, t: i64) -> u32 {
        if let Some(o) = u32::try_from(t - self.base_ms).ok().filter(|_| !self.is_empty()) {
            return o;
        }
        let (was, oldest) = (self.base_ms, self.oldest_ms().unwrap_or(t).min(t));
        let offset = |x: i64| u32::try_from(x - oldest).unwrap_or(u32::MAX);
        for o in self.coarse.offsets.iter_mut().chain(&mut self.fine.offsets) {
            *o = offset(was + i64::from(*o));
        }
        self.base_ms = oldest;
        offset(t)
    }

    /// Appends a sample; past `FINE` the oldest fine sample is folded into
    /// the coarse tier, and past `cap` samples the oldest go.
    pub fn push(&mut self, s: &NodeSample, desc: Option<&NodeDesc>, cap: usize) {
        // Samples 49 days apart cannot share a base: the old ones go (a
        // node silent that long, or a clock that stepped that far).
        let far = |held: Option<i64>| held.is_some_and(|x| (s.time_ms - x).unsigned_abs() > u64::from(u32::MAX));
        while far(self.oldest_ms()) || far(self.newest_ms()) {
            self.pop_front();
        }
        let offset = self.offset_of(s.time_ms);
        let point = |i: usize| {
            let Some(g) = s.gpus.get(i).filter(|g| g.error.is_none()) else {
                return Point::NONE;
            };
            let total = desc.and_then(|d| d.gpu(g.index)).and_then(|d| d.mem_total_bytes);
            Point {
                util_pct: byte(g.util_pct.map(|u| u.min(100))),
                mem_pct: pct(g.mem_used_bytes.map(|b| b as f64), total.map(|t| t as f64)),
                temp_c: byte(g.temp_c),
                power_pct: pct(g.power_w, g.power_limit_w),
            }
        };
        let fine = cap.min(FINE);
        // Room is made before the newest goes in: a ring pushed one past
        // its capacity doubles it, and every node's fine tier would hold
        // 240 points' room a GPU for 120 (4 KiB a node of 8 GPUs).
        while self.fine.offsets.len() >= fine {
            self.fold_oldest_fine(cap - fine);
        }
        self.fine.push(offset, s.gpus.len(), point, fine);
        while self.samples() > cap {
            self.pop_front();
        }
    }

    /// Moves the oldest fine sample into the coarse tier, which holds at
    /// most `samples` samples.
    fn fold_oldest_fine(&mut self, samples: usize) {
        let Some(&at) = self.fine.offsets.front() else {
            return;
        };
        let (fine, gpus) = (&self.fine, self.fine.gpus.len());
        if self.filling > 0 && self.filling < COARSE {
            for (i, ring) in self.coarse.gpus.iter_mut().enumerate() {
                if let Some(p) = ring.back_mut() {
                    *p = p.max(fine.front(i));
                }
            }
            self.filling += 1;
        } else {
            let entries = samples.div_ceil(usize::from(COARSE)) + 1;
            self.coarse.push(at, gpus, |i| fine.front(i), entries);
            self.filling = 1;
        }
        self.fine.pop_front();
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
        assert_eq!(h.points(0).count(), h.samples(), "points stay aligned with times");
    }

    fn busy(t: i64, util: u32) -> NodeSample {
        NodeSample {
            time_ms: t,
            gpus: vec![crate::model::sample::GpuReading {
                util_pct: Some(util),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn ten_minutes_are_kept_whole_for_two_and_five_to_a_point_before() {
        let mut h = History::default();
        for t in 0..1000 {
            // One spike, long enough ago to be in the coarse tier.
            let util = if t == 650 { 97 } else { 10 };
            h.push(&busy(t * 1000, util), None, 600);
        }
        let points: Vec<(i64, Point)> = h.points(0).collect();
        assert_eq!(points.len(), FINE + 480 / usize::from(COARSE), "216 points, not 600");
        assert_eq!(h.samples(), 600);
        assert_eq!(
            points.first().map(|p| p.0),
            Some(400_000),
            "the oldest of the 600 samples"
        );
        assert_eq!(h.newest_ms(), Some(999_000));
        // The newest two minutes as they came, a second apart.
        let fine: Vec<i64> = points[points.len() - FINE..].iter().map(|p| p.0).collect();
        assert_eq!(fine, (880..1000).map(|t| t * 1000).collect::<Vec<_>>());
        // Older, five seconds a point, and the spike is not averaged away.
        assert_eq!(points[1].0 - points[0].0, 5000);
        let spike: Vec<(i64, u8)> = (points.iter().filter(|p| p.1.util_pct > 10))
            .map(|p| (p.0, p.1.util_pct))
            .collect();
        assert_eq!(spike, [(650_000, 97)]);
    }

    #[test]
    fn a_full_history_holds_no_room_it_does_not_use() {
        let mut h = History::default();
        for t in 0..700 {
            h.push(&busy(t * 1000, 50), None, 600);
        }
        let tiers = [
            ("fine", &h.fine, FINE),
            ("coarse", &h.coarse, 480 / usize::from(COARSE) + 1),
        ];
        for (name, tier, room) in tiers {
            assert_eq!(tier.offsets.capacity(), room, "{name} times");
            for ring in &tier.gpus {
                assert_eq!(ring.capacity(), room, "{name} points");
            }
        }
    }

    #[test]
    fn a_missing_reading_gives_way_to_any_in_its_fold() {
        let mut h = History::default();
        let mut at = |t: i64, g: crate::model::sample::GpuReading| {
            let s = NodeSample {
                time_ms: t,
                gpus: vec![g],
                ..Default::default()
            };
            h.push(&s, None, 600);
        };
        at(0, Default::default());
        at(
            1000,
            crate::model::sample::GpuReading {
                util_pct: Some(3),
                ..Default::default()
            },
        );
        for t in 2..=FINE as i64 + 1 {
            at(t * 1000, Default::default());
        }
        let first = h.points(0).next().expect("a coarse point");
        assert_eq!(
            first,
            (
                0,
                Point {
                    util_pct: 3,
                    ..Point::NONE
                }
            )
        );
    }
}
