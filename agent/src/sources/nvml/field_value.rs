//! The value of one answered NVML field (`nvmlFieldValue_t`), decoded by
//! the type NVML says it wrote. Kept apart from the field requests
//! (`fields`) and the temperatures (`temperature`), which both read values.

use nvml_wrapper_sys::bindings::nvmlFieldValue_t;

/// The value of one answered field as an integer; `None` if NVML refused it.
#[allow(non_upper_case_globals)] // bindgen's names for NVML's C enum
pub(super) fn field_u64(v: &nvmlFieldValue_t) -> Option<u64> {
    use nvml_wrapper_sys::bindings::*;
    if v.nvmlReturn != nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    // SAFETY: valueType says which member of the union NVML wrote.
    unsafe {
        Some(match v.valueType {
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => u64::from(v.value.uiVal),
            // c_ulong is 64-bit on the Linux targets NVML supports.
            #[allow(clippy::useless_conversion)]
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => u64::from(v.value.ulVal),
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => v.value.ullVal,
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => v.value.sllVal.max(0) as u64,
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => v.value.siVal.max(0) as u64,
            nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => u64::from(v.value.usVal),
            nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE => v.value.dVal.max(0.0) as u64,
            _ => return None,
        })
    }
}

/// The value of one answered field as a signed integer (T.Limit
/// thresholds are negative above the maximum operating temperature).
#[allow(non_upper_case_globals)] // bindgen's names for NVML's C enum
pub(super) fn field_i64(v: &nvmlFieldValue_t) -> Option<i64> {
    use nvml_wrapper_sys::bindings::*;
    if v.nvmlReturn != nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    // SAFETY: valueType says which member of the union NVML wrote.
    unsafe {
        match v.valueType {
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => Some(i64::from(v.value.siVal)),
            nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => Some(v.value.sllVal),
            _ => field_u64(v).and_then(|u| i64::try_from(u).ok()),
        }
    }
}
