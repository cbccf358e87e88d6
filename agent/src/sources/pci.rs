//! Node checks taken once at start, from sysfs: NVIDIA GPUs on the PCI bus
//! that NVML does not list (a GPU the driver lost at boot is invisible to
//! NVML, so nothing else reports it), how many GPUs (NVIDIA's or AMD's) the
//! bus has (with no GPU library loaded, GPUs nothing reads), the GPU count
//! the node should have, and whether GPUDirect RDMA (nvidia_peermem) is
//! loaded where InfiniBand is.

use std::path::{Path, PathBuf};

use crate::proto::{NodeInfo, Sample};
use crate::sources::Sampler;
use crate::sources::kmsg::PciAddr;

/// The default sysfs root.
pub const DEFAULT_SYSFS: &str = "/sys";
/// NVIDIA's PCI vendor id.
const NVIDIA: u32 = 0x10de;
/// AMD's (ATI's) PCI vendor id for its GPUs.
const AMD: u32 = 0x1002;
/// Devices looked at, at most (a real bus has a few hundred).
const MAX_DEVICES: usize = 4096;

/// `NodeInfo.peermem` values.
pub const PEERMEM_UNKNOWN: u32 = 0;
pub const PEERMEM_NOT_LOADED: u32 = 1;
pub const PEERMEM_LOADED: u32 = 2;

/// The node checks as a `Sampler` that only describes; it goes after the
/// GPU and InfiniBand samplers, whose descriptions it compares with sysfs.
pub struct NodeChecks {
    sysfs: PathBuf,
    expect_gpus: u32,
}

impl NodeChecks {
    /// `expect_gpus`: the GPUs the node should have, 0 when not said.
    pub fn new(sysfs: impl Into<PathBuf>, expect_gpus: u32) -> Self {
        NodeChecks {
            sysfs: sysfs.into(),
            expect_gpus,
        }
    }
}

/// The bus ids (`0000:3b:00.0`, as sysfs names them) of the NVIDIA GPUs under
/// `<sysfs>/bus/pci/devices`: vendor 0x10de, class VGA (0x0300xx) or 3D
/// controller (0x0302xx). The GPU's audio function (0x0403xx) and NVSwitches
/// (bridges, 0x0680xx) are NVIDIA's too but not GPUs. Sorted.
pub fn nvidia_gpus(sysfs: &Path) -> Vec<String> {
    bus_gpus(sysfs, &[NVIDIA])
}

/// The bus ids of every GPU under `<sysfs>/bus/pci/devices`: NVIDIA's (as
/// `nvidia_gpus`) and AMD's (vendor 0x1002: VGA, 3D controller, display
/// controller 0x0380xx as the MI200s are, processing accelerator 0x1200xx
/// as the MI300s are; not its audio functions). Sorted.
pub fn all_gpus(sysfs: &Path) -> Vec<String> {
    bus_gpus(sysfs, &[NVIDIA, AMD])
}

/// The bus ids of the GPUs of `vendors`, sorted.
fn bus_gpus(sysfs: &Path, vendors: &[u32]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sysfs.join("bus/pci/devices")) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .flatten()
        .take(MAX_DEVICES)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let dir = e.path();
            let vendor = read_hex(&dir.join("vendor")).filter(|v| vendors.contains(v))?;
            let class = read_hex(&dir.join("class"))? >> 8;
            let gpu = match vendor {
                AMD => matches!(class, 0x0300 | 0x0302 | 0x0380 | 0x1200),
                _ => matches!(class, 0x0300 | 0x0302),
            };
            gpu.then_some(name)
        })
        .collect();
    found.sort();
    found
}

