//! `--prometheus URL`: the whole fleet read from a Prometheus-compatible
//! HTTP API (Prometheus, Thanos, VictoriaMetrics, Mimir) instead of a stream
//! per agent. Every refresh is a handful of instant queries, whatever the
//! fleet's size: the series names the dcgm mapping reads, a few names per
//! query (`{__name__=~"A|B|C",<match>}`), plus `up` to tell a node whose
//! exporter stopped answering. The answers are grouped into nodes by their
//! `Hostname` label (dcgm-exporter's; `hostname` and `instance` after it),
//! mapped by `ingest::dcgm`, and sent as the same `Update`s an agent sends.
//!
//! Cost: each refresh asks only for what moves (utilization, memory used,
//! temperatures, power, XIDs, throttling, errors, port and link state); the
//! inventory (UUID, model, PCI id, driver), clocks, limits and counters are
//! asked with it every `SLOW_EVERY` (and on the first read) and kept in
//! between. Answers are read as a stream of series, labels borrowed from
//! the answer's bytes, two queries in flight at most, each answer dropped
//! once read.
//!
//! The nodes are the ones Prometheus knows when the console starts; a node
//! that appears later is seen on the next start (the store's node list is
//! fixed for a session). A failed query is an error for every node, in
//! Prometheus' own words (`bad_data: ...`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::ingest::dcgm::{self, Group, Mapped, NodeAcc, Pace};
use crate::ingest::promjson;
use crate::ingest::scrape;
use crate::model::time::now_ms;

mod history;
mod task;
pub use task::{discover, spawn};

/// The labels that say which node a series is of.
const HOST_LABELS: &str = "Hostname,hostname,instance";

/// The labels that say which node, GPU and MIG instance a series is of.
/// With dcgm-exporter's Kubernetes labels: a GPU shared by pods is one
/// series per pod, as the exporter serves it (the mapping keeps the pods).
const KEY_LABELS: &str = "Hostname,hostname,instance,gpu,GPU_I_ID,GPU_I_PROFILE,pod,namespace,container";

/// The labels that describe a GPU, asked with the inventory.
const DESC_LABELS: &str = "UUID,modelName,pci_bus_id,DCGM_FI_DRIVER_VERSION";

/// Series every dcgm-exporter GPU (and every fleetop agent's GPU, lost ones
/// included: XID) has, for the inventory.
const INVENTORY_NAMES: [&str; 4] = [
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_XID_ERRORS",
];

/// Names per query: the regex stays short and each answer small (at 4,096
/// nodes x 8 GPUs, six names were ~25 MB of JSON; seven keep the fast
/// fields in three queries since the profiling module's utilization joined).
const NAMES_PER_QUERY: usize = 7;

/// Queries in flight at once: each answer is read and dropped as it
/// arrives, so the console holds at most this many answers.
const IN_FLIGHT: usize = 2;

/// The largest answer buffer kept for reuse (a 4,096-node fleet's answers
/// are ~25 MB; a larger one is given back to the allocator).
const KEEP_BUFFER_BYTES: usize = 64 << 20;

/// The slow fields (inventory, clocks, limits, counters) are asked every
/// this long (and on the first read).
const SLOW_EVERY: Duration = Duration::from_secs(30);

/// The first read (discovery, or `export --once`) of a large fleet moves
/// every series at once: its queries may take this long at least.
const FIRST_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A read's timeout where `--scrape-timeout` is not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer to one query (a 4,096-node fleet's busiest query is ~40 MB).
/// Two in flight (`IN_FLIGHT`) are the largest part of a refresh's memory.
pub const MAX_ANSWER_BYTES: usize = 192 << 20;

/// The most bytes of answers one refresh reads, its queries together.
pub const MAX_REFRESH_BYTES: usize = 1 << 30;

/// The most nodes one refresh holds (a 10,240-node fleet and room to
/// grow): a store that names more is refused, as one with too many series.
pub const MAX_REFRESH_NODES: usize = 16_384;

