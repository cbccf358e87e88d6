//! amdsmi_status_t's codes and names, the init flags and the processor types.

use crate::*;

// ---- amdsmi_status_t ---------------------------------------------------------

pub const AMDSMI_STATUS_SUCCESS: amdsmi_status_t = 0;
pub const AMDSMI_STATUS_INVAL: amdsmi_status_t = 1;
pub const AMDSMI_STATUS_NOT_SUPPORTED: amdsmi_status_t = 2;
pub const AMDSMI_STATUS_NOT_YET_IMPLEMENTED: amdsmi_status_t = 3;
pub const AMDSMI_STATUS_FAIL_LOAD_MODULE: amdsmi_status_t = 4;
pub const AMDSMI_STATUS_FAIL_LOAD_SYMBOL: amdsmi_status_t = 5;
pub const AMDSMI_STATUS_DRM_ERROR: amdsmi_status_t = 6;
pub const AMDSMI_STATUS_API_FAILED: amdsmi_status_t = 7;
pub const AMDSMI_STATUS_TIMEOUT: amdsmi_status_t = 8;
pub const AMDSMI_STATUS_RETRY: amdsmi_status_t = 9;
pub const AMDSMI_STATUS_NO_PERM: amdsmi_status_t = 10;
pub const AMDSMI_STATUS_INTERRUPT: amdsmi_status_t = 11;
pub const AMDSMI_STATUS_IO: amdsmi_status_t = 12;
pub const AMDSMI_STATUS_ADDRESS_FAULT: amdsmi_status_t = 13;
pub const AMDSMI_STATUS_FILE_ERROR: amdsmi_status_t = 14;
pub const AMDSMI_STATUS_OUT_OF_RESOURCES: amdsmi_status_t = 15;
pub const AMDSMI_STATUS_INTERNAL_EXCEPTION: amdsmi_status_t = 16;
pub const AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS: amdsmi_status_t = 17;
pub const AMDSMI_STATUS_INIT_ERROR: amdsmi_status_t = 18;
pub const AMDSMI_STATUS_REFCOUNT_OVERFLOW: amdsmi_status_t = 19;
pub const AMDSMI_STATUS_DIRECTORY_NOT_FOUND: amdsmi_status_t = 20;
pub const AMDSMI_STATUS_BUSY: amdsmi_status_t = 30;
pub const AMDSMI_STATUS_NOT_FOUND: amdsmi_status_t = 31;
pub const AMDSMI_STATUS_NOT_INIT: amdsmi_status_t = 32;
pub const AMDSMI_STATUS_NO_SLOT: amdsmi_status_t = 33;
pub const AMDSMI_STATUS_DRIVER_NOT_LOADED: amdsmi_status_t = 34;
pub const AMDSMI_STATUS_MORE_DATA: amdsmi_status_t = 39;
pub const AMDSMI_STATUS_NO_DATA: amdsmi_status_t = 40;
pub const AMDSMI_STATUS_INSUFFICIENT_SIZE: amdsmi_status_t = 41;
pub const AMDSMI_STATUS_UNEXPECTED_SIZE: amdsmi_status_t = 42;
pub const AMDSMI_STATUS_UNEXPECTED_DATA: amdsmi_status_t = 43;
pub const AMDSMI_STATUS_NON_AMD_CPU: amdsmi_status_t = 44;
pub const AMDSMI_STATUS_NO_ENERGY_DRV: amdsmi_status_t = 45;
pub const AMDSMI_STATUS_NO_MSR_DRV: amdsmi_status_t = 46;
pub const AMDSMI_STATUS_NO_HSMP_DRV: amdsmi_status_t = 47;
pub const AMDSMI_STATUS_NO_HSMP_SUP: amdsmi_status_t = 48;
pub const AMDSMI_STATUS_NO_HSMP_MSG_SUP: amdsmi_status_t = 49;
pub const AMDSMI_STATUS_HSMP_TIMEOUT: amdsmi_status_t = 50;
pub const AMDSMI_STATUS_NO_DRV: amdsmi_status_t = 51;
pub const AMDSMI_STATUS_FILE_NOT_FOUND: amdsmi_status_t = 52;
pub const AMDSMI_STATUS_ARG_PTR_NULL: amdsmi_status_t = 53;
pub const AMDSMI_STATUS_AMDGPU_RESTART_ERR: amdsmi_status_t = 54;
pub const AMDSMI_STATUS_SETTING_UNAVAILABLE: amdsmi_status_t = 55;
pub const AMDSMI_STATUS_CORRUPTED_EEPROM: amdsmi_status_t = 56;
pub const AMDSMI_STATUS_MAP_ERROR: amdsmi_status_t = 0xFFFF_FFFE;
pub const AMDSMI_STATUS_UNKNOWN_ERROR: amdsmi_status_t = 0xFFFF_FFFF;

