//! The history the sparklines start with, read as range queries.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::{KEY_LABELS, Prometheus};
use crate::ingest::dcgm::NodeAcc;
use crate::ingest::promjson;
use crate::model::sample::NodeSample;

/// How many steps back `history` reads the flags' states.
const FLAG_STEPS: usize = 6;

/// What the history (sparklines) shows: the rest is not asked for the past.
const HISTORY_NAMES: [&str; 4] = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
];

/// The most points one history read may bring (about 25 MB of JSON):
/// a large fleet gets a shorter history rather than a huge answer.
const HISTORY_MAX_POINTS: usize = 500_000;

impl Prometheus {
    /// The history the sparklines show, from `start_ms` to `end_ms` every
    /// `step`, as samples per node name (oldest first), for at most
    /// `gpus` GPUs' worth of points.
    pub async fn history(
        &self,
        start_ms: i64,
        end_ms: i64,
        step: Duration,
        gpus: usize,
        timeout: Duration,
    ) -> Result<BTreeMap<String, Vec<NodeSample>>, String> {
        let step_ms = (step.as_millis() as i64).max(1000);
        // Shorter where the fleet is large: at most HISTORY_MAX_POINTS points.
        let points = ((end_ms - start_ms) / step_ms).max(0) as usize;
        let fit = HISTORY_MAX_POINTS / (gpus.max(1) * HISTORY_NAMES.len());
        let start_ms = end_ms - step_ms * points.min(fit) as i64;
        if start_ms >= end_ms {
            return Ok(BTreeMap::new());
        }
        let q = format!(
            "max by (__name__,{KEY_LABELS}) ({{__name__=~\"{}\"{}}})",
            HISTORY_NAMES.join("|"),
            self.extra()
        );
        let secs = |ms: i64| format!("{:.3}", ms as f64 / 1000.0);
        let a = self
            .get(
                "/api/v1/query_range",
                &[
                    ("query", &q),
                    ("start", &secs(start_ms)),
                    ("end", &secs(end_ms)),
                    ("step", &secs(step_ms)),
                ],
                timeout,
            )
            .await?;
        let mut h = HistoryAcc::default();
        Self::parse(&a, "matrix", |s| {
            h.add(s);
            Ok(())
        })?;
        drop(a);
        // The states the debounced flags read (throttling, errors, links,
        // ports), over the last few steps only: a flag that holds now is
        // raised at start, as with an agent's backfill.
        let steps = FLAG_STEPS.min(points.min(fit)) as i64;
        if steps > 0 {
            let a = self
                .get(
                    "/api/v1/query_range",
                    &[
                        ("query", &self.state_query()),
                        ("start", &secs(end_ms - step_ms * steps)),
                        ("end", &secs(end_ms)),
                        ("step", &secs(step_ms)),
                    ],
                    timeout,
                )
                .await?;
            Self::parse(&a, "matrix", |s| {
                h.add(s);
                Ok(())
            })?;
        }
        Ok(h.finish(step_ms))
    }
}

/// A range query's series, as one node accumulator per node and time step
/// (only the history's few fields: a step's nodes are small).
#[derive(Default)]
pub(super) struct HistoryAcc {
    by_time: BTreeMap<i64, HashMap<String, NodeAcc>>,
}

impl HistoryAcc {
    pub(super) fn add(&mut self, s: &promjson::Series) {
        let l = s.labels();
        let Some(host) = l.host() else { return };
        for (t, v) in &s.values {
            let Some(v) = promjson::number(v) else { continue };
            let step = self.by_time.entry((t * 1000.0) as i64).or_default();
            let acc = match step.get_mut(host) {
                Some(a) => a,
                None => step.entry(host.to_string()).or_default(),
            };
            acc.add(s.name(), &l, v);
        }
    }

    pub(super) fn finish(self, step_ms: i64) -> BTreeMap<String, Vec<NodeSample>> {
        let mut out: BTreeMap<String, Vec<NodeSample>> = BTreeMap::new();
        for (t, step) in self.by_time {
            for (host, acc) in step {
                let m = acc.finish(&host, "prometheus", step_ms, t);
                if !m.sample.gpus.is_empty() {
                    out.entry(host).or_default().push(m.sample);
                }
            }
        }
        out
    }
}
