//! Slurm-style hostlists: `gpu[01-04,09],login1,10.0.0.5:6000,[::1]:7000`.
//!
//! Operators already think in Slurm hostlists (`sinfo`, `squeue` and `scontrol show hostnames`
//! all speak them), so fleetop accepts the same syntax for choosing which nodes to talk to,
//! extended with an optional `:port` per item for nodes whose agent listens elsewhere.
//!
//! IPv6 literals: because `[...]` is hostlist range syntax, an IPv6 address is recognised
//! as follows (and only so):
//! * `[addr]` or `[addr]:port` — a leading bracket whose content contains ':' is an IPv6
//!   literal, never a range (ranges hold only digits, ',' and '-');
//! * a bare item with two or more ':' outside brackets (`::1`, `fe80::2`) is an IPv6 literal
//!   that never carries a port, since `::1:7000` is itself a valid address. Write `[::1]:7000`.
//!
//! Zone ids (`fe80::1%eth0`) are rejected: they cannot be put in a connection URI portably.

use std::collections::HashSet;
use std::hash::Hash;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

use fleetop_proto::input::{MAX_FILE_BYTES, printable, read_capped};

use crate::model::target::Target;

/// A piece of operator input inside an error: escaped, and short enough
/// that a 5 MB "host name" gives a one-line error.
fn shown(s: &str) -> String {
    printable(s, 100)
}

/// Largest number of hosts one expression (or hostfile) may expand to. A typo such as
/// `gpu[1-9999999]` must fail fast instead of allocating millions of names.
pub const MAX_HOSTS: usize = 100_000;

/// Why a hostlist or target list was rejected. Each message is one line quoting the
/// offending expression, so it can be shown to the operator as is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HostlistError {
    #[error("bad hostlist '{expr}': unclosed '['")]
    Unclosed { expr: String },
    #[error("bad hostlist '{expr}': ']' without matching '['")]
    Unopened { expr: String },
    #[error("bad hostlist '{expr}': nested '[' is not allowed")]
    Nested { expr: String },
    #[error("bad hostlist '{expr}': empty '[]'")]
    EmptyBrackets { expr: String },
    #[error("bad hostlist '{expr}': empty host name")]
    EmptyName { expr: String },
    #[error("bad hostlist '{expr}': '{piece}' is not a number or range")]
    BadRange { expr: String, piece: String },
    #[error("bad hostlist '{expr}': range {lo}-{hi} goes backwards")]
    Backwards { expr: String, lo: String, hi: String },
    #[error("bad hostlist '{expr}': expands to more than {} hosts", MAX_HOSTS)]
    TooMany { expr: String },
    #[error("bad port in '{item}': '{port}' is not a number in 1..=65535")]
    BadPort { item: String, port: String },
    #[error("bad host name '{name}': only letters, digits, '.', '_' and '-' are allowed")]
    BadName { name: String },
    #[error("bad IPv6 address '{addr}'")]
    BadIpv6 { addr: String },
}

/// Why a hostfile was rejected. The messages embed the underlying error's text (so one line
/// tells the whole story); the inner error is kept in `error` for callers that want it.
#[derive(Debug, thiserror::Error)]
pub enum HostfileError {
    #[error("cannot read hostfile '{}': {}", .path.display(), .error)]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{}:{}: {}", .path.display(), .line, .error)]
    Line {
        path: PathBuf,
        line: usize,
        error: HostlistError,
    },
    #[error("hostfile '{}' lists no hosts", .path.display())]
    Empty { path: PathBuf },
}

/// A numeric range from inside brackets; `width` is the length of the lower bound as
/// written, which is how Slurm decides zero-padding (`[08-11]` -> 08, 09, 10, 11).
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

enum Segment {
    Literal(String),
    Ranges(Vec<Range>),
}

