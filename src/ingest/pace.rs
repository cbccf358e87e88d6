//! The probe that measures how late the console's runtime gets to its
//! tasks (`model::pace`), and timeouts on the console's own time: a
//! handshake or a keepalive ping that waited because the console was too
//! busy to read its answer is not the agent's failure.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::model::pace::{PROBE_PERIOD, Pace};

/// However late the console is, a timeout waits at most this much past its
/// limit: a console stopped for minutes still fails what never answers.
pub const STRETCH_MAX: Duration = Duration::from_secs(60);

/// Starts the probe on the current runtime: it ends with the last handle
/// to `pace` (the session's).
pub fn spawn_probe(pace: &Arc<Pace>) {
    // Counted from now: a runtime that never gets to the probe is late too.
    let now = Instant::now();
    pace.beat(now, now);
    let pace = Arc::downgrade(pace);
    tokio::spawn(async move {
        loop {
            let due = Instant::now() + PROBE_PERIOD;
            tokio::time::sleep_until(due).await;
            let Some(pace) = pace.upgrade() else { return };
            pace.beat(due, Instant::now());
        }
    });
}

/// `fut`'s output, or `None` once `limit` has passed on the console's own
/// time: the time it was late (`Pace::lost`) moves the deadline on, up to
/// `STRETCH_MAX`.
pub async fn timeout<F: Future>(pace: &Pace, limit: Duration, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let (start, lost_before) = (Instant::now(), pace.lost());
    let mut deadline = start + limit;
    loop {
        if let Ok(out) = tokio::time::timeout_at(deadline, &mut fut).await {
            return Some(out);
        }
        let lost = pace.lost().saturating_sub(lost_before).min(STRETCH_MAX);
        let later = start + limit + lost;
        if later <= Instant::now() {
            return None;
        }
        deadline = later;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks the runtime's only thread, as a starved process is stopped.
    async fn stall(d: Duration) {
        tokio::task::yield_now().await;
        std::thread::sleep(d);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_probe_says_how_late_a_stalled_runtime_is() {
        let pace = Arc::new(Pace::default());
        spawn_probe(&pace);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(pace.late(), Duration::ZERO, "an idle runtime is on time");
        stall(Duration::from_millis(1500)).await;
        // Said while it is still stalled (the probe has not run since)...
        assert!(pace.late() >= Duration::from_millis(1300), "{:?}", pace.late());
        // ...and once the probe has run again.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(pace.late() >= Duration::from_millis(1300), "{:?}", pace.late());
        assert!(pace.lost() >= Duration::from_millis(1300), "{:?}", pace.lost());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_timeout_does_not_count_the_time_the_console_was_stalled() {
        let pace = Arc::new(Pace::default());
        spawn_probe(&pace);
        tokio::time::sleep(Duration::from_millis(250)).await;
        // The answer comes 300 ms after a stall of 1.5 s: 1.8 s after the
        // ask, past a limit of 500 ms on the wall clock, well within it
        // on the console's own time.
        let answer = async {
            stall(Duration::from_millis(1500)).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            "answer"
        };
        let asked = Instant::now();
        let got = timeout(&pace, Duration::from_millis(500), answer).await;
        assert_eq!(got, Some("answer"));
        assert!(asked.elapsed() >= Duration::from_millis(1800));
        // What never answers still times out.
        let never = timeout(&pace, Duration::from_millis(300), std::future::pending::<()>()).await;
        assert_eq!(never, None);
    }
}
