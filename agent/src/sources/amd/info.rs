//! What does not change while the agent runs, read once per GPU at start:
//! identity, limits, partition modes, firmware, the XGMI links. Every text
//! the library gives is made printable and bounded; a call that fails
//! leaves its field empty or 0 ("unknown"), never a guess.

use fleetop_amdsmi_abi as abi;
use fleetop_proto::input::printable;

use crate::proto::{Firmware, GpuInfo, NvLinkInfo};

use super::library::{Amd, Handle};

/// Firmware blocks by `amdsmi_fw_block_t` number, as AMD names them
/// (`AMDSMI_FW_ID_<name>`, amdsmi 7.0.2).
const FW_NAMES: [&str; 80] = [
    "",
    "SMU",
    "CP_CE",
    "CP_PFP",
    "CP_ME",
    "CP_MEC_JT1",
    "CP_MEC_JT2",
    "CP_MEC1",
    "CP_MEC2",
    "RLC",
    "SDMA0",
    "SDMA1",
    "SDMA2",
    "SDMA3",
    "SDMA4",
    "SDMA5",
    "SDMA6",
    "SDMA7",
    "VCN",
    "UVD",
    "VCE",
    "ISP",
    "DMCU_ERAM",
    "DMCU_ISR",
    "RLC_RESTORE_LIST_GPM_MEM",
    "RLC_RESTORE_LIST_SRM_MEM",
    "RLC_RESTORE_LIST_CNTL",
    "RLC_V",
    "MMSCH",
    "PSP_SYSDRV",
    "PSP_SOSDRV",
    "PSP_TOC",
    "PSP_KEYDB",
    "DFC",
    "PSP_SPL",
    "DRV_CAP",
    "MC",
    "PSP_BL",
    "CP_PM4",
    "RLC_P",
    "SEC_POLICY_STAGE2",
    "REG_ACCESS_WHITELIST",
    "IMU_DRAM",
    "IMU_IRAM",
    "SDMA_TH0",
    "SDMA_TH1",
    "CP_MES",
    "MES_KIQ",
    "MES_STACK",
    "MES_THREAD1",
    "MES_THREAD1_STACK",
    "RLX6",
    "RLX6_DRAM_BOOT",
    "RS64_ME",
    "RS64_ME_P0_DATA",
    "RS64_ME_P1_DATA",
    "RS64_PFP",
    "RS64_PFP_P0_DATA",
    "RS64_PFP_P1_DATA",
    "RS64_MEC",
    "RS64_MEC_P0_DATA",
    "RS64_MEC_P1_DATA",
    "RS64_MEC_P2_DATA",
    "RS64_MEC_P3_DATA",
    "PPTABLE",
    "PSP_SOC",
    "PSP_DBG",
    "PSP_INTF",
    "RLX6_CORE1",
    "RLX6_DRAM_BOOT_CORE1",
    "RLCV_LX7",
    "RLC_SAVE_RESTORE_LIST",
    "ASD",
    "TA_RAS",
    "TA_XGMI",
    "RLC_SRLG",
    "RLC_SRLS",
    "PM",
    "DMCU",
    "PLDM_BUNDLE",
];

/// A firmware version as AMD's `amdsmi` package (and so amd-smi) writes
/// it: the PSP, TA and multimedia blocks as hex byte pairs
/// ("00.37.2E.4C"), PM and the PLDM bundle as decimal byte pairs
/// ("00.85.107.00"), the rest as the plain number. The C library gives a
/// number that has lost those blocks' leading zeros; the Python package
/// puts them back so, and an SRE compares with what amd-smi prints.
pub(crate) fn fw_version(id: u32, v: u64) -> String {
    let hex_pairs = matches!(
        id,
        abi::AMDSMI_FW_ID_PSP_SOSDRV
            | abi::AMDSMI_FW_ID_TA_RAS
            | abi::AMDSMI_FW_ID_TA_XGMI
            | abi::AMDSMI_FW_ID_VCN
            | 19
            | 20
    );
    let dec_pairs = matches!(id, abi::AMDSMI_FW_ID_PM | abi::AMDSMI_FW_ID_PLDM_BUNDLE);
    if !(hex_pairs || dec_pairs) {
        return v.to_string();
    }
    let hex = format!("{v:08x}");
    // Pairs from the left, as Python's re.findall('..?'): an odd length
    // leaves one digit last.
    let pairs = hex
        .as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).into_owned());
    let out: Vec<String> = if hex_pairs {
        pairs.collect()
    } else {
        pairs
            .map(|p| format!("{:02}", u8::from_str_radix(&p, 16).unwrap_or(0)))
            .collect()
    };
    out.join(".").to_uppercase()
}

