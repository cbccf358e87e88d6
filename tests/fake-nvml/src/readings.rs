//! What a GPU reads now: utilization, memory, temperatures and their
//! thresholds, the VBIOS, clocks, PCIe throughput, ECC counts and row
//! remapping.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUtilizationRates(d: nvmlDevice_t, u: *mut nvmlUtilization_t) -> nvmlReturn_t {
    with("nvmlDeviceGetUtilizationRates", Some(d), |f, d| match gpu_of(d) {
        // As on real MIG-enabled GPUs: no whole-GPU utilization.
        Some(g) if f.mig_mode(g) => NOT_SUPPORTED,
        Some(g) => {
            out!(
                u,
                nvmlUtilization_t {
                    gpu: f.util(g),
                    memory: f.spec(g).mem_util_pct,
                }
            );
            SUCCESS
        }
        None => NOT_SUPPORTED,
    })
}

fn memory(f: &Fake, d: Option<Dev>) -> Option<(u64, u64, u64)> {
    match d? {
        Dev::Gpu(g) => {
            let s = f.spec(g);
            let used = if s.mig.is_empty() {
                s.mem_used_bytes
            } else {
                s.mig.iter().map(|m| m.mem_used_bytes).sum()
            };
            Some((s.mem_total_bytes, s.mem_reserved_bytes, used))
        }
        Dev::Mig(g, k) => {
            let m = f.spec(g).mig.get(k as usize)?;
            Some((m.mem_total_bytes, 0, m.mem_used_bytes))
        }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo_v2(d: nvmlDevice_t, m: *mut nvmlMemory_v2_t) -> nvmlReturn_t {
    with("nvmlDeviceGetMemoryInfo_v2", Some(d), |f, d| {
        let Some((total, reserved, used)) = memory(f, d) else {
            return INVALID;
        };
        out!(
            m,
            nvmlMemory_v2_t {
                // nvmlMemory_v2: the struct's size and version 2 in the top byte.
                version: (std::mem::size_of::<nvmlMemory_v2_t>() as u32) | (2 << 24),
                total,
                reserved,
                free: total.saturating_sub(reserved + used),
                used,
            }
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo(d: nvmlDevice_t, m: *mut nvmlMemory_t) -> nvmlReturn_t {
    with("nvmlDeviceGetMemoryInfo", Some(d), |f, d| {
        let Some((total, reserved, used)) = memory(f, d) else {
            return INVALID;
        };
        // The v1 struct counts reserved memory as used.
        out!(
            m,
            nvmlMemory_t {
                total,
                free: total.saturating_sub(reserved + used),
                used: used + reserved,
            }
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperature(d: nvmlDevice_t, sensor: c_uint, t: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetTemperature", Some(d), |f, d| match (gpu_of(d), sensor) {
        (Some(g), 0) => {
            out!(t, f.temp_c(g));
            SUCCESS
        }
        (Some(_), _) => INVALID,
        (None, _) => NOT_SUPPORTED,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperatureV(d: nvmlDevice_t, t: *mut nvmlTemperature_t) -> nvmlReturn_t {
    with("nvmlDeviceGetTemperatureV", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if t.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's nvmlTemperature_t.
        let t = unsafe { &mut *t };
        // nvmlTemperature_v1: size 12, version 1 in the top byte.
        if t.version != (std::mem::size_of::<nvmlTemperature_t>() as u32 | (1 << 24)) {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        if t.sensorType != 0 {
            return INVALID;
        }
        t.temperature = f.temp_c(g) as c_int;
        SUCCESS
    })
}

/// How far the GPU is below its maximum operating temperature (T.Limit), °C.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMarginTemperature(d: nvmlDevice_t, m: *mut nvmlMarginTemperature_t) -> nvmlReturn_t {
    with("nvmlDeviceGetMarginTemperature", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if !f.spec(g).tlimit {
            return NOT_SUPPORTED;
        }
        if m.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's nvmlMarginTemperature_t.
        let m = unsafe { &mut *m };
        // nvmlMarginTemperature_v1: size 8, version 1 in the top byte.
        if m.version != (std::mem::size_of::<nvmlMarginTemperature_t>() as u32 | (1 << 24)) {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        m.marginTemperature = f.spec(g).gpu_max_temp_c as c_int - f.temp_c(g) as c_int;
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperatureThreshold(d: nvmlDevice_t, kind: c_uint, t: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetTemperatureThreshold", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        if !s.legacy_thresholds {
            return NOT_SUPPORTED;
        }
        let v = match kind {
            0 => s.shutdown_temp_c,
            1 => s.slowdown_temp_c,
            2 => s.mem_max_temp_c,
            3 => s.gpu_max_temp_c,
            _ => return NOT_SUPPORTED,
        };
        out!(t, v);
        SUCCESS
    })
}

macro_rules! gpu_u32 {
    ($name:ident, $out:ty, |$f:ident, $g:ident| $e:expr) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(d: nvmlDevice_t, v: *mut $out) -> nvmlReturn_t {
            with(stringify!($name), Some(d), |$f, d| match gpu_of(d) {
                Some($g) => {
                    out!(v, $e);
                    SUCCESS
                }
                None => NOT_SUPPORTED,
            })
        }
    };
}

gpu_u32!(nvmlDeviceGetPowerUsage, c_uint, |f, g| f.power_mw(g));
gpu_u32!(nvmlDeviceGetEnforcedPowerLimit, c_uint, |f, g| f.spec(g).power_limit_mw);
gpu_u32!(nvmlDeviceGetPowerManagementLimit, c_uint, |f, g| f
    .spec(g)
    .power_limit_mw);
gpu_u32!(nvmlDeviceGetTotalEnergyConsumption, c_ulonglong, |f, g| {
    // Energy is the integral of the mean power: mW * s = mJ.
    f.spec(g).energy_base_mj + (f64::from(f.spec(g).power_mw) * f.now_s()) as u64
});
gpu_u32!(nvmlDeviceGetCurrentClocksEventReasons, c_ulonglong, |f, g| f
    .spec(g)
    .clocks_event_reasons);
gpu_u32!(nvmlDeviceGetCurrentClocksThrottleReasons, c_ulonglong, |f, g| f
    .spec(g)
    .clocks_event_reasons);
gpu_u32!(nvmlDeviceGetPcieReplayCounter, c_uint, |f, g| f.spec(g).pcie_replay);
gpu_u32!(nvmlDeviceGetMaxPcieLinkGeneration, c_uint, |f, g| f
    .spec(g)
    .pcie_max_gen);
gpu_u32!(nvmlDeviceGetMaxPcieLinkWidth, c_uint, |f, g| f.spec(g).pcie_max_width);
gpu_u32!(nvmlDeviceGetCurrPcieLinkGeneration, c_uint, |f, g| f.spec(g).pcie_gen);
gpu_u32!(nvmlDeviceGetCurrPcieLinkWidth, c_uint, |f, g| f.spec(g).pcie_width);
gpu_u32!(nvmlDeviceGetPersistenceMode, nvmlEnableState_t, |f, g| {
    if f.spec(g).persistence {
        nvmlEnableState_enum_NVML_FEATURE_ENABLED
    } else {
        nvmlEnableState_enum_NVML_FEATURE_DISABLED
    }
});

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetVbiosVersion(d: nvmlDevice_t, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetVbiosVersion", Some(d), |f, d| match gpu_of(d) {
        Some(g) => write_str(buf, len, &f.spec(g).vbios_version),
        None => NOT_SUPPORTED,
    })
}

fn clock(s: &GpuSpec, kind: c_uint, max: bool) -> Option<u32> {
    match (kind, max) {
        // Graphics and SM clocks are the same clock domain on these GPUs.
        (0 | 1, false) => Some(s.sm_clock_mhz),
        (0 | 1, true) => Some(s.max_sm_clock_mhz),
        (2, false) => Some(s.mem_clock_mhz),
        (2, true) => Some(s.max_mem_clock_mhz),
        _ => None,
    }
}

/// The current (`max` false) or maximum clock of `kind` into `c`.
fn clock_out(name: &str, d: nvmlDevice_t, kind: c_uint, max: bool, c: *mut c_uint) -> nvmlReturn_t {
    with(name, Some(d), |f, d| {
        match gpu_of(d).and_then(|g| clock(f.spec(g), kind, max)) {
            Some(v) => {
                out!(c, v);
                SUCCESS
            }
            None => NOT_SUPPORTED,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetClockInfo(d: nvmlDevice_t, kind: c_uint, c: *mut c_uint) -> nvmlReturn_t {
    clock_out("nvmlDeviceGetClockInfo", d, kind, false, c)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxClockInfo(d: nvmlDevice_t, kind: c_uint, c: *mut c_uint) -> nvmlReturn_t {
    clock_out("nvmlDeviceGetMaxClockInfo", d, kind, true, c)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPcieThroughput(d: nvmlDevice_t, counter: c_uint, v: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetPcieThroughput", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        // NVML looks at a 20 ms window: traffic comes in bursts, so one
        // window sees twice the mean or nothing (the byte counters give
        // the mean).
        let burst = ((f.now_s() * 50.0).floor() as i64) % 2 == 0;
        let w = |kbps: u32| if burst { kbps.saturating_mul(2) } else { 0 };
        match counter {
            0 => out!(v, w(s.pcie_tx_kbps)),
            1 => out!(v, w(s.pcie_rx_kbps)),
            _ => return INVALID,
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTotalEccErrors(
    d: nvmlDevice_t,
    error: c_uint,
    counter: c_uint,
    v: *mut c_ulonglong,
) -> nvmlReturn_t {
    with("nvmlDeviceGetTotalEccErrors", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        // Volatile and aggregate counts are the same: no reboot in a test.
        match (error, counter) {
            (0, 0 | 1) => out!(v, s.ecc_corrected),
            (1, 0 | 1) => out!(v, s.ecc_uncorrected),
            _ => return INVALID,
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetRemappedRows(
    d: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    with("nvmlDeviceGetRemappedRows", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let s = f.spec(g);
        let p = f.has(g, FaultKind::RemapPending);
        let x = f.has(g, FaultKind::RemapFailure);
        // A pending remap is an uncorrectable row waiting for a reset.
        out!(corr, s.remap_correctable);
        out!(unc, s.remap_uncorrectable + u32::from(p));
        out!(pending, u32::from(p));
        out!(failure, u32::from(x));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    d: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetComputeRunningProcesses_v3", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if f.has(g, FaultKind::ProcessesNoPermission) {
            return NO_PERMISSION;
        }
        if count.is_null() {
            return INVALID;
        }
        let procs = &f.spec(g).processes;
        // SAFETY: non-null, points to the caller's capacity.
        let cap = unsafe { *count } as usize;
        // SAFETY: as above.
        unsafe { *count = procs.len() as c_uint };
        if procs.is_empty() {
            return SUCCESS;
        }
        if infos.is_null() || cap < procs.len() {
            return INSUFFICIENT;
        }
        for (i, p) in procs.iter().enumerate() {
            // SAFETY: the caller gave `cap` >= procs.len() entries.
            unsafe {
                *infos.add(i) = nvmlProcessInfo_t {
                    pid: p.pid,
                    usedGpuMemory: p.used_mem_bytes,
                    // 0xFFFFFFFF: not on a MIG instance.
                    gpuInstanceId: u32::MAX,
                    computeInstanceId: u32::MAX,
                }
            };
        }
        SUCCESS
    })
}
