//! fleetop-agent: samples a GPU node (NVML, InfiniBand sysfs, the host, or a
//! simulated node) on its own clock and streams the samples over gRPC.
//!
//! It is a library too, so the console's demo and tests run real agents
//! in-process on loopback.

pub mod backend;
pub mod bench;
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

/// Parses a command-line interval ("500ms", "1s", "10m"); zero is refused,
/// since nothing can be done every zero seconds.
pub fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be longer than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// The first non-empty line of a program's complaint, for one-line errors.
pub fn first_line(text: &[u8], otherwise: &str) -> String {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(otherwise)
        .to_string()
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn intervals_must_be_positive() {
        assert_eq!(
            super::parse_interval("250ms"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert!(super::parse_interval("0s").is_err());
        assert!(super::parse_interval("soon").is_err());
    }
}
