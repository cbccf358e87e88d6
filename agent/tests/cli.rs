//! The agent's command line: NVML missing is one clear line; `sample --once`
//! reads a real (test-written) InfiniBand sysfs tree and the host. (Having
//! integration tests also makes `cargo test --workspace` build the agent
//! binary, which the console's tests run.)

use std::process::Command;

/// Whether this machine has an NVIDIA driver (then the no-NVML tests skip).
fn has_nvml() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/lib64/libnvidia-ml.so.1",
        "/usr/lib/libnvidia-ml.so.1",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists())
}

#[test]
fn backend_nvml_without_a_driver_fails_in_one_line() {
    if has_nvml() {
        eprintln!("skipped: this machine has NVML");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--backend", "nvml", "--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("NVML not available"), "{err}");
}

#[test]
fn sample_once_without_nvml_reads_host_and_infiniband() {
    if has_nvml() {
        eprintln!("skipped: this machine has NVML");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let port = dir.path().join("mlx5_0/ports/1");
    std::fs::create_dir_all(port.join("counters")).expect("mkdir");
    std::fs::write(port.join("state"), "4: ACTIVE\n").expect("w");
    std::fs::write(port.join("rate"), "200 Gb/sec (4X HDR)\n").expect("w");
    std::fs::write(port.join("counters/port_xmit_data"), "25\n").expect("w");
    std::fs::write(port.join("counters/symbol_error"), "N/A (no PMA)\n").expect("w");

    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["sample", "--once", "--format", "json", "--ib-sysfs"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NVML not available") && err.contains("host and InfiniBand data only"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(doc["info"]["backend"], "none");
    assert_eq!(doc["info"]["ib_ports"][0]["device"], "mlx5_0");
    let ib = &doc["sample"]["ib_ports"][0];
    assert_eq!(ib["state"], "ACTIVE");
    assert_eq!(ib["rate_gbps"], 200);
    assert_eq!(ib["tx_bytes"], 100);
    assert_eq!(ib["errors_present_mask"], 0, "N/A is skipped, not read as 0");
    assert!(doc["sample"]["host"]["mem_total_bytes"].as_u64().expect("mem") > 0);
    assert!(doc["sample"]["gpus"].as_array().expect("array").is_empty());
}

#[test]
fn help_lists_every_scenario() {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .arg("--help")
        .output()
        .expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for s in fleetop_agent::sim::Scenario::all() {
        assert!(help.contains(&s.name()), "{} missing from --help", s.name());
    }
}

#[test]
fn a_zero_interval_is_refused_not_a_panic() {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--backend", "sim", "--interval", "0ms"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'0ms' is out of range"), "{err}");
}

