//! Each AMD SMI call the agent makes, as a safe function: the out-struct
//! zeroed and owned here, the call, its status. Lists are asked for their
//! length first and bounded, so no call's cost grows without limit.

use std::ffi::c_char;

use fleetop_amdsmi_abi as abi;

use super::library::{Amd, Handle, Status};

/// The most processes read per GPU (amd-smi's own bound).
const MAX_PROCESSES: u32 = abi::AMDSMI_MAX_NUM_PROCESSES as u32;
/// The most bad pages read per GPU: far past any GPU still in service.
const MAX_BAD_PAGES: u32 = 4096;
/// The most sockets and processors looked at.
const MAX_HANDLES: u32 = 256;

/// A call that fills one struct for a processor.
type InfoFn<T> = unsafe extern "C" fn(abi::amdsmi_processor_handle, *mut T) -> abi::amdsmi_status_t;

fn info<T>(f: Option<InfoFn<T>>, h: Handle, mut v: T) -> Result<T, Status> {
    let f = f.ok_or(Status::MISSING)?;
    // SAFETY: `h` is a handle the library gave, and `v` the struct amdsmi.h
    // names for this call, owned here and writable for its whole size.
    Status::check(unsafe { f(h.0, &mut v) })?;
    Ok(v)
}

/// As `info`, for the structs of several KiB (the metrics table, the
/// violation status, link metrics): on the heap, not a worker's stack.
fn boxed<T>(f: Option<InfoFn<T>>, h: Handle, mut v: Box<T>) -> Result<Box<T>, Status> {
    let f = f.ok_or(Status::MISSING)?;
    // SAFETY: as in `info`; the box is the struct, writable for its size.
    Status::check(unsafe { f(h.0, &mut *v) })?;
    Ok(v)
}

/// A call that writes a NUL-terminated string into a buffer of `len` bytes.
type TextFn = unsafe extern "C" fn(abi::amdsmi_processor_handle, *mut c_char, u32) -> abi::amdsmi_status_t;

fn text(f: Option<TextFn>, h: Handle) -> Result<String, Status> {
    let f = f.ok_or(Status::MISSING)?;
    let mut buf = [0 as c_char; abi::AMDSMI_PARTITION_STRING_LENGTH];
    // SAFETY: a buffer of exactly the length passed, owned here.
    Status::check(unsafe { f(h.0, buf.as_mut_ptr(), buf.len() as u32) })?;
    // Bounded by the buffer whatever the library wrote (no NUL: all of it).
    Ok(abi::c_str(&buf))
}

impl Amd {
    /// Every AMD GPU processor, socket by socket (a socket is a physical
    /// GPU; its processors are its compute partitions, in order).
    pub(crate) fn processors(&self) -> Result<Vec<Handle>, Status> {
        let sockets = self.api.amdsmi_get_socket_handles.ok_or(Status::MISSING)?;
        let procs = self.api.amdsmi_get_processor_handles.ok_or(Status::MISSING)?;
        let mut n = 0u32;
        // SAFETY: a null list asks for the count, written to `n`.
        Status::check(unsafe { sockets(&mut n, std::ptr::null_mut()) })?;
        let mut socks = vec![std::ptr::null_mut(); n.min(MAX_HANDLES) as usize];
        let mut n = socks.len() as u32;
        // SAFETY: room for `n` handles, as `n` says.
        Status::check(unsafe { sockets(&mut n, socks.as_mut_ptr()) })?;
        socks.truncate(n as usize);
        let mut out = Vec::new();
        for s in socks {
            let mut k = 0u32;
            // SAFETY: a socket handle the library gave; a null list asks for the count.
            Status::check(unsafe { procs(s, &mut k, std::ptr::null_mut()) })?;
            let mut hs = vec![std::ptr::null_mut(); k.min(MAX_HANDLES) as usize];
            let mut k = hs.len() as u32;
            // SAFETY: room for `k` handles, as `k` says.
            Status::check(unsafe { procs(s, &mut k, hs.as_mut_ptr()) })?;
            hs.truncate(k as usize);
            out.extend(hs.into_iter().map(Handle));
        }
        Ok(out)
    }

    pub(crate) fn processor_type(&self, h: Handle) -> Result<abi::processor_type_t, Status> {
        info(self.api.amdsmi_get_processor_type, h, 0)
    }

