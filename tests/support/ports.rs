//! Ports for the processes the tests start, without races.
//!
//! A port picked by the test (bind 127.0.0.1:0, read the port, close, hand
//! it to a process) can be taken by another test in between. So every
//! process binds port 0 itself and the test learns the port it got:
//!
//! - our agent logs the address it bound (`serving on ADDR`, `metrics on
//!   http://ADDR/metrics`, under the log target `fleetop_agent::listen`,
//!   shown at any FLEETOP_LOG level by [`LISTEN_LOG`]): [`AgentLog`];
//! - a server that takes a listening socket from systemd (Alertmanager's
//!   `--web.systemd-socket`) gets one the test bound: [`socket_activated`];
//! - Ray says where its GCS and dashboard listen, in its own files;
//! - any other server (Prometheus, VictoriaMetrics): the kernel says which
//!   ports its process (or a child of it) listens on:
//!   [`wait_listening_ports`];
//! - a fake server in the test binary keeps the listener it bound.
//!
//! A port nothing listens on (a node that refuses) is a socket bound and
//! never listening, held by the test: [`RefusedPort`].
//!
//! A server that must be told its ports before it starts and cannot bind
//! port 0 (Slurm: slurm.conf names every daemon's port) gets ports below
//! the kernel's ephemeral range, from which every port-0 bind is served:
//! [`below_ephemeral`]. No other test's server can take those.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Added to an agent's FLEETOP_LOG so that it logs its bound addresses
/// whatever level the test asked for.
pub const LISTEN_LOG: &str = "fleetop_agent::listen=info";

/// How long a process may take to listen: a deadline for starting, not a
/// measure of speed (a loaded CI machine starts Ray in tens of seconds).
pub const START_DEADLINE: Duration = Duration::from_secs(120);

/// The TCP ports `pid` and its descendants listen on, from the kernel:
/// their socket descriptors matched against /proc/net/tcp and tcp6.
pub fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let mut inodes = BTreeSet::new();
    for p in with_descendants(pid) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            if let Some(n) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                inodes.insert(n.to_string());
            }
        }
    }
    let mut ports = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        // The process's own network namespace (the same as ours here).
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address rem_address st ... inode; 0A is LISTEN.
            if f.len() > 9
                && f[3] == "0A"
                && inodes.contains(f[9])
                && let Some(port) = f[1].rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok())
            {
                ports.insert(port);
            }
        }
    }
    ports
}

/// `pid` and every process under it (a launcher's servers, such as Ray's).
fn with_descendants(pid: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // Field 4 of stat, after the name in parentheses (which may hold spaces).
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parent.push((p, pp));
        }
    }
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let p = all[i];
        all.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    all
}

