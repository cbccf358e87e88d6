//! Samples stored as what a prediction from the node's earlier samples
//! missed.
//!
//! A node's sample differs from its last in a few readings (busy
//! percentages, power, growing counters); written whole, each costs its full
//! width every second, and zstd, which sees one frame at a time, cannot
//! tell. So every number of a sample is predicted from the number at the
//! same path in the node's earlier samples (`tokens` walks the paths) and
//! only the miss is written: steady readings cost 0, and a counter that
//! grows at a steady rate costs 0 too once its rate is known. Strings that
//! did not change are left out; raw floats are XOR'd with the last.
//!
//! A segment starts every node's memory afresh, so it replays alone;
//! inside one, frames are read in order (the reader keeps the memories).

use crate::model::sample::NodeSample;
pub use crate::record::memory::{Memory, Packed};
use crate::record::tokens;

/// Lays the numbers of a frame's samples out column by column: number 0
/// of every sample, then number 1 of every sample, ... Numbers at one path
/// (every GPU's power, every NVLink counter) then sit together, and zstd
/// codes each run by its own spread: a third smaller than sample by sample.
pub fn to_columns(samples: &[Vec<i64>]) -> Vec<i64> {
    let longest = samples.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::with_capacity(samples.iter().map(Vec::len).sum());
    for k in 0..longest {
        out.extend(samples.iter().filter_map(|s| s.get(k)));
    }
    out
}

/// The samples' numbers back from `to_columns`, given how many each has.
pub fn from_columns(lens: &[usize], columns: &[i64]) -> Result<Vec<Vec<i64>>, String> {
    let total = lens.iter().try_fold(0usize, |a, l| a.checked_add(*l));
    if total != Some(columns.len()) {
        return Err(format!("{} numbers for samples that hold {total:?}", columns.len()));
    }
    let mut out: Vec<Vec<i64>> = lens.iter().map(|l| Vec::with_capacity(*l)).collect();
    let mut next = columns.iter();
    let longest = lens.iter().copied().max().unwrap_or(0);
    for k in 0..longest {
        for (s, len) in out.iter_mut().zip(lens) {
            if k < *len {
                s.extend(next.next());
            }
        }
    }
    Ok(out)
}

/// Every node's memory, for one segment.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    nodes: Vec<Memory>,
}

impl Chain {
    /// Packs `s`, the next sample of `node`, and remembers it.
    pub fn pack(&mut self, node: usize, s: &NodeSample) -> Result<Packed, tokens::Error> {
        tokens::pack(s, self.memory(node))
    }

    /// The sample `p` packed for `node`, given every earlier one in order.
    pub fn unpack(&mut self, node: usize, p: &Packed) -> Result<NodeSample, tokens::Error> {
        tokens::unpack(p, self.memory(node))
    }

    /// The caller bounds `node` (the reader by the recording's node count).
    fn memory(&mut self, node: usize) -> &mut Memory {
        if self.nodes.len() <= node {
            self.nodes.resize_with(node + 1, Memory::default);
        }
        &mut self.nodes[node]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::{GpuError, GpuProcess, GpuReading};

    fn sample(seq: u64, util: u32, procs: usize, nvlink: bool) -> NodeSample {
        NodeSample {
            seq,
            time_ms: 1_767_225_600_000 + seq as i64 * 1000,
            host: None,
            gpus: vec![GpuReading {
                index: 0,
                // A string that comes, changes and goes.
                error: (procs != 1).then(|| GpuError::Other(format!("{procs} processes"))),
                util_pct: Some(util),
                power_w: Some(300.0 + f64::from(util) / 1000.0),
                energy_mj: Some(1_000_000 + seq * 300_000),
                // Counters that come every other sample, as the agent sends them.
                nvlink_tx_kib: if nvlink {
                    (0..18).map(|l| l * 1_000_000 + seq * 7_000).collect()
                } else {
                    vec![]
                },
                processes: (0..procs)
                    .map(|i| GpuProcess {
                        pid: 100 + i as u32,
                        used_mem_bytes: 1 << 30,
                        job_id: Some(4848),
                        owner: None,
                        command: None,
                    })
                    .collect(),
                ..GpuReading::default()
            }],
            ib_ports: vec![],
            sxids: vec![],
        }
    }

    #[test]
    fn columns_come_back_as_the_samples_numbers() {
        let samples = vec![vec![1, 2, 3], vec![], vec![4], vec![5, 6]];
        let cols = to_columns(&samples);
        assert_eq!(cols, [1, 4, 5, 2, 6, 3]);
        assert_eq!(from_columns(&[3, 0, 1, 2], &cols), Ok(samples));
        assert!(from_columns(&[3, 0, 1, 3], &cols).is_err());
        assert!(from_columns(&[usize::MAX, 1], &cols).is_err());
    }

    #[test]
    fn a_chain_of_samples_unpacks_to_the_same_samples() {
        let samples: Vec<NodeSample> = (1..=8)
            .map(|i| sample(i, 50 + (i % 3) as u32, [1, 2, 0, 1][i as usize % 4], i % 2 == 0))
            .chain((9..=12).map(|i| sample(i, 50, 1, i % 2 == 0)))
            .collect();
        let (mut w, mut r) = (Chain::default(), Chain::default());
        let mut packed = Vec::new();
        for s in &samples {
            let p = w.pack(7, s).expect("packs");
            let back = r.unpack(7, &p).expect("unpacks");
            assert_eq!(postcard::to_allocvec(&back).ok(), postcard::to_allocvec(s).ok());
            packed.push(p);
        }
        // Steady: the time, the energy and the NVLink counters grow at
        // their rates, the rest holds, NVLink counters coming and going
        // between samples: all predicted, but the NVLink list's length,
        // which alternates.
        for p in &packed[packed.len() - 2..] {
            assert!(p.nums.iter().filter(|n| **n != 0).count() <= 1, "{p:?}");
            assert!(p.strs.is_empty(), "{p:?}");
        }
        // Read without its chain, a sample is wrong (and says so, or differs).
        let mid = Chain::default().unpack(7, &packed[10]);
        assert!(mid.map_or(true, |s| s.seq != 11), "a delta needs its chain");
    }
}
