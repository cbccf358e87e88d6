//! Connection hogs cannot lock a console out. Peers on other addresses
//! hold every connection slot with connections that never authenticate:
//! bare sockets that send nothing, and sockets that send the HTTP/2
//! preface and nothing more (over TLS: a finished TLS handshake, then the
//! preface). Each hog reopens as soon as the agent closes it. A console
//! with the right token still subscribes and gets its samples, and the
//! hogs are closed to make room; a console that authenticated before they
//! came, on an address they share, keeps its stream. Real sockets on loopback (127.0.0.0/8 is
//! all loopback on Linux, so each hog address is a peer of its own).
//! Nothing here is timed but liveness bounds of tens of seconds.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::agent_message::Kind;
use fleetop_agent::serve::server::{AgentHandle, AgentOptions, Limits, TlsSettings, serve_sim};
use fleetop_agent::sim::{Model, Scenario, SimConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

const TOKEN: &str = "right-telemetry-token";
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const MAX_CONNECTIONS: usize = 24;
const PER_PEER: usize = 8;
/// Hog addresses, and hogs on each: together twice the cap, and each
/// address past its own cap.
const HOG_ADDRESSES: u8 = 4;
const HOGS_PER_ADDRESS: usize = 12;

fn sim() -> SimConfig {
    SimConfig {
        hostname: "hogged".into(),
        gpus: 2,
        ib_ports: 1,
        model: Model::H100,
        scenario: Scenario::Training,
        seed: 5,
        start_ms: fleetop_agent::now_ms(),
        interval_ms: 1000,
        problem_ms: None,
    }
}

/// A CA made for the test, and the agent's certificate and key it signs.
struct Pki {
    ca_pem: String,
    ca_der: Vec<u8>,
    cert_pem: String,
    key_pem: String,
}

fn pki() -> Pki {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let ca = params.self_signed(&key).expect("CA");
    let issuer = rcgen::Issuer::new(params, key);
    let agent_key = rcgen::KeyPair::generate().expect("key");
    let agent = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .signed_by(&agent_key, &issuer)
        .expect("signed");
    Pki {
        ca_pem: ca.pem(),
        ca_der: ca.der().to_vec(),
        cert_pem: agent.pem(),
        key_pem: agent_key.serialize_pem(),
    }
}

async fn agent(tls: Option<&Pki>) -> AgentHandle {
    let opts = AgentOptions {
        telemetry_token: Some(TOKEN.into()),
        tls: tls.map(|p| TlsSettings {
            cert_pem: p.cert_pem.clone().into_bytes(),
            key_pem: p.key_pem.clone().into_bytes(),
            client_ca_pem: None,
        }),
        // Only making room closes a hog: no timeout does it in this test.
        limits: Limits {
            max_connections: MAX_CONNECTIONS,
            max_connections_per_peer: PER_PEER,
            handshake_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(3600),
            ..Limits::default()
        },
        ..Default::default()
    };
    serve_sim(sim(), opts).await.expect("serves")
}

#[derive(Clone, Copy)]
enum Hog {
    /// Connects and sends nothing.
    Silent,
    /// Sends the HTTP/2 preface (after TLS, over TLS) and nothing more.
    Preface,
}

/// Hogs' counts: connections the agent closed, by kind.
#[derive(Default)]
struct Closed {
    silent: AtomicUsize,
    preface: AtomicUsize,
}

/// One hog: connects from `from`, holds the connection until the agent
/// closes it, and reconnects, until `stop`.
async fn hog(
    kind: Hog,
    from: IpAddr,
    to: SocketAddr,
    tls: Option<tokio_rustls::TlsConnector>,
    closed: Arc<Closed>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let Ok(sock) = tokio::net::TcpSocket::new_v4() else {
            return;
        };
        if sock.bind(SocketAddr::new(from, 0)).is_err() {
            return;
        }
        let Ok(s) = sock.connect(to).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let held = match (kind, &tls) {
            (Hog::Silent, _) => hold(s, &stop).await,
            (Hog::Preface, None) => {
                let mut s = s;
                let _ = s.write_all(PREFACE).await;
                hold(s, &stop).await
            }
            (Hog::Preface, Some(c)) => match c.connect("localhost".try_into().expect("name"), s).await {
                Ok(mut t) => {
                    let _ = t.write_all(PREFACE).await;
                    let _ = t.flush().await;
                    hold(t, &stop).await
                }
                // Closed by the agent during the handshake.
                Err(_) => true,
            },
        };
        if held {
            match kind {
                Hog::Silent => &closed.silent,
                Hog::Preface => &closed.preface,
            }
            .fetch_add(1, Ordering::SeqCst);
        }
        // Reopened as the agent closes them (a short pause spares the CPU).
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads (and drops) whatever comes until the agent closes the
/// connection: true then, false if the test stopped first.
async fn hold(mut s: impl tokio::io::AsyncRead + Unpin, stop: &AtomicBool) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            r = s.read(&mut buf) => match r {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            },
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                if stop.load(Ordering::SeqCst) {
                    return false;
                }
            }
        }
    }
}

/// Waits (30 s at most) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(30), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

type Stream = tonic::Streaming<fleetop_agent::proto::AgentMessage>;