/// Waits until `pid` (or a process under it) listens on at least `n` TCP
/// ports and returns them; fails the test after [`START_DEADLINE`] with
/// `what` and the ports seen.
pub fn wait_listening_ports(pid: u32, n: usize, what: &str) -> BTreeSet<u16> {
    let start = Instant::now();
    loop {
        let ports = listening_ports(pid);
        if ports.len() >= n {
            return ports;
        }
        assert!(
            start.elapsed() < START_DEADLINE,
            "{what} (pid {pid}) listens on {ports:?}, not {n} ports"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `pid` listens on exactly one TCP port: a server asked for
/// port 0 and nothing else.
pub fn wait_listening_port(pid: u32, what: &str) -> u16 {
    let ports = wait_listening_ports(pid, 1, what);
    assert_eq!(ports.len(), 1, "{what} listens on {ports:?}: which one is it?");
    ports.into_iter().next().unwrap_or_default()
}

/// An agent's stderr, read on a thread: its bound addresses, and every
/// line it logged (for tests that check the log).
pub struct AgentLog {
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl AgentLog {
    /// Reads `child`'s stderr (piped). Call at once after the spawn: the
    /// thread drains the pipe so that the agent never blocks on it.
    pub fn of(child: &mut std::process::Child) -> AgentLog {
        let stderr = child.stderr.take().expect("the agent's stderr is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        AgentLog {
            lines,
            seen: Vec::new(),
        }
    }

    /// The gRPC address (`serving on ADDR`).
    pub fn serving(&mut self) -> SocketAddr {
        self.addr_after("serving on ")
    }

    /// The /metrics address (`metrics on http://ADDR/metrics`).
    pub fn metrics(&mut self) -> SocketAddr {
        self.addr_after("metrics on http://")
    }

    /// The lines logged so far.
    pub fn lines(&mut self) -> &[String] {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        &self.seen
    }

    fn addr_after(&mut self, prefix: &str) -> SocketAddr {
        let start = Instant::now();
        let mut next = 0;
        loop {
            for l in &self.seen[next..] {
                if let Some(a) = parse_addr_after(l, prefix) {
                    return a;
                }
            }
            next = self.seen.len();
            let left = START_DEADLINE.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(l) => self.seen.push(l),
                Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => {}
                Err(e) => panic!("no '{prefix}ADDR' from the agent ({e:?}); it logged: {:#?}", self.seen),
            }
        }
    }
}

/// The address after `prefix` in the agent's log written to `path` (an
/// agent whose stderr goes to a file), once it is there.
pub fn wait_addr_in_file(path: &std::path::Path, prefix: &str) -> SocketAddr {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(a) = text.lines().find_map(|l| parse_addr_after(l, prefix)) {
            return a;
        }
        assert!(
            start.elapsed() < START_DEADLINE,
            "no '{prefix}ADDR' in {}: {text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The socket address that follows `prefix` in a log line (plain or JSON).
pub fn parse_addr_after(line: &str, prefix: &str) -> Option<SocketAddr> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '[' | ']')))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The first port the kernel hands out for port 0 (ip_local_port_range).
pub fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Where [`below_ephemeral`] draws from: under Ray's fixed ranges
/// (tests/env/ray_harness.rs: 20,000 up), above the well-known ports.
const NAMED: std::ops::Range<u16> = 10_000..20_000;

/// `n` distinct loopback ports, free now, below the ephemeral range: no
/// port-0 bind (every other server the tests start) can take them. For a
/// server that must know its ports before it starts. This process's
/// picks never repeat while it runs (a counter), and another test binary
/// starts elsewhere in the range (by pid).
pub fn below_ephemeral(n: usize) -> Vec<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    assert!(
        NAMED.end <= ephemeral_low(),
        "ip_local_port_range starts at {}: below {} expected",
        ephemeral_low(),
        NAMED.end
    );
    let span = u32::from(NAMED.end - NAMED.start);
    let offset = std::process::id() % span;
    let mut got = Vec::new();
    for _ in 0..span {
        if got.len() == n {
            break;
        }
        let i = (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = NAMED.start + i as u16;
        // Skip one in use (a server of an earlier test still running).
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            got.push(port);
        }
    }
    assert_eq!(got.len(), n, "no {n} free ports in {NAMED:?}");
    got
}

/// `program`, given `listener` as systemd gives a socket-activated service
/// its socket (fd 3, LISTEN_FDS=1, LISTEN_PID its own pid, through `sh`,
/// whose `exec` keeps the pid). Add the program's arguments to the command.
pub fn socket_activated(program: &str, listener: std::net::TcpListener) -> std::process::Command {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let fd = OwnedFd::from(listener);
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@""#, program]);
    // SAFETY: dup2 and fcntl are async-signal-safe; the closure owns `fd`.
    unsafe {
        cmd.pre_exec(move || {
            let raw = fd.as_raw_fd();
            let rc = if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// A loopback port that refuses connections for as long as the value
/// lives: bound, never listening, and (without SO_REUSEADDR) not to be
/// bound by anyone else meanwhile.
pub struct RefusedPort {
    fd: std::os::fd::OwnedFd,
    pub port: u16,
}

impl Default for RefusedPort {
    fn default() -> RefusedPort {
        RefusedPort::new()
    }
}

impl RefusedPort {
    pub fn new() -> RefusedPort {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket calls on a descriptor this function owns;
        // the address structures are zeroed and sized as the calls require.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
            let rc = libc::bind(raw, (&raw const sa).cast(), len);
            assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
            let mut got: libc::sockaddr_in = std::mem::zeroed();
            let mut got_len = len;
            let rc = libc::getsockname(raw, (&raw mut got).cast(), &mut got_len);
            assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
            RefusedPort {
                fd,
                port: u16::from_be(got.sin_port),
            }
        }
    }

    /// Listens on the port from now on (connections queue until accepted):
    /// a server that comes up where a client was refused before.
    pub fn listen(self) -> std::net::TcpListener {
        let raw = std::os::fd::AsRawFd::as_raw_fd(&self.fd);
        // SAFETY: listen on a descriptor this value owns.
        let rc = unsafe { libc::listen(raw, 128) };
        assert_eq!(rc, 0, "listen: {}", std::io::Error::last_os_error());
        std::net::TcpListener::from(self.fd)
    }

    /// A port that refuses connections until the test binary ends (its
    /// socket is never closed): for a test that needs only the number.
    pub fn for_the_run() -> u16 {
        let r = RefusedPort::new();
        let port = r.port;
        std::mem::forget(r);
        port
    }
}

/// FLEETOP_LOG for an agent under test: `level`, plus its bound addresses.
pub fn agent_log_filter(level: &str) -> String {
    format!("{level},{LISTEN_LOG}")
}

#[test]
fn addresses_are_read_from_plain_and_json_lines() {
    let plain = "2026-01-01T00:00:00Z  INFO fleetop_agent::listen: serving on 127.0.0.1:40123";
    assert_eq!(
        parse_addr_after(plain, "serving on "),
        Some("127.0.0.1:40123".parse().expect("addr"))
    );
    let json = r#"{"level":"INFO","message":"metrics on http://[::1]:9400/metrics"}"#;
    assert_eq!(
        parse_addr_after(json, "metrics on http://"),
        Some("[::1]:9400".parse().expect("addr"))
    );
}

#[test]
fn a_listener_of_ours_is_found_by_the_kernel() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    assert!(listening_ports(std::process::id()).contains(&port));
}
