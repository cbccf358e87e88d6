//! Alertmanager's v2 API: the firing alerts (and the ones just resolved) are
//! POSTed as one JSON array to `/api/v2/alerts` on every change and again
//! every `repost` while they fire, so Alertmanager never resolves them on
//! its own (`resolve_timeout`). A resolved alert carries `endsAt` and is
//! kept until one post got through. Alertmanager down: the set is kept and
//! posted again with backoff; nothing waits for it but this task.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;

use super::{Alert, Change, NotifyError, Tracker, backoff, http_client, parse_url, rfc3339};

/// Resolutions kept while Alertmanager is down; past this the oldest are
/// dropped (Alertmanager then resolves those itself after `resolve_timeout`,
/// since they are not posted again).
const MAX_RESOLVED: usize = 10_000;

/// Alerts per POST: a fleet-wide outage stays a few requests of sane size.
const CHUNK: usize = 1000;

/// One alert as `POST /api/v2/alerts` takes it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Posted<'a> {
    labels: &'a std::collections::BTreeMap<String, String>,
    annotations: &'a std::collections::BTreeMap<String, String>,
    starts_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ends_at: Option<String>,
}

/// The JSON body for `alerts`.
pub fn body(alerts: &[&Alert]) -> Vec<u8> {
    let posted: Vec<Posted> = alerts
        .iter()
        .map(|a| Posted {
            labels: &a.labels,
            annotations: &a.annotations,
            starts_at: rfc3339(a.starts_ms),
            ends_at: a.ends_ms.map(rfc3339),
        })
        .collect();
    serde_json::to_vec(&posted).unwrap_or_default()
}

#[derive(Debug, Default)]
struct Outbox {
    firing: Vec<Alert>,
    /// The firing set went out: take it afresh at the next update (between
    /// posts it is taken only when something changed, not every tick).
    stale: bool,
    /// Resolved alerts not yet delivered, numbered in order.
    resolved: VecDeque<(u64, Alert)>,
    next: u64,
}

struct Shared {
    outbox: Mutex<Outbox>,
    wake: Notify,
}

/// Posts alerts to one Alertmanager from a task of its own.
pub struct Alertmanager {
    shared: Arc<Shared>,
    client: reqwest::Client,
    url: reqwest::Url,
    task: tokio::task::JoinHandle<()>,
}

/// `base` with `/api/v2/alerts` added, unless it already ends so.
pub fn alerts_url(base: &str) -> Result<reqwest::Url, NotifyError> {
    let u = parse_url("--alertmanager", base)?;
    if u.path().trim_end_matches('/').ends_with("/api/v2/alerts") {
        return Ok(u);
    }
    let joined = format!("{}/api/v2/alerts", u.as_str().trim_end_matches('/'));
    parse_url("--alertmanager", &joined)
}

impl Alertmanager {
    /// Starts the posting task (on the current tokio runtime).
    pub fn start(base: &str, repost: Duration, timeout: Duration) -> Result<Alertmanager, NotifyError> {
        let url = alerts_url(base)?;
        let shared = Arc::new(Shared {
            outbox: Mutex::new(Outbox::default()),
            wake: Notify::new(),
        });
        let client = http_client(timeout)?;
        let task = tokio::spawn(run(shared.clone(), client.clone(), url.clone(), repost));
        Ok(Alertmanager {
            shared,
            client,
            url,
            task,
        })
    }

    /// Hands over the alerts firing now and what changed; posts at once
    /// when something did. Never waits on the network.
    pub fn update(&self, tracker: &Tracker, changes: &[Change]) {
        let Ok(mut out) = self.shared.outbox.lock() else { return };
        if out.stale || !changes.is_empty() {
            out.firing = tracker.firing().cloned().collect();
            out.stale = false;
        }
        for c in changes {
            match c {
                Change::Resolved(a) => {
                    let n = out.next;
                    out.next += 1;
                    out.resolved.push_back((n, a.clone()));
                    if out.resolved.len() > MAX_RESOLVED {
                        out.resolved.pop_front();
                    }
                }
                // Raised again before its resolution went out: the older
                // resolution would end the new alert too (same labels).
                Change::Raised(a) => out.resolved.retain(|(_, r)| r.labels != a.labels),
            }
        }
        drop(out);
        if !changes.is_empty() {
            self.shared.wake.notify_one();
        }
    }