/// The status's name as amdsmi.h spells it (`None`: not a 7.0.2 code).
pub fn status_name(s: amdsmi_status_t) -> Option<&'static str> {
    Some(match s {
        AMDSMI_STATUS_SUCCESS => "AMDSMI_STATUS_SUCCESS",
        AMDSMI_STATUS_INVAL => "AMDSMI_STATUS_INVAL",
        AMDSMI_STATUS_NOT_SUPPORTED => "AMDSMI_STATUS_NOT_SUPPORTED",
        AMDSMI_STATUS_NOT_YET_IMPLEMENTED => "AMDSMI_STATUS_NOT_YET_IMPLEMENTED",
        AMDSMI_STATUS_FAIL_LOAD_MODULE => "AMDSMI_STATUS_FAIL_LOAD_MODULE",
        AMDSMI_STATUS_FAIL_LOAD_SYMBOL => "AMDSMI_STATUS_FAIL_LOAD_SYMBOL",
        AMDSMI_STATUS_DRM_ERROR => "AMDSMI_STATUS_DRM_ERROR",
        AMDSMI_STATUS_API_FAILED => "AMDSMI_STATUS_API_FAILED",
        AMDSMI_STATUS_TIMEOUT => "AMDSMI_STATUS_TIMEOUT",
        AMDSMI_STATUS_RETRY => "AMDSMI_STATUS_RETRY",
        AMDSMI_STATUS_NO_PERM => "AMDSMI_STATUS_NO_PERM",
        AMDSMI_STATUS_INTERRUPT => "AMDSMI_STATUS_INTERRUPT",
        AMDSMI_STATUS_IO => "AMDSMI_STATUS_IO",
        AMDSMI_STATUS_ADDRESS_FAULT => "AMDSMI_STATUS_ADDRESS_FAULT",
        AMDSMI_STATUS_FILE_ERROR => "AMDSMI_STATUS_FILE_ERROR",
        AMDSMI_STATUS_OUT_OF_RESOURCES => "AMDSMI_STATUS_OUT_OF_RESOURCES",
        AMDSMI_STATUS_INTERNAL_EXCEPTION => "AMDSMI_STATUS_INTERNAL_EXCEPTION",
        AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS => "AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS",
        AMDSMI_STATUS_INIT_ERROR => "AMDSMI_STATUS_INIT_ERROR",
        AMDSMI_STATUS_REFCOUNT_OVERFLOW => "AMDSMI_STATUS_REFCOUNT_OVERFLOW",
        AMDSMI_STATUS_DIRECTORY_NOT_FOUND => "AMDSMI_STATUS_DIRECTORY_NOT_FOUND",
        AMDSMI_STATUS_BUSY => "AMDSMI_STATUS_BUSY",
        AMDSMI_STATUS_NOT_FOUND => "AMDSMI_STATUS_NOT_FOUND",
        AMDSMI_STATUS_NOT_INIT => "AMDSMI_STATUS_NOT_INIT",
        AMDSMI_STATUS_NO_SLOT => "AMDSMI_STATUS_NO_SLOT",
        AMDSMI_STATUS_DRIVER_NOT_LOADED => "AMDSMI_STATUS_DRIVER_NOT_LOADED",
        AMDSMI_STATUS_MORE_DATA => "AMDSMI_STATUS_MORE_DATA",
        AMDSMI_STATUS_NO_DATA => "AMDSMI_STATUS_NO_DATA",
        AMDSMI_STATUS_INSUFFICIENT_SIZE => "AMDSMI_STATUS_INSUFFICIENT_SIZE",
        AMDSMI_STATUS_UNEXPECTED_SIZE => "AMDSMI_STATUS_UNEXPECTED_SIZE",
        AMDSMI_STATUS_UNEXPECTED_DATA => "AMDSMI_STATUS_UNEXPECTED_DATA",
        AMDSMI_STATUS_NON_AMD_CPU => "AMDSMI_STATUS_NON_AMD_CPU",
        AMDSMI_STATUS_NO_ENERGY_DRV => "AMDSMI_STATUS_NO_ENERGY_DRV",
        AMDSMI_STATUS_NO_MSR_DRV => "AMDSMI_STATUS_NO_MSR_DRV",
        AMDSMI_STATUS_NO_HSMP_DRV => "AMDSMI_STATUS_NO_HSMP_DRV",
        AMDSMI_STATUS_NO_HSMP_SUP => "AMDSMI_STATUS_NO_HSMP_SUP",
        AMDSMI_STATUS_NO_HSMP_MSG_SUP => "AMDSMI_STATUS_NO_HSMP_MSG_SUP",
        AMDSMI_STATUS_HSMP_TIMEOUT => "AMDSMI_STATUS_HSMP_TIMEOUT",
        AMDSMI_STATUS_NO_DRV => "AMDSMI_STATUS_NO_DRV",
        AMDSMI_STATUS_FILE_NOT_FOUND => "AMDSMI_STATUS_FILE_NOT_FOUND",
        AMDSMI_STATUS_ARG_PTR_NULL => "AMDSMI_STATUS_ARG_PTR_NULL",
        AMDSMI_STATUS_AMDGPU_RESTART_ERR => "AMDSMI_STATUS_AMDGPU_RESTART_ERR",
        AMDSMI_STATUS_SETTING_UNAVAILABLE => "AMDSMI_STATUS_SETTING_UNAVAILABLE",
        AMDSMI_STATUS_CORRUPTED_EEPROM => "AMDSMI_STATUS_CORRUPTED_EEPROM",
        AMDSMI_STATUS_MAP_ERROR => "AMDSMI_STATUS_MAP_ERROR",
        AMDSMI_STATUS_UNKNOWN_ERROR => "AMDSMI_STATUS_UNKNOWN_ERROR",
        _ => return None,
    })
}

