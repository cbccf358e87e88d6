//! `fleetop watch` as a process for tests: started on the demo with a
//! config of the test's, its stderr kept, ended with SIGTERM.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `fleetop watch` on the demo; its stderr lines are kept.
pub struct Watch {
    child: Option<Child>,
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Watch {
    /// `fleetop --config CONFIG watch --demo --gpus 2 ARGS`, logging at info.
    pub fn start(config_text: &str, args: &[String]) -> Watch {
        let dir = tempfile::tempdir().expect("tempdir");
        let config: PathBuf = dir.path().join("config.toml");
        std::fs::write(&config, config_text).expect("write config");
        let mut child = Command::new(env!("CARGO_BIN_EXE_fleetop"))
            .env("XDG_CONFIG_HOME", dir.path())
            .env("FLEETOP_LOG", "info")
            .arg("--config")
            .arg(&config)
            .args(["watch", "--demo", "--gpus", "2"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start fleetop watch");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().expect("lock").push(line);
            }
        });
        Watch {
            child: Some(child),
            log,
            _dir: dir,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().expect("lock").join("\n")
    }

    pub fn wait_log(&mut self, needle: &str, within: Duration) {
        let end = Instant::now() + within;
        while !self.log().contains(needle) {
            assert!(Instant::now() < end, "no '{needle}' in fleetop's log:\n{}", self.log());
            assert!(self.running(), "fleetop watch exited:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGTERM, and the exit status it ends with.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid, with a valid signal.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < end, "fleetop watch ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
