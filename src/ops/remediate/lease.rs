//! The lease: which of two watches in drain mode acts (see the module above).

use std::path::Path;

use crate::ingest::slurm::{SchedError, Slurm};
use crate::model::remediation::{Holder, Lease, lease_holder, lease_text, parse_lease};
use crate::model::time::rfc3339;
use crate::ops::audit;

use super::{Loud, SaidOnce};

/// The lease's Slurm job name.
pub const LEASE_JOB: &str = "fleetop-remediate-lease";
/// How long a lease holds without renewal: a watch that stopped renewing
/// (killed, hung, cut off) is taken over this long after its last renewal.
pub const LEASE_TTL_MS: i64 = 60_000;
/// A lease is renewed once less than this is left.
const LEASE_RENEW_MS: i64 = 40_000;
/// Its holder acts only while more than this is left: a clock a little
/// off, or a renewal that failed, never gives two watches the lease.
const LEASE_MARGIN_MS: i64 = 15_000;
/// How often a watch looks at the lease between drains.
pub const LEASE_CHECK_MS: i64 = 5_000;

/// Where a watch stands with the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseNow {
    /// This watch holds it: it acts.
    Mine,
    /// Another watch holds it: this one waits.
    Held(Lease),
    /// Slurm could not be asked, or the lease could not be taken: nobody
    /// here acts until it can.
    Unknown(String),
}

/// The lease of one watch: takes it when free, renews it, gives it back.
/// Its methods run Slurm's clients (each with the reader's timeout): call
/// them off the async runtime.
#[derive(Debug, Clone)]
pub struct LeaseKeeper {
    pub me: Holder,
    /// The job of this watch's lease, while it has one.
    job: Option<u64>,
    /// Until when the lease holds, as last written.
    until_ms: i64,
    /// Console time of the last look.
    pub checked_ms: Option<i64>,
    /// What was last said about the lease, so each change is said once.
    said: SaidOnce,
}

impl Default for LeaseKeeper {
    fn default() -> Self {
        LeaseKeeper::new()
    }
}

/// This machine's host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// The field and record separators of the lease listing (as the node
/// listing's: never in a job id or user; the comment comes last).
const SEP: char = '\u{1f}';
const END: char = '\u{1e}';

/// The leases Slurm lists: its held jobs named `LEASE_JOB`, each as its
/// comment says, the holder's user being the job's owner as Slurm knows
/// it. Jobs with another comment are not leases.
pub fn list_leases(slurm: &Slurm) -> Result<Vec<Lease>, SchedError> {
    let fmt = format!("%i{SEP}%u{SEP}%k{END}");
    let args: Vec<String> = ["-h", "--name", LEASE_JOB, "-t", "PENDING", "-o", &fmt]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = slurm.run("squeue", &args)?;
    Ok(parse_lease_list(&out))
}

pub(super) fn parse_lease_list(out: &str) -> Vec<Lease> {
    let mut leases: Vec<Lease> = out
        .split(END)
        .filter_map(|r| {
            let mut f = r.trim_start_matches('\n').splitn(3, SEP);
            let id = f.next()?.trim().parse::<u64>().ok()?;
            let user = f.next()?.trim().to_string();
            let mut l = parse_lease(id, f.next()?.trim())?;
            if !user.is_empty() {
                l.holder.user = fleetop_proto::input::printable(&user, 64);
            }
            l.holder.host = fleetop_proto::input::printable(&l.holder.host, 128);
            Some(l)
        })
        .collect();
    leases.sort_by_key(|l| l.id);
    leases
}

/// "alice@head1 pid 4242 (Slurm job 57, until 2026-...Z)".
pub fn lease_words(l: &Lease) -> String {
    format!(
        "{} (Slurm job {} `{LEASE_JOB}`, until {})",
        l.holder.words(),
        l.id,
        rfc3339(l.until_ms)
    )
}

impl LeaseKeeper {
    pub fn new() -> LeaseKeeper {
        let a = audit::actor();
        LeaseKeeper {
            me: Holder {
                user: a.name.unwrap_or_else(|| a.uid.to_string()),
                host: host_name(),
                pid: std::process::id(),
            },
            job: None,
            until_ms: 0,
            checked_ms: None,
            said: SaidOnce::default(),
        }
    }

    /// Whether this watch may act now: it holds the lease, with time left.
    pub fn may_act(&self, now_ms: i64) -> bool {
        self.job.is_some() && now_ms < self.until_ms - LEASE_MARGIN_MS
    }

    /// A lease of this host whose process is gone: its holder stopped
    /// without giving it back (killed); it need not run out.
    fn dead(&self, l: &Lease) -> bool {
        Some(l.id) != self.job
            && l.holder.host == self.me.host
            && l.holder.pid != self.me.pid
            && !Path::new(&format!("/proc/{}", l.holder.pid)).exists()
    }

    fn cancel(&self, slurm: &Slurm, id: u64) -> Result<String, SchedError> {
        slurm.run("scancel", &[id.to_string()])
    }

