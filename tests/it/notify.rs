//! `fleetop watch --webhook`: events reach a real HTTP receiver, and a
//! receiver that is down loses the oldest events, counted, never the watch.

use std::time::Duration;

use crate::support::RefusedPort;
use crate::support::receiver::Receiver;
use crate::support::watch::Watch;

const WITHIN: Duration = Duration::from_secs(120);

fn args(extra: &[&str]) -> Vec<String> {
    ["--demo-scenarios", "xid79,thermal-throttle", "--demo-fault-after", "2s"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn webhook_gets_each_raised_alert_as_json() {
    let receiver = Receiver::start();
    let url = format!("http://127.0.0.1:{}/hook", receiver.port);
    let mut watch = Watch::start("", &args(&["--webhook", &url]));
    let xid = receiver.wait("xid raised", WITHIN, |v| {
        v["event"] == "raised" && v["alert"]["labels"]["kind"] == "xid"
    });
    assert_eq!(xid["version"], 1, "{xid:#}");
    assert_eq!(xid["dropped_total"], 0, "{xid:#}");
    let labels = &xid["alert"]["labels"];
    assert_eq!(labels["alertname"], "FleetopXid", "{xid:#}");
    assert_eq!(labels["node"], "gpu01", "{xid:#}");
    assert_eq!(labels["severity"], "crit", "{xid:#}");
    assert!(labels["gpu"].is_string(), "{xid:#}");
    // The lost GPU lists no processes now: the job is the one it ran when it last answered.
    assert!(labels["job"].is_string(), "{xid:#}");
    assert!(xid["alert"]["starts_at"].is_string(), "{xid:#}");
    assert!(xid["alert"].get("ends_at").is_none(), "{xid:#}");
    let hot = receiver.wait("throttled raised", WITHIN, |v| {
        v["event"] == "raised" && v["alert"]["labels"]["kind"] == "throttled"
    });
    // The job on the throttled GPU.
    assert!(hot["alert"]["labels"]["job"].is_string(), "{hot:#}");
    // Each alert once: the flags stay raised, their evidence moves, and
    // no event repeats.
    watch.wait_log("alert raised: gpu02", WITHIN);
    std::thread::sleep(Duration::from_secs(3));
    let mut seen = std::collections::BTreeSet::new();
    for v in receiver.all() {
        let key = format!("{} {}", v["event"], v["alert"]["labels"]);
        assert!(seen.insert(key.clone()), "sent twice: {key}");
    }
    assert!(watch.terminate().success(), "{}", watch.log());
}

#[test]
fn a_webhook_down_drops_the_oldest_events_counts_them_and_delivers_the_rest() {
    // Refused until the receiver listens on it, and no one else's meanwhile.
    let down = RefusedPort::new();
    let url = format!("http://127.0.0.1:{}/hook", down.port);
    // Room for one event: the four alerts of the two faulty nodes overflow it.
    let config = "[notify]\nwebhook_queue = 1\ntimeout = \"1s\"\n";
    let mut watch = Watch::start(config, &args(&["--webhook", &url]));
    watch.wait_log("dropped the oldest", WITHIN);
    assert!(watch.running(), "{}", watch.log());
    let receiver = Receiver::on(down.listen());
    let got = receiver.wait("an event after the receiver came up", WITHIN, |v| {
        v["event"] == "raised"
    });
    assert!(
        got["dropped_total"].as_u64().is_some_and(|n| n >= 1),
        "the count of dropped events travels with the next: {got:#}"
    );
    assert!(watch.terminate().success(), "{}", watch.log());
}

/// Runs fleetop expecting a refusal: its one line of stderr.
fn refused(args: &[&str]) -> String {
    let out = crate::support::fleetop()
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    assert!(!out.status.success(), "{args:?} was not refused");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn watch_refuses_bad_destinations_in_one_line_before_starting() {
    let err = refused(&["watch", "--demo", "--nodes", "1"]);
    assert!(err.contains("give --alertmanager URL or --webhook URL"), "{err}");
    for (flag, url) in [("--alertmanager", "am:9093"), ("--webhook", "ftp://hooks.example/x")] {
        let err = refused(&["watch", "--demo", "--nodes", "1", flag, url]);
        assert!(err.contains(flag) && err.contains(url), "{err}");
    }
}

#[test]
fn the_console_refuses_a_bad_destination_before_taking_the_terminal() {
    // No terminal here either: the URL is judged first, so its error is the one shown.
    let err = refused(&["demo", "--nodes", "1", "--webhook", "ftp://hooks.example/x"]);
    assert!(
        err.contains("--webhook") && err.contains("ftp://hooks.example/x"),
        "{err}"
    );
    // Before a subcommand the flags would be silently ignored: refused.
    let err = refused(&["--alertmanager", "http://am:9093", "export", "--demo", "--nodes", "1"]);
    assert!(err.contains("go after the subcommand"), "{err}");
}