    /// Takes the firing alerts again without news to send (posted with the
    /// next round).
    pub fn refresh(&self, tracker: &Tracker) {
        if let Ok(mut out) = self.shared.outbox.lock() {
            out.firing = tracker.firing().cloned().collect();
        }
    }

    /// One last post (at exit), so resolutions seen just before are not lost.
    pub async fn flush(&self) {
        if let Err(e) = post_once(&self.shared, &self.client, &self.url).await {
            tracing::warn!("alertmanager {}: last post failed: {e}", self.url);
        }
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why a post did not get through.
#[derive(Debug)]
enum PostError {
    /// Not reached, or not able to take it now (5xx, 408, 429): post again.
    Retry(String),
    /// Refused what was sent (another 4xx): posting it again would not help.
    Refused(String),
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostError::Retry(e) | PostError::Refused(e) => f.write_str(e),
        }
    }
}

/// Posts the firing alerts and pending resolutions; on success (or a
/// refusal) forgets the resolutions that went out.
async fn post_once(shared: &Shared, client: &reqwest::Client, url: &reqwest::Url) -> Result<(), PostError> {
    let (alerts, sent_upto) = {
        let mut out = shared.outbox.lock().map_err(|_| PostError::Retry("poisoned".into()))?;
        out.stale = true;
        let mut all: Vec<Alert> = out.firing.clone();
        all.extend(out.resolved.iter().map(|(_, a)| a.clone()));
        (all, out.resolved.back().map(|(n, _)| *n))
    };
    for chunk in alerts.chunks(CHUNK) {
        let refs: Vec<&Alert> = chunk.iter().collect();
        let resp = client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body(&refs))
            .send()
            .await
            .map_err(|e| PostError::Retry(fleetop_proto::input::error_line(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let why = format!("HTTP {status}: {}", fleetop_proto::input::printable(text.trim(), 200));
            let retry = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
            if retry {
                return Err(PostError::Retry(why));
            }
            forget_resolved(shared, sent_upto);
            return Err(PostError::Refused(why));
        }
    }
    forget_resolved(shared, sent_upto);
    Ok(())
}

fn forget_resolved(shared: &Shared, upto: Option<u64>) {
    if let (Some(upto), Ok(mut out)) = (upto, shared.outbox.lock()) {
        out.resolved.retain(|(n, _)| *n > upto);
    }
}

async fn run(shared: Arc<Shared>, client: reqwest::Client, url: reqwest::Url, repost: Duration) {
    let mut failures: u32 = 0;
    loop {
        if failures == 0 {
            tokio::select! {
                _ = shared.wake.notified() => {}
                _ = tokio::time::sleep(repost) => {}
            }
        } else {
            // Retrying: a change does not hurry it (the whole set goes anyway).
            tokio::time::sleep(backoff(failures - 1, repost.min(Duration::from_secs(30)))).await;
        }
        match post_once(&shared, &client, &url).await {
            Ok(()) => {
                if failures > 0 {
                    tracing::info!("alertmanager {url}: reachable again, alerts posted");
                }
                failures = 0;
            }
            Err(PostError::Refused(e)) => {
                // A bug or a proxy in the way, not an outage: say so loudly,
                // and wait for the next change or repost rather than hammer it.
                tracing::error!("alertmanager {url}: refused the alerts: {e}");
                failures = 0;
            }
            Err(PostError::Retry(e)) => {
                if failures == 0 {
                    let n = shared
                        .outbox
                        .lock()
                        .map(|o| o.firing.len() + o.resolved.len())
                        .unwrap_or(0);
                    tracing::warn!("alertmanager {url}: {e}; keeping {n} alerts to post again");
                }
                failures = failures.saturating_add(1);
            }
        }
    }
}
