//! `fleetop watch`: the headless notifier. Follows SOURCE like the TUI does
//! and hands its flags to Alertmanager and/or a webhook until SIGTERM,
//! SIGINT or SIGHUP; logs go to stderr (the journal, under systemd). With
//! `--remediate` (or `[remediate]`) it also runs the remediation policy;
//! `fleetop remediate status|reset` look at and re-arm it.

use std::time::Duration;

use std::collections::BTreeSet;

use crate::cli::{RemediateCmd, RemediateVerb, WatchArgs};
use crate::config::{Config, RemediateMode};
use crate::ingest::targets;
use crate::model::action::NodeAction;
use crate::model::action::Scheduler;
use crate::model::time::{now_ms, rfc3339};
use crate::ops::notify::Notifier;
use crate::ops::remediate::{self, Decision, KubeLeaseKeeper, LeaseKeeper, LeaseNow, Policy, State};
use crate::ops::slurm;
use crate::session::Session;

use super::watch_kube;

/// `read_only`: the flag or the config's `read_only`, either of which
/// refuses a draining policy.
pub async fn run(args: WatchArgs, mut cfg: Config, read_only: bool) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    super::apply_notify_flags(&args.notify, &mut cfg.notify);
    let pager = cfg.notify.alertmanager.is_some() || cfg.notify.webhook.is_some();
    let policy_cfg = match (args.remediate, cfg.remediate.clone()) {
        (None, None) => None,
        (mode, c) => {
            let mut c = c.unwrap_or_default();
            if let Some(m) = mode {
                c.mode = m;
            }
            Some(c)
        }
    };
    // A watch that sends nothing and decides nothing would only burn CPU;
    // a policy alone (a dry-run to read its log first) needs no pager.
    if !pager && policy_cfg.is_none() {
        anyhow::bail!(
            "watch: nowhere to send alerts: give --alertmanager URL or --webhook URL (or [notify] in the config), or --remediate"
        );
    }
    let on_kube = args.source.kube.kubernetes;
    if let Some(c) = &policy_cfg {
        if on_kube && args.source.slurm {
            anyhow::bail!(
                "watch --remediate: the policy acts on one scheduler: give --slurm or --kubernetes, not both"
            );
        }
        if !on_kube && !args.source.slurm {
            anyhow::bail!(
                "watch --remediate: the policy drains nodes in Slurm (--slurm) or quarantines them in Kubernetes (--kubernetes): add one"
            );
        }
        if c.mode == RemediateMode::Drain && read_only {
            anyhow::bail!("watch --remediate drain: refused in read-only mode");
        }
    }
    if !pager {
        tracing::warn!("watch: no --alertmanager or --webhook: alerts are not sent; the policy's decisions are logged");
    }
    let state_path = remediate::path();
    // A policy that cannot read what it did must not act: refused at start.
    let mut policy = match policy_cfg {
        Some(c) => {
            let on = if on_kube {
                Scheduler::Kubernetes
            } else {
                Scheduler::Slurm
            };
            let mut p = Policy::on(c, on);
            // The window counts what the audit log says was drained, not
            // only what a state file (deleted, emptied) remembers.
            let since = now_ms() - p.cfg.window.as_millis() as i64;
            for (node, at) in remediate::audited_drains(since) {
                p.count_drain(&node, at);
            }
            Some((p, remediate::load(&state_path)?))
        }
        None => None,
    };
    // Bad URLs are refused before anything starts.
    let mut notifier = Notifier::start(&cfg.notify)?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut session = Session::start(&crate::cli::resolve::source(&args.source, &cfg), &cfg).await?;
    if !args.source.demo {
        session.store.keep_timeline();
    }
    if let Some((p, _)) = &policy {
        tracing::info!(
            "remediate: {} (grace {}, at most {} node(s) per {})",
            p.cfg.mode.name(),
            humantime::format_duration(p.cfg.grace),
            p.cfg.limit(session.store.nodes.len()),
            humantime::format_duration(p.cfg.window),
        );
    }
    let slurm_reader = targets::slurm(&cfg);
    // The policy on Kubernetes acts through a client of its own.
    let kube = match (&policy, crate::cli::resolve::kube(&args.source.kube)) {
        (Some(_), Some(opts)) if on_kube => Some(crate::ingest::kube::connect(&opts).await?),
        _ => None,
    };
    let mut kube_said = remediate::SaidOnce::default();
    if let (Some((p, _)), Some(k)) = (policy.as_mut(), &kube) {
        watch_kube::see_cluster(p, k, &mut kube_said, now_ms()).await;
    }
    // Only the watch holding the lease drains; a dry-run needs none.
    let drains = policy.as_ref().is_some_and(|(p, _)| p.cfg.mode == RemediateMode::Drain);
    let mut lease = (drains && kube.is_none()).then(LeaseKeeper::new);
    let mut kube_lease = match (&policy, &kube) {
        (Some((p, _)), Some(_)) if drains => Some(KubeLeaseKeeper::new(
            LeaseKeeper::new().me,
            &p.cfg.lease_namespace,
            p.cfg.lease_duration,
        )),
        _ => None,
    };
    let mut own_alerts: Option<BTreeSet<String>> = None;
    // What an earlier run did fires again, quietly: it was announced then.
    if let Some((_, state)) = &policy {
        remediate::sync_alerts(&mut notifier, state, &mut own_alerts, now_ms());
    }
    tracing::info!(
        "watching {} nodes; alertmanager: {}; webhook: {}",
        session.store.nodes.len(),
        cfg.notify.alertmanager.as_deref().unwrap_or("none"),
        cfg.notify.webhook.as_deref().unwrap_or("none"),
    );
    let mut tick = tokio::time::interval(args.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut updates_open = true;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                session.drain();
                let now = now_ms();
                session.store.tick(now);
                notifier.observe(&session.store, now);
                match (policy.as_mut(), &kube) {
                    (Some((p, state)), Some(k)) => {
                        watch_kube::kube_step(p, state, kube_lease.as_mut(), &session.store, k, &mut kube_said, &mut notifier, &mut own_alerts, now).await;
                    }
                    (Some((p, state)), None) => {
                        remediate_step(p, state, lease.as_mut(), &session.store, &slurm_reader, &mut notifier, &mut own_alerts, now).await;
                    }
                    _ => {}
                }
                crate::ops::timeline::save_in_background(session.store.take_unsaved());
            }
            u = session.updates.recv(), if updates_open => match u {
                Some(u) => session.store.apply(u, now_ms()),
                None => updates_open = false,
            },
            _ = term.recv() => break,
            _ = hup.recv() => break,
            _ = int.recv() => break,
        }
    }
    tracing::info!("stopping (webhook events dropped: {})", notifier.webhook_dropped());
    // A clean stop gives the lease back: another watch takes it at once.
    if let Some(mut k) = lease {
        let s = slurm_reader.clone();
        let _ = tokio::task::spawn_blocking(move || k.release(&s)).await;
    }
    if let (Some(mut k), Some(client)) = (kube_lease, &kube) {
        k.release(client).await;
    }
    // Alerts are not resolved on the way out: the conditions may well go on.
    let _ = tokio::time::timeout(Duration::from_secs(5), notifier.flush()).await;
    session.stop().await;
    Ok(())
}

