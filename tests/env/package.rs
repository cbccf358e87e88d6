//! The Debian packages as `scripts/package.sh` builds them (cargo-deb;
//! `.ci/run` builds them before the tests), installed with dpkg into a
//! scratch root: the files and their modes, the config file as a conffile,
//! the man pages and completions, each unit's ExecStart line run there,
//! and the agent's unit as hardened as the README says.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The newest `target/debian/NAME_*.deb`.
fn package(name: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debian");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}_")) && n.ends_with(".deb"))
        })
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop()
}

pub fn installed() -> bool {
    package("fleetop").is_some()
        && package("fleetop-agent").is_some()
        && Path::new("/usr/bin/dpkg").exists()
        && Path::new("/usr/bin/systemd-analyze").exists()
}

fn run(cmd: &mut Command) -> String {
    // Every command here has a deadline: a hang fails this test only.
    let out = cmd.timeout(std::time::Duration::from_secs(120)).output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// A unit's ExecStart line as words, its absolute paths moved under `root`.
fn exec_start(root: &Path, unit: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("lib/systemd/system").join(unit)).expect(unit);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap_or_else(|| panic!("{unit}: no ExecStart"));
    line.split_whitespace()
        .map(|w| match w.strip_prefix('/') {
            Some(rel) => root.join(rel).to_string_lossy().into_owned(),
            None => w.to_string(),
        })
        .collect()
}

pub fn the_packages_install_their_files_and_each_units_exec_start_runs() {
    let agent = package("fleetop-agent").expect("scripts/package.sh");
    let console = package("fleetop").expect("scripts/package.sh");
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path();
    let admin = root.join("var/lib/dpkg");
    for d in ["info", "updates"] {
        std::fs::create_dir_all(admin.join(d)).expect("dpkg's database");
    }
    std::fs::write(admin.join("status"), "").expect("dpkg's status");
    // Their dependencies (the C library) are this machine's, not the
    // scratch root's; the agent's postinst runs here on the root
    // ($DPKG_ROOT), as it has no shell to chroot into.
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-depends", "--force-not-root", "--force-script-chrootless", "-i"])
        .arg(&agent)
        .arg(&console));

    for (path, want) in [
        ("usr/bin/fleetop-agent", 0o755),
        ("usr/bin/fleetop", 0o755),
        ("lib/systemd/system/fleetop-agent.service", 0o644),
        ("lib/systemd/system/fleetop-watch.service", 0o644),
        ("etc/fleetop/agent.toml", 0o644),
        ("usr/share/bash-completion/completions/fleetop-agent", 0o644),
        ("usr/share/bash-completion/completions/fleetop", 0o644),
        ("usr/share/zsh/vendor-completions/_fleetop-agent", 0o644),
        ("usr/share/zsh/vendor-completions/_fleetop", 0o644),
        ("usr/share/fish/vendor_completions.d/fleetop-agent.fish", 0o644),
        ("usr/share/fish/vendor_completions.d/fleetop.fish", 0o644),
    ] {
        assert_eq!(mode(&root.join(path)), want, "{path}");
    }
    let man = root.join("usr/share/man/man1");
    for page in [
        "fleetop-agent",
        "fleetop-agent-config-check",
        "fleetop",
        "fleetop-export",
        "fleetop-node",
    ] {
        let found = [".1", ".1.gz"]
            .iter()
            .any(|ext| man.join(format!("{page}{ext}")).exists());
        assert!(found, "no man page {page}(1)");
    }
    // The config file is the package's conffile: an upgrade keeps an
    // edited one.
    let conffiles = run(Command::new("dpkg-query")
        .arg(format!("--admindir={}", admin.display()))
        .args(["-W", "-f", "${Conffiles}", "fleetop-agent"]));
    assert!(conffiles.contains("/etc/fleetop/agent.toml"), "{conffiles}");

    // The agent's ExecStart line, as installed, accepts its config file.
    let words = exec_start(root, "fleetop-agent.service");
    let said = run(Command::new(&words[0]).args(&words[1..]).args(["config", "check"]));
    assert!(said.contains("etc/fleetop/agent.toml: ok"), "{said}");
    // The watch's line parses (its config is the site's own, not shipped).
    let words = exec_start(root, "fleetop-watch.service");
    let said = run(Command::new(&words[0]).args(&words[1..]).arg("--help"));
    assert!(said.contains("--alertmanager"), "{said}");

    // The agent's unit is as hardened as the README says.
    let analysis = run(Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(format!("--root={}", root.display()))
        .arg("fleetop-agent.service"));
    let level: f64 = analysis
        .lines()
        .find_map(|l| l.split("fleetop-agent.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in {analysis}"));
    assert!(level <= 2.5, "exposure {level}: the README says 2.5");

    // Removed from the root (its maintainer scripts on $DPKG_ROOT): the
    // enable link `systemctl enable` made goes with it; purged: the state
    // and (as root, who may edit the root's passwd) the user go too.
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).expect("wants");
    let link = wants.join("fleetop-agent.service");
    std::os::unix::fs::symlink("/lib/systemd/system/fleetop-agent.service", &link).expect("link");
    std::fs::create_dir_all(root.join("var/lib/fleetop-agent")).expect("state");
    std::fs::write(root.join("var/lib/fleetop-agent/faults.json"), "[]").expect("state");
    let dpkg = |action: &str| {
        run(Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args([
                "--force-depends",
                "--force-not-root",
                "--force-script-chrootless",
                action,
            ])
            .arg("fleetop-agent"));
    };
    dpkg("-r");
    assert!(link.symlink_metadata().is_err(), "a dangling enable link is left");
    assert!(!root.join("usr/bin/fleetop-agent").exists(), "the binary");
    assert!(root.join("etc/fleetop/agent.toml").exists(), "remove keeps the config");
    dpkg("-P");
    assert!(!root.join("var/lib/fleetop-agent").exists(), "purge leaves the state");
    assert!(
        !root.join("etc/fleetop/agent.toml").exists(),
        "purge leaves the conffile"
    );
    if run(Command::new("id").arg("-u")).trim() == "0" {
        let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap_or_default();
        assert!(!passwd.contains("fleetop-agent:"), "purge leaves the user:\n{passwd}");
    }
}

