//! AMD device-metrics-exporter's text, written from its documented format
//! (its metric list, the labels its example config turns on, and the
//! label values its docs show), mapped into the domain.

use super::*;
use crate::ingest::promtext::{Limits, parse};
use crate::model::sample::GpuError;

fn map(text: &str) -> Mapped {
    let e = parse(text, &Limits::default()).expect("a value");
    map_node(&e.samples, "fallback", 5000, 1_000)
}

/// One MI300X GPU's labels as AMD's exporter writes them (by name order).
fn l(gpu: u32, partition: u32, compute: &str, memory: &str) -> String {
    format!(
        "card_model=\"102-G30211-00\",card_series=\"AMD Instinct MI300X OAM\",card_vendor=\"AMD\",container=\"\",\
         deployment_mode=\"baremetal\",driver_version=\"6.10.5\",gpu_compute_partition_type=\"{compute}\",\
         gpu_id=\"{gpu}\",gpu_memory_partition_type=\"{memory}\",gpu_partition_id=\"{partition}\",\
         gpu_uuid=\"6aff74a1-0000-1000-80c4-{gpu:012x}\",hostname=\"mi07\",job_id=\"\",job_partition=\"\",\
         job_user=\"\",namespace=\"\",pod=\"\",serial_number=\"692351000{gpu}\",vbios_version=\"113-M3000100-102\""
    )
}

#[test]
fn an_mi300x_maps_with_amds_units() {
    let g = l(0, 0, "spx", "nps1");
    let mut text = format!(
        "# HELP gpu_gfx_activity Graphics engine usage\n# TYPE gpu_gfx_activity gauge\n\
         gpu_gfx_activity{{{g}}} 87\n\
         gpu_umc_activity{{{g}}} 40\n\
         gpu_used_vram{{{g}}} 1024\n\
         gpu_total_vram{{{g}}} 196592\n\
         gpu_free_vram{{{g}}} 195568\n\
         gpu_junction_temperature{{{g}}} 61\n\
         gpu_memory_temperature{{{g}}} 52\n\
         gpu_package_power{{{g}}} 712\n\
         gpu_energy_consumed{{{g}}} 2.5e+12\n\
         pcie_replay_count{{{g}}} 3\n\
         gpu_ecc_correct_total{{{g}}} 7\n\
         gpu_ecc_uncorrect_total{{{g}}} 1\n\
         gpu_ecc_correct_umc{{{g}}} 5\n\
         gpu_ecc_uncorrect_umc{{{g}}} 1\n\
         gpu_ecc_deferred_umc{{{g}}} 2\n\
         gpu_ecc_correct_bif{{{g}}} 2\n\
         gpu_health{{{g}}} 1\n\
         gpu_nodes_total{{hostname=\"mi07\"}} 8\n"
    );
    // Eight GFX clocks (per XCD), the memory clock after them, a video clock.
    for (i, mhz) in [2089, 2101, 2093, 2100, 2095, 2090, 2099, 2097].iter().enumerate() {
        text.push_str(&format!(
            "gpu_clock{{{g},clock_index=\"{i}\",clock_type=\"system\"}} {mhz}\n"
        ));
    }
    text.push_str(&format!(
        "gpu_clock{{{g},clock_index=\"8\",clock_type=\"memory\"}} 1300\n"
    ));
    text.push_str(&format!("gpu_clock{{{g},clock_index=\"9\",clock_type=\"video\"}} 29\n"));
    text.push_str(&format!(
        "gpu_max_clock{{{g},clock_index=\"0\",clock_type=\"system\"}} 2100\n"
    ));
    text.push_str(&format!("gpu_xgmi_link_rx{{{g},link_index=\"1\"}} 2.776148269e+09\n"));
    let m = map(&text);
    assert_eq!(m.skipped, 0);
    assert_eq!(m.desc.hostname, "mi07");
    assert_eq!(m.desc.backend, "amd-exporter");
    assert_eq!(m.desc.driver_version.as_deref(), Some("6.10.5"));
    let d = &m.desc.gpus[0];
    assert_eq!(d.vendor, Vendor::Amd);
    assert_eq!(d.model, "AMD Instinct MI300X OAM");
    assert_eq!(d.uuid, "6aff74a1-0000-1000-80c4-000000000000");
    assert_eq!(d.vbios_version.as_deref(), Some("113-M3000100-102"));
    assert_eq!(d.mem_total_bytes, Some(196_592 << 20));
    assert_eq!(d.max_sm_clock_mhz, Some(2100));
    let p = d.partition.as_ref().expect("a partition");
    assert_eq!((p.compute.as_str(), p.memory.as_str(), p.id), ("SPX", "NPS1", 0));
    let r = &m.sample.gpus[0];
    assert_eq!(r.util_pct, Some(87));
    assert_eq!(r.mem_util_pct, Some(40));
    assert_eq!(r.mem_used_bytes, Some(1024 << 20));
    assert_eq!(r.temp_c, Some(61));
    assert_eq!(r.hbm_temp_c, Some(52));
    assert_eq!(r.power_w, Some(712.0));
    // µJ to mJ.
    assert_eq!(r.energy_mj, Some(2_500_000_000));
    // The first GFX clock (XCD 0), not the highest; the memory clock.
    assert_eq!(r.sm_clock_mhz, Some(2089));
    assert_eq!(r.mem_clock_mhz, Some(1300));
    assert_eq!(r.pcie_replay_count, Some(3));
    assert_eq!(r.ecc_corrected_volatile, Some(7));
    assert_eq!(r.ecc_uncorrected_volatile, Some(1));
    let ras: Vec<(&str, u64, u64, u64)> = r
        .ras
        .iter()
        .map(|b| (b.block.as_ref(), b.correctable, b.uncorrectable, b.deferred))
        .collect();
    assert_eq!(ras, [("UMC", 5, 1, 2), ("PCIE_BIF", 2, 0, 0)]);
    // What AMD's exporter does not give stays absent.
    assert_eq!(r.edge_temp_c, None);
    assert_eq!(r.throttle_mask, None);
    assert_eq!(r.xgmi_error_status, None);
    assert!(r.xids.is_empty());
}

