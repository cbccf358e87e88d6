//! Notifications: the store's active flags become alerts, posted to
//! Alertmanager (`alertmanager`), to a generic webhook (`webhook`), and, in
//! the TUI, a terminal bell on a new crit flag (`bell`).
//!
//! The detectors already debounce (a flag is raised once a condition holds
//! and cleared once it has gone for a while), so an alert follows its flag's
//! identity (node, kind, GPU or port) and nothing else: evidence that moves
//! from sample to sample updates the annotations and never raises it again,
//! and a flag that flickers without clearing is sent once.

pub mod alertmanager;
pub mod bell;
pub mod webhook;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::config::NotifyConfig;
use crate::model::flag::{Flag, FlagKind, Severity, Subject};
use crate::store::{Link, NodeState, Store};

/// One alert, as Alertmanager (and the webhook body) carry it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// Who and what: alertname, node, gpu or ib_port, kind, severity, job,
    /// user, and the config's extra labels. Fixed for the alert's life.
    pub labels: BTreeMap<String, String>,
    /// What people read: summary (one line), evidence, description.
    pub annotations: BTreeMap<String, String>,
    /// When the flag's condition began (ms since the epoch).
    #[serde(skip)]
    pub starts_ms: i64,
    /// When it cleared; `None` while firing.
    #[serde(skip)]
    pub ends_ms: Option<i64>,
}

/// What changed since the last look: raised and resolved alerts.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Raised(Alert),
    Resolved(Alert),
}

/// Which flags notify and what they carry, from `[notify]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    kinds: Option<BTreeSet<FlagKind>>,
    min_severity: Severity,
    severity: BTreeMap<FlagKind, Severity>,
    labels: BTreeMap<String, String>,
    runbook_base: Option<String>,
}

impl Rules {
    pub fn new(cfg: &NotifyConfig) -> Rules {
        Rules {
            kinds: cfg.kinds.as_ref().map(|k| k.iter().copied().collect()),
            min_severity: cfg.min_severity,
            // Unknown kinds were refused when the config was read.
            severity: cfg
                .severity
                .iter()
                .filter_map(|(k, s)| FlagKind::from_name(k).map(|k| (k, *s)))
                .collect(),
            labels: cfg.labels.clone(),
            runbook_base: cfg.runbook_base.clone(),
        }
    }

    /// The runbook link for a flag kind.
    fn runbook(&self, kind: FlagKind) -> String {
        match &self.runbook_base {
            Some(base) => format!("{base}#{}", kind.name()),
            None => fleetop_catalog::runbook(kind.name()),
        }
    }

    /// The severity `flag` is sent at, or `None` when it does not notify.
    pub fn severity(&self, flag: &Flag) -> Option<Severity> {
        if self.kinds.as_ref().is_some_and(|k| !k.contains(&flag.kind)) {
            return None;
        }
        let sev = self.severity.get(&flag.kind).copied().unwrap_or(flag.severity);
        (sev >= self.min_severity).then_some(sev)
    }
}

impl Default for Rules {
    fn default() -> Self {
        Rules::new(&NotifyConfig::default())
    }
}

/// "FleetopXid", "FleetopGpuLost": Alertmanager's CamelCase convention.
pub fn alertname(kind: FlagKind) -> String {
    let mut out = String::from("Fleetop");
    for word in kind.name().split('_') {
        let mut c = word.chars();
        if let Some(first) = c.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(c);
        }
    }
    out
}

pub fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warn => "warn",
        Severity::Crit => "crit",
    }
}