/// Durations and counts that would take the agent's memory (or overflow its
/// arithmetic) are refused at start, with a line naming the value.
#[test]
fn durations_and_counts_out_of_range_are_clear_errors() {
    for (args, says) in [
        (&["--interval", "1ms"][..], "'1ms' is out of range: from 10ms to 1h"),
        (&["--history", "300000000000y"][..], "'300000000000y'"),
        (&["--history", "2days"][..], "'2days' is out of range"),
        (&["--sim-history", "1y"][..], "'1y' is out of range"),
        (&["--handshake-timeout", "0s"][..], "'0s' is out of range"),
        (&["--idle-timeout", "99999h"][..], "'99999h' is out of range"),
        (&["--bench-max-duration", "10y"][..], "'10y' is out of range"),
        (&["--sim-clock-offset", "-100y"][..], "'100y' is out of range"),
        (&["--sim-gpus", "100000"][..], "100000 is not in 1..=64"),
        (&["--sim-gpus", "0"][..], "0 is not in 1..=64"),
        (&["--max-subscribers", "0"][..], "0 is not in 1..=4096"),
        (&["--history-max-mib", "100000"][..], "100000 is not in 1..=4096"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
            .args(["--backend", "sim", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// The first line a serving simulated agent logs (stderr a pipe, as a
/// file or the journal is), started with `extra` flags, then stopped.
fn first_log_line(extra: &[&str]) -> String {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(extra)
        .args(["--backend", "sim", "--listen", "127.0.0.1:0"])
        .args(["--kmsg", "none", "--state-dir", "none", "--config", "none"])
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
    line
}

/// A log that is not a terminal (a file, the journal) gets plain text, no
/// colour codes.
#[test]
fn the_log_to_a_file_has_no_colour_codes() {
    let line = first_log_line(&[]);
    assert!(line.contains("serving on"), "{line}");
    assert!(!line.contains('\u{1b}'), "colour codes in a file: {line:?}");
}

/// The agent's log as JSON objects, one a line, for log shippers.
#[test]
fn the_log_as_json_is_one_object_a_line() {
    let line = first_log_line(&["--log-format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON object");
    assert_eq!(v["level"], "INFO", "{line}");
    assert!(
        v["message"].as_str().is_some_and(|m| m.starts_with("serving on")),
        "{line}"
    );
}

fn config_check(dir: &std::path::Path, toml: &str, flags: &[&str]) -> (Option<i32>, String, String) {
    let path = dir.join("agent.toml");
    std::fs::write(&path, toml).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .arg("--config")
        .arg(&path)
        .args(flags)
        .args(["config", "check"])
        .output()
        .expect("runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `config check` reads what a start reads (here a token file), a flag on
/// the command line wins over the file, and a bad key or value is one line
/// naming the file and the line.
#[test]
fn the_config_file_is_checked_as_a_start_would_and_flags_win() {
    let dir = tempfile::tempdir().expect("tmp");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").expect("write");
    let mut perm = std::fs::metadata(&token).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
    std::fs::set_permissions(&token, perm).expect("chmod");
    let good = format!(
        "# fleetop-agent settings\nlisten = \"127.0.0.1:50551\"\nstate_dir = \"/var/lib/fleetop-agent\"\ntoken_file = \"{}\"\nexpect_gpus = 8\ninsecure = false\n",
        token.display()
    );
    let (code, out, err) = config_check(dir.path(), &good, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim_end().ends_with("agent.toml: ok"), "{out}");

    let missing = good.replace(&token.display().to_string(), "/nonexistent/token");
    let (code, _, err) = config_check(dir.path(), &missing, &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/token"), "{err}");
    // The flag wins over the file's key.
    let (code, _, err) = config_check(dir.path(), &missing, &["--token-file", &token.to_string_lossy()]);
    assert_eq!(code, Some(0), "{err}");

    for (toml, want) in [
        (
            "listen = \"127.0.0.1:1\"\nstate_dri = \"/x\"\n",
            "agent.toml:2: unknown key `state_dri`",
        ),
        ("\n\nexpect_gpus = 0\n", "agent.toml:3: `expect_gpus`: "),
        ("interval = \"soon\"\n", "agent.toml:1: `interval`: "),
        ("insecure = \"yes\"\n", "agent.toml:1: `insecure` is true or false"),
    ] {
        let (code, out, err) = config_check(dir.path(), toml, &[]);
        assert_eq!(code, Some(2), "{toml}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{want:?} not in {err:?}");
        assert!(out.is_empty());
    }
    // A file named and missing is an error, not a start without it.
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--config", "/nonexistent/agent.toml", "config", "check"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--config /nonexistent/agent.toml"));
}

/// The shipped example (dist/agent.toml) is a file the agent accepts.
#[test]
fn the_shipped_config_example_passes_its_check() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../dist/agent.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["--config", example, "config", "check"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("agent.toml: ok"));
}

/// fleetop-agent(1) and the completions come from the agent's own flags.
#[test]
fn the_agents_man_page_and_completions_name_its_flags() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(dir.path().join("fleetop-agent.1")).expect("fleetop-agent.1");
    for flag in [
        "config",
        "log-format",
        "state-dir",
        "token-file",
        "kubelet-socket",
        "expect-gpus",
    ] {
        assert!(
            page.contains(&format!("\\-\\-{}", flag.replace('-', "\\-"))),
            "--{flag} not in fleetop-agent(1)"
        );
    }
    assert!(dir.path().join("fleetop-agent-config-check.1").exists());
    assert!(
        !dir.path().join("fleetop-agent-swarm.1").exists(),
        "a hidden subcommand has no page"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains("state-dir") && script.contains("config"), "{shell}");
    }
}
