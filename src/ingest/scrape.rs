//! `--dcgm-exporter HOSTS` and `--amd-exporter HOSTS`: one task per node
//! that reads its exporter's /metrics over HTTP every interval and sends
//! what it says as the same `Update`s an agent source sends (Info,
//! CaughtUp, Sample; Down with the reason when a read fails), so the store,
//! the flags, the TUI and the export need not know where a node's data
//! came from. The two exporters differ only in how their series map to
//! the domain (`Exporter::map`: `dcgm`, `amd_exporter`).
//!
//! Every read is bounded (a timeout for the whole answer, a size cap) and a
//! bad answer is one line of error for that node only: HTML where metrics
//! were expected, an HTTP error status, a cut-off or malformed text, a
//! server too slow to answer.

use std::time::Duration;

use fleetop_proto::input::error_line;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ingest::amd_exporter;
use crate::ingest::dcgm::{self, Xids};
use crate::ingest::promtext::{self, Limits, Sample};
use crate::model::sample::NodeDesc;
use crate::model::target::Target;
use crate::model::time::now_ms;
use crate::model::update::{Event, Update};

/// dcgm-exporter's port where a host gives none.
pub const DEFAULT_DCGM_EXPORTER_PORT: u16 = 9400;

/// AMD device-metrics-exporter's port where a host gives none (its
/// `ServerPort`'s default).
pub const DEFAULT_AMD_EXPORTER_PORT: u16 = 5000;

/// Which exporter the nodes run: what its series mean, its port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Exporter {
    /// NVIDIA's dcgm-exporter (or a fleetop agent's /metrics on NVIDIA).
    #[default]
    Dcgm,
    /// AMD's device-metrics-exporter (or a fleetop agent's on AMD).
    Amd,
}

