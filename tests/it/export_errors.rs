//! Bad input and unreachable nodes: one clear line on stderr, nothing on stdout.

use crate::{RefusedPort, fleetop};

fn fails_with(args: &[&str], needle: &str) {
    let out = fleetop().args(args).output().expect("runs");
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(
        out.stdout.is_empty(),
        "stdout must stay clean: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
}

#[test]
fn bad_hostlists_are_refused_with_the_expression() {
    fails_with(
        &["export", "--once", "--hosts", "gpu[05-01]"],
        "bad hostlist 'gpu[05-01]'",
    );
    fails_with(&["export", "--once", "--hosts", "gpu[01-04"], "unclosed '['");
    fails_with(&["export", "--once", "--hosts", "gpu01:99999"], "99999");
}

#[test]
fn a_bad_hostfile_names_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hosts.txt");
    std::fs::write(&path, "# rack 1\ngpu[01-04]\n\ngpu[1-\n").expect("write");
    let p = path.to_string_lossy().to_string();
    fails_with(
        &["export", "--once", "--hostfile", &p],
        &format!("{p}:4: bad hostlist 'gpu[1-'"),
    );
    fails_with(
        &["export", "--once", "--hostfile", "/nonexistent/hosts"],
        "cannot read hostfile '/nonexistent/hosts'",
    );
}

#[test]
fn a_bad_config_names_its_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "port = 50051\n[thresholds]\nidle_window = \"soon\"\n").expect("write");
    let p = path.to_string_lossy().to_string();
    fails_with(&["--config", &p, "export", "--once", "--demo"], &format!("{p}:3: "));
}

#[test]
fn a_bad_rack_in_the_config_names_its_file_line_and_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.toml");
    let p = path.to_string_lossy().to_string();
    let demo = ["--config", &p, "export", "--once", "--demo", "--nodes", "2"];
    // A hostlist is read after the file parses (by ingest, above config):
    // still refused before anything starts.
    std::fs::write(&path, "[racks.hosts]\nr01 = \"gpu[01-04]\"\nr02 = \"gpu[05-\"\n").expect("write");
    fails_with(&demo, &format!("{p}:3: racks.hosts.r02: bad hostlist 'gpu[05-'"));
    std::fs::write(&path, "[racks]\npattern = \"^r\\\\d+\"\n").expect("write");
    fails_with(&demo, &format!("{p}:2: racks.pattern: '^r\\d+' must capture the rack"));
}

#[test]
fn no_node_answering_is_an_error_naming_the_nodes() {
    let closed = RefusedPort::new();
    let hosts = format!("127.0.0.1:{}", closed.port);
    fails_with(
        &["export", "--once", "--timeout", "3s", "--hosts", &hosts],
        "no node answered",
    );
    fails_with(&["export", "--once", "--timeout", "3s", "--hosts", &hosts], &hosts);
}

#[test]
fn garbage_on_the_port_is_an_unreachable_node_not_a_crash() {
    // A server that answers every connection with junk, then hangs up.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten().take(20) {
            use std::io::Write;
            let mut s = s;
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\nthis is not gRPC\x00\xff\xfe");
        }
    });
    fails_with(
        &[
            "export",
            "--once",
            "--timeout",
            "3s",
            "--hosts",
            &format!("127.0.0.1:{port}"),
        ],
        "no node answered",
    );
}

