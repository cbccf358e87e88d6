//! Loading `libamd_smi.so` at run time, as AMD's own tools find it, and
//! resolving the calls fleetop makes. Nothing of ROCm is needed to build
//! the agent: the types are `fleetop-amdsmi-abi`'s, the code is found when
//! the agent starts.
//!
//! The library is loaded once and leaked: processor handles, the worker
//! threads and the event thread use it for as long as the agent runs.

use std::ffi::OsString;
use std::fmt;

use fleetop_amdsmi_abi as abi;
use libloading::Library;

use super::AmdUnavailable;

/// An AMD SMI status that is not success, named as amdsmi.h names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status(pub(crate) abi::amdsmi_status_t);

impl Status {
    /// The library lacks the call (an older ROCm): no reading, as NVML's
    /// missing symbols are.
    pub(crate) const MISSING: Status = Status(abi::AMDSMI_STATUS_FAIL_LOAD_SYMBOL);

    /// `Ok` for success, the status otherwise.
    pub(crate) fn check(rc: abi::amdsmi_status_t) -> Result<(), Status> {
        if rc == abi::AMDSMI_STATUS_SUCCESS {
            Ok(())
        } else {
            Err(Status(rc))
        }
    }

    /// A GPU that gives this has not refused one reading: it does not
    /// answer at all (fell off the bus, driver gone, reset failed). The
    /// statuses that only say "not this reading" (not supported, no
    /// permission, a bad size) and the passing ones (busy, retry, a
    /// timeout) are not.
    pub(crate) fn is_lost(self) -> bool {
        matches!(
            self.0,
            abi::AMDSMI_STATUS_NOT_FOUND
                | abi::AMDSMI_STATUS_DRM_ERROR
                | abi::AMDSMI_STATUS_IO
                | abi::AMDSMI_STATUS_FILE_ERROR
                | abi::AMDSMI_STATUS_FILE_NOT_FOUND
                | abi::AMDSMI_STATUS_DIRECTORY_NOT_FOUND
                | abi::AMDSMI_STATUS_DRIVER_NOT_LOADED
                | abi::AMDSMI_STATUS_NO_DRV
                | abi::AMDSMI_STATUS_AMDGPU_RESTART_ERR
                | abi::AMDSMI_STATUS_ADDRESS_FAULT
                | abi::AMDSMI_STATUS_API_FAILED
                | abi::AMDSMI_STATUS_UNKNOWN_ERROR
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match abi::status_name(self.0) {
            Some(n) => f.write_str(n),
            None => write!(f, "AMD SMI status {}", self.0),
        }
    }
}

/// A processor (GPU or GPU partition) handle: an opaque token the library
/// hands out, never dereferenced by the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handle(pub(crate) abi::amdsmi_processor_handle);

// SAFETY: the handle is a token AMD SMI hands out and takes back; AMD SMI's
// calls are thread-safe (the library locks inside), and the library lives
// as long as the process (it is leaked), so the token may go to any thread.
unsafe impl Send for Handle {}
// SAFETY: as above; the token is never dereferenced here.
unsafe impl Sync for Handle {}

/// Declares `Api`: one optional function pointer per call, resolved by name.
macro_rules! api {
    ($($name:ident: $ty:ident),* $(,)?) => {
        /// The calls fleetop makes; `None` where the library lacks one (an
        /// older ROCm): that reading is then absent, never a crash.
        pub(crate) struct Api {
            $(pub(crate) $name: Option<abi::$ty>,)*
        }

        impl Api {
            fn resolve(lib: &Library) -> Api {
                Api {
                    $($name: {
                        // SAFETY: the symbol's type is amdsmi.h's (7.0.2) for
                        // that name, as the ABI crate declares it; the
                        // pointer is used only while `lib` is loaded, which
                        // is for ever (it is leaked).
                        unsafe { lib.get::<abi::$ty>(concat!(stringify!($name), "\0").as_bytes()) }
                            .ok()
                            .map(|s| *s)
                    },)*
                }
            }

            /// The calls the library lacks.
            fn missing(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$name.is_none() {
                    out.push(stringify!($name));
                })*
                out
            }
        }
    };
}