/// The most GPUs one refresh holds, its nodes together (16,384 nodes of 8;
/// a 10,240-node, 8-GPU fleet is 81,920). The GPUs are what a refresh's
/// memory grows with, to its export: 311,296 GPUs inside every other
/// bound peaked at 1.7 GiB (docs/performance-log.md, 2026-12-07).
pub const MAX_REFRESH_GPUS: usize = 131_072;

/// The most GPUs, ports, MIG instances and pods one refresh holds, its
/// nodes together (`NodeAcc::entities`; a 10,240-node, 8-GPU fleet with 8
/// ports a node and a pod on every GPU is about 250,000). With the answers
/// in flight (`IN_FLIGHT` x `MAX_ANSWER_BYTES`) and every label cut to
/// `dcgm::MAX_LABEL_BYTES`, this is what bounds the console's memory to
/// under 1 GiB whatever an endpoint sends (docs/security.md).
pub const MAX_REFRESH_ENTITIES: usize = 320_000;

/// The most series one refresh reads, its queries together: a 10,240-node,
/// 8-GPU fleet's full refresh is about 6 million; more is a store that
/// matches more than a fleet.
pub const MAX_REFRESH_SERIES: usize = 8_000_000;

/// A Prometheus HTTP API and how to ask it.
#[derive(Debug, Clone)]
pub struct Prometheus {
    /// Without a trailing '/'.
    base: String,
    /// The label matchers of `--prometheus-match`, without braces.
    matchers: Option<String>,
    timeout: Duration,
    /// `--scrape-timeout` as given: every read within it, the first too.
    bound: Option<Duration>,
    client: reqwest::Client,
    /// Answer buffers, reused from one query to the next (see `get`).
    buffers: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    /// Discovery's read (when, what, what it kept), for the reading task's
    /// first refresh: a large fleet's first read is not done twice.
    first: std::sync::Arc<std::sync::Mutex<Option<(Instant, Fleet, Kept)>>>,
}

/// What one read of the fleet found.
#[derive(Debug, Default)]
pub struct Fleet {
    /// By node name.
    pub nodes: BTreeMap<String, Mapped>,
    /// Nodes whose scrape target Prometheus reports down (`up == 0`).
    pub down: HashSet<String>,
    /// The slowest query of the read.
    pub slowest: Duration,
}

/// What the slow reads gave, per node, for the fast reads in between.
#[derive(Debug, Default)]
pub struct Kept {
    nodes: HashMap<String, NodeAcc>,
    at: Option<Instant>,
}

impl Kept {
    /// Whether the next read asks for everything.
    fn due(&self) -> bool {
        self.at.is_none_or(|t| t.elapsed() >= SLOW_EVERY)
    }
}

