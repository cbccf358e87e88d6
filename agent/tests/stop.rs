//! Stopping an agent ends, whatever its subscribers do: a console that
//! holds its stream open and reads nothing (an export that has written its
//! document, a frozen peer) must not hold an in-process agent's stop, and
//! with it the demo's exit, for ever.

use std::time::Duration;

use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::serve::server::{AgentOptions, STOP_GRACE, serve_sim};
use fleetop_agent::sim::{Model, Scenario, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_stops_although_a_subscriber_holds_its_stream_unread() {
    let now = fleetop_agent::now_ms();
    let sim = SimConfig {
        hostname: "stop".into(),
        gpus: 8,
        ib_ports: 8,
        model: Model::H100,
        scenario: Scenario::Training,
        seed: 5,
        start_ms: now - 600_000,
        interval_ms: 1000,
        problem_ms: None,
    };
    let opts = AgentOptions {
        // Ten minutes of history: far more than a stream's window holds.
        backfill_from_ms: Some(now - 600_000),
        insecure: true,
        ..Default::default()
    };
    let agent = serve_sim(sim, opts).await.expect("serves");
    let mut c = AgentClient::connect(format!("http://{}", agent.addr))
        .await
        .expect("connects");
    let mut stream = c
        .subscribe(SubscribeRequest::default())
        .await
        .expect("subscribes")
        .into_inner();
    assert!(matches!(stream.message().await, Ok(Some(_))), "the stream sends");
    // Read no more: the agent's sends fill the stream's window and wait.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = tokio::time::timeout(STOP_GRACE + Duration::from_secs(60), agent.stop()).await;
    assert!(stopped.is_ok(), "the agent's stop waited on a stream nobody reads");
    drop(stream);
}
