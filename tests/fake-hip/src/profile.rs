//! The GPUs a fake HIP pretends to have: a TOML profile, optionally layered
//! on another (`base = "mi300x-oam.toml"`). A layer's top-level keys replace
//! the base's, its `[gpu]` keys change the base's template (every GPU), its
//! `[[override]]`s (by `index`) add to the base's.

use std::path::Path;

use fleetop_fake_profile::Layers;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// For people reading the profile.
    #[allow(dead_code)]
    pub name: String,
    /// Devices HIP shows (0: hipInit answers hipErrorNoDevice).
    pub count: u32,
    /// hipDeviceGetPCIBusId, one per device: `0000:05:00.0`.
    pub pci_bus_ids: Vec<String>,
    /// Every device reaches every other over XGMI (peer access possible);
    /// false: peer copies are staged through host memory.
    #[serde(default)]
    pub xgmi: bool,
    /// Real seconds per virtual second when a caller waits for the GPU
    /// (FAKE_HIP_TIME_SCALE replaces it): 1 is a real GPU's pace, 0 no wait.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Filled from the `[gpu]` template and the `[[override]]`s.
    #[serde(skip)]
    pub gpus: Vec<GpuSpec>,
}

fn one() -> f64 {
    1.0
}

/// One device's rates, GB/s (1e9 B/s) and TFLOP/s.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// hipDeviceGetName.
    pub name: String,
    /// hipMalloc fails with hipErrorOutOfMemory beyond this.
    pub vram_bytes: u64,
    pub hbm_copy_gbps: f64,
    pub h2d_gbps: f64,
    pub d2h_gbps: f64,
    /// A peer copy from this device, over XGMI.
    pub peer_gbps: f64,
    /// A 16-bit GEMM (BF16 or FP16 in, FP32 accumulation); FP32 runs at an
    /// eighth of it.
    pub gemm_tflops: f64,
}

/// Reads a profile (and the bases it is layered on).
pub fn load(path: &Path) -> Result<Profile, String> {
    let mut layers = Layers::read(path)?;
    let mut p: Profile = layers.profile()?;
    p.gpus = layers.gpus(p.count)?;
    if p.pci_bus_ids.len() != p.count as usize {
        return Err(layers.here(format!("{} PCI bus ids for {} devices", p.pci_bus_ids.len(), p.count)));
    }
    let rates = |g: &GpuSpec| [g.hbm_copy_gbps, g.h2d_gbps, g.d2h_gbps, g.peer_gbps, g.gemm_tflops];
    if p.gpus.iter().flat_map(rates).any(|r| !(r > 0.0 && r.is_finite())) {
        return Err(layers.here("every rate must be a positive number"));
    }
    if !(p.time_scale >= 0.0 && p.time_scale.is_finite()) {
        return Err(layers.here("time_scale must be 0 or more"));
    }
    Ok(p)
}