impl Prometheus {
    /// `timeout`: `--scrape-timeout` as given, which then bounds every read,
    /// the first included (a cron export must always end); `None`, 5 s a
    /// read and up to `FIRST_READ_TIMEOUT` for the first.
    pub fn new(url: &str, matchers: Option<&str>, timeout: Option<Duration>) -> Result<Prometheus, String> {
        let (bound, timeout) = (timeout, timeout.unwrap_or(DEFAULT_TIMEOUT));
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
            bound,
            // Each request carries its own timeout (a first read gets longer).
            client: scrape::client(bound.unwrap_or(timeout.max(FIRST_READ_TIMEOUT)))?,
            buffers: Default::default(),
            first: Default::default(),
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// The first read's timeout per query.
    fn first_timeout(&self) -> Duration {
        self.bound.unwrap_or(self.timeout.max(FIRST_READ_TIMEOUT))
    }

    /// The timeout of a refresh whose slowest query took `slowest`: three
    /// times that where it is over the default, never over a given bound.
    fn refresh_timeout(&self, slowest: Duration) -> Duration {
        self.bound.unwrap_or(self.timeout.max(slowest * 3))
    }

    fn extra(&self) -> String {
        self.matchers.as_deref().map(|m| format!(",{m}")).unwrap_or_default()
    }

    /// The queries of one refresh (`full`: with the slow fields and the
    /// inventory). Each batch of names is reduced to the labels that name
    /// a series' node, GPU and MIG instance, or port (`max by`: a tenth of
    /// the answer's size); one query gives what needs a label more (the
    /// throttle reasons set, GPU errors, inactive links and the agent's
    /// link-down flag); `up`; with `full`, the inventory of the GPUs'
    /// descriptive labels (one series per GPU) and the agents' versions.
    pub fn queries(&self, full: bool) -> Vec<String> {
        let extra = self.extra();
        let batch = |names: Vec<&str>, by: &str| -> Vec<String> {
            names
                .chunks(NAMES_PER_QUERY)
                .map(|c| format!("max by (__name__,{by}) ({{__name__=~\"{}\"{extra}}})", c.join("|")))
                .collect()
        };
        let ports = format!("{HOST_LABELS},device,port,counter");
        let mut q = batch(dcgm::series_names(Pace::Fast, Group::Gpu).collect(), KEY_LABELS);
        q.extend(batch(dcgm::series_names(Pace::Fast, Group::Port).collect(), &ports));
        q.push(self.detail_query());
        q.push(format!("{{__name__=\"up\"{extra}}}"));
        if full {
            q.extend(batch(dcgm::series_names(Pace::Slow, Group::Gpu).collect(), KEY_LABELS));
            q.extend(batch(dcgm::series_names(Pace::Slow, Group::Port).collect(), &ports));
            q.push(format!(
                "max by ({KEY_LABELS},{DESC_LABELS}) ({{__name__=~\"{}\"{extra}}})",
                INVENTORY_NAMES.join("|")
            ));
            let m = self.matchers.as_deref().unwrap_or("");
            q.push(format!(
                "max by (__name__,{HOST_LABELS},version,backend,driver_version) (fleetop_agent_info{{{m}}})"
            ));
        }
        q
    }

    /// What needs a label more than the batches keep: the throttle reasons
    /// set, GPU errors, inactive links and the agent's link-down flag
    /// (few series: only what is set).
    fn detail_query(&self) -> String {
        let m = self.matchers.as_deref().unwrap_or("");
        let extra = self.extra();
        format!(
            "max by (__name__,{KEY_LABELS},reason) (fleetop_gpu_throttle_reason{{{m}}} == 1) \
             or max by (__name__,{KEY_LABELS},error) (fleetop_gpu_error{{{m}}}) \
             or max by (__name__,{KEY_LABELS},link) (fleetop_gpu_nvlink_state{{{m}}} == 0) \
             or max by (__name__,{KEY_LABELS},kind) (fleetop_flag{{kind=\"nvlink_down\"{extra}}})"
        )
    }

    /// The history of what the debounced flags read: `detail_query`, DCGM's
    /// throttle bitmask where set, every port's state (all ports, so their
    /// positions are those of the live reads), and the InfiniBand error
    /// counters above 0 (a rise between steps is `ib_errors`).
    fn state_query(&self) -> String {
        let extra = self.extra();
        format!(
            "{} or max by (__name__,{KEY_LABELS}) ({{__name__=~\"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS|DCGM_FI_DEV_CLOCKS_EVENT_REASONS\"{extra}}} > 0) \
             or max by (__name__,{HOST_LABELS},device,port) ({{__name__=\"node_infiniband_state_id\"{extra}}}) \
             or max by (__name__,{HOST_LABELS},device,port,counter) ({{__name__=~\"{}\"{extra}}} > 0)",
            self.detail_query(),
            dcgm::ib_error_names().collect::<Vec<_>>().join("|")
        )
    }

    /// One API call (`path` with its parameters): its body, or why not.
    async fn get(&self, path: &str, params: &[(&str, &str)], timeout: Duration) -> Result<scrape::Answer, String> {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.base), params)
            .map_err(|e| format!("bad URL: {e}"))?;
        let buf = self
            .buffers
            .lock()
            .map(|mut b| b.pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        scrape::get_into(
            &self.client,
            url.as_str(),
            "application/json",
            MAX_ANSWER_BYTES,
            timeout,
            buf,
        )
        .await
    }

