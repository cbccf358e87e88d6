//! Bits of `GpuSample.absent`: which readings a GPU did not give. A field
//! whose bit is set carries 0 on the wire, and 0 is then not a reading.

pub const UTIL: u32 = 1 << 0;
pub const MEM_UTIL: u32 = 1 << 1;
pub const TEMP: u32 = 1 << 2;
pub const HBM_TEMP: u32 = 1 << 3;
pub const POWER: u32 = 1 << 4;
pub const ENERGY: u32 = 1 << 5;
pub const SM_CLOCK: u32 = 1 << 6;
pub const MEM_CLOCK: u32 = 1 << 7;
pub const THROTTLE: u32 = 1 << 8;
pub const PCIE_THROUGHPUT: u32 = 1 << 9;
pub const PCIE_REPLAY: u32 = 1 << 10;
pub const ECC: u32 = 1 << 11;
pub const REMAPPED_ROWS: u32 = 1 << 12;
pub const PROCESSES: u32 = 1 << 13;
pub const MEM_USED: u32 = 1 << 14;
pub const POWER_LIMIT: u32 = 1 << 15;
/// The link states (nvlink_state, nvlink_down_mask) were not read: an
/// empty nvlink_state then says nothing, not "every link up" (AMD's XGMI
/// link status; NVML gives a state per link or counts it down).
pub const LINKS: u32 = 1 << 16;
