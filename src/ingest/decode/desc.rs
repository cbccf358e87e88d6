//! An agent's description of its node (`NodeInfo`), decoded once: what
//! does not change while the agent runs, its text made printable.

use std::sync::Arc;

use fleetop_proto::pb;

use super::{exact, nz, pcie_link, text};
use crate::model::sample::{
    FaultRecord, Firmware, GpuDesc, IbPortDesc, NodeDesc, NodeHealth, NvLinkDesc, Partition, Vendor,
};

/// An agent's description of its node.
pub fn node_desc(info: pb::NodeInfo) -> NodeDesc {
    // What a node's NVLinks connect to is a few NVSwitches, named on every
    // link of every GPU (144 times on an HGX H100): one copy of each name.
    let mut peers: Vec<Arc<str>> = Vec::new();
    let desc = NodeDesc {
        hostname: info.hostname,
        agent_version: info.agent_version,
        backend: info.backend,
        driver_version: text(info.driver_version),
        cuda_version: text(info.cuda_version),
        interval_ms: nz(i64::from(info.sample_interval_ms)).unwrap_or(1000),
        gpus: exact(info.gpus.into_iter().map(|g| gpu_desc(g, &mut peers)).collect()),
        ib_ports: exact(
            info.ib_ports
                .into_iter()
                .map(|p| IbPortDesc {
                    device: p.device,
                    port: p.port,
                    link_layer: p.link_layer,
                })
                .collect(),
        ),
        gpu_note: text(info.gpu_backend_note),
        instance: info.agent_instance,
        health: NodeHealth {
            gpus_missing_pci: info.gpus_missing_pci,
            expect_gpus: nz(info.expect_gpus),
            gpus_on_pci: nz(info.gpus_on_pci),
            peermem: match info.peermem {
                1 => Some(false),
                2 => Some(true),
                _ => None,
            },
            fault_journal: info
                .fault_journal
                .into_iter()
                .map(|r| FaultRecord {
                    gpu_uuid: r.gpu_uuid,
                    kind: r.kind,
                    code: r.code,
                    time_ms: r.time_ms,
                    boot_id: text(r.boot_id),
                })
                .collect(),
            boot_id: text(info.boot_id),
            machine_id: text(info.machine_id),
            // On the agent's clock here: `Stream::info` moves them to the console's.
            burn_ins: info
                .burn_ins
                .into_iter()
                .map(|r| super::burnin::burn_in(r, 0))
                .collect(),
        },
    };
    desc.printable()
}

/// `name` as the copy in `names`, added there if it is new.
fn shared_name(names: &mut Vec<Arc<str>>, name: String) -> Arc<str> {
    if let Some(n) = names.iter().find(|n| n.as_ref() == name.as_str()) {
        return n.clone();
    }
    let n: Arc<str> = name.into();
    names.push(n.clone());
    n
}

fn gpu_desc(g: pb::GpuInfo, peers: &mut Vec<Arc<str>>) -> GpuDesc {
    GpuDesc {
        index: g.index,
        uuid: g.uuid,
        model: g.model,
        pci_bus_id: g.pci_bus_id,
        mem_total_bytes: nz(g.mem_total_bytes),
        power_limit_w: nz(g.power_limit_mw).map(|mw| f64::from(mw) / 1000.0),
        max_sm_clock_mhz: nz(g.max_sm_clock_mhz),
        max_mem_clock_mhz: nz(g.max_mem_clock_mhz),
        slowdown_temp_c: nz(g.slowdown_temp_c),
        shutdown_temp_c: nz(g.shutdown_temp_c),
        nvlinks: exact(
            g.nvlinks
                .into_iter()
                .map(|l| NvLinkDesc {
                    link: l.link,
                    peer_pci_bus_id: text(l.peer_pci_bus_id).map(|p| shared_name(peers, p)),
                    inactive_at_start: l.inactive_at_start,
                })
                .collect(),
        ),
        vbios_version: text(g.vbios_version),
        pcie_max: pcie_link(g.pcie_max_gen, g.pcie_max_width),
        vendor: Vendor::from_wire(&g.vendor),
        // Only AMD's GPUs have partition modes (MIG is NVIDIA's, apart).
        partition: (!g.compute_partition.is_empty() || !g.memory_partition.is_empty() || g.partition_id != 0)
            .then_some(Partition {
                compute: g.compute_partition,
                memory: g.memory_partition,
                id: g.partition_id,
            }),
        firmware: exact(
            g.firmware
                .into_iter()
                .take(crate::model::sample::MAX_FIRMWARE)
                .map(|f| Firmware {
                    name: f.name,
                    version: f.version,
                })
                .collect(),
        ),
        hbm_slowdown_temp_c: nz(g.hbm_slowdown_temp_c),
        hbm_shutdown_temp_c: nz(g.hbm_shutdown_temp_c),
        serial_number: text(g.serial_number),
        board_part_number: text(g.board_part_number),
    }
}
