//! The agent's edge against careless operators and hostile peers: wrong
//! tokens are limited without locking out the right ones, a console refused
//! by mutual TLS is named in the agent's log with the reason, and operator
//! files that are endless or not files at all are refused at start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetop_agent::bench::expect::Expectations;
use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::{BenchRequest, SignalRequest, SubscribeRequest};
use fleetop_agent::serve::server::{AgentOptions, BenchSettings, TlsSettings, serve_sim};
use fleetop_agent::sim::{Model, Scenario, SimConfig};
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

fn sim() -> SimConfig {
    SimConfig {
        hostname: "sec".into(),
        gpus: 2,
        ib_ports: 1,
        model: Model::H100,
        scenario: Scenario::Training,
        seed: 3,
        start_ms: fleetop_agent::now_ms(),
        interval_ms: 1000,
        problem_ms: None,
    }
}

fn subscribe_with(token: &str) -> tonic::Request<SubscribeRequest> {
    let mut r = tonic::Request::new(SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    });
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().expect("ascii"));
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn right_tokens_are_accepted_while_wrong_ones_from_the_same_address_are_limited() {
    let opts = AgentOptions {
        telemetry_token: Some("right-telemetry".into()),
        bench: Some(BenchSettings {
            token: "right-bench".into(),
            expectations: Expectations::load(None).expect("shipped"),
            max_duration: Duration::from_secs(600),
        }),
        // Plaintext: the client is in this process.
        insecure: true,
        ..Default::default()
    };
    let agent = serve_sim(sim(), opts).await.expect("serves");
    let mut c = AgentClient::connect(format!("http://{}", agent.addr))
        .await
        .expect("connects");
    // Wrong telemetry tokens from 127.0.0.1 until it is limited.
    let mut tries = 0;
    loop {
        match c.subscribe(subscribe_with("guess")).await {
            Err(s) if s.code() == Code::ResourceExhausted => break,
            Err(s) => assert_eq!(s.code(), Code::Unauthenticated, "{s:?}"),
            Ok(_) => panic!("a wrong token was accepted"),
        }
        tries += 1;
        assert!(tries < 50, "wrong tokens are never limited");
    }
    // Subscribe: the right token is still accepted, and its stream runs.
    let mut stream = c
        .subscribe(subscribe_with("right-telemetry"))
        .await
        .expect("the right telemetry token while wrong ones are limited")
        .into_inner();
    assert!(matches!(stream.message().await, Ok(Some(_))), "the stream sends");
    drop(stream);
    // RunBench: the right bench token passes the token check (the unknown
    // suite is what refuses it).
    let bench = |token: &str| BenchRequest {
        token: token.into(),
        suite: "nosuch".into(),
        timeout_s: 0,
        net_target: String::new(),
        ..Default::default()
    };
    let s = c.run_bench(bench("right-bench")).await.expect_err("unknown suite");
    assert_eq!(s.code(), Code::InvalidArgument, "the right bench token: {s:?}");
    assert!(s.message().contains("unknown suite"), "{s:?}");
    // SignalProcess: the same (a simulated node then says it has nothing to signal).
    let signal = |token: &str| SignalRequest {
        token: token.into(),
        pid: 4242,
        signal: "TERM".into(),
    };
    let s = c.signal_process(signal("right-bench")).await.expect_err("simulated");
    assert_eq!(s.code(), Code::FailedPrecondition, "the right bench token: {s:?}");
    // Wrong ones stay limited, on every path (the allowance refills one a
    // second: of a few in a row, at least one is refused as too many).
    let mut codes = Vec::new();
    for _ in 0..3 {
        codes.push(c.subscribe(subscribe_with("guess")).await.expect_err("wrong").code());
        codes.push(c.run_bench(bench("guess")).await.expect_err("wrong").code());
        codes.push(c.signal_process(signal("guess")).await.expect_err("wrong").code());
    }
    assert!(codes.contains(&Code::ResourceExhausted), "{codes:?}");
    assert!(
        codes.iter().all(|c| matches!(
            c,
            Code::ResourceExhausted | Code::Unauthenticated | Code::PermissionDenied
        )),
        "{codes:?}"
    );
    drop(c);
    agent.stop().await;
}

