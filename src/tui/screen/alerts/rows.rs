//! The alerts screen's rows: the visible nodes' active flags, folded by
//! job and ordered as chosen, then the recently cleared ones.

use crate::model::flag::{Flag, Silence, Subject};
use crate::store::NodeState;
use crate::tui::app::App;

use super::AlertSort;

/// One row of the alerts screen.
pub struct AlertRow<'a> {
    pub node: usize,
    pub flag: &'a Flag,
    /// When it cleared, for flags that have.
    pub cleared_ms: Option<i64>,
    /// The Slurm job on the flag's GPU, where known.
    pub job: Option<u64>,
    /// Identical flags (kind, severity, job) folded into this row: GPUs and
    /// nodes (1 and 1 for a row of its own).
    pub gpus: usize,
    pub nodes: usize,
    /// Acknowledged or silenced: drawn dimmed, after the others.
    pub quiet: Option<&'a Silence>,
}

impl App {
    /// Active flags of the visible nodes, then recently cleared ones, in the
    /// chosen order.
    pub fn alert_rows(&self) -> Vec<AlertRow<'_>> {
        let visible = self.visible();
        let mut rows: Vec<AlertRow<'_>> = visible
            .iter()
            .flat_map(|&i| {
                let n = &self.store.nodes[i];
                n.detector.active().map(move |f| AlertRow {
                    node: i,
                    flag: f,
                    cleared_ms: None,
                    job: flag_job(n, f),
                    gpus: 1,
                    nodes: 1,
                    quiet: self
                        .alerts
                        .silences
                        .iter()
                        .find(|s| s.covers(&n.target.name, f, self.now_ms)),
                })
            })
            .collect();
        if self.alerts.folded {
            rows = fold_by_job(rows);
        }
        let name = |i: usize| self.store.nodes[i].target.name.as_str();
        let key = |r: &AlertRow<'_>| (std::cmp::Reverse(r.flag.severity), r.flag.since_ms);
        match self.alerts.sort {
            AlertSort::Severity => rows.sort_by(|a, b| key(a).cmp(&key(b)).then(name(a.node).cmp(name(b.node)))),
            AlertSort::Age => rows.sort_by_key(|r| r.flag.since_ms),
            AlertSort::Node => rows.sort_by(|a, b| name(a.node).cmp(name(b.node)).then(key(a).cmp(&key(b)))),
            AlertSort::Kind => rows.sort_by(|a, b| a.flag.kind.cmp(&b.flag.kind).then(key(a).cmp(&key(b)))),
        }
        let mut cleared: Vec<AlertRow<'_>> = visible
            .iter()
            .flat_map(|&i| {
                self.store.nodes[i].detector.cleared().map(move |c| AlertRow {
                    node: i,
                    flag: &c.flag,
                    cleared_ms: Some(c.cleared_ms),
                    job: None,
                    gpus: 1,
                    nodes: 1,
                    quiet: None,
                })
            })
            .collect();
        // What a person has already seen goes after what they have not.
        rows.sort_by_key(|r| r.quiet.is_some());
        cleared.sort_by_key(|r| std::cmp::Reverse(r.cleared_ms));
        rows.extend(cleared);
        rows
    }
}

/// The Slurm job on a GPU flag's GPU (its processes' cgroup), where known.
fn flag_job(n: &NodeState, f: &Flag) -> Option<u64> {
    let Subject::Gpu(g) = f.subject else { return None };
    n.gpu(g)?.processes.iter().find_map(|p| p.job_id)
}

/// Folds the flags of one kind and severity on one job into its first row:
/// "job 4152: 8 GPUs idle" is one line, not eight. What is about the job
/// (idle, underused) folds across its nodes; anything else (a hardware
/// fault, persistence off) only within one node, so each node's fault is a
/// row of its own that `D` can drain.
fn fold_by_job(rows: Vec<AlertRow<'_>>) -> Vec<AlertRow<'_>> {
    use std::collections::{BTreeMap, BTreeSet};
    type Key = (
        crate::model::flag::FlagKind,
        crate::model::flag::Severity,
        u64,
        Option<usize>,
    );
    let mut out: Vec<AlertRow<'_>> = Vec::new();
    let mut at: BTreeMap<Key, usize> = BTreeMap::new();
    let mut nodes: Vec<BTreeSet<usize>> = Vec::new();
    for r in rows {
        let Some(job) = r.job else {
            nodes.push(BTreeSet::from([r.node]));
            out.push(r);
            continue;
        };
        let node = (!r.flag.kind.about_the_job()).then_some(r.node);
        let key = (r.flag.kind, r.flag.severity, job, node);
        match at.get(&key) {
            Some(&i) => {
                out[i].gpus += 1;
                nodes[i].insert(r.node);
                out[i].nodes = nodes[i].len();
            }
            None => {
                at.insert(key, out.len());
                nodes.push(BTreeSet::from([r.node]));
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::flag::{FlagKind, Severity};

    fn flag(kind: FlagKind, severity: Severity) -> Flag {
        Flag {
            kind,
            severity,
            subject: Subject::Gpu(0),
            since_ms: 0,
            detail: String::new(),
            holder: None,
            evidence: Default::default(),
            action: kind.action(),
            escalation: None,
        }
    }

    #[test]
    fn only_what_is_about_the_job_folds_never_a_nodes_hardware_fault() {
        fn row(node: usize, flag: &Flag) -> AlertRow<'_> {
            AlertRow {
                node,
                flag,
                cleared_ms: None,
                job: Some(4848),
                gpus: 1,
                nodes: 1,
                quiet: None,
            }
        }
        let (idle, xid) = (
            flag(FlagKind::Idle, Severity::Warn),
            flag(FlagKind::Xid, Severity::Crit),
        );
        let out = fold_by_job(vec![
            row(0, &idle),
            row(1, &idle),
            row(0, &xid),
            row(1, &xid),
            row(1, &xid),
        ]);
        let shape: Vec<(FlagKind, usize, usize, usize)> =
            out.iter().map(|r| (r.flag.kind, r.node, r.nodes, r.gpus)).collect();
        assert_eq!(
            shape,
            [
                (FlagKind::Idle, 0, 2, 2),
                (FlagKind::Xid, 0, 1, 1),
                (FlagKind::Xid, 1, 1, 2)
            ],
            "one row for the job's idle GPUs; XID 79 one row per node (its GPUs folded)"
        );
    }
}
