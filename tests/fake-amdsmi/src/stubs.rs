//! The symbols amdsmi 7.0.2's Python package binds that fleetop never
//! calls: each answers AMDSMI_STATUS_NOT_SUPPORTED, as a library on hardware
//! without the feature does (CPU/HSMP calls, setters, counters, CPER, ...).
//! The parameters are the C ones by kind (pointers as `*mut c_void`, a BDF
//! by value as its 64 bits) and are never read.

use std::ffi::{c_char, c_void};

use fleetop_amdsmi_abi::{AMDSMI_STATUS_NOT_SUPPORTED, amdsmi_status_t};

type Ptr = *mut c_void;

/// amdsmi_link_id_bw_type_t, passed by value by two CPU calls.
#[repr(C)]
pub struct LinkIdBwType {
    pub bw_type: u32,
    pub link_name: *mut c_char,
}

macro_rules! not_supported {
    ($($name:ident($($t:ty),*);)*) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($(_: $t),*) -> amdsmi_status_t {
            AMDSMI_STATUS_NOT_SUPPORTED
        }
    )*};
}

/// Names of the functions below, for the test that every symbol is exported.
macro_rules! listed {
    ($($name:ident($($t:ty),*);)*) => {
        #[cfg(test)]
        pub const NAMES: &[&str] = &[$(stringify!($name)),*];
        not_supported! { $($name($($t),*);)* }
    };
}

