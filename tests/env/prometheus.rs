//! `--prometheus`: a real Prometheus scrapes dcgm-exporter text served on
//! loopback (one second apart); after two scrapes, `fleetop export
//! --prometheus` shows the same nodes, GPUs and values as reading the
//! exporters directly; a bad `--prometheus-match` is Prometheus' own error
//! in one line.

use fleetop::export::{Gpu, Snapshot, Status};

use crate::dcgm::{DcgmGpu, HttpServer, Reply, dcgm_text, mixed_node};
use crate::fleetop;
use crate::prometheus_harness::{Prometheus, export_once};

fn export(args: &[&str]) -> Snapshot {
    export_once("20s", args).0
}

/// What both sources must agree on, per GPU.
fn key(g: &Gpu) -> String {
    let mig: Vec<String> = g
        .mig
        .iter()
        .map(|m| {
            format!(
                "{}:{}:{:?}:{:?}",
                m.gpu_instance_id, m.profile, m.mem_used_bytes, m.mem_total_bytes
            )
        })
        .collect();
    format!(
        "{} {} {} util={:?} temp={:?} hbm={:?} power={:?} used={:?} total={:?} sm={:?} energy={:?} mig={mig:?}",
        g.index,
        g.uuid,
        g.model,
        g.util_pct,
        g.temp_c,
        g.hbm_temp_c,
        g.power_w,
        g.mem_used_bytes,
        g.mem_total_bytes,
        g.sm_clock_mhz,
        g.energy_j,
    )
}

fn two_nodes() -> (HttpServer, HttpServer) {
    let a = HttpServer::start(Reply::Metrics(dcgm_text("gpu-a", &mixed_node())));
    let b = HttpServer::start(Reply::Metrics(dcgm_text(
        "gpu-b",
        &[
            DcgmGpu::new(0, "NVIDIA H100 80GB HBM3", 12),
            DcgmGpu::new(1, "NVIDIA H100 80GB HBM3", 99),
        ],
    )));
    (a, b)
}

pub fn prometheus_export_matches_the_exporters() {
    let (a, b) = two_nodes();
    let prom = Prometheus::start(&[a.addr(), b.addr()]);
    prom.wait_scrapes(2, 2);
    let direct = export(&["--dcgm-exporter", &format!("{},{}", a.addr(), b.addr())]);
    let (via, log) = export_once(
        "20s",
        &["--prometheus", &prom.url(), "--prometheus-match", "{job=\"dcgm\"}"],
    );
    // The history (a range query) was read too.
    assert!(!log.contains("no history"), "{log}");
    let names: Vec<&str> = via.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu-a", "gpu-b"], "{}", prom.log());
    for (d, v) in direct.nodes.iter().zip(&via.nodes) {
        assert_eq!(v.status, Status::Ok, "{v:?}");
        assert_eq!(d.hostname, v.hostname);
        assert_eq!(v.agent.as_ref().map(|a| a.backend.as_str()), Some("prometheus"));
        let dk: Vec<String> = d.gpus.iter().map(key).collect();
        let vk: Vec<String> = v.gpus.iter().map(key).collect();
        assert_eq!(dk, vk);
    }
    // The blank sentinel went through Prometheus and is still absent.
    assert_eq!(via.nodes[0].gpus[0].hbm_temp_c, None);
    assert_eq!(via.nodes[0].gpus[1].mig.len(), 2);
    assert_eq!(via.nodes[1].gpus[1].util_pct, Some(99));
}

pub fn a_bad_match_is_prometheus_error_in_one_line() {
    let (a, b) = two_nodes();
    let prom = Prometheus::start(&[a.addr(), b.addr()]);
    prom.wait_scrapes(2, 1);
    for (m, needle) in [
        ("job=~\"(\"", "parse error"),
        ("{job=\"nope\"}", "no dcgm-exporter or fleetop GPU series"),
    ] {
        let out = fleetop()
            .args(["export", "--once", "--prometheus", &prom.url(), "--prometheus-match", m])
            .output()
            .expect("runs");
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains(needle) && err.contains(&prom.url()),
            "{needle:?} not in {err}"
        );
    }
}
