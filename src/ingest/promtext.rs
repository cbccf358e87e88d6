//! The Prometheus text exposition format (version 0.0.4), as dcgm-exporter
//! and node_exporter serve it: `# HELP` and `# TYPE` lines, samples with
//! optional labels (values escaped with `\\`, `\"` and `\n`), float values
//! including `NaN`, `+Inf` and `-Inf`, and optional millisecond timestamps.
//!
//! Hand-rolled rather than a crate: the crates that parse this format are
//! either regex-based and unmaintained (prometheus-parse) or OpenMetrics
//! parsers that accept what we must refuse; prometheus-client only encodes.
//! What we need is small, strict and must say which line is wrong.
//!
//! OpenMetrics (`# EOF`, `# UNIT`, exemplars after `#`, its extra types) is
//! refused with one line: an exporter that speaks it can be asked for the
//! plain format with an `Accept: text/plain` header, which the scrapers send.
//! Every input is bounded: its size, line length, series and labels per series.

use std::collections::HashMap;

/// What a metric family says it is (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// In the order written; names are unique within a sample.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Milliseconds since the epoch, where the line gives one.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    pub types: HashMap<String, MetricType>,
    pub help: HashMap<String, String>,
}

/// Bounds on one exposition: an exporter answer larger than these is refused
/// whole, never half-read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_line_bytes: usize,
    pub max_samples: usize,
    pub max_labels: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // dcgm-exporter on an 8-GPU node with every field: ~100 KB, ~1,000 series.
        Limits {
            max_bytes: 16 << 20,
            max_line_bytes: 64 << 10,
            max_samples: 200_000,
            max_labels: 64,
        }
    }
}

/// Why an exposition was refused, naming the line (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
    #[error("{0}")]
    Whole(String),
}

fn err<T>(line: usize, what: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError::Line {
        line,
        what: what.into(),
    })
}

/// Parses one exposition, all or nothing.
pub fn parse(text: &str, limits: &Limits) -> Result<Exposition, ParseError> {
    if text.len() > limits.max_bytes {
        return Err(ParseError::Whole(format!(
            "exposition of {} bytes is over the limit of {} bytes",
            text.len(),
            limits.max_bytes
        )));
    }
    let mut out = Exposition::default();
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len();
    for (i, raw) in lines.iter().enumerate() {
        let no = i + 1;
        // The format ends every line with '\n'; a final line without one
        // is what a cut-off answer looks like.
        if no == last {
            if !raw.trim().is_empty() {
                return err(no, "ends without a newline (truncated answer?)");
            }
            break;
        }
        if raw.len() > limits.max_line_bytes {
            return err(no, format!("line of {} bytes is over the limit", raw.len()));
        }
        let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            comment(rest, no, &mut out)?;
            continue;
        }
        if out.samples.len() >= limits.max_samples {
            return err(no, format!("more than {} samples", limits.max_samples));
        }
        let s = sample(line, no, limits)?;
        out.samples.push(s);
    }
    Ok(out)
}

fn comment(rest: &str, no: usize, out: &mut Exposition) -> Result<(), ParseError> {
    let rest = rest.trim_start_matches([' ', '\t']);
    let (word, tail) = split_word(rest);
    match word {
        "HELP" => {
            let (name, doc) = split_word(tail);
            check_name(name, no)?;
            out.help.insert(name.to_string(), unescape_help(doc));
        }
        "TYPE" => {
            let (name, ty) = split_word(tail);
            check_name(name, no)?;
            let ty = ty.trim();
            let t = match ty {
                "counter" => MetricType::Counter,
                "gauge" => MetricType::Gauge,
                "histogram" => MetricType::Histogram,
                "summary" => MetricType::Summary,
                "untyped" => MetricType::Untyped,
                "unknown" | "info" | "stateset" | "gaugehistogram" => {
                    return err(
                        no,
                        format!("TYPE {ty} is OpenMetrics, not the Prometheus text format (not supported)"),
                    );
                }
                _ => return err(no, format!("unknown TYPE '{}' for {name}", clip(ty))),
            };
            if out.types.insert(name.to_string(), t).is_some() {
                return err(no, format!("second TYPE line for {name}"));
            }
        }
        "EOF" | "UNIT" => {
            return err(
                no,
                format!("'# {word}' is OpenMetrics, not the Prometheus text format (not supported)"),
            );
        }
        // Any other comment is a comment.
        _ => {}
    }
    Ok(())
}

/// The first word and what follows it (leading blanks of the rest removed).
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches([' ', '\t']);
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], s[i..].trim_start_matches([' ', '\t'])),
        None => (s, ""),
    }
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// At most 40 characters of what was found, for an error message.
fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out.escape_debug().to_string()
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_name_char(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit()
}

fn check_name(name: &str, no: usize) -> Result<(), ParseError> {
    let b = name.as_bytes();
    if b.is_empty() || !is_name_start(b[0]) || !b.iter().all(|&c| is_name_char(c)) {
        return err(no, format!("bad metric name '{}'", clip(name)));
    }
    Ok(())
}

