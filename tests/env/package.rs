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
    // scratch root's.
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-depends", "--force-not-root", "-i"])
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
    assert!(level <= 2.6, "exposure {level}: the README says 2.6");
}