/// The commands of the README's "Use it on a cluster", in order.
fn readme_cluster_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Use it on a cluster"))
        .expect("README: ## Use it on a cluster");
    let mut cmds = Vec::new();
    for block in section.split("```sh\n").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        for line in block.lines() {
            // A comment after a command starts at two spaces and a '#'.
            let cmd = line.split("  #").next().unwrap_or_default().trim();
            if !cmd.is_empty() {
                cmds.push(cmd.to_string());
            }
        }
    }
    cmds
}

/// A running process, killed when dropped (the agent this test starts).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `uid:gid` of `user` in the scratch root's passwd (the package made it).
fn user_in(root: &Path, user: &str) -> String {
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).expect("the root's passwd");
    let f: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with(&format!("{user}:")))
        .unwrap_or_else(|| panic!("no user {user} in the root's passwd:\n{passwd}"))
        .split(':')
        .collect();
    format!("{}:{}", f[2], f[3])
}

/// What a GPU node's admin has before the README's commands: the packages,
/// a CA, the node's key and certificate (for `gpu01` and, so that this
/// test can reach it, 127.0.0.1), and the two tokens.
fn admin_files(dir: &Path) {
    for name in ["fleetop-agent", "fleetop"] {
        let deb = package(name).expect("scripts/package.sh");
        std::fs::copy(&deb, dir.join(deb.file_name().expect("a name"))).expect("copy the package");
    }
    let openssl = |args: &[&str]| {
        run(Command::new("openssl").args(args).current_dir(dir));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=fleetop CA",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec[..],
            &["-keyout", "gpu01.key", "-out", "gpu01.csr", "-subj", "/CN=gpu01"],
        ]
        .concat(),
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:gpu01,IP:127.0.0.1\n").expect("san");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "gpu01.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        "gpu01.pem",
        "-extfile",
        "san.ext",
    ]);
    for token in ["telemetry.token", "bench.token"] {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(token);
        std::fs::write(&p, format!("{token}-{}\n", std::process::id())).expect("token");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("0600");
    }
}

/// The C libraries the installed binaries link, copied into the root so
/// that they run there under chroot (a real node has them from Debian).
fn libraries_into(root: &Path, bin: &Path) {
    let ldd = run(Command::new("ldd").arg(bin));
    for lib in ldd.split_whitespace().filter(|w| w.starts_with('/')) {
        let to = root.join(lib.trim_start_matches('/'));
        // Never over one a running agent has mapped (it would crash).
        if to.exists() {
            continue;
        }
        std::fs::create_dir_all(to.parent().expect("a dir")).expect("lib dir");
        std::fs::copy(lib, &to).unwrap_or_else(|e| panic!("{lib}: {e}"));
    }
}

