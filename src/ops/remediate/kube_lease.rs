//! The lease on Kubernetes: which of several `watch --kubernetes
//! --remediate drain` acts. A coordination.k8s.io/v1 Lease named
//! `fleetop-remediate` (in `[remediate] lease_namespace`, `fleetop`),
//! whose `holderIdentity` is "user@host pid N". Taken by a create (a 409
//! AlreadyExists: someone has it, read it); one run out (`renewTime` +
//! `leaseDurationSeconds` passed) or given back (no holder) is taken over
//! by a replace with the resourceVersion read, so of two watches one
//! wins and the other gets a 409 Conflict; renewed the same way before
//! it runs out; given back on a clean stop (the holder cleared). The
//! margins are the Slurm lease's, as parts of the duration: renewed once
//! less than two thirds are left, acted on only while more than a
//! quarter is left (60 s: 40 s and 15 s).

use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use kube::api::{Api, PostParams};

use crate::ingest::kube::Kube;
use crate::model::remediation::{Holder, Lease};
use crate::model::time::rfc3339;

use super::{LeaseNow, Loud, SaidOnce};

/// The Lease's name.
pub const LEASE_NAME: &str = "fleetop-remediate";

/// The lease of one watch on Kubernetes: takes it when free, renews it,
/// gives it back.
#[derive(Debug, Clone)]
pub struct KubeLeaseKeeper {
    pub me: Holder,
    namespace: String,
    ttl_ms: i64,
    /// The Lease's resourceVersion as this watch last wrote it, while it
    /// holds it.
    version: Option<String>,
    /// Until when it holds, as last written.
    until_ms: i64,
    /// Console time of the last look.
    pub checked_ms: Option<i64>,
    said: SaidOnce,
}

/// What the Lease says: its holder (None: free), until when, its version.
struct Read {
    holder: Option<String>,
    until_ms: i64,
    version: String,
}

/// "alice@head1 pid 4242 (Lease default/fleetop-remediate, until ...)".
pub fn kube_lease_words(l: &Lease, namespace: &str) -> String {
    format!(
        "{} (Lease {namespace}/{LEASE_NAME}, until {})",
        l.holder.words(),
        rfc3339(l.until_ms)
    )
}

fn read(l: &KubeLease, now_ms: i64) -> Read {
    let v = serde_json::to_value(l).unwrap_or_default();
    let spec = &v["spec"];
    let time = |k: &str| {
        spec[k]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis())
    };
    let renewed = time("renewTime").or_else(|| time("acquireTime")).unwrap_or(now_ms);
    let secs = spec["leaseDurationSeconds"].as_i64().unwrap_or(0);
    Read {
        holder: spec["holderIdentity"]
            .as_str()
            .filter(|h| !h.trim().is_empty())
            .map(|h| fleetop_proto::input::printable(h, 200)),
        until_ms: renewed + secs * 1000,
        version: l.metadata.resource_version.clone().unwrap_or_default(),
    }
}

/// The holder named by a Lease (someone else's tool may write other words).
fn holder_of(words: &str) -> Holder {
    Holder::parse(words).unwrap_or_else(|| Holder {
        user: words.to_string(),
        host: "?".into(),
        pid: 0,
    })
}

impl KubeLeaseKeeper {
    pub fn new(me: Holder, namespace: &str, ttl: std::time::Duration) -> KubeLeaseKeeper {
        KubeLeaseKeeper {
            me,
            namespace: namespace.to_string(),
            ttl_ms: ttl.as_millis() as i64,
            version: None,
            until_ms: 0,
            checked_ms: None,
            said: SaidOnce::default(),
        }
    }

    /// How often a watch looks at the lease: every 5 s, or a quarter of
    /// a shorter lease.
    pub fn check_every_ms(&self) -> i64 {
        super::LEASE_CHECK_MS.min(self.ttl_ms / 4)
    }

    /// Whether this watch may act now: it holds the lease, with more than
    /// a quarter of it left.
    pub fn may_act(&self, now_ms: i64) -> bool {
        self.version.is_some() && now_ms < self.until_ms - self.ttl_ms / 4
    }

