//! The group view's rows (`J`): the shown nodes grouped by Slurm job,
//! partition, rack, Kubernetes pod or Ray job, each with what its GPUs do and the flags on them. Apart from
//! the rest of `view` because only that screen and its keys use it.

use crate::model::flag::Severity;
use crate::model::sample::GpuReading;
use crate::store::{NodeState, Store};

/// What the group view (`J`) groups nodes by (`b` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// The Slurm job of each GPU's processes: a job's GPUs only.
    #[default]
    Job,
    /// The Kubernetes pod ("namespace/pod") given each GPU: a pod's GPUs
    /// only, and the GPUs no pod holds in `(none)`.
    Pod,
    /// The Ray job of each GPU's processes (`--ray`: by the pids Ray gives
    /// for its actors and tasks): a job's GPUs only.
    RayJob,
    /// The node's Slurm partitions: a node in two is counted in both.
    Partition,
    /// The node's rack from the config's `[racks]`.
    Rack,
}

impl GroupBy {
    /// Groups of GPUs by who runs on them (a job's columns: user, name),
    /// not of nodes.
    pub fn is_job(self) -> bool {
        matches!(self, GroupBy::Job | GroupBy::RayJob)
    }

    pub fn next(self) -> GroupBy {
        match self {
            GroupBy::Job => GroupBy::Partition,
            GroupBy::Partition => GroupBy::Rack,
            // Added after the others, at the end of the cycle (the keys to
            // the older ones stay).
            GroupBy::Rack => GroupBy::Pod,
            GroupBy::Pod => GroupBy::RayJob,
            GroupBy::RayJob => GroupBy::Job,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Job => "job",
            GroupBy::Pod => "pod",
            GroupBy::RayJob => "ray job",
            GroupBy::Partition => "partition",
            GroupBy::Rack => "rack",
        }
    }
}

/// The group of nodes in no partition (or without a scheduler) or no rack.
pub const NO_GROUP: &str = "(none)";

/// One group as the group view shows it: where it runs and what its GPUs do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupRow {
    /// The job id, partition or rack name.
    pub key: String,
    /// A job's user and name, from the scheduler where it is read.
    pub user: Option<String>,
    pub name: Option<String>,
    /// Node indices, in store order.
    pub nodes: Vec<usize>,
    /// A job's GPUs (those with a process of it); all GPUs of a partition's
    /// or a rack's nodes.
    pub gpus: usize,
    /// Of those, the ones under the idle flag's utilization threshold now.
    pub idle: usize,
    /// Mean utilization of those GPUs, where they give it.
    pub util_pct: Option<f64>,
    /// Active flags on those GPUs and their nodes, by severity: crit, warn, info.
    pub flags: [usize; 3],
    pub worst: Option<Severity>,
}

impl GroupRow {
    fn new(key: String) -> GroupRow {
        GroupRow {
            key,
            user: None,
            name: None,
            nodes: Vec::new(),
            gpus: 0,
            idle: 0,
            util_pct: None,
            flags: [0; 3],
            worst: None,
        }
    }

    /// Counts the node's active flags that `pick` takes, keeping the worst.
    fn count_flags(&mut self, n: &NodeState, pick: impl Fn(&crate::model::flag::Flag) -> bool) {
        for f in n.detector.active().filter(|f| pick(f)) {
            let at = match f.severity {
                Severity::Crit => 0,
                Severity::Warn => 1,
                Severity::Info => 2,
            };
            self.flags[at] += 1;
            self.worst = self.worst.max(Some(f.severity));
        }
    }

    /// "2 crit 3 warn": the counts, worst first; "-" without flags.
    pub fn flags_text(&self) -> String {
        let words = ["crit", "warn", "info"];
        let parts: Vec<String> = self
            .flags
            .iter()
            .zip(words)
            .filter(|(c, _)| **c > 0)
            .map(|(c, w)| format!("{c} {w}"))
            .collect();
        if parts.is_empty() { "-".into() } else { parts.join(" ") }
    }
}

/// Running sums of one group while it is built.
struct Acc {
    row: GroupRow,
    util_sum: f64,
    util_count: usize,
}

impl Acc {
    fn new(row: GroupRow) -> Acc {
        Acc {
            row,
            util_sum: 0.0,
            util_count: 0,
        }
    }

    fn gpu(&mut self, g: &GpuReading, idle_below: u32) {
        self.row.gpus += 1;
        if let Some(u) = g.util_pct {
            self.util_sum += f64::from(u);
            self.util_count += 1;
            if u < idle_below {
                self.row.idle += 1;
            }
        }
    }
}

