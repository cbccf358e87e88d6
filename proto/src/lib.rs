//! fleetop's wire contract, shared by the agent and the console: the
//! generated gRPC types (`pb`, from `fleetop.proto`, compiled with protox so
//! no machine needs `protoc`), the per-stream delta codec, and what both ends
//! must agree on about the numbers that travel (counter widths, throttle
//! bits, the order of InfiniBand error counters).
//!
//! The console depends on this crate, not on the agent, so it never links
//! NVML or CUDA code just to read samples.

pub mod absent;
pub mod bench;
pub mod codec;
pub mod counters;
pub mod ib;
pub mod input;
pub mod throttle;
pub mod util;
pub mod wire;

/// The generated wire types and gRPC client/server (see `fleetop.proto`).
pub mod pb {
    #![allow(clippy::all, clippy::unwrap_used)]
    tonic::include_proto!("fleetop.v1");
}

/// Ray's autoscaler state service (`ray/autoscaler.proto`, a subset of
/// Ray's own): the console's Ray node states and drains.
pub mod ray {
    #![allow(clippy::all, clippy::unwrap_used)]
    tonic::include_proto!("ray.rpc.autoscaler");
}
