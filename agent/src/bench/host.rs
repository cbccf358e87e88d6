//! Host memory copy bandwidth with every core copying at once: a node whose
//! DIMMs or memory channels are degraded shows it here, and GPU feeding
//! (pinned staging, data loaders) depends on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// GB/s (1e9 bytes/s) copied by `threads` threads, each copying its own
/// `bytes` buffer `runs` times; the median of the runs' aggregate rates.
pub fn memcpy_all_cores(bytes_per_thread: usize, runs: u32, stop: &AtomicBool) -> Option<f64> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut rates = Vec::new();
    // Buffers are made (and touched) once, outside the timing.
    let mut bufs: Vec<(Vec<u8>, Vec<u8>)> = (0..threads)
        .map(|i| (vec![i as u8; bytes_per_thread], vec![0u8; bytes_per_thread]))
        .collect();
    for _ in 0..runs.max(1) {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let start = Instant::now();
        std::thread::scope(|s| {
            for (src, dst) in bufs.iter_mut() {
                s.spawn(move || {
                    dst.copy_from_slice(src);
                    std::hint::black_box(&dst);
                });
            }
        });
        let secs = start.elapsed().as_secs_f64();
        rates.push((threads * bytes_per_thread) as f64 / secs / 1e9);
    }
    super::median(&rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_at_a_plausible_rate() {
        let stop = AtomicBool::new(false);
        let r = memcpy_all_cores(8 << 20, 3, &stop).expect("a rate");
        assert!(r > 0.1 && r < 10_000.0, "{r} GB/s");
        stop.store(true, Ordering::Relaxed);
        assert_eq!(memcpy_all_cores(8 << 20, 3, &stop), None, "a stop request is honoured");
    }
}
