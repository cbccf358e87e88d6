//! The agent's history: recent samples, bounded by count and by the memory
//! they take, oldest dropped first.
//!
//! Held as a subscriber's stream carries them (see `wire`): the oldest
//! sample whole, each later one a delta against the one before it, all as
//! encoded protobuf. A sample as structs takes ~11 KB for 8 GPUs and 8 IB
//! ports (every field its slot, ~40 heap blocks); encoded as a delta it is
//! ~650 B. That is what lets the demo's thousand in-process agents hold six
//! minutes each in a few hundred MB instead of 4 GB (whose page faults were
//! half the demo's start-up CPU), and lets a real agent's `--history-max-mib`
//! hold fifteen times more history. The newest sample is kept whole too:
//! it is the base of the next delta and what `/metrics`, burn-in and signals
//! read.
//!
//! A subscriber's backlog is the entries as they are: the first one it is
//! sent is whole (the oldest entry, or one rebuilt from the chain when it
//! asked for less history), each later one a delta against the one before,
//! as on the live stream.
//!
//! Some entries also keep a whole copy (a key), about one per eight whole
//! samples' worth of deltas: a backlog's first sample is rebuilt from the
//! last key before it, not from the oldest entry. Without keys, a console
//! asking for the last 10 s of a full ten-minute ring had each agent decode
//! ~590 samples (1.2 ms; 23 µs from a key); a 10,240-node console start so
//! cost the fleet 6 million decodes, and a swarm of 10,240 simulated agents
//! took 19-25 s to answer `export --once` (5-7 s with keys). The keys cost
//! at most an eighth more memory (11% for a busy node), counted in the
//! bytes bound.

use std::collections::VecDeque;
use std::sync::Arc;

use prost::Message;

use crate::proto::Sample;
use crate::wire;

/// One sample as held: its time (to choose a backlog) and its encoding.
#[derive(Debug, Clone)]
struct Entry {
    time_ms: i64,
    bytes: Arc<[u8]>,
}

/// What one entry costs beside its bytes: the entry in the deque and the
/// `Arc`'s two counts.
const ENTRY_OVERHEAD: usize = std::mem::size_of::<Entry>() + 2 * std::mem::size_of::<usize>();
/// The same for a key: its slot in the deque and the `Arc`'s counts.
const KEY_OVERHEAD: usize = std::mem::size_of::<(u64, Arc<[u8]>)>() + 2 * std::mem::size_of::<usize>();

pub struct Ring {
    /// `entries[0]` is whole; `entries[i]` a delta against `entries[i - 1]`.
    entries: VecDeque<Entry>,
    /// The position of `entries[0]` since the ring began (positions only
    /// grow; the keys are named by them).
    first: u64,
    /// Whole copies of some entries, oldest first, by position: never of
    /// `entries[0]`, which is whole itself.
    keys: VecDeque<(u64, Arc<[u8]>)>,
    /// Bytes of deltas pushed since the last key (or whole front).
    since_key: usize,
    /// The newest sample, whole (the same as the last entry).
    latest: Option<Arc<Sample>>,
    bytes: usize,
    max_samples: usize,
    max_bytes: usize,
}

/// A key is kept once the deltas since the last one reach this many times
/// a whole sample's size: at most an eighth more memory, and a backlog's
/// first sample rebuilt from at most as many bytes of deltas.
const KEY_EVERY: usize = 8;

/// The samples a subscriber is sent first, taken from the ring under its
/// lock (cheap: shared byte buffers), decoded as they are sent.
pub struct Backlog {
    /// From the oldest entry on; the first `skip` only rebuild the first
    /// sample sent, they are not sent.
    entries: Vec<Arc<[u8]>>,
    skip: usize,
    /// The last sample of the backlog, whole: the base of the first live delta.
    pub last: Option<Arc<Sample>>,
}

impl Backlog {
    /// How many samples the backlog sends.
    pub fn len(&self) -> usize {
        self.entries.len() - self.skip
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many held deltas are decoded to make the first sample sent whole.
    #[cfg(test)]
    fn rebuilds(&self) -> usize {
        self.skip.min(self.entries.len().saturating_sub(1))
    }

    /// The samples to send, in order, each as the stream carries it (the
    /// first whole, the rest deltas against the one before).
    pub fn samples(&self) -> impl Iterator<Item = Result<Sample, prost::DecodeError>> + '_ {
        self.encoded().map(|bytes| bytes.and_then(|b| Sample::decode(&b[..])))
    }