pub fn chroot_possible() -> bool {
    // chroot, and the agent's user switch, need root: CI runs as root.
    installed()
        && Path::new("/usr/sbin/chroot").exists()
        && Path::new("/usr/bin/openssl").exists()
        && Path::new("/usr/bin/systemd-sysusers").exists()
        && run(Command::new("id").arg("-u")).trim() == "0"
}

/// Each command of the README's "Use it on a cluster" runs as written, on
/// a scratch root that stands for the node: dpkg installs into it (its
/// maintainer script with it: `--force-script-chrootless`, `$DPKG_ROOT`),
/// paths under /etc are the root's, `fleetop-agent` runs in it (chroot, as
/// the package's user), `systemctl enable --now` starts the unit's
/// ExecStart there as its User with its StateDirectory made, and the
/// console's command reads that agent over TLS with the token (`export
/// --once` with the README's flags, at 127.0.0.1 for `gpu[01-64]`: the
/// TUI itself is the tmux tests' part). A README line this test does not
/// know fails it.
pub fn the_readmes_cluster_commands_run_as_written() {
    let admin = tempfile::tempdir().expect("tmp");
    let w = admin.path();
    admin_files(w);
    let node = tempfile::tempdir().expect("tmp");
    let root = node.path();
    let db = root.join("var/lib/dpkg");
    for d in ["info", "updates"] {
        std::fs::create_dir_all(db.join(d)).expect("dpkg's database");
    }
    std::fs::write(db.join("status"), "").expect("dpkg's status");
    if std::net::TcpListener::bind("0.0.0.0:50051").is_err() {
        panic!("port 50051, the agent's default, is taken on this machine");
    }
    let bash = |line: &str| {
        run(Command::new("bash").args(["-euc", line]).current_dir(w));
    };
    let at_root = |line: &str| line.replace(" /etc/", &format!(" {}/etc/", root.display()));
    let mut agent = None;
    let mut ran = Vec::new();
    for line in readme_cluster_commands() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[0] {
            // .ci/run builds the packages before the tests (this test needs them).
            "scripts/package.sh" => {}
            "dpkg" => {
                let rest = line.strip_prefix("dpkg").expect("dpkg");
                bash(&format!(
                    "dpkg --root={} --force-script-chrootless --force-not-root --force-depends{rest}",
                    root.display()
                ));
                for bin in ["usr/bin/fleetop-agent", "usr/bin/fleetop"] {
                    if root.join(bin).exists() {
                        libraries_into(root, &root.join(bin));
                    }
                }
            }
            // The site's settings go in a drop-in (printf > agent.d/...).
            "install" | "sed" | "printf" => {
                let uid = user_in(root, "fleetop-agent");
                let uid = uid.split(':').next().expect("uid");
                bash(&at_root(&line).replace("-o fleetop-agent", &format!("-o {uid}")));
            }
            "fleetop-agent" => {
                let said = run(Command::new("chroot")
                    .arg(format!("--userspec={}", user_in(root, "fleetop-agent")))
                    .arg(root)
                    .arg("/usr/bin/fleetop-agent")
                    .args(&words[1..]));
                assert!(said.contains("/etc/fleetop/agent.toml: ok"), "{line}: {said}");
            }
            "systemctl" => {
                assert_eq!(line, "systemctl enable --now fleetop-agent");
                let unit =
                    std::fs::read_to_string(root.join("lib/systemd/system/fleetop-agent.service")).expect("unit");
                let key = |k: &str| {
                    unit.lines()
                        .find_map(|l| l.strip_prefix(k))
                        .unwrap_or_else(|| panic!("the unit has no {k}"))
                        .to_string()
                };
                let user = user_in(root, &key("User="));
                let state = root.join("var/lib").join(key("StateDirectory="));
                std::fs::create_dir_all(&state).expect("state dir");
                run(Command::new("chown").arg(&user).arg(&state));
                run(Command::new("chmod").arg(key("StateDirectoryMode=")).arg(&state));
                let exec = key("ExecStart=");
                let log = std::fs::File::create(w.join("agent.log")).expect("log");
                let child = std::process::Command::new("chroot")
                    .arg(format!("--userspec={user}"))
                    .arg(root)
                    .args(exec.split_whitespace())
                    .stdout(std::process::Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("the agent starts");
                agent = Some(Running(child));
                // Started, as systemd would have it before the next command:
                // the agent says so once it serves.
                let t0 = std::time::Instant::now();
                while !std::fs::read_to_string(w.join("agent.log"))
                    .unwrap_or_default()
                    .contains("serving on")
                {
                    let log = std::fs::read_to_string(w.join("agent.log")).unwrap_or_default();
                    assert!(
                        t0.elapsed() < std::time::Duration::from_secs(60),
                        "the agent did not start:\n{log}"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
            "fleetop" => {
                assert!(agent.is_some(), "the console's command before the agent started");
                let args: Vec<&str> = words[1..]
                    .iter()
                    .map(|a| if *a == "'gpu[01-64]'" { "127.0.0.1" } else { a })
                    .collect();
                let out = Command::new(root.join("usr/bin/fleetop"))
                    .args(["export", "--once", "--timeout", "30s"])
                    .args(&args)
                    .current_dir(w)
                    .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
                    .timeout(std::time::Duration::from_secs(120))
                    .output()
                    .expect("runs");
                let mut log = std::fs::read_to_string(w.join("agent.log")).unwrap_or_default();
                if let Some(Ok(Some(status))) = agent.as_mut().map(|a| a.0.try_wait()) {
                    log += &format!("the agent ended: {status}");
                }
                assert!(
                    out.status.success(),
                    "{line}: {}\nthe agent's log:\n{log}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
                let n = &doc["nodes"][0];
                assert_eq!(n["status"], "ok", "{n}\nthe agent's log:\n{log}");
                assert_eq!(n["agent"]["version"], env!("CARGO_PKG_VERSION"), "{n}");
            }
            other => panic!("README command this test does not run: {other} ({line})"),
        }
        ran.push(words[0].to_string());
    }
    for want in ["dpkg", "install", "printf", "fleetop-agent", "systemctl", "fleetop"] {
        assert!(
            ran.iter().any(|r| r == want),
            "the README lost its {want} step: {ran:?}"
        );
    }
    // The conffile is left as shipped (an edited one stops an upgrade at
    // a prompt); the site's settings are in a drop-in.
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/agent.toml")).expect("dist");
    let installed = std::fs::read_to_string(root.join("etc/fleetop/agent.toml")).expect("conffile");
    assert_eq!(installed, shipped, "the README's commands edit the conffile");
    assert!(root.join("etc/fleetop/agent.d/50-site.toml").is_file(), "no drop-in");
}

/// The minimal Debian 12 root `scripts/minbase.sh` makes (debootstrap
/// minbase: no systemd, no adduser), as `$FLEETOP_MINBASE`.
pub fn minbase() -> Option<PathBuf> {
    std::env::var_os("FLEETOP_MINBASE")
        .map(PathBuf::from)
        .filter(|p| p.join(".complete").exists())
}

pub fn minbase_possible() -> bool {
    package("fleetop-agent").is_some()
        && minbase().is_some()
        && Path::new("/usr/sbin/chroot").exists()
        && run(Command::new("id").arg("-u")).trim() == "0"
}

/// `command` run in `root` by chroot, with no terminal and no answers: a
/// question stops it (end of file), never a test.
fn in_root(root: &Path, command: &str) -> String {
    run(Command::new("chroot")
        .arg(root)
        .args([
            "/usr/bin/env",
            "DEBIAN_FRONTEND=noninteractive",
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        ])
        .args(["/bin/sh", "-ec", command])
        .write_stdin(""))
}

/// `fleetop-agent`'s dpkg status and version in `root`.
fn status_in(root: &Path) -> String {
    in_root(
        root,
        "dpkg-query -W -f '${Status} ${Version}' fleetop-agent 2>/dev/null || echo not-installed",
    )
    .trim()
    .to_string()
}

/// As an image build or Packer would: the agent's package installed with
/// apt-get into a minimal root with no systemd (its user made by useradd),
/// its unit's ExecStart run there as its user; then upgraded over a site
/// drop-in and an enable link without a question; removed (the enable link
/// gone, the config kept); purged (the user and the state gone, the admin's
/// token and drop-in kept).
pub fn the_agents_package_installs_upgrades_removes_and_purges_with_apt_in_a_minimal_root() {
    let deb = package("fleetop-agent").expect("scripts/package.sh");
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("root");
    run(Command::new("cp")
        .arg("-a")
        .arg(minbase().expect("FLEETOP_MINBASE"))
        .arg(&root));
    assert!(
        !root.join("usr/bin/systemd-sysusers").exists(),
        "the minimal root has systemd"
    );
    std::fs::copy(&deb, root.join("tmp/fleetop-agent.deb")).expect("copy the package");
    // The same package as a newer version, for the upgrade.
    let newer = dir.path().join("newer");
    run(Command::new("dpkg-deb").arg("-R").arg(&deb).arg(&newer));
    let control = newer.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).expect("control");
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .expect("a version")
        .to_string();
    std::fs::write(
        &control,
        text.replace(&format!("Version: {version}"), &format!("Version: {version}+1")),
    )
    .expect("control");
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-b"])
        .arg(&newer)
        .arg(root.join("tmp/fleetop-agent-newer.deb")));

    in_root(
        &root,
        "apt-get install -y -q --no-install-recommends /tmp/fleetop-agent.deb",
    );
    assert_eq!(status_in(&root), format!("install ok installed {version}"));
    let uid = user_in(&root, "fleetop-agent");

    // The unit's ExecStart, run there as its user: it accepts its config,
    // then serves (on a free port: another test holds the default).
    let words = exec_start(&root, "fleetop-agent.service");
    let words: Vec<String> = words
        .iter()
        .map(|w| {
            w.strip_prefix(&*root.to_string_lossy())
                .unwrap_or(w.as_str())
                .to_string()
        })
        .collect();
    let state = root.join("var/lib/fleetop-agent");
    std::fs::create_dir_all(&state).expect("state dir");
    run(Command::new("chown").arg(&uid).arg(&state));
    let said = run(Command::new("chroot")
        .arg(format!("--userspec={uid}"))
        .arg(&root)
        .args(&words)
        .args(["config", "check"]));
    assert!(said.contains("/etc/fleetop/agent.toml: ok"), "{said}");
    let log = dir.path().join("agent.log");
    let child = std::process::Command::new("chroot")
        .arg(format!("--userspec={uid}"))
        .arg(&root)
        .args(&words)
        .args(["--listen", "127.0.0.1:0", "--backend", "sim"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("the agent starts");
    let agent = Running(child);
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("serving on") {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the agent did not start:\n{said}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(agent);

    // What the admin adds: a site drop-in, a token, the unit enabled (the
    // link `systemctl enable` makes), the agent's state.
    in_root(
        &root,
        "mkdir -p /etc/fleetop/agent.d /etc/systemd/system/multi-user.target.wants
         echo 'log_format = \"json\"' >/etc/fleetop/agent.d/site.toml
         echo secret >/etc/fleetop/telemetry.token
         ln -s /lib/systemd/system/fleetop-agent.service /etc/systemd/system/multi-user.target.wants/",
    );
    std::fs::write(state.join("faults.json"), "[]").expect("state");
    let link = root.join("etc/systemd/system/multi-user.target.wants/fleetop-agent.service");

    // The upgrade: no question, the drop-in and the enable link kept.
    in_root(&root, "apt-get install -y -q /tmp/fleetop-agent-newer.deb");
    assert_eq!(status_in(&root), format!("install ok installed {version}+1"));
    assert!(root.join("etc/fleetop/agent.d/site.toml").exists(), "the drop-in");
    assert!(link.symlink_metadata().is_ok(), "an upgrade disabled the unit");
    assert_eq!(user_in(&root, "fleetop-agent"), uid, "an upgrade made the user again");

    // Removed: the binary and the enable link gone, the config kept.
    in_root(&root, "apt-get remove -y -q fleetop-agent");
    assert_eq!(status_in(&root), format!("deinstall ok config-files {version}+1"));
    assert!(!root.join("usr/bin/fleetop-agent").exists(), "the binary");
    assert!(link.symlink_metadata().is_err(), "a dangling enable link is left");
    assert!(root.join("etc/fleetop/agent.toml").exists(), "remove keeps the config");

    // Purged: the user and the state gone, the admin's files kept.
    in_root(&root, "apt-get purge -y -q fleetop-agent");
    assert_eq!(status_in(&root), "not-installed");
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).expect("passwd");
    assert!(!passwd.contains("fleetop-agent:"), "the user is left:\n{passwd}");
    let group = std::fs::read_to_string(root.join("etc/group")).expect("group");
    assert!(!group.contains("fleetop-agent:"), "the group is left:\n{group}");
    assert!(!state.exists(), "the state is left");
    assert!(!root.join("etc/fleetop/agent.toml").exists(), "the conffile is left");
    assert!(
        root.join("etc/fleetop/telemetry.token").exists(),
        "the admin's token went"
    );
    assert!(
        root.join("etc/fleetop/agent.d/site.toml").exists(),
        "the admin's drop-in went"
    );
}
