//! GPU event notification: init, mask, stop and reading events (the profile's faults).

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_init_gpu_event_notification(h: amdsmi_processor_handle) -> amdsmi_status_t {
    let index = match with_index(h) {
        Ok(i) => i,
        Err(s) => return s,
    };
    on_lib(|f| {
        f.listening.insert(index, 0);
        let mine: Vec<usize> = event_faults(f).filter(|(_, l)| *l == index).map(|(n, _)| n).collect();
        for n in mine {
            f.delivered.remove(&n);
        }
        OK
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_set_gpu_event_notification_mask(h: amdsmi_processor_handle, mask: u64) -> amdsmi_status_t {
    let index = match with_index(h) {
        Ok(i) => i,
        Err(s) => return s,
    };
    on_lib(|f| match f.listening.get_mut(&index) {
        Some(m) => {
            *m = mask;
            OK
        }
        None => AMDSMI_STATUS_NOT_INIT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_stop_gpu_event_notification(h: amdsmi_processor_handle) -> amdsmi_status_t {
    let index = match with_index(h) {
        Ok(i) => i,
        Err(s) => return s,
    };
    on_lib(|f| match f.listening.remove(&index) {
        Some(_) => OK,
        None => AMDSMI_STATUS_NOT_INIT,
    })
}

/// A processor's index for the event calls (which answer on a lost GPU too:
/// the reset events of a GPU that fell off are how one learns of it).
fn with_index(h: amdsmi_processor_handle) -> Result<u32, amdsmi_status_t> {
    let mut index = Err(INVAL);
    let r = on_proc(h, true, |_, p| {
        index = Ok(p.index);
        OK
    });
    if r != OK { Err(r) } else { index }
}

/// The event faults with the processor (index) that reports each.
fn event_faults(f: &Fake) -> impl Iterator<Item = (usize, u32)> + '_ {
    f.p.fault
        .iter()
        .enumerate()
        .filter(|(_, x)| x.kind == FaultKind::Event)
        .map(|(n, x)| (n, f.proc_of(x.gpu, x.partition.unwrap_or(0)).index))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_event_notification(
    timeout_ms: i32,
    count: *mut u32,
    out: *mut amdsmi_evt_notification_data_t,
) -> amdsmi_status_t {
    if count.is_null() || out.is_null() {
        return if state().as_ref().is_some_and(|f| f.inits > 0) {
            INVAL
        } else {
            AMDSMI_STATUS_NOT_INIT
        };
    }
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.clamp(0, 60_000) as u64);
    loop {
        let mut frozen = false;
        let r = on_lib(|f| {
            frozen = f.frozen_s.is_some();
            // SAFETY: non-null, a u32 by contract.
            let room = unsafe { *count } as usize;
            let now = f.now_s();
            let due: Vec<(usize, u32)> = event_faults(f)
                .filter(|(n, l)| {
                    let x = &f.p.fault[*n];
                    let kind = x.event.as_deref().and_then(profile::event_type).unwrap_or(0);
                    x.at_s <= now
                        && !f.delivered.contains(n)
                        && f.listening.get(l).is_some_and(|m| m & event_mask_bit(kind) != 0)
                })
                .take(room)
                .collect();
            for (k, (n, _)) in due.iter().enumerate() {
                let x = &f.p.fault[*n];
                let mut v = amdsmi_evt_notification_data_t::zeroed();
                v.processor_handle = processor_handle(x.gpu, x.partition.unwrap_or(0));
                v.event = x.event.as_deref().and_then(profile::event_type).unwrap_or(0);
                set_c_str(&mut v.message, x.message.as_deref().unwrap_or(""));
                // SAFETY: the caller gave room for `room` entries; k < room.
                unsafe { out.add(k).write(v) };
                f.delivered.insert(*n);
            }
            // SAFETY: as above.
            unsafe { *count = due.len() as u32 };
            if due.is_empty() { AMDSMI_STATUS_NO_DATA } else { OK }
        });
        if r != AMDSMI_STATUS_NO_DATA || frozen || Instant::now() >= deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