/// Looks at the lease off the runtime (Slurm's clients block).
async fn check_lease(k: &mut LeaseKeeper, slurm: &crate::ingest::slurm::Slurm, now: i64) -> LeaseNow {
    let (mut keeper, s) = (k.clone(), slurm.clone());
    match tokio::task::spawn_blocking(move || {
        let r = keeper.check(&s, now);
        (keeper, r)
    })
    .await
    {
        Ok((keeper, r)) => {
            *k = keeper;
            r
        }
        Err(e) => LeaseNow::Unknown(format!("the lease task failed: {e}")),
    }
}

/// One look of the policy: re-read its state (a person may have reset it),
/// count the policy's drains Slurm shows, decide (in drain mode only while
/// this watch holds the lease), read Slurm afresh and look at the lease
/// again before acting, drain (each logged before it runs and after, as the
/// policy acting for this user), trip the breaker if it must, save, notify.
#[allow(clippy::too_many_arguments)]
async fn remediate_step(
    p: &mut Policy,
    state: &mut State,
    mut lease: Option<&mut LeaseKeeper>,
    store: &crate::store::Store,
    slurm_reader: &crate::ingest::slurm::Slurm,
    notifier: &mut Notifier,
    own_alerts: &mut Option<BTreeSet<String>>,
    now: i64,
) {
    let Some(before) = remediate::begin_look(p, state, store.nodes.len()) else {
        return;
    };
    p.see_scheduler(remediate::marked_in_store(store, now));
    let mut decisions = Vec::new();
    let mut acts = true;
    if let Some(k) = lease.as_deref_mut() {
        // Every few seconds, not every tick: a waiting watch asks Slurm no
        // more often than that.
        if k.checked_ms.is_none_or(|t| now - t >= remediate::LEASE_CHECK_MS) {
            check_lease(k, slurm_reader, now).await;
        }
        acts = k.may_act(now);
    }
    if acts {
        decisions = p.decide(store, state, now);
    }
    if !decisions.is_empty()
        && let Some(k) = lease
    {
        // About to act: what Slurm shows now (another watch, a restart,
        // a moved log), and the lease once more.
        let s = slurm_reader.clone();
        let fresh = tokio::task::spawn_blocking(move || s.query()).await;
        match fresh {
            Ok(Ok(snap)) => {
                p.see_scheduler(remediate::marked_drains(
                    snap.nodes.iter().map(|(n, v)| (n.as_str(), v)),
                    now,
                ));
                decisions = if check_lease(k, slurm_reader, now).await == LeaseNow::Mine && k.may_act(now) {
                    p.decide(store, state, now)
                } else {
                    Vec::new()
                };
            }
            Ok(Err(e)) => {
                tracing::error!("remediate: Slurm cannot be read before acting: {e}; nothing is drained");
                decisions.clear();
            }
            Err(e) => {
                tracing::error!("remediate: the Slurm read failed: {e}; nothing is drained");
                decisions.clear();
            }
        }
    }
    for d in decisions {
        match d {
            Decision::Drain { node, kind, reason } => {
                let plan = match remediate::drain_plan(&node, &reason) {
                    Ok(plan) => plan,
                    Err(e) => {
                        tracing::error!("remediate: {node} not drained: {e}");
                        continue;
                    }
                };
                let report = slurm::run_logged(slurm_reader, plan).await;
                match report.results.first() {
                    Some(r) if r.ok => {
                        tracing::warn!("remediate: drained {node}: {reason} ({})", r.message);
                        state.drained(&node, kind, &reason, now);
                        p.count_drain(&node, now);
                    }
                    Some(r) => tracing::error!("remediate: {node} not drained: {}", r.message),
                    None => tracing::error!("remediate: {node} not drained"),
                }
            }
            Decision::Trip { node, why } => remediate::trip(state, &node, why, now),
        }
    }
    remediate::end_look(state, &before, notifier, own_alerts, now);
}

