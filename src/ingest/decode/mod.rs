//! Wire to domain, once. Everything the console holds about a node passes
//! through here: prost's "0 or empty means unknown" becomes `None`, the
//! agent's clock becomes the console's, and the per-stream delta encoding is
//! undone. No other module reads a wire type's fields.
//!
//! The description (`desc`), a sample's readings (`sample`) and the process
//! lists shared from one sample to the next (`processes`) each have their
//! file; the per-connection state (`Stream`: the delta base, the clock
//! skew) is here.

use fleetop_proto::pb;
use fleetop_proto::wire::{self, BadDelta};

use crate::model::sample::{NodeDesc, NodeSample, PcieLink};

mod burnin;
mod desc;
mod processes;
mod sample;

pub use burnin::{burn_in_alone, check};
pub use desc::node_desc;
use processes::LastProcesses;
pub use sample::sample;
use sample::sample_with;

pub(super) fn text(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

pub(super) fn nz<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

/// A list at its length. A description is held for as long as its node
/// is, and a list collected from the wire's in place keeps the wire's
/// allocation: 32 NVLink entries' room a GPU for 18 links.
pub(super) fn exact<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

/// A PCIe link from a generation and a width, both known or neither.
pub(super) fn pcie_link(gen_: u32, width: u32) -> Option<PcieLink> {
    (gen_ != 0 && width != 0).then_some(PcieLink { gen_, width })
}

/// Why part of a stream's history could not be taken in.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HistoryError {
    #[error("a history entry is not a sample: {0}")]
    Undecodable(#[from] prost::DecodeError),
    #[error(transparent)]
    BadDelta(#[from] BadDelta),
}

/// How far ahead of the console a live sample may seem before the agent's
/// clock is taken to have stepped: more than network delay ever explains.
const STEP_MS: i64 = 2000;

/// The decoding state of one connection to one agent: the wire's (the last
/// whole sample, the base of the next delta) and the clock skew.
#[derive(Debug, Default)]
pub struct Stream {
    wire: wire::Decoder,
    /// Agent clock minus console clock, measured on this connection.
    skew_ms: i64,
    /// The history has arrived: samples now come as they are taken, so
    /// their time can be checked against the console's.
    live: bool,
    processes: LastProcesses,
}

impl Stream {
    /// The node description that opens the connection; measures the skew
    /// from the agent's clock reading in it (`now_ms`: when it arrived).
    pub fn info(&mut self, info: pb::NodeInfo, now_ms: i64) -> NodeDesc {
        self.skew_ms = info.agent_time_ms - now_ms;
        self.wire = wire::Decoder::default();
        self.live = false;
        let mut desc = node_desc(info);
        for b in &mut desc.health.burn_ins {
            b.started_ms -= self.skew_ms;
            b.ended_ms -= self.skew_ms;
        }
        desc
    }

    /// A burn-in the agent just recorded, sent live.
    pub fn burn_in(&self, r: pb::BurnInRecord) -> crate::model::bench::BurnIn {
        burn_in_alone(r, self.skew_ms)
    }

    /// The state a second stream from the same agent process starts with,
    /// when that stream does not describe the node again: the clock skew
    /// measured on this one (the same clock), nothing of its samples.
    pub fn rejoining(&self) -> Stream {
        Stream {
            skew_ms: self.skew_ms,
            ..Stream::default()
        }
    }

    pub fn caught_up(&mut self) {
        self.live = true;
    }

    /// One sample as it arrived (perhaps a delta), at console time `now_ms`.
    ///
    /// An agent whose clock steps while connected would otherwise have its
    /// samples dated wrongly for as long as the connection lasts: a live
    /// sample dated before the previous one, or in the future, re-measures
    /// the skew from itself (it was taken just now).
    pub fn sample(&mut self, got: pb::Sample, now_ms: i64) -> Result<NodeSample, BadDelta> {
        let last_ms = self.wire.base().map(|p| p.time_ms);
        let (whole, kept) = self.wire.decode_kept(got)?;
        if self.live {
            let went_back = last_ms.is_some_and(|t| whole.time_ms <= t);
            let ahead = whole.time_ms - self.skew_ms - now_ms > STEP_MS;
            if went_back || ahead {
                self.skew_ms = whole.time_ms - now_ms;
            }
        }
        // Converted from the kept base rather than from a copy of it.
        Ok(sample_with(whole, self.skew_ms, &mut self.processes, kept))
    }

    /// Part of the history, many samples in one message (each entry an
    /// encoded sample, a delta against the one before as on the live
    /// stream), at console time `now_ms`.
    pub fn history(&mut self, h: pb::History, now_ms: i64) -> Result<Vec<NodeSample>, HistoryError> {
        h.samples
            .iter()
            .map(|bytes| self.history_sample(bytes, now_ms))
            .collect()
    }

    /// One entry of a `History` message. A source hands each on before it
    /// decodes the next: a batch decoded whole, in every node's task at
    /// once, was most of a large console's memory at start.
    pub fn history_sample(&mut self, bytes: &[u8], now_ms: i64) -> Result<NodeSample, HistoryError> {
        use prost::Message;
        Ok(self.sample(pb::Sample::decode(bytes)?, now_ms)?)
    }
}

#[cfg(test)]
mod tests;
