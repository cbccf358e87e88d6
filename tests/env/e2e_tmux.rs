//! The console inside tmux, driven like a person would:
//! navigate, open a node, filter, switch screens, quit; and the terminal is
//! restored afterwards (on `q` and on SIGTERM).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Each session gets its own tmux server, even when tests run in parallel.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The release build when CI names the one it just built
/// (`FLEETOP_E2E_BIN`, set by `.ci/run`), else the `fleetop` cargo built for
/// this test run: never a stale build.
pub(crate) fn bin() -> PathBuf {
    std::env::var_os("FLEETOP_E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_fleetop")))
}

/// Whether tmux is installed; these tests are reported ignored without it.
pub fn tmux_installed() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server of our own, so a user's sessions are never touched.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn start(bin: &std::path::Path, args: &str, size: (u16, u16)) -> Tmux {
        let t = Tmux {
            socket: format!(
                "fleetop-e2e-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
        };
        // A shell prints the exit status afterwards: once that line shows,
        // tmux has processed everything fleetop wrote before exiting.
        let cmd = format!("sh -c '{} {args}; echo FLEETOP_EXIT=$?; sleep 600'", bin.display());
        let ok = t
            .cmd(&[
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "e2e",
                "-x",
                &size.0.to_string(),
                "-y",
                &size.1.to_string(),
            ])
            .args(["-e", "TERM=xterm-256color", "-e", "XDG_CONFIG_HOME=/nonexistent", &cmd])
            .status()
            .expect("tmux runs")
            .success();
        assert!(ok, "tmux session started");
        t.cmd(&["set-option", "-t", "e2e", "status", "off"])
            .status()
            .expect("tmux");
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]).args(args);
        c
    }

    pub(crate) fn screen(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "e2e"])
            .output()
            .expect("capture");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn display(&self, format: &str) -> String {
        let out = self
            .cmd(&["display-message", "-p", "-t", "e2e", format])
            .output()
            .expect("display");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.cmd(&["send-keys", "-t", "e2e", k]).status().expect("send-keys");
            // Apart, so Esc followed by a key is not read as Alt+key.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    pub(crate) fn wait_for(&self, what: &str, within: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(
                start.elapsed() < within,
                "{what:?} did not appear within {within:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for fleetop to end and checks it ended cleanly and gave the
    /// terminal back: normal screen, cursor shown.
    fn wait_clean_exit(&self, within: Duration) {
        let s = self.wait_for("FLEETOP_EXIT=", within);
        assert!(s.contains("FLEETOP_EXIT=0"), "exit status: {s}");
        assert_eq!(self.display("#{alternate_on}"), "0", "back on the normal screen");
        assert_eq!(self.display("#{cursor_flag}"), "1", "cursor shown again");
    }

    /// The pid of fleetop, the shell's child.
    fn fleetop_pid(&self) -> String {
        let sh = self.display("#{pane_pid}");
        std::fs::read_dir("/proc")
            .expect("procfs")
            .flatten()
            .filter_map(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                let after = stat.rsplit_once(") ")?.1;
                let ppid = after.split_whitespace().nth(1)?;
                (ppid == sh && stat.contains("(fleetop)")).then(|| e.file_name().to_string_lossy().into_owned())
            })
            .next()
            .expect("fleetop runs under the pane's shell")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

pub fn navigate_open_filter_quit_and_the_terminal_is_restored() {
    let bin = bin();
    let t = Tmux::start(&bin, "demo --nodes 12 --gpus 4 --seed 7", (100, 30));
    let s = t.wait_for("12 nodes", Duration::from_secs(60));
    assert!(s.contains("gpu01"), "{s}");
    assert_eq!(
        t.display("#{alternate_on}"),
        "1",
        "the console uses the alternate screen"
    );

    // Name order (the console opens worst first), then the third row.
    t.keys(&["s", "j", "j", "Enter"]);
    let s = t.wait_for("1 history", Duration::from_secs(5));
    assert!(s.contains("gpu03"), "the third node is open: {s}");

    t.keys(&["Escape", "/", "t", "h", "r", "o", "t", "t", "l", "e", "d", "Enter"]);
    let s = t.wait_for("of 12 nodes", Duration::from_secs(5));
    assert!(s.contains("filter throttled"), "{s}");

    t.keys(&["Tab"]);
    t.wait_for("alerts ·", Duration::from_secs(5));
    t.keys(&["?"]);
    t.wait_for("keys", Duration::from_secs(5));
    t.keys(&["Escape", "q"]);
    t.wait_clean_exit(Duration::from_secs(10));
    assert!(!t.screen().contains("12 nodes"), "the console's screen is gone");
}

pub fn sigterm_and_sighup_restore_the_terminal_too() {
    let bin = bin();
    // SIGTERM (a service manager, `kill`) and SIGHUP (the SSH session dropped).
    for signal in ["-TERM", "-HUP"] {
        let t = Tmux::start(&bin, "demo --nodes 4 --gpus 2", (80, 24));
        t.wait_for("4 nodes", Duration::from_secs(60));
        let ok = Command::new("kill")
            .args([signal, &t.fleetop_pid()])
            .status()
            .expect("kill")
            .success();
        assert!(ok);
        t.wait_clean_exit(Duration::from_secs(10));
    }
}

/// Burn-in from the console, for real: the demo's agents run host and TCP
/// benchmarks (their GPU checks are the simulation's, said so in each
/// result) and the bench screen shows them.
pub fn burn_in_from_the_console_runs_on_the_demo_agents() {
    let bin = bin();
    let t = Tmux::start(&bin, "demo --nodes 2 --gpus 1", (120, 30));
    t.wait_for("2 nodes", Duration::from_secs(60));
    t.keys(&["Space", "Space", "B"]);
    t.wait_for("confirm burn-in", Duration::from_secs(5));
    t.keys(&["y"]);
    t.wait_for("burn-in · 2 nodes", Duration::from_secs(5));
    let start = Instant::now();
    let s = loop {
        let s = t.screen();
        let finished = s
            .lines()
            .filter(|l| l.contains("incomplete") || l.contains("passed") || l.contains("FAILED"))
            .count();
        if finished == 2 {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "burn-in did not finish:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // Host and network checks were measured (judged pass, warn or fail by
    // their floors: how fast this machine is decides which, not whether the
    // test passes), and the simulated GPU's copies and burn judged too.
    let count = |row: &str, word: &str| -> u32 {
        let words: Vec<&str> = row.split_whitespace().collect();
        words
            .windows(2)
            .find(|w| w[1] == word)
            .and_then(|w| w[0].parse().ok())
            .unwrap_or(0)
    };
    for node in ["gpu01", "gpu02"] {
        let row = s.lines().find(|l| l.starts_with(node)).unwrap_or_default();
        let measured = count(row, "pass") + count(row, "warn") + count(row, "fail");
        assert!(measured >= 5, "host, network, HBM, PCIe both ways, burn: {row}");
    }
    t.keys(&["q"]);
    t.wait_clean_exit(Duration::from_secs(10));
}

/// With the list sorted by a live metric, nodes move under the cursor every
/// second: the selection must stay on the node chosen, so Enter opens it.
pub fn the_selection_stays_on_its_node_while_a_live_sort_moves_nodes() {
    let t = Tmux::start(&bin(), "demo --nodes 24 --gpus 2 --seed 3", (100, 40));
    t.wait_for("24 nodes", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(2));
    // Sort by utilization, move down, and have the console say which node
    // the cursor is on (`y` copies it and says so).
    t.keys(&["s", "j", "j", "j", "j", "y"]);
    let s = t.wait_for("copied ", Duration::from_secs(5));
    let chosen = s
        .split("copied ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("a node name")
        .to_string();
    // The sort moves nodes around meanwhile.
    std::thread::sleep(Duration::from_secs(4));
    t.keys(&["Enter"]);
    let s = t.wait_for("1 history", Duration::from_secs(5));
    let title = s.lines().nth(2).unwrap_or_default();
    assert!(
        title.trim_start().starts_with(&format!("{chosen} ")),
        "Enter opened another node than {chosen}: {title}\n{s}"
    );
    t.keys(&["q"]);
    t.wait_clean_exit(Duration::from_secs(10));
}

/// A node nobody answers for: `connecting` at first (no false alarm), then
/// a crit `unreachable` alert that says why.
pub fn a_node_nobody_answers_is_connecting_then_an_unreachable_alert_with_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[thresholds]\nunreachable_after = \"3s\"\n").expect("config");
    // Bound and never listening: connections to it are refused.
    let closed = crate::support::RefusedPort::new();
    let port = closed.port;
    let args = format!("--config {} --hosts 127.0.0.1:{port}", cfg.display());
    let t = Tmux::start(&bin(), &args, (100, 30));
    t.wait_for("1 connecting", Duration::from_secs(10));
    t.keys(&["Tab"]);
    let s = t.wait_for("never reached", Duration::from_secs(30));
    let alert = s.lines().find(|l| l.contains("never reached")).unwrap_or_default();
    assert!(alert.starts_with("CRIT") && alert.contains("unreachable"), "{s}");
    // The reason in full, in the pane under the list.
    let pane = s.split("──────────").last().unwrap_or_default().replace('\n', " ");
    assert!(pane.to_lowercase().contains("connection refused"), "{s}");
    t.keys(&["q"]);
    t.wait_clean_exit(Duration::from_secs(10));
}

/// A crit flag raised while the console runs rings the terminal bell (tmux
/// marks the window); with `[notify] bell = false` it does not.
pub fn a_new_crit_flag_rings_the_bell_unless_configured_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quiet = dir.path().join("quiet.toml");
    std::fs::write(&quiet, "[notify]\nbell = false\n").expect("config");
    // One node whose GPU falls off the bus (XID 79, crit) 3 s after start.
    let args = "--demo --gpus 2 --demo-scenarios xid79 --demo-fault-after 3s";
    let bell = |t: &Tmux| t.display("#{window_bell_flag}");

    let t = Tmux::start(&bin(), args, (100, 30));
    let start = Instant::now();
    while bell(&t) != "1" {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no bell; screen:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    t.keys(&["q"]);
    t.wait_clean_exit(Duration::from_secs(30));

    let t = Tmux::start(&bin(), &format!("--config {} {args}", quiet.display()), (100, 30));
    t.wait_for("crit", Duration::from_secs(90));
    // The bell is judged every second: give it a few.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(bell(&t), "0", "bell = false: silent; screen:\n{}", t.screen());
    t.keys(&["q"]);
    t.wait_clean_exit(Duration::from_secs(30));
}

/// The console posts to Alertmanager too (`--alertmanager`), not only
/// `fleetop watch`: the XID alert of the scripted demo reaches the real
/// Alertmanager's receiver while the TUI runs, and closing the TUI is clean.
pub fn the_console_pages_through_alertmanager_while_it_runs() {
    let receiver = crate::support::receiver::Receiver::start();
    let am = crate::alertmanager::start_alertmanager(receiver.port);
    let am_port = am.port;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[notify]\nrepost = \"2s\"\ntimeout = \"2s\"\n").expect("config");
    let args = format!(
        "--config {} --alertmanager http://127.0.0.1:{am_port} --demo --gpus 2 --demo-scenarios xid79 --demo-fault-after 3s",
        config.display()
    );
    let t = Tmux::start(&bin(), &args, (100, 30));
    let got = receiver.wait("firing FleetopXid from the console", Duration::from_secs(120), |v| {
        v["status"] == "firing" && v["groupLabels"]["alertname"] == "FleetopXid"
    });
    assert_eq!(got["alerts"][0]["labels"]["node"], "gpu01", "{got:#}");
    assert_eq!(got["alerts"][0]["labels"]["severity"], "crit", "{got:#}");
    t.keys(&["q"]);
    t.wait_clean_exit(Duration::from_secs(30));
}
