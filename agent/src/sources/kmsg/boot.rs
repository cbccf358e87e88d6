//! When the machine booted, on the wall clock: a kernel log record is dated
//! in microseconds since boot. Apart from the records: it reads /proc and
//! the boot clock, not the log.

use std::path::Path;

/// Wall-clock milliseconds at boot: `btime` of `<proc_root>/stat` (whole
/// seconds, the same on every start, so a record always gets the same time);
/// without it, now less the time since boot.
pub fn boot_time_ms(proc_root: &Path) -> i64 {
    let stat = fleetop_proto::input::read_capped(&proc_root.join("stat"), 1 << 20).unwrap_or_default();
    let btime = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<i64>().ok());
    match btime {
        Some(s) => s.saturating_mul(1000),
        None => crate::now_ms() - since_boot_ms(),
    }
}

/// CLOCK_BOOTTIME in milliseconds (0 if unreadable).
// time_t and c_long are i64 here but i32 on 32-bit targets.
#[allow(clippy::useless_conversion)]
fn since_boot_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return 0;
    }
    i64::from(ts.tv_sec) * 1000 + i64::from(ts.tv_nsec) / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_time_comes_from_btime() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("stat"), "cpu 1 2 3\nbtime 1700000000\nprocesses 5\n").expect("w");
        assert_eq!(boot_time_ms(dir.path()), 1_700_000_000_000);
        // Without it: about now less the uptime, in the past.
        let guess = boot_time_ms(Path::new("/nonexistent/fleetop"));
        assert!(guess <= crate::now_ms());
    }
}