api!(
    amdsmi_init: amdsmi_init_fn,
    amdsmi_get_lib_version: amdsmi_get_lib_version_fn,
    amdsmi_get_socket_handles: amdsmi_get_socket_handles_fn,
    amdsmi_get_processor_handles: amdsmi_get_processor_handles_fn,
    amdsmi_get_processor_type: amdsmi_get_processor_type_fn,
    amdsmi_get_gpu_asic_info: amdsmi_get_gpu_asic_info_fn,
    amdsmi_get_gpu_board_info: amdsmi_get_gpu_board_info_fn,
    amdsmi_get_gpu_device_uuid: amdsmi_get_gpu_device_uuid_fn,
    amdsmi_get_gpu_device_bdf: amdsmi_get_gpu_device_bdf_fn,
    amdsmi_get_gpu_driver_info: amdsmi_get_gpu_driver_info_fn,
    amdsmi_get_gpu_vbios_info: amdsmi_get_gpu_vbios_info_fn,
    amdsmi_get_fw_info: amdsmi_get_fw_info_fn,
    amdsmi_get_gpu_kfd_info: amdsmi_get_gpu_kfd_info_fn,
    amdsmi_get_gpu_activity: amdsmi_get_gpu_activity_fn,
    amdsmi_get_gpu_memory_total: amdsmi_get_gpu_memory_total_fn,
    amdsmi_get_gpu_memory_usage: amdsmi_get_gpu_memory_usage_fn,
    amdsmi_get_temp_metric: amdsmi_get_temp_metric_fn,
    amdsmi_get_power_info: amdsmi_get_power_info_fn,
    amdsmi_get_power_cap_info: amdsmi_get_power_cap_info_fn,
    amdsmi_get_energy_count: amdsmi_get_energy_count_fn,
    amdsmi_get_clock_info: amdsmi_get_clock_info_fn,
    amdsmi_get_gpu_metrics_info: amdsmi_get_gpu_metrics_info_fn,
    amdsmi_get_violation_status: amdsmi_get_violation_status_fn,
    amdsmi_get_gpu_ecc_count: amdsmi_get_gpu_ecc_count_fn,
    amdsmi_get_gpu_total_ecc_count: amdsmi_get_gpu_total_ecc_count_fn,
    amdsmi_get_gpu_ecc_enabled: amdsmi_get_gpu_ecc_enabled_fn,
    amdsmi_get_gpu_bad_page_info: amdsmi_get_gpu_bad_page_info_fn,
    amdsmi_get_pcie_info: amdsmi_get_pcie_info_fn,
    amdsmi_get_gpu_xgmi_link_status: amdsmi_get_gpu_xgmi_link_status_fn,
    amdsmi_get_link_metrics: amdsmi_get_link_metrics_fn,
    amdsmi_gpu_xgmi_error_status: amdsmi_gpu_xgmi_error_status_fn,
    amdsmi_get_gpu_process_list: amdsmi_get_gpu_process_list_fn,
    amdsmi_get_gpu_compute_partition: amdsmi_get_gpu_compute_partition_fn,
    amdsmi_get_gpu_memory_partition: amdsmi_get_gpu_memory_partition_fn,
    amdsmi_init_gpu_event_notification: amdsmi_init_gpu_event_notification_fn,
    amdsmi_set_gpu_event_notification_mask: amdsmi_set_gpu_event_notification_mask_fn,
    amdsmi_get_gpu_event_notification: amdsmi_get_gpu_event_notification_fn,
);

/// Without these there is no GPU to read at all.
const REQUIRED: [&str; 3] = [
    "amdsmi_init",
    "amdsmi_get_socket_handles",
    "amdsmi_get_processor_handles",
];

/// AMD SMI, loaded and initialised for AMD GPUs.
pub(crate) struct Amd {
    pub(crate) api: Api,
    /// Where it was loaded from, for the log.
    pub(crate) path: String,
    /// Held, never unloaded: `api`'s pointers are into it.
    _lib: Library,
}

/// Where AMD's own tools look for the library, in order: `$ROCM_PATH/lib`,
/// then the loader's search path, then ROCm's default install.
pub(crate) fn candidates(rocm_path: Option<OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    if let Some(root) = rocm_path.filter(|r| !r.is_empty()) {
        let mut p = std::path::PathBuf::from(root);
        p.push("lib/libamd_smi.so");
        out.push(p.into_os_string());
    }
    out.push("libamd_smi.so".into());
    out.push("/opt/rocm/lib/libamd_smi.so".into());
    out
}

