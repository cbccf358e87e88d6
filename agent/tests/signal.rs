//! SignalProcess on the fake NVML (tests/fake-nvml): the agent signals only
//! a process NVML lists on a GPU now, and never pid 0, init, itself or its
//! own process group, whatever the GPU's process list names.
//!
//! The agent is started through `sh -c '... exec agent'`, so the shell's pid
//! (`$$`) is the agent's: the profile written just before the `exec` can
//! list the agent itself, and a `sleep` the shell leaves behind, which is in
//! the agent's process group. Every process a test may signal is one it
//! started; the agent runs in a process group of its own.

// How a test learns the port the agent bound (docs/testing.md#ports).
#[allow(dead_code)]
#[path = "../../tests/support/ports.rs"]
mod ports;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::agent_message::Kind;
use fleetop_agent::proto::{SignalRequest, SubscribeRequest};
use tonic::transport::Channel;

#[path = "common/fake_nvml.rs"]
mod fake_nvml;
use fake_nvml::fake_lib;

const TOKEN: &str = "s3cret-bench";

/// A process the test started; killed (and reaped) when dropped.
struct Owned(Child);

impl Owned {
    /// `sleep 600` in a process group of its own.
    fn sleeper() -> Owned {
        let c = Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        Owned(c)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// An agent on the fake NVML whose GPUs list the processes of `profile`
/// (a fault script over the h100-sxm5 profile; `@SELF@` becomes the agent's
/// pid, `@PEER@` that of a process in its process group).
struct Agent {
    child: Owned,
    peer: u32,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.peer != 0 {
            // The agent's own `sleep` (its child): ended by its pid only.
            let _ = Command::new("kill").arg(self.peer.to_string()).status();
        }
    }
}

fn base_profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fake-nvml/profiles/h100-sxm5.toml")
        .canonicalize()
        .expect("the h100-sxm5 profile")
}