/// A CA made for the test, and a certificate it signs for `names`.
struct Pki {
    ca_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("{name} CA"));
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let ca = params.self_signed(&key).expect("CA");
        Pki {
            ca_pem: ca.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// (certificate, key), PEM.
    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
}

/// What the agent logs, kept for the test to read.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).to_string()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Subscribes over TLS trusting `ca`, with a client certificate or none;
/// whether the first message came.
async fn subscribe_tls(addr: std::net::SocketAddr, ca: &str, client: Option<&(String, String)>) -> bool {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((cert, key)) = client {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let Ok(ep) = Channel::from_shared(format!("https://127.0.0.1:{}", addr.port())) else {
        return false;
    };
    let Ok(ep) = ep.tls_config(tls) else { return false };
    let Ok(ch) = ep.connect_timeout(Duration::from_secs(10)).connect().await else {
        return false;
    };
    let mut c = AgentClient::new(ch);
    let req = SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    };
    match c.subscribe(req).await {
        Ok(r) => matches!(r.into_inner().message().await, Ok(Some(_))),
        Err(_) => false,
    }
}

/// Waits (within a generous bound) until the log holds a line with every one of `parts`.
async fn logged(log: &Captured, parts: &[&str]) -> Option<String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if let Some(line) = log.text().lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return Some(line.to_string());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test(flavor = "current_thread")]
async fn consoles_refused_by_mutual_tls_are_named_in_the_log_with_the_reason() {
    // The agent runs on this thread: a thread-local subscriber sees its log.
    let log = Captured::default();
    let w = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let pki = Pki::new("fleetop test");
    let (cert, key) = pki.issue(&["localhost", "127.0.0.1"]);
    let opts = AgentOptions {
        tls: Some(TlsSettings {
            cert_pem: cert.into_bytes(),
            key_pem: key.into_bytes(),
            client_ca_pem: Some(pki.ca_pem.clone().into_bytes()),
        }),
        ..Default::default()
    };
    let agent = serve_sim(sim(), opts).await.expect("serves");
    // With the CA's client certificate: served, and nothing to warn about.
    let console = pki.issue(&["fleetop-console"]);
    assert!(
        subscribe_tls(agent.addr, &pki.ca_pem, Some(&console)).await,
        "a trusted console"
    );
    // Without a client certificate: refused, and the log says who and why.
    assert!(
        !subscribe_tls(agent.addr, &pki.ca_pem, None).await,
        "no client certificate"
    );
    let line = logged(&log, &["127.0.0.1:", "no client certificate"]).await;
    let line = line.unwrap_or_else(|| panic!("no log line names the peer and the reason:\n{}", log.text()));
    assert!(line.contains("WARN"), "{line}");
    eprintln!("logged: {line}");
    // With a certificate from another CA: refused, saying so.
    let stranger = Pki::new("elsewhere").issue(&["fleetop-console"]);
    assert!(
        !subscribe_tls(agent.addr, &pki.ca_pem, Some(&stranger)).await,
        "an unknown CA"
    );
    let line = logged(&log, &["127.0.0.1:", "not signed by --tls-client-ca"]).await;
    assert!(line.is_some(), "no log line for the stranger:\n{}", log.text());
    agent.stop().await;
}

/// Runs the agent with `args` (memory capped, so that an endless read fails
/// rather than fills the machine); its exit status and stderr, or `None` if
/// it was still running after a generous bound (then it is killed).
fn agent_start(args: &[&std::ffi::OsStr]) -> Option<(std::process::ExitStatus, String)> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 4000000; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--backend", "sim", "--sim-gpus", "1", "--listen", "127.0.0.1:0"])
        .args(args)
        .env("FLEETOP_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starts");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read as _;
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err)
                .expect("read");
            return Some((status, err));
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_secret(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .args(["-m", "600"])
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(ok.success(), "mkfifo");
}

