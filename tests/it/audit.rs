//! The audit log is evidence: created with tight modes whatever the umask,
//! never written through a symbolic link, naming the OS account that acted
//! (not what the environment claims), and written before an action runs.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use fleetop::model::action::{ActionReport, Stage};

fn lines(path: &std::path::Path) -> Vec<ActionReport> {
    std::fs::read_to_string(path)
        .expect("audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a report per line"))
        .collect()
}

/// `fleetop node drain gpu01` under `umask 000`, with these extra env vars.
fn drain(log: &std::path::Path, read_only: bool, env: &[(&str, &str)]) -> std::process::Output {
    // A fixed script: nothing of the test's data is in it (umask needs a shell).
    let mut c = Command::new("sh");
    c.args(["-c", "umask 000 && exec \"$@\"", "sh", env!("CARGO_BIN_EXE_fleetop")])
        .args(["node", "drain", "gpu01", "--reason", "psu", "--yes"])
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .env("FLEETOP_AUDIT_LOG", log)
        // No Slurm to talk to: the action fails fast, after being logged.
        .env("SLURM_CONF", "/nonexistent/slurm.conf")
        .envs(env.iter().copied());
    if read_only {
        c.arg("--read-only");
    }
    c.output().expect("runs")
}

#[test]
fn the_log_and_its_directory_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("state/fleetop/audit.jsonl");
    let out = drain(&log, true, &[]);
    assert!(!out.status.success());
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode(&log), 0o600);
    assert_eq!(mode(log.parent().expect("dir")), 0o700);
    assert_eq!(lines(&log)[0].stage, Stage::Refused);
}

#[test]
fn a_symbolic_link_in_the_logs_place_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "").expect("write");
    let log = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &log).expect("symlink");
    let out = drain(&log, true, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a symbolic link: refused"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "",
        "nothing written through it"
    );
}

#[test]
fn the_actor_is_the_os_account_and_the_environment_only_an_extra() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    drain(&log, true, &[("USER", "mallory"), ("SUDO_USER", "eve")]);
    let r = &lines(&log)[0];
    let uid = nix::unistd::getuid();
    let name = nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name);
    assert_eq!((r.actor.uid, r.actor.name.clone()), (uid.as_raw(), name));
    assert_eq!(r.actor.env_user.as_deref(), Some("mallory"));
    assert_eq!(r.actor.sudo_user.as_deref(), Some("eve"));
}

#[test]
fn an_action_is_logged_before_it_runs_and_again_with_its_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    let out = drain(&log, false, &[]);
    assert!(!out.status.success(), "no Slurm here: the drain fails");
    let l = lines(&log);
    assert_eq!(
        l.iter().map(|r| r.stage).collect::<Vec<_>>(),
        [Stage::Started, Stage::Done]
    );
    assert!(l[0].results.is_empty() && !l[1].results[0].ok, "{l:?}");
    // Not logged, not run: an unwritable log stops the action.
    let out = drain(std::path::Path::new("/proc/fleetop-audit/audit.jsonl"), false, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot write the audit log"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no node results: nothing ran");
}

/// A state directory others may write to (mode 0777) or a link in its
/// place: the log is not written there, and the action does not run.
#[test]
fn a_state_directory_others_may_write_to_or_a_linked_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = drain(&open.join("audit.jsonl"), false, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("others may write to it (mode 777)"), "{err}");
    assert!(!open.join("audit.jsonl").exists());
    let real = dir.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let linked = dir.path().join("fleetop");
    std::os::unix::fs::symlink(&real, &linked).expect("symlink");
    let out = drain(&linked.join("audit.jsonl"), false, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is a symbolic link: refused"), "{err}");
    assert!(!real.join("audit.jsonl").exists());
}
