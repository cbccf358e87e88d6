//! `fleetop export`: snapshots of the fleet as JSON on stdout, nothing else.

use std::io::Write;
use std::time::Duration;

use crate::cli::{ExportArgs, Format, View};
use crate::config::Config;
use crate::export;
use crate::ingest::agent;
use crate::model::time::{now_ms, rfc3339};
use crate::record::{Player, parse_at};
use crate::session::Session;
use crate::store::Link;

pub async fn run(args: ExportArgs, cfg: Config) -> anyhow::Result<()> {
    if args.print_schema {
        return quiet_if_closed(write_out(
            &mut std::io::stdout().lock(),
            export::schema_json().trim_end(),
        ));
    }
    if let Some(file) = &args.replay {
        return replay(file, args.at.as_deref(), args.format, &cfg);
    }
    let count = if args.once { Some(1) } else { args.count };
    let reading = match count {
        Some(1) => agent::Reading::Snapshot,
        _ => agent::Reading::Running,
    };
    let source = crate::cli::resolve::source(&args.source, &cfg);
    let mut session = Session::start_for(&source, &cfg, reading).await?;
    session.settle(args.timeout).await;
    ensure_some_answered(&session, args.timeout)?;
    // A scheduler still silent when the first document is due: the
    // document says so rather than leaving its fields quietly out.
    let (now, waited) = (now_ms(), humantime::format_duration(args.timeout));
    let store = &mut session.store;
    let silent = [
        (session.scheduler.then_some(&mut store.scheduler), "Slurm"),
        (store.ray.as_mut().map(|r| &mut r.health), "Ray"),
        (session.kubernetes.then_some(&mut store.kube.health), "the API server"),
    ];
    for (health, who) in silent {
        if let Some(h) = health.filter(|h| !h.answered()) {
            h.error = Some(format!("{who} did not answer within --timeout {waited}"));
            h.error_ms = Some(now);
        }
    }

    let mut stdout = std::io::stdout().lock();
    let mut emitted = 0u64;
    let mut tick = tokio::time::interval(args.interval);
    tick.tick().await; // the first tick is now
    loop {
        session.drain();
        let now = now_ms();
        session.store.tick(now);
        let started = std::time::Instant::now();
        let written = match args.view {
            View::Full => {
                let snap = export::Streamed {
                    store: &session.store,
                    now_ms: now,
                };
                write_doc(&mut stdout, &snap, args.format)
            }
            View::Summary => {
                let snap = export::snapshot(&session.store, now);
                write_doc(&mut stdout, &export::summary(&snap), args.format)
            }
        };
        // A reader that has had enough (`| head`, `| jq -e ... | head`)
        // ends the export, quietly and successfully, as grep and jq do.
        if let Err(e) = written {
            session.stop().await;
            return quiet_if_closed(Err(e));
        }
        tracing::debug!("snapshot written in {} ms", started.elapsed().as_millis());
        emitted += 1;
        if count.is_some_and(|c| emitted >= c) {
            break;
        }
        // Apply updates as they come while waiting for the next snapshot.
        loop {
            tokio::select! {
                _ = tick.tick() => break,
                u = session.updates.recv() => match u {
                    Some(u) => session.store.apply(u, now_ms()),
                    None => tokio::time::sleep(Duration::from_millis(50)).await,
                },
            }
        }
    }
    // The document is out: ending must not wait on what the session holds
    // open (a demo agent's connections, a read in flight).
    match tokio::time::timeout(STOP_DEADLINE, session.stop()).await {
        Ok(()) => Ok(()),
        Err(_) => anyhow::bail!(
            "export: the document was written, but the session did not end within {} s",
            STOP_DEADLINE.as_secs()
        ),
    }
}

/// The longest an export waits for its session to end once its documents
/// are written.
pub const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// One document and a newline, written as it is serialized, then flushed.
/// A 10,000-node snapshot is hundreds of megabytes: held whole as a string
/// it doubled the export's memory and delayed its first byte by seconds.
/// The snapshot's types always serialize (string keys, no fallible
/// `Serialize`), so the only failure is the writer's.
fn write_doc<T: serde::Serialize>(out: &mut impl Write, doc: &T, format: Format) -> std::io::Result<()> {
    let mut buf = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
    match format {
        Format::Json => serde_json::to_writer_pretty(&mut buf, doc),
        Format::Ndjson => serde_json::to_writer(&mut buf, doc),
    }?;
    buf.write_all(b"\n")?;
    buf.flush()
}

/// One snapshot of the fleet as `file` recorded it at `at` (default: its end).
fn replay(file: &std::path::Path, at: Option<&str>, format: Format, cfg: &Config) -> anyhow::Result<()> {
    let mut player = Player::open(file)?;
    let (start, end) = (player.start_ms(), player.end_ms());
    if let Some(d) = player.damage() {
        eprintln!("fleetop: {d}; replaying up to {}", rfc3339(end));
    }
    let t = match at {
        Some(a) => parse_at(a, start).map_err(|e| anyhow::anyhow!("--at {e}"))?,
        None => end,
    };
    if t < start || t > end {
        anyhow::bail!(
            "--at {}: the recording covers {} to {}",
            rfc3339(t),
            rfc3339(start),
            rfc3339(end)
        );
    }
    let racks = crate::ingest::racks::Racks::from_config(cfg)?;
    let mut store = player.new_store(cfg.thresholds.clone());
    store.set_racks(|n| racks.rack_of(n));
    player.feed_until(&mut store, t);
    let snap = export::Streamed {
        store: &store,
        now_ms: t,
    };
    quiet_if_closed(write_doc(&mut std::io::stdout().lock(), &snap, format))
}

/// One document and a newline, flushed.
fn write_out(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    writeln!(out, "{text}")?;
    out.flush()
}

/// A closed stdout is where the reader chose to stop: success, nothing said.
fn quiet_if_closed(r: std::io::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Fails with one line naming every node and why, when none answered.
fn ensure_some_answered(session: &Session, timeout: Duration) -> anyhow::Result<()> {
    let now = now_ms();
    let th = &session.store.thresholds;
    let nodes = &session.store.nodes;
    if nodes.iter().any(|n| export::answered(n, now, th)) {
        return Ok(());
    }
    let reasons: Vec<String> = nodes
        .iter()
        .take(5)
        .map(|n| {
            let why = match &n.link {
                Link::Down { error, .. } => error.as_str(),
                Link::Connected { .. } if !n.caught_up => "still reading its history",
                Link::Connected { .. } => "connected, no sample yet",
                Link::Connecting => "no answer",
            };
            format!("{} ({}): {why}", n.target.name, n.target.address())
        })
        .collect();
    let more = nodes.len().saturating_sub(5);
    let mut tail = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    // Nothing failed, nothing finished: the nodes are still connecting or
    // reading their history (a slow store's first read of a large fleet, a
    // short --timeout). Said plainly.
    if !nodes.iter().any(|n| matches!(n.link, Link::Down { .. })) {
        tail.push_str(&format!(
            " (still reading after --timeout {}: give a longer --timeout)",
            humantime::format_duration(timeout)
        ));
    }
    anyhow::bail!("no node answered: {}{tail}", reasons.join("; "))
}
