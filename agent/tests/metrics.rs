//! `fleetop-agent --metrics-listen`: a simulated agent process scraped over
//! real loopback HTTP, as Prometheus would.

mod common;

// How a test learns the port the agent bound (docs/testing.md#ports).
#[allow(dead_code)]
#[path = "../../tests/support/ports.rs"]
mod ports;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::scrape::{self, DCGM_LABELS, get, parse, scrape_until};

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A simulated 8-GPU agent serving /metrics on the returned port.
fn agent(extra: &[&str]) -> (Agent, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--backend", "sim", "--sim-gpus", "8", "--sim-ib-ports", "2"])
        .args(["--sim-hostname", "n1", "--interval", "200ms", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .args(extra)
        .env("FLEETOP_LOG", ports::agent_log_filter("warn"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent starts");
    let mut log = ports::AgentLog::of(&mut child);
    let a = Agent(child);
    let port = log.metrics().port();
    (a, port)
}

fn has_gpus(s: &scrape::Scrape) -> bool {
    s.named("DCGM_FI_DEV_GPU_TEMP").len() == 8
}

#[test]
fn dcgm_exporter_series_carry_its_names_types_and_labels() {
    let (_a, port) = agent(&[]);
    let s = scrape_until(port, &[], has_gpus);
    let want = [
        ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
        ("DCGM_FI_DEV_FB_USED", "gauge"),
        ("DCGM_FI_DEV_FB_FREE", "gauge"),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
        ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
        ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
        ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"),
        ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"),
        ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
        ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge"),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ];
    for (name, kind) in want {
        assert_eq!(s.types.get(name).map(String::as_str), Some(kind), "{name}");
        let series = s.named(name);
        assert_eq!(series.len(), 8, "{name}: one series per GPU");
        for x in series {
            for l in DCGM_LABELS {
                assert!(
                    x.labels.get(l).is_some_and(|v| !v.is_empty()),
                    "{name} lacks {l}: {x:?}"
                );
            }
            assert_eq!(x.labels["device"], format!("nvidia{}", x.labels["gpu"]));
            assert_eq!(x.labels["Hostname"], "n1");
            assert_eq!(x.labels["modelName"], "NVIDIA H100 80GB HBM3");
            // The training scenario's job holds every GPU.
            assert!(
                x.labels.get("hpc_job").is_some_and(|j| j.parse::<u64>().is_ok()),
                "{x:?}"
            );
        }
    }
    // Ratios as DCGM gives them, percentages as dcgm-exporter's % fields.
    for x in s.named("DCGM_FI_PROF_SM_ACTIVE") {
        assert!((0.0..=1.0).contains(&x.value), "{x:?}");
    }
    for x in s.named("DCGM_FI_DEV_GPU_UTIL") {
        assert!((0.0..=100.0).contains(&x.value) && x.value > 1.0, "{x:?}");
    }
    // MiB: an 80 GB GPU's used and free add up to its size.
    let used = s.one("DCGM_FI_DEV_FB_USED", &[("gpu", "0")]).expect("FB_USED").value;
    let free = s.one("DCGM_FI_DEV_FB_FREE", &[("gpu", "0")]).expect("FB_FREE").value;
    assert!((70_000.0..90_000.0).contains(&(used + free)), "{used} + {free}");

    // The same GPUs as the agent's own JSON sample (the simulation is
    // the same for the same seed and host name).
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args([
            "sample",
            "--once",
            "--backend",
            "sim",
            "--sim-gpus",
            "8",
            "--sim-hostname",
            "n1",
        ])
        .output()
        .expect("sample runs");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for g in doc["info"]["gpus"].as_array().expect("gpus") {
        let idx = g["index"].as_u64().unwrap_or(0).to_string();
        let x = s.one("DCGM_FI_DEV_GPU_TEMP", &[("gpu", &idx)]).expect("GPU in scrape");
        assert_eq!(x.labels["UUID"], g["uuid"].as_str().unwrap_or_default());
        assert_eq!(x.labels["pci_bus_id"], g["pci_bus_id"].as_str().unwrap_or_default());
    }

    // fleetop's own: a series per throttle reason, IB ports, agent health.
    assert_eq!(s.named("fleetop_gpu_throttle_reason").len(), 8 * 9);
    assert_eq!(s.named("node_infiniband_state_id").len(), 2);
    assert_eq!(s.types["node_infiniband_port_data_received_bytes_total"], "counter");
    assert_eq!(s.named("fleetop_agent_up")[0].value, 1.0);
    assert!(s.named("fleetop_agent_samples_total")[0].value >= 1.0);
}

#[test]
fn gzip_when_asked_and_plain_text_otherwise() {
    let (_a, port) = agent(&[]);
    scrape_until(port, &[], has_gpus);
    let plain = get(port, "/metrics", &[]);
    assert_eq!(plain.status, 200);
    assert_eq!(plain.headers.get("content-encoding"), None);
    assert!(plain.headers["content-type"].starts_with("text/plain; version=0.0.4"));
    let gz = get(port, "/metrics", &["Accept-Encoding: gzip"]);
    assert_eq!(gz.status, 200);
    assert_eq!(gz.headers.get("content-encoding").map(String::as_str), Some("gzip"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_string(&mut text)
        .expect("gzip body");
    assert_eq!(parse(&text).named("DCGM_FI_DEV_GPU_TEMP").len(), 8);
    assert!(gz.body.len() * 4 < text.len(), "{} of {}", gz.body.len(), text.len());
}

#[test]
fn other_paths_are_404_and_garbage_never_ends_the_agent() {
    let (mut a, port) = agent(&[]);
    assert_eq!(get(port, "/", &[]).status, 404);
    assert_eq!(get(port, "/metricsx", &[]).status, 404);
    assert_eq!(get(port, "/../etc/passwd", &[]).status, 404);
    let bad = scrape::raw(port, b"\x00\x01garbage\r\n\r\n").expect("answered or closed");
    assert!(
        bad.is_empty() || bad.starts_with(b"HTTP/1.1 400"),
        "{:?}",
        String::from_utf8_lossy(&bad)
    );
    // Headers past any sane size: refused, not buffered for ever.
    let mut huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 2 << 20));
    huge.extend(b"\r\n\r\n");
    let r = scrape::raw(port, &huge).unwrap_or_default();
    assert!(
        !r.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&r[..r.len().min(100)])
    );
    // A connection that closes half-way through its request.
    if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
        let _ = s.write_all(b"GET /metr");
    }
    assert_eq!(a.0.try_wait().expect("wait"), None, "the agent is still running");
    assert_eq!(get(port, "/metrics", &[]).status, 200);
}

#[test]
fn with_a_telemetry_token_metrics_need_it_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-token\n").expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let (_a, port) = agent(&["--token-file", file.to_str().expect("path")]);
    let none = get(port, "/metrics", &[]);
    assert_eq!(none.status, 401);
    assert!(none.text().contains("telemetry token"));
    assert!(!none.text().contains("DCGM"));
    assert_eq!(get(port, "/metrics", &["Authorization: Bearer wrong"]).status, 401);
    let ok = scrape_until(port, &["Authorization: Bearer s3cret-token"], has_gpus);
    assert_eq!(ok.named("fleetop_agent_up").len(), 1);
}

#[test]
fn connections_past_the_cap_are_closed_and_the_slots_come_back() {
    let (_a, port) = agent(&["--metrics-max-connections", "2"]);
    // Two kept-alive connections, each answered once: both slots are held.
    let held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
            s.write_all(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
            let mut buf = [0u8; 12];
            s.read_exact(&mut buf).expect("an answer");
            assert_eq!(&buf, b"HTTP/1.1 404");
            s
        })
        .collect();
    let third = scrape::raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(
        third.is_err() || third.as_ref().is_ok_and(|b| b.is_empty()),
        "{third:?}"
    );
    drop(held);
    let start = Instant::now();
    loop {
        if scrape::raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .is_ok_and(|b| b.starts_with(b"HTTP/1.1 200"))
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "slots never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_swarm_serves_metrics_per_agent_for_load_tests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (hosts, metrics) = (dir.path().join("hosts"), dir.path().join("metrics"));
    let child = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["swarm", "--count", "2", "--sim-gpus", "2", "--interval", "200ms"])
        .arg("--hostfile")
        .arg(&hosts)
        .arg("--metrics-hostfile")
        .arg(&metrics)
        .env("FLEETOP_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("swarm starts");
    let _swarm = Agent(child);
    let start = Instant::now();
    // The gRPC hostfile is written last: both files are whole once it is there.
    while !hosts.exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "no hostfile");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&metrics).expect("metrics hostfile");
    let names: Vec<String> = text
        .lines()
        .map(|addr| {
            let port: u16 = addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("host:port");
            let s = scrape_until(port, &[], |s| s.named("DCGM_FI_DEV_GPU_TEMP").len() == 2);
            s.named("fleetop_agent_up")[0].labels["Hostname"].clone()
        })
        .collect();
    assert_eq!(names, ["sim0001", "sim0002"]);
}

