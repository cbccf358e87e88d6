//! A writer of the Prometheus text exposition format, version 0.0.4: the
//! format dcgm-exporter serves, and the one whose names Grafana dashboards
//! and recording rules were written against.
//!
//! Why not prometheus-client's encoder: it writes OpenMetrics only, where a
//! counter's samples are named `<family>_total`. dcgm-exporter's counters
//! (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, `DCGM_FI_DEV_PCIE_REPLAY_COUNTER`,
//! ...) carry no such suffix, so that encoder would rename them and break
//! every query that names them. Text 0.0.4 keeps a counter's name as given.

use std::fmt::{Display, Write};

/// The content type of what `Writer` writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The Prometheus metric types this endpoint uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// Writes families one after another. A family's `# HELP` and `# TYPE`
/// lines are written with its first sample, so a family with no sample
/// (every reading absent) leaves no trace at all.
pub struct Writer<'a> {
    out: &'a mut String,
    pending: Option<(&'static str, Kind, &'static str)>,
    name: &'static str,
}

impl<'a> Writer<'a> {
    pub fn new(out: &'a mut String) -> Self {
        Writer {
            out,
            pending: None,
            name: "",
        }
    }

    /// Starts a family: the samples written until the next `family` call
    /// belong to it. `help` must be one line.
    pub fn family(&mut self, name: &'static str, kind: Kind, help: &'static str) {
        self.pending = Some((name, kind, help));
        self.name = name;
    }

    /// One sample of the current family. `labels` is a label list already
    /// escaped (`a="x",b="y"`, see `push_label`), `extra` more labels to
    /// escape here.
    pub fn sample(&mut self, labels: &str, extra: &[(&str, &str)], value: impl Display) {
        if let Some((name, kind, help)) = self.pending.take() {
            let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {}", kind.word());
        }
        self.out.push_str(self.name);
        if !labels.is_empty() || !extra.is_empty() {
            self.out.push('{');
            self.out.push_str(labels);
            for (i, (k, v)) in extra.iter().enumerate() {
                if i > 0 || !labels.is_empty() {
                    self.out.push(',');
                }
                push_label(self.out, k, v);
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// The same sample once per label list of `each` (a GPU that several
    /// pods hold has its series once per pod).
    pub fn each(&mut self, each: &[String], extra: &[(&str, &str)], value: impl Display) {
        for labels in each {
            self.sample(labels, extra, &value);
        }
    }
}

/// Appends `key="value"` to `out`, escaping the value as the format asks
/// (backslash, double quote and line feed).
pub fn push_label(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push_str("=\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_without_samples_leave_nothing_and_values_are_escaped() {
        let mut s = String::new();
        let mut w = Writer::new(&mut s);
        w.family("empty", Kind::Gauge, "never sampled");
        w.family("c", Kind::Counter, "a counter");
        let mut labels = String::new();
        push_label(&mut labels, "a", "x\"y\\z\nw");
        w.sample(&labels, &[("b", "1")], 42);
        w.sample("", &[], 1.5);
        assert_eq!(
            s,
            "# HELP c a counter\n# TYPE c counter\nc{a=\"x\\\"y\\\\z\\nw\",b=\"1\"} 42\nc 1.5\n"
        );
    }
}
