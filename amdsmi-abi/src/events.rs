//! GPU event notification: the event types, their mask bits and the event data struct.

use crate::*;
use std::ffi::c_char;

/// amdsmi_evt_notification_type_t. The mask bit of event `e` is `1 << (e - 1)`.
pub const AMDSMI_EVT_NOTIF_NONE: amdsmi_evt_notification_type_t = 0;
pub const AMDSMI_EVT_NOTIF_VMFAULT: amdsmi_evt_notification_type_t = 1;
pub const AMDSMI_EVT_NOTIF_THERMAL_THROTTLE: amdsmi_evt_notification_type_t = 2;
pub const AMDSMI_EVT_NOTIF_GPU_PRE_RESET: amdsmi_evt_notification_type_t = 3;
pub const AMDSMI_EVT_NOTIF_GPU_POST_RESET: amdsmi_evt_notification_type_t = 4;
pub const AMDSMI_EVT_NOTIF_MIGRATE_START: amdsmi_evt_notification_type_t = 5;
pub const AMDSMI_EVT_NOTIF_MIGRATE_END: amdsmi_evt_notification_type_t = 6;
pub const AMDSMI_EVT_NOTIF_PAGE_FAULT_START: amdsmi_evt_notification_type_t = 7;
pub const AMDSMI_EVT_NOTIF_PAGE_FAULT_END: amdsmi_evt_notification_type_t = 8;
pub const AMDSMI_EVT_NOTIF_QUEUE_EVICTION: amdsmi_evt_notification_type_t = 9;
pub const AMDSMI_EVT_NOTIF_QUEUE_RESTORE: amdsmi_evt_notification_type_t = 10;
pub const AMDSMI_EVT_NOTIF_UNMAP_FROM_GPU: amdsmi_evt_notification_type_t = 11;
pub const AMDSMI_EVT_NOTIF_PROCESS_START: amdsmi_evt_notification_type_t = 12;
pub const AMDSMI_EVT_NOTIF_PROCESS_END: amdsmi_evt_notification_type_t = 13;

/// The mask bit amdsmi_set_gpu_event_notification_mask takes for an event.
pub const fn event_mask_bit(event: amdsmi_evt_notification_type_t) -> u64 {
    if event == AMDSMI_EVT_NOTIF_NONE || event > 64 {
        0
    } else {
        1 << (event - 1)
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct amdsmi_evt_notification_data_t {
    pub processor_handle: amdsmi_processor_handle,
    pub event: amdsmi_evt_notification_type_t,
    pub message: [c_char; AMDSMI_MAX_STRING_LENGTH],
}
