//! `fleetop watch` against the real Alertmanager (Debian's
//! `prometheus-alertmanager`), started on loopback with clustering off,
//! temp storage, and a route that groups by [alertname, node] and sends to
//! a webhook receiver: a small HTTP server in this test. The demo runs a
//! scripted fleet (hidden `--demo-scenarios`): gpu01 loses a GPU with XID
//! 79, gpu02 overheats and throttles; the faults begin a few seconds after
//! start and, in the first test, end, so the alerts resolve.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Killed, free_port};

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

pub fn installed() -> bool {
    Path::new(ALERTMANAGER).exists()
}

/// The webhook receiver Alertmanager notifies: keeps every body it gets.
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let port = listener.local_addr().expect("addr").port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let store = got.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let store = store.clone();
                std::thread::spawn(move || serve(conn, &store));
            }
        });
        Receiver { port, got }
    }

    fn all(&self) -> Vec<Value> {
        self.got.lock().expect("lock").clone()
    }

    /// Waits (at most `within`, a deadline for something to happen, not a
    /// measure of speed) until some notification satisfies `want`.
    fn wait(&self, what: &str, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            if let Some(v) = self.all().into_iter().find(|v| want(v)) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "no notification {what} within {within:?}; got: {:#?}",
                self.all()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// One HTTP/1.1 request per connection: read it, keep the JSON body, answer 200.
fn serve(conn: TcpStream, store: &Mutex<Vec<Value>>) {
    let mut reader = BufReader::new(conn);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // Request line, then headers up to the blank line.
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(v) = serde_json::from_slice(&body) {
            store.lock().expect("lock").push(v);
        }
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        if reader.get_mut().write_all(ok).is_err() {
            return;
        }
    }
}

/// A running Alertmanager, killed at the end.
struct Alertmanager {
    _child: Killed,
    _dir: tempfile::TempDir,
}

fn start_alertmanager(port: u16, receiver: u16) -> Alertmanager {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &config,
        format!(
            "route:
  receiver: test
  group_by: [alertname, node]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: http://127.0.0.1:{receiver}/
        send_resolved: true
"
        ),
    )
    .expect("write config");
    let child = Command::new(ALERTMANAGER)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // No cluster: no gossip port, no peers.
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start alertmanager");
    let am = Alertmanager {
        _child: Killed(child),
        _dir: dir,
    };
    let end = Instant::now() + Duration::from_secs(60);
    while !ready(port) {
        assert!(Instant::now() < end, "alertmanager on {port} never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    am
}

fn ready(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let req = format!("GET /-/ready HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    s.write_all(req.as_bytes()).is_ok() && s.read_to_string(&mut out).is_ok() && out.starts_with("HTTP/1.1 200")
}

/// `fleetop watch` on the scripted demo; its stderr lines are kept.
struct Watch {
    child: Option<Child>,
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

fn start_watch(am_port: u16, fault_for: Option<&str>) -> Watch {
    let dir = tempfile::tempdir().expect("tempdir");
    let config: PathBuf = dir.path().join("config.toml");
    // A short XID hold, so the XID alert resolves within the test; a short
    // repost, so re-posting is exercised too.
    std::fs::write(
        &config,
        "[thresholds]\nxid_hold = \"6s\"\n[notify]\nrepost = \"5s\"\ntimeout = \"2s\"\n",
    )
    .expect("write config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetop"));
    cmd.env("XDG_CONFIG_HOME", dir.path())
        .env("FLEETOP_LOG", "info")
        .arg("--config")
        .arg(&config)
        .args([
            "watch",
            "--demo",
            "--gpus",
            "2",
            "--demo-scenarios",
            "xid79,thermal-throttle",
            "--demo-fault-after",
            "3s",
            "--alertmanager",
        ])
        .arg(format!("http://127.0.0.1:{am_port}"));
    if let Some(d) = fault_for {
        cmd.args(["--demo-fault-for", d]);
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fleetop watch");
    let log = Arc::new(Mutex::new(Vec::new()));
    let lines = log.clone();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            lines.lock().expect("lock").push(line);
        }
    });
    Watch {
        child: Some(child),
        log,
        _dir: dir,
    }
}

impl Watch {
    fn log(&self) -> String {
        self.log.lock().expect("lock").join("\n")
    }