/// A connection that sends a request head one byte at a time and never
/// ends it (a slowloris), from a thread of its own until dropped or closed.
struct Trickle {
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Trickle {
    fn start(port: u16, every: Duration) -> Trickle {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(every)).expect("timeout");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .expect("send");
        let (closed, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (c, st) = (closed.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            while !st.load(Ordering::SeqCst) {
                // One byte, then wait for an answer or a close as long as
                // the pause between bytes.
                if s.write_all(b"a").is_err() {
                    break;
                }
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            c.store(true, Ordering::SeqCst);
        });
        Trickle {
            closed,
            stop,
            thread: Some(thread),
        }
    }

    fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[test]
fn trickled_request_heads_cannot_take_every_slot_from_scrapes() {
    // A head deadline far away: only admitting the scrape in place of an
    // unfinished head lets it in now.
    let (a, port) = agent(&["--metrics-max-connections", "2", "--handshake-timeout", "10m"]);
    let slow: Vec<Trickle> = (0..2)
        .map(|_| Trickle::start(port, Duration::from_millis(200)))
        .collect();
    // Both slots are taken (the agent has accepted both).
    std::thread::sleep(Duration::from_millis(300));
    let answer = scrape::raw(port, SCRAPE);
    assert!(
        answer.as_ref().is_ok_and(|b| b.starts_with(b"HTTP/1.1 200")),
        "a scrape while every slot holds an unfinished head: {:?}",
        answer.map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).to_string())
    );
    // The oldest unfinished head made room; the other one still trickles.
    let start = Instant::now();
    while !slow.iter().any(Trickle::closed) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no trickling connection was closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!slow[1].closed(), "the newer trickling connection is kept");
    drop(slow);
    drop(a);
}

