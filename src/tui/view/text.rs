//! The console's text kit: counts, sizes, rates, durations and missing
//! values as people read them. Pure, no store: the screens and the dialogs
//! use them through `view`. Durations and the absent value are
//! `model::words`', as every layer says them.

use crate::model::words::{Said, duration};

/// "1 node", "3 nodes": a count with its noun (regular plurals only:
/// node, GPU, job).
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// "65.4 GiB", "512 MiB", "900 B": a size in binary units.
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b.max(0.0);
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// "1.2 GB/s", "340 MB/s": rates as people read them.
pub fn human_rate(bytes_per_s: Option<f64>) -> String {
    match bytes_per_s {
        None => "-".into(),
        Some(b) if b >= 1e9 => format!("{:.1} GB/s", b / 1e9),
        Some(b) if b >= 1e6 => format!("{:.0} MB/s", b / 1e6),
        Some(b) if b >= 1e3 => format!("{:.0} kB/s", b / 1e3),
        Some(b) => format!("{b:.0} B/s"),
    }
}

/// A reading for people: the value, or "-" where there is none.
pub use crate::model::words::shown as opt;

/// "2h13m", "13m", "45s", "3d04h": a duration to the minute, for how long
/// a job has run or a node has been out of service.
pub fn human_span(ms: i64) -> String {
    duration(ms, Said::ToMinute)
}

/// "3m", "2h", "45s": how long ago.
pub fn human_age(ms: i64) -> String {
    duration(ms, Said::Roughly)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_say_one_node_not_one_nodes() {
        assert_eq!(count(1, "node"), "1 node");
        assert_eq!(count(0, "node"), "0 nodes");
        assert_eq!(count(8, "GPU"), "8 GPUs");
    }

    #[test]
    fn human_units() {
        assert_eq!(human_rate(Some(12.3e9)), "12.3 GB/s");
        assert_eq!(human_rate(None), "-");
        assert_eq!(human_age(125_000), "2m");
        assert_eq!(human_span(2 * 3_600_000 + 13 * 60_000 + 5_000), "2h13m");
        assert_eq!(human_span(3 * 3_600_000), "3h00m");
        assert_eq!(human_span(45_000), "45s");
        assert_eq!(human_span(-5), "0s");
        assert_eq!(human_span(2 * 86_400_000 + 3_600_000), "2d01h");
        assert_eq!(human_bytes(70_192_646_706.0), "65.4 GiB");
        assert_eq!(human_bytes(900.0), "900 B");
    }
}
