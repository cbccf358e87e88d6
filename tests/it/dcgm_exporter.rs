//! `--dcgm-exporter`: dcgm-exporter text (written from its documented
//! format, with a MIG GPU and DCGM's blank sentinel) served over HTTP on
//! loopback and read through `fleetop export`; bad peers each give their
//! own node a clear error while the good node is still exported.

use fleetop::export::{Node, Snapshot, Status};

use crate::dcgm::{DcgmGpu, HttpServer, Reply, dcgm_text, mixed_node};
use crate::fleetop;

pub(crate) fn export(args: &[&str]) -> Snapshot {
    let out = fleetop()
        .args([
            "export",
            "--once",
            "--scrape-interval",
            "1s",
            "--scrape-timeout",
            "2s",
            "--timeout",
            "20s",
        ])
        .args(args)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a snapshot")
}

pub(crate) fn node<'a>(snap: &'a Snapshot, addr: &str) -> &'a Node {
    snap.nodes
        .iter()
        .find(|n| n.address == addr)
        .unwrap_or_else(|| panic!("no node at {addr} in {:?}", snap.nodes))
}

/// A page of 1,000 GPUs on one node: the node is exported with the 64 a
/// node may have, and one warning naming it says the rest were dropped.
#[test]
fn a_page_of_1000_gpus_on_a_node_yields_64_and_one_warning_naming_it() {
    let mut text = String::new();
    for g in 0..1000 {
        text.push_str(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{g}\",UUID=\"GPU-{g}\",Hostname=\"bigpage\"}} 5\n\
             DCGM_FI_DEV_GPU_TEMP{{gpu=\"{g}\",UUID=\"GPU-{g}\",Hostname=\"bigpage\"}} 40\n"
        ));
    }
    let server = HttpServer::start(Reply::Metrics(text));
    let out = fleetop()
        .args(["export", "--count", "3", "--interval", "1s", "--format", "ndjson"])
        .args(["--scrape-interval", "1s", "--scrape-timeout", "5s", "--timeout", "20s"])
        .args(["--dcgm-exporter", &server.addr()])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let snap: Snapshot = serde_json::from_str(&first).expect("a snapshot");
    assert_eq!(node(&snap, &server.addr()).gpus.len(), 64);
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("more than 64 GPUs")).collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    // Named as the node's target is named (its host).
    let host = server
        .addr()
        .rsplit_once(':')
        .map(|(h, _)| h.to_string())
        .unwrap_or_default();
    assert!(
        warned[0].contains(&format!(" {host}: ")) && warned[0].contains("1872 GPU series"),
        "{stderr}"
    );
}

#[test]
fn a_dcgm_exporter_node_is_exported_like_an_agent_node() {
    let server = HttpServer::start(Reply::Metrics(dcgm_text("gpu-a", &mixed_node())));
    let snap = export(&["--dcgm-exporter", &server.addr()]);
    let n = node(&snap, &server.addr());
    assert_eq!(n.status, Status::Ok, "{n:?}");
    assert_eq!(n.hostname.as_deref(), Some("gpu-a"));
    assert_eq!(n.agent.as_ref().map(|a| a.backend.as_str()), Some("dcgm-exporter"));
    assert_eq!(n.gpus.len(), 2);
    let (g0, g1) = (&n.gpus[0], &n.gpus[1]);
    assert_eq!(g0.model, "NVIDIA H100 80GB HBM3");
    assert_eq!(g1.model, "NVIDIA A100-SXM4-80GB");
    assert_eq!(g0.uuid, DcgmGpu::new(0, "", 0).uuid());
    assert_eq!(g0.pci_bus_id, "00000000:07:00.0");
    assert_eq!(g0.util_pct, Some(87));
    assert_eq!(g0.temp_c, Some(40));
    // The sentinel is absent, never a temperature.
    assert_eq!(g0.hbm_temp_c, None);
    assert_eq!(g1.hbm_temp_c, Some(51));
    assert_eq!(g0.power_w, Some(100.5));
    assert_eq!(g0.mem_used_bytes, Some(1000 << 20));
    assert_eq!(g0.mem_total_bytes, Some(81_000 << 20));
    assert_eq!(g0.sm_clock_mhz, Some(1980));
    // What dcgm-exporter's default counters lack stays absent.
    assert_eq!(g0.mem_clock_mhz, None);
    assert_eq!(g0.throttle_mask, None);
    assert_eq!(g0.sm_active_pct, None);
    assert!(n.host.is_none());
    // MIG: a reading per instance.
    assert_eq!(g1.mig.len(), 2, "{g1:?}");
    assert_eq!(g1.mig[0].gpu_instance_id, 1);
    assert_eq!(g1.mig[0].profile, "3g.40gb");
    assert_eq!(g1.mig[0].mem_used_bytes, Some(2048 << 20));
    assert_eq!(g1.mig[1].profile, "1g.10gb");
    assert_eq!(g1.mem_used_bytes, Some((2048 + 512) << 20));
}