    /// The same samples encoded: held entries as they are, without decoding
    /// them, except a first one rebuilt whole from the chain.
    pub fn encoded(&self) -> impl Iterator<Item = Result<Arc<[u8]>, prost::DecodeError>> + '_ {
        let first = if self.skip == 0 || self.skip >= self.entries.len() {
            None
        } else {
            // The entries before the first sent only make it whole.
            let mut base: Option<Sample> = None;
            let rebuilt = self.entries[..=self.skip].iter().try_for_each(|bytes| {
                base = Some(whole(base.as_mut(), Sample::decode(&bytes[..])?));
                Ok(())
            });
            Some(rebuilt.map(|()| base.unwrap_or_default().encode_to_vec().into()))
        };
        let rest = self
            .entries
            .iter()
            .skip(self.skip + usize::from(self.skip > 0))
            .cloned()
            .map(Ok);
        first.into_iter().chain(rest)
    }
}

/// `got` undone against `base`; the ring only holds chains it made itself,
/// so a delta always finds its base.
fn whole(base: Option<&mut Sample>, got: Sample) -> Sample {
    // An error is unreachable with a chain the ring built; an empty sample
    // (which the console takes as one with no readings) rather than a panic.
    wire::decode(base, got).unwrap_or_default()
}

impl Ring {
    pub fn new(max_samples: usize, max_bytes: usize) -> Ring {
        Ring {
            // Grown as samples come, never reserved up front from a flag.
            entries: VecDeque::new(),
            first: 0,
            keys: VecDeque::new(),
            since_key: 0,
            latest: None,
            bytes: 0,
            max_samples: max_samples.max(1),
            max_bytes,
        }
    }

    pub fn push(&mut self, s: Arc<Sample>) {
        let encoded = match &self.latest {
            Some(prev) if !self.entries.is_empty() => wire::encode(Some(prev), &s).encode_to_vec(),
            _ => s.encode_to_vec(),
        };
        if self.entries.is_empty() {
            self.since_key = 0;
        } else {
            self.since_key += encoded.len();
            let whole = s.encoded_len();
            if self.since_key >= KEY_EVERY * whole {
                let key: Arc<[u8]> = s.encode_to_vec().into();
                self.bytes += key.len() + KEY_OVERHEAD;
                self.keys.push_back((self.first + self.entries.len() as u64, key));
                self.since_key = 0;
            }
        }
        self.bytes += encoded.len() + ENTRY_OVERHEAD;
        self.entries.push_back(Entry {
            time_ms: s.time_ms,
            bytes: encoded.into(),
        });
        self.latest = Some(s);
        // Drop the oldest; the new oldest is then made whole, from its key
        // or from the chain (which may take it over the bytes bound again:
        // then drop more). Each pass starts at the whole front, so it needs
        // no base from the one before.
        while self.over() {
            let mut base: Option<Sample> = None;
            while self.over() {
                let Some(old) = self.entries.pop_front() else { return };
                self.first += 1;
                self.bytes -= old.bytes.len() + ENTRY_OVERHEAD;
                if let Ok(got) = Sample::decode(&old.bytes[..]) {
                    base = Some(whole(base.as_mut(), got));
                }
            }
            while self.keys.front().is_some_and(|(at, _)| *at < self.first) {
                let (_, key) = self.keys.pop_front().expect("a key");
                self.bytes -= key.len() + KEY_OVERHEAD;
            }
            let Some(front) = self.entries.front_mut() else { return };
            if self.keys.front().is_some_and(|(at, _)| *at == self.first) {
                // The key becomes the entry: nothing to rebuild.
                let (_, key) = self.keys.pop_front().expect("a key");
                self.bytes -= KEY_OVERHEAD + front.bytes.len();
                front.bytes = key;
            } else if let Ok(got) = Sample::decode(&front.bytes[..]) {
                let bytes: Arc<[u8]> = whole(base.as_mut(), got).encode_to_vec().into();
                self.bytes = self.bytes - front.bytes.len() + bytes.len();
                front.bytes = bytes;
            }
        }
    }