/// The evidence as one line, "temp_c=89 sm_clock_mhz=1188".
fn evidence_line(flag: &Flag) -> String {
    flag.evidence
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The Slurm jobs (and their users, where the scheduler says) behind what a
/// flag is about: the processes on its GPU (those of when it last answered,
/// for a GPU that no longer does), or every job on the node.
fn jobs(node: &NodeState, subject: Subject) -> (Vec<u64>, Vec<String>) {
    let mut ids: BTreeSet<u64> = BTreeSet::new();
    match subject {
        Subject::Gpu(i) => ids.extend(node.gpu_jobs(i)),
        Subject::Node | Subject::IbPort(_) => {
            if let Some(v) = &node.scheduler {
                ids.extend(v.jobs.iter().map(|j| j.id));
            }
        }
    }
    let users: BTreeSet<String> = ids
        .iter()
        .filter_map(|id| node.job_user(*id).map(str::to_string))
        .collect();
    (ids.into_iter().collect(), users.into_iter().collect())
}

/// The alert for `flag` on `node` at `severity`.
pub fn alert(node: &NodeState, flag: &Flag, severity: Severity, rules: &Rules) -> Alert {
    let mut labels = rules.labels.clone();
    labels.insert("alertname".into(), alertname(flag.kind));
    labels.insert("node".into(), node.target.name.clone());
    labels.insert("kind".into(), flag.kind.name().into());
    labels.insert("severity".into(), severity_name(severity).into());
    labels.insert("action".into(), flag.action.name().into());
    let what = match flag.subject {
        Subject::Node => String::new(),
        Subject::Gpu(i) => {
            labels.insert("gpu".into(), i.to_string());
            format!(" GPU {i}")
        }
        Subject::IbPort(k) => {
            let name = node.ib_port_name(k);
            labels.insert("ib_port".into(), name.clone());
            format!(" {name}")
        }
    };
    let (ids, users) = jobs(node, flag.subject);
    if !ids.is_empty() {
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        labels.insert("job".into(), ids.join(","));
    }
    if !users.is_empty() {
        labels.insert("user".into(), users.join(","));
    }
    let detail = flag.words().replace(['\n', '\r'], " ");
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".into(),
        format!("{}{what}: {} ({})", node.target.name, flag.kind.name(), detail),
    );
    annotations.insert("description".into(), detail);
    annotations.insert("evidence".into(), evidence_line(flag));
    annotations.insert("action".into(), flag.action_detail().replace(['\n', '\r'], " "));
    annotations.insert("runbook_url".into(), rules.runbook(flag.kind));
    Alert {
        labels,
        annotations,
        starts_ms: flag.since_ms,
        ends_ms: None,
    }
}

/// What identifies a flag across samples.
type Key = (String, FlagKind, Subject);

/// The alerts firing now, kept from one look at the store to the next.
#[derive(Debug, Default)]
pub struct Tracker {
    rules: Rules,
    firing: BTreeMap<Key, Alert>,
    /// Alerts about fleetop itself (the remediation policy's drains and its
    /// breaker), by a key of their own: raised and resolved by who owns them.
    own: BTreeMap<String, Alert>,
}

/// A node whose history is still arriving: its flags are the past's, not
/// yet the present's, so its alerts are left as they were.
fn catching_up(n: &NodeState) -> bool {
    matches!(n.link, Link::Connected { .. }) && !n.caught_up
}

impl Tracker {
    pub fn new(rules: Rules) -> Tracker {
        Tracker {
            rules,
            firing: BTreeMap::new(),
            own: BTreeMap::new(),
        }
    }

    /// Alerts firing now.
    pub fn firing(&self) -> impl Iterator<Item = &Alert> {
        self.firing.values().chain(self.own.values())
    }

    /// Fires `alert` under `key`, or resolves what fires there (`None`);
    /// the same alert again changes nothing.
    pub fn set_own(&mut self, key: &str, alert: Option<Alert>, now_ms: i64) -> Vec<Change> {
        match (alert, self.own.get(key)) {
            (Some(a), Some(old)) if old.labels == a.labels => {
                self.own.insert(key.to_string(), a);
                Vec::new()
            }
            (Some(mut a), old) => {
                let mut changes = Vec::new();
                if let Some(mut gone) = old.cloned() {
                    gone.ends_ms = Some(now_ms);
                    changes.push(Change::Resolved(gone));
                }
                a.labels
                    .extend(self.rules.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                self.own.insert(key.to_string(), a.clone());
                changes.push(Change::Raised(a));
                changes
            }
            (None, Some(_)) => {
                let mut gone = self.own.remove(key).expect("present");
                gone.ends_ms = Some(now_ms);
                vec![Change::Resolved(gone)]
            }
            (None, None) => Vec::new(),
        }
    }

    /// Compares the store's active flags with the alerts firing: new flags
    /// are raised, flags gone are resolved (ended at `now_ms`), and a flag
    /// whose severity changed is resolved and raised again at the new one.
    pub fn observe(&mut self, store: &Store, now_ms: i64) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut seen: BTreeSet<Key> = BTreeSet::new();
        let mut keep_nodes: BTreeSet<&str> = BTreeSet::new();
        for node in &store.nodes {
            if catching_up(node) {
                keep_nodes.insert(&node.target.name);
                continue;
            }
            for flag in node.detector.active() {
                let Some(sev) = self.rules.severity(flag) else { continue };
                let key = (node.target.name.clone(), flag.kind, flag.subject);
                let fresh = alert(node, flag, sev, &self.rules);
                seen.insert(key.clone());
                match self.firing.get_mut(&key) {
                    Some(old) if old.labels.get("severity") == fresh.labels.get("severity") => {
                        // Same alert: only what people read moves.
                        old.annotations = fresh.annotations;
                    }
                    Some(old) => {
                        let mut gone = std::mem::replace(old, fresh.clone());
                        gone.ends_ms = Some(now_ms);
                        changes.push(Change::Resolved(gone));
                        changes.push(Change::Raised(fresh));
                    }
                    None => {
                        self.firing.insert(key, fresh.clone());
                        changes.push(Change::Raised(fresh));
                    }
                }
            }
        }
        let gone: Vec<Key> = self
            .firing
            .keys()
            .filter(|k| !seen.contains(*k) && !keep_nodes.contains(k.0.as_str()))
            .cloned()
            .collect();
        for key in gone {
            if let Some(mut a) = self.firing.remove(&key) {
                a.ends_ms = Some(now_ms);
                changes.push(Change::Resolved(a));
            }
        }
        changes
    }
}

