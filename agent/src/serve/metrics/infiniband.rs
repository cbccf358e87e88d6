//! The InfiniBand port families, under node_exporter's names
//! (`node_infiniband_*`) where it has one, and `fleetop_infiniband_*` for
//! the counters it does not read. Apart from the GPU families: ports have
//! their own labels and their own exporter to match.

use super::text::{Kind, Writer, push_label};
use crate::proto::{IbSample, NodeInfo};

/// NVIDIA's InfiniBand state words and their numbers, as sysfs writes them
/// ("4: ACTIVE") and node_exporter serves them.
fn state_id(word: &str) -> Option<u8> {
    Some(match word {
        "NOP" => 0,
        "DOWN" => 1,
        "INIT" => 2,
        "ARMED" => 3,
        "ACTIVE" => 4,
        "ACTIVE_DEFER" => 5,
        _ => return None,
    })
}

fn phys_state_id(word: &str) -> Option<u8> {
    Some(match word {
        "Sleep" => 1,
        "Polling" => 2,
        "Disabled" => 3,
        "PortConfigurationTraining" => 4,
        "LinkUp" => 5,
        "LinkErrorRecovery" => 6,
        "Phy Test" => 7,
        _ => return None,
    })
}

/// node_exporter's name for an error counter the agent reads, where it has one.
fn node_exporter_name(counter: &str) -> Option<&'static str> {
    Some(match counter {
        "link_downed" => "node_infiniband_link_downed_total",
        "link_error_recovery" => "node_infiniband_link_error_recovery_total",
        "port_rcv_errors" => "node_infiniband_port_errors_received_total",
        "port_xmit_discards" => "node_infiniband_port_discards_transmitted_total",
        "port_rcv_constraint_errors" => "node_infiniband_port_constraint_errors_received_total",
        "port_xmit_constraint_errors" => "node_infiniband_port_constraint_errors_transmitted_total",
        _ => return None,
    })
}

pub(super) fn infiniband(w: &mut Writer, info: &NodeInfo, ports: &[IbSample]) {
    let labels: Vec<Option<String>> = ports
        .iter()
        .map(|p| {
            let pi = info.ib_ports.get(p.port as usize)?;
            let mut l = String::new();
            push_label(&mut l, "device", &pi.device);
            l.push(',');
            push_label(&mut l, "port", &pi.port.to_string());
            // Beyond node_exporter's labels: joins a port to its node's GPUs.
            l.push(',');
            push_label(&mut l, "Hostname", &info.hostname);
            Some(l)
        })
        .collect();
    let each = |w: &mut Writer, f: &dyn Fn(&IbSample) -> Option<f64>| {
        for (p, l) in ports.iter().zip(&labels) {
            if let (Some(l), Some(v)) = (l, f(p)) {
                w.sample(l, &[], v);
            }
        }
    };
    w.family(
        "node_infiniband_state_id",
        Kind::Gauge,
        "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
    );
    each(w, &|p| state_id(&p.state).map(f64::from));
    w.family("node_infiniband_physical_state_id", Kind::Gauge, "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)");
    each(w, &|p| phys_state_id(&p.phys_state).map(f64::from));
    w.family(
        "node_infiniband_rate_bytes_per_second",
        Kind::Gauge,
        "Maximum signal transfer rate",
    );
    each(w, &|p| (p.rate_gbps > 0).then(|| f64::from(p.rate_gbps) * 1e9 / 8.0));
    w.family(
        "node_infiniband_port_data_transmitted_bytes_total",
        Kind::Counter,
        "Number of data octets transmitted on all links",
    );
    each(w, &|p| Some(p.tx_bytes as f64));
    w.family(
        "node_infiniband_port_data_received_bytes_total",
        Kind::Counter,
        "Number of data octets received on all links",
    );
    each(w, &|p| Some(p.rx_bytes as f64));
    w.family(
        "node_infiniband_port_packets_transmitted_total",
        Kind::Counter,
        "Number of packets transmitted on all VLs from this port (including errors)",
    );
    each(w, &|p| Some(p.tx_packets as f64));
    w.family(
        "node_infiniband_port_packets_received_total",
        Kind::Counter,
        "Number of packets received on all VLs by this port (including errors)",
    );
    each(w, &|p| Some(p.rx_packets as f64));
    let counter = |p: &IbSample, i: usize| -> Option<f64> {
        (i < 32 && p.errors_present_mask & (1 << i) != 0)
            .then(|| p.errors.get(i).map(|&v| v as f64))
            .flatten()
    };
    for (i, (full, _)) in fleetop_proto::ib::ERROR_COUNTERS.iter().enumerate() {
        if let Some(name) = node_exporter_name(full) {
            w.family(
                name,
                Kind::Counter,
                "InfiniBand port error counter (sysfs counters/, as node_exporter names it).",
            );
            each(w, &|p| counter(p, i));
        }
    }
    w.family("fleetop_infiniband_port_errors_total", Kind::Counter, "InfiniBand port error counters node_exporter has no name for (sysfs counters/ and hw_counters/); `counter` names the file. Small counters saturate: alert on increases.");
    for (i, (full, _)) in fleetop_proto::ib::ERROR_COUNTERS.iter().enumerate() {
        if node_exporter_name(full).is_some() {
            continue;
        }
        let short = fleetop_proto::ib::counter_name(i);
        for (p, l) in ports.iter().zip(&labels) {
            if let (Some(l), Some(v)) = (l, counter(p, i)) {
                w.sample(l, &[("counter", short)], v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::proto::{IbSample, Sample};
    use crate::serve::metrics::tests::{info, lines, scrape};

    #[test]
    fn infiniband_ports_use_node_exporter_names_and_skip_unreadable_counters() {
        let mut i = info(0);
        i.ib_ports = vec![crate::proto::IbPortInfo {
            device: "mlx5_0".into(),
            port: 1,
            link_layer: "InfiniBand".into(),
        }];
        let s = Sample {
            time_ms: 10_000,
            ib_ports: vec![IbSample {
                port: 0,
                state: "DOWN".into(),
                phys_state: "Polling".into(),
                rate_gbps: 400,
                tx_bytes: 4096,
                errors: vec![7; fleetop_proto::ib::ERROR_COUNTERS.len()],
                // symbol_error (0) and link_downed (2) readable only.
                errors_present_mask: 0b101,
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = scrape(&i, &[s], 10_100);
        assert_eq!(
            lines(&t, "node_infiniband_state_id"),
            ["{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 1"]
        );
        assert_eq!(
            lines(&t, "node_infiniband_physical_state_id")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 2"
        );
        assert_eq!(
            lines(&t, "node_infiniband_rate_bytes_per_second")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 50000000000"
        );
        assert_eq!(
            lines(&t, "node_infiniband_port_data_transmitted_bytes_total")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 4096"
        );
        assert_eq!(
            lines(&t, "node_infiniband_link_downed_total")[0],
            "{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\"} 7"
        );
        assert!(lines(&t, "node_infiniband_link_error_recovery_total").is_empty());
        assert_eq!(
            lines(&t, "fleetop_infiniband_port_errors_total"),
            ["{device=\"mlx5_0\",port=\"1\",Hostname=\"n1\",counter=\"symbol_error\"} 7"]
        );
        assert!(t.contains("# TYPE node_infiniband_link_downed_total counter"));
        assert!(lines(&t, "fleetop_flag")[0].contains("kind=\"ib_down\""));
        assert!(lines(&t, "fleetop_node_health")[0].ends_with(" 2"), "{t}");
    }
}