#[test]
fn a_request_head_must_end_within_its_deadline_however_it_trickles() {
    let (_a, port) = agent(&["--handshake-timeout", "1s"]);
    // A byte every 100 ms: the idle timeout (60 s) never runs out.
    let slow = Trickle::start(port, Duration::from_millis(100));
    let start = Instant::now();
    while !slow.closed() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "a head trickled for 30 s is still open (its deadline is 1 s)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A scrape that sends its head at once is served all the same.
    assert_eq!(get(port, "/metrics", &[]).status, 200);
}

#[test]
fn a_right_token_is_served_while_wrong_ones_from_the_same_address_are_limited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-token\n").expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let (_a, port) = agent(&["--token-file", file.to_str().expect("path")]);
    let wrong = || get(port, "/metrics", &["Authorization: Bearer guess"]).status;
    // Wrong tokens until the address is limited.
    let mut tries = 0;
    while wrong() != 429 {
        tries += 1;
        assert!(tries < 50, "wrong tokens are never limited");
    }
    // The right token from the same address is served at once.
    assert_eq!(
        get(port, "/metrics", &["Authorization: Bearer s3cret-token"]).status,
        200,
        "a right token refused while wrong ones are limited"
    );
    // Wrong ones stay limited (the allowance refills one a second: one of
    // a few in a row is refused as too many).
    let statuses: Vec<u16> = (0..3).map(|_| wrong()).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 429 || *s == 401), "{statuses:?}");
}
