//! A generic webhook: one POST per raised or resolved alert, JSON (the body
//! is documented in docs/NOTIFY.md), in order, retried with backoff while
//! the receiver fails. Events wait in a bounded queue; when it is full the
//! oldest is dropped and counted, and every body carries the count so the
//! receiver knows what it missed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;

use super::{Alert, Change, NotifyError, backoff, http_client, parse_url, rfc3339};

/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Events waiting to be sent, oldest first, numbered in order.
#[derive(Debug)]
pub struct Queue {
    cap: usize,
    items: VecDeque<(u64, Change)>,
    next: u64,
    dropped: u64,
}

impl Queue {
    pub fn new(cap: usize) -> Queue {
        Queue {
            cap: cap.max(1),
            items: VecDeque::new(),
            next: 0,
            dropped: 0,
        }
    }

    /// Adds an event; when full, drops the oldest first and returns true.
    pub fn push(&mut self, c: Change) -> bool {
        let full = self.items.len() >= self.cap;
        if full {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back((self.next, c));
        self.next += 1;
        full
    }

    /// The oldest event and its number.
    pub fn front(&self) -> Option<&(u64, Change)> {
        self.items.front()
    }

    /// Removes event `n` if it is still the oldest (it may have been
    /// dropped while it was being sent).
    pub fn done(&mut self, n: u64) {
        if self.items.front().is_some_and(|(m, _)| *m == n) {
            self.items.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// The webhook's JSON body (docs/NOTIFY.md).
#[derive(Debug, Serialize)]
pub struct Body<'a> {
    /// The body's version: 1.
    pub version: u32,
    /// "raised" or "resolved".
    pub event: &'static str,
    /// When this was sent (RFC 3339).
    pub sent_at: String,
    /// Events dropped since this fleetop started, because the queue was full.
    pub dropped_total: u64,
    pub alert: BodyAlert<'a>,
}

#[derive(Debug, Serialize)]
pub struct BodyAlert<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub starts_at: String,
    /// Present once resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
}

pub fn body(c: &Change, dropped_total: u64, now_ms: i64) -> Vec<u8> {
    let (event, a): (&'static str, &Alert) = match c {
        Change::Raised(a) => ("raised", a),
        Change::Resolved(a) => ("resolved", a),
    };
    let b = Body {
        version: 1,
        event,
        sent_at: rfc3339(now_ms),
        dropped_total,
        alert: BodyAlert {
            labels: &a.labels,
            annotations: &a.annotations,
            starts_at: rfc3339(a.starts_ms),
            ends_at: a.ends_ms.map(rfc3339),
        },
    };
    serde_json::to_vec(&b).unwrap_or_default()
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Notify,
    dropped: AtomicU64,
}

/// Sends events to one webhook from a task of its own.
pub struct Webhook {
    shared: Arc<Shared>,
    url: reqwest::Url,
    task: tokio::task::JoinHandle<()>,
}

impl Webhook {
    /// Starts the sending task (on the current tokio runtime).
    pub fn start(url: &str, queue: usize, timeout: Duration) -> Result<Webhook, NotifyError> {
        let url = parse_url("--webhook", url)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::new(queue)),
            wake: Notify::new(),
            dropped: AtomicU64::new(0),
        });
        let client = http_client(timeout)?;
        let task = tokio::spawn(run(shared.clone(), client, url.clone()));
        Ok(Webhook { shared, url, task })
    }

    /// Queues the changes; never waits on the network.
    pub fn send(&self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        let Ok(mut q) = self.shared.queue.lock() else { return };
        for c in changes {
            if q.push(c.clone()) {
                let total = q.dropped();
                self.shared.dropped.store(total, Ordering::Relaxed);
                // The first drop of an outage and then every hundredth.
                if total == 1 || total.is_multiple_of(100) {
                    tracing::warn!(
                        "webhook {}: queue full ({} events): dropped the oldest ({total} dropped so far)",
                        self.url,
                        q.len()
                    );
                }
            }
        }
        drop(q);
        self.shared.wake.notify_one();
    }

    /// Events dropped so far because the receiver could not keep up.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Events waiting to be sent.
    pub fn pending(&self) -> usize {
        self.shared.queue.lock().map(|q| q.len()).unwrap_or(0)
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn post(client: &reqwest::Client, url: &reqwest::Url, body: Vec<u8>) -> Result<(), String> {
    let resp = client
        .post(url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| fleetop_proto::input::error_line(&e))?;
    let status = resp.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

async fn run(shared: Arc<Shared>, client: reqwest::Client, url: reqwest::Url) {
    let mut failures: u32 = 0;
    loop {
        let next = shared.queue.lock().ok().and_then(|q| {
            let dropped = q.dropped();
            q.front()
                .map(|(n, c)| (*n, body(c, dropped, crate::model::time::now_ms())))
        });
        let Some((n, bytes)) = next else {
            shared.wake.notified().await;
            continue;
        };
        match post(&client, &url, bytes).await {
            Ok(()) => {
                if failures > 0 {
                    tracing::info!("webhook {url}: reachable again");
                }
                failures = 0;
                if let Ok(mut q) = shared.queue.lock() {
                    q.done(n);
                }
            }
            Err(e) => {
                if failures == 0 {
                    tracing::warn!("webhook {url}: {e}; retrying with backoff");
                }
                tokio::time::sleep(backoff(failures, MAX_BACKOFF)).await;
                failures = failures.saturating_add(1);
            }
        }
    }
}
