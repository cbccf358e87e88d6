//! AMD's GPU events (resets, thermal throttling, VM faults) from AMD SMI's
//! event notification, waited on by a thread of its own, as NVML's XIDs
//! are: a GPU whose worker is stuck in a call still reports them, and the
//! reset events of a GPU that fell off are how one learns why.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use fleetop_amdsmi_abi as abi;
use fleetop_proto::input::printable;

use crate::proto::GpuEvent;

use super::library::{Amd, Handle};

/// Events seen by the event thread, waiting for the next sample: (GPU index, event).
pub(crate) type EventQueue = Arc<Mutex<Vec<(u32, GpuEvent)>>>;

/// The events listened for: what an SRE acts on. AMD's per-process events
/// (queue eviction, migration, page faults, process start and end) come by
/// the thousand on a busy GPU and are left out.
const LISTEN: [abi::amdsmi_evt_notification_type_t; 4] = [
    abi::AMDSMI_EVT_NOTIF_VMFAULT,
    abi::AMDSMI_EVT_NOTIF_THERMAL_THROTTLE,
    abi::AMDSMI_EVT_NOTIF_GPU_PRE_RESET,
    abi::AMDSMI_EVT_NOTIF_GPU_POST_RESET,
];

/// How long one wait for events lasts.
const WAIT_MS: i32 = 1000;
/// Events read per wait, at most.
const ROOM: usize = 64;
/// An event's text, in characters at most.
const TEXT_CHARS: usize = 200;
/// Events held for the next sample, at most (a storm is cut, not queued for ever).
const QUEUE_MAX: usize = 1024;

/// AMD's name for an event, lower case (`AMDSMI_EVT_NOTIF_<NAME>`).
pub(crate) fn kind(e: abi::amdsmi_evt_notification_type_t) -> String {
    match e {
        abi::AMDSMI_EVT_NOTIF_VMFAULT => "vmfault".into(),
        abi::AMDSMI_EVT_NOTIF_THERMAL_THROTTLE => "thermal_throttle".into(),
        abi::AMDSMI_EVT_NOTIF_GPU_PRE_RESET => "gpu_pre_reset".into(),
        abi::AMDSMI_EVT_NOTIF_GPU_POST_RESET => "gpu_post_reset".into(),
        abi::AMDSMI_EVT_NOTIF_MIGRATE_START => "migrate_start".into(),
        abi::AMDSMI_EVT_NOTIF_MIGRATE_END => "migrate_end".into(),
        abi::AMDSMI_EVT_NOTIF_PAGE_FAULT_START => "page_fault_start".into(),
        abi::AMDSMI_EVT_NOTIF_PAGE_FAULT_END => "page_fault_end".into(),
        abi::AMDSMI_EVT_NOTIF_QUEUE_EVICTION => "queue_eviction".into(),
        abi::AMDSMI_EVT_NOTIF_QUEUE_RESTORE => "queue_restore".into(),
        abi::AMDSMI_EVT_NOTIF_UNMAP_FROM_GPU => "unmap_from_gpu".into(),
        abi::AMDSMI_EVT_NOTIF_PROCESS_START => "process_start".into(),
        abi::AMDSMI_EVT_NOTIF_PROCESS_END => "process_end".into(),
        other => format!("event_{other}"),
    }
}

/// Listens on every GPU that accepts it and queues its events for the
/// sampler until the sampler (the queue's owner) is gone. `first` is set
/// once the first read is done (or there is nothing to listen to), so the
/// first sample can carry the events already pending at start.
pub(crate) fn spawn(
    amd: &'static Amd,
    handles: Vec<(u32, Handle)>,
    queue: Weak<Mutex<Vec<(u32, GpuEvent)>>>,
    first: Arc<AtomicBool>,
) {
    let mask = LISTEN.iter().fold(0, |m, &e| m | abi::event_mask_bit(e));
    let spawned = std::thread::Builder::new().name("amdsmi-events".into()).spawn({
        let first = first.clone();
        move || {
            let listening: Vec<(u32, Handle)> = handles
                .into_iter()
                .filter(|&(i, h)| match amd.listen(h, mask) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!("GPU {i}: AMD SMI events unavailable: {e}");
                        false
                    }
                })
                .collect();
            if listening.is_empty() {
                first.store(true, Ordering::Release);
                return;
            }
            let mut warned = false;
            loop {
                let Some(queue) = queue.upgrade() else { return };
                let start = Instant::now();
                match amd.events(WAIT_MS, ROOM) {
                    Ok(got) => {
                        let now = crate::now_ms();
                        if let Ok(mut q) = queue.lock() {
                            for e in &got {
                                let Some(&(index, _)) = listening.iter().find(|(_, h)| h.0 == e.processor_handle)
                                else {
                                    tracing::warn!(
                                        "AMD SMI event {} from a GPU the agent does not know",
                                        kind(e.event)
                                    );
                                    continue;
                                };
                                if q.len() < QUEUE_MAX {
                                    q.push((
                                        index,
                                        GpuEvent {
                                            kind: kind(e.event),
                                            time_ms: now,
                                            text: printable(&abi::c_str(&e.message), TEXT_CHARS),
                                        },
                                    ));
                                }
                            }
                        }
                        first.store(true, Ordering::Release);
                        drop(queue);
                        // A library that answers at once (no event, no
                        // wait) must not make this loop spin.
                        if got.is_empty() {
                            let waited = start.elapsed();
                            std::thread::sleep(Duration::from_millis(WAIT_MS as u64).saturating_sub(waited));
                        }
                    }
                    Err(e) => {
                        first.store(true, Ordering::Release);
                        if !warned {
                            tracing::warn!("AMD SMI event wait: {e}; still listening");
                            warned = true;
                        }
                        drop(queue);
                        std::thread::sleep(Duration::from_millis(WAIT_MS as u64));
                    }
                }
            }
        }
    });
    if let Err(e) = spawned {
        first.store(true, Ordering::Release);
        tracing::warn!("cannot start the AMD SMI event thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_named_as_amd_names_them() {
        assert_eq!(kind(abi::AMDSMI_EVT_NOTIF_GPU_PRE_RESET), "gpu_pre_reset");
        assert_eq!(kind(abi::AMDSMI_EVT_NOTIF_THERMAL_THROTTLE), "thermal_throttle");
        assert_eq!(kind(99), "event_99");
        assert_eq!(LISTEN.iter().fold(0, |m, &e| m | abi::event_mask_bit(e)), 0b1111);
    }
}