#[test]
fn an_mi200_reads_its_edge_sensor_average_power_and_busy_share() {
    let g = l(0, 0, "", "");
    let mut text = format!(
        "gpu_edge_temperature{{{g}}} 44\n\
         gpu_average_package_power{{{g}}} 301\n"
    );
    for (i, busy) in [10, 30].iter().enumerate() {
        text.push_str(&format!("gpu_gfx_busy_instantaneous{{{g},xcc_index=\"{i}\"}} {busy}\n"));
    }
    let m = map(&text);
    let r = &m.sample.gpus[0];
    // No junction sensor: the edge is the temperature, and is kept as the edge.
    assert_eq!((r.temp_c, r.edge_temp_c), (Some(44), Some(44)));
    assert_eq!(r.power_w, Some(301.0));
    // The mean of the per-XCC busy shares, as AMD's dashboards average them.
    assert_eq!(r.util_pct, Some(20));
    // No partition modes given: only the partition number.
    let p = m.desc.gpus[0].partition.as_ref().expect("a partition number");
    assert_eq!((p.compute.as_str(), p.id), ("", 0));
    // A junction sensor wins over the edge, in whatever order they come.
    let m = map(&format!(
        "gpu_edge_temperature{{{g}}} 44\ngpu_junction_temperature{{{g}}} 70\ngpu_package_power{{{g}}} 500\n\
         gpu_average_package_power{{{g}}} 301\ngpu_gfx_activity{{{g}}} 99\n\
         gpu_gfx_busy_instantaneous{{{g},xcc_index=\"0\"}} 1\n"
    ));
    let r = &m.sample.gpus[0];
    assert_eq!((r.temp_c, r.power_w, r.util_pct), (Some(70), Some(500.0), Some(99)));
}

#[test]
fn partitions_are_gpus_and_the_socket_is_read_once() {
    let (p0, p1) = (l(0, 0, "cpx", "nps4"), l(1, 1, "cpx", "nps4"));
    let m = map(&format!(
        "gpu_package_power{{{p0}}} 650\ngpu_package_power{{{p1}}} 0\n\
         gpu_junction_temperature{{{p0}}} 66\n\
         gpu_used_vram{{{p0}}} 100\ngpu_used_vram{{{p1}}} 0\n\
         gpu_gfx_activity{{{p1}}} 0\n"
    ));
    assert_eq!(m.desc.gpus.len(), 2);
    let part = |i: usize| m.desc.gpus[i].partition.clone().expect("a partition");
    assert_eq!(
        (part(1).compute.as_str(), part(1).memory.as_str(), part(1).id),
        ("CPX", "NPS4", 1)
    );
    let (r0, r1) = (&m.sample.gpus[0], &m.sample.gpus[1]);
    assert_eq!(r0.power_w, Some(650.0));
    // AMD's 0 on a later partition is no power reading; its own readings stand.
    assert_eq!(r1.power_w, None);
    assert_eq!(r1.temp_c, None);
    assert_eq!(r1.mem_used_bytes, Some(0));
    assert_eq!(r1.util_pct, Some(0));
}

