//! The attack of issue 13, for `scripts/stream-flood.sh`: one connection
//! opens many Subscribe streams with a zero receive window and never reads
//! them, holds them, then goes. Prints what the agent answered.
//!
//! `cargo run -p fleetop-agent --example stream_flood -- 127.0.0.1:50051 5000 10`

use std::time::Duration;

use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::proto::agent_client::AgentClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:50051".into());
    let streams: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5000);
    let hold_s: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    // A zero window: the agent may send nothing, so whatever it queues for
    // these streams stays in its memory.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .initial_stream_window_size(0)
        .connect()
        .await?;
    let client = AgentClient::new(channel);
    let mut tasks = Vec::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..streams {
        let mut c = client.clone();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let req = SubscribeRequest {
                no_backfill: false,
                ..Default::default()
            };
            let r = c.subscribe(req).await;
            let _ = tx.send(r.as_ref().map(|_| ()).map_err(|s| s.code()));
            // Held, unread, until the end.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(r);
        }));
    }
    drop(tx);
    let (mut ok, mut refused) = (0usize, std::collections::BTreeMap::new());
    let deadline = tokio::time::sleep(Duration::from_secs(hold_s));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Some(Ok(())) => ok += 1,
                Some(Err(code)) => *refused.entry(format!("{code:?}")).or_insert(0usize) += 1,
                None => break,
            },
            _ = &mut deadline => break,
        }
    }
    println!(
        "streams asked={streams} opened={ok} refused={refused:?} still waiting={}",
        streams - ok - refused.values().sum::<usize>()
    );
    for t in tasks {
        t.abort();
    }
    Ok(())
}
