//! `fleetop record SOURCE --out FILE`: the update stream of SOURCE, to a
//! recording, until interrupted or for `--duration`.

use std::time::Duration;

use crate::cli::RecordArgs;
use crate::config::Config;
use crate::model::time::now_ms;
use crate::record::RecorderOptions;
use crate::session::Session;

pub async fn run(args: RecordArgs, cfg: Config) -> anyhow::Result<()> {
    let mut session = Session::start(&crate::cli::resolve::source(&args.source, &cfg), &cfg).await?;
    let mut opts = RecorderOptions::new(&args.out);
    opts.rotate_size = args.rotate_size;
    let handle = match session.record(opts) {
        Ok(h) => h,
        Err(e) => {
            session.stop().await;
            return Err(e.into());
        }
    };
    eprintln!(
        "fleetop: recording {} nodes to {} (Ctrl-C to stop)",
        session.store.nodes.len(),
        args.out.display()
    );
    let stop = until(args.duration);
    tokio::pin!(stop);
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let mut failed = None;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            u = session.updates.recv() => match u {
                Some(u) => session.store.apply(u, now_ms()),
                None => break,
            },
            _ = check.tick() => {
                if let Some(e) = handle.error() {
                    failed = Some(e);
                    break;
                }
            }
        }
    }
    let stats = handle.finish().await;
    session.stop().await;
    if let Some(e) = failed {
        anyhow::bail!("recording stopped: {e}");
    }
    let stats = stats?;
    eprintln!(
        "fleetop: recorded {} updates in {} frames, {} bytes in {} segment(s), to {}",
        stats.updates,
        stats.frames,
        stats.bytes,
        stats.segments,
        args.out.display()
    );
    Ok(())
}

/// Resolves after `duration`, or on Ctrl-C / SIGTERM / SIGHUP.
async fn until(duration: Option<Duration>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        return;
    };
    let timer = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = timer => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}
