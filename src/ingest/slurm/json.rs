//! Slurm's `--json` output for sinfo and squeue.
//!
//! The shape moved between releases: 21.08/22.05 give `state` as a word and
//! `state_flags` as a list, later releases a list for `state`; times are
//! plain numbers or `{"set", "number"}` objects. This reader takes either and
//! refuses anything else, so the caller falls back to the text formats.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{SchedError, parse_gpus};
use crate::ingest::hostlist;
use crate::model::sched::{Job, SchedNode};
use crate::model::time::{now_ms, rfc3339};

fn bad(what: &str, why: &str) -> SchedError {
    SchedError::Parse(what.into(), why.into())
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// A number, or a `{"set": true, "number": N}` object.
fn number(v: &Value, key: &str) -> Option<i64> {
    let x = v.get(key)?;
    x.as_i64().or_else(|| {
        (x.get("set").and_then(Value::as_bool) != Some(false))
            .then(|| x.get("number")?.as_i64())
            .flatten()
    })
}

/// Every word of a state: a string, or a list of strings, upper-cased.
fn words(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => s
            .split(['+', ' '])
            .filter(|w| !w.is_empty())
            .map(|w| w.to_uppercase())
            .collect(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_uppercase).collect(),
        _ => Vec::new(),
    }
}

/// Slurm's own long state from the base state and its flags, as sinfo's %T
/// prints it: DRAIN on an idle or down node is "drained", on a busy one
/// "draining".
fn long_state(base: &str, flags: &[String]) -> String {
    let base = base.to_lowercase();
    if flags.iter().any(|f| f == "DRAIN") {
        if matches!(base.as_str(), "idle" | "down") {
            "drained".into()
        } else {
            "draining".into()
        }
    } else {
        base
    }
}

const BASE_STATES: [&str; 8] = [
    "IDLE",
    "ALLOCATED",
    "MIXED",
    "DOWN",
    "ERROR",
    "FUTURE",
    "UNKNOWN",
    "COMPLETING",
];

pub fn parse_sinfo(out: &str) -> Result<BTreeMap<String, SchedNode>, SchedError> {
    let doc: Value = serde_json::from_str(out).map_err(|e| bad("sinfo --json", &e.to_string()))?;
    let nodes = doc
        .get("nodes")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("sinfo --json", "no \"nodes\" list"))?;
    let mut map = BTreeMap::new();
    for n in nodes {
        let name = text(n, "name").ok_or_else(|| bad("sinfo --json", "a node without a name"))?;
        let mut all = words(n.get("state"));
        all.extend(words(n.get("state_flags")));
        let base = all
            .iter()
            .find(|w| BASE_STATES.contains(&w.as_str()))
            .cloned()
            .unwrap_or_else(|| "UNKNOWN".into());
        let mut partitions = Vec::new();
        for p in n.get("partitions").and_then(Value::as_array).into_iter().flatten() {
            if let Some(p) = p.as_str() {
                super::add_partition(&mut partitions, p);
            }
        }
        let time = number(n, "reason_changed_at")
            .filter(|&t| t > 0)
            .map(|t| rfc3339(t * 1000));
        map.insert(
            name,
            SchedNode {
                state: long_state(&base, &all),
                not_responding: all.iter().any(|w| w == "NOT_RESPONDING"),
                reason: text(n, "reason"),
                reason_user: text(n, "reason_set_by_user"),
                reason_time: time,
                partitions,
            },
        );
    }
    Ok(map)
}

pub fn parse_squeue(out: &str) -> Result<Vec<Job>, SchedError> {
    let doc: Value = serde_json::from_str(out).map_err(|e| bad("squeue --json", &e.to_string()))?;
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("squeue --json", "no \"jobs\" list"))?;
    let now_s = now_ms() / 1000;
    let mut out = Vec::new();
    for j in jobs {
        let state = words(j.get("job_state"));
        if !state.iter().any(|s| s == "RUNNING" || s == "COMPLETING") {
            continue;
        }
        let id = number(j, "job_id").ok_or_else(|| bad("squeue --json", "a job without an id"))?;
        let nodes = text(j, "nodes").unwrap_or_default();
        let nodes = hostlist::expand(&nodes).map_err(|e| bad("squeue --json", &e.to_string()))?;
        let gres = text(j, "tres_per_node").or_else(|| text(j, "gres")).unwrap_or_default();
        out.push(Job {
            id: id as u64,
            user: text(j, "user_name").unwrap_or_else(|| "?".into()),
            name: text(j, "name").unwrap_or_default(),
            elapsed_s: number(j, "start_time").map(|t| (now_s - t).max(0) as u64).unwrap_or(0),
            gpus_per_node: parse_gpus(&gres),
            nodes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_state_shapes_and_both_time_shapes() {
        let old = r#"{"nodes":[
            {"name":"gpu01","state":"idle","state_flags":[],"reason":"","partitions":["gpu","debug"]},
            {"name":"gpu02","state":"idle","state_flags":["DRAIN"],"reason":"bad \"fan\"","reason_set_by_user":"root","reason_changed_at":1767225600},
            {"name":"gpu03","state":"mixed","state_flags":["DRAIN","NOT_RESPONDING"]}]}"#;
        let n = parse_sinfo(old).expect("parses");
        assert_eq!(n["gpu01"].state, "idle");
        assert_eq!(n["gpu01"].reason, None);
        assert_eq!(n["gpu01"].partitions, ["debug", "gpu"]);
        assert!(n["gpu02"].partitions.is_empty());
        assert_eq!(n["gpu02"].state, "drained");
        assert_eq!(n["gpu02"].reason.as_deref(), Some("bad \"fan\""));
        assert_eq!(n["gpu02"].reason_time.as_deref(), Some("2026-01-01T00:00:00.000Z"));
        assert_eq!(n["gpu03"].state, "draining");
        assert!(n["gpu03"].not_responding);
        let new =
            r#"{"nodes":[{"name":"gpu04","state":["DOWN","DRAIN"],"reason_changed_at":{"set":true,"number":5}}]}"#;
        assert_eq!(parse_sinfo(new).expect("parses")["gpu04"].state, "drained");
        assert!(
            parse_sinfo(r#"{"sinfo":[]}"#).is_err(),
            "an unknown shape is refused, not guessed"
        );
    }

    #[test]
    fn running_jobs_only() {
        let out = r#"{"jobs":[
            {"job_id":7,"user_name":"alice","name":"train","job_state":"RUNNING","nodes":"gpu[01-02]","tres_per_node":"gres:gpu:4","start_time":1},
            {"job_id":8,"user_name":"bob","name":"wait","job_state":["PENDING"],"nodes":""}]}"#;
        let jobs = parse_squeue(out).expect("parses");
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].id, jobs[0].gpus_per_node, jobs[0].nodes.len()), (7, 4, 2));
        assert!(jobs[0].elapsed_s > 0);
    }
}