/// `fleetop remediate status|reset`. The window is counted from Slurm's
/// marked reasons and the audit log as the running policy counts it, so
/// `status` and the policy agree, and `reset` lifts the stop only: the
/// drains in the window still count.
pub fn remediate(
    args: RemediateCmd,
    cfg: &Config,
    read_only: bool,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let path = remediate::path();
    let mut state = remediate::load(&path)?;
    let rc = cfg.remediate.clone().unwrap_or_default();
    let window = humantime::format_duration(rc.window);
    let now = now_ms();
    let since = now - rc.window.as_millis() as i64;
    let slurm = targets::slurm(cfg);
    let audited = remediate::audited_drains(since);
    let kube = match crate::cli::resolve::kube(&args.kube) {
        Some(opts) => Some(rt.block_on(crate::ingest::kube::connect(&opts))?),
        None => None,
    };
    let (sched, evidence) = match kube {
        Some(_) => ("Kubernetes", "Kubernetes' annotations and Events"),
        None => ("Slurm", "Slurm's reasons"),
    };
    let read = match &kube {
        Some(k) => rt.block_on(remediate::kube::marked_in_cluster(k, now)).map(|(m, _)| m),
        None => slurm
            .query()
            .map(|snap| remediate::marked_drains(snap.nodes.iter().map(|(n, v)| (n.as_str(), v)), now))
            .map_err(|e| e.to_string()),
    };
    let (marked, unread) = match read {
        Ok(mut m) => {
            m.retain(|(_, at)| *at > since);
            (m, None)
        }
        Err(e) => (Vec::new(), Some(e)),
    };
    let drains = crate::model::remediation::window_drains(&audited, &marked);
    let counted = drains.len().max(state.recent.len());
    let limit = state.limit.map_or("?".to_string(), |l| l.to_string());
    match args.action {
        RemediateVerb::Status => {
            let mode = state.mode.map_or("not running here yet", |m| m.name());
            println!("policy: {mode}; state in {}", path.display());
            match &state.tripped {
                Some(t) => println!(
                    "breaker: TRIPPED at {}: {}",
                    rfc3339(t.at_ms),
                    fleetop_proto::input::printable(&t.why, 500)
                ),
                None => println!("breaker: armed"),
            }
            println!(
                "drains in the last {window} ({evidence} and the audit log): {counted}, of a limit of {limit} ({})",
                rc.limit_words()
            );
            if let Some(e) = &unread {
                println!("  {sched} not read ({e}): only the audit log's drains are listed");
            }
            for d in &drains {
                println!(
                    "  {}  drained at {}  (from {})",
                    fleetop_proto::input::printable(&d.node, 64),
                    rfc3339(d.at_ms),
                    d.seen.words(match kube {
                        Some(_) => "Kubernetes' annotation or Event",
                        None => "Slurm's reason",
                    })
                );
            }
            if counted > drains.len() {
                println!("  and {} more in {}", counted - drains.len(), path.display());
            }
            match &kube {
                Some(k) => {
                    let ns = &rc.lease_namespace;
                    match rt.block_on(remediate::kube_lease_status(k, ns, now)) {
                        Ok(Some(l)) => println!("lease: held by {}", remediate::kube_lease_words(&l, ns)),
                        Ok(None) => println!("lease: free (no watch quarantines now)"),
                        Err(e) => println!("lease: not read ({e})"),
                    }
                }
                None => match remediate::list_leases(&slurm) {
                    Ok(leases) => match crate::model::remediation::lease_holder(&leases, now, |_| false) {
                        Some(l) => println!("lease: held by {}", remediate::lease_words(l)),
                        None => println!("lease: free (no watch drains now)"),
                    },
                    Err(e) => println!("lease: not read ({e})"),
                },
            }
            if !state.holding.is_empty() {
                println!("incidents open (not drained twice):");
            }
            for d in state.holding.values() {
                println!(
                    "  {}  drained at {}: {}",
                    fleetop_proto::input::printable(&d.node, 64),
                    rfc3339(d.at_ms),
                    fleetop_proto::input::printable(&d.reason, 500)
                );
            }
        }
        RemediateVerb::Reset => {
            let Some(t) = state.tripped.clone() else {
                println!("the breaker is not tripped: nothing to reset");
                return Ok(());
            };
            let what = format!("breaker re-armed (it tripped at {}: {})", rfc3339(t.at_ms), t.why);
            let plan =
                crate::model::action::Plan::new(NodeAction::RemediateReset, Vec::new(), Some(what.clone()), Vec::new());
            if read_only {
                crate::ops::audit::log(&crate::ops::audit::refused(&plan, "read-only mode"))?;
                anyhow::bail!("read-only mode: reset refused (the breaker stays tripped)");
            }
            {
                use std::io::Write;
                let mut err = std::io::stderr().lock();
                writeln!(err, "the breaker tripped at {}: {}", rfc3339(t.at_ms), t.why)?;
                writeln!(
                    err,
                    "reset lifts the stop only: the {counted} drain(s) of the last {window} still count against its limit of {limit};"
                )?;
                writeln!(
                    err,
                    "once there is room the policy drains again, the next qualifying node first{}",
                    next_node(&t.why)
                        .map(|n| format!(" ({n} when it tripped)"))
                        .unwrap_or_default()
                )?;
            }
            if !args.yes {
                super::confirm(&plan, "Re-arm the breaker?")?;
            }
            // Logged first: a reset that cannot be audited does not happen.
            crate::ops::audit::started(&plan)?;
            state.tripped = None;
            remediate::save(&path, &state)?;
            let result = crate::model::action::NodeResult {
                node: "remediation policy".into(),
                ok: true,
                message: what.clone(),
                state_before: Some("tripped".into()),
                state_after: Some("armed".into()),
            };
            let done = crate::ops::audit::report(&plan, crate::model::action::Stage::Done, None, vec![result]);
            crate::ops::audit::log(&done)?;
            println!("{what}");
        }
    }
    Ok(())
}

/// The node a trip named as the next it would drain ("...: NODE would be
/// the next").
fn next_node(why: &str) -> Option<&str> {
    why.strip_suffix(" would be the next")?.rsplit(": ").next()
}
