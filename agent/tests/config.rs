//! The agent's config through its binary: `config check` makes the checks
//! a start makes (issue 50, part 5), a config or library others may write
//! is refused (issue 49, part 3), a TLS key others may read is refused as
//! a token is, and drop-ins say where each value came from (issue 50,
//! part 3). Each run of the binary has a deadline.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The agent's exit code, stdout and stderr, or a panic past 30 s.
fn agent(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let (out, err) = (dir.join("out.txt"), dir.join("err.txt"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"));
    cmd.args(args)
        .env("FLEETOP_LOG", "error")
        .env_remove("ROCM_PATH")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::fs::File::create(&err).expect("err"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("starts");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| std::fs::read_to_string(p).expect("read");
    (status.code(), read(&out), read(&err))
}

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn write(path: &Path, text: &str, m: u32) {
    std::fs::write(path, text).expect("write");
    mode(path, m);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A uid that is no one here, for "owned by another user".
const OTHER: u32 = 4242;

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), None).expect("chown (as root)");
}

/// A node's files under a 0700 tempdir: a config at `agent.toml` that
/// serves on loopback without a journal, a certificate and its key (0600),
/// a CA, and a token (0600).
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path();
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        write(&p.join("agent.pem"), &cert.pem(), 0o644);
        write(&p.join("agent.key"), &key.serialize_pem(), 0o600);
        write(&p.join("ca.pem"), &cert.pem(), 0o644);
        write(&p.join("token"), "s3cret\n", 0o600);
        let node = Node { dir };
        node.config("");
        node
    }

    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }

    fn p(&self, f: &str) -> String {
        self.path(f).display().to_string()
    }

    /// agent.toml: loopback, no journal, no kernel log, then `more`.
    fn config(&self, more: &str) {
        let text = format!("listen = \"127.0.0.1:0\"\nbackend = \"sim\"\nkmsg = \"none\"\n{more}");
        write(&self.path("agent.toml"), &text, 0o644);
    }

    /// The TLS keys of the config, with `key` and `ca` as the files named.
    fn tls(&self, key: &str, ca: Option<&str>) -> String {
        let mut t = format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"\nstate_dir = \"none\"\n",
            self.p("agent.pem"),
            self.p(key)
        );
        if let Some(ca) = ca {
            t.push_str(&format!("tls_client_ca = \"{}\"\n", self.p(ca)));
        }
        t
    }

    /// `config check` with `flags` before it and `after` (its own) after.
    fn check_with(&self, flags: &[&str], after: &[&str]) -> (Option<i32>, String, String) {
        let config = self.p("agent.toml");
        let mut args = vec!["--config", config.as_str()];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["config", "check"]);
        args.extend_from_slice(after);
        agent(self.dir.path(), &args, &[])
    }

    fn check(&self, after: &[&str]) -> (Option<i32>, String, String) {
        self.check_with(&[], after)
    }
}

fn refused(got: (Option<i32>, String, String), want: &[&str]) {
    let (code, out, err) = got;
    assert_ne!(code, Some(0), "said ok: {out}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in {err:?}");
    }
}

#[test]
fn config_check_passes_a_good_node() {
    let n = Node::new();
    n.config(&format!(
        "{}token_file = \"{}\"\n",
        n.tls("agent.key", Some("ca.pem")),
        n.p("token")
    ));
    let (code, out, err) = n.check(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("agent.toml: ok"), "{out}");
}

#[test]
fn config_check_refuses_a_state_dir_others_may_write() {
    let n = Node::new();
    let state = n.path("state");
    std::fs::create_dir(&state).expect("mkdir");
    mode(&state, 0o777);
    n.config(&format!("state_dir = \"{}\"\n", state.display()));
    refused(n.check(&[]), &["--state-dir", "others may write to it (mode 777)"]);
}

#[test]
fn config_check_refuses_a_garbage_tls_key() {
    let n = Node::new();
    write(&n.path("garbage.key"), "not a key\n", 0o600);
    n.config(&n.tls("garbage.key", None));
    refused(n.check(&[]), &["--tls-key", "no private key"]);
}

#[test]
fn config_check_refuses_a_mismatched_tls_key() {
    let n = Node::new();
    let other = rcgen::KeyPair::generate().expect("key");
    write(&n.path("other.key"), &other.serialize_pem(), 0o600);
    n.config(&n.tls("other.key", None));
    refused(n.check(&[]), &["--tls-cert and --tls-key"]);
}

#[test]
fn config_check_refuses_a_garbage_client_ca() {
    let n = Node::new();
    write(&n.path("garbage-ca.pem"), "-----BEGIN NOTHING-----\n", 0o644);
    n.config(&n.tls("agent.key", Some("garbage-ca.pem")));
    refused(n.check(&[]), &["--tls-client-ca"]);
}

