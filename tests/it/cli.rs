//! The command line as people type it: options that reach the agents work
//! after `node` as before it, and each subcommand's help lists what applies
//! to it, not the screen's options.

use crate::fleetop;

#[test]
fn the_agents_options_work_after_node_as_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    for args in [
        &["node", "history", "gpu01", "--insecure", "--hosts", "127.0.0.1:1"][..],
        &["--insecure", "node", "history", "gpu01", "--hosts", "127.0.0.1:1"][..],
    ] {
        let out = fleetop()
            .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
            .args(args)
            .args(["--format", "json"])
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn node_and_remediate_help_list_only_what_applies_to_them() {
    for cmd in ["node", "remediate"] {
        let out = fleetop().args([cmd, "--help"]).output().expect("runs");
        let help = String::from_utf8_lossy(&out.stdout);
        for not in ["--theme", "--refresh", "--no-mouse", "--demo", "--nodes <"] {
            assert!(!help.contains(not), "{cmd} --help lists {not}:\n{help}");
        }
        assert!(help.contains("--read-only") && help.contains("--config"), "{help}");
    }
    let help = fleetop().args(["node", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--insecure") && help.contains("--expect-gpus"), "{help}");
    // The screen's options go with the commands that have a screen.
    let out = fleetop()
        .env("COLORTERM", "truecolor")
        .args(["demo", "--theme", "nope"])
        .output()
        .expect("runs");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("theme 'nope': no such theme"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_tripped_breaker_is_not_reset_in_read_only_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("remediate.json");
    std::fs::write(
        &state,
        r#"{"tripped":{"at_ms":1000,"why":"5 node(s) drained ...: gpu07 would be the next"}}"#,
    )
    .expect("state");
    let run = |args: &[&str]| {
        fleetop()
            .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
            .args(args)
            .output()
            .expect("runs")
    };
    let out = run(&["--read-only", "remediate", "reset", "--yes"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only mode: reset refused"));
    assert!(std::fs::read_to_string(&state).expect("state").contains("tripped"));
    // Without --yes and without a terminal: asked, not confirmed, kept.
    let out = run(&["remediate", "reset"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not confirmed"), "{err}");
    assert!(err.contains("gpu07 when it tripped"), "names the next node: {err}");
    let out = run(&["remediate", "reset", "--yes"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!std::fs::read_to_string(&state).expect("state").contains("tripped\":{"));
}

/// `watch --remediate dry-run` needs no pager: a person reads what the
/// policy would do in its log first. Slurm cannot be read here: the nodes
/// come from `[slurm.agents]`, and the watch starts all the same.
#[test]
fn a_dry_run_policy_starts_without_a_pager_and_says_so() {
    use std::io::Read;
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[slurm]\ntimeout = \"2s\"\n[slurm.agents]\ngpu01 = \"127.0.0.1:1\"\n",
    )
    .expect("config");
    let log = dir.path().join("watch.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
        .env("SLURM_CONF", dir.path().join("no-slurm.conf"))
        .arg("--config")
        .arg(&cfg)
        .args(["watch", "--slurm", "--remediate", "dry-run"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("starts");
    let mut child = crate::Killed(child);
    let start = std::time::Instant::now();
    let mut text = String::new();
    while !text.contains("remediate: dry-run") {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the watch did not start its policy:\n{text}"
        );
        assert!(child.0.try_wait().expect("wait").is_none(), "it exited:\n{text}");
        std::thread::sleep(std::time::Duration::from_millis(100));
        text.clear();
        std::fs::File::open(&log)
            .expect("log")
            .read_to_string(&mut text)
            .expect("read");
    }
    assert!(text.contains("alerts are not sent"), "{text}");
}

/// `--log-format json`: a headless command's log lines (here `watch`'s
/// first) are JSON objects, one a line, for a log shipper.
#[test]
fn a_headless_log_as_json_is_one_object_a_line() {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .args(["watch", "--log-format", "json", "--hosts", "127.0.0.1:1"])
        .args(["--webhook", "http://127.0.0.1:1/hook"])
        .env("FLEETOP_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let mut line = String::new();
    let read = BufReader::new(child.stderr.take().expect("stderr")).read_line(&mut line);
    let _ = child.kill();
    let _ = child.wait();
    read.expect("a log line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON object");
    assert_eq!(v["level"], "INFO", "{line}");
    assert!(
        v["message"].as_str().is_some_and(|m| m.starts_with("watching 1 nodes")),
        "{line}"
    );
}

/// The man pages and completions are made from the command line's own
/// definitions: every flag `fleetop --help` knows is in fleetop(1), every
/// subcommand has its page, and each shell's completions name them all.
#[test]
fn man_pages_and_completions_hold_every_flag_and_subcommand() {
    use clap::CommandFactory;
    let cmd = fleetop::cli::Cli::command();
    let dir = tempfile::tempdir().expect("tmp");
    let out = fleetop().args(["man", "--out"]).arg(dir.path()).output().expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(dir.path().join("fleetop.1")).expect("fleetop.1");
    let roff = |s: &str| s.replace('-', "\\-");
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        if let Some(long) = a.get_long() {
            assert!(page.contains(&roff(&format!("--{long}"))), "--{long} not in fleetop(1)");
        }
    }
    let subcommands: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    assert!(subcommands.contains(&"export") && subcommands.contains(&"node"));
    for sub in &subcommands {
        assert!(
            dir.path().join(format!("fleetop-{sub}.1")).exists(),
            "no page for {sub}"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = fleetop().args(["completions", shell]).output().expect("runs");
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        for sub in &subcommands {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        assert!(script.contains("read-only"), "{shell}: no --read-only");
    }
}

#[test]
fn a_source_given_before_a_subcommand_with_its_own_is_refused_not_ignored() {
    // Before, `fleetop --hosts gpu07 bench` read the bench's own source (the
    // default, localhost) and burned in whatever answered there.
    for args in [
        &["--hosts", "127.0.0.1:1", "export", "--once"][..],
        &[
            "--tls-ca",
            "ca.pem",
            "bench",
            "--hosts",
            "127.0.0.1:1",
            "--suite",
            "quick",
        ][..],
        &["--slurm", "watch", "--hosts", "127.0.0.1:1"][..],
    ] {
        let out = fleetop().args(args).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran");
        assert!(
            err.contains(&format!("{} goes after the subcommand", args[0])),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn version_names_the_commit_built_from() {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let mut agent = assert_cmd::Command::new(crate::agent_bin());
    agent.timeout(crate::BIN_TIMEOUT);
    for (name, mut cmd) in [("fleetop", fleetop()), ("fleetop-agent", agent)] {
        let out = cmd.arg("--version").output().expect("runs");
        let said = String::from_utf8_lossy(&out.stdout);
        let want = format!("{name} {} (commit ", env!("CARGO_PKG_VERSION"));
        assert!(said.starts_with(&want), "{said}");
        // Built from this checkout, at its HEAD (build.rs reruns on a commit).
        if let Some(head) = &head {
            assert!(said.contains(&format!("(commit {head})")), "{said}: HEAD is {head}");
        }
    }
}

#[test]
fn a_draining_watch_is_refused_by_the_read_only_flag_as_by_the_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = fleetop()
        .env("FLEETOP_AUDIT_LOG", dir.path().join("audit.jsonl"))
        .env("XDG_CONFIG_HOME", dir.path())
        .args(["--read-only", "watch", "--remediate", "drain", "--slurm"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("watch --remediate drain: refused in read-only mode"),
        "{err}"
    );
}
