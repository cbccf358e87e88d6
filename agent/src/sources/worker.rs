//! The per-GPU worker threads of the GPU libraries (NVML, AMD SMI). Each GPU
//! (each AMD partition too) is read on a thread of its own, so that a GPU
//! whose library call hangs holds up only itself: the sampler asks every
//! worker at once and waits until a deadline (`answer_deadline`); a worker
//! that has not answered by then is reported as stuck, naming the call it
//! is in, and is not waited for again until it answers. The words are
//! NVML's for both ("nvml_stuck: <call>: no answer for N ms"), so that every
//! console, old or new, flags a stuck AMD GPU as it flags a stuck NVIDIA one.
//!
//! A GPU is opened and described on its worker too (`Worker::start`), and
//! the sampler waits for every description at once until `START_DEADLINE`
//! (`wait_started`): a GPU whose first calls hang costs the agent's start
//! that long at most, is described by what it answered before the hang
//! (its PCI bus id where that came first), and is stuck in every sample
//! until it answers.

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

/// How long the sampler waits, at start, for every GPU to be opened and
/// described (all at once, each on its worker). A healthy GPU answers in
/// milliseconds; one that has not answered by then is reported stuck, and
/// the rest of the node is served.
pub const START_DEADLINE: Duration = Duration::from_secs(5);

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
    /// Until the GPU is opened and described: when that began, and the
    /// signal that it is done (see `start`).
    starting: Option<(Instant, Receiver<()>)>,
}

impl Worker {
    /// Starts the thread that reads GPU `index` with `read` for as long as
    /// the sampler lives. A panic in a read (a bug here, never the
    /// library's: it cannot unwind into Rust) costs that sample, not the GPU.
    #[cfg(test)]
    pub(crate) fn spawn(
        library: &'static str,
        index: u32,
        doing: Doing,
        read: impl FnMut() -> GpuSample + Send + 'static,
    ) -> Worker {
        Worker::start(library, index, doing, move || read)
    }

    /// Starts the thread of GPU `index`: it runs `open` (which opens and
    /// describes the GPU, and may hang in the library), then reads the GPU
    /// with what `open` returns, for as long as the sampler lives. Until
    /// `open` returns, the GPU is stuck in whatever call it is in.
    pub(crate) fn start<R: FnMut() -> GpuSample + 'static>(
        library: &'static str,
        index: u32,
        doing: Doing,
        open: impl FnOnce() -> R + Send + 'static,
    ) -> Worker {
        let (ask, asks) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel();
        let (opened, started) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name(format!("{library}-gpu{index}"))
            .spawn(move || {
                let Ok(mut read) = catch_unwind(AssertUnwindSafe(open)) else {
                    tracing::error!("GPU {index}: opening it failed (a bug in the agent)");
                    return;
                };
                let _ = opened.send(());
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
            starting: link.is_ok().then(|| (Instant::now(), started)),
            link,
            doing,
            asked: None,
        }
    }

    /// Whether the GPU is opened and described, waiting for it until
    /// `until` at most. A thread that ended while opening counts as done:
    /// its samples say it is gone.
    pub(crate) fn started(&mut self, until: Instant) -> bool {
        let Some((_, started)) = &self.starting else {
            return true;
        };
        match started.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                self.starting = None;
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
        }
    }

    /// The library call the worker is in now.
    pub(crate) fn doing(&self) -> &'static str {
        self.doing.lock().map(|d| *d).unwrap_or("?")
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
                let call = self.doing();
                // A GPU still being opened has not answered since then.
                let began = self.starting.as_ref().map(|(b, _)| *b);
                let since = match began {
                    Some(b) if !self.started(Instant::now()) => b,
                    _ => asked,
                };
                s.error = format!("nvml_stuck: {call}: no answer for {} ms", since.elapsed().as_millis());
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

/// Waits for every worker to open and describe its GPU, all at once, until
/// `within` from now: for each worker, whether it did. Those that did not
/// are stuck (their first calls hang) and are not waited for again.
pub(crate) fn wait_started(workers: &mut [Worker], within: Duration) -> Vec<bool> {
    let until = Instant::now() + within;
    workers.iter_mut().map(|w| w.started(until)).collect()
}

/// Waits for every worker to open and describe its GPU until
/// `START_DEADLINE` (`wait_started`), then reads each GPU's description as
/// far as it got (`info`, by the worker's position) and logs each GPU that
/// did not answer in time, by index and bus id: it is reported stuck until
/// it answers, and the rest of the node is served. For each worker, whether
/// it started, and each description.
pub(crate) fn start_all(
    workers: &mut [Worker],
    info: impl Fn(usize) -> crate::proto::GpuInfo,
) -> (Vec<bool>, Vec<crate::proto::GpuInfo>) {
    let started = wait_started(workers, START_DEADLINE);
    let infos: Vec<crate::proto::GpuInfo> = (0..workers.len()).map(info).collect();
    for ((w, info), _) in workers.iter().zip(&infos).zip(&started).filter(|(_, ok)| !**ok) {
        tracing::warn!(
            "GPU {} ({}): no answer within {:?} at start, in {}: reported stuck until it answers; \
             the rest of the node is served",
            w.index,
            if info.pci_bus_id.is_empty() {
                "PCI bus id unknown"
            } else {
                info.pci_bus_id.as_str()
            },
            START_DEADLINE,
            w.doing()
        );
    }
    (started, infos)
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
    fn a_gpu_whose_opening_hangs_is_waited_for_until_the_deadline_then_stuck_by_its_call() {
        let doing: Doing = Arc::new(Mutex::new(""));
        let (d, (release, hold)) = (doing.clone(), mpsc::channel::<()>());
        let mut hung = Worker::start("nvml", 2, doing, move || {
            if let Ok(mut x) = d.lock() {
                *x = "nvmlDeviceGetName";
            }
            let _ = hold.recv();
            || GpuSample {
                index: 2,
                ..Default::default()
            }
        });
        let mut fine = Worker::start("nvml", 0, Arc::new(Mutex::new("")), || GpuSample::default);
        let mut workers = [fine, hung];
        assert_eq!(wait_started(&mut workers, Duration::from_millis(200)), [true, false]);
        [fine, hung] = workers;
        assert!(hung.ask(Instant::now()), "asked: the request waits for the opening");
        let s = hung.answer(Instant::now() + Duration::from_millis(20));
        assert!(
            s.error.starts_with("nvml_stuck: nvmlDeviceGetName: no answer for "),
            "{}",
            s.error
        );
        assert!(fine.ask(Instant::now()));
        assert!(fine.answer(Instant::now() + Duration::from_secs(10)).error.is_empty());
        // It answers at last: it is read as any other GPU from then on.
        release.send(()).expect("the worker waits");
        assert!(hung.started(Instant::now() + Duration::from_secs(10)));
        let mut answered = false;
        for _ in 0..100 {
            if hung.ask(Instant::now()) {
                let s = hung.answer(Instant::now() + Duration::from_secs(10));
                answered = s.error.is_empty();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(answered, "read once it answered");
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