    fn wait_log(&mut self, needle: &str, within: Duration) {
        let end = Instant::now() + within;
        while !self.log().contains(needle) {
            assert!(Instant::now() < end, "no '{needle}' in fleetop's log:\n{}", self.log());
            assert!(self.running(), "fleetop watch exited:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGTERM, and the exit status it ends with.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid, with a valid signal.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < end, "fleetop watch ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn group<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v["groupLabels"][key].as_str()
}

/// A notification for the group (alertname, node) with this status.
fn is(v: &Value, alertname: &str, node: &str, status: &str) -> bool {
    group(v, "alertname") == Some(alertname) && group(v, "node") == Some(node) && v["status"] == status
}

const WITHIN: Duration = Duration::from_secs(120);

pub fn xid_and_thermal_alerts_arrive_grouped_and_resolve_when_the_faults_clear() {
    let receiver = Receiver::start();
    let am_port = free_port();
    let _am = start_alertmanager(am_port, receiver.port);
    let mut watch = start_watch(am_port, Some("15s"));

    let xid = receiver.wait("firing FleetopXid on gpu01", WITHIN, |v| {
        is(v, "FleetopXid", "gpu01", "firing")
    });
    let hot = receiver.wait("firing FleetopThrottled on gpu02", WITHIN, |v| {
        is(v, "FleetopThrottled", "gpu02", "firing")
    });
    // The labels a router needs, on every alert of the group.
    for (v, kind, node) in [(&xid, "xid", "gpu01"), (&hot, "throttled", "gpu02")] {
        let alerts = v["alerts"].as_array().expect("alerts");
        assert!(!alerts.is_empty(), "{v:#}");
        for a in alerts {
            let l = &a["labels"];
            assert_eq!(l["kind"], kind, "{v:#}");
            assert_eq!(l["node"], node, "{v:#}");
            assert_eq!(l["severity"], "crit", "{v:#}");
            assert!(l["gpu"].is_string(), "{v:#}");
            assert!(
                a["annotations"]["summary"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(node)),
                "{v:#}"
            );
        }
        // Grouped as configured: by alertname and node, nothing else.
        let keys: Vec<&String> = v["groupLabels"].as_object().expect("groupLabels").keys().collect();
        assert_eq!(keys, ["alertname", "node"], "{v:#}");
    }
    let xid_text = xid["alerts"][0]["annotations"]["summary"].as_str().unwrap_or("");
    assert!(xid_text.contains("79"), "the XID is named: {xid_text}");

    // The faults end: both groups are resolved.
    receiver.wait("resolved FleetopXid on gpu01", WITHIN, |v| {
        is(v, "FleetopXid", "gpu01", "resolved")
    });
    receiver.wait("resolved FleetopThrottled on gpu02", WITHIN, |v| {
        is(v, "FleetopThrottled", "gpu02", "resolved")
    });
    // No notification ever mixes groups.
    for v in receiver.all() {
        let names: std::collections::BTreeSet<String> = v["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| format!("{}/{}", a["labels"]["alertname"], a["labels"]["node"]))
            .collect();
        assert_eq!(names.len(), 1, "one group per notification: {v:#}");
    }
    let status = watch.terminate();
    assert!(
        status.success(),
        "SIGTERM ends watch cleanly: {status:?}\n{}",
        watch.log()
    );
}

pub fn alertmanager_down_at_start_gets_the_alerts_once_it_is_up() {
    let receiver = Receiver::start();
    let am_port = free_port();
    let mut watch = start_watch(am_port, None);
    // fleetop raises the alerts and fails to post them: it says so and goes on.
    watch.wait_log("alert raised: gpu01", WITHIN);
    watch.wait_log("keeping", WITHIN);
    assert!(watch.running(), "{}", watch.log());
    let _am = start_alertmanager(am_port, receiver.port);
    receiver.wait("firing FleetopXid on gpu01 after the start", WITHIN, |v| {
        is(v, "FleetopXid", "gpu01", "firing")
    });
    receiver.wait("firing FleetopThrottled on gpu02 after the start", WITHIN, |v| {
        is(v, "FleetopThrottled", "gpu02", "firing")
    });
    watch.wait_log("reachable again", WITHIN);
    let status = watch.terminate();
    assert!(status.success(), "{status:?}\n{}", watch.log());
}
