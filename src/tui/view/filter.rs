//! The node filter typed after `/` (and set by `:filter`, `A` in node
//! detail and Enter in the group view): parsing what was typed into terms
//! and matching a node against them. Apart from the rest of `view` because
//! it is a small language of its own, with its own tests.

use std::collections::BTreeSet;

use super::worst_severity;
use crate::ingest::hostlist;
use crate::model::flag::{FlagKind, Severity};
use crate::store::{NodeState, NodeStatus, Store};

/// The node filter typed after `/`: terms separated by commas (outside
/// brackets) or spaces, any of which may match; case does not matter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Filter {
    #[default]
    All,
    /// Nodes with an active flag of this kind (`/throttled`).
    Kind(FlagKind),
    /// Nodes by status (`/stale`, `/unreachable`, `/connecting`).
    Status(NodeStatus),
    /// Nodes by health (`/crit`, `/warn`: a flag at least that bad; `/ok`:
    /// reachable, sampling, and nothing worse than info).
    Health(Option<Severity>),
    /// Nodes named in a hostlist expression (`/gpu[01-08]`).
    Names(BTreeSet<String>),
    /// Nodes whose name contains the text (lower case), or in the Slurm
    /// partition or the rack of that name.
    Substring(String),
    /// Nodes that match any of these (`/xid,ecc_uncorrected`).
    Any(Vec<Filter>),
}

/// Splits at commas and spaces outside brackets ("gpu[01-04,09],xid idle").
fn terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' | ' ' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

impl Filter {
    /// Reads what the user typed; a bracket that does not parse is an error
    /// to show, not a silent substring search.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let lower = text.trim().to_lowercase();
        let mut any: Vec<Filter> = terms(&lower).into_iter().map(Filter::term).collect::<Result<_, _>>()?;
        Ok(match any.len() {
            0 => Filter::All,
            1 => any.remove(0),
            _ => Filter::Any(any),
        })
    }

    /// One term, already lower case.
    fn term(t: &str) -> Result<Filter, String> {
        // Status words first: "unreachable" is also a flag's name, and the
        // status is the wider set (the flag waits `unreachable_after`).
        match t {
            "ok" => return Ok(Filter::Health(None)),
            "crit" => return Ok(Filter::Health(Some(Severity::Crit))),
            "warn" => return Ok(Filter::Health(Some(Severity::Warn))),
            "unreachable" => return Ok(Filter::Status(NodeStatus::Unreachable)),
            "connecting" => return Ok(Filter::Status(NodeStatus::Connecting)),
            _ => {}
        }
        if let Some(k) = FlagKind::from_name(t) {
            return Ok(Filter::Kind(k));
        }
        // The short names the header and the flags column print ("thr",
        // "rmp_fail"): what is on screen must be what can be typed. Each
        // means what its full name does (`unreach` the status, as above).
        if let Some(k) = FlagKind::ALL.into_iter().find(|k| k.short() == t) {
            return Filter::term(k.name());
        }
        if t.contains('[') {
            let names = hostlist::expand(t).map_err(|e| e.to_string())?;
            return Ok(Filter::Names(names.into_iter().collect()));
        }
        Ok(Filter::Substring(t.to_string()))
    }

    pub fn matches(&self, n: &NodeState, now_ms: i64, store: &Store) -> bool {
        match self {
            Filter::All => true,
            // `stale` is both a flag and a status: the flag covers it.
            Filter::Kind(k) => n.detector.active().any(|f| f.kind == *k),
            Filter::Status(s) => n.status(now_ms, &store.thresholds) == *s,
            Filter::Health(None) => {
                n.status(now_ms, &store.thresholds) == NodeStatus::Ok && worst_severity(n) < Some(Severity::Warn)
            }
            Filter::Health(Some(at_least)) => worst_severity(n) >= Some(*at_least),
            Filter::Names(set) => set.contains(&n.target.name.to_lowercase()),
            // A partition or rack by its whole name, as well as the node's.
            Filter::Substring(s) => {
                n.target.name.to_lowercase().contains(s.as_str())
                    || n.partitions().iter().any(|p| p.eq_ignore_ascii_case(s))
                    || n.rack.as_deref().is_some_and(|r| r.eq_ignore_ascii_case(s))
            }
            Filter::Any(fs) => fs.iter().any(|f| f.matches(n, now_ms, store)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_parses_kinds_statuses_hostlists_and_text() {
        assert_eq!(Filter::parse("throttled"), Ok(Filter::Kind(FlagKind::Throttled)));
        assert_eq!(Filter::parse(" "), Ok(Filter::All));
        assert_eq!(
            Filter::parse("unreachable"),
            Ok(Filter::Status(NodeStatus::Unreachable))
        );
        let Ok(Filter::Names(n)) = Filter::parse("gpu[01-03]") else {
            panic!("hostlist")
        };
        assert_eq!(n.len(), 3);
        assert_eq!(Filter::parse("gpu1"), Ok(Filter::Substring("gpu1".into())));
        assert!(Filter::parse("gpu[03-01]").is_err());
    }

    #[test]
    fn every_short_flag_name_filters_as_its_kind() {
        for k in FlagKind::ALL {
            let long = Filter::parse(k.name());
            assert_eq!(Filter::parse(k.short()), long, "{} = {}", k.short(), k.name());
            assert_eq!(Filter::parse(&k.short().to_uppercase()), long, "{}", k.short());
            // Only `unreachable` is read as the (wider) status.
            if k != FlagKind::Unreachable {
                assert_eq!(long, Ok(Filter::Kind(k)), "{}", k.name());
            }
        }
        assert_eq!(
            Filter::parse("thr,rmp_fail"),
            Ok(Filter::Any(vec![
                Filter::Kind(FlagKind::Throttled),
                Filter::Kind(FlagKind::RemapFailed)
            ]))
        );
    }
}
