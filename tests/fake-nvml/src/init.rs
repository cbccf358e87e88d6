//! nvmlInit and shutdown, the system-wide calls (driver, NVML and CUDA
//! versions), the device count and handles by index.

use crate::*;

fn init() -> nvmlReturn_t {
    let Ok(mut st) = STATE.lock() else {
        return nvmlReturn_enum_NVML_ERROR_UNKNOWN;
    };
    if st.is_some() {
        return SUCCESS;
    }
    let Some(path) = std::env::var_os("FAKE_NVML_PROFILE") else {
        eprintln!("fake NVML: FAKE_NVML_PROFILE is not set");
        return DRIVER_NOT_LOADED;
    };
    let p = match profile::load(std::path::Path::new(&path)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake NVML: {e}");
            return DRIVER_NOT_LOADED;
        }
    };
    if p.count as usize > MAX_GPUS || p.gpus.iter().any(|g| g.mig.len() > MAX_MIG) {
        eprintln!("fake NVML: at most {MAX_GPUS} GPUs and {MAX_MIG} MIG instances each");
        return DRIVER_NOT_LOADED;
    }
    let frozen_s = std::env::var("FAKE_NVML_TIME_S").ok().and_then(|s| s.parse().ok());
    *st = Some(Fake {
        p,
        start: Instant::now(),
        frozen_s,
        calls: 0,
        hung: HashSet::new(),
        sets: Vec::new(),
        gpm: Default::default(),
        gpm_next: 1,
    });
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    // NVML counts inits; the fake keeps its state until the process ends so
    // that a second init in the same process sees the same clock.
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static CStr = match result {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        7 => c"Insufficient Size",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        13 => c"Function Not Found",
        15 => c"GPU is lost",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlSystemGetDriverVersion", None, |f, _| {
        write_str(buf, len, &f.p.driver_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetNVMLVersion(buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlSystemGetNVMLVersion", None, |f, _| {
        write_str(buf, len, &f.p.nvml_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(v: *mut c_int) -> nvmlReturn_t {
    with("nvmlSystemGetCudaDriverVersion_v2", None, |f, _| {
        out!(v, f.p.cuda_driver_version);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(v: *mut c_int) -> nvmlReturn_t {
    nvmlSystemGetCudaDriverVersion_v2(v)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount_v2(n: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetCount_v2", None, |f, _| {
        out!(n, f.p.count);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount(n: *mut c_uint) -> nvmlReturn_t {
    nvmlDeviceGetCount_v2(n)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex_v2(i: c_uint, h: *mut nvmlDevice_t) -> nvmlReturn_t {
    with("nvmlDeviceGetHandleByIndex_v2", None, |f, _| {
        if i >= f.p.count {
            return INVALID;
        }
        if f.has(i, FaultKind::GpuLost) {
            return LOST;
        }
        if f.has(i, FaultKind::NoPermission) {
            return NO_PERMISSION;
        }
        out!(h, handle_of(i));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex(i: c_uint, h: *mut nvmlDevice_t) -> nvmlReturn_t {
    nvmlDeviceGetHandleByIndex_v2(i, h)
}
