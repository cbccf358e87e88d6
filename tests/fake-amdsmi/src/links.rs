//! PCIe and XGMI: PCIe info, link metrics, XGMI link status and info, topology link types.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_pcie_info(h: amdsmi_processor_handle, out: *mut amdsmi_pcie_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_pcie_info_t::zeroed();
        v.pcie_static.max_pcie_width = g.pcie_max_width;
        v.pcie_static.max_pcie_speed = pcie_mts(g.pcie_max_gen);
        v.pcie_static.pcie_interface_version = g.pcie_gen;
        v.pcie_static.slot_type = profile::slot_type(&g.slot_type).unwrap_or(AMDSMI_CARD_FORM_FACTOR_UNKNOWN);
        v.pcie_static.max_pcie_interface_version = g.pcie_max_gen;
        v.pcie_metric.pcie_width = g.pcie_width;
        v.pcie_metric.pcie_speed = pcie_mts(g.pcie_gen);
        v.pcie_metric.pcie_bandwidth = g.pcie_bandwidth_mbps;
        v.pcie_metric.pcie_replay_count = g.pcie_replay_count;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_pci_replay_counter(h: amdsmi_processor_handle, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.spec(p.gpu).pcie_replay_count))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_link_metrics(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_link_metrics_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        if out.is_null() {
            return INVAL;
        }
        let g = f.spec(p.gpu);
        let mut v = amdsmi_link_metrics_t::zeroed();
        let peers: Vec<u32> = (0..g.xgmi_links).filter_map(|k| f.peer_of(p.gpu, k)).collect();
        for (slot, &peer) in v.links.iter_mut().zip(&peers) {
            slot.bdf = f.bdf(f.proc_of(peer, 0));
            let up = f.link_down_since(p.gpu, peer).is_none();
            slot.bit_rate = if up { g.xgmi_bit_rate_gbps } else { 0 };
            slot.max_bandwidth = g.xgmi_max_bandwidth_gbs;
            slot.link_type = AMDSMI_LINK_TYPE_XGMI;
            slot.read = f.xgmi_kb(peer, p.gpu);
            slot.write = f.xgmi_kb(p.gpu, peer);
        }
        v.num_links = peers.len() as u32;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_xgmi_link_status(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_xgmi_link_status_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let g = f.spec(p.gpu);
        let mut v = amdsmi_xgmi_link_status_t::zeroed();
        v.total_links = g.xgmi_links;
        for k in 0..g.xgmi_links {
            v.status[k as usize] = match f.peer_of(p.gpu, k) {
                None => AMDSMI_XGMI_LINK_DISABLE,
                Some(peer) if f.link_down_since(p.gpu, peer).is_some() => AMDSMI_XGMI_LINK_DOWN,
                Some(_) => AMDSMI_XGMI_LINK_UP,
            };
        }
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_xgmi_info(h: amdsmi_processor_handle, out: *mut amdsmi_xgmi_info_t) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut v = amdsmi_xgmi_info_t::zeroed();
        v.xgmi_lanes = f.spec(p.gpu).xgmi_lanes;
        v.xgmi_hive_id = f.p.xgmi_hive_id;
        v.xgmi_node_id = f.p.xgmi_hive_id.wrapping_add(u64::from(p.gpu) + 1);
        v.index = p.gpu;
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_gpu_xgmi_error_status(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_xgmi_status_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.xgmi_errors(p.gpu)))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_topo_get_link_type(
    src: amdsmi_processor_handle,
    dst: amdsmi_processor_handle,
    hops: *mut u64,
    kind: *mut amdsmi_link_type_t,
) -> amdsmi_status_t {
    let dst_gpu = {
        let st = state();
        match st.as_ref().filter(|f| f.inits > 0) {
            None => return AMDSMI_STATUS_NOT_INIT,
            Some(f) => match f.decode(dst) {
                Some(d) => d.gpu,
                None => return INVAL,
            },
        }
    };
    on_proc(src, true, |_, s| {
        if hops.is_null() || kind.is_null() {
            return INVAL;
        }
        // Partitions of one GPU share its dies: no link between them. The
        // topology is KFD's, fixed at boot: a link that went down stays XGMI.
        let (h, k) = if s.gpu == dst_gpu {
            (0, AMDSMI_LINK_TYPE_INTERNAL)
        } else {
            (1, AMDSMI_LINK_TYPE_XGMI)
        };
        put(hops, h);
        put(kind, k)
    })
}