/// Loads the first candidate that loads, resolves its calls and
/// initialises it for AMD GPUs only. Once for the life of the process.
pub(crate) fn open() -> Result<&'static Amd, AmdUnavailable> {
    let mut tried = Vec::new();
    for path in candidates(std::env::var_os("ROCM_PATH")) {
        // SAFETY: loading runs the library's initialisers: AMD SMI's own,
        // from where AMD's tools load it. Nothing else is loaded here.
        match unsafe { Library::new(&path) } {
            Ok(lib) => return init(lib, path.to_string_lossy().into_owned()),
            Err(e) => tried.push(format!(
                "{}: {}",
                path.to_string_lossy(),
                crate::first_line(e.to_string().as_bytes(), "cannot load")
            )),
        }
    }
    Err(AmdUnavailable(format!(
        "libamd_smi.so could not be loaded ({}); is ROCm installed (or ROCM_PATH set)?",
        tried.join("; ")
    )))
}

fn init(lib: Library, path: String) -> Result<&'static Amd, AmdUnavailable> {
    let api = Api::resolve(&lib);
    let missing = api.missing();
    if let Some(m) = REQUIRED.iter().find(|r| missing.contains(r)) {
        return Err(AmdUnavailable(format!("{path} lacks {m}")));
    }
    if !missing.is_empty() {
        // An older ROCm: those readings are absent, the rest stand.
        tracing::warn!("{path} lacks {}; those readings are absent", missing.join(", "));
    }
    let Some(init) = api.amdsmi_init else {
        return Err(AmdUnavailable(format!("{path} lacks amdsmi_init")));
    };
    // SAFETY: amdsmi_init takes its flags by value; AMD GPUs only, so no
    // CPU (HSMP) driver is asked for.
    let rc = unsafe { init(abi::AMDSMI_INIT_AMD_GPUS) };
    if let Err(s) = Status::check(rc) {
        return Err(AmdUnavailable(match s.0 {
            abi::AMDSMI_STATUS_DRIVER_NOT_LOADED | abi::AMDSMI_STATUS_NO_DRV => {
                "the amdgpu kernel driver is not loaded".into()
            }
            _ => format!("amdsmi_init: {s}"),
        }));
    }
    // Leaked on purpose: handles and threads use it for the process's life.
    Ok(Box::leak(Box::new(Amd { api, path, _lib: lib })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_looked_for_where_amds_tools_look() {
        let c = candidates(Some("/opt/rocm-7.0.2".into()));
        assert_eq!(
            c,
            [
                OsString::from("/opt/rocm-7.0.2/lib/libamd_smi.so"),
                "libamd_smi.so".into(),
                "/opt/rocm/lib/libamd_smi.so".into()
            ]
        );
        // An unset or empty ROCM_PATH: the loader's path, then ROCm's default.
        assert_eq!(candidates(Some("".into())).len(), 2);
        assert_eq!(candidates(None)[0], OsString::from("libamd_smi.so"));
    }

    #[test]
    fn statuses_are_named_and_only_a_gpu_that_does_not_answer_is_lost() {
        assert_eq!(
            Status(abi::AMDSMI_STATUS_NOT_FOUND).to_string(),
            "AMDSMI_STATUS_NOT_FOUND"
        );
        assert_eq!(Status(4242).to_string(), "AMD SMI status 4242");
        assert!(Status(abi::AMDSMI_STATUS_NOT_FOUND).is_lost());
        assert!(Status(abi::AMDSMI_STATUS_DRM_ERROR).is_lost());
        for passing in [
            abi::AMDSMI_STATUS_NOT_SUPPORTED,
            abi::AMDSMI_STATUS_NO_PERM,
            abi::AMDSMI_STATUS_BUSY,
            abi::AMDSMI_STATUS_RETRY,
            abi::AMDSMI_STATUS_TIMEOUT,
            abi::AMDSMI_STATUS_FAIL_LOAD_SYMBOL,
        ] {
            assert!(!Status(passing).is_lost(), "{}", Status(passing));
        }
    }
}