    /// Takes back an answer's buffer for the next query: at most one per
    /// query in flight is kept, and none larger than `KEEP_BUFFER_BYTES`.
    fn recycle(&self, a: scrape::Answer) {
        let mut body = a.body;
        if body.capacity() > KEEP_BUFFER_BYTES {
            return;
        }
        body.clear();
        if let Ok(mut b) = self.buffers.lock()
            && b.len() < IN_FLIGHT
        {
            b.push(body);
        }
    }

    /// Reads an answer into `each`, series by series; its series count.
    fn parse<'a>(
        a: &'a scrape::Answer,
        want: &'static str,
        each: impl FnMut(&promjson::Series<'a>) -> Result<(), String>,
    ) -> Result<usize, String> {
        match promjson::read(&a.body, want, each) {
            Ok(n) => Ok(n),
            Err(promjson::AnswerError::NotJson(_)) if !a.status.is_success() => Err(format!("HTTP {}", a.status)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Reads the fleet: the queries of a refresh (everything when `kept`
    /// is due, else what moves, on top of what `kept` holds), two at a
    /// time, each answer mapped series by series into its node as it
    /// arrives. `timeout` bounds each query.
    ///
    /// A refresh is bounded as a whole, not only query by query: a given
    /// `--scrape-timeout` bounds the whole refresh (a cron job's promise);
    /// otherwise the whole may take `timeout` for each round of queries in
    /// flight. The deadline is checked between answers and while each is
    /// parsed. At most `MAX_REFRESH_BYTES` of answers and
    /// `MAX_REFRESH_SERIES` series are read across its queries, each bound
    /// applied as the answers are read.
    pub async fn read(&self, interval_ms: i64, kept: &mut Kept, timeout: Duration) -> Result<Fleet, String> {
        let full = kept.due();
        let queries = self.queries(full);
        let rounds = queries.len().div_ceil(IN_FLIGHT).max(1) as u32;
        let whole = self.bound.unwrap_or(timeout * rounds);
        let deadline = Instant::now() + whole;
        let over = || format!("no whole refresh within {} s", whole.as_secs_f64());
        let mut series_left = MAX_REFRESH_SERIES;
        let mut bytes_left = MAX_REFRESH_BYTES;
        let mut answers = futures_util::stream::iter(queries.into_iter().map(|q| async move {
            let started = Instant::now();
            let a = self.get("/api/v1/query", &[("query", q.as_str())], timeout).await;
            (a, started)
        }))
        .buffer_unordered(IN_FLIGHT);
        let mut accs: HashMap<String, NodeAcc> = HashMap::new();
        // A node's scrape targets, to read `up` by node (bounded: a few
        // per node).
        let mut instance_host: HashMap<String, String> = HashMap::new();
        // The scrape targets `up` says are down (only those: a store of
        // millions of targets that are up costs nothing here).
        let mut down_instances: HashSet<String> = HashSet::new();
        let mut entities = 0usize;
        let mut gpus = 0usize;
        let too_many = |what: String| format!("a refresh holds more than {what}: narrow it with --prometheus-match");
        let mut slowest = Duration::ZERO;
        loop {
            let next = tokio::time::timeout_at(deadline.into(), answers.next())
                .await
                .map_err(|_| over())?;
            let Some((a, started)) = next else { break };
            let a = a?;
            bytes_left = bytes_left.checked_sub(a.body.len()).ok_or_else(|| {
                format!(
                    "a refresh's answers hold more than {MAX_REFRESH_BYTES} bytes: narrow it with --prometheus-match"
                )
            })?;
            let n = Self::parse(&a, "vector", |s| {
                series_left = series_left.checked_sub(1).ok_or_else(|| {
                    format!("a refresh holds more than {MAX_REFRESH_SERIES} series: narrow it with --prometheus-match")
                })?;
                // A large answer parses for seconds: the deadline is
                // looked at as it goes.
                if series_left.is_multiple_of(4096) && Instant::now() > deadline {
                    return Err(over());
                }
                let l = s.labels();
                let name = s.name();
                let value = s
                    .value
                    .as_ref()
                    .and_then(|(_, v)| promjson::number(v))
                    .unwrap_or(f64::NAN);
                if name == "up" {
                    if value == 0.0
                        && let Some(i) = l.get("instance").filter(|i| i.len() <= dcgm::MAX_LABEL_BYTES)
                        && down_instances.len() < 4 * MAX_REFRESH_NODES
                    {
                        down_instances.insert(i.to_string());
                    }
                    return Ok(());
                }
                // A host name longer than any is no node's.
                let Some(host) = l.host().filter(|h| h.len() <= dcgm::MAX_LABEL_BYTES) else {
                    return Ok(());
                };
                if let Some(inst) = l.get("instance").filter(|i| i.len() <= dcgm::MAX_LABEL_BYTES)
                    && instance_host.len() < 4 * MAX_REFRESH_NODES
                    && !instance_host.contains_key(inst)
                {
                    instance_host.insert(inst.to_string(), host.to_string());
                }
                let acc = match accs.get_mut(host) {
                    Some(acc) => acc,
                    None => {
                        if accs.len() >= MAX_REFRESH_NODES {
                            return Err(too_many(format!("{MAX_REFRESH_NODES} nodes")));
                        }
                        // A fast read starts from what the slow read kept.
                        let acc = if full {
                            NodeAcc::default()
                        } else {
                            kept.nodes.get(host).cloned().unwrap_or_default()
                        };
                        entities += acc.entities();
                        gpus += acc.gpu_count();
                        accs.entry(host.to_string()).or_insert(acc)
                    }
                };
                let before = (acc.entities(), acc.gpu_count());
                acc.add(name, &l, value);
                entities += acc.entities().saturating_sub(before.0);
                gpus += acc.gpu_count().saturating_sub(before.1);
                if gpus > MAX_REFRESH_GPUS {
                    return Err(too_many(format!("{MAX_REFRESH_GPUS} GPUs")));
                }
                if entities > MAX_REFRESH_ENTITIES {
                    return Err(too_many(format!(
                        "{MAX_REFRESH_ENTITIES} GPUs, ports, MIG instances and pods"
                    )));
                }
                Ok(())
            })?;
            self.recycle(a);
            slowest = slowest.max(started.elapsed());
            // scripts/prom_scale.py reads these lines for the latency figures.
            tracing::debug!(
                "prometheus query answered in {} ms ({n} series)",
                started.elapsed().as_millis()
            );
        }
        if full {
            kept.nodes = accs
                .iter()
                .map(|(h, a)| {
                    let mut a = a.clone();
                    a.keep_slow();
                    (h.clone(), a)
                })
                .collect();
            kept.at = Some(Instant::now());
        }
        let mut fleet = Fleet {
            slowest,
            ..Fleet::default()
        };
        for inst in down_instances {
            if let Some(host) = instance_host.get(&inst) {
                fleet.down.insert(host.clone());
            }
        }
        let now = now_ms();
        for (host, acc) in accs {
            let m = acc.finish(&host, "prometheus", interval_ms, now);
            if !m.desc.gpus.is_empty() {
                fleet.nodes.insert(host, m);
            }
        }
        Ok(fleet)
    }
}

#[cfg(test)]
mod tests;
