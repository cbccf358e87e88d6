//! The GPU's health bits read each sample: PCIe link generation and width,
//! persistence mode, and its registration with the NVLink fabric (a direct
//! sys-layer call, as nvml-wrapper does not make it).

use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_SUCCESS;

use crate::proto::GpuSample;

use super::reader::GpuReader;

impl GpuReader {
    /// Link, persistence and fabric: four calls that read driver state
    /// (no GPU work, microseconds each), so taken every sample rather
    /// than cached. Each one that fails leaves its field 0 (unknown);
    /// the sample stands.
    pub(super) fn link_and_fabric(&self, d: &Device, s: &mut GpuSample) {
        s.pcie_gen = self
            .call("nvmlDeviceGetCurrPcieLinkGeneration", || d.current_pcie_link_gen())
            .unwrap_or(0);
        s.pcie_width = self
            .call("nvmlDeviceGetCurrPcieLinkWidth", || d.current_pcie_link_width())
            .unwrap_or(0);
        s.persistence = match self.call("nvmlDeviceGetPersistenceMode", || d.is_in_persistent_mode()) {
            Ok(true) => 2,
            Ok(false) => 1,
            Err(_) => 0,
        };
        if let Some((state, status)) = self.call("nvmlDeviceGetGpuFabricInfoV", || self.fabric(d)) {
            s.fabric_state = state;
            s.fabric_status = status;
        }
    }

    /// The GPU's registration with the NVLink fabric (NVSwitch systems), as
    /// the wire carries it: (nvmlGpuFabricState_t + 1, and once completed
    /// its nvmlReturn_t result). `None` (not reported) where the driver has
    /// no such call or answers NOT_SUPPORTED or any error.
    ///
    /// nvmlDeviceGetGpuFabricInfoV with the v2 struct, the first version
    /// that call took (drivers that know later ones still accept it, and
    /// v3 adds only a health summary the wire does not carry); where the
    /// driver predates the V call, the deprecated nvmlDeviceGetGpuFabricInfo.
    fn fabric(&self, d: &Device) -> Option<(u32, u32)> {
        use nvml_wrapper_sys::bindings::{
            NVML_GPU_FABRIC_STATE_COMPLETED, nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v2_t,
        };
        let lib = self.nvml.lib();
        let (state, status) = if let Ok(sym) = lib.nvmlDeviceGetGpuFabricInfoV.as_ref() {
            // SAFETY: plain old data; all-zero is a valid value.
            let mut f: nvmlGpuFabricInfo_v2_t = unsafe { std::mem::zeroed() };
            // nvmlGpuFabricInfo_v2: the struct's size, version 2 in the top byte.
            f.version = std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as u32 | (2 << 24);
            // nvmlGpuFabricInfoV_t is the bindings' latest (v3), a larger
            // struct with the same leading fields: NVML reads `version` and
            // writes no more than the v2 struct it names.
            let p = (&mut f as *mut nvmlGpuFabricInfo_v2_t).cast();
            // SAFETY: a valid device handle and a versioned struct NVML fills.
            if unsafe { sym(d.handle(), p) } != nvmlReturn_enum_NVML_SUCCESS {
                return None;
            }
            (f.state, f.status)
        } else {
            let sym = lib.nvmlDeviceGetGpuFabricInfo.as_ref().ok()?;
            // SAFETY: plain old data; all-zero is a valid value.
            let mut f: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: a valid device handle and the struct NVML fills.
            if unsafe { sym(d.handle(), &mut f) } != nvmlReturn_enum_NVML_SUCCESS {
                return None;
            }
            (f.state, f.status)
        };
        let completed = u32::from(state) == NVML_GPU_FABRIC_STATE_COMPLETED;
        Some((u32::from(state) + 1, if completed { status } else { 0 }))
    }
}
