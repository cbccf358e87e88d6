//! An agent killed mid-stream turns its node stale, and back to ok when it is
//! restarted on the same port: real agent processes, the real export.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use fleetop::export::{Snapshot, Status};

use std::process::{Command, Stdio};

use crate::{Killed, start_agent, start_agent_on};

/// Reads snapshots until one has `want` as the node's status.
fn wait_for(lines: &mut impl Iterator<Item = std::io::Result<String>>, want: Status, within: Duration) -> Snapshot {
    let start = Instant::now();
    for line in lines.by_ref() {
        let snap: Snapshot = serde_json::from_str(&line.expect("a line")).expect("ndjson snapshot");
        if snap.nodes[0].status == want {
            return snap;
        }
        assert!(
            start.elapsed() < within,
            "no {want:?} within {within:?}; last: {:?}",
            snap.nodes[0]
        );
    }
    panic!("export ended before the node was {want:?}");
}

#[test]
fn killed_agent_goes_stale_and_recovers_on_restart() {
    let agent = start_agent(&[]);
    let port = agent.port();
    let mut export = Killed(
        Command::new(env!("CARGO_BIN_EXE_fleetop"))
            .args(["export", "--hosts", &format!("127.0.0.1:{port}"), "--format", "ndjson"])
            .args(["--interval", "200ms", "--count", "300", "--timeout", "5s"])
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .stdout(Stdio::piped())
            .spawn()
            .expect("export starts"),
    );
    let mut lines = BufReader::new(export.0.stdout.take().expect("stdout")).lines();

    let ok = wait_for(&mut lines, Status::Ok, Duration::from_secs(10));
    assert_eq!(ok.nodes[0].hostname.as_deref(), Some("n1"));

    drop(agent);
    let stale = wait_for(&mut lines, Status::Stale, Duration::from_secs(10));
    assert!(
        stale.nodes[0]
            .flags
            .iter()
            .any(|f| f.kind == fleetop::model::flag::FlagKind::Stale)
    );

    // Back on the port it had, as a console watching a node sees it. The
    // one race left (docs/testing.md#ports): while the agent was down,
    // another test's port-0 bind could have taken the port.
    let _agent = start_agent_on(&format!("127.0.0.1:{port}"), &[]);
    let back = wait_for(&mut lines, Status::Ok, Duration::from_secs(20));
    assert!(
        back.nodes[0]
            .flags
            .iter()
            .all(|f| f.kind != fleetop::model::flag::FlagKind::Stale)
    );
}
