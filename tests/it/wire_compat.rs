//! Two versions at once: a fleet upgrades its agents over days, so this
//! console must read agents of the last release, and agents of this
//! version must read what a console of the last release sends. The
//! fixtures in `tests/fixtures/wire/<version>/` were recorded from that
//! release (a simulated agent on loopback, and that console's own
//! requests): a Subscribe stream, a RunBench answer and a /metrics page,
//! then a Subscribe and a RunBench request. `expected.json` is what that
//! release's console made of them; a change that reads them otherwise
//! fails here.
//!
//! Record a release's fixtures (at a release, into a new folder):
//! `FLEETOP_BLESS=1 cargo test --test it wire_compat -- --ignored`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetop_proto::pb::agent_client::AgentClient;
use fleetop_proto::pb::{AgentMessage, BenchEvent, BenchRequest, SubscribeRequest, agent_message};
use prost::Message;

/// The release whose fixtures are read.
const RELEASE: &str = "0.1.0";

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/wire")
        .join(RELEASE)
}

fn read_delimited<M: Message + Default>(name: &str) -> Vec<M> {
    let bytes = std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut buf = bytes.as_slice();
    let mut out = Vec::new();
    while !buf.is_empty() {
        out.push(M::decode_length_delimited(&mut buf).unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    out
}

fn write_delimited<M: Message>(name: &str, messages: &[M]) {
    let mut bytes = Vec::new();
    for m in messages {
        m.encode_length_delimited(&mut bytes).expect("encodes");
    }
    std::fs::write(dir().join(name), bytes).expect("writes");
}

/// What the console makes of the recorded stream: the description, then
/// every sample in order, each in a few figures a change would disturb.
fn read_stream(messages: Vec<AgentMessage>) -> serde_json::Value {
    use fleetop::ingest::decode::Stream;
    let mut stream = Stream::default();
    let mut desc = None;
    let mut samples = Vec::new();
    // The console's clock is the agent's at its description (the recorded
    // time, not this run's): no skew, and the live samples, a second after
    // it, are taken as they came.
    let mut now = 0;
    for m in messages {
        match m.kind.expect("a message") {
            agent_message::Kind::Info(info) => {
                now = info.agent_time_ms;
                desc = Some(stream.info(info, now));
            }
            agent_message::Kind::History(h) => samples.extend(stream.history(h, now).expect("history decodes")),
            agent_message::Kind::Sample(s) => samples.push(stream.sample(s, now).expect("sample decodes")),
            agent_message::Kind::CaughtUp(_) => stream.caught_up(),
            agent_message::Kind::BurnIn(_) => {}
        }
    }
    let desc = desc.expect("a description first");
    serde_json::json!({
        "hostname": desc.hostname,
        "agent_version": desc.agent_version,
        "backend": desc.backend,
        "gpus": desc.gpus.iter().map(|g| serde_json::json!([g.index, g.model, g.uuid, g.mem_total_bytes, f(g.power_limit_w), g.nvlinks.len()])).collect::<Vec<_>>(),
        "ib_ports": desc.ib_ports.iter().map(|p| format!("{}/{}", p.device, p.port)).collect::<Vec<_>>(),
        "samples": samples.iter().map(|s| serde_json::json!({
            "seq": s.seq,
            "time_ms": s.time_ms,
            "gpus": s.gpus.iter().map(|g| serde_json::json!([g.util_pct, g.temp_c, f(g.power_w), g.mem_used_bytes, g.sm_clock_mhz, g.xids.len()])).collect::<Vec<_>>(),
            "ib": s.ib_ports.iter().map(|p| serde_json::json!([p.state, p.rx_bytes, p.tx_bytes])).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// What the console makes of a RunBench answer: each result's check, GPU,
/// verdict and figure.
fn read_bench(events: Vec<BenchEvent>) -> serde_json::Value {
    use fleetop_proto::pb::bench_event::Kind;
    let results: Vec<serde_json::Value> = events
        .into_iter()
        .filter_map(|e| match e.kind? {
            Kind::Result(r) => {
                let r = fleetop::ops::bench::result(r);
                Some(serde_json::json!([
                    r.name,
                    r.gpu,
                    format!("{:?}", r.verdict),
                    f(r.value),
                    r.unit
                ]))
            }
            _ => None,
        })
        .collect();
    serde_json::json!(results)
}

/// What the console makes of the /metrics page, as a dcgm-exporter page:
/// the GPUs and their headline readings.
fn read_metrics(text: &str) -> serde_json::Value {
    use fleetop::ingest::{dcgm, promtext};
    let exp = promtext::parse(text, &promtext::Limits::default()).expect("the page parses");
    let m = dcgm::map_node(&exp.samples, "fixture", "dcgm-exporter", 1000, 0);
    serde_json::json!({
        "hostname": m.desc.hostname,
        "gpus": m.desc.gpus.iter().zip(&m.sample.gpus).map(|(d, g)| serde_json::json!([d.index, d.model, d.uuid, g.util_pct, g.temp_c, f(g.power_w)])).collect::<Vec<_>>(),
    })
}

/// A figure as text: JSON numbers do not always come back to the same
/// last bit, and what is compared is what the console read.
fn f(v: Option<f64>) -> Option<String> {
    v.map(|v| format!("{v:.6}"))
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("expected.json is JSON")
}

#[test]
fn this_console_reads_the_stream_the_bench_answer_and_metrics_of_the_last_release() {
    let want = expected();
    let stream = read_stream(read_delimited("subscribe.stream"));
    // What any version must show, whatever was recorded.
    assert_eq!(stream["hostname"], "fixture01");
    assert_eq!(stream["gpus"].as_array().map(Vec::len), Some(8));
    let samples = stream["samples"].as_array().expect("samples");
    assert!(samples.len() >= 20, "{} samples", samples.len());
    assert!(samples.iter().all(|s| s["gpus"].as_array().map(Vec::len) == Some(8)));
    assert_eq!(
        stream, want["stream"],
        "the recorded stream reads otherwise than it did"
    );

    let bench = read_bench(read_delimited("runbench.stream"));
    assert!(bench.as_array().is_some_and(|r| r.len() >= 5), "{bench}");
    assert_eq!(bench, want["bench"], "the recorded burn-in reads otherwise than it did");

    let text = std::fs::read_to_string(dir().join("metrics.txt")).expect("metrics.txt");
    let metrics = read_metrics(&text);
    assert_eq!(metrics["gpus"].as_array().map(Vec::len), Some(8));
    assert_eq!(
        metrics, want["metrics"],
        "the recorded /metrics page reads otherwise than it did"
    );
}

/// The requests that release's console sent, read by this version's types
/// and served by this version's agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_agent_serves_the_requests_of_the_last_releases_console() {
    let sub = SubscribeRequest::decode(
        std::fs::read(dir().join("subscribe-request.bin"))
            .expect("fixture")
            .as_slice(),
    )
    .expect("decodes");
    assert!(sub.history_batches && sub.columns, "{sub:?}");
    let bench = BenchRequest::decode(
        std::fs::read(dir().join("bench-request.bin"))
            .expect("fixture")
            .as_slice(),
    )
    .expect("decodes");
    assert_eq!((bench.suite.as_str(), bench.token.as_str()), ("quick", "t"));

    let agent = crate::agent_stream::start(50, 10).await;
    let mut c = AgentClient::connect(format!("http://{}", agent.addr))
        .await
        .expect("connects");
    let mut s = c.subscribe(sub).await.expect("subscribes").into_inner();
    let first = tokio::time::timeout(Duration::from_secs(30), s.message())
        .await
        .expect("in time")
        .expect("a message")
        .expect("one");
    assert!(matches!(first.kind, Some(agent_message::Kind::Info(_))), "{first:?}");
    agent.stop().await;
}

/// Records the fixtures of this version (see the module's comment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "records the wire fixtures: FLEETOP_BLESS=1 cargo test --test it wire_compat -- --ignored"]
async fn record_this_versions_fixtures() {
    if std::env::var("FLEETOP_BLESS").as_deref() != Ok("1") {
        return;
    }
    assert_eq!(
        env!("CARGO_PKG_VERSION"),
        RELEASE,
        "record into a folder of this version"
    );
    std::fs::create_dir_all(dir()).expect("the folder");
    let bench = fleetop_agent::serve::server::BenchSettings {
        token: "t".into(),
        expectations: fleetop_agent::bench::expect::Expectations::load(None).expect("shipped"),
        max_duration: Duration::from_secs(600),
    };
    let mut sim = fleetop::ingest::demo::plan(1, 1, 8, fleetop_agent::now_ms()).remove(0);
    sim.hostname = "fixture01".into();
    sim.gpus = 8;
    sim.interval_ms = 100;
    let opts = fleetop_agent::serve::server::AgentOptions {
        interval: Duration::from_millis(100),
        history: Duration::from_secs(60),
        bench: Some(bench),
        insecure: true,
        ..Default::default()
    };
    let mut agent = fleetop_agent::serve::server::serve_sim(sim, opts)
        .await
        .expect("serves");
    while agent.samples_taken() < 20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c = AgentClient::connect(format!("http://{}", agent.addr))
        .await
        .expect("connects");
    // The console's own requests.
    let sub = SubscribeRequest {
        backfill_s: 60,
        history_batches: true,
        columns: true,
        ..Default::default()
    };
    std::fs::write(dir().join("subscribe-request.bin"), sub.encode_to_vec()).expect("writes");
    let mut s = c.subscribe(sub).await.expect("subscribes").into_inner();
    let mut messages = Vec::new();
    let mut live = 0;
    while live < 10 {
        let m = s.message().await.expect("a message").expect("one");
        if matches!(m.kind, Some(agent_message::Kind::Sample(_))) {
            live += 1;
        }
        messages.push(m);
    }
    write_delimited("subscribe.stream", &messages);
    let req = BenchRequest {
        token: "t".into(),
        suite: "quick".into(),
        timeout_s: 0,
        net_target: String::new(),
        ..Default::default()
    };
    std::fs::write(dir().join("bench-request.bin"), req.encode_to_vec()).expect("writes");
    let mut b = c.run_bench(req).await.expect("runs").into_inner();
    let mut events = Vec::new();
    // Up to its verdict, as a console reads it.
    while let Some(e) = b.message().await.expect("an event") {
        let done = matches!(e.kind, Some(fleetop_proto::pb::bench_event::Kind::Done(_)));
        events.push(e);
        if done {
            break;
        }
    }
    write_delimited("runbench.stream", &events);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = agent
        .serve_metrics(l, fleetop_agent::serve::metrics::http::Limits::default())
        .expect("metrics");
    let page = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("scrapes")
        .text()
        .await
        .expect("text");
    std::fs::write(dir().join("metrics.txt"), &page).expect("writes");
    agent.stop().await;
    let expected = serde_json::json!({
        "stream": read_stream(read_delimited("subscribe.stream")),
        "bench": read_bench(read_delimited("runbench.stream")),
        "metrics": read_metrics(&page),
    });
    std::fs::write(
        dir().join("expected.json"),
        serde_json::to_string_pretty(&expected).expect("json") + "\n",
    )
    .expect("writes");
}
