//! The per-GPU worker threads of the GPU libraries (NVML, AMD SMI). Each GPU
//! (each AMD partition too) is read on a thread of its own, so that a GPU
//! whose library call hangs holds up only itself: the sampler asks every
//! worker at once and waits until a deadline (`answer_deadline`); a worker
//! that has not answered by then is reported as stuck, naming the call it
//! is in, and is not waited for again until it answers. The words are
//! NVML's for both ("nvml_stuck: <call>: no answer for N ms"), so that every
//! console, old or new, flags a stuck AMD GPU as it flags a stuck NVIDIA one.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::proto::GpuSample;

/// How long a sample waits for a GPU: 80 % of the interval, so that the
/// rest of the node's sample (IB, host) and its sending still fit in the
/// tick and a stuck GPU costs the others no sample; at most 1 s, because
/// the libraries answer in milliseconds and at long intervals waiting
/// longer only ages the other readings; at least 250 ms, so that a healthy
/// GPU on a loaded node is not called stuck for a scheduling delay at very
/// short intervals (those samples then take longer and skip ticks).
pub fn answer_deadline(interval: Duration) -> Duration {
    (interval * 4 / 5).clamp(Duration::from_millis(250), Duration::from_secs(1))
}

/// The library call a worker is in, for a stuck GPU's report.
pub(crate) type Doing = Arc<Mutex<&'static str>>;

/// The sampler's end of a GPU's worker thread.
pub(crate) struct Worker {
    pub(crate) index: u32,
    /// The library's name in thread names and errors: "nvml", "amdsmi".
    library: &'static str,
    /// Requests out, answers back; `Err`: the worker cannot answer, the
    /// reason as sent for the GPU.
    link: Result<(Sender<()>, Receiver<GpuSample>), String>,
    doing: Doing,
    /// When the request not answered yet was sent.
    asked: Option<Instant>,
}

impl Worker {
    /// Starts the thread that reads GPU `index` with `read` for as long as
    /// the sampler lives. A panic in a read (a bug here, never the
    /// library's: it cannot unwind into Rust) costs that sample, not the GPU.
    pub(crate) fn spawn(
        library: &'static str,
        index: u32,
        doing: Doing,
        mut read: impl FnMut() -> GpuSample + Send + 'static,
    ) -> Worker {
        let (ask, asks) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("{library}-gpu{index}"))
            .spawn(move || {
                while asks.recv().is_ok() {
                    let s = catch_unwind(AssertUnwindSafe(&mut read)).unwrap_or_else(|_| GpuSample {
                        index,
                        error: format!("{library}_worker: reading the GPU failed (a bug in the agent)"),
                        ..Default::default()
                    });
                    if answer.send(s).is_err() {
                        return;
                    }
                }
            });
        let link = match spawned {
            Ok(_) => Ok((ask, answers)),
            Err(e) => {
                tracing::error!("GPU {index}: cannot start its {library} thread: {e}");
                Err(format!("{library}_worker: cannot start the GPU's reader thread: {e}"))
            }
        };
        Worker {
            index,
            library,
            link,
            doing,
            asked: None,
        }
    }

    /// The worker's thread is gone: say so in every sample from now on
    /// rather than take the agent down.
    fn gone(&mut self) {
        tracing::error!("GPU {}: its {} thread ended", self.index, self.library);
        self.link = Err(format!("{}_worker: the GPU's reader thread ended", self.library));
        self.asked = None;
    }

    /// Asks for a sample at `now`, unless the previous one is still under
    /// way (the GPU is stuck). Whether it asked.
    pub(crate) fn ask(&mut self, now: Instant) -> bool {
        let Ok((ask, answers)) = &self.link else {
            return false;
        };
        if self.asked.is_some() {
            match answers.try_recv() {
                // Answered after its deadline: readings from before the hang
                // are old, so it is asked again rather than believed.
                Ok(_) => self.asked = None,
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => {
                    self.gone();
                    return false;
                }
            }
        }
        if ask.send(()).is_err() {
            self.gone();
            return false;
        }
        self.asked = Some(now);
        true
    }

    /// The GPU's answer if it comes by `until`; otherwise a sample that says
    /// the GPU is stuck, naming the call and how long it has not answered.
    pub(crate) fn answer(&mut self, until: Instant) -> GpuSample {
        let mut s = GpuSample {
            index: self.index,
            ..Default::default()
        };
        let (Ok((_, answers)), Some(asked)) = (&self.link, self.asked) else {
            s.error = match &self.link {
                Err(e) => e.clone(),
                Ok(_) => format!("{}_worker: not asked", self.library),
            };
            return s;
        };
        match answers.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(answer) => {
                self.asked = None;
                answer
            }
            Err(RecvTimeoutError::Timeout) => {
                let call = self.doing.lock().map(|d| *d).unwrap_or("?");
                s.error = format!("nvml_stuck: {call}: no answer for {} ms", asked.elapsed().as_millis());
                s
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.gone();
                s.error = self.link.as_ref().err().cloned().unwrap_or_default();
                s
            }
        }
    }
}

/// Every GPU's sample, asked of all workers at once and waited for until
/// `wait` from now. One still in a call from an earlier sample is stuck and
/// not waited for again, so it delays no sample after the first that found
/// it stuck.
pub(crate) fn sample_all(workers: &mut [Worker], wait: Duration) -> impl Iterator<Item = (u32, GpuSample)> + '_ {
    let now = Instant::now();
    let asked: Vec<bool> = workers.iter_mut().map(|w| w.ask(now)).collect();
    let deadline = now + wait;
    workers
        .iter_mut()
        .zip(asked)
        .map(move |(w, asked)| (w.index, w.answer(if asked { deadline } else { now })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hung_read_is_stuck_by_name_and_a_panicking_one_costs_a_sample() {
        let doing: Doing = Arc::new(Mutex::new(""));
        let d = doing.clone();
        let mut w = Worker::spawn("amdsmi", 3, doing, move || {
            if let Ok(mut x) = d.lock() {
                *x = "amdsmi_get_gpu_activity";
            }
            std::thread::sleep(Duration::from_millis(300));
            GpuSample::default()
        });
        let now = Instant::now();
        assert!(w.ask(now));
        let s = w.answer(now + Duration::from_millis(20));
        assert!(
            s.error
                .starts_with("nvml_stuck: amdsmi_get_gpu_activity: no answer for "),
            "{}",
            s.error
        );
        assert!(!w.ask(Instant::now()), "not asked again while stuck");

        let mut p = Worker::spawn("amdsmi", 1, Arc::new(Mutex::new("")), || panic!("a bug"));
        let now = Instant::now();
        assert!(p.ask(now));
        let s = p.answer(now + Duration::from_secs(5));
        assert!(s.error.starts_with("amdsmi_worker: "), "{}", s.error);
        assert!(p.ask(Instant::now()), "the thread lives on");
    }

    #[test]
    fn a_gpu_is_waited_for_most_of_the_interval_within_bounds() {
        let ms = |n| Duration::from_millis(n);
        assert_eq!(answer_deadline(ms(1000)), ms(800));
        assert_eq!(answer_deadline(ms(500)), ms(400));
        // Short intervals: not a scheduling delay; long ones: a slow library.
        assert_eq!(answer_deadline(ms(10)), ms(250));
        assert_eq!(answer_deadline(ms(60_000)), ms(1000));
    }
}
