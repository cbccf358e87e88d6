//! A real Ray cluster on loopback: a head and one worker node from PyPI's
//! `ray` (pinned in `.ci/run`, in the venv `FLEETOP_RAY_VENV`), each with
//! logical GPUs (`--num-gpus`), its own ports and temporary directory, and a
//! custom resource naming it so a job can place work on either. Both are
//! stopped when the test ends (`ray start --block` in its own process
//! group, ended with the group).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `.ci/run` keeps the venv, unless `FLEETOP_RAY_VENV` says.
pub fn venv() -> PathBuf {
    match std::env::var_os("FLEETOP_RAY_VENV") {
        Some(v) => PathBuf::from(v),
        None => dirs_home().join(".cache/fleetop/ray-2.60.0"),
    }
}

fn dirs_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/root".into())
}

pub fn installed() -> bool {
    venv().join("bin/ray").exists()
}

/// A `ray start --block` and the processes it started, ended together.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = self.0.id() as i32;
        // SAFETY: signals a process group this test made (setpgid below).
        unsafe {
            libc::kill(-pgid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: as above; whatever did not end on SIGTERM.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

pub struct RayCluster {
    pub gcs_port: u16,
    pub dashboard_port: u16,
    /// Ray's node name of the head (this machine's host name, the name its
    /// fleetop agent reports) and the worker's IP address (127.0.0.2).
    pub head_name: String,
    pub worker_ip: &'static str,
    pub worker_name: &'static str,
    dir: tempfile::TempDir,
    // The worker first: it goes before the head it reports to.
    _worker: Group,
    _head: Group,
}

fn ray_start(dir: &Path, log: &str, args: &[String]) -> Group {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(dir.join(log)).expect("log");
    let mut cmd = Command::new(venv().join("bin/ray"));
    cmd.arg("start")
        .arg("--block")
        .arg("--disable-usage-stats")
        .args(args)
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .process_group(0);
    Group(cmd.spawn().expect("ray starts"))
}

impl RayCluster {
    pub fn start() -> RayCluster {
        // Ray's unix sockets live under its temp dir: keep the path short.
        let dir = tempfile::Builder::new()
            .prefix("fray")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let head_name = hostname();
        // Every port Ray can take as 0 is 0: its own processes bind them
        // and say which they got (the GCS in `ray_current_cluster`, the
        // dashboard in `ray start`'s output).
        let ports = |from: u16| {
            [
                format!("--min-worker-port={from}"),
                format!("--max-worker-port={}", from + 99),
                "--dashboard-agent-listen-port=0".to_string(),
            ]
        };
        // Ports named here lie below Linux's ephemeral range (32768 up, by
        // default), from which every port-0 bind is served, so no other
        // test's server can take them: both nodes' worker ranges (200
        // ports, which Ray needs as a range) and Ray's client server, which
        // refuses port 0 (1024 to 65535) and cannot be turned off.
        let base = 20_000 + (std::process::id() % 120) as u16 * 100;
        let client_port = crate::ports::below_ephemeral(1)[0];
        let mut head_args = vec![
            "--head".to_string(),
            "--node-ip-address=127.0.0.1".into(),
            "--port=0".into(),
            "--include-dashboard=true".into(),
            "--dashboard-host=127.0.0.1".into(),
            "--dashboard-port=0".into(),
            format!("--ray-client-server-port={client_port}"),
            "--num-cpus=4".into(),
            "--num-gpus=2".into(),
            "--resources={\"fleetop_head\": 100}".into(),
            format!("--node-name={head_name}"),
            format!("--temp-dir={}", dir.path().join("t").display()),
        ];
        head_args.extend(ports(base));
        let head = ray_start(dir.path(), "head.log", &head_args);
        let (gcs_port, dashboard_port) = head_ports(dir.path());
        let mut worker_args = vec![
            format!("--address=127.0.0.1:{gcs_port}"),
            "--node-ip-address=127.0.0.2".into(),
            "--num-cpus=4".into(),
            "--num-gpus=2".into(),
            "--resources={\"fleetop_worker\": 100}".into(),
            "--node-name=ray-worker-1".into(),
        ];
        worker_args.extend(ports(base + 100));
        let worker = ray_start(dir.path(), "worker.log", &worker_args);
        let cluster = RayCluster {
            gcs_port,
            dashboard_port,
            head_name,
            worker_ip: "127.0.0.2",
            worker_name: "ray-worker-1",
            dir,
            _worker: worker,
            _head: head,
        };
        cluster.wait_for("both nodes alive", Duration::from_secs(120), |nodes| {
            nodes.matches("\"ALIVE\"").count() == 2
        });
        cluster
    }

    pub fn dashboard(&self) -> String {
        format!("http://127.0.0.1:{}", self.dashboard_port)
    }

    pub fn gcs(&self) -> String {
        format!("127.0.0.1:{}", self.gcs_port)
    }

    /// Polls the state API's node list until `ok` holds.
    fn wait_for(&self, what: &str, within: Duration, ok: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + within;
        loop {
            let body = http_get(self.dashboard_port, "/api/v0/nodes?detail=1").unwrap_or_default();
            if ok(&body) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Ray: not {what} in {within:?}: {body}\nhead: {}\nworker: {}",
                read(self.dir.path(), "head.log"),
                read(self.dir.path(), "worker.log")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Runs `script` as a Ray driver (the venv's Python, connected to this
    /// cluster); its first line of output is returned once printed, and the
    /// driver keeps running until the returned child is dropped.
    pub fn driver(&self, script: &str) -> (crate::Killed, String) {
        use std::io::BufRead;
        let path = self.dir.path().join("driver.py");
        std::fs::write(&path, script).expect("write driver");
        let mut child = Command::new(venv().join("bin/python"))
            .arg(&path)
            .arg(self.gcs())
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(self.dir.path().join("driver.log")).expect("log"))
            .spawn()
            .expect("python starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(120)).unwrap_or_default();
        assert!(
            !line.trim().is_empty(),
            "the Ray driver printed nothing: {}",
            read(self.dir.path(), "driver.log")
        );
        (crate::Killed(child), line.trim().to_string())
    }
}

/// The head's GCS and dashboard ports, as Ray says once it started: the
/// GCS address it writes for drivers (`<temp-dir>/ray_current_cluster`)
/// and the dashboard in the job-submission hint it prints.
fn head_ports(dir: &Path) -> (u16, u16) {
    let port_after = |text: &str, prefix: &str| crate::ports::parse_addr_after(text, prefix).map(|a| a.port());
    let deadline = Instant::now() + crate::ports::START_DEADLINE;
    loop {
        let cluster = std::fs::read_to_string(dir.join("t/ray_current_cluster")).unwrap_or_default();
        let log = std::fs::read_to_string(dir.join("head.log")).unwrap_or_default();
        let gcs = cluster.trim().parse::<std::net::SocketAddr>().ok().map(|a| a.port());
        let dashboard = port_after(&log, "RAY_API_SERVER_ADDRESS='http://");
        if let (Some(g), Some(d)) = (gcs, dashboard) {
            let up = |port: u16| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            if up(g) && up(d) {
                return (g, d);
            }
        }
        assert!(
            Instant::now() < deadline,
            "Ray's head did not start: {}",
            read(dir, "head.log")
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn read(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

pub fn hostname() -> String {
    nix_hostname().unwrap_or_else(|| "localhost".into())
}

fn nix_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    (rc == 0).then(|| {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    })
}

/// A plain HTTP GET on loopback, the body as text.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}