#[test]
fn bad_peers_get_their_own_error_and_the_good_node_is_still_exported() {
    let text = dcgm_text("gpu-good", &mixed_node());
    let good = HttpServer::start(Reply::Metrics(text.clone()));
    let html = HttpServer::start(Reply::html());
    let cut = HttpServer::start(Reply::truncated(&text));
    let failing = HttpServer::start(Reply::status_500());
    let slow = HttpServer::start(Reply::Hang);
    let not_dcgm = HttpServer::start(Reply::Metrics("# TYPE up gauge\nup 1\n".into()));
    let hosts = [&good, &html, &cut, &failing, &slow, &not_dcgm]
        .map(|s| s.addr())
        .join(",");
    let snap = export(&["--dcgm-exporter", &hosts]);
    assert_eq!(snap.nodes.len(), 6);
    let g = node(&snap, &good.addr());
    assert_eq!(g.status, Status::Ok);
    assert_eq!(g.gpus.len(), 2);
    assert_eq!(g.gpus[0].util_pct, Some(87));
    for (s, needle) in [
        (&html, "HTML"),
        (&cut, "truncated"),
        (&failing, "HTTP 500"),
        (&slow, "timed out"),
        (&not_dcgm, "no DCGM GPU series"),
    ] {
        let n = node(&snap, &s.addr());
        assert_eq!(n.status, Status::Unreachable, "{n:?}");
        assert!(n.gpus.is_empty());
        let detail = n.status_detail.as_deref().unwrap_or_default();
        assert!(detail.contains(needle), "{needle:?} not in {detail:?}");
        assert!(!detail.contains('\n'), "{detail:?}");
    }
}

#[test]
fn when_no_exporter_answers_export_fails_naming_why() {
    let server = HttpServer::start(Reply::status_500());
    let out = fleetop()
        .args(["export", "--once", "--scrape-interval", "1s", "--timeout", "5s"])
        .args(["--dcgm-exporter", &server.addr()])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no node answered") && err.contains("HTTP 500"), "{err}");
    // The same endpoint, fixed, is read.
    server.set(Reply::Metrics(dcgm_text("gpu-back", &mixed_node())));
    let snap = export(&["--dcgm-exporter", &server.addr()]);
    assert_eq!(node(&snap, &server.addr()).hostname.as_deref(), Some("gpu-back"));
}

/// A dcgm-exporter as the GPU Operator often runs it: its own counters
/// file with profiling fields only, per MIG instance, and the Kubernetes
/// mapping's `pod`/`namespace`/`container` labels (the shape of
/// dcgm-exporter's output for `DCGM_FI_PROF_*` fields on a MIG GPU), plus a
/// field fleetop does not read.
fn profiling_only_text() -> String {
    let base = |gpu: u32, gi: u32, profile: &str| {
        format!(
            "gpu=\"{gpu}\",UUID=\"GPU-5c1ab0e6-0000-4000-8000-00000000000{gpu}\",pci_bus_id=\"00000000:0{gpu}:00.0\",\
             device=\"nvidia{gpu}\",modelName=\"NVIDIA A100-SXM4-80GB\",GPU_I_PROFILE=\"{profile}\",GPU_I_ID=\"{gi}\",\
             Hostname=\"gpu-k8s-1\",DCGM_FI_DRIVER_VERSION=\"550.90.07\""
        )
    };
    let pod = |ns: &str, pod: &str, c: &str| format!(",container=\"{c}\",namespace=\"{ns}\",pod=\"{pod}\"");
    let mut t = String::new();
    t.push_str("# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n");
    t.push_str("# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n");
    t.push_str(&format!(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{}{}}} 0.815\n",
        base(0, 1, "3g.40gb"),
        pod("ml", "train-0", "trainer")
    ));
    t.push_str(&format!(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{}}} 0.000000\n",
        base(0, 2, "3g.40gb")
    ));
    t.push_str("# HELP DCGM_FI_PROF_PIPE_FP16_ACTIVE Ratio of cycles the fp16 pipes are active.\n");
    t.push_str("# TYPE DCGM_FI_PROF_PIPE_FP16_ACTIVE gauge\n");
    t.push_str(&format!(
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE{{{}{}}} 0.31\n",
        base(0, 1, "3g.40gb"),
        pod("ml", "train-0", "trainer")
    ));
    // A whole GPU (no MIG) held by one pod.
    let whole = |gpu: u32| {
        format!(
            "gpu=\"{gpu}\",UUID=\"GPU-5c1ab0e6-0000-4000-8000-00000000000{gpu}\",pci_bus_id=\"00000000:0{gpu}:00.0\",\
             device=\"nvidia{gpu}\",modelName=\"NVIDIA A100-SXM4-80GB\",Hostname=\"gpu-k8s-1\""
        )
    };
    t.push_str(&format!(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{}{}}} 0.42\n",
        whole(1),
        pod("infer", "server-7d9", "triton")
    ));
    t
}

