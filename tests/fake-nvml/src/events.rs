//! Event sets: XID and GPU-lost events, waited for.

use crate::*;

fn set_index(s: nvmlEventSet_t) -> Option<usize> {
    let a = s as usize;
    let b = SETS.as_ptr() as usize;
    (b..b + MAX_SETS).contains(&a).then(|| a - b)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetCreate(s: *mut nvmlEventSet_t) -> nvmlReturn_t {
    with("nvmlEventSetCreate", None, |f, _| {
        if f.sets.len() >= MAX_SETS {
            return nvmlReturn_enum_NVML_ERROR_MEMORY;
        }
        f.sets.push(EventSet::default());
        out!(s, SETS[f.sets.len() - 1..].as_ptr() as nvmlEventSet_t);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(s: nvmlEventSet_t) -> nvmlReturn_t {
    with("nvmlEventSetFree", None, |f, _| {
        match set_index(s).and_then(|i| f.sets.get_mut(i)) {
            Some(set) => {
                // Slots are not reused: a freed set just stops listening.
                set.gpus.clear();
                SUCCESS
            }
            None => INVALID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetSupportedEventTypes(d: nvmlDevice_t, types: *mut c_ulonglong) -> nvmlReturn_t {
    with("nvmlDeviceGetSupportedEventTypes", Some(d), |_, _| {
        out!(types, EVENT_XID);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(d: nvmlDevice_t, types: c_ulonglong, s: nvmlEventSet_t) -> nvmlReturn_t {
    with("nvmlDeviceRegisterEvents", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if types & !EVENT_XID != 0 {
            return NOT_SUPPORTED;
        }
        match set_index(s).and_then(|i| f.sets.get_mut(i)) {
            Some(set) => {
                if !set.gpus.contains(&g) {
                    set.gpus.push(g);
                }
                SUCCESS
            }
            None => INVALID,
        }
    })
}

/// The next event for a set, if one is due: an XID, or the loss of one of
/// its GPUs (reported once per set, as GPU_IS_LOST from the wait itself).
fn next_event(f: &mut Fake, si: usize, data: *mut nvmlEventData_t) -> Option<nvmlReturn_t> {
    let gpus = f.sets.get(si)?.gpus.clone();
    for &g in &gpus {
        let due: Vec<(usize, u64)> = f
            .active(g, FaultKind::Xid)
            .map(|(n, x)| (n, x.xid.unwrap_or(0)))
            .collect();
        for (n, xid) in due {
            let set = &mut f.sets[si];
            if set.delivered.insert(n) {
                if data.is_null() {
                    return Some(INVALID);
                }
                // SAFETY: non-null, an nvmlEventData_t of the caller's.
                unsafe {
                    *data = nvmlEventData_t {
                        device: handle_of(g),
                        eventType: EVENT_XID,
                        eventData: xid,
                        gpuInstanceId: u32::MAX,
                        computeInstanceId: u32::MAX,
                    }
                };
                return Some(SUCCESS);
            }
        }
    }
    for &g in &gpus {
        if f.has(g, FaultKind::GpuLost) && f.sets[si].lost_reported.insert(g) {
            return Some(LOST);
        }
    }
    None
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetWait_v2(
    s: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
    loop {
        let rc = with("nvmlEventSetWait_v2", None, |f, _| {
            let Some(si) = set_index(s).filter(|&i| i < f.sets.len()) else {
                return INVALID;
            };
            next_event(f, si, data).unwrap_or(TIMEOUT)
        });
        if rc != TIMEOUT || Instant::now() >= deadline {
            return rc;
        }
        std::thread::sleep(Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())));
    }
}
