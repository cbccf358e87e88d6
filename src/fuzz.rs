//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz), kept in the
//! library so the inputs the fuzzers once found run again as ordinary tests
//! (`tests/it/fuzz_regressions.rs`). Each takes arbitrary bytes and must
//! neither panic nor hang on any of them.

use std::path::Path;

use prost::Message;

use crate::ingest::{decode, hostlist};
use crate::model::target::Target;
use crate::model::update::{Event, Update};
use crate::store::Store;

/// Hostlist expressions, target lists and hostfiles.
pub fn hostlist(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let _ = hostlist::expand(&s);
    let _ = hostlist::parse_targets(&s, 50051);
}

/// The config file.
pub fn config(data: &[u8]) {
    let _ = crate::config::parse(&String::from_utf8_lossy(data), Path::new("fuzz.toml"));
}

/// A theme file (through the real loader: a file, its parent chain, colours).
pub fn theme(data: &[u8]) {
    let path = std::env::temp_dir().join(format!("fleetop-fuzz-theme-{}.toml", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        let spec = path.to_string_lossy();
        for depth in [
            crate::tui::theme::ColorDepth::TrueColor,
            crate::tui::theme::ColorDepth::Ansi16,
        ] {
            let _ = crate::tui::theme::Theme::load(&spec, None, depth);
        }
    }
}

/// Slurm's JSON and text outputs.
pub fn slurm(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let _ = crate::ingest::slurm::json::parse_sinfo(&s);
    let _ = crate::ingest::slurm::json::parse_squeue(&s);
    let _ = crate::ingest::slurm::parse_sinfo_text(&s);
    let _ = crate::ingest::slurm::parse_squeue_text(&s);
}

/// The delta codec: two samples from the bytes, the second decoded against
/// the first (and alone).
pub fn wire(data: &[u8]) {
    use fleetop_proto::pb::Sample;
    let cut = data.first().map(|&b| usize::from(b)).unwrap_or(0).min(data.len());
    let (a, b) = data.split_at(cut);
    let (Ok(mut a), Ok(b)) = (Sample::decode(a), Sample::decode(b)) else {
        return;
    };
    let _ = fleetop_proto::wire::decode(None, b.clone());
    // A stream's decoder, which also keeps NVLink counters for column deltas.
    let mut rx = fleetop_proto::wire::Decoder::default();
    let _ = rx.decode(a.clone());
    let _ = rx.decode(b.clone());
    let _ = fleetop_proto::wire::decode(Some(&mut a), b);
}

/// What a console takes from an agent, all the way to the screen: a stream
/// of length-delimited agent messages decoded, stored, judged, exported and
/// drawn (heatmap, wall, node detail, alerts).
pub fn agent_stream(data: &[u8]) {
    use fleetop_proto::pb::AgentMessage;
    use fleetop_proto::pb::agent_message::Kind;
    let target = Target {
        name: "fuzz".into(),
        host: "127.0.0.1".into(),
        port: 1,
    };
    let mut store = Store::new(vec![target], Default::default());
    let mut stream = decode::Stream::default();
    let mut rest = data;
    let mut now = 1_700_000_000_000i64;
    while let Ok(msg) = AgentMessage::decode_length_delimited(&mut rest) {
        now += 1000;
        let events = match msg.kind {
            Some(Kind::Info(i)) => vec![Event::Info(Box::new(stream.info(i, now)))],
            Some(Kind::Sample(s)) => match stream.sample(s, now) {
                Ok(s) => vec![Event::Sample(Box::new(s))],
                Err(_) => break,
            },
            Some(Kind::History(h)) => match stream.history(h, now) {
                Ok(samples) => samples.into_iter().map(|s| Event::Sample(Box::new(s))).collect(),
                Err(_) => break,
            },
            Some(Kind::CaughtUp(_)) => {
                stream.caught_up();
                vec![Event::CaughtUp]
            }
            Some(Kind::BurnIn(b)) => vec![Event::BurnIn(Box::new(stream.burn_in(b)))],
            None => continue,
        };
        for event in events {
            store.apply(Update::Node { node: 0, event }, now);
        }
        if rest.is_empty() {
            break;
        }
    }
    store.tick(now);
    // The export written node by node is the snapshot, byte for byte.
    let streamed = crate::export::Streamed {
        store: &store,
        now_ms: now,
    };
    let (whole, streamed) = (
        serde_json::to_string(&crate::export::snapshot(&store, now)),
        serde_json::to_string(&streamed),
    );
    assert_eq!(
        whole.ok(),
        streamed.ok(),
        "the streamed export differs from the snapshot"
    );
    draw(store, now);
}

/// Every screen drawn into a buffer, as a terminal would get it.
fn draw(store: Store, now: i64) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::widgets::Widget;

    use crate::tui::app::{Action, App};
    use crate::tui::dispatch::update;
    let Ok(theme) = crate::tui::theme::Theme::load("default", None, crate::tui::theme::ColorDepth::TrueColor) else {
        return;
    };
    let mut app = App::new(store, theme, now);
    let key = |c| Action::Key(KeyEvent::new(c, KeyModifiers::NONE));
    for (w, h) in [(80u16, 24u16), (200, 50)] {
        update(&mut app, Action::Resize(w, h));
        let area = Rect::new(0, 0, w, h);
        for k in [None, Some(KeyCode::Char('w')), Some(KeyCode::Enter), Some(KeyCode::Tab)] {
            if let Some(k) = k {
                update(&mut app, key(k));
            }
            let mut buf = Buffer::empty(area);
            (&app).render(area, &mut buf);
        }
    }
}

/// A dcgm-exporter (or any Prometheus text) answer: parsed, and what parses
/// mapped into a node as `--dcgm-exporter` would.
pub fn promtext(data: &[u8]) {
    use crate::ingest::{dcgm, promtext};
    let limits = promtext::Limits {
        max_bytes: 1 << 20,
        ..Default::default()
    };
    let Ok(e) = promtext::parse(&String::from_utf8_lossy(data), &limits) else {
        return;
    };
    let _ = e.samples.iter().map(dcgm::host_of).count();
    let mut m = dcgm::map_node(&e.samples, "fuzz", "dcgm-exporter", 5000, 1_700_000_000_000);
    dcgm::Xids::default().dedup(&mut m.sample);
}
