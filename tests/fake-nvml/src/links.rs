//! The GPU's links: its NVLink fabric registration and each NVLink's
//! state and far end.

use crate::*;

/// What every version of nvmlGpuFabricInfo says: (cluster UUID, status,
/// clique id, state, health summary); `None`: no fabric (NOT_SUPPORTED).
fn fabric(f: &Fake, g: u32) -> Option<([u8; 16], nvmlReturn_t, u32, u8, u8)> {
    let s = f.spec(g);
    let state = s.fabric_state?;
    let completed = state == profile::FabricState::Completed;
    // Status and cluster are only meaningful once registration completed.
    let status = if completed { s.fabric_status } else { SUCCESS };
    let mut uuid = [0u8; 16];
    if completed {
        uuid = *b"fake-nvml-clustr";
    }
    let summary = match (completed, status) {
        (true, 0) => NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
        (true, _) => NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY,
        (false, _) => NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED,
    } as u8;
    Some((uuid, status, u32::from(completed) * 0x7fff, state.nvml(), summary))
}

/// Deprecated (no version field), still exported by current drivers.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuFabricInfo(d: nvmlDevice_t, info: *mut nvmlGpuFabricInfo_t) -> nvmlReturn_t {
    with("nvmlDeviceGetGpuFabricInfo", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        let Some((uuid, status, clique, state, _)) = fabric(f, g) else {
            return NOT_SUPPORTED;
        };
        if info.is_null() {
            return INVALID;
        }
        // SAFETY: non-null, the caller's struct; zeroed first so that its
        // padding (after the one-byte state) reads 0, as it does from NVML
        // (pynvml declares the state as a 4-byte c_uint).
        unsafe {
            std::ptr::write_bytes(info, 0, 1);
            (*info).clusterUuid = uuid;
            (*info).status = status;
            (*info).cliqueId = clique;
            (*info).state = state;
        }
        SUCCESS
    })
}

/// The versioned call: nvmlGpuFabricInfo_v2 (size 36) or _v3 (size 40), the
/// version in the struct's first field (its size, the version in the top
/// byte); the caller's struct may be the smaller one, so nothing past the
/// version it names is written.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuFabricInfoV(d: nvmlDevice_t, info: *mut nvmlGpuFabricInfoV_t) -> nvmlReturn_t {
    const V2: c_uint = std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as c_uint | (2 << 24);
    const V3: c_uint = std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() as c_uint | (3 << 24);
    with("nvmlDeviceGetGpuFabricInfoV", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if info.is_null() {
            return INVALID;
        }
        // SAFETY: non-null; every version begins with the version field.
        let version = unsafe { *(info as *const c_uint) };
        if version != V2 && version != V3 {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        let Some((uuid, status, clique, state, summary)) = fabric(f, g) else {
            return NOT_SUPPORTED;
        };
        // Zeroed first, padding included (see nvmlDeviceGetGpuFabricInfo),
        // then field by field: v2 and v3 share every field but the last.
        let v2 = info as *mut nvmlGpuFabricInfo_v2_t;
        // SAFETY: non-null, and the caller's version says which struct it
        // is; only that struct's bytes are written.
        unsafe {
            if version == V2 {
                std::ptr::write_bytes(v2, 0, 1);
            } else {
                std::ptr::write_bytes(info, 0, 1);
                (*info).healthSummary = summary;
            }
            (*v2).version = version;
            (*v2).clusterUuid = uuid;
            (*v2).status = status;
            (*v2).cliqueId = clique;
            (*v2).state = state;
            (*v2).healthMask = 0;
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkState(d: nvmlDevice_t, link: c_uint, st: *mut nvmlEnableState_t) -> nvmlReturn_t {
    with("nvmlDeviceGetNvLinkState", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if link >= f.spec(g).nvlinks {
            return INVALID;
        }
        // Trained links, asleep or not, are enabled; only an inactive one is not.
        out!(st, u32::from(f.link_state(g, link) != 0));
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    d: nvmlDevice_t,
    link: c_uint,
    p: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    with("nvmlDeviceGetNvLinkRemotePciInfo_v2", Some(d), |f, d| {
        let Some(g) = gpu_of(d) else { return NOT_SUPPORTED };
        if link >= f.spec(g).nvlinks {
            return INVALID;
        }
        // On an HGX board every link goes to one of the NVSwitches.
        let sw = link % 4;
        out!(p, pci_info(&format!("00000000:{:02X}:00.0", 0xc0 + sw)));
        SUCCESS
    })
}
