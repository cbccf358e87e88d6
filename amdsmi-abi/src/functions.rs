//! The functions fleetop calls, as function-pointer types.

use crate::*;
use std::ffi::c_char;

// ---- the functions fleetop calls, as function-pointer types -------------------
//
// Named after the C function with `_fn`. Each is `unsafe`: the library
// writes through the pointers it is given.

pub type amdsmi_init_fn = unsafe extern "C" fn(flags: amdsmi_init_flags_t) -> amdsmi_status_t;
pub type amdsmi_shut_down_fn = unsafe extern "C" fn() -> amdsmi_status_t;
/// The string is the library's (static); the caller must not free it.
pub type amdsmi_status_code_to_string_fn =
    unsafe extern "C" fn(status: amdsmi_status_t, status_string: *mut *const c_char) -> amdsmi_status_t;
pub type amdsmi_get_lib_version_fn = unsafe extern "C" fn(version: *mut amdsmi_version_t) -> amdsmi_status_t;
/// Call once with a null `socket_handles` for the count, then with room for it.
pub type amdsmi_get_socket_handles_fn =
    unsafe extern "C" fn(socket_count: *mut u32, socket_handles: *mut amdsmi_socket_handle) -> amdsmi_status_t;
pub type amdsmi_get_socket_info_fn =
    unsafe extern "C" fn(socket_handle: amdsmi_socket_handle, len: usize, name: *mut c_char) -> amdsmi_status_t;
/// Per socket; a null `processor_handles` asks for the count.
pub type amdsmi_get_processor_handles_fn = unsafe extern "C" fn(
    socket_handle: amdsmi_socket_handle,
    processor_count: *mut u32,
    processor_handles: *mut amdsmi_processor_handle,
) -> amdsmi_status_t;
pub type amdsmi_get_processor_type_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    processor_type: *mut processor_type_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_asic_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_asic_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_board_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_board_info_t) -> amdsmi_status_t;
/// `uuid_length` in: the buffer's size (pass [`AMDSMI_GPU_UUID_SIZE`]).
pub type amdsmi_get_gpu_device_uuid_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    uuid_length: *mut u32,
    uuid: *mut c_char,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_device_bdf_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, bdf: *mut amdsmi_bdf_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_driver_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_driver_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_vbios_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_vbios_info_t) -> amdsmi_status_t;
pub type amdsmi_get_fw_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_fw_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_kfd_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_kfd_info_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_enumeration_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_enumeration_info_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_activity_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_engine_usage_t,
) -> amdsmi_status_t;
/// Bytes.
pub type amdsmi_get_gpu_memory_total_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    mem_type: amdsmi_memory_type_t,
    total: *mut u64,
) -> amdsmi_status_t;
/// Bytes.
pub type amdsmi_get_gpu_memory_usage_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    mem_type: amdsmi_memory_type_t,
    used: *mut u64,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_vram_usage_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_vram_usage_t) -> amdsmi_status_t;
pub type amdsmi_get_gpu_vram_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_vram_info_t) -> amdsmi_status_t;
/// °C.
pub type amdsmi_get_temp_metric_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    sensor_type: amdsmi_temperature_type_t,
    metric: amdsmi_temperature_metric_t,
    temperature: *mut i64,
) -> amdsmi_status_t;
pub type amdsmi_get_power_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_power_info_t) -> amdsmi_status_t;
/// `sensor_ind` 0 is the GPU's own cap.
pub type amdsmi_get_power_cap_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    sensor_ind: u32,
    info: *mut amdsmi_power_cap_info_t,
) -> amdsmi_status_t;
/// Energy = `energy_accumulator * counter_resolution` µJ; `timestamp` in ns.
pub type amdsmi_get_energy_count_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    energy_accumulator: *mut u64,
    counter_resolution: *mut f32,
    timestamp: *mut u64,
) -> amdsmi_status_t;
pub type amdsmi_get_clock_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    clk_type: amdsmi_clk_type_t,
    info: *mut amdsmi_clk_info_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_metrics_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_gpu_metrics_t) -> amdsmi_status_t;