    /// More held than either bound allows (the newest is always kept).
    fn over(&self) -> bool {
        self.entries.len() > self.max_samples || (self.bytes > self.max_bytes && self.entries.len() > 1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Memory the history takes: the encoded samples and their entries.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The newest sample, whole.
    pub fn latest(&self) -> Option<&Arc<Sample>> {
        self.latest.as_ref()
    }

    /// The samples taken at `since_ms` or later, for a new subscriber: from
    /// the first such one on (times only go back if the clock steps back).
    pub fn backlog(&self, since_ms: i64) -> Backlog {
        let skip = self.entries.partition_point(|e| e.time_ms < since_ms);
        let Some(front) = self.entries.front() else {
            return Backlog {
                entries: Vec::new(),
                skip: 0,
                last: None,
            };
        };
        let last = (skip < self.entries.len()).then(|| self.latest.clone()).flatten();
        // From the last key at or before the first sent (or the whole front).
        let at = self.first + skip as u64;
        let (from, head) = match self.keys.iter().rev().find(|(k, _)| *k <= at) {
            Some((k, bytes)) => ((k - self.first) as usize, bytes.clone()),
            None => (0, front.bytes.clone()),
        };
        let entries: Vec<Arc<[u8]>> = std::iter::once(head)
            .chain(self.entries.iter().skip(from + 1).map(|e| e.bytes.clone()))
            .collect();
        Backlog {
            entries,
            skip: skip - from,
            last,
        }
    }

    /// Every sample held, whole, oldest first (for tests and tools).
    pub fn samples(&self) -> Vec<Sample> {
        let mut base: Option<Sample> = None;
        self.entries
            .iter()
            .filter_map(|e| Sample::decode(&e.bytes[..]).ok())
            .map(|got| {
                let s = whole(base.as_mut(), got);
                base = Some(s.clone());
                s
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{GpuSample, IbSample};

    /// A busy-looking sample: counters that move, state words that do not.
    fn sample(t: i64, gpus: usize) -> Arc<Sample> {
        Arc::new(Sample {
            seq: t as u64 + 1,
            time_ms: t,
            gpus: (0..gpus)
                .map(|i| GpuSample {
                    index: i as u32,
                    util_pct: (t % 100) as u32,
                    energy_mj: 1_000_000 * t as u64 + i as u64,
                    mem_used_bytes: 40 << 30,
                    ..Default::default()
                })
                .collect(),
            ib_ports: vec![IbSample {
                port: 1,
                state: "4: ACTIVE".into(),
                tx_bytes: 1 << 40 | t as u64,
                errors: vec![0; 15],
                errors_present_mask: 0x7fff,
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    /// `n` seconds of a busy simulated 8 x H100 node with 8 IB ports.
    fn busy_node(seed: u64, n: i64) -> impl Iterator<Item = Sample> {
        use crate::collector::Collector;
        use crate::sim::{Model, Scenario, SimConfig, SimNode};
        use crate::sources::Sampler;
        let sim: Box<dyn Sampler> = Box::new(SimNode::new(SimConfig {
            hostname: "sim01".into(),
            gpus: 8,
            ib_ports: 8,
            model: Model::H100,
            scenario: Scenario::Training,
            seed,
            start_ms: 0,
            interval_ms: 1000,
            problem_ms: None,
        }));
        let mut c = Collector::new(vec![sim], Default::default());
        (0..n).map(move |t| c.sample(t * 1000).expect("a sample"))
    }

    /// What a subscriber's decoder makes of a backlog.
    fn received(b: &Backlog) -> Vec<Sample> {
        let mut last: Option<Sample> = None;
        b.samples()
            .map(|got| {
                let s = wire::decode(last.as_mut(), got.expect("decodes")).expect("in sequence");
                last = Some(s.clone());
                s
            })
            .collect()
    }

    #[test]
    fn the_ring_is_bounded_by_bytes_whatever_its_sample_bound() {
        // A million samples allowed (as a 10 ms interval over 3 hours
        // would ask), but only 1 MiB: the bytes bound wins.
        let mut ring = Ring::new(1_000_000, 1 << 20);
        for t in 0..20_000 {
            ring.push(sample(t, 8));
        }
        assert!(ring.bytes() <= 1 << 20, "{} bytes", ring.bytes());
        assert!(ring.len() < 20_000 && ring.len() > 100, "{} samples", ring.len());
        // The newest are kept.
        assert_eq!(ring.latest().map(|s| s.time_ms), Some(19_999));
        assert_eq!(ring.samples().last().map(|s| s.time_ms), Some(19_999));
        // And by count, when that is the smaller bound.
        let mut ring = Ring::new(10, 64 << 20);
        for t in 0..100 {
            ring.push(sample(t, 8));
        }
        assert_eq!(ring.len(), 10);
        assert_eq!(ring.samples().first().map(|s| s.time_ms), Some(90));
    }

    #[test]
    fn history_is_held_as_deltas_a_fraction_of_the_samples_size() {
        // Ten minutes of a busy simulated 8 x H100 node with 8 IB ports.
        let mut ring = Ring::new(600, 64 << 20);
        let mut whole = 0;
        let mut pushed = Vec::new();
        for s in busy_node(7, 600) {
            whole += s.encoded_len();
            pushed.push(s.clone());
            ring.push(Arc::new(s));
        }
        // Less than the samples encoded whole, and a fraction of the
        // structs alone (without the ~40 heap blocks each owns).
        assert!(
            ring.bytes() < whole,
            "{} bytes held for {whole} encoded whole",
            ring.bytes()
        );
        let structs = 8 * (std::mem::size_of::<GpuSample>() + std::mem::size_of::<IbSample>());
        assert!(
            ring.bytes() / 600 * 3 < structs,
            "{} bytes a sample",
            ring.bytes() / 600
        );
        assert_eq!(ring.samples(), pushed, "and nothing lost");
        // The keys: at most an eighth more.
        let keys: usize = ring.keys.iter().map(|(_, k)| k.len() + KEY_OVERHEAD).sum();
        assert!(
            keys > 0 && keys * KEY_EVERY <= ring.bytes(),
            "{keys} of {} bytes",
            ring.bytes()
        );
    }

    #[test]
    fn a_short_backlog_of_a_long_history_is_rebuilt_from_a_key_not_from_the_oldest_sample() {
        // Ten minutes of a busy simulated node, then a console asking for
        // the last 10 s (as a large fleet's console does at start).
        // Held for 300 samples: the oldest are dropped through the keys too.
        let mut ring = Ring::new(300, 64 << 20);
        let mut pushed = Vec::new();
        for s in busy_node(3, 600) {
            pushed.push(s.clone());
            ring.push(Arc::new(s));
        }
        assert_eq!(ring.samples(), pushed[300..], "the ring after dropping through keys");
        for since in [590_000, 450_000, 301_000, 300_000, 0] {
            let b = ring.backlog(since);
            let first = (since / 1000).max(300) as usize;
            assert_eq!(received(&b), pushed[first..], "the last {} s", 600 - first);
            // Within the samples between two keys, not the ~290 before it.
            assert!(
                b.rebuilds() < 100,
                "{} decoded for the backlog from {since}",
                b.rebuilds()
            );
        }
    }

    #[test]
    fn every_backlog_decodes_to_the_samples_pushed_after_drops_too() {
        let mut ring = Ring::new(50, 64 << 20);
        for t in 0..120 {
            ring.push(sample(t, 4));
        }
        let want: Vec<Sample> = (70..120).map(|t| (*sample(t, 4)).clone()).collect();
        // All of it: the oldest held is whole though its base was dropped.
        let all = ring.backlog(i64::MIN);
        assert_eq!(all.len(), 50);
        assert_eq!(received(&all), want);
        assert_eq!(all.last.as_ref().map(|s| s.time_ms), Some(119));
        // Part of it: the first sent is rebuilt whole from the chain.
        let part = ring.backlog(100);
        assert_eq!(part.len(), 20);
        assert_eq!(received(&part), want[30..]);
        assert_eq!(received(&ring.backlog(119)), want[49..]);
        // None of it: no base for the live stream either.
        let none = ring.backlog(1_000);
        assert!(none.is_empty() && none.last.is_none());
        assert!(received(&none).is_empty());
    }
}
