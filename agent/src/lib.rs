//! fleetop-agent: samples a GPU node (NVML, InfiniBand sysfs, the host, or a
//! simulated node) on its own clock and streams the samples over gRPC.
//!
//! It is a library too, so the console's demo and tests run real agents
//! in-process on loopback.

pub mod backend;
pub mod bench;
pub mod collector;
pub mod config;
pub mod keep;
pub mod manual;
pub mod serve;
pub mod sim;
pub mod sources;

/// The wire contract lives in its own crate, shared with the console.
pub use fleetop_proto::pb as proto;
pub use fleetop_proto::util::{first_line, now_ms, parse_interval};
pub use fleetop_proto::{counters, throttle, wire};

/// The agent's version, sent to every subscriber in its node description.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `--version`: the version and the commit built from (build.rs).
pub const VERSION_LONG: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("FLEETOP_COMMIT"), ")");