#[test]
fn a_profiling_only_exporter_shows_what_it_has_the_rest_absent_and_its_pods() {
    let server = HttpServer::start(Reply::Metrics(profiling_only_text()));
    let snap = export(&["--dcgm-exporter", &server.addr()]);
    let n = node(&snap, &server.addr());
    assert_eq!(n.status, Status::Ok, "refused: {:?}", n.status_detail);
    assert_eq!(n.gpus.len(), 2, "{:?}", n.gpus);
    let (g0, g1) = (&n.gpus[0], &n.gpus[1]);
    // The MIG GPU: each instance's activity; what was not exported is absent.
    let gi: Vec<(u32, Option<u32>)> = g0.mig.iter().map(|m| (m.gpu_instance_id, m.util_pct)).collect();
    assert_eq!(gi, [(1, Some(82)), (2, Some(0))]);
    assert_eq!(
        (g0.util_pct, g0.temp_c, g0.power_w, g0.mem_used_bytes),
        (None, None, None, None)
    );
    // The whole GPU: the profiling module's activity as its utilization.
    assert_eq!(g1.util_pct, Some(42));
    assert_eq!(g1.temp_c, None);
    // The pods, from the exporter's Kubernetes labels.
    let pods = |g: &fleetop::export::Gpu| -> Vec<String> {
        g.pods
            .iter()
            .map(|p| format!("{}/{} ({})", p.namespace, p.pod, p.container))
            .collect()
    };
    assert_eq!(pods(g0), ["ml/train-0 (trainer)"]);
    assert_eq!(pods(g1), ["infer/server-7d9 (triton)"]);
}

/// The probes every source meets (docs/security.md): an exporter that
/// trickles, one that never stops, and one whose labels hold terminal
/// escapes and bidi overrides. Each costs its own node only, within the
/// scrape timeout, and nothing it says is kept raw.
#[test]
fn a_trickling_an_endless_and_a_hostile_exporter_each_cost_only_their_node() {
    let good = HttpServer::start(Reply::Metrics(dcgm_text("gpu-good", &mixed_node())));
    let trickle = HttpServer::start(Reply::Trickle);
    let endless = HttpServer::start(Reply::Endless);
    let raw = "gpu\u{1b}]0;owned\u{7}\u{202e}x";
    let hostile_text = dcgm_text(raw, &mixed_node())
        .replace("NVIDIA H100 80GB HBM3", "H100\u{1b}[2J\u{202e}")
        .replace("pod=\"\"", "pod=\"p\u{1b}[31m\"")
        .replace("namespace=\"\"", "namespace=\"ns\"");
    let hostile = HttpServer::start(Reply::Metrics(hostile_text));
    let hosts = [&good, &trickle, &endless, &hostile].map(|s| s.addr()).join(",");
    let started = std::time::Instant::now();
    let snap = export(&["--dcgm-exporter", &hosts]);
    // Not a speed test: a trickle that held the export would take minutes.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(node(&snap, &good.addr()).status, Status::Ok);
    for (s, needle) in [(&trickle, "timed out"), (&endless, "over the limit")] {
        let n = node(&snap, &s.addr());
        assert_eq!(n.status, Status::Unreachable, "{n:?}");
        let detail = n.status_detail.as_deref().unwrap_or_default();
        assert!(detail.contains(needle), "{needle:?} not in {detail:?}");
    }
    let h = node(&snap, &hostile.addr());
    assert_eq!(h.status, Status::Ok, "{h:?}");
    let doc = serde_json::to_string(h).expect("json");
    for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!doc.contains(bad), "{bad:?} kept raw in {doc}");
    }
    assert_eq!(h.hostname.as_deref(), Some("gpu\\u{1b}]0;owned\\u{7}\\u{202e}x"));
    assert_eq!(h.gpus[0].model, "H100\\u{1b}[2J\\u{202e}");
    assert!(doc.contains("p\\\\u{1b}[31m"), "the pod, escaped: {doc}");
}
