//! fleetop-agent: samples a GPU node (NVML, InfiniBand sysfs, the host, or a
//! simulated node) on its own clock and streams the samples over gRPC.
//!
//! It is a library too, so the console's demo and tests run real agents
//! in-process on loopback.

pub mod backend;
pub mod counters;
pub mod host;
pub mod ib;
pub mod jobs;
pub mod nvml;
pub mod sampler;
pub mod server;
pub mod sim;
pub mod throttle;
pub mod wire;

/// The generated wire types and gRPC client/server (see `proto/fleetop.proto`).
pub mod proto {
    #![allow(clippy::all, clippy::unwrap_used)]
    tonic::include_proto!("fleetop.v1");
}

/// The agent's version, sent to every subscriber in its node description.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
