//! Helpers shared by the test binaries: the binaries under test, agent
//! processes that die with the test, and the ports they got (`ports`).

// Not every test binary uses every helper.
#![allow(dead_code)]

pub mod fake_kube;
pub mod fake_kube_lease;
pub mod fake_kube_patch;
pub mod ports;
pub mod receiver;
pub mod watch;

pub use ports::RefusedPort;

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

/// A child process that is killed when the test ends, passed or panicked.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An agent process under test, killed when the test ends: where it
/// listens (it bound port 0 and logged the port it got) and its log.
pub struct Agent {
    pub child: Killed,
    pub addr: std::net::SocketAddr,
    pub log: ports::AgentLog,
}

impl Agent {
    /// Starts `cmd`, an agent given `--listen 127.0.0.1:0`, with its stderr
    /// read and FLEETOP_LOG `level` (plus the lines that say where it
    /// listens); waits until it listens.
    pub fn spawn(cmd: &mut std::process::Command, level: &str) -> Agent {
        let mut child = cmd
            .env("FLEETOP_LOG", ports::agent_log_filter(level))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("agent starts");
        let mut log = ports::AgentLog::of(&mut child);
        let child = Killed(child);
        let addr = log.serving();
        Agent { child, addr, log }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `host:port`, for `--hosts`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }
}

/// Starts a simulated agent process on a port of its own and waits until
/// it accepts connections.
pub fn start_agent(extra: &[&str]) -> Agent {
    start_agent_on("127.0.0.1:0", extra)
}

/// As [`start_agent`], on `listen`. A port named here is a race with every
/// other test binding port 0: only for an agent restarted on the port it
/// had before (what a console watching a node sees).
pub fn start_agent_on(listen: &str, extra: &[&str]) -> Agent {
    let mut cmd = std::process::Command::new(agent_bin());
    cmd.args([
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
    .args(["--listen", listen])
    .stdout(std::process::Stdio::null());
    Agent::spawn(&mut cmd, "warn")
}

/// Burn-in expectations for tests, in `dir`: the host memory copy (the one
/// check a simulated node really measures) held to a floor any machine
/// meets, so that a verdict never depends on how busy this machine is.
pub fn lenient_expectations(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("expect.toml");
    std::fs::write(&p, "[host]\nhost_memcpy = { min = 0.01, source = \"test\" }\n").expect("expectations");
    p
}

/// A simulated agent that runs burn-ins for the token in `token`, on
/// `scenario`, with `lenient_expectations`.
pub fn start_bench_agent(token: &std::path::Path, scenario: &str) -> Agent {
    let dir = token.parent().expect("the token's directory");
    let expect = lenient_expectations(dir);
    start_agent(&[
        "--insecure",
        "--bench-token-file",
        token.to_str().expect("utf-8"),
        "--bench-expectations",
        expect.to_str().expect("utf-8"),
        "--sim-scenario",
        scenario,
    ])
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

/// A log file as it is now (empty before it exists).
pub fn log_of(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until `done`, failing after `secs` with `context()` (the logs
/// that say why).
pub fn wait_until(secs: u64, done: impl Fn() -> bool, context: impl Fn() -> String) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(secs),
            "not within {secs}s:\n{}",
            context()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// Waits up to `secs` for `what` in the log at `path`.
pub fn wait_log(path: &std::path::Path, what: &str, secs: u64) {
    wait_until(
        secs,
        || log_of(path).contains(what),
        || format!("no {what:?} in {}:\n{}", path.display(), log_of(path)),
    );
}
