//! Time on the console's clock. Every time the console holds (sample times,
//! flag starts, XIDs) is console time: agent times are converted once, when
//! they arrive, with the skew measured on their connection.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// The console's wall clock, in ms since the Unix epoch.
pub use fleetop_proto::util::now_ms;

/// RFC 3339 with milliseconds, in UTC.
pub fn rfc3339(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The console's redraw interval where none is given.
pub const DEFAULT_REFRESH: std::time::Duration = std::time::Duration::from_millis(200);

/// `--refresh` and `refresh`: 50 ms (a local terminal) to 10 s (a slow link).
pub fn parse_refresh(s: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    fleetop_proto::util::parse_bounded_duration(s, Duration::from_millis(50), Duration::from_secs(10))
        .map_err(|e| e.to_string())
}
