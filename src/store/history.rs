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
    pub times: VecDeque<i64>,
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
    /// Appends a sample, dropping the oldest beyond `cap`.
    pub fn push(&mut self, s: &NodeSample, desc: Option<&NodeDesc>, cap: usize) {
        if self.times.len() >= cap {
            self.times.pop_front();
            for g in &mut self.gpus {
                g.pop_front();
            }
        }
        // Exactly `cap` from the start: grown by doubling, a ring of 600
        // would end with room for 1,024 (40% of a fleet's history unused).
        if self.times.capacity() < cap {
            self.times.reserve_exact(cap - self.times.len());
        }
        self.times.push_back(s.time_ms);
        let n = self.times.len();
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
