//! MIG mode and the MIG devices of a GPU.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigMode(d: nvmlDevice_t, current: *mut c_uint, pending: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetMigMode", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        let m = u32::from(f.mig_mode(g));
        out!(current, m);
        out!(pending, m);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxMigDeviceCount(d: nvmlDevice_t, n: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetMaxMigDeviceCount", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        out!(n, if f.mig_mode(g) { 7 } else { 0 });
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    d: nvmlDevice_t,
    k: c_uint,
    h: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetMigDeviceHandleByIndex", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        if (k as usize) >= f.spec(g).mig.len() {
            return nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
        }
        out!(h, mig_handle_of(g, k));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceIsMigDeviceHandle(d: nvmlDevice_t, is: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceIsMigDeviceHandle", Some(d), |_, d| {
        out!(is, u32::from(matches!(d, Some(Dev::Mig(..)))));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceId(d: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetGpuInstanceId", Some(d), |_, d| match d {
        Some(Dev::Mig(_, k)) => {
            // NVML numbers GPU instances from 1 upwards in creation order here.
            out!(id, k + 1);
            SUCCESS
        }
        _ => INVALID,
    })
}