#[test]
fn endless_files_and_fifos_are_refused_at_start_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let token = dir.path().join("token");
    write_secret(&token, "s3cret\n");
    let pki = Pki::new("files");
    let (cert, key) = pki.issue(&["localhost"]);
    let (cert_file, key_file) = (dir.path().join("agent.pem"), dir.path().join("agent.key"));
    std::fs::write(&cert_file, cert).expect("write");
    write_secret(&key_file, &key);
    let zero = PathBuf::from("/dev/zero");
    for bad in [&zero, &fifo] {
        let b = bad.as_os_str();
        let (c, k, t) = (cert_file.as_os_str(), key_file.as_os_str(), token.as_os_str());
        let cases: Vec<(&str, Vec<&std::ffi::OsStr>)> = vec![
            ("--tls-cert", vec!["--tls-cert".as_ref(), b, "--tls-key".as_ref(), k]),
            ("--tls-key", vec!["--tls-cert".as_ref(), c, "--tls-key".as_ref(), b]),
            (
                "--tls-client-ca",
                vec![
                    "--tls-cert".as_ref(),
                    c,
                    "--tls-key".as_ref(),
                    k,
                    "--tls-client-ca".as_ref(),
                    b,
                ],
            ),
            ("--token-file", vec!["--token-file".as_ref(), b]),
            (
                "--bench-token-file",
                vec!["--insecure".as_ref(), "--bench-token-file".as_ref(), b],
            ),
            (
                "--bench-expectations",
                vec![
                    "--insecure".as_ref(),
                    "--bench-token-file".as_ref(),
                    t,
                    "--bench-expectations".as_ref(),
                    b,
                ],
            ),
        ];
        for (flag, args) in cases {
            let what = format!("{flag} {}", bad.display());
            let (status, err) = agent_start(&args).unwrap_or_else(|| panic!("{what}: still running after 30 s"));
            assert!(!status.success(), "{what}: started");
            assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
            assert!(
                err.contains(&bad.display().to_string()),
                "{what}: names the file: {err}"
            );
            assert!(err.contains(flag), "{what}: names the flag: {err}");
            assert!(err.contains("not a regular file"), "{what}: says why: {err}");
        }
    }
    // A regular file past the bound (sparse: nothing is written) is refused
    // after reading just past it.
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .and_then(|f| f.set_len(64 << 20))
        .expect("sparse file");
    let b = big.as_os_str();
    for (flag, args) in [
        (
            "--tls-cert",
            vec!["--tls-cert".as_ref(), b, "--tls-key".as_ref(), key_file.as_os_str()],
        ),
        (
            "--bench-expectations",
            vec![
                "--insecure".as_ref(),
                "--bench-token-file".as_ref(),
                token.as_os_str(),
                "--bench-expectations".as_ref(),
                b,
            ],
        ),
    ] {
        let (status, err) = agent_start(&args).unwrap_or_else(|| panic!("{flag}: still running after 30 s"));
        assert!(!status.success(), "{flag}: started");
        assert_eq!(err.trim_end().lines().count(), 1, "{flag}: {err}");
        assert!(
            err.contains(flag) && err.contains(&big.display().to_string()),
            "{flag}: {err}"
        );
        assert!(err.contains("larger than"), "{flag}: {err}");
    }
    // The same files, readable and regular, start the agent (it is then stopped).
    let mut ok = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--backend", "sim", "--sim-gpus", "1", "--listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(&cert_file)
        .arg("--tls-key")
        .arg(&key_file)
        .arg("--token-file")
        .arg(&token)
        .env("FLEETOP_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    std::thread::sleep(Duration::from_millis(500));
    let running = ok.try_wait().expect("wait").is_none();
    let _ = ok.kill();
    let out = ok.wait_with_output().expect("output");
    assert!(running, "{}", String::from_utf8_lossy(&out.stderr));
}
