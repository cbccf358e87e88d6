//! dcgm-exporter's series, and a fleetop agent's own `fleetop_*` and
//! `node_infiniband_*` series, mapped once into the console's domain model:
//! a node's description (`NodeDesc`) and one sample (`NodeSample`). Both the
//! `--dcgm-exporter` scraper (parsed text) and the `--prometheus` reader
//! (query results) hand their series to this one module, one series at a
//! time (`NodeAcc::add`), so a large answer is never held as labelled
//! samples.
//!
//! What a series does not give stays `None`: dcgm-exporter has no host
//! readings, processes, per-link NVLink state or InfiniBand ports, so those
//! are absent, never 0 (a fleetop agent's series give the links and ports).
//! DCGM marks a value it could not read with a "blank" sentinel
//! (`DCGM_INT32_BLANK` 0x7ffffff0 and the 15 above it, `DCGM_INT64_BLANK`
//! 0x7ffffffffffffff0 and above, `DCGM_FP64_BLANK` 2^47 and above): those
//! read as absent too, never as a temperature.

mod fields;
mod map;

pub use fields::{Group, KEYS, Labels, Pace, host_of, ib_error_names, series_names};
pub use map::{MAX_GPUS_PER_NODE, MAX_LABEL_BYTES, MAX_PORTS_PER_NODE, Mapped, NodeAcc, Xids, map_node};

#[cfg(test)]
mod tests {
    use super::fields::*;
    use super::map::*;
    use super::{MAX_GPUS_PER_NODE, MAX_PORTS_PER_NODE};
    use crate::ingest::promtext::{Limits, parse};
    use crate::model::sample::{GpuError, Xid};
    use fleetop_proto::{ib, throttle};

    fn map(text: &str) -> Mapped {
        let e = parse(text, &Limits::default()).expect("a value");
        map_node(&e.samples, "fallback", "dcgm-exporter", 5000, 1_000)
    }

    const L0: &str = r#"gpu="0",UUID="GPU-aaa",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu07",DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod="""#;

    #[test]
    fn a_page_of_1000_gpus_on_a_node_yields_64_and_counts_the_rest_dropped() {
        let mut text = String::new();
        for g in 0..1000 {
            text.push_str(&format!(
                "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{g}\",UUID=\"GPU-{g}\",Hostname=\"big\"}} 5\n\
                 DCGM_FI_DEV_GPU_TEMP{{gpu=\"{g}\",UUID=\"GPU-{g}\",Hostname=\"big\"}} 40\n"
            ));
        }
        for p in 0..1000 {
            text.push_str(&format!(
                "node_infiniband_state_id{{device=\"mlx5_{p}\",port=\"1\"}} 4\n"
            ));
        }
        let m = map(&text);
        assert_eq!(m.desc.gpus.len(), MAX_GPUS_PER_NODE);
        assert_eq!(m.sample.gpus.len(), MAX_GPUS_PER_NODE);
        assert_eq!(m.dropped_gpus, 2 * (1000 - MAX_GPUS_PER_NODE));
        // The first 64 by the page's order, each whole.
        assert!(
            m.sample
                .gpus
                .iter()
                .all(|g| g.util_pct == Some(5) && g.temp_c == Some(40))
        );
        assert_eq!(m.desc.ib_ports.len(), MAX_PORTS_PER_NODE);
        assert_eq!(m.dropped_ports, 1000 - MAX_PORTS_PER_NODE);
    }

