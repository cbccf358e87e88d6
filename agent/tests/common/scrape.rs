//! Test helpers for the agent's /metrics: a raw HTTP/1.1 GET over a
//! loopback socket, and a strict reader of the Prometheus text format
//! (0.0.4) that fails on anything a real scraper would refuse. Shared by
//! the agent's tests and the console's (`#[path]`).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub struct Response {
    pub status: u16,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("utf-8 body")
    }
}

/// Sends `request` (the raw bytes) and reads the answer until the server
/// closes.
pub fn raw(port: u16, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(out)
}

/// `GET path` with extra header lines ("Name: value").
pub fn get(port: u16, path: &str, headers: &[&str]) -> Response {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let out = raw(port, req.as_bytes()).expect("HTTP exchange");
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block");
    let head = String::from_utf8_lossy(&out[..end]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Response {
        status,
        headers,
        body: out[end + 4..].to_vec(),
    }
}

/// Polls `GET /metrics` until `done` holds for the parsed scrape (10 s at most).
pub fn scrape_until(port: u16, headers: &[&str], done: impl Fn(&Scrape) -> bool) -> Scrape {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::panic::catch_unwind(|| parse(&get(port, "/metrics", headers).text()))
            && done(&s)
        {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no scrape as wanted on port {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Default)]
pub struct Scrape {
    /// Family name -> type.
    pub types: HashMap<String, String>,
    pub series: Vec<Series>,
}

impl Scrape {
    pub fn named(&self, name: &str) -> Vec<&Series> {
        self.series.iter().filter(|s| s.name == name).collect()
    }

    /// The one series of `name` whose labels include `with`.
    pub fn one(&self, name: &str, with: &[(&str, &str)]) -> Option<&Series> {
        let mut m = self.named(name).into_iter().filter(|s| {
            with.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        });
        let first = m.next();
        assert!(m.next().is_none(), "more than one {name} with {with:?}");
        first
    }
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// Reads a scrape, panicking with the line on anything malformed: a sample
/// before its family's TYPE, a family split in two, a bad name, label or
/// value, a duplicate series.
pub fn parse(text: &str) -> Scrape {
    let mut out = Scrape::default();
    let mut current: Option<String> = None;
    let mut done: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let at = || format!("line {}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            assert!(valid_name(name), "{}", at());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{}", at()));
            assert!(valid_name(name), "{}", at());
            assert!(["gauge", "counter", "untyped"].contains(&kind), "{}", at());
            assert!(!out.types.contains_key(name), "family typed twice: {}", at());
            if let Some(c) = current.take() {
                done.push(c);
            }
            out.types.insert(name.to_string(), kind.to_string());
            current = Some(name.to_string());
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "{}", at());
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("{}", at()),
        };
        assert!(valid_name(name), "{}", at());
        assert_eq!(current.as_deref(), Some(name), "sample outside its family: {}", at());
        assert!(!done.iter().any(|d| d == name), "{}", at());
        let mut labels = BTreeMap::new();
        let mut rest = rest;
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            let end;
            loop {
                let start = chars.peek().map(|(i, _)| *i).unwrap_or_else(|| panic!("{}", at()));
                if r[start..].starts_with('}') {
                    end = start + 1;
                    break;
                }
                let eq = r[start..].find("=\"").unwrap_or_else(|| panic!("{}", at())) + start;
                let key = &r[start..eq];
                assert!(valid_name(key), "label name: {}", at());
                // Skip to the value.
                while chars.peek().is_some_and(|(i, _)| *i < eq + 2) {
                    chars.next();
                }
                let mut value = String::new();
                loop {
                    match chars.next().unwrap_or_else(|| panic!("unterminated: {}", at())) {
                        (_, '\\') => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, '\\')) => value.push('\\'),
                            Some((_, '"')) => value.push('"'),
                            _ => panic!("bad escape: {}", at()),
                        },
                        (_, '"') => break,
                        (_, c) => value.push(c),
                    }
                }
                assert!(labels.insert(key.to_string(), value).is_none(), "label twice: {}", at());
                if let Some((_, ',')) = chars.peek() {
                    chars.next();
                }
            }
            rest = &r[end..];
        }
        let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("{}", at()));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {}", at()));
        assert!(seen.insert(format!("{name}{labels:?}")), "duplicate series: {}", at());
        out.series.push(Series {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

/// dcgm-exporter's labels for a whole GPU.
pub const DCGM_LABELS: [&str; 6] = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"];