impl Segment {
    /// Number of strings this segment produces, saturating rather than overflowing.
    fn count(&self) -> u64 {
        match self {
            Segment::Literal(_) => 1,
            Segment::Ranges(ranges) => ranges
                .iter()
                .map(|r| (r.hi - r.lo).saturating_add(1))
                .fold(0, u64::saturating_add),
        }
    }
}

/// Expands a Slurm hostlist expression into host names, in order, duplicates removed (first kept).
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let items = split_top(expr)?
        .into_iter()
        .map(|item| parse_item(expr, item))
        .collect::<Result<Vec<_>, _>>()?;
    // Count first so that an enormous expansion is refused before anything is allocated.
    let total = items
        .iter()
        .map(|segs| segs.iter().map(Segment::count).fold(1, u64::saturating_mul))
        .fold(0, u64::saturating_add);
    if total > MAX_HOSTS as u64 {
        return Err(HostlistError::TooMany { expr: shown(expr) });
    }
    let mut names = Vec::with_capacity(total as usize);
    for segs in &items {
        names.extend(generate(segs));
    }
    Ok(dedup(names))
}

/// Parses a comma-separated list of hostlist expressions that may carry ":port" suffixes
/// (e.g. "gpu[01-04,09],login1,10.0.0.5:6000,[::1]:7000,gpu[10-11]:6001") into targets.
/// `default_port` applies where no port is given; a port applies to every host of its item.
/// Duplicate targets (same name, host and port) are removed, first kept.
pub fn parse_targets(list: &str, default_port: u16) -> Result<Vec<Target>, HostlistError> {
    let mut targets = Vec::new();
    for item in split_top(list)? {
        if item.is_empty() {
            return Err(HostlistError::EmptyName { expr: shown(list) });
        }
        let (hosts, port) = parse_target_item(item, default_port)?;
        if targets.len() + hosts.len() > MAX_HOSTS {
            return Err(HostlistError::TooMany { expr: shown(list) });
        }
        targets.extend(hosts.into_iter().map(|host| Target {
            name: host.clone(),
            host,
            port,
        }));
    }
    Ok(unique_names(dedup(targets)))
}

/// Two targets never share a name: agents that share a host (containers,
/// several agents on one machine, a swarm) are named `host:port`, as given,
/// wherever their host alone would say the same for each.
pub fn unique_names(mut targets: Vec<Target>) -> Vec<Target> {
    let mut count: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for t in &targets {
        *count.entry(t.name.clone()).or_default() += 1;
    }
    for t in &mut targets {
        if count.get(&t.name).is_some_and(|&c| c > 1) {
            t.name = t.address();
        }
    }
    targets
}

