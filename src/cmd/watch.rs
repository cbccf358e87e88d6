//! `fleetop watch`: the headless notifier. Follows SOURCE like the TUI does
//! and hands its flags to Alertmanager and/or a webhook until SIGTERM,
//! SIGINT or SIGHUP; logs go to stderr (the journal, under systemd).

use std::time::Duration;

use crate::cli::WatchArgs;
use crate::config::Config;
use crate::model::time::now_ms;
use crate::ops::notify::Notifier;
use crate::session::Session;

pub async fn run(args: WatchArgs, mut cfg: Config) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    super::apply_notify_flags(&args.notify, &mut cfg.notify);
    if cfg.notify.alertmanager.is_none() && cfg.notify.webhook.is_none() {
        anyhow::bail!(
            "watch: nowhere to send alerts: give --alertmanager URL or --webhook URL (or [notify] in the config)"
        );
    }
    // Bad URLs are refused before anything starts.
    let mut notifier = Notifier::start(&cfg.notify)?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut session = Session::start(&args.source, &cfg).await?;
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
    // Alerts are not resolved on the way out: the conditions may well go on.
    let _ = tokio::time::timeout(Duration::from_secs(5), notifier.flush()).await;
    session.stop().await;
    Ok(())
}
