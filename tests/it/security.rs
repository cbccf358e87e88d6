//! TLS and tokens between console and agents: the demo is served over TLS
//! with tokens (so the secure path is the tested one), plaintext and wrong
//! tokens are refused, wrong guesses are slowed down, mutual TLS keeps out
//! consoles without a certificate, and the bench token never crosses the
//! network in clear unless the user says `--insecure`.

use fleetop::ingest::agent::{self, Access};
use fleetop::model::bench::BenchReport;
use fleetop::model::target::Target;
use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::serve::server::{AgentOptions, TlsSettings};

fn target(addr: std::net::SocketAddr) -> Target {
    Target {
        name: "n1".into(),
        host: addr.ip().to_string(),
        port: addr.port(),
    }
}

/// The first message of a Subscribe stream, or the refusal, in one line.
async fn first_message(t: &Target, access: &Access) -> Result<(), String> {
    let c = agent::connect_stream(t, access).await?;
    let req = SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    };
    let mut s = c
        .subscribe(&req)
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
    match s.message().await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("ended".into()),
        Err(s) => Err(format!("{:?}: {}", s.code(), s.message())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_is_served_over_tls_and_wants_its_token() {
    let demo = fleetop::ingest::demo::start(1, 1, 1).await.expect("demo starts");
    let t = demo.targets().remove(0);
    // The console's own way in works.
    first_message(&t, &demo.access).await.expect("TLS and the token");
    // Plaintext to a TLS agent gets nothing.
    let plain = Access {
        telemetry_token: demo.access.telemetry_token.clone(),
        ..Access::default()
    };
    assert!(first_message(&t, &plain).await.is_err(), "plaintext must fail");
    // TLS without the token, then with a wrong one: refused, saying why.
    let no_token = Access {
        telemetry_token: None,
        ..demo.access.clone()
    };
    let e = first_message(&t, &no_token).await.expect_err("no token");
    assert!(e.contains("Unauthenticated") && e.contains("telemetry token"), "{e}");
    let wrong = Access {
        telemetry_token: Some("guess".into()),
        ..demo.access.clone()
    };
    // A few wrong guesses in a row are answered; past them, wrong tokens
    // from that address are refused at once...
    let mut answered = 1;
    let e = loop {
        let e = first_message(&t, &wrong).await.expect_err("wrong token");
        if !e.contains("wrong telemetry token") {
            break e;
        }
        answered += 1;
        assert!(answered < 20, "guessing is not limited");
    };
    assert!(
        e.contains("ResourceExhausted") && e.contains("too many wrong tokens"),
        "{e}"
    );
    // ...while the right token from the same address is never refused: a
    // guesser beside a console cannot lock it out.
    first_message(&t, &demo.access)
        .await
        .expect("the right token is checked before the allowance");
    assert!(first_message(&t, &wrong).await.is_err(), "wrong ones stay limited");
    demo.stop().await;
}

/// A one-node agent serving TLS with the certificates `write_tls` puts in
/// `dir`; `mutual`: it wants a client certificate from that CA.
async fn tls_agent(dir: &std::path::Path, mutual: bool) -> fleetop_agent::serve::server::AgentHandle {
    crate::write_tls(dir);
    let read = |f: &str| std::fs::read(dir.join(f)).expect("read");
    let opts = AgentOptions {
        tls: Some(TlsSettings {
            cert_pem: read("agent.pem"),
            key_pem: read("agent.key"),
            client_ca_pem: mutual.then(|| read("ca.pem")),
        }),
        ..Default::default()
    };
    let sim = fleetop::ingest::demo::plan(1, 1, 1, fleetop_agent::now_ms()).remove(0);
    fleetop_agent::serve::server::serve_sim(sim, opts)
        .await
        .expect("serves")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_keeps_out_consoles_without_a_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = tls_agent(dir.path(), true).await;
    let t = target(a.addr);
    let p = |f: &str| dir.path().join(f);
    let (ca, cert, key) = (p("ca.pem"), p("console.pem"), p("console.key"));
    let server_only = agent::TlsFiles {
        ca: Some(&ca),
        ..Default::default()
    };
    let anonymous = Access::load(&server_only, None, false).expect("loads");
    assert!(first_message(&t, &anonymous).await.is_err(), "no client certificate");
    let mutual = agent::TlsFiles {
        ca: Some(&ca),
        cert: Some(&cert),
        key: Some(&key),
        domain: None,
    };
    let with_cert = Access::load(&mutual, None, false).expect("loads");
    first_message(&t, &with_cert)
        .await
        .expect("with the console's certificate");
    // A certificate from another CA is not trusted by the console.
    let other = tempfile::tempdir().expect("tempdir");
    crate::write_tls(other.path());
    let other_ca = other.path().join("ca.pem");
    let stranger = agent::TlsFiles {
        ca: Some(&other_ca),
        cert: Some(&cert),
        key: Some(&key),
        domain: None,
    };
    let e = first_message(&t, &Access::load(&stranger, None, false).expect("loads"))
        .await
        .expect_err("the agent's certificate is from a CA the console does not trust");
    assert!(!e.is_empty());
    a.stop().await;
}

/// The console checks the agent's certificate names the host it dialled
/// (or `tls_domain`, where the certificates carry another name), and PEM
/// files that hold no certificate or key are refused at start, naming the
/// file, not at each connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_name_is_checked_and_bad_pem_files_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = tls_agent(dir.path(), false).await;
    let ca = dir.path().join("ca.pem");
    let with_domain = |domain| {
        let files = agent::TlsFiles {
            ca: Some(&ca),
            domain,
            ..Default::default()
        };
        Access::load(&files, None, false).expect("loads")
    };
    // Its certificate is for localhost and 127.0.0.1.
    first_message(&target(a.addr), &with_domain(None))
        .await
        .expect("the address it dialled is in the certificate");
    let e = first_message(&target(a.addr), &with_domain(Some("gpu01.example")))
        .await
        .expect_err("a name the certificate does not carry");
    assert!(e.contains("NotValidForName") || e.contains("not valid for"), "{e}");
    let by_name = Target {
        host: "localhost".into(),
        ..target(a.addr)
    };
    first_message(&by_name, &with_domain(Some("127.0.0.1")))
        .await
        .expect("tls_domain is the name checked");
    a.stop().await;

    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").expect("write");
    let e = Access::load(
        &agent::TlsFiles {
            ca: Some(&garbage),
            ..Default::default()
        },
        None,
        false,
    )
    .expect_err("a CA file without a certificate");
    assert_eq!(e, format!("tls_ca {}: no PEM certificate in it", garbage.display()));
    let cert = dir.path().join("console.pem");
    let e = Access::load(
        &agent::TlsFiles {
            ca: Some(&ca),
            cert: Some(&cert),
            key: Some(&cert),
            domain: None,
        },
        None,
        false,
    )
    .expect_err("a certificate where the key should be");
    assert!(
        e.starts_with(&format!("tls_key {}: no private key in it", cert.display())),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn the_console_does_not_send_the_bench_token_in_clear() {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::write_secret(&dir.path().join("token"), "s3cret\n");
    let token = dir.path().join("token");
    let token = token.to_str().expect("utf-8");
    let _agent = crate::start_agent(&["--bench-token-file", token, "--insecure"]);
    let port = _agent.port();
    let out = crate::fleetop()
        .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
        .args([
            "bench",
            "--hosts",
            &format!("127.0.0.1:{port}"),
            "--yes",
            "--token-file",
            token,
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let report: BenchReport = serde_json::from_slice(&out.stdout).expect("report");
    let err = report.nodes[0].error.as_deref().unwrap_or_default();
    assert!(err.contains("refused to send the bench token without TLS"), "{err}");
    assert!(err.contains("--insecure"), "{err}");
}

#[test]
fn the_agent_refuses_benchmarks_on_plaintext_and_exposed_token_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    crate::write_secret(&token, "s3cret\n");
    let out = std::process::Command::new(crate::agent_bin())
        .args(["--backend", "sim", "--listen", "127.0.0.1:0", "--bench-token-file"])
        .arg(&token)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("plaintext") && err.contains("--insecure"), "{err}");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = std::process::Command::new(crate::agent_bin())
        .args(["--backend", "sim", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&token)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("readable by group or others"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}

/// The secure setup of docs/security.md through the real binaries: an agent
/// with TLS, mutual TLS and a telemetry token; a console configured with the
/// config file's keys. Without the token it is refused, saying why.
#[test]
fn the_documented_secure_setup_works_through_the_binaries() {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::write_tls(dir.path());
    crate::write_secret(&dir.path().join("telemetry.token"), "t0ken\n");
    let p = |f: &str| dir.path().join(f).to_str().expect("utf-8").to_string();
    let _agent = crate::start_agent(&[
        "--tls-cert",
        &p("agent.pem"),
        "--tls-key",
        &p("agent.key"),
        "--tls-client-ca",
        &p("ca.pem"),
        "--token-file",
        &p("telemetry.token"),
    ]);
    let port = _agent.port();
    let config = |token: bool| {
        let mut c = format!(
            "tls_ca = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
            p("ca.pem"),
            p("console.pem"),
            p("console.key")
        );
        if token {
            // The short alias of telemetry_token_file.
            c.push_str(&format!("token_file = \"{}\"\n", p("telemetry.token")));
        }
        let path = dir.path().join(format!("config-{token}.toml"));
        std::fs::write(&path, c).expect("config");
        path
    };
    let hosts = format!("127.0.0.1:{port}");
    let out = crate::fleetop()
        .arg("--config")
        .arg(config(true))
        .args(["export", "--once", "--hosts", &hosts])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: fleetop::export::Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    assert_eq!(snap.nodes[0].status, fleetop::export::Status::Ok);
    let out = crate::fleetop()
        .arg("--config")
        .arg(config(false))
        .args(["export", "--once", "--hosts", &hosts])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("telemetry token"), "{err}");
    // Without the console's certificate the agent ends the handshake: the
    // console says that is likely why, not only "transport error".
    let no_cert = dir.path().join("config-no-cert.toml");
    std::fs::write(
        &no_cert,
        format!(
            "tls_ca = \"{}\"\ntoken_file = \"{}\"\n",
            p("ca.pem"),
            p("telemetry.token")
        ),
    )
    .expect("config");
    let out = crate::fleetop()
        .arg("--config")
        .arg(&no_cert)
        .args(["export", "--once", "--hosts", &hosts])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("may require a client certificate"), "{err}");
}

/// docs/security.md states the bounds the code has: each constant it quotes
/// is read here, so a change to one fails until the document says it too.
#[test]
fn the_documented_bounds_are_the_codes() {
    use fleetop::ingest::{kube, prometheus, promjson, ray};
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).expect("the document");
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let thousands = |n: usize| {
        let s = n.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let mib = |n: usize| format!("{} MiB", n >> 20);
    for said in [
        format!(
            "answer may hold {} and {} series",
            mib(prometheus::MAX_ANSWER_BYTES),
            thousands(promjson::MAX_SERIES)
        ),
        format!(
            "at most 1 GiB of answers and {} series",
            thousands(prometheus::MAX_REFRESH_SERIES)
        ),
        format!(
            "page may hold {} and {} samples",
            mib(fleetop::ingest::promtext::Limits::default().max_bytes),
            thousands(fleetop::ingest::promtext::Limits::default().max_samples)
        ),
        format!(
            "at most {} nodes, {} GPUs (a",
            thousands(prometheus::MAX_REFRESH_NODES),
            thousands(prometheus::MAX_REFRESH_GPUS)
        ),
        format!(
            "and {} GPUs, ports, MIG instances and pods together",
            thousands(prometheus::MAX_REFRESH_ENTITIES)
        ),
        format!(
            "each label kept cut to {} bytes",
            fleetop::ingest::dcgm::MAX_LABEL_BYTES
        ),
        format!(
            "describes at most {} GPUs and {} InfiniBand ports",
            fleetop::ingest::dcgm::MAX_GPUS_PER_NODE,
            fleetop::ingest::dcgm::MAX_PORTS_PER_NODE
        ),
        format!("each call within {} s", kube::CALL_DEADLINE.as_secs()),
        format!(
            "asked within at most {} s (less when sampling is faster) and its answer may hold {}",
            fleetop_agent::sources::pods::MAX_DEADLINE.as_secs(),
            mib(fleetop_agent::sources::pods::MAX_ANSWER_BYTES)
        ),
        format!("each answer at most {}", mib(kube::MAX_ANSWER_BYTES)),
        format!("one budget of {}", mib(ray::MAX_ANSWER)),
        format!("at most {} bytes)", thousands(fleetop::model::action::MAX_REASON_BYTES)),
        format!(
            "waits at most {} s for its open connections",
            fleetop_agent::serve::server::STOP_GRACE.as_secs()
        ),
        format!(
            "at most {} s after its document is written",
            fleetop::cmd::export::STOP_DEADLINE.as_secs()
        ),
        format!("get {} s (`SHUTDOWN_GRACE`)", fleetop::SHUTDOWN_GRACE.as_secs()),
        format!(
            "within {} s at start (`START_DEADLINE`)",
            fleetop_agent::sources::worker::START_DEADLINE.as_secs()
        ),
        format!(
            "{} from one IP address (`--max-connections-per-peer`)",
            fleetop_agent::serve::server::DEFAULT_MAX_CONNECTIONS_PER_PEER
        ),
        format!(
            "before {} newer connections",
            fleetop_agent::serve::server::DEFAULT_MAX_CONNECTIONS_PER_PEER - 1
        ),
    ] {
        assert!(doc.contains(&said), "docs/security.md does not say: {said}");
    }
    assert_eq!(prometheus::MAX_REFRESH_BYTES, 1 << 30, "the document says 1 GiB");
}

/// The table of hostile-input tests in docs/security.md names tests that
/// exist: a renamed or deleted test leaves a hole the document must show.
#[test]
fn the_hostile_input_table_names_tests_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/security.md")).expect("the document");
    let table = doc
        .split("### Hostile inputs, source by source")
        .nth(1)
        .and_then(|t| t.split("\n### ").next())
        .expect("the section");
    let mut sources = String::new();
    let mut stack = vec![
        root.join("src"),
        root.join("tests"),
        root.join("agent"),
        root.join("proto/src"),
    ];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                sources.push_str(&std::fs::read_to_string(&p).expect("source"));
            }
        }
    }
    let mut named = 0;
    for cell in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| source"))
    {
        for name in cell.split('`').skip(1).step_by(2).filter(|n| n.contains("::")) {
            let f = name.rsplit("::").next().expect("a name");
            assert!(
                sources.contains(&format!("fn {f}(")),
                "docs/security.md names {name}, which is no test"
            );
            named += 1;
        }
    }
    assert!(named >= 20, "only {named} tests named");
}
