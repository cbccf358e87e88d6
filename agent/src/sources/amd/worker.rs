//! One thread per AMD GPU (each partition too), as for NVML: a GPU whose
//! AMD SMI call hangs holds up only itself. The sampler asks every worker
//! at once and waits until `nvml::answer_deadline`; a worker that has not
//! answered by then is reported as stuck, naming the call it is in, and is
//! not waited for again until it answers. The words are NVML's
//! ("nvml_stuck: <call>: no answer for N ms"), so that every console, old
//! or new, flags a stuck AMD GPU as it flags a stuck NVIDIA one.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::proto::GpuSample;

/// The AMD SMI call a worker is in, for a stuck GPU's report.
pub(crate) type Doing = Arc<Mutex<&'static str>>;

/// The sampler's end of a GPU's worker thread.
pub(crate) struct Worker {
    pub(crate) index: u32,
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
    pub(crate) fn spawn(index: u32, doing: Doing, mut read: impl FnMut() -> GpuSample + Send + 'static) -> Worker {
        let (ask, asks) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("amdsmi-gpu{index}"))
            .spawn(move || {
                while asks.recv().is_ok() {
                    let s = catch_unwind(AssertUnwindSafe(&mut read)).unwrap_or_else(|_| GpuSample {
                        index,
                        error: "amdsmi_worker: reading the GPU failed (a bug in the agent)".into(),
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
                tracing::error!("GPU {index}: cannot start its AMD SMI thread: {e}");
                Err(format!("amdsmi_worker: cannot start the GPU's reader thread: {e}"))
            }
        };
        Worker {
            index,
            link,
            doing,
            asked: None,
        }
    }

    fn gone(&mut self) {
        tracing::error!("GPU {}: its AMD SMI thread ended", self.index);
        self.link = Err("amdsmi_worker: the GPU's reader thread ended".into());
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
                // Answered after its deadline: old readings, asked again.
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
                Ok(_) => "amdsmi_worker: not asked".into(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_hung_read_is_stuck_by_name_and_a_panicking_one_costs_a_sample() {
        let doing: Doing = Arc::new(Mutex::new(""));
        let d = doing.clone();
        let mut w = Worker::spawn(3, doing, move || {
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

        let mut p = Worker::spawn(1, Arc::new(Mutex::new("")), || panic!("a bug"));
        let now = Instant::now();
        assert!(p.ask(now));
        let s = p.answer(now + Duration::from_secs(5));
        assert!(s.error.starts_with("amdsmi_worker: "), "{}", s.error);
        assert!(p.ask(Instant::now()), "the thread lives on");
    }
}
