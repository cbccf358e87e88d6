//! What one peer can take from an agent: subscribers and streams are capped
//! and given back when the peer goes, quiet connections are closed, the
//! connection count is capped (a bare connection makes way for a new one,
//! an authenticated one never does), and running out of file descriptors makes
//! the accept loop wait (one log line) rather than spin. Everything is
//! asserted on counts the agent keeps, sockets closing, and CPU time with a
//! generous bound: never on this machine being fast.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use fleetop::ingest::agent::{self, Access};
use fleetop::model::target::Target;
use fleetop_agent::proto::SubscribeRequest;
use fleetop_agent::serve::server::{AgentHandle, AgentOptions, Limits};

async fn agent_with(limits: Limits) -> AgentHandle {
    let sim = fleetop::ingest::demo::plan(1, 1, 1, fleetop_agent::now_ms()).remove(0);
    let opts = AgentOptions {
        limits,
        ..Default::default()
    };
    fleetop_agent::serve::server::serve_sim(sim, opts)
        .await
        .expect("serves")
}

fn target(a: &AgentHandle) -> Target {
    Target {
        name: "n1".into(),
        host: a.addr.ip().to_string(),
        port: a.addr.port(),
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

fn live_only() -> SubscribeRequest {
    SubscribeRequest {
        no_backfill: true,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_past_the_cap_are_refused_and_freed_when_the_client_goes() {
    let a = agent_with(Limits {
        max_subscribers: 3,
        ..Limits::default()
    })
    .await;
    let t = target(&a);
    let c = agent::connect_stream(&t, &Access::default()).await.expect("connects");
    // Streams that are opened and never read.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(c.subscribe(&live_only()).await.expect("within the cap"));
    }
    assert_eq!(a.subscribers(), 3);
    let refused = c.subscribe(&live_only()).await.expect_err("past the cap");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(refused.message().contains("--max-subscribers"), "{}", refused.message());
    // The client goes without a word: its subscribers are given back.
    drop(held);
    drop(c);
    until("the subscribers are freed", || a.subscribers() == 0).await;
    let c = agent::connect_stream(&t, &Access::default()).await.expect("connects");
    c.subscribe(&live_only()).await.expect("room again");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_gets_at_most_its_streams_however_many_it_opens() {
    let a = agent_with(Limits {
        max_streams_per_connection: 4,
        max_subscribers: 1000,
        ..Limits::default()
    })
    .await;
    let t = target(&a);
    let c = agent::connect_stream(&t, &Access::default()).await.expect("connects");
    // 200 streams on one connection that never read: the agent advertises
    // MAX_CONCURRENT_STREAMS, so only 4 are ever open at once.
    let mut opened = Vec::new();
    for _ in 0..200 {
        let c = c.clone();
        opened.push(tokio::spawn(async move {
            let s = c.subscribe(&live_only()).await;
            // Hold the stream (unread) until the task is aborted.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(s);
        }));
    }
    until("4 streams open", || a.subscribers() == 4).await;
    // Give the other 196 every chance to get through.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(a.subscribers(), 4, "streams past MAX_CONCURRENT_STREAMS were served");
    for task in &opened {
        task.abort();
    }
    drop(c);
    until("every stream given back", || a.subscribers() == 0).await;
    until("the connection closed", || a.connections() == 0).await;
    a.stop().await;
}

/// Reads until the agent closes the socket; false if it stays open 20 s.
fn closed_by_the_agent(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            // The agent's SETTINGS frame and the like, before it closes.
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_connections_and_truncated_prefaces_are_closed() {
    let a = agent_with(Limits {
        handshake_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_secs(3),
        ..Limits::default()
    })
    .await;
    let bare = TcpStream::connect(a.addr).expect("connects");
    let mut truncated = TcpStream::connect(a.addr).expect("connects");
    truncated.write_all(b"PRI * HTTP/2.0\r\n").expect("writes");
    // A full preface and SETTINGS, then silence: the idle timeout.
    let mut silent = TcpStream::connect(a.addr).expect("connects");
    silent
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .expect("writes");
    let (b, t, s) = tokio::task::spawn_blocking(move || {
        (
            closed_by_the_agent(bare),
            closed_by_the_agent(truncated),
            closed_by_the_agent(silent),
        )
    })
    .await
    .expect("joins");
    assert!(b, "a bare connection stayed open");
    assert!(t, "a truncated preface stayed open");
    assert!(s, "a silent HTTP/2 connection stayed open");
    until("no connection left", || a.connections() == 0).await;
    // A console that keeps reading is not idle: it answers the agent's pings.
    let c = agent::connect_stream(&target(&a), &Access::default())
        .await
        .expect("connects");
    let mut s = c.subscribe(&live_only()).await.expect("subscribes");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        s.message()
            .await
            .expect("still served past the idle timeout")
            .expect("a message");
    }
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_only_answers_pings_is_closed_when_it_opens_no_stream() {
    let a = agent_with(Limits {
        idle_timeout: Duration::from_secs(3),
        ..Limits::default()
    })
    .await;
    // A real HTTP/2 client: it answers the agent's pings, but asks nothing.
    let c = agent::connect(&target(&a), &Access::default()).await.expect("connects");
    until("the connection is open", || a.connections() == 1).await;
    until("the idle connection is closed", || a.connections() == 0).await;
    drop(c);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_a_bare_connection_makes_way_and_authenticated_ones_never_do() {
    let a = agent_with(Limits {
        max_connections: 2,
        handshake_timeout: Duration::from_secs(60),
        ..Limits::default()
    })
    .await;
    // Two bare connections fill the cap; a third takes the first's place.
    let first = TcpStream::connect(a.addr).expect("connects");
    let _second = TcpStream::connect(a.addr).expect("connects");
    until("two connections open", || a.connections() == 2).await;
    let _third = TcpStream::connect(a.addr).expect("the kernel accepts it");
    let closed = tokio::task::spawn_blocking(move || closed_by_the_agent(first))
        .await
        .expect("joins");
    assert!(closed, "the oldest bare connection was kept past the cap");
    assert_eq!(a.connections(), 2);
    // Two consoles subscribe (no token on this agent: any call authenticates),
    // each in the place of a bare one.
    let t = target(&a);
    let c1 = agent::connect_stream(&t, &Access::default()).await.expect("connects");
    let mut s1 = c1.subscribe(&live_only()).await.expect("subscribes");
    let c2 = agent::connect_stream(&t, &Access::default()).await.expect("connects");
    let mut s2 = c2.subscribe(&live_only()).await.expect("subscribes");
    // Now the cap is full of authenticated consoles: a new one is closed at once.
    let fourth = TcpStream::connect(a.addr).expect("the kernel accepts it");
    let closed = tokio::task::spawn_blocking(move || closed_by_the_agent(fourth))
        .await
        .expect("joins");
    assert!(closed, "a connection past a cap of consoles was kept");
    assert_eq!(a.connections(), 2);
    s1.message()
        .await
        .expect("the first console still served")
        .expect("a message");
    s2.message()
        .await
        .expect("the second console still served")
        .expect("a message");
    drop((s1, s2, c1, c2));
    until("the two given back", || a.connections() == 0).await;
    a.stop().await;
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

#[test]
fn out_of_file_descriptors_the_agent_waits_says_so_once_and_recovers() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(crate::agent_bin());
    cmd.args(["--backend", "sim", "--sim-gpus", "1", "--listen", "127.0.0.1:0"])
        .args(["--handshake-timeout", "10m", "--idle-timeout", "1h"])
        // All from one address, and none to make way: descriptors run out first.
        .args(["--max-connections-per-peer", "1000"])
        .env("FLEETOP_LOG", "info")
        .stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = crate::Killed(cmd.spawn().expect("agent starts"));
    let pid = child.0.id();
    let stderr = child.0.stderr.take().expect("stderr");
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(l);
        }
    });
    let mut log = Vec::new();
    let wait_line = |log: &mut Vec<String>, what: &str| {
        let start = Instant::now();
        while !log.iter().any(|l: &String| l.contains(what)) {
            assert!(start.elapsed() < Duration::from_secs(30), "no '{what}' in {log:?}");
            if let Ok(l) = lines.recv_timeout(Duration::from_millis(100)) {
                log.push(l);
            }
        }
    };
    wait_line(&mut log, "serving on");
    let port = log
        .iter()
        .find_map(|l| crate::ports::parse_addr_after(l, "serving on "))
        .expect("the bound address")
        .port();
    // Connections that never speak, until the agent has no descriptor left.
    let mut held = Vec::new();
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            held.push(s);
        }
    }
    wait_line(&mut log, "cannot accept connections");
    // Out of descriptors for 2 s: a spinning accept loop would burn about
    // 2 s of CPU here; waiting, it burns next to nothing. Half of that is
    // generous on any machine.
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let ticks = cpu_ticks(pid) - before;
    // SAFETY: sysconf has no preconditions.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    assert!(
        ticks < per_s,
        "the agent used {ticks} ticks of CPU in 2 s while out of descriptors"
    );
    // Descriptors free up: it serves again, having said so once.
    drop(held);
    wait_line(&mut log, "accepting connections again");
    let shortage_lines = log.iter().filter(|l| l.contains("cannot accept connections")).count();
    assert_eq!(shortage_lines, 1, "{log:?}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let t = Target {
            name: "n1".into(),
            host: "127.0.0.1".into(),
            port,
        };
        let c = agent::connect_stream(&t, &Access::default())
            .await
            .expect("connects again");
        let mut s = c.subscribe(&live_only()).await.expect("subscribes");
        s.message().await.expect("stream").expect("a message");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_interval_and_a_long_history_cannot_grow_the_ring_past_its_bytes() {
    let sim = fleetop::ingest::demo::plan(1, 8, 1, fleetop_agent::now_ms()).remove(0);
    let opts = AgentOptions {
        interval: Duration::from_millis(10),
        history: Duration::from_secs(24 * 3600),
        max_ring_bytes: 256 << 10,
        ..Default::default()
    };
    let a = fleetop_agent::serve::server::serve_sim(sim, opts)
        .await
        .expect("serves");
    // 8.6 million samples would fit the history; 256 KiB holds a few hundred.
    until("the ring is full and still sampling", || {
        a.samples_taken() > 2 * a.ring_size().0 as u64 && a.samples_taken() > 20
    })
    .await;
    let (held, bytes) = a.ring_size();
    assert!(bytes <= 256 << 10, "{bytes} bytes in the ring");
    assert!(held >= 1 && (held as u64) < a.samples_taken(), "{held} held");
    a.stop().await;
}