#[test]
fn a_zero_interval_is_refused_not_a_panic() {
    let out = fleetop()
        .args(["export", "--demo", "--interval", "0s"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'0s' is out of range: from 1ms"));
}

#[test]
fn a_bad_theme_is_refused_before_the_terminal_is_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, "parent = \"default\"\n[styles]\nwarn = { fg = \"yelow\" }\n").expect("write");
    let p = path.to_string_lossy().to_string();
    // Colour must be possible for the theme to be read at all.
    let out = fleetop()
        .env("COLORTERM", "truecolor")
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .args(["--theme", &p, "demo", "--nodes", "1"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{p}:3: styles.warn.fg")) && err.contains("yelow"),
        "{err}"
    );
    // Nothing was drawn: no escape sequences on stdout.
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\u{1b}'));
    let out = fleetop()
        .env("COLORTERM", "truecolor")
        .args(["--theme", "nope", "demo"])
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("theme 'nope': no such theme"));
    // The same check for every subcommand: an export is not silently
    // given a theme that does not exist.
    fails_with(
        &["--theme", "nosuch", "export", "--once", "--hosts", "gpu01"],
        "theme 'nosuch': no such theme",
    );
    fails_with(&["--theme", &p, "export", "--print-schema"], "styles.warn.fg");
}

#[test]
fn absurd_values_are_refused_in_one_line_never_a_panic() {
    // Added to a clock, this overflowed and panicked. Flags are refused by
    // the argument parser, in its usual form (exit 2).
    for (args, needle) in [
        (["--timeout", "300000000000y"], "is out of range"),
        (["--port", "0"], "'0' for '--port <PORT>'"),
    ] {
        let out = fleetop()
            .args(["export", "--once", "--hosts", "a"])
            .args(args)
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle) && !err.contains("panicked"), "{err}");
    }
}

#[test]
fn hostile_files_and_names_cannot_exhaust_memory_or_reach_the_terminal() {
    // An endless file is refused after a bounded read.
    fails_with(
        &["export", "--once", "--hostfile", "/dev/zero"],
        "cannot read hostfile '/dev/zero': not a regular file",
    );
    // Nor is a CA certificate, a token or a FIFO nobody writes to (which
    // would hang the open for ever).
    fails_with(
        &["export", "--once", "--hosts", "gpu01", "--tls-ca", "/dev/zero"],
        "tls_ca /dev/zero: not a regular file",
    );
    let fifo_dir = tempfile::tempdir().expect("tempdir");
    let fifo = fifo_dir.path().join("hosts.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    fails_with(
        &["export", "--once", "--hostfile", &fifo.to_string_lossy()],
        "hosts.fifo': not a regular file",
    );
    fails_with(
        &[
            "export",
            "--once",
            "--hosts",
            "gpu01",
            "--telemetry-token-file",
            &fifo.to_string_lossy(),
        ],
        "not a regular file",
    );
    // A terminal escape in a host name is shown escaped, never sent raw.
    let out = fleetop()
        .args(["export", "--once", "--hosts", "gpu\u{1b}]0;pwned\u{7}[1"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("\\u{1b}]0;pwned"), "{err:?}");
    // A 3 MB host name gives a short line.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hosts");
    std::fs::write(&path, format!("{}!\n", "x".repeat(3 << 20))).expect("write");
    let out = fleetop()
        .args(["export", "--once", "--hostfile", &path.to_string_lossy()])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.len() < 1000 && err.contains("bad host name"), "{} bytes", err.len());
}