/// The firmware list, in the library's order.
fn firmware(amd: &Amd, h: Handle) -> Vec<Firmware> {
    let Ok(fw) = amd.fw_info(h) else {
        return Vec::new();
    };
    let n = usize::from(fw.num_fw_info).min(fw.fw_info_list.len());
    fw.fw_info_list[..n]
        .iter()
        .map(|f| Firmware {
            name: FW_NAMES
                .get(f.fw_id as usize)
                .filter(|n| !n.is_empty())
                .map_or_else(|| format!("FW_{}", f.fw_id), |n| (*n).to_string()),
            // Made of digits and dots: printable and short by construction.
            version: fw_version(f.fw_id, f.fw_version),
        })
        .collect()
}

/// °C as the wire holds it; a refused call or a value out of range is 0
/// (unknown).
fn degrees(r: Result<i64, super::library::Status>) -> u32 {
    r.ok().and_then(|t| u32::try_from(t).ok()).unwrap_or(0)
}

/// All-ones is AMD SMI's "not supported": 0 (unknown) on the wire.
pub(crate) fn known32(v: u32) -> Option<u32> {
    (v != u32::MAX).then_some(v)
}

/// The static description of one processor. `links`: the XGMI links
/// listed (see `xgmi_links`), each with its peer.
pub(crate) fn describe(amd: &Amd, index: u32, h: Handle, links: &[u32]) -> GpuInfo {
    use abi::{AMDSMI_TEMP_CRITICAL as CRIT, AMDSMI_TEMP_EMERGENCY as EMERG};
    let text = |s: &[std::ffi::c_char], max| printable(&abi::c_str(s), max);
    let asic = amd.asic_info(h).ok();
    // The board's part number and serial, as AMD's exporter labels them.
    let board = amd.board_info(h).ok();
    let board_text = |f: fn(&abi::amdsmi_board_info_t) -> &[std::ffi::c_char]| {
        board.as_deref().map(|b| text(f(b), 64)).unwrap_or_default()
    };
    let hotspot = abi::AMDSMI_TEMPERATURE_TYPE_HOTSPOT;
    let vram = abi::AMDSMI_TEMPERATURE_TYPE_VRAM;
    let gfx = amd.clock(h, abi::AMDSMI_CLK_TYPE_GFX).ok();
    let mem = amd.clock(h, abi::AMDSMI_CLK_TYPE_MEM).ok();
    let pcie = amd.pcie_info(h).ok();
    let peers = amd.link_metrics(h).ok();
    let peer = |k: u32| {
        let m = peers.as_ref()?;
        let n = (m.num_links as usize).min(m.links.len());
        m.links[..n].get(k as usize).map(|l| l.bdf.to_bus_id())
    };
    GpuInfo {
        index,
        vendor: "AMD".into(),
        uuid: amd.uuid(h).map(|u| printable(&u, 64)).unwrap_or_default(),
        model: asic.as_ref().map(|a| text(&a.market_name, 96)).unwrap_or_default(),
        pci_bus_id: amd.bdf(h).map(|b| b.to_bus_id()).unwrap_or_default(),
        mem_total_bytes: amd.vram_total(h).unwrap_or(0),
        // µW.
        power_limit_mw: amd
            .power_cap(h)
            .map(|c| u32::try_from(c.power_cap / 1000).unwrap_or(u32::MAX))
            .unwrap_or(0),
        max_sm_clock_mhz: gfx.and_then(|c| known32(c.max_clk)).unwrap_or(0),
        max_mem_clock_mhz: mem.and_then(|c| known32(c.max_clk)).unwrap_or(0),
        // The junction's critical limit is where the firmware slows the
        // GPU down; its emergency limit where it shuts it off.
        slowdown_temp_c: degrees(amd.temperature(h, hotspot, CRIT)),
        shutdown_temp_c: degrees(amd.temperature(h, hotspot, EMERG)),
        hbm_slowdown_temp_c: degrees(amd.temperature(h, vram, CRIT)),
        hbm_shutdown_temp_c: degrees(amd.temperature(h, vram, EMERG)),
        vbios_version: amd.vbios_info(h).map(|v| text(&v.version, 64)).unwrap_or_default(),
        pcie_max_gen: pcie
            .and_then(|p| known32(p.pcie_static.max_pcie_interface_version))
            .unwrap_or(0),
        pcie_max_width: pcie
            .map(|p| p.pcie_static.max_pcie_width)
            .filter(|&w| w != u16::MAX)
            .map_or(0, u32::from),
        nvlinks: links
            .iter()
            .map(|&k| NvLinkInfo {
                link: k,
                peer_pci_bus_id: peer(k).unwrap_or_default(),
                // AMD tells a link unused by design (DISABLE, not listed)
                // from one that is down: a down link is a fault, at start too.
                inactive_at_start: false,
            })
            .collect(),
        compute_partition: amd.compute_partition(h).map(|p| printable(&p, 16)).unwrap_or_default(),
        memory_partition: amd.memory_partition(h).map(|p| printable(&p, 16)).unwrap_or_default(),
        partition_id: amd
            .kfd_info(h)
            .ok()
            .and_then(|k| known32(k.current_partition_id))
            .unwrap_or(0),
        firmware: firmware(amd, h),
        board_part_number: board_text(|b| &b.model_number),
        serial_number: board_text(|b| &b.product_serial),
    }
}