    pub(crate) fn bdf(&self, h: Handle) -> Result<abi::amdsmi_bdf_t, Status> {
        info(self.api.amdsmi_get_gpu_device_bdf, h, abi::amdsmi_bdf_t::default())
    }

    pub(crate) fn uuid(&self, h: Handle) -> Result<String, Status> {
        let f = self.api.amdsmi_get_gpu_device_uuid.ok_or(Status::MISSING)?;
        // Room for what amd-smi passes, and more.
        let mut buf = [0 as c_char; 2 * abi::AMDSMI_GPU_UUID_SIZE];
        let mut len = buf.len() as u32;
        // SAFETY: `len` is the buffer's size, which the library reads first.
        Status::check(unsafe { f(h.0, &mut len, buf.as_mut_ptr()) })?;
        Ok(abi::c_str(&buf))
    }

    pub(crate) fn asic_info(&self, h: Handle) -> Result<abi::amdsmi_asic_info_t, Status> {
        info(self.api.amdsmi_get_gpu_asic_info, h, abi::amdsmi_asic_info_t::zeroed())
    }

    pub(crate) fn board_info(&self, h: Handle) -> Result<Box<abi::amdsmi_board_info_t>, Status> {
        boxed(
            self.api.amdsmi_get_gpu_board_info,
            h,
            Box::new(abi::amdsmi_board_info_t::zeroed()),
        )
    }

    pub(crate) fn driver_info(&self, h: Handle) -> Result<abi::amdsmi_driver_info_t, Status> {
        info(
            self.api.amdsmi_get_gpu_driver_info,
            h,
            abi::amdsmi_driver_info_t::zeroed(),
        )
    }

    pub(crate) fn vbios_info(&self, h: Handle) -> Result<abi::amdsmi_vbios_info_t, Status> {
        info(
            self.api.amdsmi_get_gpu_vbios_info,
            h,
            abi::amdsmi_vbios_info_t::zeroed(),
        )
    }

    pub(crate) fn fw_info(&self, h: Handle) -> Result<Box<abi::amdsmi_fw_info_t>, Status> {
        boxed(
            self.api.amdsmi_get_fw_info,
            h,
            Box::new(abi::amdsmi_fw_info_t::zeroed()),
        )
    }

    pub(crate) fn kfd_info(&self, h: Handle) -> Result<abi::amdsmi_kfd_info_t, Status> {
        info(self.api.amdsmi_get_gpu_kfd_info, h, abi::amdsmi_kfd_info_t::zeroed())
    }

    pub(crate) fn compute_partition(&self, h: Handle) -> Result<String, Status> {
        text(self.api.amdsmi_get_gpu_compute_partition, h)
    }

    pub(crate) fn memory_partition(&self, h: Handle) -> Result<String, Status> {
        text(self.api.amdsmi_get_gpu_memory_partition, h)
    }

    pub(crate) fn activity(&self, h: Handle) -> Result<abi::amdsmi_engine_usage_t, Status> {
        info(
            self.api.amdsmi_get_gpu_activity,
            h,
            abi::amdsmi_engine_usage_t::zeroed(),
        )
    }

    /// Bytes of VRAM in all.
    pub(crate) fn vram_total(&self, h: Handle) -> Result<u64, Status> {
        let f = self.api.amdsmi_get_gpu_memory_total.ok_or(Status::MISSING)?;
        let mut v = 0u64;
        // SAFETY: a handle the library gave and a u64 it writes.
        Status::check(unsafe { f(h.0, abi::AMDSMI_MEM_TYPE_VRAM, &mut v) })?;
        Ok(v)
    }

    /// Bytes of VRAM in use.
    pub(crate) fn vram_used(&self, h: Handle) -> Result<u64, Status> {
        let f = self.api.amdsmi_get_gpu_memory_usage.ok_or(Status::MISSING)?;
        let mut v = 0u64;
        // SAFETY: a handle the library gave and a u64 it writes.
        Status::check(unsafe { f(h.0, abi::AMDSMI_MEM_TYPE_VRAM, &mut v) })?;
        Ok(v)
    }