    fn body(&self, holder: Option<&str>, now_ms: i64, acquired_ms: i64, version: Option<&str>) -> KubeLease {
        let mut v = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE_NAME, "namespace": self.namespace},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": self.ttl_ms / 1000,
                "acquireTime": micro(acquired_ms),
                "renewTime": micro(now_ms),
            },
        });
        if let Some(rv) = version {
            v["metadata"]["resourceVersion"] = serde_json::json!(rv);
        }
        if holder.is_none() {
            v["spec"]["holderIdentity"] = serde_json::Value::Null;
        }
        serde_json::from_value(v).expect("a Lease")
    }

    fn api(&self, kube: &Kube) -> Api<KubeLease> {
        Api::namespaced(kube.client.clone(), &self.namespace)
    }

    fn unknown(&mut self, why: String) -> LeaseNow {
        self.version = None;
        let w = why.clone();
        self.said.say(
            format!("unknown {why}"),
            || format!("{w}; nothing is quarantined"),
            Loud::Warn,
        );
        LeaseNow::Unknown(why)
    }

    fn mine(&mut self, version: String, until_ms: i64) -> LeaseNow {
        self.version = Some(version);
        self.until_ms = until_ms;
        let (me, ns) = (self.me.words(), self.namespace.clone());
        self.said.say(
            "mine".into(),
            || format!("this watch ({me}) holds the lease (Lease {ns}/{LEASE_NAME}): it acts"),
            Loud::Info,
        );
        LeaseNow::Mine
    }

    fn held(&mut self, holder: &str, until_ms: i64) -> LeaseNow {
        if self.version.take().is_some() {
            self.said.say(
                format!("lost {holder}"),
                || format!("the lease was taken by {holder}: this watch stops acting"),
                Loud::Warn,
            );
        }
        let l = Lease {
            id: 0,
            holder: holder_of(holder),
            until_ms,
        };
        let words = kube_lease_words(&l, &self.namespace);
        self.said.say(
            format!("held {holder}"),
            || {
                format!(
                    "the policy acts in another watch: {words}; this one quarantines nothing, and takes over if that one stops"
                )
            },
            Loud::Warn,
        );
        LeaseNow::Held(l)
    }

    /// Writes the Lease as this watch's (a replace with `version`, or a
    /// create without): `Ok(None)` when another watch wrote it first.
    async fn write(
        &mut self,
        kube: &Kube,
        version: Option<&str>,
        acquired_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Read>, String> {
        let me = self.me.words();
        let body = self.body(Some(&me), now_ms, acquired_ms, version);
        let api = self.api(kube);
        let pp = PostParams::default();
        let (sent, verb) = match version {
            Some(_) => (kube.bounded(api.replace(LEASE_NAME, &pp, &body)).await, "update"),
            None => (kube.bounded(api.create(&pp, &body)).await, "create"),
        };
        match sent {
            Ok(l) => Ok(Some(read(&l, now_ms))),
            // AlreadyExists (a create) or Conflict (a replace): another
            // watch wrote it since it was read.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(kube.explain(&e, verb, "leases")),
        }
    }

    /// Looks at the lease: keeps it (renewed when due), takes it when it
    /// is free or run out, or names who holds it. Says each change once.
    pub async fn check(&mut self, kube: &Kube, now_ms: i64) -> LeaseNow {
        self.checked_ms = Some(now_ms);
        let me = self.me.words();
        for _ in 0..3 {
            let got = match kube.bounded(self.api(kube).get_opt(LEASE_NAME)).await {
                Ok(l) => l,
                Err(e) => {
                    let why = format!("the lease cannot be read: {}", kube.explain(&e, "get", "leases"));
                    return self.unknown(why);
                }
            };
            let Some(l) = got else {
                match self.write(kube, None, now_ms, now_ms).await {
                    Ok(Some(r)) => return self.mine(r.version, r.until_ms),
                    Ok(None) => continue,
                    Err(e) => return self.unknown(format!("the lease cannot be taken: {e}")),
                }
            };
            let r = read(&l, now_ms);
            let acquired = serde_json::to_value(&l).ok().and_then(|v| {
                v["spec"]["acquireTime"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.timestamp_millis())
            });
            match r.holder.as_deref() {
                // This watch's own words: its host and pid.
                Some(h) if h == me => {
                    if r.until_ms - now_ms >= self.ttl_ms * 2 / 3 {
                        return self.mine(r.version, r.until_ms);
                    }
                    match self
                        .write(kube, Some(&r.version), acquired.unwrap_or(now_ms), now_ms)
                        .await
                    {
                        Ok(Some(w)) => return self.mine(w.version, w.until_ms),
                        Ok(None) => continue,
                        Err(e) => {
                            tracing::error!(
                                "remediate: the lease not renewed: {e}; it holds until {}",
                                rfc3339(r.until_ms)
                            );
                            return self.mine(r.version, r.until_ms);
                        }
                    }
                }
                Some(h) if r.until_ms > now_ms => {
                    let h = h.to_string();
                    return self.held(&h, r.until_ms);
                }
                prev => {
                    if let Some(h) = prev {
                        let (h, at) = (h.to_string(), rfc3339(r.until_ms));
                        tracing::warn!("remediate: taking over the lease of {h}: it ran out at {at}");
                    }
                    match self.write(kube, Some(&r.version), now_ms, now_ms).await {
                        Ok(Some(w)) => return self.mine(w.version, w.until_ms),
                        Ok(None) => continue,
                        Err(e) => return self.unknown(format!("the lease cannot be taken: {e}")),
                    }
                }
            }
        }
        self.unknown("the lease changed under every try (409 Conflict)".into())
    }

    /// Gives the lease back (a clean stop): the holder cleared, only if
    /// the Lease is still as this watch wrote it.
    pub async fn release(&mut self, kube: &Kube) {
        let Some(version) = self.version.take() else {
            return;
        };
        let now = crate::model::time::now_ms();
        let body = self.body(None, now, now, Some(&version));
        match kube
            .bounded(self.api(kube).replace(LEASE_NAME, &PostParams::default(), &body))
            .await
        {
            Ok(_) => tracing::info!("remediate: the lease ({}/{LEASE_NAME}) given back", self.namespace),
            Err(e) => tracing::error!(
                "remediate: the lease not given back: {}; it runs out at {}",
                kube.explain(&e, "update", "leases"),
                rfc3339(self.until_ms)
            ),
        }
    }
}

/// A MicroTime as the API server writes it: RFC 3339 with microseconds.
fn micro(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The lease as `remediate status` shows it: who holds it and until when,
/// or free.
pub async fn kube_lease_status(kube: &Kube, namespace: &str, now_ms: i64) -> Result<Option<Lease>, String> {
    let api: Api<KubeLease> = Api::namespaced(kube.client.clone(), namespace);
    let got = kube
        .bounded(api.get_opt(LEASE_NAME))
        .await
        .map_err(|e| kube.explain(&e, "get", "leases"))?;
    Ok(got.map(|l| read(&l, now_ms)).and_then(|r| {
        let h = r.holder.filter(|_| r.until_ms > now_ms)?;
        Some(Lease {
            id: 0,
            holder: holder_of(&h),
            until_ms: r.until_ms,
        })
    }))
}
