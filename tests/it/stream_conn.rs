//! The sample stream's own HTTP/2 connection (`ingest::stream_conn`), against
//! scripted h2 servers on loopback: messages however the agent's chunks cut
//! them, its status in headers or trailers, what is not a message an
//! error and not a read, and an agent that goes silent dropped while one
//! that is only quiet is kept.

use std::time::{Duration, Instant};

use fleetop::ingest::stream_conn;
use fleetop::model::target::Target;
use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::proto::agent_message::Kind;
use fleetop_agent::proto::{AgentMessage, NodeInfo};
use prost::Message;
use tonic::codegen::{Bytes, http};

/// What a scripted agent does with the one stream it accepts: it gets the
/// request's head (method, path, headers) and the stream to answer on.
type Script = Box<dyn FnOnce(http::request::Parts, h2::server::SendResponse<Bytes>) + Send>;

/// A one-connection h2 server. After the script answers, the connection is
/// served for `serve_for`, then held without being read (a process that
/// hangs: no frame, no ping is answered).
async fn scripted(serve_for: Duration, script: Script) -> Target {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("accept");
        let mut conn = h2::server::handshake(socket).await.expect("handshake");
        let (req, respond) = conn.accept().await.expect("a stream").expect("ok");
        script(req.into_parts().0, respond);
        let _ = tokio::time::timeout(serve_for, async { while conn.accept().await.is_some() {} }).await;
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop(conn);
    });
    Target {
        name: "scripted".into(),
        host: "127.0.0.1".into(),
        port,
    }
}

fn grpc_headers() -> http::Response<()> {
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .expect("response")
}

