//! Helpers shared by the test binaries: the binaries under test, free
//! ports, agent processes that die with the test.

// Not every test binary uses every helper.
#![allow(dead_code)]

use std::path::PathBuf;

/// The `fleetop` binary under test.
pub fn fleetop() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(env!("CARGO_BIN_EXE_fleetop"));
    // Keep tests away from the user's own config and logs.
    c.env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .env_remove("FLEETOP_LOG");
    c
}

/// The `fleetop-agent` binary, built beside `fleetop` by `cargo test --workspace`
/// (the agent's own integration tests make cargo build it).
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