#[test]
fn a_byte_order_mark_is_not_a_bad_host_name_and_causes_are_said_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hosts");
    let closed = RefusedPort::new();
    std::fs::write(&path, format!("\u{feff}127.0.0.1:{}\n", closed.port)).expect("write");
    // The host is read (and refused by the network), not rejected as a name.
    fails_with(
        &["export", "--once", "--hostfile", &path.to_string_lossy()],
        "no node answered",
    );
    let out = fleetop()
        .env("COLORTERM", "truecolor")
        .args(["--theme", "/nonexistent/theme.toml", "demo", "--nodes", "1"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn the_console_without_a_terminal_says_so_in_one_line_and_exits_2() {
    // As under cron or `setsid fleetop demo </dev/null`: no terminal at all.
    let out = fleetop().args(["demo", "--nodes", "1"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing on stdout, no escape sequence");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("needs a terminal") && err.contains("fleetop export"),
        "{err}"
    );
}

/// A Prometheus (or a proxy) that sends its headers and then goes silent,
/// or trickles bytes: `--scrape-timeout` bounds the whole answer, the first
/// read included, so a cron export always ends, with the reason. (The
/// bound here is "it ends at all": before the fix it waited 120 s.)
#[test]
fn a_prometheus_that_goes_silent_after_its_headers_cannot_hold_an_export() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf);
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"status\":",
                );
                // A byte every second, for ever: a trickle never completes.
                for _ in 0..600 {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    if c.write_all(b" ").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fleetop"))
        .env("XDG_CONFIG_HOME", "/nonexistent/fleetop-test")
        .args(["export", "--once", "--scrape-timeout", "2s", "--prometheus"])
        .arg(format!("http://127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            panic!("the export is still waiting on a silent Prometheus after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(!status.success());
    assert!(err.contains("within 2 s") && err.lines().count() == 1, "{err}");
}

/// A store that answers every query, each in well under `--scrape-timeout`,
/// but a refresh's fourteen queries together far over it: the refresh is
/// bounded as a whole, and the export ends saying so (each query alone
/// within its bound used to make a 2 s timeout a 5 s read).
#[test]
fn a_prometheus_refresh_is_bounded_as_a_whole_not_query_by_query() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(400));
                    let body = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if c.write_all(head.as_bytes())
                        .and_then(|()| c.write_all(body.as_bytes()))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    let out = fleetop()
        .args(["export", "--once", "--scrape-timeout", "1s", "--prometheus"])
        .arg(format!("http://127.0.0.1:{port}"))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no whole refresh within 1 s"), "{err}");
}

/// Serves `body` as the answer to every request, on loopback; the port.
fn serve_json_forever(body: String) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let body = std::sync::Arc::new(body);
    std::thread::spawn(move || {
        for conn in listener.incoming().take(256) {
            let Ok(mut c) = conn else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if c.write_all(head.as_bytes())
                        .and_then(|()| c.write_all(body.as_bytes()))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// An answer of `hosts` nodes with `gpus` GPUs each, one series a GPU.
fn prometheus_fleet(hosts: usize, gpus: usize) -> String {
    let mut body = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    for h in 0..hosts {
        for g in 0..gpus {
            if h + g > 0 {
                body.push(',');
            }
            body.push_str(&format!(
                r#"{{"metric":{{"__name__":"DCGM_FI_DEV_GPU_UTIL","Hostname":"node{h:07}","gpu":"{g}"}},"value":[1764300000.0,"5"]}}"#
            ));
        }
    }
    body.push_str("]}}");
    body
}

/// A Prometheus that names more nodes, or more GPUs, than any fleet: the
/// refresh is refused at the bound, in one line, before what it builds can
/// outgrow the console's memory (the bound on counts that bounds memory).
#[test]
fn a_prometheus_naming_more_nodes_or_gpus_than_a_fleet_is_refused_at_the_bound() {
    for (hosts, gpus, said) in [
        (20_000, 1, "more than 16384 nodes"),
        (2_100, 64, "more than 131072 GPUs"),
    ] {
        let port = serve_json_forever(prometheus_fleet(hosts, gpus));
        let out = fleetop()
            .args(["export", "--once", "--scrape-timeout", "60s", "--prometheus"])
            .arg(format!("http://127.0.0.1:{port}"))
            .timeout(std::time::Duration::from_secs(180))
            .output()
            .expect("runs");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(said) && err.contains("--prometheus-match"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
}

/// A source still reading when the first document is due (a slow store's
/// first read, a fleet's histories): the error says so and what to do,
/// rather than calling every node silent.
#[test]
fn a_source_still_reading_at_the_timeout_says_so_plainly() {
    let out = fleetop()
        .args(["export", "--demo", "--nodes", "8", "--once", "--timeout", "1ms"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no node answered") && err.contains("still reading after --timeout 1ms: give a longer --timeout"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        out.stdout.is_empty(),
        "no document: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
