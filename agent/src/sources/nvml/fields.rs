//! NVML field values: one nvmlDeviceGetFieldValues call per GPU and sample
//! for HBM temperature, the PCIe byte counters and per NVLink link its state
//! and throughput (the link in `scopeId`, which nvml-wrapper cannot set), and
//! the decoding of an answered field by its value type.

use std::time::Instant;

use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{field_id, nvmlFieldValue_t, nvmlReturn_enum_NVML_SUCCESS};

use crate::proto::GpuSample;

use super::Gpu;
use super::field_value::field_u64;
use super::reader::{GpuReader, PcieCounters};

/// Field values read in one NVML call per GPU: HBM temperature, the PCIe
/// byte counters, then per link its state and data throughput counters
/// (KiB), the link in `scopeId`.
fn field_request(links: &[(u32, bool)]) -> Vec<nvmlFieldValue_t> {
    let mut ids = vec![
        (field_id::NVML_FI_DEV_MEMORY_TEMP, 0),
        (field_id::NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0),
        (field_id::NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0),
    ];
    for &(l, _) in links {
        ids.push((field_id::NVML_FI_DEV_NVLINK_GET_STATE, l));
        ids.push((field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, l));
        ids.push((field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, l));
    }
    ids.into_iter()
        .map(|(id, scope)| {
            // SAFETY: nvmlFieldValue_t is plain old data; all-zero is a valid value.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v.scopeId = scope;
            v
        })
        .collect()
}

impl GpuReader {
    /// HBM temperature and NVLink state and throughput in one field-values call.
    pub(super) fn read_fields(&self, g: &Gpu, d: &Device, s: &mut GpuSample, ab: &mut u32, pcie: &mut PcieCounters) {
        use fleetop_proto::absent as a;
        let Ok(sym) = self.nvml.lib().nvmlDeviceGetFieldValues.as_ref() else {
            *ab |= a::HBM_TEMP;
            return;
        };
        let mut req = field_request(&g.links);
        // SAFETY: a valid device handle and a buffer of req.len() field values.
        let rc = unsafe { sym(d.handle(), req.len() as i32, req.as_mut_ptr()) };
        if rc != nvmlReturn_enum_NVML_SUCCESS {
            *ab |= a::HBM_TEMP;
            return;
        }
        match field_u64(&req[0]) {
            Some(t) => s.hbm_temp_c = u32::try_from(t).unwrap_or(u32::MAX),
            None => *ab |= a::HBM_TEMP,
        }
        let at = Instant::now();
        pcie.now = field_u64(&req[1]).zip(field_u64(&req[2])).map(|(tx, rx)| (at, tx, rx));
        for (i, chunk) in req[3..].chunks(3).enumerate() {
            // NVML_NVLINK_STATE: 0 inactive, 1 active, 2 sleep (up, low
            // power). A state NVML cannot give counts as inactive.
            let state = field_u64(&chunk[0]).and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
            s.nvlink_state.push(state);
            if state == 0 && i < 32 {
                s.nvlink_down_mask |= 1 << i;
            }
            s.nvlink_tx_kib.push(field_u64(&chunk[1]).unwrap_or(0));
            s.nvlink_rx_kib.push(field_u64(&chunk[2]).unwrap_or(0));
        }
        // All links active, the usual case, travels as no states at all.
        if s.nvlink_state.iter().all(|&st| st == 1) {
            s.nvlink_state.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_request_puts_the_link_in_scope_id() {
        let req = field_request(&[(0, false), (5, true)]);
        assert_eq!(req.len(), 3 + 2 * 3);
        assert_eq!(req[0].fieldId, field_id::NVML_FI_DEV_MEMORY_TEMP);
        assert_eq!(req[1].fieldId, field_id::NVML_FI_DEV_PCIE_COUNT_TX_BYTES);
        assert_eq!(req[6].fieldId, field_id::NVML_FI_DEV_NVLINK_GET_STATE);
        assert_eq!(req[6].scopeId, 5);
        assert_eq!(req[7].fieldId, field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX);
        assert_eq!(req[8].fieldId, field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX);
        assert_eq!(req[8].scopeId, 5);
    }

    #[test]
    fn field_values_decode_by_type_and_refusal() {
        use nvml_wrapper_sys::bindings::*;
        let mut v = field_request(&[])[0];
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v.value.ullVal = 1 << 40;
        assert_eq!(field_u64(&v), Some(1 << 40));
        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
        v.value = nvmlValue_t { uiVal: 71 };
        assert_eq!(field_u64(&v), Some(71));
        v.nvmlReturn = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        assert_eq!(field_u64(&v), None);
    }
}
