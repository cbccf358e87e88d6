//! XID errors from an NVML event set, waited on by a thread of its own (not
//! polled), queued for the next sample. They come from the event thread, so a
//! GPU whose worker is stuck in a call still reports them.

use std::sync::{Arc, Mutex, Weak};

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

use crate::proto::XidEvent;

/// XID events seen by the event thread, waiting for the next sample: (GPU index, event).
pub(super) type XidQueue = Arc<Mutex<Vec<(u32, XidEvent)>>>;

/// A device handle as an address, to tell which GPU an event came from:
/// NVML's handles are stable for the life of the library, and the event
/// carries the handle, while asking a lost GPU for its index fails.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Handle(pub(super) usize);

pub(super) fn unsafe_handle(d: &Device) -> usize {
    // SAFETY: the raw handle is only compared, never used to call NVML.
    unsafe { d.handle() as usize }
}

/// Waits on an NVML event set for critical XID errors and queues them for the
/// sampler. Ends only when the sampler (the queue's owner) is gone: an error
/// from the wait (one GPU lost) must not end XID reporting for the others.
pub(super) fn spawn_xid_thread(
    nvml: &'static Nvml,
    handles: Vec<(u32, Handle)>,
    queue: Weak<Mutex<Vec<(u32, XidEvent)>>>,
) {
    let spawned = std::thread::Builder::new().name("nvml-xid".into()).spawn(move || {
        // A failed registration frees the whole set, so first find the
        // GPUs that accept event registration, each in a throwaway set.
        let accepts = |i: u32| {
            let Ok(set) = nvml.create_event_set() else {
                return false;
            };
            match nvml
                .device_by_index(i)
                .map(|d| d.register_events(EventTypes::CRITICAL_XID_ERROR, set))
            {
                Ok(Ok(_)) => true,
                Ok(Err(e)) => {
                    tracing::warn!("GPU {i}: XID events unavailable: {}", e.error);
                    false
                }
                Err(_) => false,
            }
        };
        let accepted: Vec<u32> = handles.iter().map(|h| h.0).filter(|&i| accepts(i)).collect();
        let mut set = match nvml.create_event_set() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("XID events unavailable: {e}");
                return;
            }
        };
        for i in accepted {
            let Ok(dev) = nvml.device_by_index(i) else {
                continue;
            };
            match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(s) => set = s,
                Err(e) => {
                    tracing::warn!("XID events unavailable: {}", e.error);
                    return;
                }
            }
        }
        let mut warned = false;
        loop {
            let Some(queue) = queue.upgrade() else { return };
            match set.wait(1000) {
                Ok(ev) => {
                    let xid = match ev.event_data {
                        Some(XidError::Value(v)) => u32::try_from(v).unwrap_or(u32::MAX),
                        // nvml-wrapper turns XID 999 (NVML's "unknown") into this.
                        Some(XidError::Unknown) => 999,
                        None => continue,
                    };
                    let from = Handle(unsafe_handle(&ev.device));
                    let Some(&(index, _)) = handles.iter().find(|(_, h)| *h == from) else {
                        tracing::warn!("XID {xid} from a GPU the agent does not know");
                        continue;
                    };
                    if let Ok(mut q) = queue.lock() {
                        q.push((
                            index,
                            XidEvent {
                                xid,
                                time_ms: crate::now_ms(),
                                // 0: NVML's event set.
                                source: 0,
                            },
                        ));
                    }
                }
                Err(NvmlError::Timeout) => {}
                Err(e) => {
                    // A lost GPU makes the wait fail; the others still
                    // report. Pause so a wait that fails at once cannot spin.
                    if !warned {
                        tracing::warn!("XID event wait: {e}; still listening");
                        warned = true;
                    }
                    drop(queue);
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the XID event thread: {e}");
    }
}
