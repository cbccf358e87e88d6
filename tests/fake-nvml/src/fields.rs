//! nvmlDeviceGetFieldValues: the readings that exist only as field ids.

use crate::*;

fn field(f: &Fake, g: u32, v: &mut nvmlFieldValue_t) {
    use field_id::*;
    let s = f.spec(g);
    let now = f.now_s();
    v.timestamp = (now * 1e6) as i64;
    v.latencyUsec = 0;
    let mut uint = |x: u32| {
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
        v.value.uiVal = x;
        SUCCESS
    };
    let links = s.nvlinks;
    let scope = v.scopeId;
    // T.Limit thresholds: degrees below the GPU's maximum operating
    // temperature (negative: above it), as nvidia-smi's "T.Limit" lines.
    let tlimit = |v: &mut nvmlFieldValue_t, limit: u32| {
        if !s.tlimit {
            return NOT_SUPPORTED;
        }
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT;
        v.value.siVal = s.gpu_max_temp_c as c_int - limit as c_int;
        SUCCESS
    };
    let rc = match v.fieldId {
        NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT => tlimit(v, s.shutdown_temp_c),
        NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT => tlimit(v, s.slowdown_temp_c),
        NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT => tlimit(v, s.mem_max_temp_c),
        NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT => tlimit(v, s.gpu_max_temp_c),
        NVML_FI_DEV_MEMORY_TEMP => match s.hbm_temp_c {
            Some(t) if !f.has(g, FaultKind::HbmTempNotSupported) => uint(t),
            _ => NOT_SUPPORTED,
        },
        NVML_FI_DEV_NVLINK_GET_STATE if scope < links => uint(f.link_state(g, scope)),
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX | NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX if scope < links => {
            // Counters, KiB; a link that is not active moves no data.
            let kib = if f.link_state(g, scope) == 1 {
                (s.nvlink_kib_per_s as f64 * now) as u64
            } else {
                0
            };
            v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            v.value.ullVal = kib;
            SUCCESS
        }
        NVML_FI_DEV_NVLINK_GET_STATE
        | NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
        | NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX => INVALID,
        NVML_FI_DEV_PCIE_COUNT_TX_BYTES | NVML_FI_DEV_PCIE_COUNT_RX_BYTES => {
            let kbps = if v.fieldId == NVML_FI_DEV_PCIE_COUNT_TX_BYTES {
                s.pcie_tx_kbps
            } else {
                s.pcie_rx_kbps
            };
            v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            v.value.ullVal = (f64::from(kbps) * 1000.0 * now) as u64;
            SUCCESS
        }
        _ => NOT_SUPPORTED,
    };
    v.nvmlReturn = rc;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    d: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetFieldValues", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if values.is_null() || count < 0 {
            return INVALID;
        }
        // SAFETY: the caller gave `count` field values.
        let vs = unsafe { std::slice::from_raw_parts_mut(values, count as usize) };
        for v in vs {
            field(f, g, v);
        }
        SUCCESS
    })
}