/// A sysfs hex attribute (`0x10de\n`).
fn read_hex(path: &Path) -> Option<u32> {
    let text = fleetop_proto::input::read_capped(path, 64).ok()?;
    let t = text.trim();
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

/// Whether a GPUDirect RDMA module is loaded: nvidia_peermem, or the older
/// nv_peer_mem that Mellanox shipped before it.
pub fn peermem_loaded(sysfs: &Path) -> bool {
    ["module/nvidia_peermem", "module/nv_peer_mem"]
        .iter()
        .any(|m| sysfs.join(m).exists())
}

impl Sampler for NodeChecks {
    fn describe(&mut self, info: &mut NodeInfo) {
        let listed: Vec<PciAddr> = info.gpus.iter().filter_map(|g| PciAddr::parse(&g.pci_bus_id)).collect();
        info.gpus_missing_pci = nvidia_gpus(&self.sysfs)
            .into_iter()
            .filter(|bus| PciAddr::parse(bus).is_none_or(|a| !listed.contains(&a)))
            .collect();
        info.gpus_on_pci = all_gpus(&self.sysfs).len() as u32;
        info.expect_gpus = self.expect_gpus;
        info.peermem = if peermem_loaded(&self.sysfs) {
            PEERMEM_LOADED
        } else if info.ib_ports.is_empty() {
            PEERMEM_UNKNOWN
        } else {
            PEERMEM_NOT_LOADED
        };
    }

    fn sample(&mut self, _now_ms: i64, _out: &mut Sample) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{GpuInfo, IbPortInfo};

    fn device(root: &Path, bus: &str, vendor: &str, class: &str) {
        let d = root.join("bus/pci/devices").join(bus);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("vendor"), format!("{vendor}\n")).expect("w");
        std::fs::write(d.join("class"), format!("{class}\n")).expect("w");
    }

    #[test]
    fn gpus_on_the_bus_that_nvml_lacks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        device(r, "0000:18:00.0", "0x10de", "0x030200");
        device(r, "0000:3b:00.0", "0x10de", "0x030200");
        device(r, "0000:3b:00.1", "0x10de", "0x040300"); // its audio function
        device(r, "0000:c8:00.0", "0x10de", "0x068000"); // an NVSwitch
        device(r, "0000:5d:00.0", "0x10de", "0x030000"); // VGA
        device(r, "0000:00:02.0", "0x8086", "0x030000"); // Intel graphics
        device(r, "0000:99:00.0", "garbage", "0x030200");
        assert_eq!(nvidia_gpus(r), ["0000:18:00.0", "0000:3b:00.0", "0000:5d:00.0"]);

        let mut info = NodeInfo::default();
        for (i, bus) in ["00000000:18:00.0", "00000000:5D:00.0"].iter().enumerate() {
            info.gpus.push(GpuInfo {
                index: i as u32,
                pci_bus_id: bus.to_string(),
                ..Default::default()
            });
        }
        NodeChecks::new(r, 8).describe(&mut info);
        assert_eq!(info.gpus_missing_pci, ["0000:3b:00.0"]);
        assert_eq!(info.gpus_on_pci, 3, "NVIDIA's three");
        // AMD's: an MI300X (a processing accelerator), an MI250X (a
        // display controller); not its audio function.
        device(r, "0000:0c:00.0", "0x1002", "0x120000");
        device(r, "0000:0d:00.0", "0x1002", "0x038000");
        device(r, "0000:0d:00.1", "0x1002", "0x040300");
        assert_eq!(
            all_gpus(r),
            [
                "0000:0c:00.0",
                "0000:0d:00.0",
                "0000:18:00.0",
                "0000:3b:00.0",
                "0000:5d:00.0"
            ]
        );
        assert_eq!(nvidia_gpus(r).len(), 3, "NVIDIA's alone");
        assert_eq!(info.expect_gpus, 8);
        assert_eq!(info.peermem, PEERMEM_UNKNOWN, "no InfiniBand");
    }

    #[test]
    fn peermem_matters_where_infiniband_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut info = NodeInfo::default();
        info.ib_ports.push(IbPortInfo {
            device: "mlx5_0".into(),
            port: 1,
            link_layer: "InfiniBand".into(),
        });
        NodeChecks::new(dir.path(), 0).describe(&mut info);
        assert_eq!(info.peermem, PEERMEM_NOT_LOADED);
        assert!(info.gpus_missing_pci.is_empty(), "no sysfs tree: nothing missing");
        std::fs::create_dir_all(dir.path().join("module/nvidia_peermem")).expect("mkdir");
        NodeChecks::new(dir.path(), 0).describe(&mut info);
        assert_eq!(info.peermem, PEERMEM_LOADED);
    }
}
