//! `fleetop watch` against the real Alertmanager (Debian's
//! `prometheus-alertmanager`), started on loopback with clustering off,
//! temp storage, and a route that groups by [alertname, node] and sends to
//! a webhook receiver: a small HTTP server in this test. The demo runs a
//! scripted fleet (hidden `--demo-scenarios`): gpu01 loses a GPU with XID
//! 79, gpu02 overheats and throttles; the faults begin a few seconds after
//! start and, in the first test, end, so the alerts resolve.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::ports::socket_activated;
use crate::support::receiver::Receiver;
use crate::support::watch::Watch;
use crate::support::{Killed, RefusedPort};

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

pub fn installed() -> bool {
    Path::new(ALERTMANAGER).exists()
}

/// A running Alertmanager, killed at the end.
pub struct Alertmanager {
    pub port: u16,
    _child: Killed,
    _dir: tempfile::TempDir,
}

/// Alertmanager on a port of its own, sending to the webhook `receiver`.
pub fn start_alertmanager(receiver: u16) -> Alertmanager {
    start_alertmanager_on(RefusedPort::new(), receiver)
}

/// Alertmanager on `port`: a port the test holds (clients were refused
/// there until now), handed to it as systemd would (socket activation), so
/// that no other test can take it meanwhile.
pub fn start_alertmanager_on(port: RefusedPort, receiver: u16) -> Alertmanager {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &config,
        format!(
            "global:
  resolve_timeout: 8s
route:
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
    let port_number = port.port;
    let child = socket_activated(ALERTMANAGER, port.listen())
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.path().join("data").display()))
        .arg("--web.systemd-socket")
        // No cluster: no gossip port, no peers.
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start alertmanager");
    let port = port_number;
    let am = Alertmanager {
        port,
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

/// `fleetop watch` on the scripted demo, posting to Alertmanager on `am_port`.
fn start_watch(am_port: u16, fault_for: Option<&str>) -> Watch {
    // A repost well under Alertmanager's resolve_timeout (8 s here); where
    // the faults end, a short XID hold too, so the XID alert resolves.
    let hold = if fault_for.is_some() {
        "[thresholds]\nxid_hold = \"6s\"\n"
    } else {
        ""
    };
    let config = format!("{hold}[notify]\nrepost = \"2s\"\ntimeout = \"2s\"\n");
    let mut args: Vec<String> = [
        "--demo-scenarios",
        "xid79,thermal-throttle",
        "--demo-fault-after",
        "3s",
        "--alertmanager",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("http://127.0.0.1:{am_port}"));
    if let Some(d) = fault_for {
        args.extend(["--demo-fault-for".to_string(), d.to_string()]);
    }
    Watch::start(&config, &args)
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
    let am = start_alertmanager(receiver.port);
    let mut watch = start_watch(am.port, Some("15s"));

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
    // Refused until Alertmanager starts on it.
    let am_port = RefusedPort::new();
    let mut watch = start_watch(am_port.port, None);
    // fleetop raises the alerts and fails to post them: it says so and goes on.
    watch.wait_log("alert raised: gpu01", WITHIN);
    watch.wait_log("keeping", WITHIN);
    assert!(watch.running(), "{}", watch.log());
    let _am = start_alertmanager_on(am_port, receiver.port);
    receiver.wait("firing FleetopXid on gpu01 after the start", WITHIN, |v| {
        is(v, "FleetopXid", "gpu01", "firing")
    });
    receiver.wait("firing FleetopThrottled on gpu02 after the start", WITHIN, |v| {
        is(v, "FleetopThrottled", "gpu02", "firing")
    });
    watch.wait_log("reachable again", WITHIN);
    // Posted again every 2 s, the alerts outlive Alertmanager's 8 s
    // resolve_timeout while the faults go on (nothing changes meanwhile).
    std::thread::sleep(Duration::from_secs(15));
    let early = receiver.all().into_iter().find(|v| v["status"] == "resolved");
    assert!(early.is_none(), "resolved while still firing: {early:#?}");
    let status = watch.terminate();
    assert!(status.success(), "{status:?}\n{}", watch.log());
}