pub type amdsmi_get_violation_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_violation_status_t,
) -> amdsmi_status_t;
/// One RAS block (a single [`GPU_BLOCKS`] bit).
pub type amdsmi_get_gpu_ecc_count_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    ec: *mut amdsmi_error_count_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_total_ecc_count_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, ec: *mut amdsmi_error_count_t) -> amdsmi_status_t;
/// The RAS blocks with ECC on, as a mask of [`GPU_BLOCKS`] bits.
pub type amdsmi_get_gpu_ecc_enabled_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, enabled_blocks: *mut u64) -> amdsmi_status_t;
pub type amdsmi_get_gpu_ecc_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    state: *mut amdsmi_ras_err_state_t,
) -> amdsmi_status_t;
/// A null `info` asks for the count.
pub type amdsmi_get_gpu_bad_page_info_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    num_pages: *mut u32,
    info: *mut amdsmi_retired_page_record_t,
) -> amdsmi_status_t;
pub type amdsmi_get_pcie_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_pcie_info_t) -> amdsmi_status_t;
pub type amdsmi_get_link_metrics_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_link_metrics_t,
) -> amdsmi_status_t;
pub type amdsmi_get_gpu_xgmi_link_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    info: *mut amdsmi_xgmi_link_status_t,
) -> amdsmi_status_t;
pub type amdsmi_get_xgmi_info_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, info: *mut amdsmi_xgmi_info_t) -> amdsmi_status_t;
pub type amdsmi_topo_get_link_type_fn = unsafe extern "C" fn(
    src: amdsmi_processor_handle,
    dst: amdsmi_processor_handle,
    hops: *mut u64,
    link_type: *mut amdsmi_link_type_t,
) -> amdsmi_status_t;
pub type amdsmi_gpu_xgmi_error_status_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    status: *mut amdsmi_xgmi_status_t,
) -> amdsmi_status_t;
/// `max_processes` in: room in `list`; out: how many were written (a null
/// `list` asks for the count). More processes than room:
/// [`AMDSMI_STATUS_OUT_OF_RESOURCES`] after filling the room.
pub type amdsmi_get_gpu_process_list_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    max_processes: *mut u32,
    list: *mut amdsmi_proc_info_t,
) -> amdsmi_status_t;
/// Writes "SPX", "DPX", "TPX", "QPX" or "CPX" into a buffer of `len` bytes.
pub type amdsmi_get_gpu_compute_partition_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    compute_partition: *mut c_char,
    len: u32,
) -> amdsmi_status_t;
/// Writes "NPS1", "NPS2", "NPS4" or "NPS8" into a buffer of `len` bytes.
pub type amdsmi_get_gpu_memory_partition_fn = unsafe extern "C" fn(
    processor_handle: amdsmi_processor_handle,
    memory_partition: *mut c_char,
    len: u32,
) -> amdsmi_status_t;
pub type amdsmi_init_gpu_event_notification_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle) -> amdsmi_status_t;
/// `mask`: [`event_mask_bit`]s.
pub type amdsmi_set_gpu_event_notification_mask_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle, mask: u64) -> amdsmi_status_t;
/// Waits up to `timeout_ms` for events of every GPU initialised for them;
/// `num_elem` in: room in `data`, out: how many were written. None came:
/// [`AMDSMI_STATUS_NO_DATA`].
pub type amdsmi_get_gpu_event_notification_fn = unsafe extern "C" fn(
    timeout_ms: i32,
    num_elem: *mut u32,
    data: *mut amdsmi_evt_notification_data_t,
) -> amdsmi_status_t;
pub type amdsmi_stop_gpu_event_notification_fn =
    unsafe extern "C" fn(processor_handle: amdsmi_processor_handle) -> amdsmi_status_t;