impl Agent {
    fn start(script: &str) -> Agent {
        let dir = tempfile::tempdir().expect("tempdir");
        let template = dir.path().join("template.toml");
        let profile = dir.path().join("profile.toml");
        let peer_file = dir.path().join("peer");
        std::fs::write(
            &template,
            format!("base = {:?}\n{script}", base_profile().display().to_string()),
        )
        .expect("write");
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).expect("write");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        for d in ["proc", "sys", "ib"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        let p = |d: &str| dir.path().join(d);
        let child = Command::new("sh")
            .arg("-c")
            .arg(
                "sleep 600 & peer=$!; echo $peer > \"$3\"; \
                 sed -e \"s/@SELF@/$$/g\" -e \"s/@PEER@/$peer/g\" \"$1\" > \"$2\" || exit 1; \
                 shift 3; exec \"$@\"",
            )
            .arg("sh")
            .arg(&template)
            .arg(&profile)
            .arg(&peer_file)
            .arg(env!("CARGO_BIN_EXE_fleetop-agent"))
            .args(["--backend", "nvml", "--listen", "127.0.0.1:0"])
            // One sample at start, then none for an hour: the latest sample
            // is the one taken at start.
            .args([
                "--interval",
                "1h",
                "--kmsg",
                "none",
                "--state-dir",
                "none",
                "--insecure",
            ])
            .arg("--nvml-lib")
            .arg(fake_lib())
            .arg("--bench-token-file")
            .arg(&token)
            .arg("--proc-root")
            .arg(p("proc"))
            .arg("--sysfs-root")
            .arg(p("sys"))
            .arg("--ib-sysfs")
            .arg(p("ib"))
            .env("FAKE_NVML_PROFILE", &profile)
            .env("FLEETOP_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("agent starts");
        let child = Owned(child);
        // Its one listener, bound at start (`exec` kept the shell's pid).
        let port = ports::wait_listening_port(child.0.id(), "the agent");
        let start = Instant::now();
        let peer = loop {
            if let Some(p) = std::fs::read_to_string(&peer_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the agent's shell did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Agent {
            child,
            peer,
            port,
            _dir: dir,
        }
    }

    /// A client, once the agent has taken its first sample (which it returns).
    async fn client(&self) -> (AgentClient<Channel>, fleetop_agent::proto::Sample) {
        let start = Instant::now();
        loop {
            if let Ok(mut c) = AgentClient::connect(format!("http://127.0.0.1:{}", self.port)).await {
                let req = SubscribeRequest {
                    backfill_s: 0,
                    ..Default::default()
                };
                let mut s = c.subscribe(req).await.expect("subscribes").into_inner();
                while let Some(m) = s.message().await.expect("stream") {
                    if let Some(Kind::Sample(sample)) = m.kind {
                        return (c, sample);
                    }
                }
            }
            assert!(start.elapsed() < Duration::from_secs(30), "the agent never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn running(&mut self) -> bool {
        self.child.0.try_wait().expect("wait").is_none()
    }
}

async fn signal(c: &mut AgentClient<Channel>, pid: u32) -> Result<String, String> {
    let req = SignalRequest {
        token: TOKEN.into(),
        pid,
        signal: "TERM".into(),
    };
    c.signal_process(req)
        .await
        .map(|r| r.into_inner().outcome)
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
}

fn pids_on(sample: &fleetop_agent::proto::Sample, gpu: u32) -> Vec<u32> {
    sample
        .gpus
        .iter()
        .find(|g| g.index == gpu)
        .map(|g| g.processes.iter().map(|p| p.pid).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pid_0_init_the_agent_and_its_process_group_are_never_signalled() {
    let target = Owned::sleeper();
    let script = format!(
        "[gpu]\nprocesses = []\n\n[[override]]\nindex = 0\nprocesses = [\
         {{ pid = 0, used_mem_bytes = 1 }}, {{ pid = @SELF@, used_mem_bytes = 1 }}, \
         {{ pid = @PEER@, used_mem_bytes = 1 }}, {{ pid = 1, used_mem_bytes = 1 }}, \
         {{ pid = {}, used_mem_bytes = 1 }}]\n",
        target.pid()
    );
    let mut agent = Agent::start(&script);
    let (mut c, sample) = agent.client().await;
    let me = agent.child.pid();
    let listed = pids_on(&sample, 0);
    assert_eq!(
        listed,
        vec![0, me, agent.peer, 1, target.pid()],
        "the profile's processes"
    );
    // Refused, each saying why; pid 0 first (it would end the agent and its
    // group, this test's processes excepted), pid 1 only once the others are.
    let cases = [
        (0, "process group"),
        (me, "the agent itself"),
        (agent.peer, "the agent's process group"),
        (1, "init"),
    ];
    for (pid, why) in cases {
        let e = signal(&mut c, pid)
            .await
            .expect_err(&format!("pid {pid} must not be signalled"));
        assert!(e.contains(&format!("pid {pid} ")) && e.contains(why), "pid {pid}: {e}");
        assert!(agent.running(), "the agent ended after pid {pid}");
    }
    assert!(alive(agent.peer), "the agent's group was signalled");
    // The agent still serves.
    let (_c2, _) = agent.client().await;
    // A process of the GPU that is none of those is signalled.
    let mut target = target;
    let ok = signal(&mut c, target.pid()).await.expect("a GPU process is signalled");
    assert!(ok.contains("SIGTERM sent"), "{ok}");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = target.0.try_wait().expect("wait") {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the process did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pid_the_gpu_no_longer_lists_is_not_signalled() {
    let gone = Owned::sleeper();
    // GPU 1 lists the process at start; two seconds in, its process list
    // can no longer be read: the agent cannot know the pid is still there.
    let script = format!(
        "[gpu]\nprocesses = []\n\n[[override]]\nindex = 1\nprocesses = [{{ pid = {}, used_mem_bytes = 1 }}]\n\n\
         [[fault]]\nat_s = 2.0\ngpu = 1\nkind = \"processes_no_permission\"\n",
        gone.pid()
    );
    let agent = Agent::start(&script);
    let (mut c, sample) = agent.client().await;
    assert_eq!(pids_on(&sample, 1), vec![gone.pid()], "the latest sample lists it");
    // Past the fault's start (the sample stays the latest: the next is an hour away).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let e = signal(&mut c, gone.pid())
        .await
        .expect_err("a pid NVML does not list now");
    assert!(e.contains(&format!("pid {}", gone.pid())) && e.contains("GPU 1"), "{e}");
    assert!(alive(gone.pid()), "the process was signalled");
}