/// The shown nodes grouped by `by`, the least busy first: "job 4152 holds
/// 64 idle GPUs" is the first line. Jobs come from the GPUs' processes
/// (which the agent maps to their job), with user and name from the
/// scheduler where it is read; partitions from the scheduler; racks from the
/// config. Nodes in no partition or rack are in the group `(none)`.
pub fn groups(store: &Store, shown: &[usize], by: GroupBy) -> Vec<GroupRow> {
    use crate::model::flag::Subject;
    use std::collections::BTreeMap;
    let idle_below = store.thresholds.idle_util_pct;
    // Keyed by (job id, name): jobs in id order, the others by name.
    let mut groups: BTreeMap<(u64, String), Acc> = BTreeMap::new();
    for &i in shown {
        let n = &store.nodes[i];
        let gpus = n.last.iter().flat_map(|s| &s.gpus);
        match by {
            GroupBy::Job | GroupBy::RayJob | GroupBy::Pod => {
                for g in gpus {
                    // Who holds this GPU, each a (sort key, row) of its own.
                    let holders: Vec<((u64, String), GroupRow)> = match by {
                        GroupBy::Job => {
                            let mut ids: Vec<u64> = g.processes.iter().filter_map(|p| p.job_id).collect();
                            ids.sort_unstable();
                            ids.dedup();
                            ids.into_iter()
                                .map(|id| {
                                    let job = n.scheduler.as_ref().and_then(|s| s.jobs.iter().find(|j| j.id == id));
                                    let mut row = GroupRow::new(id.to_string());
                                    row.user = job.map(|j| j.user.clone());
                                    row.name = job.map(|j| j.name.clone());
                                    ((id, String::new()), row)
                                })
                                .collect()
                        }
                        GroupBy::RayJob => {
                            let Some(ray) = &store.ray else { continue };
                            let mut ids: Vec<&str> = g
                                .processes
                                .iter()
                                .filter_map(|p| ray.work_of_pid(i, p.pid))
                                .map(|w| w.job.as_str())
                                .collect();
                            ids.sort_unstable();
                            ids.dedup();
                            ids.into_iter()
                                .map(|id| {
                                    let mut row = GroupRow::new(id.to_string());
                                    row.name = ray.snap.job(id).and_then(|j| j.short_entrypoint());
                                    ((0, id.to_string()), row)
                                })
                                .collect()
                        }
                        _ => {
                            let mut keys = g.pod_names();
                            if keys.is_empty() {
                                keys.push(NO_GROUP.to_string());
                            }
                            keys.into_iter().map(|k| ((0, k.clone()), GroupRow::new(k))).collect()
                        }
                    };
                    for (key, row) in holders {
                        let a = groups.entry(key).or_insert_with(|| Acc::new(row));
                        if a.row.nodes.last() != Some(&i) {
                            a.row.nodes.push(i);
                            a.row.count_flags(n, |f| f.subject == Subject::Node);
                        }
                        a.row.count_flags(n, |f| f.subject == Subject::Gpu(g.index));
                        a.gpu(g, idle_below);
                    }
                }
            }
            GroupBy::Partition | GroupBy::Rack => {
                let keys: Vec<String> = match by {
                    GroupBy::Partition => n.partitions().to_vec(),
                    _ => n.rack.iter().cloned().collect(),
                };
                let keys = if keys.is_empty() {
                    vec![NO_GROUP.to_string()]
                } else {
                    keys
                };
                for key in keys {
                    let a = groups
                        .entry((0, key.clone()))
                        .or_insert_with(|| Acc::new(GroupRow::new(key)));
                    a.row.nodes.push(i);
                    a.row.count_flags(n, |_| true);
                    for g in gpus.clone() {
                        a.gpu(g, idle_below);
                    }
                }
            }
        }
    }
    let mut out: Vec<GroupRow> = groups
        .into_values()
        .map(|a| {
            let mut r = a.row;
            r.util_pct = (a.util_count > 0).then(|| a.util_sum / a.util_count as f64);
            r
        })
        .collect();
    // Least busy first; groups without a reading last; then the most GPUs.
    out.sort_by(|a, b| {
        (a.util_pct.is_none(), a.util_pct.unwrap_or(0.0))
            .partial_cmp(&(b.util_pct.is_none(), b.util_pct.unwrap_or(0.0)))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(b.gpus.cmp(&a.gpus))
    });
    out
}
