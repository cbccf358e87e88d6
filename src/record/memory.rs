//! What the sample codec's two halves share: a node's memory of its
//! earlier samples, by path (`Memory`, which predicts each number and
//! remembers each string), and a sample as written (`Packed`). `tokens`
//! walks a sample's paths through a `Memory`; `delta` keeps one per node.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One sample as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Packed {
    /// Each number minus its prediction.
    pub nums: Vec<i64>,
    /// `None`: the string at that path last time, unchanged.
    pub strs: Vec<Option<String>>,
    /// Raw float bits XOR'd with the last at that path.
    pub raws: Vec<u64>,
}

/// What one number's past says about it.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    last: i64,
    /// The last change.
    step: i64,
    /// Whether "last + step" predicted the last value better than "last"
    /// did: true for counters, false for readings that wander.
    trend: bool,
}

impl Slot {
    fn predict(&self) -> i64 {
        if self.trend {
            self.last.wrapping_add(self.step)
        } else {
            self.last
        }
    }

    fn learn(&mut self, v: i64) {
        let by_trend = v.wrapping_sub(self.last.wrapping_add(self.step)).unsigned_abs();
        let by_last = v.wrapping_sub(self.last).unsigned_abs();
        self.trend = by_trend < by_last;
        self.step = v.wrapping_sub(self.last);
        self.last = v;
    }
}

/// One node's earlier samples, by path: what `tokens` predicts from. The
/// writer and the reader each keep one per node and change it alike.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    nums: HashMap<u64, Slot>,
    strs: HashMap<u64, String>,
    raws: HashMap<u64, u64>,
}

impl Memory {
    pub fn num_residual(&mut self, key: u64, v: i64) -> i64 {
        let slot = self.nums.entry(key).or_default();
        let r = v.wrapping_sub(slot.predict());
        slot.learn(v);
        r
    }

    pub fn num_from_residual(&mut self, key: u64, r: i64) -> i64 {
        let slot = self.nums.entry(key).or_default();
        let v = r.wrapping_add(slot.predict());
        slot.learn(v);
        v
    }

    pub fn str_residual(&mut self, key: u64, v: &str) -> Option<String> {
        if self.strs.get(&key).is_some_and(|s| s == v) {
            return None;
        }
        self.strs.insert(key, v.to_owned());
        Some(v.to_owned())
    }

    /// None when the residual says "unchanged" and nothing was there.
    pub fn str_from_residual(&mut self, key: u64, r: Option<&str>) -> Option<String> {
        match r {
            Some(v) => {
                self.strs.insert(key, v.to_owned());
                Some(v.to_owned())
            }
            None => self.strs.get(&key).cloned(),
        }
    }

    pub fn raw_residual(&mut self, key: u64, bits: u64) -> u64 {
        bits ^ self.raws.insert(key, bits).unwrap_or(0)
    }

    pub fn raw_from_residual(&mut self, key: u64, r: u64) -> u64 {
        let bits = r ^ self.raws.get(&key).copied().unwrap_or(0);
        self.raws.insert(key, bits);
        bits
    }
}
