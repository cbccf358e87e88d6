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

/// A log that is not a terminal (a file, the journal) gets plain text, no
/// colour codes.
#[test]
fn the_log_to_a_file_has_no_colour_codes() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"))
        .args([
            "--backend",
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--kmsg",
            "none",
            "--state-dir",
            "none",
        ])
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
    assert!(line.contains("serving on"), "{line}");
    assert!(!line.contains('\u{1b}'), "colour codes in a file: {line:?}");
}
