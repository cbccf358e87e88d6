//! A console whose runtime does not get to its streams (a process starved
//! of CPU) says it is behind, and calls no healthy agent stale: a real
//! session against in-process agents that go on sampling meanwhile.

use std::time::Duration;

use clap::Parser;
use fleetop::model::flag::FlagKind;
use fleetop::model::time::now_ms;
use fleetop::store::NodeStatus;

#[test]
fn a_console_that_did_not_get_to_its_streams_says_so_and_calls_no_node_stale() {
    // The agents on a runtime of their own: they sample every 200 ms (a
    // node is stale after 600 ms) while the console's runtime stands still.
    let agents_rt = tokio::runtime::Runtime::new().expect("runtime");
    let agents = agents_rt.block_on(async {
        [
            crate::agent_stream::start(200, 0).await,
            crate::agent_stream::start(200, 0).await,
        ]
    });
    let hosts = agents.iter().map(|a| a.addr.to_string()).collect::<Vec<_>>().join(",");
    let cli = fleetop::cli::Cli::parse_from(["fleetop", "--hosts", &hosts]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let cfg = fleetop::config::Config::default();
        let mut s = fleetop::session::Session::start(&fleetop::cli::resolve::source(&cli.source, &cfg), &cfg)
            .await
            .expect("session");
        let live = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            s.drain();
            s.store.tick(now_ms());
            let th = &s.store.thresholds;
            if s.store.nodes.iter().all(|n| n.status(now_ms(), th) == NodeStatus::Ok) {
                break;
            }
            assert!(tokio::time::Instant::now() < live, "both nodes live");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Nothing of the console runs for 3 s: its streams are not read.
        std::thread::sleep(Duration::from_secs(3));
        s.drain();
        let now = now_ms();
        s.store.tick(now);
        let snap = fleetop::export::snapshot(&s.store, now);
        let behind = snap.console_behind_ms.unwrap_or_default();
        assert!(behind >= 2_500, "said behind: {:?}", snap.console_behind_ms);
        for n in &s.store.nodes {
            assert_eq!(n.status(now, &s.store.thresholds), NodeStatus::Ok, "{}", n.target.name);
            assert!(
                n.detector.active().all(|f| f.kind != FlagKind::Stale),
                "{}",
                n.target.name
            );
        }
    });
    // The console's connections close with its runtime, before the agents stop.
    drop(rt);
    for a in agents {
        agents_rt.block_on(a.stop());
    }
}
