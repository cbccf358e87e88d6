//! The per-GPU worker threads and hung NVML calls. Each GPU is read on a
//! thread of its own, so that a GPU whose NVML call hangs holds up only
//! itself: the sampler asks every worker at once and waits until a deadline
//! (`answer_deadline`); a worker that has not answered by then is reported
//! as stuck, naming the call it is in, and is not waited for again until it
//! answers.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::proto::GpuSample;

use super::reader::GpuReader;

/// How long a sample waits for a GPU: 80 % of the interval, so that the
/// rest of the node's sample (IB, host) and its sending still fit in the
/// tick and a stuck GPU costs the others no sample; at most 1 s, because
/// NVML answers in milliseconds and at long intervals waiting longer only
/// ages the other readings; at least 250 ms, so that a healthy GPU on a
/// loaded node is not called stuck for a scheduling delay at very short
/// intervals (those samples then take longer and skip ticks, as before).
pub fn answer_deadline(interval: Duration) -> Duration {
    (interval * 4 / 5).clamp(Duration::from_millis(250), Duration::from_secs(1))
}

/// The sampler's end of a GPU's worker thread.
pub(super) struct Worker {
    pub(super) index: u32,
    /// Requests out, answers back; `Err`: the worker cannot answer (its
    /// thread could not start or has ended), the reason as sent for the GPU.
    link: Result<(Sender<()>, Receiver<GpuSample>), String>,
    doing: Arc<Mutex<&'static str>>,
    /// When the request the worker has not answered yet was sent.
    asked: Option<Instant>,
}

impl Worker {
    /// Starts the thread that reads this GPU for as long as the sampler lives.
    pub(super) fn spawn(reader: GpuReader) -> Worker {
        let index = reader.gpu.index;
        let doing = reader.doing.clone();
        let (ask, asks) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("nvml-gpu{index}"))
            .spawn(move || {
                let mut reader = reader;
                // Ends when the sampler is dropped (its sender with it).
                while asks.recv().is_ok() {
                    if answer.send(reader.sample()).is_err() {
                        return;
                    }
                }
            });
        let link = match spawned {
            Ok(_) => Ok((ask, answers)),
            Err(e) => {
                tracing::error!("GPU {index}: cannot start its NVML thread: {e}");
                Err(format!("nvml_worker: cannot start the GPU's reader thread: {e}"))
            }
        };
        Worker {
            index,
            link,
            doing,
            asked: None,
        }
    }

    /// The worker's thread is gone (it can only have panicked): say so in
    /// every sample from now on rather than take the agent down.
    fn gone(&mut self) {
        tracing::error!("GPU {}: its NVML thread ended", self.index);
        self.link = Err("nvml_worker: the GPU's reader thread ended".into());
        self.asked = None;
    }

    /// Asks for a sample at `now`, unless the previous one is still under
    /// way (the GPU is stuck). Whether it asked.
    pub(super) fn ask(&mut self, now: Instant) -> bool {
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
    pub(super) fn answer(&mut self, until: Instant) -> GpuSample {
        let mut s = GpuSample {
            index: self.index,
            ..Default::default()
        };
        let (Ok((_, answers)), Some(asked)) = (&self.link, self.asked) else {
            s.error = match &self.link {
                Err(e) => e.clone(),
                Ok(_) => "nvml_worker: not asked".into(),
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

    #[test]
    fn a_gpu_is_waited_for_most_of_the_interval_within_bounds() {
        let ms = |n| Duration::from_millis(n);
        assert_eq!(answer_deadline(ms(1000)), ms(800));
        assert_eq!(answer_deadline(ms(500)), ms(400));
        // Short intervals: not a scheduling delay; long ones: NVML is slow.
        assert_eq!(answer_deadline(ms(10)), ms(250));
        assert_eq!(answer_deadline(ms(60_000)), ms(1000));
    }
}
