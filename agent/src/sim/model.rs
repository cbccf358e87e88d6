//! The GPU models the simulation knows and the figures of each (memory,
//! power, clocks, temperatures, links, PCIe, VBIOS, vendor). Apart from the
//! readings drawn from them: a table of hardware, not behaviour.

/// GPU models the simulation knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// NVIDIA H100 80GB HBM3 (SXM5, 700 W, 18 NVLink4 links, NDR InfiniBand).
    H100,
    /// NVIDIA H200 141GB HBM3e (SXM, 700 W, 18 NVLink4 links, NDR InfiniBand).
    H200,
    /// NVIDIA A100-SXM4-80GB (400 W, 12 NVLink3 links, HDR InfiniBand).
    A100,
    /// AMD Instinct MI300X (OAM, 192 GB HBM3, 750 W, an XGMI mesh of 7
    /// links to the node's other GPUs, SPX/NPS1, NDR InfiniBand).
    Mi300x,
}

pub(super) struct ModelSpec {
    pub(super) name: &'static str,
    pub(super) mem_bytes: u64,
    pub(super) power_limit_w: u32,
    pub(super) idle_power_w: u32,
    pub(super) max_sm_mhz: u32,
    pub(super) idle_sm_mhz: u32,
    pub(super) max_mem_mhz: u32,
    pub(super) slowdown_c: u32,
    pub(super) shutdown_c: u32,
    pub(super) nvlinks: u32,
    /// Data rate of one link in one direction, GB/s.
    pub(super) nvlink_gbps: f64,
    pub(super) ib_rate_gbps: u32,
    pub(super) ib_rate_text: &'static str,
    /// The PCIe link the GPU trains to in its slot: generation and lanes.
    pub(super) pcie_gen: u32,
    pub(super) pcie_width: u32,
    pub(super) vbios: &'static str,
    /// The wire's vendor: "NVIDIA" or "AMD".
    pub(super) vendor: &'static str,
    /// AMD: the HBM (VRAM sensor) slowdown and shutdown temperatures (0:
    /// none given, as NVML gives none).
    pub(super) hbm_slowdown_c: u32,
    pub(super) hbm_shutdown_c: u32,
}

impl ModelSpec {
    pub(super) fn amd(&self) -> bool {
        self.vendor == "AMD"
    }
}

impl Model {
    pub(super) fn spec(self) -> ModelSpec {
        match self {
            Model::H100 => ModelSpec {
                name: "NVIDIA H100 80GB HBM3",
                mem_bytes: 81_559 * 1024 * 1024,
                power_limit_w: 700,
                idle_power_w: 72,
                max_sm_mhz: 1980,
                idle_sm_mhz: 345,
                max_mem_mhz: 2619,
                slowdown_c: 87,
                shutdown_c: 92,
                nvlinks: 18,
                nvlink_gbps: 25.0,
                ib_rate_gbps: 400,
                ib_rate_text: "4X NDR",
                pcie_gen: 5,
                pcie_width: 16,
                vbios: "96.00.99.00.01",
                vendor: "NVIDIA",
                hbm_slowdown_c: 0,
                hbm_shutdown_c: 0,
            },
            Model::H200 => ModelSpec {
                name: "NVIDIA H200",
                mem_bytes: 143_771 * 1024 * 1024,
                power_limit_w: 700,
                idle_power_w: 76,
                max_sm_mhz: 1980,
                idle_sm_mhz: 345,
                max_mem_mhz: 3201,
                slowdown_c: 87,
                shutdown_c: 92,
                nvlinks: 18,
                nvlink_gbps: 25.0,
                ib_rate_gbps: 400,
                ib_rate_text: "4X NDR",
                pcie_gen: 5,
                pcie_width: 16,
                vbios: "96.00.A5.00.01",
                vendor: "NVIDIA",
                hbm_slowdown_c: 0,
                hbm_shutdown_c: 0,
            },
            Model::A100 => ModelSpec {
                name: "NVIDIA A100-SXM4-80GB",
                mem_bytes: 81_920 * 1024 * 1024,
                power_limit_w: 400,
                idle_power_w: 60,
                max_sm_mhz: 1410,
                idle_sm_mhz: 210,
                max_mem_mhz: 1593,
                slowdown_c: 90,
                shutdown_c: 95,
                nvlinks: 12,
                nvlink_gbps: 25.0,
                ib_rate_gbps: 200,
                ib_rate_text: "4X HDR",
                pcie_gen: 4,
                pcie_width: 16,
                vbios: "92.00.45.00.06",
                vendor: "NVIDIA",
                hbm_slowdown_c: 0,
                hbm_shutdown_c: 0,
            },
            // Temperatures: the junction (hotspot) and HBM limits as AMD SMI
            // gives them for an MI300X; the links go to the 7 other GPUs of
            // an 8-GPU OAM baseboard, 64 GB/s each way.
            Model::Mi300x => ModelSpec {
                name: "AMD Instinct MI300X",
                mem_bytes: 196_592 * 1024 * 1024,
                power_limit_w: 750,
                idle_power_w: 140,
                max_sm_mhz: 2100,
                idle_sm_mhz: 150,
                max_mem_mhz: 1300,
                slowdown_c: 100,
                shutdown_c: 110,
                nvlinks: 7,
                nvlink_gbps: 64.0,
                ib_rate_gbps: 400,
                ib_rate_text: "4X NDR",
                pcie_gen: 5,
                pcie_width: 16,
                vbios: "113-M3000100-102",
                vendor: "AMD",
                hbm_slowdown_c: 95,
                hbm_shutdown_c: 105,
            },
        }
    }
}
