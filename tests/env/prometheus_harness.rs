//! A real Prometheus (Debian's /usr/bin/prometheus) on a loopback port of its
//! own (it binds port 0; the kernel says which it got), with
//! a generated config and its own data directory, killed when the test ends.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use fleetop::export::Snapshot;

use crate::ports::wait_listening_port;
use crate::{Killed, fleetop};

const BIN: &str = "/usr/bin/prometheus";

const VICTORIA: &str = "/usr/bin/victoria-metrics";

/// Debian's VictoriaMetrics (a Prometheus-compatible store that shards:
/// the path past one console that docs/PERFORMANCE.md names).
pub fn victoria_installed() -> bool {
    Path::new(VICTORIA).exists()
        && std::process::Command::new(VICTORIA)
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
}

pub fn installed() -> bool {
    Path::new(BIN).exists()
        && std::process::Command::new(BIN)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

pub struct Prometheus {
    pub port: u16,
    _child: Killed,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `targets` (host:port) as job "dcgm" every second.
    pub fn start(targets: &[String]) -> Prometheus {
        Prometheus::start_labelled(targets, &[])
    }

    /// As `start`, adding `labels` to every series scraped (a target
    /// label, as `static_configs: [{labels: ...}]` adds it).
    pub fn start_labelled(targets: &[String], labels: &[(&str, &str)]) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let list = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}: '{v}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let cfg = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: [{list}]\n        labels: {{{labels}}}\n"
        );
        let cfg_path = dir.path().join("prometheus.yml");
        std::fs::write(&cfg_path, cfg).expect("write config");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = std::process::Command::new(BIN)
            .arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let port = wait_listening_port(child.id(), "prometheus");
        let p = Prometheus {
            port,
            _child: Killed(child),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/-/ready").is_none_or(|(s, _)| s != 200) {
            assert!(Instant::now() < deadline, "prometheus not ready in 60 s: {}", p.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// VictoriaMetrics scraping `targets` the same way, serving the same
    /// query API (as a store fleetop reads with `--prometheus`).
    pub fn start_victoria(targets: &[String]) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let list = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        let cfg = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: [{list}]\n"
        );
        let cfg_path = dir.path().join("scrape.yml");
        std::fs::write(&cfg_path, cfg).expect("write config");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = std::process::Command::new(VICTORIA)
            .arg(format!("-promscrape.config={}", cfg_path.display()))
            .arg(format!("-storageDataPath={}", dir.path().join("data").display()))
            .arg("-httpListenAddr=127.0.0.1:0")
            // Fresh samples visible at once (its default hides the last 30 s).
            .arg("-search.latencyOffset=1s")
            .arg("-search.disableCache")
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("victoria-metrics starts");
        let port = wait_listening_port(child.id(), "victoria-metrics");
        let p = Prometheus {
            port,
            _child: Killed(child),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/health").is_none_or(|(s, _)| s != 200) {
            assert!(
                Instant::now() < deadline,
                "victoria-metrics not ready in 60 s: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// One instant query's JSON answer.
    pub fn query(&self, q: &str) -> serde_json::Value {
        let (status, body) = http_get(self.port, &format!("/api/v1/query?query={}", encode(q))).expect("answer");
        assert_eq!(status, 200, "{q}: {body}");
        serde_json::from_str(&body).expect("json")
    }

    /// Waits until every target has been scraped successfully `n` times.
    pub fn wait_scrapes(&self, targets: usize, n: u32) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self.query(&format!("count(sum_over_time(up[1m]) >= {n})"));
            let count = ok["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|s| s.parse::<usize>().ok())
                .unwrap_or(0);
            if count >= targets {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{n} scrapes of {targets} targets not seen in 60 s"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A plain HTTP/1.1 GET on loopback: (status, body).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(c, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    c.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `fleetop export --once` with `args`, allowed `timeout` ("20s"): the
/// snapshot and what was logged (warnings go to stderr).
pub fn export_once(timeout: &str, args: &[&str]) -> (Snapshot, String) {
    let out = fleetop()
        .args(["export", "--once", "--scrape-interval", "1s", "--timeout", timeout])
        .args(args)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap = serde_json::from_slice(&out.stdout).expect("a snapshot");
    (snap, String::from_utf8_lossy(&out.stderr).into_owned())
}
