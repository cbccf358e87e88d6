//! GPM (GPU performance monitoring): samples and the metrics between two.

use crate::*;

/// GPM sample handles are numbers dressed as pointers: never dereferenced.
fn gpm_key(s: nvmlGpmSample_t) -> usize {
    s as usize
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmQueryDeviceSupport(d: nvmlDevice_t, s: *mut nvmlGpmSupport_t) -> nvmlReturn_t {
    with("nvmlGpmQueryDeviceSupport", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        if s.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's struct.
        let s = unsafe { &mut *s };
        if s.version != NVML_GPM_SUPPORT_VERSION {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        s.isSupportedDevice = u32::from(f.spec(g).gpm.is_some());
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleAlloc(s: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmSampleAlloc", None, |f, _| {
        let k = f.gpm_next * 16;
        f.gpm_next += 1;
        f.gpm.insert(k, None);
        out!(s, k as nvmlGpmSample_t);
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(s: nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmSampleFree", None, |f, _| match f.gpm.remove(&gpm_key(s)) {
        Some(_) => SUCCESS,
        None => INVALID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleGet(d: nvmlDevice_t, s: nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmSampleGet", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return INVALID };
        if f.spec(g).gpm.is_none() {
            return NOT_SUPPORTED;
        }
        let now = f.now_s();
        match f.gpm.get_mut(&gpm_key(s)) {
            Some(slot) => {
                *slot = Some((g, None, now));
                SUCCESS
            }
            None => INVALID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMigSampleGet(d: nvmlDevice_t, gi: c_uint, s: nvmlGpmSample_t) -> nvmlReturn_t {
    with("nvmlGpmMigSampleGet", Some(d), |f, d| {
        // Asked of the parent GPU, by GPU instance id (1-based here, as
        // nvmlDeviceGetGpuInstanceId gives them).
        let Some(Dev::Gpu(g)) = d else { return INVALID };
        if f.spec(g).gpm.is_none() {
            return NOT_SUPPORTED;
        }
        let Some(k) = gi.checked_sub(1).filter(|&k| (k as usize) < f.spec(g).mig.len()) else {
            return nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
        };
        let now = f.now_s();
        match f.gpm.get_mut(&gpm_key(s)) {
            Some(slot) => {
                *slot = Some((g, Some(k), now));
                SUCCESS
            }
            None => INVALID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMetricsGet(m: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    with("nvmlGpmMetricsGet", None, |f, _| {
        if m.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's request.
        let m = unsafe { &mut *m };
        if m.version != NVML_GPM_METRICS_GET_VERSION || m.numMetrics as usize > m.metrics.len() {
            return INVALID;
        }
        let (Some(Some((g1, k1, _))), Some(Some((g2, k2, _)))) =
            (f.gpm.get(&gpm_key(m.sample1)), f.gpm.get(&gpm_key(m.sample2)))
        else {
            return INVALID;
        };
        // Both samples of one GPU, or of one MIG instance.
        if (g1, k1) != (g2, k2) {
            return INVALID;
        }
        let Some(gpu_spec) = f.spec(*g1).gpm else {
            return NOT_SUPPORTED;
        };
        // An instance's own figures where the profile gives them, else the GPU's.
        let spec = k1
            .and_then(|k| f.spec(*g1).mig.get(k as usize)?.gpm)
            .unwrap_or(gpu_spec);
        for x in &mut m.metrics[..m.numMetrics as usize] {
            let v = match x.metricId {
                nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL => Some(spec.sm_active_pct),
                nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY => Some(spec.sm_occupancy_pct),
                nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL => Some(spec.tensor_active_pct),
                nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL => Some(spec.dram_bw_pct),
                _ => None,
            };
            match v {
                Some(v) => {
                    x.nvmlReturn = SUCCESS;
                    x.value = v;
                }
                None => x.nvmlReturn = NOT_SUPPORTED,
            }
        }
        SUCCESS
    })
}