fn framed(m: &AgentMessage) -> Vec<u8> {
    let body = m.encode_to_vec();
    let mut out = vec![0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn described(hostname: &str) -> AgentMessage {
    AgentMessage {
        kind: Some(Kind::Info(NodeInfo {
            hostname: hostname.into(),
            ..Default::default()
        })),
    }
}

async fn open(target: &Target, token: Option<&str>) -> stream_conn::StreamConn {
    let token = token.map(|t| t.parse().expect("header value"));
    stream_conn::open(target, None, token, Default::default())
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_split_across_frames_is_read_whole_then_the_stream_ends_cleanly() {
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let target = scripted(
        Duration::from_secs(30),
        Box::new(move |head, mut respond| {
            let _ = seen_tx.send(head);
            let mut body = respond.send_response(grpc_headers(), false).expect("headers");
            let bytes = framed(&described("gpu-a-1"));
            // Three DATA frames, the length prefix itself cut in two.
            for part in [&bytes[..3], &bytes[3..9], &bytes[9..]] {
                body.send_data(Bytes::copy_from_slice(part), false).expect("data");
            }
            body.send_trailers(trailers("0", None)).expect("trailers");
        }),
    )
    .await;
    let conn = open(&target, Some("Bearer s3cret")).await;
    let req = SubscribeRequest {
        columns: true,
        ..Default::default()
    };
    let mut stream = conn.subscribe(&req).await.expect("answered");
    let first = stream.message().await.expect("no error").expect("a message");
    assert_eq!(first, described("gpu-a-1"));
    assert_eq!(stream.message().await.expect("a clean end"), None);
    let head = seen_rx.await.expect("the script ran");
    assert_eq!(
        (head.method.as_str(), head.uri.path()),
        ("POST", "/fleetop.v1.Agent/Subscribe")
    );
    let headers = head.headers;
    assert_eq!(headers["content-type"], "application/grpc");
    assert_eq!(headers["te"], "trailers");
    assert_eq!(headers["authorization"], "Bearer s3cret");
}

fn trailers(status: &str, message: Option<&str>) -> http::HeaderMap {
    let mut t = http::HeaderMap::new();
    t.insert("grpc-status", status.parse().expect("value"));
    if let Some(m) = message {
        t.insert("grpc-message", m.parse().expect("value"));
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sharing_a_chunk_are_each_read_then_the_agents_error_status_is_the_end() {
    let target = scripted(
        Duration::from_secs(30),
        Box::new(|_, mut respond| {
            let mut body = respond.send_response(grpc_headers(), false).expect("headers");
            // Two whole messages and the start of a third in one chunk.
            let mut bytes = framed(&described("one"));
            bytes.extend(framed(&described("two")));
            let three = framed(&described("three"));
            bytes.extend_from_slice(&three[..7]);
            body.send_data(bytes.into(), false).expect("data");
            body.send_data(Bytes::copy_from_slice(&three[7..]), false)
                .expect("data");
            body.send_trailers(trailers("14", Some("agent going down")))
                .expect("trailers");
        }),
    )
    .await;
    let conn = open(&target, None).await;
    let mut stream = conn.subscribe(&SubscribeRequest::default()).await.expect("answered");
    for name in ["one", "two", "three"] {
        let m = stream.message().await.expect("no error").expect("a message");
        assert_eq!(m, described(name));
    }
    let end = stream.message().await.expect_err("the agent's status");
    assert_eq!(
        (end.code(), end.message()),
        (tonic::Code::Unavailable, "agent going down")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_inside_a_message_or_without_a_status_is_an_error_not_an_end() {
    let cut = framed(&described("cut"));
    for (data, why) in [
        (cut[..cut.len() - 1].to_vec(), "inside a message"),
        (cut.clone(), "without a gRPC status"),
    ] {
        let target = scripted(
            Duration::from_secs(30),
            Box::new(move |_, mut respond| {
                let mut body = respond.send_response(grpc_headers(), false).expect("headers");
                body.send_data(data.into(), true).expect("data");
            }),
        )
        .await;
        let conn = open(&target, None).await;
        let mut stream = conn.subscribe(&SubscribeRequest::default()).await.expect("answered");
        let mut got = stream.message().await;
        if why.contains("status") {
            assert_eq!(got.expect("the whole message"), Some(described("cut")));
            got = stream.message().await;
        }
        let err = got.expect_err(why);
        assert!(err.message().contains(why), "{why}: {err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_the_headers_is_the_agents_status_and_words() {
    let target = scripted(
        Duration::from_secs(30),
        Box::new(|_, mut respond| {
            let refused = http::Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "16")
                .header("grpc-message", "bad token")
                .body(())
                .expect("response");
            let _ = respond.send_response(refused, true);
        }),
    )
    .await;
    let conn = open(&target, None).await;
    let err = conn.subscribe(&SubscribeRequest::default()).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    assert_eq!(err.message(), "bad token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_the_limit_or_compressed_unasked_is_an_error_not_a_read() {
    let whole = framed(&described("x"));
    let mut too_large = whole.clone();
    too_large[1..5].copy_from_slice(&((stream_conn::MAX_MESSAGE_BYTES + 1) as u32).to_be_bytes());
    // A message that would decode, but for its compression flag.
    let mut compressed = whole;
    compressed[0] = 1;
    for (data, why) in [(too_large, "the console takes"), (compressed, "compressed")] {
        let target = scripted(
            Duration::from_secs(30),
            Box::new(move |_, mut respond| {
                let mut body = respond.send_response(grpc_headers(), false).expect("headers");
                body.send_data(data.into(), false).expect("data");
                // Open, not reset: what the console reads is only the data.
                std::mem::forget(body);
            }),
        )
        .await;
        let conn = open(&target, None).await;
        let mut stream = conn.subscribe(&SubscribeRequest::default()).await.expect("answered");
        let got = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("answered at once, not waited on");
        let err = got.expect_err(why);
        assert!(err.message().contains(why), "{why}: {err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_hangs_is_dropped_and_one_that_is_only_quiet_is_kept() {
    // Both describe the node, then send nothing. One goes on answering
    // HTTP/2 (pings among it); the other stops reading its socket.
    let answer = |name: &'static str| -> Script {
        Box::new(move |_, mut respond| {
            let mut body = respond.send_response(grpc_headers(), false).expect("headers");
            body.send_data(framed(&described(name)).into(), false).expect("data");
            // Kept open: the stream goes on, with nothing more in it.
            std::mem::forget(body);
        })
    };
    let hung = scripted(Duration::from_secs(1), answer("hung")).await;
    let quiet = scripted(Duration::from_secs(600), answer("quiet")).await;
    let (hung, quiet) = (open(&hung, None).await, open(&quiet, None).await);
    let mut hung = hung.subscribe(&SubscribeRequest::default()).await.expect("answered");
    let mut quiet = quiet.subscribe(&SubscribeRequest::default()).await.expect("answered");
    for s in [&mut hung, &mut quiet] {
        assert!(s.message().await.expect("ok").is_some());
    }
    let asked = Instant::now();
    // A ping every 10 s, 5 s for its answer: within about 15 s. The bound
    // is generous; what matters is that the stream does not wait forever.
    let broke = tokio::time::timeout(Duration::from_secs(60), hung.message())
        .await
        .expect("a hung agent is not waited on forever");
    assert!(broke.is_err(), "{broke:?}");
    assert!(
        asked.elapsed() >= Duration::from_secs(10),
        "dropped before any ping was due"
    );
    // The quiet one answered its ping(s) in the same time: still open.
    let still = tokio::time::timeout(Duration::from_millis(200), quiet.message()).await;
    assert!(still.is_err(), "a quiet agent's stream ended: {still:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_that_does_not_read_takes_in_at_most_its_window_and_the_rest_when_it_reads() {
    // The agent has a 1 MiB message to send (a big node description). The
    // console subscribes and then reads nothing, as one short of CPU does.
    let big = AgentMessage {
        kind: Some(Kind::Info(NodeInfo {
            hostname: "big".into(),
            gpu_backend_note: "x".repeat(1 << 20),
            ..Default::default()
        })),
    };
    let bytes = Bytes::from(framed(&big));
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = sent.clone();
    let target = scripted(
        Duration::from_secs(60),
        Box::new(move |_, mut respond| {
            let mut body = respond.send_response(grpc_headers(), false).expect("headers");
            // Sends as the console's flow-control window allows, counting.
            tokio::spawn(async move {
                let mut rest = bytes;
                while !rest.is_empty() {
                    body.reserve_capacity(rest.len());
                    let Some(Ok(room)) = std::future::poll_fn(|cx| body.poll_capacity(cx)).await else {
                        return;
                    };
                    let part = rest.split_to(room.min(rest.len()));
                    counted.fetch_add(part.len(), std::sync::atomic::Ordering::SeqCst);
                    body.send_data(part, false).expect("data");
                }
                std::mem::forget(body);
            });
        }),
    )
    .await;
    let conn = open(&target, None).await;
    let mut stream = conn.subscribe(&SubscribeRequest::default()).await.expect("answered");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let unread = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(unread > 0, "the agent could send nothing");
    // A minute or so of a busy node's samples at most, not the megabytes
    // that, for each of thousands of nodes, grew a starved console's memory.
    assert!(
        unread <= stream_conn::STREAM_WINDOW as usize && unread <= 64 << 10,
        "{unread} bytes taken in unread: the agent should wait (and skip samples)"
    );
    // Read: the window opens as it is read, and the whole message comes.
    let m = tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("the rest arrives once read")
        .expect("no error");
    assert_eq!(m, Some(big));
}