impl Exporter {
    /// The flag that names it.
    pub fn flag(self) -> &'static str {
        match self {
            Exporter::Dcgm => "--dcgm-exporter",
            Exporter::Amd => "--amd-exporter",
        }
    }

    /// The port where a host gives none.
    pub fn default_port(self) -> u16 {
        match self {
            Exporter::Dcgm => DEFAULT_DCGM_EXPORTER_PORT,
            Exporter::Amd => DEFAULT_AMD_EXPORTER_PORT,
        }
    }

    /// The node's backend, as its description names it.
    pub fn backend(self) -> &'static str {
        match self {
            Exporter::Dcgm => "dcgm-exporter",
            Exporter::Amd => "amd-exporter",
        }
    }

    /// One node's parsed series in the domain's terms.
    pub fn map(self, series: &[Sample], name: &str, interval_ms: i64, now_ms: i64) -> dcgm::Mapped {
        match self {
            Exporter::Dcgm => dcgm::map_node(series, name, self.backend(), interval_ms, now_ms),
            Exporter::Amd => amd_exporter::map_node(series, name, interval_ms, now_ms),
        }
    }

    /// Why an answer with metrics but no GPU of this exporter is refused.
    fn no_gpus(self, samples: usize) -> String {
        match self {
            Exporter::Dcgm => {
                format!("no DCGM GPU series in the answer ({samples} samples): is this a dcgm-exporter?")
            }
            Exporter::Amd => {
                format!("no AMD GPU series in the answer ({samples} samples): is this AMD's device-metrics-exporter?")
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ScrapeOptions {
    /// Time between reads of one node.
    pub interval: Duration,
    /// The longest one read may take, connect to last byte.
    pub timeout: Duration,
    pub limits: Limits,
    /// Which exporter the nodes run.
    pub exporter: Exporter,
}

impl Default for ScrapeOptions {
    fn default() -> Self {
        ScrapeOptions {
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
            limits: Limits::default(),
            exporter: Exporter::Dcgm,
        }
    }
}

/// The one HTTP client of a session's scrapers and Prometheus reader.
pub fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("fleetop/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("HTTP client: {}", error_line(&e)))
}

/// An HTTP error in one line; a timeout says how long was waited.
pub fn http_error(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no complete answer within {} s (timed out)", timeout.as_secs_f64());
    }
    // reqwest's own words repeat the URL, which the node row already shows.
    let mut line = error_line(e);
    if let Some(url) = e.url() {
        line = line.replace(&format!(" for url ({url})"), "");
    }
    line
}

/// An HTTP answer, read whole (within the size cap).
pub struct Answer {
    pub status: reqwest::StatusCode,
    /// Lower-cased Content-Type, "" when none.
    pub content_type: String,
    pub body: Vec<u8>,
}

/// GETs `url` and reads its body, refusing an answer over `max_bytes`.
pub async fn get_capped(
    client: &reqwest::Client,
    url: &str,
    accept: &str,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Answer, String> {
    get_into(client, url, accept, max_bytes, timeout, Vec::new()).await
}

/// `get_capped` into `body` (cleared first): a caller reading many large
/// answers hands the same buffer back each time, so a 30 MB answer is not
/// grown by doubling (copies, fresh zeroed pages) on every read.
pub async fn get_into(
    client: &reqwest::Client,
    url: &str,
    accept: &str,
    max_bytes: usize,
    timeout: Duration,
    body: Vec<u8>,
) -> Result<Answer, String> {
    // reqwest's timeout covers the body too; this bound is the promise a
    // cron job relies on (an answer that trickles forever still ends), kept
    // whatever the client does.
    tokio::time::timeout(timeout, read_into(client, url, accept, max_bytes, timeout, body))
        .await
        .map_err(|_| format!("no complete answer within {} s (timed out)", timeout.as_secs_f64()))?
}

async fn read_into(
    client: &reqwest::Client,
    url: &str,
    accept: &str,
    max_bytes: usize,
    timeout: Duration,
    mut body: Vec<u8>,
) -> Result<Answer, String> {
    body.clear();
    let mut resp = client
        .get(url)
        .header(reqwest::header::ACCEPT, accept)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| http_error(&e, timeout))?;
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if resp.content_length().is_some_and(|n| n > max_bytes as u64) {
        return Err(format!("answer over the limit of {max_bytes} bytes"));
    }
    if let Some(n) = resp.content_length() {
        body.reserve(n as usize);
    }
    while let Some(chunk) = resp.chunk().await.map_err(|e| http_error(&e, timeout))? {
        let need = body.len() + chunk.len();
        if need > max_bytes {
            return Err(format!("answer over the limit of {max_bytes} bytes"));
        }
        if need > body.capacity() {
            // Doubled, but never past the limit: a buffer's capacity is
            // the memory it holds, and an answer of just over half the
            // limit must not hold twice it.
            let cap = need.max(body.capacity() * 2).min(max_bytes);
            body.reserve_exact(cap - body.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

/// Reads and maps one exporter answer.
async fn read_node(
    client: &reqwest::Client,
    url: &str,
    name: &str,
    opts: &ScrapeOptions,
) -> Result<dcgm::Mapped, String> {
    // Ask for the classic text format: an exporter that speaks OpenMetrics
    // too then answers in the one we parse.
    let body = get_capped(
        client,
        url,
        "text/plain;version=0.0.4",
        opts.limits.max_bytes,
        opts.timeout,
    )
    .await?;
    if !body.status.is_success() {
        return Err(format!("HTTP {}", body.status));
    }
    if body.content_type.starts_with("text/html") {
        return Err(format!(
            "answered HTML ({}), not metrics: is this the exporter's port?",
            body.content_type
        ));
    }
    let text = std::str::from_utf8(&body.body).map_err(|e| format!("answer is not UTF-8 text ({e})"))?;
    if text.trim_start().starts_with('<') {
        return Err("answered HTML, not metrics: is this the exporter's port?".into());
    }
    let exp = promtext::parse(text, &opts.limits).map_err(|e| format!("bad metrics text: {e}"))?;
    let m = opts
        .exporter
        .map(&exp.samples, name, opts.interval.as_millis() as i64, now_ms());
    if m.desc.gpus.is_empty() {
        return Err(opts.exporter.no_gpus(exp.samples.len()));
    }
    if m.skipped > 0 {
        tracing::debug!("{name}: {} GPU series without a GPU's label skipped", m.skipped);
    }
    if m.dropped_gpus + m.dropped_ports > 0 {
        warn_dropped_once(name, &m);
    }
    Ok(m)
}

/// One warning per node whose answer describes more GPUs or ports than a
/// node may have: the rest were dropped, and every refresh would say so again.
fn warn_dropped_once(name: &str, m: &dcgm::Mapped) {
    static WARNED: std::sync::Mutex<Option<std::collections::HashSet<String>>> = std::sync::Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if warned.get_or_insert_with(Default::default).insert(name.to_string()) {
        tracing::warn!(
            "{}: its answer describes more than {} GPUs or {} InfiniBand ports, as no node has: \
             the first kept, {} GPU series and {} port series past them dropped",
            fleetop_proto::input::printable(name, 200),
            dcgm::MAX_GPUS_PER_NODE,
            dcgm::MAX_PORTS_PER_NODE,
            m.dropped_gpus,
            m.dropped_ports
        );
    }
}

/// Starts one scraper per target; node `i` of the store is `targets[i]`.
pub fn spawn_all(
    targets: &[Target],
    opts: &ScrapeOptions,
    tx: mpsc::Sender<Update>,
) -> Result<Vec<JoinHandle<()>>, String> {
    let client = client(opts.timeout)?;
    Ok(targets
        .iter()
        .enumerate()
        .map(|(i, t)| tokio::spawn(run_node(i, t.clone(), *opts, client.clone(), tx.clone())))
        .collect())
}

/// The URL of a target's exporter.
pub fn metrics_url(t: &Target) -> String {
    format!("http://{}/metrics", t.address())
}

async fn run_node(node: usize, target: Target, opts: ScrapeOptions, client: reqwest::Client, tx: mpsc::Sender<Update>) {
    let url = metrics_url(&target);
    let mut described: Option<NodeDesc> = None;
    let mut xids = Xids::default();
    let mut seq = 0u64;
    let mut tick = tokio::time::interval(opts.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tx.closed() => return,
        }
        let mut events = Vec::with_capacity(3);
        match read_node(&client, &url, &target.name, &opts).await {
            Ok(mut m) => {
                // A description goes out first and again whenever it changes
                // (or after a failure), each followed by "caught up": a
                // scraper has no history to send.
                if described.as_ref() != Some(&m.desc) {
                    described = Some(m.desc.clone());
                    events.push(Event::Info(Box::new(m.desc)));
                    events.push(Event::CaughtUp);
                }
                seq += 1;
                m.sample.seq = seq;
                xids.dedup(&mut m.sample);
                events.push(Event::Sample(Box::new(m.sample)));
            }
            Err(e) => {
                tracing::debug!("{} ({url}): {e}", target.name);
                described = None;
                events.push(Event::Down(e));
            }
        }
        for event in events {
            if tx.send(Update::Node { node, event }).await.is_err() {
                return;
            }
        }
    }
}
