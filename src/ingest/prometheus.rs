//! `--prometheus URL`: the whole fleet read from a Prometheus-compatible
//! HTTP API (Prometheus, Thanos, VictoriaMetrics, Mimir) instead of a stream
//! per agent. Every refresh is a handful of instant queries, whatever the
//! fleet's size: the series names the dcgm mapping reads, a few names per
//! query (`{__name__=~"A|B|C",<match>}`), plus `up` to tell a node whose
//! exporter stopped answering. The answers are grouped into nodes by their
//! `Hostname` label (dcgm-exporter's; `hostname` and `instance` after it),
//! mapped by `ingest::dcgm`, and sent as the same `Update`s an agent sends.
//!
//! The nodes are the ones Prometheus knows when the console starts; a node
//! that appears later is seen on the next start (the store's node list is
//! fixed for a session). A failed query is an error for every node, in
//! Prometheus' own words (`bad_data: ...`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ingest::dcgm::{self, Mapped, Xids};
use crate::ingest::promtext::Sample;
use crate::ingest::scrape;
use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::target::Target;
use crate::model::time::now_ms;
use crate::model::update::{Event, Update};

/// The labels that say which node, GPU and MIG instance a series is of.
const KEY_LABELS: &str = "Hostname,hostname,instance,gpu,GPU_I_ID,GPU_I_PROFILE";

/// The labels that describe a GPU, asked once per GPU (the inventory).
const DESC_LABELS: &str = "UUID,modelName,pci_bus_id,DCGM_FI_DRIVER_VERSION";

/// Series every dcgm-exporter GPU has, for the inventory.
const INVENTORY_NAMES: [&str; 3] = ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"];

/// Names per query: the regex stays short and the answers come in parallel.
const NAMES_PER_QUERY: usize = 9;

/// The largest answer to one query (a 4,096-node fleet's busiest name is ~15 MB).
const MAX_ANSWER_BYTES: usize = 512 << 20;