    #[test]
    fn a_gpu_maps_with_units() {
        let m = map(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{{L0}}} 87\n\
             DCGM_FI_DEV_MEM_COPY_UTIL{{{L0}}} 40\n\
             DCGM_FI_DEV_FB_USED{{{L0}}} 1024\n\
             DCGM_FI_DEV_FB_FREE{{{L0}}} 80000\n\
             DCGM_FI_DEV_FB_RESERVED{{{L0}}} 535\n\
             DCGM_FI_DEV_GPU_TEMP{{{L0}}} 61\n\
             DCGM_FI_DEV_POWER_USAGE{{{L0}}} 412.5\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 2147483640\n\
             DCGM_FI_DEV_SM_CLOCK{{{L0}}} 1980\n\
             DCGM_FI_DEV_XID_ERRORS{{{L0}}} 79\n\
             DCGM_FI_PROF_SM_ACTIVE{{{L0}}} 0.5\n\
             DCGM_FI_PROF_SM_OCCUPANCY{{{L0}}} 0.25\n\
             DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{L0}}} 0.1\n\
             DCGM_FI_PROF_DRAM_ACTIVE{{{L0}}} 0.75\n"
        ));
        assert_eq!(m.desc.hostname, "gpu07");
        assert_eq!(m.desc.driver_version.as_deref(), Some("550.54.15"));
        let d = &m.desc.gpus[0];
        assert_eq!(
            (d.uuid.as_str(), d.model.as_str()),
            ("GPU-aaa", "NVIDIA H100 80GB HBM3")
        );
        assert_eq!(d.mem_total_bytes, Some((1024 + 80000 + 535) << 20));
        let g = &m.sample.gpus[0];
        assert_eq!(g.util_pct, Some(87));
        assert_eq!(g.mem_util_pct, Some(40));
        assert_eq!(g.mem_used_bytes, Some(1024 << 20));
        assert_eq!(g.power_w, Some(412.5));
        // A 64-bit counter in the 32-bit blank range is a real count.
        assert_eq!(g.energy_mj, Some(2_147_483_640));
        assert_eq!(
            g.xids,
            vec![Xid {
                xid: 79,
                time_ms: 1_000
            }]
        );
        let gpm = g.gpm.expect("a value");
        assert_eq!((gpm.sm_active_pct, gpm.dram_bw_pct), (50.0, 75.0));
        // What dcgm-exporter did not give is absent, never 0.
        assert_eq!(g.hbm_temp_c, None);
        assert_eq!(g.mem_clock_mhz, None);
        assert_eq!(g.throttle_mask, None);
        assert_eq!(g.ecc_uncorrected_volatile, None);
        assert!(m.sample.host.is_none());
    }

    #[test]
    fn blank_sentinels_read_as_absent() {
        let m = map(&format!(
            "DCGM_FI_DEV_MEMORY_TEMP{{{L0}}} 9223372036854775794\n\
             DCGM_FI_DEV_GPU_TEMP{{{L0}}} 2147483632\n\
             DCGM_FI_DEV_SM_CLOCK{{{L0}}} 2147483646\n\
             DCGM_FI_DEV_POWER_USAGE{{{L0}}} 140737488355328\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 9223372036854775792\n\
             DCGM_FI_DEV_GPU_UTIL{{{L0}}} NaN\n\
             DCGM_FI_DEV_MEM_CLOCK{{{L0}}} 1593\n"
        ));
        let g = &m.sample.gpus[0];
        assert_eq!(g.hbm_temp_c, None);
        assert_eq!(g.temp_c, None);
        assert_eq!(g.sm_clock_mhz, None);
        assert_eq!(g.power_w, None);
        assert_eq!(g.energy_mj, None);
        assert_eq!(g.util_pct, None);
        assert_eq!(g.mem_clock_mhz, Some(1593));
    }

    #[test]
    fn mig_instances_become_per_instance_readings() {
        let mig = |gi: u32, prof: &str| {
            format!(
                r#"gpu="1",UUID="GPU-bbb",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu07",GPU_I_PROFILE="{prof}",GPU_I_ID="{gi}""#
            )
        };
        let (a, b) = (mig(1, "3g.40gb"), mig(2, "1g.10gb"));
        let m = map(&format!(
            "DCGM_FI_DEV_FB_USED{{{a}}} 100\nDCGM_FI_DEV_FB_FREE{{{a}}} 40000\n\
             DCGM_FI_DEV_FB_USED{{{b}}} 50\nDCGM_FI_DEV_FB_FREE{{{b}}} 9000\n\
             DCGM_FI_DEV_GPU_TEMP{{{a}}} 44\nDCGM_FI_DEV_GPU_TEMP{{{b}}} 44\n\
             DCGM_FI_DEV_GPU_UTIL{{{L0}}} 3\n"
        ));
        assert_eq!(m.sample.gpus.len(), 2);
        let g = m.sample.gpu(1).expect("a value");
        assert_eq!(g.mig.len(), 2);
        assert_eq!(g.mig[0].gpu_instance_id, 1);
        assert_eq!(g.mig[0].profile, "3g.40gb");
        assert_eq!(g.mig[0].mem_used_bytes, Some(100 << 20));
        assert_eq!(g.mig[1].mem_total_bytes, Some(9050 << 20));
        assert_eq!(g.mem_used_bytes, Some(150 << 20));
        assert_eq!(g.temp_c, Some(44));
        assert_eq!(g.util_pct, None);
        assert_eq!(m.desc.gpu(1).expect("a value").mem_total_bytes, Some(49150 << 20));
        // Two models on one node.
        assert_eq!(m.desc.gpu(0).expect("a value").model, "NVIDIA H100 80GB HBM3");
        assert_eq!(m.desc.gpu(1).expect("a value").model, "NVIDIA A100-SXM4-80GB");
        assert!(m.sample.gpu(0).expect("a value").mig.is_empty());
    }

    #[test]
    fn hostname_label_variants() {
        let e = parse(
            "a{Hostname=\"n1\",hostname=\"x\"} 1\nb{hostname=\"n2\"} 1\nc{instance=\"n3:9400\"} 1\n\
             d{instance=\"[::1]:9400\"} 1\ne{instance=\"n5\"} 1\nf{gpu=\"0\"} 1\n",
            &Limits::default(),
        )
        .expect("a value");
        let hosts: Vec<Option<String>> = e.samples.iter().map(host_of).collect();
        let want = [Some("n1"), Some("n2"), Some("n3"), Some("::1"), Some("n5"), None];
        assert_eq!(hosts, want.map(|h| h.map(str::to_string)));
        let m = map("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",hostname=\"lower\"} 30\n");
        assert_eq!(m.desc.hostname, "lower");
        let m = map("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 30\nDCGM_FI_DEV_GPU_TEMP{UUID=\"x\"} 30\n");
        assert_eq!(m.desc.hostname, "fallback");
        assert_eq!(m.skipped, 1);
    }

    #[test]
    fn pod_labels_do_not_split_a_gpu() {
        let m = map("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=\"train-1\",namespace=\"ml\"} 90\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",pod=\"train-1\",namespace=\"ml\"} 50\n");
        assert_eq!(m.sample.gpus.len(), 1);
        assert_eq!(m.sample.gpus[0].util_pct, Some(90));
    }

    #[test]
    fn an_xid_is_reported_once() {
        let mut x = Xids::default();
        let text = "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 48\n";
        let mut first = map(text).sample;
        x.dedup(&mut first);
        assert_eq!(first.gpus[0].xids.len(), 1);
        let mut again = map(text).sample;
        x.dedup(&mut again);
        assert!(again.gpus[0].xids.is_empty());
        let mut cleared = map("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 0\n").sample;
        x.dedup(&mut cleared);
        let mut back = map(text).sample;
        x.dedup(&mut back);
        assert_eq!(back.gpus[0].xids.len(), 1);
    }

    /// A fleetop agent's own series, as its /metrics writes them.
    const AGENT: &str = r#"fleetop_agent_info{Hostname="n7",version="0.9.0",backend="sim:throttle",driver_version="550.54.15"} 1
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="H100",Hostname="n7"} 81
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="H100",Hostname="n7"} 0
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="gpu_idle"} 0
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="sw_power_cap"} 1
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="hw_thermal_slowdown"} 1
fleetop_gpu_throttle_reason{gpu="0",UUID="GPU-a",Hostname="n7",reason="unknown_0x200"} 1
fleetop_gpu_pcie_transmit_bytes_per_second{gpu="0",UUID="GPU-a",Hostname="n7"} 2000
fleetop_gpu_nvlink_state{gpu="0",UUID="GPU-a",Hostname="n7",link="0"} 1
fleetop_gpu_nvlink_state{gpu="0",UUID="GPU-a",Hostname="n7",link="3"} 0
fleetop_flag{gpu="0",UUID="GPU-a",Hostname="n7",kind="nvlink_down",severity="crit"} 1
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-b",device="nvidia1",modelName="H100",Hostname="n7"} 79
fleetop_gpu_error{gpu="1",UUID="GPU-b",device="nvidia1",modelName="H100",Hostname="n7",error="gpu_lost"} 1
fleetop_gpu_nvlink_state{gpu="1",UUID="GPU-b",Hostname="n7",link="5"} 0
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",Hostname="n7"} 40
fleetop_gpu_nvlink_state{gpu="2",UUID="GPU-c",Hostname="n7",link="2"} 0
node_infiniband_state_id{device="mlx5_0",port="1",Hostname="n7"} 1
node_infiniband_physical_state_id{device="mlx5_0",port="1",Hostname="n7"} 3
node_infiniband_rate_bytes_per_second{device="mlx5_0",port="1",Hostname="n7"} 5e+10
node_infiniband_port_data_transmitted_bytes_total{device="mlx5_0",port="1",Hostname="n7"} 4096
node_infiniband_link_downed_total{device="mlx5_0",port="1",Hostname="n7"} 3
fleetop_infiniband_port_errors_total{device="mlx5_0",port="1",Hostname="n7",counter="symbol_error"} 12
fleetop_infiniband_port_errors_total{device="mlx5_0",port="1",Hostname="n7",counter="local_ack_timeout_err"} 7
node_infiniband_state_id{device="mlx5_1",port="1",Hostname="n7"} 4
fleetop_flag{Hostname="n7",kind="stale",severity="warn"} 1
"#;

    #[test]
    fn a_fleetop_agents_own_series_map_to_the_fields_the_flags_need() {
        let m = map(AGENT);
        assert_eq!(m.skipped, 0);
        assert_eq!(m.desc.agent_version, "0.9.0");
        assert_eq!(m.desc.backend, "dcgm-exporter");
        assert_eq!(m.desc.driver_version.as_deref(), Some("550.54.15"));
        let g0 = m.sample.gpu(0).expect("gpu 0");
        // One series per reason, back into NVML's bitmask (unknown bits too).
        assert_eq!(
            g0.throttle_mask,
            Some(throttle::SW_POWER_CAP | throttle::HW_THERMAL_SLOWDOWN | 0x200)
        );
        assert_eq!(g0.pcie_tx_bytes_per_s, Some(2000.0));
        assert_eq!(g0.pcie_rx_bytes_per_s, None);
        // The link the agent flags down, by its NVML id.
        assert_eq!(g0.nvlinks_down, vec![3]);
        assert_eq!(g0.temp_c, Some(81));
        // A lost GPU: the error, no readings, its XID still counted.
        let g1 = m.sample.gpu(1).expect("gpu 1");
        assert_eq!(g1.error, Some(GpuError::Lost));
        assert_eq!(g1.xids.len(), 1);
        assert!(g1.nvlinks_down.is_empty());
        assert_eq!(m.desc.gpu(1).expect("gpu 1").uuid, "GPU-b");
        // Inactive but not flagged (unused by design): not down; no reason
        // series at all: no throttle reading.
        let g2 = m.sample.gpu(2).expect("gpu 2");
        assert!(g2.nvlinks_down.is_empty());
        assert_eq!(g2.throttle_mask, None);
        // InfiniBand ports, by (device, port).
        let names: Vec<String> = (0..2).map(|k| m.desc.ib_port_name(k)).collect();
        assert_eq!(names, ["mlx5_0/1", "mlx5_1/1"]);
        let p = &m.sample.ib_ports[0];
        assert!(p.is_down());
        assert_eq!(p.state.as_deref(), Some("DOWN"));
        assert_eq!(p.phys_state.as_deref(), Some("Disabled"));
        assert_eq!(p.rate_gbps, Some(400));
        assert_eq!(p.tx_bytes, 4096);
        let err = |name: &str| {
            p.errors[(0..ib::ERROR_COUNTERS.len())
                .find(|&i| ib::counter_name(i) == name)
                .expect("a counter")]
        };
        assert_eq!(err("link_downed"), Some(3));
        assert_eq!(err("symbol_error"), Some(12));
        assert_eq!(err("local_ack_timeout_err"), Some(7));
        assert_eq!(err("port_rcv_errors"), None);
        assert!(!m.sample.ib_ports[1].is_down());
        assert_eq!(m.sample.ib_ports[1].rate_gbps, None);
    }

    #[test]
    fn a_fast_read_keeps_the_slow_fields_and_not_the_fast_ones() {
        let e = parse(
            &format!(
                "DCGM_FI_DEV_FB_USED{{{L0}}} 1000\nDCGM_FI_DEV_FB_FREE{{{L0}}} 9000\n\
                 DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L0}}} 5000\nDCGM_FI_DEV_GPU_TEMP{{{L0}}} 50\n\
                 node_infiniband_state_id{{device=\"mlx5_0\",port=\"1\",Hostname=\"gpu07\"}} 1\n\
                 node_infiniband_rate_bytes_per_second{{device=\"mlx5_0\",port=\"1\",Hostname=\"gpu07\"}} 5e10\n"
            ),
            &Limits::default(),
        )
        .expect("a value");
        let mut acc = NodeAcc::default();
        for s in &e.samples {
            acc.add(&s.name, &Labels::from_sample(s), s.value);
        }
        let full = acc.clone().finish("x", "prometheus", 5000, 1);
        acc.keep_slow();
        let mut fast = acc.clone();
        let l = Labels::from_sample(&e.samples[0]);
        fast.add("DCGM_FI_DEV_FB_USED", &l, 3000.0);
        let fast = fast.finish("x", "prometheus", 5000, 2);
        // The description does not move (the total was fixed at the slow read).
        assert_eq!(fast.desc, full.desc);
        let g = &fast.sample.gpus[0];
        assert_eq!(g.mem_used_bytes, Some(3000 << 20));
        assert_eq!(g.energy_mj, Some(5000));
        // A fast field the fast read did not bring is absent, not the old value.
        assert_eq!(g.temp_c, None);
        assert_eq!(fast.sample.ib_ports[0].state, None);
        assert_eq!(fast.sample.ib_ports[0].rate_gbps, Some(400));
    }
}