/// Reads a hostfile: one hostlist expression (optionally with :port) per line; blank lines
/// and text after '#' are ignored. An empty result is an error: running a fleet command
/// against zero nodes is almost always a mistake (wrong file, everything commented out).
pub fn read_hostfile(path: &Path, default_port: u16) -> Result<Vec<Target>, HostfileError> {
    let text = read_capped(path, MAX_FILE_BYTES).map_err(|error| HostfileError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let mut targets = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split_once('#').map_or(raw, |(before, _)| before).trim();
        if line.is_empty() {
            continue;
        }
        let at_line = |error| HostfileError::Line {
            path: path.to_path_buf(),
            line: index + 1,
            error,
        };
        targets.extend(parse_targets(line, default_port).map_err(at_line)?);
        if targets.len() > MAX_HOSTS {
            return Err(at_line(HostlistError::TooMany { expr: shown(line) }));
        }
    }
    let targets = unique_names(dedup(targets));
    if targets.is_empty() {
        return Err(HostfileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(targets)
}

/// Splits `expr` at commas outside brackets (trimming each item), checking on the way that
/// brackets are balanced and not nested, so later stages may rely on both.
fn split_top(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let (mut items, mut start, mut open) = (Vec::new(), 0, false);
    for (i, c) in expr.char_indices() {
        match c {
            '[' if open => return Err(HostlistError::Nested { expr: shown(expr) }),
            ']' if !open => return Err(HostlistError::Unopened { expr: shown(expr) }),
            '[' | ']' => open = !open,
            ',' if !open => {
                items.push(expr[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if open {
        return Err(HostlistError::Unclosed { expr: shown(expr) });
    }
    items.push(expr[start..].trim());
    Ok(items)
}

/// Parses one top-level item (balanced, unnested brackets) into literal and range segments.
fn parse_item(expr: &str, item: &str) -> Result<Vec<Segment>, HostlistError> {
    if item.is_empty() {
        return Err(HostlistError::EmptyName { expr: shown(expr) });
    }
    let literal = |text: &str| {
        if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            Ok(Segment::Literal(text.to_string()))
        } else {
            Err(HostlistError::BadName { name: shown(item) })
        }
    };
    let mut segments = Vec::new();
    let mut rest = item;
    while let Some((before, after)) = rest.split_once('[') {
        let (body, tail) = after
            .split_once(']')
            .ok_or_else(|| HostlistError::Unclosed { expr: shown(expr) })?;
        segments.push(literal(before)?);
        segments.push(Segment::Ranges(parse_ranges(expr, body)?));
        rest = tail;
    }
    segments.push(literal(rest)?);
    Ok(segments)
}

/// Parses the inside of `[...]`: comma-separated numbers or `lo-hi` ranges.
fn parse_ranges(expr: &str, body: &str) -> Result<Vec<Range>, HostlistError> {
    if body.trim().is_empty() {
        return Err(HostlistError::EmptyBrackets { expr: shown(expr) });
    }
    let number = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    body.split(',')
        .map(|piece| {
            let piece = piece.trim();
            let (lo_s, hi_s) = piece.split_once('-').unwrap_or((piece, piece));
            let (lo_s, hi_s) = (lo_s.trim(), hi_s.trim());
            let bad = || HostlistError::BadRange {
                expr: shown(expr),
                piece: shown(piece),
            };
            let (lo, hi) = (number(lo_s).ok_or_else(bad)?, number(hi_s).ok_or_else(bad)?);
            if lo > hi {
                return Err(HostlistError::Backwards {
                    expr: shown(expr),
                    lo: shown(lo_s),
                    hi: shown(hi_s),
                });
            }
            Ok(Range {
                lo,
                hi,
                width: lo_s.len(),
            })
        })
        .collect()
}

/// Cartesian product of the segments, leftmost varying slowest.
fn generate(segments: &[Segment]) -> Vec<String> {
    let mut acc = vec![String::new()];
    for segment in segments {
        acc = match segment {
            Segment::Literal(text) => acc.into_iter().map(|prefix| prefix + text).collect(),
            Segment::Ranges(ranges) => acc
                .iter()
                .flat_map(|prefix| {
                    ranges
                        .iter()
                        .flat_map(move |r| (r.lo..=r.hi).map(move |n| format!("{prefix}{n:0width$}", width = r.width)))
                })
                .collect(),
        };
    }
    acc
}

/// One item of a target list: an IPv6 literal (see the module docs) or a hostlist
/// expression with an optional `:port` outside any brackets.
fn parse_target_item(item: &str, default_port: u16) -> Result<(Vec<String>, u16), HostlistError> {
    if let Some(inner) = item.strip_prefix('[')
        && let Some((addr, after)) = inner.split_once(']')
        && addr.contains(':')
    {
        let port = match after {
            "" => default_port,
            _ => match after.strip_prefix(':') {
                Some(port) => parse_port(item, port)?,
                None => return Err(HostlistError::BadIpv6 { addr: shown(item) }),
            },
        };
        return Ok((vec![ipv6(addr)?], port));
    }
    let mut depth_zero_colons = item
        .char_indices()
        .scan(false, |open, (i, c)| {
            *open = match c {
                '[' => true,
                ']' => false,
                _ => *open,
            };
            Some((c == ':' && !*open).then_some(i))
        })
        .flatten();
    match (depth_zero_colons.next(), depth_zero_colons.next()) {
        (None, _) => Ok((expand(item)?, default_port)),
        (Some(i), None) => Ok((expand(item[..i].trim_end())?, parse_port(item, &item[i + 1..])?)),
        (Some(_), Some(_)) => Ok((vec![ipv6(item)?], default_port)),
    }
}

fn parse_port(item: &str, port: &str) -> Result<u16, HostlistError> {
    let port = port.trim();
    Some(port)
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p != 0)
        .ok_or_else(|| HostlistError::BadPort {
            item: shown(item),
            port: shown(port),
        })
}

/// Validates an IPv6 literal but keeps it as written, so the name matches what the user typed.
fn ipv6(addr: &str) -> Result<String, HostlistError> {
    addr.parse::<Ipv6Addr>()
        .map(|_| addr.to_string())
        .map_err(|_| HostlistError::BadIpv6 { addr: shown(addr) })
}

fn dedup<T: Eq + Hash + Clone>(items: Vec<T>) -> Vec<T> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|x| seen.insert(x.clone())).collect()
}

/// The shortest Slurm hostlist for `names` ("gpu[01-04,09],login1"): the
/// inverse of `expand`, for people to paste into `scontrol` or `srun -w`.
/// Numbers keep their width (gpu09 and gpu010 are different groups).
pub fn compress(names: &[String]) -> String {
    use std::collections::BTreeMap;
    // (prefix, digits' width) -> numbers; names without a trailing number as they are.
    let mut groups: BTreeMap<(String, usize), Vec<u64>> = BTreeMap::new();
    let mut plain: Vec<String> = Vec::new();
    for n in names {
        let digits = n.chars().rev().take_while(char::is_ascii_digit).count();
        let (prefix, num) = n.split_at(n.len() - digits);
        match num.parse::<u64>() {
            Ok(v) if digits > 0 && !prefix.contains(['[', ']', ',']) => {
                groups.entry((prefix.to_string(), digits)).or_default().push(v)
            }
            _ => plain.push(n.clone()),
        }
    }
    let mut out: Vec<String> = Vec::new();
    for ((prefix, width), mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        if let [only] = nums.as_slice() {
            out.push(format!("{prefix}{only:0width$}"));
            continue;
        }
        let mut ranges: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let start = nums[i];
            while i + 1 < nums.len() && nums[i + 1] == nums[i] + 1 {
                i += 1;
            }
            ranges.push(if nums[i] == start {
                format!("{start:0width$}")
            } else {
                format!("{start:0width$}-{:0width$}", nums[i])
            });
            i += 1;
        }
        out.push(format!("{prefix}[{}]", ranges.join(",")));
    }
    plain.sort();
    plain.dedup();
    out.extend(plain);
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_sharing_a_host_are_named_with_their_ports() {
        let names = |t: Vec<Target>| t.into_iter().map(|t| t.name).collect::<Vec<_>>();
        let t = parse_targets("127.0.0.1:7001,127.0.0.1:7002,gpu01", 50051).expect("parses");
        assert_eq!(names(t), ["127.0.0.1:7001", "127.0.0.1:7002", "gpu01"]);
        // One agent a host: the host alone, as given.
        let t = parse_targets("gpu[01-02]:7001", 50051).expect("parses");
        assert_eq!(names(t), ["gpu01", "gpu02"]);
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("hosts");
        std::fs::write(&f, "127.0.0.1:7001\n127.0.0.1:7002\n").expect("write");
        let t = read_hostfile(&f, 50051).expect("reads");
        assert_eq!(names(t), ["127.0.0.1:7001", "127.0.0.1:7002"]);
    }

    #[test]
    fn expands_good_expressions() {
        let cases: &[(&str, &[&str])] = &[
            ("gpu01", &["gpu01"]),
            ("gpu[08-11]", &["gpu08", "gpu09", "gpu10", "gpu11"]),
            ("n[1-3]", &["n1", "n2", "n3"]),
            ("n[098-101]", &["n098", "n099", "n100", "n101"]),
            ("n[9-10]", &["n9", "n10"]),
            (
                "rack[1-2]-gpu[01-02]",
                &["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"],
            ),
            ("gpu[1-2].ib", &["gpu1.ib", "gpu2.ib"]),
            ("gpu[01-02,05],login1", &["gpu01", "gpu02", "gpu05", "login1"]),
            ("n[3,1,2]", &["n3", "n1", "n2"]),
            ("n[ 1 - 2 , 4 ]", &["n1", "n2", "n4"]),
            (" a , b ", &["a", "b"]),
            ("a,b,a", &["a", "b"]),
            ("gpu[1-2,2-3]", &["gpu1", "gpu2", "gpu3"]),
            ("[1-2]", &["1", "2"]),
            ("node-1.cluster_a", &["node-1.cluster_a"]),
            ("10.0.0.5", &["10.0.0.5"]),
        ];
        for (expr, want) in cases {
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(expand(expr), Ok(want), "{expr}");
        }
        assert_eq!(expand("n[0-99999]").map(|v| v.len()), Ok(MAX_HOSTS));
    }

    #[test]
    fn rejects_bad_expressions() {
        let cases = [
            ("gpu[05-01]", "bad hostlist 'gpu[05-01]': range 05-01 goes backwards"),
            ("gpu[01-04", "bad hostlist 'gpu[01-04': unclosed '['"),
            ("a,,b", "bad hostlist 'a,,b': empty host name"),
            (
                "gpu[1-999999]",
                "bad hostlist 'gpu[1-999999]': expands to more than 100000 hosts",
            ),
            ("gp u01", "bad host name 'gp u01'"),
            ("gpu]", "']' without matching '['"),
            ("gpu[1[2]]", "nested '['"),
            ("gpu[]", "empty '[]'"),
            ("gpu[ ]", "empty '[]'"),
            ("gpu[a-b]", "'a-b' is not a number or range"),
            ("gpu[1-]", "'1-' is not a number or range"),
            ("gpu[-3]", "'-3' is not a number or range"),
            ("gpu[1-2-3]", "'1-2-3' is not a number"),
            ("gpu[1,,2]", "'' is not a number"),
            ("gpu[+1]", "'+1' is not a number"),
            ("gpu[1-99999999999999999999999]", "is not a number"),
            ("", "empty host name"),
            ("a,", "empty host name"),
            ("gpu[0-999][0-999]", "more than 100000 hosts"),
            ("a[0-60000],b[0-60000]", "more than 100000 hosts"),
            ("n[0-18446744073709551615]", "more than 100000 hosts"),
            ("gpu:01", "bad host name 'gpu:01'"),
            ("hé", "bad host name"),
            ("[::1]", "is not a number"),
        ];
        for (expr, phrase) in cases {
            match expand(expr) {
                Ok(v) => panic!("{expr:?} expanded to {v:?}"),
                Err(e) => assert!(e.to_string().contains(phrase), "{expr:?}: {e}"),
            }
        }
    }

    fn t(name: &str, port: u16) -> Target {
        Target {
            name: name.into(),
            host: name.into(),
            port,
        }
    }

    #[test]
    fn parses_targets() {
        let got = parse_targets("gpu[01-02,09],login1,10.0.0.5:6000,[::1]:7000,gpu[10-11]:6001", 50051);
        let want = vec![
            t("gpu01", 50051),
            t("gpu02", 50051),
            t("gpu09", 50051),
            t("login1", 50051),
            t("10.0.0.5", 6000),
            t("::1", 7000),
            t("gpu10", 6001),
            t("gpu11", 6001),
        ];
        assert_eq!(got, Ok(want));
        assert_eq!(
            parse_targets("::1, [fe80::2], a:1, a:1, a", 9),
            Ok(vec![
                t("::1", 9),
                t("fe80::2", 9),
                Target {
                    name: "a:1".into(),
                    ..t("a", 1)
                },
                Target {
                    name: "a:9".into(),
                    ..t("a", 9)
                }
            ])
        );
        assert_eq!(
            parse_targets("[::1]:7000", 1).map(|v| v[0].address()),
            Ok("[::1]:7000".to_string())
        );
        assert_eq!(t("gpu01", 50051).address(), "gpu01:50051");
    }

    #[test]
    fn rejects_bad_targets() {
        let cases = [
            ("gpu01:99999", "bad port in 'gpu01:99999': '99999'"),
            ("gpu01:0", "bad port in 'gpu01:0'"),
            ("gpu01:x", "bad port"),
            ("gpu01:", "bad port"),
            ("[::1]:", "bad port in '[::1]:'"),
            ("[::1]x", "bad IPv6 address '[::1]x'"),
            ("[::zz]:70", "bad IPv6 address '::zz'"),
            ("gpu01:70:80", "bad IPv6 address"),
            ("fe80::1%eth0", "bad IPv6 address"),
            ("a,,b", "bad hostlist 'a,,b': empty host name"),
            ("gpu[1-", "unclosed '['"),
            (":7000", "empty host name"),
            ("gpu[1:2]", "'1:2' is not a number"),
            ("a[0-60000],b[0-60000]", "more than 100000 hosts"),
        ];
        for (list, phrase) in cases {
            match parse_targets(list, 50051) {
                Ok(v) => panic!("{list:?} parsed to {v:?}"),
                Err(e) => assert!(e.to_string().contains(phrase), "{list:?}: {e}"),
            }
        }
    }

    /// Writes `content` to a fresh file in a per-process, per-test temp directory.
    fn hostfile(test: &str, content: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fleetop-hostlist-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        let path = dir.join("hosts.txt");
        std::fs::write(&path, content).expect("write hostfile");
        path
    }

    #[test]
    fn reads_hostfile() {
        let path = hostfile("good", "# fleet\n\ngpu[01-02]  # rack 1\n  login1:6000 \r\ngpu01\n");
        let got = read_hostfile(&path, 50051).expect("good hostfile");
        assert_eq!(got, vec![t("gpu01", 50051), t("gpu02", 50051), t("login1", 6000)]);
        let _ = std::fs::remove_dir_all(path.parent().expect("temp dir"));
    }

    #[test]
    fn hostfile_errors() {
        let path = hostfile("badline", "gpu01\n# comment\ngpu[1-\n");
        let err = read_hostfile(&path, 1).expect_err("bad hostfile").to_string();
        assert_eq!(
            err,
            format!("{}:3: bad hostlist 'gpu[1-': unclosed '['", path.display())
        );

        let path = hostfile("empty", "\n  # nothing here\n");
        let err = read_hostfile(&path, 1).expect_err("bad hostfile").to_string();
        assert_eq!(err, format!("hostfile '{}' lists no hosts", path.display()));

        let missing = path.with_file_name("missing.txt");
        let err = read_hostfile(&missing, 1).expect_err("bad hostfile").to_string();
        assert!(
            err.starts_with(&format!("cannot read hostfile '{}': ", missing.display())),
            "{err}"
        );
        for test in ["badline", "empty"] {
            let dir = std::env::temp_dir().join(format!("fleetop-hostlist-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn compress_is_the_inverse_of_expand() {
        let names: Vec<String> = ["gpu03", "gpu01", "gpu02", "gpu09", "login1", "gpu010", "n7", "gpu02"]
            .into_iter()
            .map(String::from)
            .collect();
        let list = compress(&names);
        assert_eq!(list, "gpu[01-03,09],gpu010,login1,n7");
        let mut back = expand(&list).expect("expands");
        back.sort();
        let mut want = names.clone();
        want.sort();
        want.dedup();
        assert_eq!(back, want);
    }
}