/// A console from `from` with the right token: its stream, once the
/// description came.
async fn console(addr: SocketAddr, ca_pem: Option<&str>, from: IpAddr) -> Result<Stream, String> {
    let ep = match ca_pem {
        None => Channel::from_shared(format!("http://127.0.0.1:{}", addr.port())).map_err(|e| e.to_string())?,
        Some(ca) => Channel::from_shared(format!("https://127.0.0.1:{}", addr.port()))
            .map_err(|e| e.to_string())?
            .tls_config(
                ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(ca))
                    .domain_name("localhost"),
            )
            .map_err(|e| e.to_string())?,
    };
    let ch = ep
        .local_address(Some(from))
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut c = AgentClient::new(ch);
    let mut req = tonic::Request::new(SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().expect("ascii"));
    let open = async {
        let mut s = c
            .subscribe(req)
            .await
            .map_err(|e| format!("subscribe: {e}"))?
            .into_inner();
        match s.message().await.map_err(|e| format!("stream: {e}"))? {
            Some(m) if matches!(m.kind, Some(Kind::Info(_))) => Ok(s),
            other => Err(format!("no description first: {other:?}")),
        }
    };
    tokio::time::timeout(Duration::from_secs(60), open)
        .await
        .map_err(|_| "no description within 60 s".to_string())?
}

/// Three live samples on `s`, within a liveness bound.
async fn three_samples(s: &mut Stream) -> Result<usize, String> {
    let read = async {
        let mut samples = 0;
        while samples < 3 {
            match s.message().await.map_err(|e| format!("stream: {e}"))? {
                Some(m) if matches!(m.kind, Some(Kind::Sample(_))) => samples += 1,
                Some(_) => {}
                None => return Err("the stream ended".to_string()),
            }
        }
        Ok(samples)
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .map_err(|_| "no samples within 60 s".to_string())?
}

/// Fills the agent with hogs, then subscribes as a console.
async fn hogs_cannot_lock_out_a_console(tls: Option<Pki>) {
    let a = agent(tls.as_ref()).await;
    let connector = tls.as_ref().map(|p| {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(p.ca_der.clone().into()).expect("CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"h2".to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
    });
    let ca = tls.as_ref().map(|p| p.ca_pem.as_str());
    let hog_address = |n: u8| IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + n));
    // A console that subscribed before the hogs came, on an address they
    // then use: authenticated, so never closed for them.
    let mut early = console(a.addr, ca, hog_address(0))
        .await
        .expect("subscribes before the hogs");
    let (closed, stop) = (Arc::new(Closed::default()), Arc::new(AtomicBool::new(false)));
    let mut hogs = Vec::new();
    for n in 0..HOG_ADDRESSES {
        let from = hog_address(n);
        for i in 0..HOGS_PER_ADDRESS {
            let kind = if i % 2 == 0 { Hog::Silent } else { Hog::Preface };
            hogs.push(tokio::spawn(hog(
                kind,
                from,
                a.addr,
                connector.clone(),
                closed.clone(),
                stop.clone(),
            )));
        }
    }
    // Every slot taken, and hogs of both kinds closed to make room.
    until("the hogs fill every slot", || a.connections() >= MAX_CONNECTIONS).await;
    until("hogs of both kinds closed to make room", || {
        closed.silent.load(Ordering::SeqCst) > 0 && closed.preface.load(Ordering::SeqCst) > 0
    })
    .await;
    // A console that comes now, from an address of its own.
    let served = match console(a.addr, ca, IpAddr::V4(Ipv4Addr::LOCALHOST)).await {
        Ok(mut s) => three_samples(&mut s).await,
        Err(e) => Err(e),
    };
    let early_served = three_samples(&mut early).await;
    let evicted_while_served = closed.silent.load(Ordering::SeqCst) + closed.preface.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for h in hogs {
        let _ = tokio::time::timeout(Duration::from_secs(30), h).await;
    }
    assert_eq!(served, Ok(3), "the console was locked out by hogs");
    assert_eq!(
        early_served,
        Ok(3),
        "a console that had authenticated was closed for hogs"
    );
    assert!(evicted_while_served > 0);
    assert!(a.connections() <= MAX_CONNECTIONS, "the cap held");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_hogs_on_every_slot_cannot_lock_out_a_console_with_the_token() {
    hogs_cannot_lock_out_a_console(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_hogs_on_every_slot_cannot_lock_out_a_console_with_the_token() {
    hogs_cannot_lock_out_a_console(Some(pki())).await;
}

/// Runs `c` to its end, within a liveness bound (killed past it).
fn bounded(mut c: std::process::Command) -> std::process::Output {
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(Duration::from_secs(60)) else {
        // SAFETY: kill(2) on the child this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("{c:?} did not end within 60 s");
    };
    out.expect("runs")
}

/// The per-address cap is a flag and a config key like the others, with a
/// range.
#[test]
fn the_per_address_cap_is_a_flag_and_a_config_key_with_a_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("agent.toml");
    for (text, ok) in [
        ("max_connections_per_peer = 8\n", true),
        ("max_connections_per_peer = 0\n", false),
    ] {
        std::fs::write(&cfg, text).expect("write");
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop-agent"));
        c.arg("--config").arg(&cfg).args(["config", "check"]);
        let out = bounded(c);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), ok, "{text}: {err}");
        if !ok {
            assert!(err.contains("`max_connections_per_peer`: "), "{err}");
        }
    }
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop-agent"));
    c.args([
        "--config",
        "none",
        "--max-connections-per-peer",
        "70000",
        "config",
        "check",
    ]);
    let out = bounded(c);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("70000 is not in 1..=65536"));
}