    fn submit(&mut self, slurm: &Slurm, now_ms: i64) -> Result<u64, SchedError> {
        let until = now_ms + LEASE_TTL_MS;
        let args = [
            "--parsable".to_string(),
            "--hold".into(),
            format!("--job-name={LEASE_JOB}"),
            format!("--comment={}", lease_text(&self.me, until)),
            "--output=/dev/null".into(),
            "--error=/dev/null".into(),
            "--chdir=/".into(),
            "--time=1".into(),
            "--nodes=1".into(),
            "--wrap=true".into(),
        ];
        let out = slurm.run("sbatch", &args)?;
        let id = out
            .trim()
            .split(';')
            .next()
            .and_then(|i| i.trim().parse::<u64>().ok())
            .ok_or_else(|| SchedError::Parse("sbatch".into(), format!("no job id in {:?}", out.trim())))?;
        self.job = Some(id);
        self.until_ms = until;
        Ok(id)
    }

    fn renew(&mut self, slurm: &Slurm, id: u64, now_ms: i64) {
        let until = now_ms + LEASE_TTL_MS;
        let args = [
            "update".to_string(),
            format!("JobId={id}"),
            format!("Comment={}", lease_text(&self.me, until)),
        ];
        match slurm.run("scontrol", &args) {
            Ok(_) => self.until_ms = until,
            Err(e) => tracing::error!(
                "remediate: the lease (Slurm job {id}) not renewed: {e}; it holds until {}",
                rfc3339(self.until_ms)
            ),
        }
    }

    /// Looks at the lease: keeps it (renewed when due), takes it when it
    /// is free (the lowest live job id wins a race; a lease run out, or
    /// of a process gone from this host, is cancelled and taken over),
    /// or names who holds it. Says each change once.
    pub fn check(&mut self, slurm: &Slurm, now_ms: i64) -> LeaseNow {
        self.checked_ms = Some(now_ms);
        let leases = match list_leases(slurm) {
            Ok(l) => l,
            Err(e) => return self.unknown(format!("the lease cannot be read: {e}")),
        };
        if let Some(id) = self.job
            && !leases.iter().any(|l| l.id == id)
        {
            self.job = None;
            self.said.say(
                format!("lost {id}"),
                || format!("the lease (Slurm job {id}) is gone (cancelled in Slurm): this watch stops acting"),
                Loud::Warn,
            );
        }
        let holder = lease_holder(&leases, now_ms, |l| self.dead(l)).cloned();
        match holder {
            Some(l) if Some(l.id) == self.job => {
                if self.until_ms - now_ms < LEASE_RENEW_MS {
                    self.renew(slurm, l.id, now_ms);
                }
                self.mine(l.id)
            }
            Some(l) => {
                if let Some(mine) = self.job.take() {
                    let _ = self.cancel(slurm, mine);
                }
                self.held(l)
            }
            None => {
                // Free: whatever is listed ran out, or its process is gone.
                for l in &leases {
                    if Some(l.id) != self.job {
                        let why = if l.until_ms <= now_ms {
                            format!("it ran out at {}", rfc3339(l.until_ms))
                        } else {
                            "its process is gone from this host".into()
                        };
                        tracing::warn!("remediate: taking over the lease of {}: {why}", lease_words(l));
                    }
                    let _ = self.cancel(slurm, l.id);
                }
                self.job = None;
                if let Err(e) = self.submit(slurm, now_ms) {
                    return self.unknown(format!("the lease cannot be taken (sbatch --hold): {e}"));
                }
                // Another watch may have taken it at the same time: the
                // lowest job id wins.
                let again = match list_leases(slurm) {
                    Ok(l) => l,
                    Err(e) => return self.unknown(format!("the lease cannot be read: {e}")),
                };
                match lease_holder(&again, now_ms, |l| self.dead(l)).cloned() {
                    Some(l) if Some(l.id) == self.job => self.mine(l.id),
                    Some(l) => {
                        if let Some(mine) = self.job.take() {
                            let _ = self.cancel(slurm, mine);
                        }
                        self.held(l)
                    }
                    None => self.unknown("the lease just taken is not listed".into()),
                }
            }
        }
    }

    fn mine(&mut self, id: u64) -> LeaseNow {
        let me = self.me.words();
        self.said.say(
            format!("mine {id}"),
            || format!("this watch ({me}) holds the lease (Slurm job {id} `{LEASE_JOB}`): it acts"),
            Loud::Info,
        );
        LeaseNow::Mine
    }

    fn held(&mut self, l: Lease) -> LeaseNow {
        self.said.say(
            format!("held {} {}", l.id, l.holder.words()),
            || {
                format!(
                    "the policy acts in another watch: {}; this one drains nothing, and takes over if that one stops",
                    lease_words(&l)
                )
            },
            Loud::Warn,
        );
        LeaseNow::Held(l)
    }

    fn unknown(&mut self, why: String) -> LeaseNow {
        let w = why.clone();
        self.said.say(
            format!("unknown {why}"),
            || format!("{w}; nothing is drained"),
            Loud::Warn,
        );
        LeaseNow::Unknown(why)
    }

    /// Gives the lease back (a clean stop).
    pub fn release(&mut self, slurm: &Slurm) {
        if let Some(id) = self.job.take() {
            match self.cancel(slurm, id) {
                Ok(_) => tracing::info!("remediate: the lease (Slurm job {id}) given back"),
                Err(e) => tracing::error!(
                    "remediate: the lease (Slurm job {id}) not given back: {e}; it runs out at {}",
                    rfc3339(self.until_ms)
                ),
            }
        }
    }
}