/// A Prometheus HTTP API and how to ask it.
#[derive(Debug, Clone)]
pub struct Prometheus {
    /// Without a trailing '/'.
    base: String,
    /// The label matchers of `--prometheus-match`, without braces.
    matchers: Option<String>,
    timeout: Duration,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct ApiAnswer {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct ApiData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<ApiSeries>,
}

#[derive(Deserialize)]
struct ApiSeries {
    metric: BTreeMap<String, String>,
    /// [unix seconds, "value"] (instant queries)
    #[serde(default)]
    value: Option<(f64, String)>,
    /// [[unix seconds, "value"], ...] (range queries)
    #[serde(default)]
    values: Vec<(f64, String)>,
}

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

/// What one read of the fleet found.
#[derive(Debug, Default)]
pub struct Fleet {
    /// By node name.
    pub nodes: BTreeMap<String, Mapped>,
    /// Nodes whose scrape target Prometheus reports down (`up == 0`).
    pub down: HashSet<String>,
}

impl Prometheus {
    pub fn new(url: &str, matchers: Option<&str>, timeout: Duration) -> Result<Prometheus, String> {
        let base = url.trim().trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base).map_err(|e| format!("--prometheus {url}: not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("--prometheus {url}: not an http:// or https:// URL"));
        }
        let matchers = matchers
            .map(|m| {
                m.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .trim()
                    .to_string()
            })
            .filter(|m| !m.is_empty());
        Ok(Prometheus {
            base,
            matchers,
            timeout,
            client: scrape::client(timeout)?,
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// The queries of one refresh: the mapped series names, a few per
    /// query, each series reduced to the labels that name its node, GPU and
    /// MIG instance (`max by`: a tenth of the answer's size); `up`; and one
    /// inventory of the GPUs' descriptive labels (UUID, model, PCI bus id,
    /// driver), one series per GPU.
    pub fn queries(&self) -> Vec<String> {
        let names: Vec<&str> = dcgm::series_names().collect();
        let extra = self.matchers.as_deref().map(|m| format!(",{m}")).unwrap_or_default();
        let mut q: Vec<String> = names
            .chunks(NAMES_PER_QUERY)
            .map(|c| {
                format!(
                    "max by (__name__,{KEY_LABELS}) ({{__name__=~\"{}\"{extra}}})",
                    c.join("|")
                )
            })
            .collect();
        q.push(format!("{{__name__=\"up\"{extra}}}"));
        q.push(format!(
            "max by ({KEY_LABELS},{DESC_LABELS}) ({{__name__=~\"{}\"{extra}}})",
            INVENTORY_NAMES.join("|")
        ));
        q
    }

    /// One API call (`path` with its parameters): its result, or
    /// Prometheus' error in one line.
    async fn api(&self, path: &str, params: &[(&str, &str)], want: &str) -> Result<Vec<ApiSeries>, String> {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.base), params)
            .map_err(|e| format!("bad URL: {e}"))?;
        let a = scrape::get_capped(
            &self.client,
            url.as_str(),
            "application/json",
            MAX_ANSWER_BYTES,
            self.timeout,
        )
        .await?;
        let parsed: Result<ApiAnswer, _> = serde_json::from_slice(&a.body);
        let answer = match parsed {
            Ok(x) => x,
            Err(_) if !a.status.is_success() => return Err(format!("HTTP {}", a.status)),
            Err(e) => return Err(format!("not a Prometheus API answer ({e})")),
        };
        if answer.status != "success" {
            return Err(format!(
                "query failed: {}: {}",
                answer.error_type.as_deref().unwrap_or("error"),
                answer.error.as_deref().unwrap_or("(no message)")
            ));
        }
        let data = answer.data.ok_or("answer without data")?;
        if data.result_type != want {
            return Err(format!("expected a {want}, got a {}", data.result_type));
        }
        Ok(data.result)
    }

    /// One instant query: its series.
    pub async fn query(&self, q: &str) -> Result<Vec<Sample>, String> {
        let started = std::time::Instant::now();
        let result = self.api("/api/v1/query", &[("query", q)], "vector").await?;
        // scripts/prom_scale.py reads these lines for the latency figures.
        tracing::debug!(
            "prometheus query answered in {} ms ({} series)",
            started.elapsed().as_millis(),
            result.len()
        );
        Ok(result
            .into_iter()
            .filter_map(|s| {
                let (t, v) = s.value?;
                sample(s.metric, t, &v)
            })
            .collect())
    }

    /// The history the sparklines show, from `start_ms` to `end_ms` every
    /// `step`, as samples per node name (oldest first), for at most
    /// `gpus` GPUs' worth of points.
    pub async fn history(
        &self,
        start_ms: i64,
        end_ms: i64,
        step: Duration,
        gpus: usize,
    ) -> Result<BTreeMap<String, Vec<NodeSample>>, String> {
        let step_ms = (step.as_millis() as i64).max(1000);
        // Shorter where the fleet is large: at most HISTORY_MAX_POINTS points.
        let points = ((end_ms - start_ms) / step_ms).max(0) as usize;
        let fit = HISTORY_MAX_POINTS / (gpus.max(1) * HISTORY_NAMES.len());
        let start_ms = end_ms - step_ms * points.min(fit) as i64;
        if start_ms >= end_ms {
            return Ok(BTreeMap::new());
        }
        let extra = self.matchers.as_deref().map(|m| format!(",{m}")).unwrap_or_default();
        let q = format!(
            "max by (__name__,{KEY_LABELS}) ({{__name__=~\"{}\"{extra}}})",
            HISTORY_NAMES.join("|")
        );
        let secs = |ms: i64| format!("{:.3}", ms as f64 / 1000.0);
        let result = self
            .api(
                "/api/v1/query_range",
                &[
                    ("query", &q),
                    ("start", &secs(start_ms)),
                    ("end", &secs(end_ms)),
                    ("step", &secs(step_ms)),
                ],
                "matrix",
            )
            .await?;
        Ok(history_samples(result, step_ms))
    }
    /// Reads the fleet: every query of a refresh at once, grouped by node.
    pub async fn read(&self, interval_ms: i64) -> Result<Fleet, String> {
        let queries = self.queries();
        let answers = futures_util::future::join_all(queries.iter().map(|q| self.query(q))).await;
        let mut series = Vec::new();
        for a in answers {
            series.extend(a?);
        }
        // The inventory's series (no name) lend their labels to the GPU's others.
        let (inventory, mut series): (Vec<Sample>, Vec<Sample>) = series.into_iter().partition(|s| s.name.is_empty());
        let mut desc: HashMap<(String, String), Vec<(String, String)>> = HashMap::new();
        for s in inventory {
            let (Some(host), Some(gpu)) = (dcgm::host_of(&s), s.label("gpu").map(str::to_string)) else {
                continue;
            };
            desc.entry((host, gpu)).or_insert_with(|| {
                s.labels
                    .iter()
                    .filter(|(k, _)| DESC_LABELS.split(',').any(|d| d == k))
                    .cloned()
                    .collect()
            });
        }
        for s in &mut series {
            if s.label("UUID").is_some() {
                continue;
            }
            let key = dcgm::host_of(s).zip(s.label("gpu").map(str::to_string));
            if let Some(labels) = key.and_then(|k| desc.get(&k)) {
                s.labels.extend(labels.iter().cloned());
            }
        }
        let now = now_ms();
        let mut by_host: BTreeMap<String, Vec<&Sample>> = BTreeMap::new();
        // A node's scrape targets, to read `up` by node.
        let mut instance_host: HashMap<&str, String> = HashMap::new();
        let mut ups = Vec::new();
        for s in &series {
            if s.name == "up" {
                ups.push(s);
                continue;
            }
            let Some(host) = dcgm::host_of(s) else { continue };
            if let Some(inst) = s.label("instance") {
                instance_host.entry(inst).or_insert_with(|| host.clone());
            }
            by_host.entry(host).or_default().push(s);
        }
        let mut fleet = Fleet::default();
        for s in ups {
            if s.value == 0.0
                && let Some(host) = s.label("instance").and_then(|i| instance_host.get(i))
            {
                fleet.down.insert(host.clone());
            }
        }
        for (host, ss) in by_host {
            let m = dcgm::map_node(ss, &host, "prometheus", interval_ms, now);
            if !m.desc.gpus.is_empty() {
                fleet.nodes.insert(host, m);
            }
        }
        Ok(fleet)
    }
}

/// An API series' labels and value as a parsed sample.
fn sample(mut labels: BTreeMap<String, String>, t: f64, v: &str) -> Option<Sample> {
    // The inventory's aggregated series have no name.
    let name = labels.remove("__name__").unwrap_or_default();
    // Go's ParseFloat forms ("NaN", "+Inf"): Rust reads them all.
    let value = v.parse::<f64>().ok()?;
    Some(Sample {
        name,
        labels: labels.into_iter().collect(),
        value,
        timestamp_ms: Some((t * 1000.0) as i64),
    })
}

/// A range query's series as one sample per node and time step.
fn history_samples(result: Vec<ApiSeries>, step_ms: i64) -> BTreeMap<String, Vec<NodeSample>> {
    // Each series' labels once; each time step's values set into them in
    // turn, so only one step's readings are built at a time (a large
    // fleet's history is millions of points).
    let mut series: Vec<Sample> = Vec::with_capacity(result.len());
    let mut hosts: Vec<String> = Vec::with_capacity(result.len());
    let mut by_time: BTreeMap<i64, Vec<(usize, f64)>> = BTreeMap::new();
    for s in result {
        let Some(template) = sample(s.metric, 0.0, "0") else {
            continue;
        };
        let Some(host) = dcgm::host_of(&template) else { continue };
        let idx = series.len();
        for (t, v) in &s.values {
            if let Ok(v) = v.parse::<f64>() {
                by_time.entry((t * 1000.0) as i64).or_default().push((idx, v));
            }
        }
        series.push(template);
        hosts.push(host);
    }
    let mut out: BTreeMap<String, Vec<NodeSample>> = BTreeMap::new();
    for (t, points) in by_time {
        for &(idx, v) in &points {
            series[idx].value = v;
        }
        let mut by_host: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
        for &(idx, _) in &points {
            by_host.entry(hosts[idx].as_str()).or_default().push(&series[idx]);
        }
        for (host, ss) in by_host {
            let m = dcgm::map_node(ss, host, "prometheus", step_ms, t);
            if !m.sample.gpus.is_empty() {
                out.entry(host.to_string()).or_default().push(m.sample);
            }
        }
    }
    out
}

/// The nodes Prometheus knows now, as targets: named by their hostname
/// label, at the agent port (for `bench` and the node's address).
pub async fn discover(p: &Prometheus, agent_port: u16) -> anyhow::Result<Vec<Target>> {
    let fleet = p
        .read(1000)
        .await
        .map_err(|e| anyhow::anyhow!("--prometheus {}: {e}", p.url()))?;
    if fleet.nodes.is_empty() {
        anyhow::bail!(
            "--prometheus {}: no dcgm-exporter or fleetop GPU series{}",
            p.url(),
            p.matchers
                .as_deref()
                .map(|m| format!(" matching {{{m}}}"))
                .unwrap_or_default()
        );
    }
    Ok(fleet
        .nodes
        .keys()
        .map(|name| Target {
            name: name.clone(),
            host: name.clone(),
            port: agent_port,
        })
        .collect())
}

/// Starts the one task that reads the fleet every `interval` for `targets`
/// (node `i` of the store is `targets[i]`).
pub fn spawn(p: Prometheus, targets: Vec<Target>, interval: Duration, tx: mpsc::Sender<Update>) -> JoinHandle<()> {
    tokio::spawn(run(p, targets, interval, tx))
}

async fn run(p: Prometheus, targets: Vec<Target>, interval: Duration, tx: mpsc::Sender<Update>) {
    let n = targets.len();
    let mut described: Vec<Option<NodeDesc>> = vec![None; n];
    let mut xids: Vec<Xids> = (0..n).map(|_| Xids::default()).collect();
    let mut seq = 0u64;
    let mut backfilled = false;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tx.closed() => return,
        }
        let started = std::time::Instant::now();
        let read = p.read(interval.as_millis() as i64).await;
        tracing::debug!("prometheus refresh read in {} ms", started.elapsed().as_millis());
        let mut fleet = match read {
            Ok(f) => f,
            Err(e) => {
                let why = format!("prometheus {}: {e}", p.url());
                tracing::warn!("{why}");
                for (node, d) in described.iter_mut().enumerate() {
                    *d = None;
                    if tx
                        .send(Update::Node {
                            node,
                            event: Event::Down(why.clone()),
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                continue;
            }
        };
        if !backfilled {
            backfilled = true;
            if !backfill(&p, &targets, &fleet, interval, &mut described, &mut seq, &tx).await {
                return;
            }
        }
        seq += 1;
        for (node, t) in targets.iter().enumerate() {
            let mut events = Vec::with_capacity(3);
            match fleet.nodes.remove(&t.name) {
                _ if fleet.down.contains(&t.name) => {
                    described[node] = None;
                    events.push(Event::Down(
                        "Prometheus reports its exporter down (up == 0): its series are from the last good scrape"
                            .into(),
                    ));
                }
                Some(mut m) => {
                    if described[node].as_ref() != Some(&m.desc) {
                        described[node] = Some(m.desc.clone());
                        events.push(Event::Info(Box::new(m.desc)));
                        events.push(Event::CaughtUp);
                    }
                    m.sample.seq = seq;
                    xids[node].dedup(&mut m.sample);
                    events.push(Event::Sample(Box::new(m.sample)));
                }
                None => {
                    described[node] = None;
                    events.push(Event::Down(
                        "no series for this node in Prometheus' answer (its exporter down or gone?)".into(),
                    ));
                }
            }
            for event in events {
                if tx.send(Update::Node { node, event }).await.is_err() {
                    return;
                }
            }
        }
        if !fleet.nodes.is_empty() {
            tracing::debug!(
                "{} node(s) appeared in Prometheus since the start (seen on the next start)",
                fleet.nodes.len()
            );
        }
    }
}

/// How far back the history is read at start.
const HISTORY_WINDOW: Duration = Duration::from_secs(600);

/// After the first good read: each node's description, its history from a
/// range query (the sparklines start full, as with an agent's backfill), and
/// "caught up". A failed range query costs the history only. False when the
/// session is gone.
async fn backfill(
    p: &Prometheus,
    targets: &[Target],
    fleet: &Fleet,
    interval: Duration,
    described: &mut [Option<NodeDesc>],
    seq: &mut u64,
    tx: &mpsc::Sender<Update>,
) -> bool {
    let gpus: usize = fleet.nodes.values().map(|m| m.desc.gpus.len()).sum();
    let end = now_ms() - interval.as_millis() as i64 / 2;
    let start = end - HISTORY_WINDOW.as_millis() as i64;
    let mut past = p.history(start, end, interval, gpus).await.unwrap_or_else(|e| {
        tracing::warn!("prometheus {}: no history: {e}", p.url());
        BTreeMap::new()
    });
    for (node, t) in targets.iter().enumerate() {
        let Some(m) = fleet.nodes.get(&t.name) else { continue };
        if fleet.down.contains(&t.name) {
            continue;
        }
        described[node] = Some(m.desc.clone());
        let mut events = vec![Event::Info(Box::new(m.desc.clone()))];
        for mut s in past.remove(&t.name).unwrap_or_default() {
            *seq += 1;
            s.seq = *seq;
            events.push(Event::Sample(Box::new(s)));
        }
        events.push(Event::CaughtUp);
        for event in events {
            if tx.send(Update::Node { node, event }).await.is_err() {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_few_and_carry_the_match() {
        let p = Prometheus::new("http://p:9090/", Some("{job=\"dcgm\"}"), Duration::from_secs(1)).expect("a value");
        let q = p.queries();
        assert!(q.len() <= 6, "{q:?}");
        assert!(q.iter().all(|q| q.contains(",job=\"dcgm\"}")), "{q:?}");
        assert!(q.iter().any(|q| q.contains("DCGM_FI_DEV_GPU_UTIL")));
        assert_eq!(p.url(), "http://p:9090");
        assert!(Prometheus::new("ftp://x", None, Duration::from_secs(1)).is_err());
        assert!(Prometheus::new("not a url", None, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn a_range_answer_becomes_samples_per_node_and_step() {
        let json = r#"[
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","Hostname":"n1","instance":"a:9400"},
           "values":[[1700000000,"10"],[1700000005,"20"]]},
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","Hostname":"n1","instance":"a:9400"},
           "values":[[1700000005,"9223372036854775794"]]},
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"1","instance":"n2:9400"},
           "values":[[1700000005,"NaN"]]}
        ]"#;
        let series: Vec<ApiSeries> = serde_json::from_str(json).expect("a value");
        let h = history_samples(series, 5000);
        let n1 = &h["n1"];
        assert_eq!(n1.len(), 2);
        assert_eq!(n1[0].time_ms, 1_700_000_000_000);
        assert_eq!(n1[0].gpus[0].util_pct, Some(10));
        assert_eq!(n1[1].gpus[0].util_pct, Some(20));
        assert_eq!(n1[1].gpus[0].temp_c, None);
        // n2 by its instance; a NaN is no reading.
        assert_eq!(h["n2"][0].gpus[0].util_pct, None);
    }
}