/// amdsmi_init_flags_t (the call takes it as a 64-bit value).
pub const AMDSMI_INIT_ALL_PROCESSORS: amdsmi_init_flags_t = 0xFFFF_FFFF;
pub const AMDSMI_INIT_AMD_CPUS: amdsmi_init_flags_t = 1;
pub const AMDSMI_INIT_AMD_GPUS: amdsmi_init_flags_t = 2;
pub const AMDSMI_INIT_NON_AMD_CPUS: amdsmi_init_flags_t = 4;
pub const AMDSMI_INIT_NON_AMD_GPUS: amdsmi_init_flags_t = 8;
pub const AMDSMI_INIT_AMD_APUS: amdsmi_init_flags_t = 3;

/// processor_type_t.
pub const AMDSMI_PROCESSOR_TYPE_UNKNOWN: processor_type_t = 0;
pub const AMDSMI_PROCESSOR_TYPE_AMD_GPU: processor_type_t = 1;
pub const AMDSMI_PROCESSOR_TYPE_AMD_CPU: processor_type_t = 2;
pub const AMDSMI_PROCESSOR_TYPE_NON_AMD_GPU: processor_type_t = 3;
pub const AMDSMI_PROCESSOR_TYPE_NON_AMD_CPU: processor_type_t = 4;
pub const AMDSMI_PROCESSOR_TYPE_AMD_CPU_CORE: processor_type_t = 5;
pub const AMDSMI_PROCESSOR_TYPE_AMD_APU: processor_type_t = 6;