/// The XGMI links a processor has: those AMD SMI reports up or down at
/// start, by link number. A link it calls DISABLE is unused by design (the
/// eighth of an 8-GPU MI300X board) and not listed.
pub(crate) fn xgmi_links(amd: &Amd, h: Handle) -> Vec<u32> {
    let Ok(st) = amd.xgmi_link_status(h) else {
        return Vec::new();
    };
    let n = (st.total_links as usize).min(st.status.len());
    (0..n as u32)
        .filter(|&k| st.status[k as usize] != abi::AMDSMI_XGMI_LINK_DISABLE)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firmware_versions_read_as_amd_smi_prints_them() {
        assert_eq!(fw_version(abi::AMDSMI_FW_ID_PM, 0x0055_6b00), "00.85.107.00");
        assert_eq!(fw_version(abi::AMDSMI_FW_ID_PSP_SOSDRV, 0x0037_2e4c), "00.37.2E.4C");
        assert_eq!(fw_version(abi::AMDSMI_FW_ID_TA_RAS, 0x1b00_0257), "1B.00.02.57");
        assert_eq!(fw_version(abi::AMDSMI_FW_ID_RLC, 17), "17");
        // Past 32 bits: pairs from the left, an odd digit last.
        assert_eq!(fw_version(abi::AMDSMI_FW_ID_VCN, 0x1_0000_0000), "10.00.00.00.0");
        assert_eq!(FW_NAMES[abi::AMDSMI_FW_ID_PM as usize], "PM");
        assert_eq!(FW_NAMES[abi::AMDSMI_FW_ID_TA_XGMI as usize], "TA_XGMI");
        assert_eq!(FW_NAMES[abi::AMDSMI_FW_ID_PLDM_BUNDLE as usize], "PLDM_BUNDLE");
    }
}