#[test]
fn config_check_refuses_a_key_the_units_user_cannot_read() {
    if !is_root() {
        eprintln!("skipped: needs root, to check for another user");
        return;
    }
    let n = Node::new();
    n.config(&n.tls("agent.key", None));
    let other = OTHER.to_string();
    // root's, 0600: root reads it, the unit's user does not.
    refused(
        n.check(&["--as-user", &other]),
        &["--tls-key", &n.p("agent.key"), "may not read"],
    );
    // The user's own (and the directories open to it): ok.
    mode(n.dir.path(), 0o755);
    chown(&n.path("agent.key"), OTHER);
    let (code, _, err) = n.check(&["--as-user", &other]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn config_check_refuses_a_token_the_units_user_cannot_read() {
    if !is_root() {
        eprintln!("skipped: needs root, to check for another user");
        return;
    }
    let n = Node::new();
    mode(n.dir.path(), 0o755);
    n.config(&format!("token_file = \"{}\"\nstate_dir = \"none\"\n", n.p("token")));
    let other = OTHER.to_string();
    refused(
        n.check(&["--as-user", &other]),
        &["--token-file", &n.p("token"), "may not read"],
    );
    chown(&n.path("token"), OTHER);
    let (code, _, err) = n.check(&["--as-user", &other]);
    assert_eq!(code, Some(0), "{err}");
}

/// A private key group or others may read is refused as a token is: at
/// start and by `config check`.
#[test]
fn a_tls_key_others_may_read_is_refused_at_start_and_by_check() {
    let n = Node::new();
    mode(&n.path("agent.key"), 0o644);
    n.config(&n.tls("agent.key", None));
    refused(n.check(&[]), &["--tls-key", &n.p("agent.key"), "mode 0644"]);
    let config = n.p("agent.toml");
    refused(
        agent(n.dir.path(), &["--config", &config], &[]),
        &["--tls-key", "readable by group or others"],
    );
}

#[test]
fn a_config_others_may_write_is_refused() {
    let n = Node::new();
    mode(&n.path("agent.toml"), 0o666);
    refused(n.check(&[]), &["agent.toml", "anyone may write to", "refusing it"]);
    // 0644, but in a directory anyone may write to.
    mode(&n.path("agent.toml"), 0o644);
    mode(n.dir.path(), 0o777);
    refused(n.check(&[]), &["anyone may write to", "(mode 777)"]);
    mode(n.dir.path(), 0o775);
    refused(n.check(&[]), &["its group may write to"]);
    mode(n.dir.path(), 0o700);
    let (code, _, err) = n.check(&[]);
    assert_eq!(code, Some(0), "{err}");
    if is_root() {
        chown(&n.path("agent.toml"), OTHER);
        refused(n.check(&[]), &["owned by uid 4242, not root or the agent's user"]);
    }
}

#[test]
fn an_nvml_lib_others_may_write_is_refused() {
    let n = Node::new();
    write(&n.path("libnvidia-ml.so.1"), "not loaded", 0o666);
    n.config(&format!(
        "nvml_lib = \"{}\"\nstate_dir = \"none\"\n",
        n.p("libnvidia-ml.so.1")
    ));
    refused(n.check(&[]), &["--nvml-lib", "anyone may write to"]);
    let config = n.p("agent.toml");
    refused(
        agent(n.dir.path(), &["--config", &config], &[]),
        &["--nvml-lib", "refusing to load it"],
    );
    let lib = n.p("libnvidia-ml.so.1");
    refused(
        agent(
            n.dir.path(),
            &["sample", "--once", "--backend", "nvml", "--nvml-lib", &lib],
            &[],
        ),
        &["--nvml-lib", "refusing to load it"],
    );
}

#[test]
fn an_amd_lib_others_may_write_is_refused() {
    let n = Node::new();
    let lib = n.path("rocm/lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    write(&lib.join("libamd_smi.so"), "not loaded", 0o644);
    mode(&lib, 0o777);
    let rocm = n.path("rocm");
    let config = n.p("agent.toml");
    n.config("state_dir = \"none\"\n");
    refused(
        agent(
            n.dir.path(),
            &["--config", &config, "--backend", "amd"],
            &[("ROCM_PATH", &rocm)],
        ),
        &["AMD SMI", "libamd_smi.so", "ROCM_PATH", "refusing to load it"],
    );
}

#[test]
fn drop_ins_are_read_in_order_and_check_names_each_values_file() {
    let n = Node::new();
    let d = n.path("agent.d");
    std::fs::create_dir(&d).expect("mkdir");
    write(
        &d.join("50-site.toml"),
        "state_dir = \"none\"\ninterval = \"2s\"\n",
        0o644,
    );
    write(&d.join("90-last.toml"), "interval = \"3s\"\n", 0o644);
    write(&d.join("README"), "not read", 0o644);
    write(&d.join("10-first.toml.dpkg-old"), "garbage = 1", 0o644);
    let (code, out, err) = n.check_with(&["--listen", "127.0.0.1:9"], &[]);
    assert_eq!(code, Some(0), "{err}");
    let line = |k: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{k} = ")))
            .unwrap_or_else(|| panic!("no {k} in {out}"))
            .to_string()
    };
    let interval = line("interval");
    assert!(
        interval.starts_with("interval = \"3s\"  # ") && interval.contains("90-last.toml:1, over "),
        "{interval}"
    );
    assert!(interval.contains("50-site.toml:2"), "{interval}");
    assert!(line("state_dir").contains("50-site.toml:1"), "{out}");
    assert!(line("listen").contains("the command line's flag wins"), "{out}");
    assert!(line("kmsg").contains("agent.toml:3"), "{out}");
    let oks: Vec<&str> = out.lines().filter(|l| l.ends_with(": ok")).collect();
    assert_eq!(oks.len(), 3, "{out}");
    assert!(
        oks[0].ends_with("agent.toml: ok") && oks[2].ends_with("90-last.toml: ok"),
        "{out}"
    );
    // A drop-in others may write to is refused as the main file is.
    mode(&d.join("90-last.toml"), 0o666);
    refused(n.check(&[]), &["90-last.toml", "anyone may write to"]);
    mode(&d.join("90-last.toml"), 0o644);
    mode(&d, 0o777);
    refused(n.check(&[]), &["agent.d", "anyone may write to"]);
}