#[test]
fn a_prefix_sentinels_and_strange_series() {
    let g = l(3, 0, "spx", "nps1");
    let m = map(&format!(
        "amd_gpu_junction_temperature{{{g}}} 58\n\
         amd_gpu_memory_temperature{{{g}}} 65535\n\
         amd_gpu_package_power{{{g}}} 4294967295\n\
         amd_gpu_clock{{{g},clock_index=\"0\",clock_type=\"system\"}} 65535\n\
         amd_gpu_gfx_activity{{{g}}} NaN\n\
         gpu_junction_temperature{{card_model=\"x\"}} 50\n\
         go_goroutines 12\n"
    ));
    assert_eq!(m.desc.gpus.len(), 1);
    assert_eq!(m.desc.gpus[0].index, 3);
    let r = &m.sample.gpus[0];
    assert_eq!(r.temp_c, Some(58));
    assert_eq!(
        (r.hbm_temp_c, r.power_w, r.sm_clock_mhz, r.util_pct),
        (None, None, None, None)
    );
    // The series without its GPU is counted, not guessed at.
    assert_eq!(m.skipped, 1);
    // A page of something else has no GPU at all.
    assert!(map("go_goroutines 12\nup 1\n").desc.gpus.is_empty());
}

/// A fleetop agent's own series on an AMD node: AMD's labels on them.
#[test]
fn a_fleetop_agents_own_series_on_amd_map_to_the_flags_fields() {
    let (g0, g1) = (l(0, 0, "spx", "nps1"), l(1, 0, "spx", "nps1"));
    let m = map(&format!(
        "fleetop_agent_info{{Hostname=\"mi07\",version=\"0.9.0\",backend=\"amdsmi\",driver_version=\"6.10.5\"}} 1\n\
         gpu_junction_temperature{{{g0}}} 71\n\
         fleetop_gpu_throttle_reason{{{g0},reason=\"sw_power_cap\"}} 1\n\
         fleetop_gpu_throttle_reason{{{g0},reason=\"hw_slowdown\"}} 0\n\
         fleetop_gpu_throttle_detail{{{g0},reason=\"ppt_pwr\"}} 1\n\
         fleetop_gpu_throttle_detail{{{g0},reason=\"PPT0\"}} 1\n\
         fleetop_gpu_xgmi_link_state{{{g0},link_index=\"2\"}} 1\n\
         fleetop_gpu_xgmi_link_state{{{g0},link_index=\"5\"}} 0\n\
         fleetop_gpu_xgmi_error_status{{{g0}}} 1\n\
         fleetop_flag{{{g0},kind=\"nvlink_down\",severity=\"crit\",action=\"check_link\"}} 1\n\
         gpu_health{{{g1}}} 0\n\
         fleetop_gpu_error{{{g1},error=\"gpu_lost\"}} 1\n\
         node_infiniband_state_id{{device=\"mlx5_0\",port=\"1\",Hostname=\"mi07\"}} 4\n"
    ));
    assert_eq!(m.desc.agent_version, "0.9.0");
    assert_eq!(m.desc.backend, "amd-exporter");
    let g = m.sample.gpu(0).expect("GPU 0");
    assert_eq!(g.throttle_mask, Some(fleetop_proto::throttle::SW_POWER_CAP));
    let words: Vec<&str> = g.throttle_detail.iter().map(|w| w.as_ref()).collect();
    assert_eq!(words, ["ppt_pwr", "PPT0"]);
    // The link the agent flags down, by AMD's link number.
    assert_eq!(g.nvlinks_down, vec![5]);
    assert_eq!(g.xgmi_error_status, Some(1));
    let lost = m.sample.gpu(1).expect("GPU 1");
    assert_eq!(lost.error, Some(GpuError::Lost));
    assert_eq!(m.desc.gpu(1).expect("GPU 1").vendor, Vendor::Amd);
    assert_eq!(m.desc.ib_ports.len(), 1);
}

#[test]
fn a_page_of_1000_gpus_on_a_node_yields_64_and_counts_the_rest_dropped() {
    let mut text = String::new();
    for g in 0..1000 {
        let l = l(g, 0, "spx", "nps1");
        text.push_str(&format!(
            "gpu_gfx_activity{{{l}}} 87\ngpu_junction_temperature{{{l}}} 61\n"
        ));
    }
    let m = map(&text);
    assert_eq!(m.desc.gpus.len(), MAX_GPUS_PER_NODE);
    assert_eq!(m.sample.gpus.len(), MAX_GPUS_PER_NODE);
    assert_eq!(m.dropped_gpus, 2 * (1000 - MAX_GPUS_PER_NODE));
    assert!(
        m.sample
            .gpus
            .iter()
            .all(|g| g.util_pct == Some(87) && g.temp_c == Some(61))
    );
}