/// A cursor over one sample line.
struct Cur<'a> {
    s: &'a str,
    pos: usize,
    no: usize,
}

impl<'a> Cur<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
}

fn sample(line: &str, no: usize, limits: &Limits) -> Result<Sample, ParseError> {
    let mut c = Cur { s: line, pos: 0, no };
    if !c.peek().is_some_and(is_name_start) {
        let (w, _) = split_word(line);
        return err(no, format!("bad metric name '{}'", clip(w)));
    }
    let name = c.take_while(is_name_char).to_string();
    c.blanks();
    let mut labels = Vec::new();
    if c.peek() == Some(b'{') {
        c.pos += 1;
        labels = label_set(&mut c, limits)?;
        c.blanks();
    }
    let value_text = c.take_while(|b| b != b' ' && b != b'\t');
    if value_text.is_empty() {
        return err(no, format!("{name}: no value"));
    }
    let value = parse_value(value_text).ok_or_else(|| ParseError::Line {
        line: no,
        what: format!("{name}: bad value '{}'", clip(value_text)),
    })?;
    c.blanks();
    let mut timestamp_ms = None;
    if c.peek().is_some_and(|b| b == b'-' || b.is_ascii_digit()) {
        let t = c.take_while(|b| b != b' ' && b != b'\t');
        timestamp_ms = Some(t.parse::<i64>().map_err(|_| ParseError::Line {
            line: no,
            what: format!("{name}: bad timestamp '{}'", clip(t)),
        })?);
        c.blanks();
    }
    match c.peek() {
        None => {}
        Some(b'#') => {
            return err(
                no,
                format!("{name}: exemplars are OpenMetrics, not the Prometheus text format (not supported)"),
            );
        }
        Some(_) => return err(no, format!("{name}: unexpected '{}' after the value", clip(c.rest()))),
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

/// Go's ParseFloat, which Prometheus uses: decimal and exponent forms,
/// `NaN`, `Inf`, `+Inf`, `-Inf` in any case. Rust's parser agrees on these
/// and also takes "infinity", which is harmless.
fn parse_value(s: &str) -> Option<f64> {
    // Rust accepts neither hex floats nor '_' separators, like Go without its 0x/0b forms.
    s.parse::<f64>().ok()
}

/// After the `{`: `name="value"` pairs, comma-separated, an optional
/// trailing comma, up to the `}`.
fn label_set(c: &mut Cur<'_>, limits: &Limits) -> Result<Vec<(String, String)>, ParseError> {
    let no = c.no;
    let mut labels: Vec<(String, String)> = Vec::new();
    loop {
        c.blanks();
        match c.peek() {
            Some(b'}') => {
                c.pos += 1;
                return Ok(labels);
            }
            None => return err(no, "label set not closed (missing '}')"),
            _ => {}
        }
        if !c.peek().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') {
            return err(no, format!("bad label name at '{}'", clip(c.rest())));
        }
        let lname = c.take_while(|b| b.is_ascii_alphanumeric() || b == b'_').to_string();
        c.blanks();
        if c.peek() != Some(b'=') {
            return err(no, format!("label {lname}: expected '='"));
        }
        c.pos += 1;
        c.blanks();
        if c.peek() != Some(b'"') {
            return err(no, format!("label {lname}: value must be quoted"));
        }
        c.pos += 1;
        let value = label_value(c, &lname)?;
        if labels.iter().any(|(k, _)| *k == lname) {
            return err(no, format!("label {lname} given twice"));
        }
        if labels.len() >= limits.max_labels {
            return err(no, format!("more than {} labels", limits.max_labels));
        }
        labels.push((lname, value));
        c.blanks();
        match c.peek() {
            Some(b',') => c.pos += 1,
            Some(b'}') => {}
            None => return err(no, "label set not closed (missing '}')"),
            Some(_) => return err(no, format!("expected ',' or '}}' at '{}'", clip(c.rest()))),
        }
    }
}

/// After the opening quote, up to and past the closing one.
fn label_value(c: &mut Cur<'_>, lname: &str) -> Result<String, ParseError> {
    let no = c.no;
    let mut out = String::new();
    let rest = c.rest();
    let mut chars = rest.char_indices();
    while let Some((i, ch)) = chars.next() {
        match ch {
            '"' => {
                c.pos += i + 1;
                return Ok(out);
            }
            '\\' => match chars.next() {
                Some((_, '\\')) => out.push('\\'),
                Some((_, '"')) => out.push('"'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, o)) => return err(no, format!("label {lname}: bad escape '\\{}'", o.escape_debug())),
                None => break,
            },
            _ => out.push(ch),
        }
    }
    err(no, format!("label {lname}: value not closed (missing '\"')"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Exposition, ParseError> {
        parse(s, &Limits::default())
    }

    fn line_of(e: ParseError) -> usize {
        match e {
            ParseError::Line { line, .. } => line,
            ParseError::Whole(w) => panic!("not a line error: {w}"),
        }
    }

    #[test]
    fn help_type_and_samples() {
        let e = p("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n\
                   # TYPE DCGM_FI_DEV_GPU_TEMP gauge\n\
                   DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\"} 41\n\
                   \n\
                   # a plain comment\n\
                   up 1 1700000000000\n")
        .expect("a value");
        assert_eq!(e.types["DCGM_FI_DEV_GPU_TEMP"], MetricType::Gauge);
        assert_eq!(e.help["DCGM_FI_DEV_GPU_TEMP"], "GPU temperature (in C).");
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.samples[0].label("UUID"), Some("GPU-1"));
        assert_eq!(e.samples[0].value, 41.0);
        assert_eq!(e.samples[0].timestamp_ms, None);
        assert_eq!(e.samples[1].timestamp_ms, Some(1_700_000_000_000));
        assert!(e.samples[1].labels.is_empty());
    }

    #[test]
    fn label_escapes_and_trailing_comma() {
        let e = p("m{a=\"x\\\\y\",b=\"say \\\"hi\\\"\",c=\"l1\\nl2\",d=\"\",} 1\n").expect("a value");
        let s = &e.samples[0];
        assert_eq!(s.label("a"), Some("x\\y"));
        assert_eq!(s.label("b"), Some("say \"hi\""));
        assert_eq!(s.label("c"), Some("l1\nl2"));
        assert_eq!(s.label("d"), Some(""));
        assert_eq!(s.labels.len(), 4);
        // A brace or comma inside a quoted value is data.
        let e = p("m{a=\"}{,\"} 2\n").expect("a value");
        assert_eq!(e.samples[0].label("a"), Some("}{,"));
    }

    #[test]
    fn special_values() {
        let e = p("a NaN\nb +Inf\nc -Inf\nd 1.5e3\ne -0.25\n").expect("a value");
        let v: Vec<f64> = e.samples.iter().map(|s| s.value).collect();
        assert!(v[0].is_nan());
        assert_eq!(v[1], f64::INFINITY);
        assert_eq!(v[2], f64::NEG_INFINITY);
        assert_eq!(v[3], 1500.0);
        assert_eq!(v[4], -0.25);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("ok 1\nbad{a=\"1\" 2\n", 2, "'}'"),
            ("ok 1\n\nm{a=\"x\\q\"} 1\n", 3, "bad escape"),
            ("m{a=\"unterminated} 1\n", 1, "not closed"),
            ("m{1a=\"x\"} 1\n", 1, "bad label name"),
            ("m{a=x} 1\n", 1, "quoted"),
            ("m{a=\"1\",a=\"2\"} 1\n", 1, "twice"),
            ("m twelve\n", 1, "bad value"),
            ("m\n", 1, "no value"),
            ("m 1 12x\n", 1, "bad timestamp"),
            ("m 1 2 3\n", 1, "unexpected"),
            ("<html><body>502</body></html>\n", 1, "bad metric name"),
            ("# TYPE m sideways\n", 1, "unknown TYPE"),
            ("# TYPE m gauge\n# TYPE m gauge\n", 2, "second TYPE"),
            ("m 1\nm 2", 2, "truncated"),
            ("m{a=\"1\"} 4", 1, "truncated"),
        ];
        for (text, line, word) in cases {
            let e = p(text).expect_err("an error");
            let msg = e.to_string();
            assert!(msg.contains(word), "{text:?}: {msg}");
            assert_eq!(line_of(e), line, "{text:?}");
        }
    }

    #[test]
    fn openmetrics_is_refused_in_one_line() {
        for (text, line) in [
            ("m_total 1 # {trace_id=\"abc\"} 1.0\n", 1),
            ("m 1\n# EOF\n", 2),
            ("# UNIT m seconds\n", 1),
            ("# TYPE m info\n", 1),
        ] {
            let e = p(text).expect_err("an error");
            let msg = e.to_string();
            assert!(msg.contains("OpenMetrics"), "{msg}");
            assert!(!msg.contains('\n'));
            assert_eq!(line_of(e), line);
        }
    }

    #[test]
    fn limits_are_enforced() {
        let lim = Limits {
            max_bytes: 100,
            max_line_bytes: 20,
            max_samples: 2,
            max_labels: 2,
        };
        assert!(matches!(parse(&"m 1\n".repeat(30), &lim), Err(ParseError::Whole(_))));
        assert!(
            parse(&format!("m{{a=\"{}\"}} 1\n", "x".repeat(30)), &lim)
                .expect_err("an error")
                .to_string()
                .contains("over the limit")
        );
        assert!(
            parse("a 1\nb 1\nc 1\n", &lim)
                .expect_err("an error")
                .to_string()
                .contains("line 3: more than 2")
        );
        assert!(parse("m{a=\"1\",b=\"2\",c=\"3\"} 1\n", &lim).is_err());
        assert!(parse("m{a=\"1\",b=\"2\"} 1\n", &lim).is_ok());
    }

    #[test]
    fn blanks_crlf_and_empty_input() {
        assert_eq!(p("").expect("a value").samples.len(), 0);
        let e = p("  m { a = \"1\" }  3  \r\n").expect("a value");
        assert_eq!(e.samples[0].label("a"), Some("1"));
        assert_eq!(e.samples[0].value, 3.0);
    }
}
