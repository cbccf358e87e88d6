//! The simulated node as a `Sampler`: its description (GPUs, ports,
//! driver) and each whole sample (host, GPUs, SXids, ports), and the hang
//! scenario. Apart from the readings themselves (`gpu`, `ib`): this is how
//! the collector sees the node.

use super::{Scenario, SimNode, mix, noise};
use crate::proto::{Firmware, GpuInfo, HostSample, IbPortInfo, NodeInfo, NvLinkInfo, Sample, SxidEvent};
use crate::sources::Sampler;

impl Sampler for SimNode {
    fn describe(&mut self, info: &mut NodeInfo) {
        let c = &self.cfg;
        let sp = &self.spec;
        info.hostname = c.hostname.clone();
        info.backend = format!("sim:{}", c.scenario.name());
        let old = c.scenario == Scenario::OldDriver;
        let amd = sp.amd();
        // AMD: amdgpu's version, and no CUDA.
        info.driver_version = match (amd, old) {
            (false, false) => "570.172.08",
            (false, true) => "535.161.08",
            (true, false) => "6.10.5",
            (true, true) => "6.8.5",
        }
        .into();
        info.cuda_version = if amd { "" } else { "12.8" }.into();
        if c.scenario == Scenario::GpuMissing {
            // The last GPU: the kernel sees it, NVML does not.
            info.expect_gpus = c.gpus;
            info.gpus_missing_pci.push(self.bus(c.gpus.saturating_sub(1)));
        }
        if c.ib_ports > 0 {
            info.peermem = if c.scenario == Scenario::NoPeermem { 1 } else { 2 };
        }
        for g in 0..self.listed_gpus() {
            let bus = |i: u32| self.bus(i);
            // NVIDIA's links go to the NVSwitches, as on an HGX board; AMD's
            // XGMI links to each other GPU of the node, as on an OAM board.
            let peer = |l: u32| {
                if amd {
                    bus((g + 1 + l) % c.gpus.max(1))
                } else {
                    format!("00000000:{:02X}:00.0", 0xA0 + l % 4)
                }
            };
            info.gpus.push(GpuInfo {
                index: g,
                uuid: format!(
                    "GPU-{:08x}-{:04x}-sim0-{:012x}",
                    mix(c.seed) as u32,
                    g,
                    mix(c.seed ^ u64::from(g)) >> 16
                ),
                model: sp.name.into(),
                pci_bus_id: bus(g),
                mem_total_bytes: sp.mem_bytes,
                power_limit_mw: sp.power_limit_w * 1000,
                max_sm_clock_mhz: sp.max_sm_mhz,
                max_mem_clock_mhz: sp.max_mem_mhz,
                slowdown_temp_c: sp.slowdown_c,
                shutdown_temp_c: sp.shutdown_c,
                vbios_version: match (amd, old) {
                    (false, true) => "96.00.61.00.01",
                    (true, true) => "113-M3000100-100",
                    _ => sp.vbios,
                }
                .into(),
                pcie_max_gen: sp.pcie_gen,
                pcie_max_width: sp.pcie_width,
                nvlinks: (0..self.links())
                    .map(|l| NvLinkInfo {
                        link: l,
                        peer_pci_bus_id: peer(l),
                        inactive_at_start: false,
                    })
                    .collect(),
                vendor: sp.vendor.into(),
                // AMD: one partition of the whole GPU (SPX/NPS1), AMD SMI's
                // firmware blocks, its HBM limits.
                compute_partition: if amd { "SPX" } else { "" }.into(),
                memory_partition: if amd { "NPS1" } else { "" }.into(),
                partition_id: 0,
                firmware: if amd {
                    [
                        ("PM", "00.85.107.00"),
                        ("PSP_SOSDRV", "00.37.2E.4C"),
                        ("TA_RAS", "1B.00.01.3C"),
                    ]
                    .into_iter()
                    .map(|(name, version)| Firmware {
                        name: name.into(),
                        version: version.into(),
                    })
                    .collect()
                } else {
                    Vec::new()
                },
                hbm_slowdown_temp_c: sp.hbm_slowdown_c,
                hbm_shutdown_temp_c: sp.hbm_shutdown_c,
                // AMD: the board's part number and serial (AMD SMI's board
                // information), as AMD's exporter labels them.
                board_part_number: if amd { "102-G30211-0C" } else { "" }.into(),
                serial_number: if amd {
                    format!("{:016X}", mix(c.seed ^ 0xb0a2d ^ u64::from(g)))
                } else {
                    String::new()
                },
            });
        }
        for p in 0..c.ib_ports {
            info.ib_ports.push(IbPortInfo {
                device: format!("mlx5_{p}"),
                port: 1,
                link_layer: "InfiniBand".into(),
            });
        }
        info.gpu_backend_note = format!(
            "simulated {} x{} ({} Gb/s {})",
            sp.name, c.gpus, sp.ib_rate_gbps, sp.ib_rate_text
        );
    }

    fn sample(&mut self, now_ms: i64, out: &mut Sample) {
        let c = &self.cfg;
        let busy = !matches!(c.scenario, Scenario::Quiet | Scenario::Idle);
        let step = self.step(now_ms);
        out.host = Some(HostSample {
            cpu_permille: if busy {
                (400.0 + 200.0 * noise(c.seed, 999, step, 20)) as u32
            } else {
                (10.0 + 20.0 * noise(c.seed, 999, step, 20)) as u32
            },
            mem_used_bytes: if busy { 900 << 30 } else { 60 << 30 },
            mem_total_bytes: 2048 << 30,
            load1_x100: if busy { 9_600 } else { 40 },
            uptime_s: 3_000_000 + ((now_ms - c.start_ms).max(0) / 1000) as u64,
        });
        out.gpus.reserve_exact(c.gpus as usize);
        for g in 0..self.listed_gpus() {
            out.gpus.push(self.gpu_sample(g, now_ms));
        }
        if c.scenario == Scenario::SxidFatal && self.first_after_onset(now_ms) {
            out.sxids.push(SxidEvent {
                sxid: 20034,
                time_ms: now_ms,
                switch_pci: "0000:c8:00.0".into(),
                fatal: true,
                text: "Link 30 LTSSM Fault Up".into(),
            });
        }
        out.ib_ports.reserve_exact(c.ib_ports as usize);
        for p in 0..c.ib_ports {
            out.ib_ports.push(self.ib_sample(p, now_ms));
        }
        self.last_ms = Some(now_ms);
    }

    fn is_hung(&self, now_ms: i64) -> bool {
        self.cfg.scenario == Scenario::Hang && self.problem_active(now_ms)
    }

    /// Only arithmetic: a simulated hang is a missing sample, never a wait.
    fn blocks(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::ONSET_MS;
    use crate::sim::tests::node;

    #[test]
    fn hang_stops_sampling_after_onset() {
        let n = node(Scenario::Hang, 1);
        assert!(!n.is_hung(ONSET_MS - 1));
        assert!(n.is_hung(ONSET_MS));
    }
}