listed! {
    amdsmi_get_cpu_handles(Ptr, Ptr);
    amdsmi_get_processor_info(Ptr, u64, Ptr);
    amdsmi_get_processor_count_from_handles(Ptr, Ptr, Ptr, Ptr, Ptr);
    amdsmi_get_cpucore_handles(Ptr, Ptr);
    amdsmi_get_cpu_affinity_with_scope(Ptr, u32, Ptr, u32);
    amdsmi_get_gpu_virtualization_mode(Ptr, Ptr);
    amdsmi_get_gpu_revision(Ptr, Ptr);
    amdsmi_get_gpu_vendor_name(Ptr, Ptr, u64);
    amdsmi_get_gpu_vram_vendor(Ptr, Ptr, u32);
    amdsmi_get_gpu_subsystem_id(Ptr, Ptr);
    amdsmi_get_gpu_subsystem_name(Ptr, Ptr, u64);
    amdsmi_get_gpu_pci_bandwidth(Ptr, Ptr);
    amdsmi_get_gpu_bdf_id(Ptr, Ptr);
    amdsmi_get_gpu_topo_numa_affinity(Ptr, Ptr);
    amdsmi_get_gpu_pci_throughput(Ptr, Ptr, Ptr, Ptr);
    amdsmi_set_gpu_pci_bandwidth(Ptr, u64);
    amdsmi_set_power_cap(Ptr, u32, u64);
    amdsmi_set_gpu_power_profile(Ptr, u32, u64);
    amdsmi_get_cpu_socket_power(Ptr, Ptr);
    amdsmi_get_cpu_socket_power_cap(Ptr, Ptr);
    amdsmi_get_cpu_socket_power_cap_max(Ptr, Ptr);
    amdsmi_get_cpu_pwr_svi_telemetry_all_rails(Ptr, Ptr);
    amdsmi_set_cpu_socket_power_cap(Ptr, u32);
    amdsmi_set_cpu_pwr_efficiency_mode(Ptr, u8);
    amdsmi_get_gpu_bad_page_threshold(Ptr, Ptr);
    amdsmi_gpu_validate_ras_eeprom(Ptr);
    amdsmi_get_gpu_ras_feature_info(Ptr, Ptr);
    amdsmi_get_gpu_ras_block_features_enabled(Ptr, u64, Ptr);
    amdsmi_get_gpu_memory_reserved_pages(Ptr, Ptr, Ptr);
    amdsmi_get_gpu_fan_rpms(Ptr, u32, Ptr);
    amdsmi_get_gpu_fan_speed(Ptr, u32, Ptr);
    amdsmi_get_gpu_fan_speed_max(Ptr, u32, Ptr);
    amdsmi_get_gpu_cache_info(Ptr, Ptr);
    amdsmi_get_gpu_volt_metric(Ptr, u32, u32, Ptr);
    amdsmi_reset_gpu_fan(Ptr, u32);
    amdsmi_set_gpu_fan_speed(Ptr, u32, u64);
    amdsmi_get_gpu_busy_percent(Ptr, Ptr);
    amdsmi_get_utilization_count(Ptr, Ptr, u32, Ptr);
    amdsmi_get_gpu_perf_level(Ptr, Ptr);
    amdsmi_set_gpu_perf_determinism_mode(Ptr, u64);
    amdsmi_get_gpu_overdrive_level(Ptr, Ptr);
    amdsmi_get_gpu_mem_overdrive_level(Ptr, Ptr);
    amdsmi_get_clk_freq(Ptr, u32, Ptr);
    amdsmi_reset_gpu(Ptr);
    amdsmi_get_gpu_od_volt_info(Ptr, Ptr);
    amdsmi_get_gpu_metrics_header_info(Ptr, Ptr);
    amdsmi_get_gpu_pm_metrics_info(Ptr, Ptr, Ptr);
    amdsmi_get_gpu_reg_table_info(Ptr, u32, Ptr, Ptr);
    amdsmi_set_gpu_clk_range(Ptr, u64, u64, u32);
    amdsmi_set_gpu_clk_limit(Ptr, u32, u32, u64);
    amdsmi_set_gpu_od_clk_info(Ptr, u32, u64, u32);
    amdsmi_set_gpu_od_volt_info(Ptr, u32, u64, u64);
    amdsmi_get_gpu_od_volt_curve_regions(Ptr, Ptr, Ptr);
    amdsmi_get_gpu_power_profile_presets(Ptr, u32, Ptr);
    amdsmi_set_gpu_perf_level(Ptr, u32);
    amdsmi_set_gpu_overdrive_level(Ptr, u32);
    amdsmi_set_clk_freq(Ptr, u32, u64);
    amdsmi_get_soc_pstate(Ptr, Ptr);
    amdsmi_set_soc_pstate(Ptr, u32);
    amdsmi_get_xgmi_plpd(Ptr, Ptr);
    amdsmi_set_xgmi_plpd(Ptr, u32);
    amdsmi_get_gpu_process_isolation(Ptr, Ptr);
    amdsmi_set_gpu_process_isolation(Ptr, u32);
    amdsmi_clean_gpu_local_data(Ptr);
    amdsmi_get_gpu_cper_entries(Ptr, u32, Ptr, Ptr, Ptr, Ptr, Ptr);
    amdsmi_get_afids_from_cper(Ptr, u32, Ptr, Ptr);
    amdsmi_gpu_counter_group_supported(Ptr, u32);
    amdsmi_gpu_create_counter(Ptr, u32, Ptr);
    amdsmi_gpu_destroy_counter(u64);
    amdsmi_gpu_control_counter(u64, u32, Ptr);
    amdsmi_gpu_read_counter(u64, Ptr);
    amdsmi_get_gpu_available_counters(Ptr, u32, Ptr);
    amdsmi_get_gpu_compute_process_info(Ptr, Ptr);
    amdsmi_get_gpu_compute_process_info_by_pid(u32, Ptr);
    amdsmi_get_gpu_compute_process_gpus(u32, Ptr, Ptr);
    amdsmi_reset_gpu_xgmi_error(Ptr);
    amdsmi_topo_get_numa_node_number(Ptr, Ptr);
    amdsmi_topo_get_link_weight(Ptr, Ptr, Ptr);
    amdsmi_get_minmax_bandwidth_between_processors(Ptr, Ptr, Ptr, Ptr);
    amdsmi_get_link_topology_nearest(Ptr, u32, Ptr);
    amdsmi_is_P2P_accessible(Ptr, Ptr, Ptr);
    amdsmi_topo_get_p2p_status(Ptr, Ptr, Ptr, Ptr);
    amdsmi_set_gpu_compute_partition(Ptr, u32);
    amdsmi_set_gpu_memory_partition(Ptr, u32);
    amdsmi_get_gpu_memory_partition_config(Ptr, Ptr);
    amdsmi_set_gpu_memory_partition_mode(Ptr, u32);
    amdsmi_get_gpu_accelerator_partition_profile_config(Ptr, Ptr);
    amdsmi_get_gpu_accelerator_partition_profile(Ptr, Ptr, Ptr);
    amdsmi_set_gpu_accelerator_partition_profile(Ptr, u32);
    amdsmi_get_gpu_xcd_counter(Ptr, Ptr);
    amdsmi_is_gpu_power_management_enabled(Ptr, Ptr);
    amdsmi_gpu_driver_reload();
    amdsmi_get_cpu_core_energy(Ptr, Ptr);
    amdsmi_get_cpu_socket_energy(Ptr, Ptr);
    amdsmi_get_threads_per_core(Ptr);
    amdsmi_get_cpu_hsmp_driver_version(Ptr, Ptr);
    amdsmi_get_cpu_smu_fw_version(Ptr, Ptr);
    amdsmi_get_cpu_hsmp_proto_ver(Ptr, Ptr);
    amdsmi_get_cpu_prochot_status(Ptr, Ptr);
    amdsmi_get_cpu_fclk_mclk(Ptr, Ptr, Ptr);
    amdsmi_get_cpu_cclk_limit(Ptr, Ptr);
    amdsmi_get_cpu_socket_current_active_freq_limit(Ptr, Ptr, Ptr);
    amdsmi_get_cpu_socket_freq_range(Ptr, Ptr, Ptr);
    amdsmi_get_cpu_core_current_freq_limit(Ptr, Ptr);
    amdsmi_get_cpu_core_boostlimit(Ptr, Ptr);
    amdsmi_get_cpu_socket_c0_residency(Ptr, Ptr);
    amdsmi_set_cpu_core_boostlimit(Ptr, u32);
    amdsmi_set_cpu_socket_boostlimit(Ptr, u32);
    amdsmi_get_cpu_ddr_bw(Ptr, Ptr);
    amdsmi_get_cpu_socket_temperature(Ptr, Ptr);
    amdsmi_get_cpu_dimm_temp_range_and_refresh_rate(Ptr, u8, Ptr);
    amdsmi_get_cpu_dimm_power_consumption(Ptr, u8, Ptr);
    amdsmi_get_cpu_dimm_thermal_sensor(Ptr, u8, Ptr);
    amdsmi_set_cpu_xgmi_width(Ptr, u8, u8);
    amdsmi_set_cpu_gmi3_link_width_range(Ptr, u8, u8);
    amdsmi_cpu_apb_enable(Ptr);
    amdsmi_cpu_apb_disable(Ptr, u8);
    amdsmi_set_cpu_socket_lclk_dpm_level(Ptr, u8, u8, u8);
    amdsmi_get_cpu_socket_lclk_dpm_level(Ptr, u8, Ptr);
    amdsmi_set_cpu_pcie_link_rate(Ptr, u8, Ptr);
    amdsmi_set_cpu_df_pstate_range(Ptr, u8, u8);
    amdsmi_get_cpu_current_io_bandwidth(Ptr, LinkIdBwType, Ptr);
    amdsmi_get_cpu_current_xgmi_bw(Ptr, LinkIdBwType, Ptr);
    amdsmi_get_hsmp_metrics_table_version(Ptr, Ptr);
    amdsmi_get_hsmp_metrics_table(Ptr, Ptr);
    amdsmi_first_online_core_on_cpu_socket(Ptr, Ptr);
    amdsmi_get_cpu_family(Ptr);
    amdsmi_get_cpu_model(Ptr);
    amdsmi_get_cpu_model_name(Ptr, Ptr);
    amdsmi_get_esmi_err_msg(u32, Ptr);
    amdsmi_get_cpu_cores_per_socket(u32, Ptr);
    amdsmi_get_cpu_socket_count(Ptr);
}
