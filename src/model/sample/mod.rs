//! A node as the console knows it: the agent's description of it and its
//! samples, decoded once from the wire (`ingest::decode`). A reading that was
//! not taken, is not supported or could not be read is `None`: no consumer
//! ever has to guess whether a 0 means "zero" or "unknown". Every time is on
//! the console's clock.
//!
//! Serde here serves recordings (`record`): their encoding is positional,
//! so a change to these types is a new recording schema version.

mod desc;
mod reading;

pub use desc::{
    FaultRecord, Firmware, GpuDesc, IbPortDesc, MAX_FIRMWARE, NodeDesc, NodeHealth, NvLinkDesc, Partition, PcieLink,
    Vendor,
};
pub use reading::{
    Fabric, Gpm, GpuError, GpuEvent, GpuProcess, GpuReading, HostReading, IbErrors, IbReading, MigReading, NodeSample,
    PodRef, RasCount, Sxid, Xid,
};

/// The GPU of NVML index `index` in `gpus`: first where it nearly always
/// is (agents list GPUs in index order), then by search. The wall and the
/// detectors ask this of every GPU of every node, and a search walks
/// through descriptions out of the cache.
fn by_index<T>(gpus: &[T], index: u32, of: impl Fn(&T) -> u32) -> Option<&T> {
    gpus.get(position_of(gpus, index, None, of)?)
}

/// Where GPU `index` is in `gpus`: at `hint` or at its index where it
/// nearly always is, else by a binary search (lists are in index order),
/// and only for a list out of order by a walk. Asked for every GPU of a
/// node, this keeps a node's work linear, not quadratic in its GPUs.
pub fn position_of<T>(gpus: &[T], index: u32, hint: Option<usize>, of: impl Fn(&T) -> u32) -> Option<usize> {
    for at in [hint, Some(index as usize)].into_iter().flatten() {
        if gpus.get(at).is_some_and(|g| of(g) == index) {
            return Some(at);
        }
    }
    match gpus.binary_search_by_key(&index, &of) {
        Ok(at) if of(&gpus[at]) == index => Some(at),
        _ => gpus.iter().position(|g| of(g) == index),
    }
}

#[cfg(test)]
mod tests;