/// The tracker and where its alerts go: what `fleetop watch` runs.
pub struct Notifier {
    tracker: Tracker,
    alertmanager: Option<alertmanager::Alertmanager>,
    webhook: Option<webhook::Webhook>,
}

impl Notifier {
    /// Starts a task per destination in `cfg` (on the current tokio runtime).
    pub fn start(cfg: &NotifyConfig) -> Result<Notifier, NotifyError> {
        let alertmanager = match &cfg.alertmanager {
            Some(url) => Some(alertmanager::Alertmanager::start(url, cfg.repost, cfg.timeout)?),
            None => None,
        };
        let webhook = match &cfg.webhook {
            Some(url) => Some(webhook::Webhook::start(url, cfg.webhook_queue, cfg.timeout)?),
            None => None,
        };
        Ok(Notifier {
            tracker: Tracker::new(Rules::new(cfg)),
            alertmanager,
            webhook,
        })
    }

    /// Looks at the store and hands what changed to the destinations; never
    /// waits on the network.
    pub fn observe(&mut self, store: &Store, now_ms: i64) -> Vec<Change> {
        let changes = self.tracker.observe(store, now_ms);
        self.hand_over(&changes);
        changes
    }

    fn hand_over(&self, changes: &[Change]) {
        for c in changes {
            let (what, a) = match c {
                Change::Raised(a) => ("raised", a),
                Change::Resolved(a) => ("resolved", a),
            };
            let summary = a.annotations.get("summary").map(String::as_str).unwrap_or("");
            tracing::info!("alert {what}: {summary}");
        }
        if let Some(am) = &self.alertmanager {
            am.update(&self.tracker, changes);
        }
        if let Some(w) = &self.webhook {
            w.send(changes);
        }
    }

    /// Fires or resolves one of fleetop's own alerts (see `Tracker::set_own`)
    /// and hands the change to the destinations. `announce` false: an alert
    /// an earlier run announced (a restart) fires again in Alertmanager
    /// (which keeps it as the same alert) but is not sent as news.
    pub fn set_own(&mut self, key: &str, alert: Option<Alert>, now_ms: i64, announce: bool) {
        let changes = self.tracker.set_own(key, alert, now_ms);
        if announce {
            self.hand_over(&changes);
        } else if let Some(am) = &self.alertmanager {
            am.refresh(&self.tracker);
        }
    }

    /// Webhook events dropped so far (the queue was full).
    pub fn webhook_dropped(&self) -> u64 {
        self.webhook.as_ref().map_or(0, |w| w.dropped())
    }

    /// One last post to Alertmanager, at exit.
    pub async fn flush(&self) {
        if let Some(am) = &self.alertmanager {
            am.flush().await;
        }
    }
}

/// RFC 3339 in UTC with milliseconds, as Alertmanager reads it.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Why a destination cannot be used: its URL, or no HTTP client.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("cannot make an HTTP client: {0}")]
    Client(String),
    #[error("{what}: '{url}' is not a URL: {error}")]
    Parse {
        what: &'static str,
        url: String,
        error: String,
    },
    #[error("{what}: '{url}' must be http:// or https://")]
    Scheme { what: &'static str, url: String },
}

/// Parses a notification URL (http or https only).
pub fn parse_url(what: &'static str, url: &str) -> Result<reqwest::Url, NotifyError> {
    let u = reqwest::Url::parse(url).map_err(|e| NotifyError::Parse {
        what,
        url: url.to_string(),
        error: e.to_string(),
    })?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(NotifyError::Scheme {
            what,
            url: url.to_string(),
        });
    }
    Ok(u)
}

/// The HTTP client of a destination: every request bounded by `timeout`.
fn http_client(timeout: std::time::Duration) -> Result<reqwest::Client, NotifyError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("fleetop/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| NotifyError::Client(fleetop_proto::input::error_line(&e)))
}

/// The delay before retry `n` (from 0): 1 s doubling, at most `max`.
pub fn backoff(n: u32, max: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_secs(1u64 << n.min(16)).min(max)
}

#[cfg(test)]
mod tests;