    /// °C.
    pub(crate) fn temperature(
        &self,
        h: Handle,
        sensor: abi::amdsmi_temperature_type_t,
        metric: abi::amdsmi_temperature_metric_t,
    ) -> Result<i64, Status> {
        let f = self.api.amdsmi_get_temp_metric.ok_or(Status::MISSING)?;
        let mut v = 0i64;
        // SAFETY: a handle the library gave and an i64 it writes.
        Status::check(unsafe { f(h.0, sensor, metric, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn power_info(&self, h: Handle) -> Result<abi::amdsmi_power_info_t, Status> {
        info(self.api.amdsmi_get_power_info, h, abi::amdsmi_power_info_t::zeroed())
    }

    /// The GPU's own cap (sensor 0).
    pub(crate) fn power_cap(&self, h: Handle) -> Result<abi::amdsmi_power_cap_info_t, Status> {
        let f = self.api.amdsmi_get_power_cap_info.ok_or(Status::MISSING)?;
        let mut v = abi::amdsmi_power_cap_info_t::zeroed();
        // SAFETY: a handle the library gave and the struct it fills.
        Status::check(unsafe { f(h.0, 0, &mut v) })?;
        Ok(v)
    }

    /// (accumulator, µJ per count).
    pub(crate) fn energy(&self, h: Handle) -> Result<(u64, f32), Status> {
        let f = self.api.amdsmi_get_energy_count.ok_or(Status::MISSING)?;
        let (mut acc, mut res, mut ts) = (0u64, 0f32, 0u64);
        // SAFETY: a handle the library gave and three values it writes.
        Status::check(unsafe { f(h.0, &mut acc, &mut res, &mut ts) })?;
        Ok((acc, res))
    }

    pub(crate) fn clock(&self, h: Handle, clk: abi::amdsmi_clk_type_t) -> Result<abi::amdsmi_clk_info_t, Status> {
        let f = self.api.amdsmi_get_clock_info.ok_or(Status::MISSING)?;
        let mut v = abi::amdsmi_clk_info_t::zeroed();
        // SAFETY: a handle the library gave and the struct it fills.
        Status::check(unsafe { f(h.0, clk, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn gpu_metrics(&self, h: Handle) -> Result<Box<abi::amdsmi_gpu_metrics_t>, Status> {
        boxed(
            self.api.amdsmi_get_gpu_metrics_info,
            h,
            Box::new(abi::amdsmi_gpu_metrics_t::zeroed()),
        )
    }

    pub(crate) fn violation_status(&self, h: Handle) -> Result<Box<abi::amdsmi_violation_status_t>, Status> {
        boxed(
            self.api.amdsmi_get_violation_status,
            h,
            Box::new(abi::amdsmi_violation_status_t::zeroed()),
        )
    }

    /// The RAS blocks with ECC on, a mask of `GPU_BLOCKS` bits.
    pub(crate) fn ecc_enabled(&self, h: Handle) -> Result<u64, Status> {
        info(self.api.amdsmi_get_gpu_ecc_enabled, h, 0)
    }

    pub(crate) fn ecc_count(
        &self,
        h: Handle,
        block: abi::amdsmi_gpu_block_t,
    ) -> Result<abi::amdsmi_error_count_t, Status> {
        let f = self.api.amdsmi_get_gpu_ecc_count.ok_or(Status::MISSING)?;
        let mut v = abi::amdsmi_error_count_t::zeroed();
        // SAFETY: a handle the library gave, one block bit, the struct it fills.
        Status::check(unsafe { f(h.0, block, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn ecc_total(&self, h: Handle) -> Result<abi::amdsmi_error_count_t, Status> {
        info(
            self.api.amdsmi_get_gpu_total_ecc_count,
            h,
            abi::amdsmi_error_count_t::zeroed(),
        )
    }

    pub(crate) fn bad_pages(&self, h: Handle) -> Result<Vec<abi::amdsmi_retired_page_record_t>, Status> {
        let f = self.api.amdsmi_get_gpu_bad_page_info.ok_or(Status::MISSING)?;
        let mut n = 0u32;
        // SAFETY: a null list asks for the count, written to `n`.
        Status::check(unsafe { f(h.0, &mut n, std::ptr::null_mut()) })?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut v = vec![abi::amdsmi_retired_page_record_t::zeroed(); n.min(MAX_BAD_PAGES) as usize];
        let mut n = v.len() as u32;
        // SAFETY: room for `n` records, as `n` says.
        let rc = unsafe { f(h.0, &mut n, v.as_mut_ptr()) };
        // More pages than room (they grew between the calls): those written stand.
        if rc != abi::AMDSMI_STATUS_OUT_OF_RESOURCES {
            Status::check(rc)?;
        }
        v.truncate(n as usize);
        Ok(v)
    }

    pub(crate) fn pcie_info(&self, h: Handle) -> Result<abi::amdsmi_pcie_info_t, Status> {
        info(self.api.amdsmi_get_pcie_info, h, abi::amdsmi_pcie_info_t::zeroed())
    }

    pub(crate) fn xgmi_link_status(&self, h: Handle) -> Result<abi::amdsmi_xgmi_link_status_t, Status> {
        info(
            self.api.amdsmi_get_gpu_xgmi_link_status,
            h,
            abi::amdsmi_xgmi_link_status_t::zeroed(),
        )
    }

    pub(crate) fn link_metrics(&self, h: Handle) -> Result<Box<abi::amdsmi_link_metrics_t>, Status> {
        boxed(
            self.api.amdsmi_get_link_metrics,
            h,
            Box::new(abi::amdsmi_link_metrics_t::zeroed()),
        )
    }

    pub(crate) fn xgmi_error_status(&self, h: Handle) -> Result<abi::amdsmi_xgmi_status_t, Status> {
        info(self.api.amdsmi_gpu_xgmi_error_status, h, 0)
    }

    pub(crate) fn processes(&self, h: Handle) -> Result<Vec<abi::amdsmi_proc_info_t>, Status> {
        let f = self.api.amdsmi_get_gpu_process_list.ok_or(Status::MISSING)?;
        let mut n = 0u32;
        // SAFETY: a null list asks for the count, written to `n`.
        Status::check(unsafe { f(h.0, &mut n, std::ptr::null_mut()) })?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut v = vec![abi::amdsmi_proc_info_t::zeroed(); n.min(MAX_PROCESSES) as usize];
        let mut n = v.len() as u32;
        // SAFETY: room for `n` entries, as `n` says.
        let rc = unsafe { f(h.0, &mut n, v.as_mut_ptr()) };
        // More processes than room (started between the calls, or past the
        // bound): those written stand.
        if rc != abi::AMDSMI_STATUS_OUT_OF_RESOURCES {
            Status::check(rc)?;
        }
        v.truncate(n as usize);
        Ok(v)
    }

    /// Starts event notification on a processor for the events in `mask`.
    pub(crate) fn listen(&self, h: Handle, mask: u64) -> Result<(), Status> {
        let init = self.api.amdsmi_init_gpu_event_notification.ok_or(Status::MISSING)?;
        let set = self.api.amdsmi_set_gpu_event_notification_mask.ok_or(Status::MISSING)?;
        // SAFETY: a handle the library gave.
        Status::check(unsafe { init(h.0) })?;
        // SAFETY: as above; the mask is by value.
        Status::check(unsafe { set(h.0, mask) })
    }

    /// Events of every processor listening, waiting up to `timeout_ms`;
    /// none came is `Ok` and empty.
    pub(crate) fn events(
        &self,
        timeout_ms: i32,
        room: usize,
    ) -> Result<Vec<abi::amdsmi_evt_notification_data_t>, Status> {
        let f = self.api.amdsmi_get_gpu_event_notification.ok_or(Status::MISSING)?;
        let mut v = vec![abi::amdsmi_evt_notification_data_t::zeroed(); room];
        let mut n = v.len() as u32;
        // SAFETY: room for `n` entries, as `n` says.
        let rc = unsafe { f(timeout_ms, &mut n, v.as_mut_ptr()) };
        if rc == abi::AMDSMI_STATUS_NO_DATA {
            return Ok(Vec::new());
        }
        Status::check(rc)?;
        v.truncate((n as usize).min(room));
        Ok(v)
    }

    /// The library's version, for the log.
    pub(crate) fn version(&self) -> Option<String> {
        let f = self.api.amdsmi_get_lib_version?;
        let mut v = abi::amdsmi_version_t::zeroed();
        // SAFETY: the struct the library fills; `build` is its own string, not read here.
        Status::check(unsafe { f(&mut v) }).ok()?;
        Some(format!("{}.{}.{}", v.major, v.minor, v.release))
    }
}
