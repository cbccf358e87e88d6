//! The agent's stream, in-process on loopback: description first, then
//! history, then live samples; a slow subscriber blocks no one; garbage on the
//! port breaks nothing.

use std::time::Duration;

use fleetop::model::sample::NodeSample;
use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::agent_message::Kind;
use fleetop_agent::serve::server::{self, AgentHandle, AgentOptions};
use fleetop_agent::sim::{Model, Scenario, SimConfig};

/// A two-GPU simulated node sampled every `interval_ms`.
fn sim(interval_ms: u64) -> SimConfig {
    SimConfig {
        hostname: "s1".into(),
        gpus: 2,
        ib_ports: 1,
        model: Model::H200,
        scenario: Scenario::Training,
        seed: 9,
        start_ms: fleetop_agent::now_ms(),
        interval_ms: interval_ms as u32,
        problem_ms: None,
    }
}

pub(crate) async fn start(interval_ms: u64, history_s: u64) -> AgentHandle {
    let sim = sim(interval_ms);
    let opts = AgentOptions {
        interval: Duration::from_millis(interval_ms),
        history: Duration::from_secs(history_s),
        ..Default::default()
    };
    server::serve_sim(sim, opts).await.expect("serves")
}

async fn client(h: &AgentHandle) -> AgentClient<tonic::transport::Channel> {
    AgentClient::connect(format!("http://{}", h.addr))
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn description_then_bounded_history_then_live() {
    // 20 ms samples, 1 s of history: the ring holds 50. Wait until it has
    // overflowed (by count, not by time: a busy machine samples late).
    let agent = start(20, 1).await;
    let waited = std::time::Instant::now();
    while agent.samples_taken() < 60 {
        assert!(waited.elapsed() < Duration::from_secs(60), "the agent does not sample");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut stream = client(&agent)
        .await
        .subscribe(SubscribeRequest::default())
        .await
        .expect("ok")
        .into_inner();

    let first = stream.message().await.expect("ok").expect("a message");
    let Some(Kind::Info(info)) = first.kind else {
        panic!("first message must be the description: {first:?}")
    };
    assert_eq!(info.hostname, "s1");
    assert_eq!(info.gpus.len(), 2);
    assert_eq!(info.gpus[0].model, "NVIDIA H200");
    assert_eq!(info.sample_interval_ms, 20);

    let mut history = Vec::new();
    let sent = loop {
        match stream.message().await.expect("ok").and_then(|m| m.kind) {
            Some(Kind::Sample(s)) => history.push(s),
            Some(Kind::CaughtUp(n)) => break n,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(sent as usize, history.len());
    assert_eq!(history.len(), 50, "the ring is full and bounded at 50");
    assert!(
        history.windows(2).all(|w| w[1].seq == w[0].seq + 1),
        "history in order, no gaps"
    );

    let Some(Kind::Sample(live)) = stream.message().await.expect("ok").and_then(|m| m.kind) else {
        panic!("live samples follow");
    };
    assert!(live.seq > history.last().map(|s| s.seq).unwrap_or(0));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_never_reads_blocks_neither_sampling_nor_others() {
    let agent = start(10, 60).await;
    // The stuck subscriber: subscribes, never reads.
    let _stuck = client(&agent)
        .await
        .subscribe(SubscribeRequest {
            no_backfill: true,
            ..Default::default()
        })
        .await
        .expect("ok")
        .into_inner();
    let before = agent.samples_taken();
    let mut reader = client(&agent)
        .await
        .subscribe(SubscribeRequest {
            no_backfill: true,
            ..Default::default()
        })
        .await
        .expect("ok")
        .into_inner();
    let mut live = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while live < 150 {
        let msg = tokio::time::timeout_at(deadline, reader.message())
            .await
            .expect("the healthy subscriber keeps receiving")
            .expect("ok")
            .expect("stream open");
        if let Some(Kind::Sample(_)) = msg.kind {
            live += 1;
        }
    }
    // 150 samples at 10 ms went by while the other subscriber read nothing:
    // far more than its channel and the broadcast buffer hold.
    assert!(agent.samples_taken() - before >= 150);
    agent.stop().await;
}

/// The live samples of one subscription, decoded, by seq, with the bytes
/// their messages took.
async fn live_samples(
    agent: &AgentHandle,
    columns: bool,
    n: usize,
) -> (
    std::collections::BTreeMap<u64, fleetop_agent::proto::Sample>,
    usize,
    usize,
) {
    use prost::Message;
    let req = SubscribeRequest {
        no_backfill: true,
        columns,
        ..Default::default()
    };
    let mut stream = client(agent).await.subscribe(req).await.expect("ok").into_inner();
    let mut rx = fleetop_agent::wire::Decoder::default();
    let (mut got, mut bytes, mut as_columns) = (std::collections::BTreeMap::new(), 0, 0);
    while got.len() < n {
        let msg = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("samples keep coming")
            .expect("ok")
            .expect("stream open");
        if let Some(Kind::Sample(s)) = msg.kind {
            bytes += s.encoded_len();
            as_columns += usize::from(s.columns.is_some());
            let mut whole = rx.decode(s).expect("in sequence").clone();
            // Column deltas leave the packet counters behind (by design).
            for p in &mut whole.ib_ports {
                (p.tx_packets, p.rx_packets) = (0, 0);
            }
            got.insert(whole.seq, whole);
        }
    }
    (got, bytes, as_columns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_deltas_are_asked_for_and_carry_the_same_samples_in_fewer_bytes() {
    let agent = start(20, 60).await;
    let (plain, columns) = tokio::join!(live_samples(&agent, false, 60), live_samples(&agent, true, 60));
    let ((plain, plain_bytes, none), (columns, column_bytes, deltas)) = (plain, columns);
    assert_eq!(none, 0, "not asked for, not sent");
    assert!(deltas >= 50, "{deltas} column deltas of 60 samples");
    let both: Vec<u64> = plain.keys().filter(|s| columns.contains_key(s)).copied().collect();
    assert!(both.len() >= 30, "{} samples seen by both", both.len());
    for seq in both {
        assert_eq!(plain[&seq], columns[&seq], "sample {seq}");
    }
    let (per_plain, per_columns) = (plain_bytes / plain.len(), column_bytes / columns.len());
    assert!(
        per_columns * 10 < per_plain * 7,
        "{per_columns} B a sample as columns, {per_plain} B plain"
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_grpc_port_breaks_nothing() {
    use tokio::io::AsyncWriteExt;
    let agent = start(50, 10).await;
    for junk in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"\x00\x01\x02\xff garbage",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff",
    ] {
        let mut s = tokio::net::TcpStream::connect(agent.addr).await.expect("connect");
        let _ = s.write_all(junk).await;
        let _ = s.shutdown().await;
    }
    let mut stream = client(&agent)
        .await
        .subscribe(SubscribeRequest::default())
        .await
        .expect("still serves")
        .into_inner();
    let first = stream.message().await.expect("ok").expect("message");
    assert!(matches!(first.kind, Some(Kind::Info(_))));
    agent.stop().await;
}

/// The simulated backend's processes have invented pids: signalling one
/// could hit a real process of the same pid, so the agent refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_agent_refuses_to_signal_its_invented_processes() {
    let opts = AgentOptions {
        interval: Duration::from_millis(50),
        bench: Some(server::BenchSettings {
            token: "s3cret".into(),
            expectations: fleetop_agent::bench::expect::Expectations::load(None).expect("expectations"),
            max_duration: Duration::from_secs(60),
        }),
        insecure: true,
        ..Default::default()
    };
    let agent = server::serve_sim(sim(50), opts).await.expect("serves");
    let mut c = client(&agent).await;
    let req = fleetop_agent::proto::SignalRequest {
        token: "s3cret".into(),
        pid: 1,
        signal: "TERM".into(),
    };
    let e = c.signal_process(req).await.expect_err("refused");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("simulated"), "{}", e.message());
    agent.stop().await;
}

/// Everything one subscription delivers up to `CaughtUp`, through the
/// console's decoder: the samples (each history batch unpacked), the
/// encoded size of each message that carried them, and the count the agent
/// says it sent.
async fn history_through_the_console(
    agent: &AgentHandle,
    req: SubscribeRequest,
) -> (
    Vec<fleetop::model::sample::NodeSample>,
    Vec<usize>,
    u64,
    tonic::Streaming<fleetop_agent::proto::AgentMessage>,
) {
    use prost::Message;
    let mut stream = client(agent).await.subscribe(req).await.expect("ok").into_inner();
    let mut decoder = fleetop::ingest::decode::Stream::default();
    let (mut samples, mut messages) = (Vec::new(), Vec::new());
    loop {
        match stream.message().await.expect("ok").and_then(|m| m.kind) {
            Some(Kind::Info(i)) => {
                decoder.info(i, 0);
            }
            Some(Kind::Sample(s)) => {
                messages.push(s.encoded_len());
                samples.push(decoder.sample(s, 0).expect("in sequence"));
            }
            Some(Kind::History(h)) => {
                messages.push(h.encoded_len());
                samples.extend(decoder.history(h, 0).expect("in sequence"));
            }
            Some(Kind::BurnIn(_)) => {}
            Some(Kind::CaughtUp(n)) => {
                // The live stream goes on from the history's last sample.
                decoder.caught_up();
                let Some(Kind::Sample(live)) = stream.message().await.expect("ok").and_then(|m| m.kind) else {
                    panic!("live samples follow");
                };
                samples.push(decoder.sample(live, 0).expect("the first live delta finds its base"));
                return (samples, messages, n, stream);
            }
            None => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_in_batches_is_the_same_history_in_a_few_messages() {
    // The demo's way: ten minutes of invented history, 8 GPUs, every second.
    let now = fleetop_agent::now_ms();
    let mut sim = sim(1000);
    sim.gpus = 8;
    sim.ib_ports = 8;
    sim.start_ms = now - 600_000;
    let opts = AgentOptions {
        interval: Duration::from_millis(200),
        history: Duration::from_secs(120),
        backfill_from_ms: Some(now - 120_000),
        ..Default::default()
    };
    let agent = server::serve_sim(sim, opts).await.expect("serves");
    let (one_by_one, messages, sent, _a) = history_through_the_console(&agent, SubscribeRequest::default()).await;
    assert_eq!(messages.len() as u64, sent, "one message a sample without batches");
    let batched_req = SubscribeRequest {
        history_batches: true,
        ..Default::default()
    };
    let (batched, messages, sent, _b) = history_through_the_console(&agent, batched_req).await;
    assert!(sent >= 590, "the whole history: {sent} samples");
    assert_eq!(batched.len() as u64, sent + 1, "every sample, then a live one");
    assert!(
        messages.len() * 3 < batched.len(),
        "{} samples in {} messages",
        batched.len(),
        messages.len()
    );
    // Small enough that a console's buffers for the stream stay small: a
    // batch of 4 KiB of samples and their entries' framing.
    let largest = messages.iter().max().copied().unwrap_or(0);
    assert!(largest <= 4096 + 64, "a history message of {largest} B");
    assert!(
        batched.windows(2).all(|w| w[1].seq == w[0].seq + 1),
        "in order, no gaps"
    );
    // The same samples either way (the ring moved on between the two
    // subscriptions: compare what both hold; each connection measured its
    // own clock skew: compare times apart).
    let untimed = |s: &NodeSample| NodeSample {
        time_ms: 0,
        ..s.clone()
    };
    let first = batched[0].seq;
    let common: Vec<_> = one_by_one.iter().filter(|s| s.seq >= first).collect();
    assert!(common.len() > 500, "{} samples in common", common.len());
    for s in common {
        let b = batched.iter().find(|b| b.seq == s.seq).expect("held in both");
        assert!(untimed(s) == untimed(b), "sample {} differs", s.seq);
    }

    // Part of the history: the first sample sent is rebuilt whole.
    let part = SubscribeRequest {
        backfill_s: 30,
        history_batches: true,
        ..Default::default()
    };
    let (recent, _, sent, _c) = history_through_the_console(&agent, part).await;
    assert!((140..=160).contains(&sent), "30 s of 200 ms samples: {sent}");
    let same = batched.iter().find(|b| b.seq == recent[0].seq).expect("held in both");
    assert!(
        untimed(&recent[0]) == untimed(same),
        "the first of a partial history is whole"
    );
    assert!(recent.windows(2).all(|w| w[1].seq == w[0].seq + 1), "in order, no gaps");
    agent.stop().await;
}

/// An agent sampling every 100 ms that has a minute of history (600 samples).
async fn with_a_minute_of_history(limits: fleetop_agent::serve::server::Limits) -> AgentHandle {
    let now = fleetop_agent::now_ms();
    let mut sim = sim(100);
    sim.start_ms = now - 120_000;
    let opts = AgentOptions {
        interval: Duration::from_millis(100),
        history: Duration::from_secs(60),
        backfill_from_ms: Some(now - 60_000),
        limits,
        ..Default::default()
    };
    server::serve_sim(sim, opts).await.expect("serves")
}

fn target_of(agent: &AgentHandle, name: &str) -> fleetop::model::target::Target {
    fleetop::model::target::Target {
        name: name.into(),
        host: agent.addr.ip().to_string(),
        port: agent.addr.port(),
    }
}

/// What a console's source task sent the store for one agent with a minute
/// of history, until 20 live samples: descriptions, caught-ups, seqs.
/// The source task is still running (and connected) when this returns.
async fn a_session_with_history(
    limits: fleetop_agent::serve::server::Limits,
) -> (AgentHandle, Vec<tokio::task::JoinHandle<()>>, usize, usize, Vec<u64>) {
    use fleetop::ingest::agent::{SourceOptions, spawn_all};
    use fleetop::model::update::{Event, Update};
    let agent = with_a_minute_of_history(limits).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(100_000);
    let tasks = spawn_all(&[target_of(&agent, "s1")], &SourceOptions::default(), tx);
    let (mut infos, mut caught_up, mut seqs, mut live) = (0, 0, Vec::new(), 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while live < 20 {
        let u = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("live samples follow the history")
            .expect("the source runs");
        let Update::Node { event, .. } = u else { continue };
        match event {
            Event::Info(_) => infos += 1,
            Event::CaughtUp => caught_up += 1,
            Event::Sample(s) => {
                if caught_up > 0 {
                    live += 1;
                }
                seqs.push(s.seq);
            }
            Event::Down(e) => panic!("the stream broke: {e}"),
            Event::BurnIn(_) => {}
        }
    }
    (agent, tasks, infos, caught_up, seqs)
}

fn once_in_order(seqs: &[u64]) {
    assert!(seqs.len() > 500, "the history came first: {} samples", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "every sample once, in order, none lost: {:?}",
        seqs.windows(2).find(|w| w[1] != w[0] + 1)
    );
}

/// A console that connects to an agent with history reads the history on a
/// connection it then closes (its buffers grew to hold the batches), and the
/// live samples on a fresh one: the store sees the description and
/// caught-up once, and every sample once, in order, none lost between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_is_read_on_its_own_connection_and_nothing_falls_between() {
    let (agent, tasks, infos, caught_up, seqs) = a_session_with_history(Default::default()).await;
    assert_eq!((infos, caught_up), (1, 1), "described and caught up once");
    once_in_order(&seqs);
    // The history's connection is closed; the live samples came on another.
    let waited = std::time::Instant::now();
    while agent.subscribers() != 1 || agent.connections() != 1 {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "one live stream on one connection"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        agent.connections_accepted(),
        2,
        "the history on a connection of its own"
    );
    tasks.iter().for_each(|t| t.abort());
    agent.stop().await;
}

/// The second connection refused (here: the agent takes one at a time, as
/// an overloaded one answers too late): the node stays on its first stream,
/// never down, and still gets every sample once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_second_connection_leaves_the_node_on_its_first() {
    let limits = fleetop_agent::serve::server::Limits {
        max_connections: 1,
        ..Default::default()
    };
    let (agent, tasks, infos, caught_up, seqs) = a_session_with_history(limits).await;
    assert_eq!((infos, caught_up), (1, 1));
    once_in_order(&seqs);
    assert_eq!(agent.connections_accepted(), 1, "the second was refused");
    tasks.iter().for_each(|t| t.abort());
    agent.stop().await;
}

/// A loopback port in front of `agent` that passes the first connection
/// on and holds every later one without an answer, as a starved console
/// or an overloaded agent is slow to finish a handshake.
async fn answering_only_the_first(agent: &AgentHandle) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("bound");
    let to = agent.addr;
    tokio::spawn(async move {
        let mut held = Vec::new();
        let mut first = true;
        while let Ok((mut from, _)) = listener.accept().await {
            if !std::mem::take(&mut first) {
                held.push(from);
                continue;
            }
            tokio::spawn(async move {
                if let Ok(mut agent) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut from, &mut agent).await;
                }
            });
        }
    });
    addr
}

/// While the live stream's connection is being made (held here until it
/// times out), the first stream's samples keep coming: a node whose second
/// handshake is slow is not silent for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_keep_coming_while_the_second_connection_is_made() {
    use fleetop::ingest::agent::{CONNECT_TIMEOUT, SourceOptions, spawn_all};
    use fleetop::model::update::{Event, Update};
    let agent = with_a_minute_of_history(Default::default()).await;
    let port = answering_only_the_first(&agent).await;
    let target = fleetop::model::target::Target {
        name: "s1".into(),
        host: port.ip().to_string(),
        port: port.port(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(100_000);
    let tasks = spawn_all(&[target], &SourceOptions::default(), tx);
    // When the history was in and each live sample came, until the second
    // connection has timed out.
    let (mut live, mut caught_up, mut seqs) = (Vec::new(), None, Vec::new());
    loop {
        let u = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("samples come")
            .expect("the source runs");
        let Update::Node { event, .. } = u else { continue };
        match event {
            Event::CaughtUp => {
                caught_up = Some(std::time::Instant::now());
                live.extend(caught_up);
            }
            Event::Sample(s) => {
                seqs.push(s.seq);
                if caught_up.is_some() {
                    live.push(std::time::Instant::now());
                }
            }
            Event::Down(e) => panic!("the stream broke: {e}"),
            Event::BurnIn(_) => {}
            Event::Info(_) => {}
        }
        if caught_up.is_some_and(|t| t.elapsed() > CONNECT_TIMEOUT + Duration::from_secs(2)) {
            break;
        }
    }
    let gap = live.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    assert!(
        gap < CONNECT_TIMEOUT / 2,
        "samples every 100 ms, none for {gap:?} while the second connection was held"
    );
    once_in_order(&seqs);
    tasks.iter().for_each(|t| t.abort());
    agent.stop().await;
}

/// Histories are read a few nodes at a time (`histories_at_once`): with
/// one, the second node's history starts only once the first's is in, so
/// that a large fleet's start does not queue minutes of history ahead of
/// the live samples of nodes already caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histories_are_read_a_few_nodes_at_a_time() {
    use fleetop::ingest::agent::{SourceOptions, spawn_all};
    use fleetop::model::update::{Event, Update};
    let mut agents = Vec::new();
    for _ in 0..2 {
        agents.push(with_a_minute_of_history(Default::default()).await);
    }
    let targets: Vec<_> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| target_of(a, &format!("s{i}")))
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::channel(100_000);
    let opts = SourceOptions {
        histories_at_once: 1,
        ..SourceOptions::default()
    };
    let tasks = spawn_all(&targets, &opts, tx);
    // (node, caught up yet) of every sample, in the order the store gets them.
    let (mut order, mut caught_up) = (Vec::new(), [false; 2]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !caught_up.iter().all(|c| *c) {
        let u = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("both catch up")
            .expect("runs");
        let Update::Node { node, event } = u else { continue };
        match event {
            Event::CaughtUp => caught_up[node] = true,
            Event::Sample(_) => order.push((node, caught_up[node])),
            Event::Down(e) => panic!("the stream broke: {e}"),
            Event::BurnIn(_) => {}
            Event::Info(_) => {}
        }
    }
    let first = order[0].0;
    let other_history = order
        .iter()
        .position(|&(n, live)| n != first && !live)
        .expect("both had history");
    assert!(
        order[..other_history]
            .iter()
            .filter(|&&(n, live)| n == first && !live)
            .count()
            > 500,
        "the first node's whole history came before the second's began"
    );
    assert!(
        order[other_history..].iter().all(|&(n, live)| n != first || live),
        "none of the first node's history after the second's began"
    );
    tasks.iter().for_each(|t| t.abort());
    for a in agents {
        a.stop().await;
    }
}

/// The first message of a subscription (after the history, if any).
async fn first_kind(agent: &AgentHandle, known_instance: u64) -> Kind {
    let mut stream = client(agent)
        .await
        .subscribe(SubscribeRequest {
            no_backfill: true,
            known_instance,
            ..Default::default()
        })
        .await
        .expect("ok")
        .into_inner();
    tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("something comes")
        .expect("ok")
        .expect("stream open")
        .kind
        .expect("a message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_has_the_description_of_this_process_is_not_sent_it_again() {
    let agent = start(20, 60).await;
    let Kind::Info(info) = first_kind(&agent, 0).await else {
        panic!("a stream starts with the node's description");
    };
    assert_ne!(info.agent_instance, 0);
    // The console's second stream from the same process: straight to the samples.
    let same = first_kind(&agent, info.agent_instance).await;
    assert!(matches!(same, Kind::CaughtUp(_)), "no description again");
    // Another process's number (the agent restarted between the two): described.
    let other = first_kind(&agent, info.agent_instance ^ 1).await;
    assert!(matches!(other, Kind::Info(_)), "a restarted agent describes itself");
    agent.stop().await;
}
