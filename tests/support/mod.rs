//! Helpers shared by the test binaries: the binaries under test, free
//! ports, agent processes that die with the test.

// Not every test binary uses every helper.
#![allow(dead_code)]

pub mod fake_kube;
pub mod receiver;
pub mod watch;

use std::path::PathBuf;

/// The `fleetop` binary under test.
pub fn fleetop() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(env!("CARGO_BIN_EXE_fleetop"));
    // Keep tests away from the user's own config and logs.
    c.env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .env_remove("FLEETOP_LOG")
        // A hang fails its test, not CI's run (a test may ask for another).
        .timeout(BIN_TIMEOUT);
    c
}

/// The longest any test lets a `fleetop` it runs go on.
pub const BIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The `fleetop-agent` binary, built beside `fleetop` by `cargo test --workspace`
/// (the agent's own integration tests make cargo build it).
/// Keeps an agent under test off this machine's own kernel log and out of
/// /var/lib (no fault journal): tests that want either give their own.
pub const HERMETIC_AGENT: [&str; 4] = ["--kmsg", "none", "--state-dir", "none"];

pub fn agent_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_fleetop")).with_file_name("fleetop-agent");
    assert!(
        p.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (it builds the agent too)",
        p.display()
    );
    p
}

/// A free loopback port (bound, then released for a child process to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A child process that is killed when the test ends, passed or panicked.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a simulated agent process and waits until it accepts connections.
pub fn start_agent(port: u16, extra: &[&str]) -> Killed {
    let child = std::process::Command::new(agent_bin())
        .args([
            "--backend",
            "sim",
            "--sim-gpus",
            "2",
            "--sim-hostname",
            "n1",
            "--interval",
            "200ms",
        ])
        .args(extra)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("FLEETOP_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("agent starts");
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "agent did not listen on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Killed(child)
}

/// Writes a secret (a token, a key) readable by its owner only, as the
/// agent and the console require.
pub fn write_secret(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write secret");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
}

/// A CA made up for the test, and certificates it signs, written to `dir`:
/// `ca.pem`; `agent.pem` and `agent.key` (for localhost and 127.0.0.1);
/// `console.pem` and `console.key` (a client certificate, for mutual TLS).
/// Generated at run time: no private key lives in the repository.
pub fn write_tls(dir: &std::path::Path) {
    let pki = fleetop::ingest::demo::Pki::new("fleetop test").expect("CA");
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).expect("write CA");
    let agent = pki.issue(&["localhost", "127.0.0.1"]).expect("agent certificate");
    std::fs::write(dir.join("agent.pem"), &agent.cert_pem).expect("write");
    write_secret(&dir.join("agent.key"), &agent.key_pem);
    let console = pki.issue(&["fleetop-console"]).expect("console certificate");
    std::fs::write(dir.join("console.pem"), &console.cert_pem).expect("write");
    write_secret(&dir.join("console.key"), &console.key_pem);
}

#[path = "dcgm.rs"]
pub mod dcgm;
