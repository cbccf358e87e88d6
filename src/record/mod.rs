//! Recordings: the console's update stream on disk, for replay and for
//! "what did the fleet look like at 03:12". The format is in
//! `docs/recording.md`; in short:
//!
//! ```text
//! segment = header frame*
//! header  = "FLEETREC" u16le(schema) u32le(len) postcard(Header)
//! frame   = "FR" u8(kind) u32le(len) zstd(postcard(Batch))   kind 0 data, 1 carried over
//! ```
//!
//! Samples, nearly all of what is recorded, are written as differences
//! from the node's previous sample in the segment (`delta`), so a segment's
//! frames are read in order from its first.
//!
//! What is recorded is every `Update` as it arrived on the session's one
//! channel, with its arrival time: replay feeds the same updates to a fresh
//! `Store` in the same order, so every screen, filter and flag works as it
//! did live (flags are judged again with the replaying console's thresholds).
//! A frame is written (and synced) at least once a second, so a crash loses
//! at most the last second. Segments rotate by size: FILE, FILE.1, FILE.2...
//!
//! Layer: above `store` (the player feeds one), below `session` (which tees
//! its update channel into a recorder).

pub mod delta;
pub mod memory;
pub mod player;
pub mod reader;
pub mod tokens;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::target::Target;
use crate::model::update::Update;

pub use player::Player;
pub use reader::{Damage, Recording};
pub use writer::{Recorder, RecorderOptions};

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"FLEETREC";
/// The first bytes of every frame.
pub const FRAME_MAGIC: &[u8; 2] = b"FR";
/// Bumped on any change to the header, the batch, or the model types they
/// carry (`model::sample`, `model::update`, ...): the encoding is positional.
/// 2: samples as `delta::Packed`; 1 (still read): every update whole.
pub const SCHEMA_VERSION: u16 = 2;
/// Bytes before a frame's compressed payload: magic, kind, length.
pub const FRAME_HEAD: usize = 2 + 1 + 4;
/// A frame longer than this is damage, not data (a batch is one second).
pub const MAX_FRAME: u32 = 256 << 20;
/// A header longer than this is damage.
pub const MAX_HEADER: u32 = 16 << 20;

/// What a segment says about itself, before its frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The fleetop that wrote it.
    pub fleetop_version: String,
    /// The same for every segment of one recording (its start time and pid),
    /// so a stale FILE.3 from an older recording is never read as ours.
    pub recording_id: u64,
    /// 0 for FILE, n for FILE.n.
    pub segment: u32,
    /// When the recording started (ms, the recording console's clock).
    pub started_ms: i64,
    /// The nodes, in store order: `Update::Node { node }` indexes this.
    pub targets: Vec<RecTarget>,
    /// Whether a scheduler was read (`--slurm`).
    pub scheduler_known: bool,
}

/// A target as recorded (the model's `Target` has no serde of its own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecTarget {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl From<&Target> for RecTarget {
    fn from(t: &Target) -> Self {
        RecTarget {
            name: t.name.clone(),
            host: t.host.clone(),
            port: t.port,
        }
    }
}

impl From<&RecTarget> for Target {
    fn from(t: &RecTarget) -> Self {
        Target {
            name: t.name.clone(),
            host: t.host.clone(),
            port: t.port,
        }
    }
}

/// One frame's content: updates with their arrival times, as offsets from
/// `base_ms` (small varints, not 8-byte times).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Batch {
    pub base_ms: i64,
    pub entries: Vec<(u32, Entry)>,
    /// The numbers of every `Entry::Sample`, column by column (`delta::to_columns`).
    pub columns: Vec<i64>,
}

/// One update as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Entry {
    /// Whole (everything but a node's sample in a data frame).
    Update(Update),
    /// `Update::Node { node, event: Event::Sample(..) }` as `delta` packed
    /// it against the node's earlier samples in the segment; its `nums`
    /// numbers are in the batch's `columns`.
    Sample {
        node: u32,
        nums: u32,
        strs: Vec<Option<String>>,
        raws: Vec<u64>,
    },
    /// The Slurm partitions of the nodes of the `Update::Scheduler` just
    /// before it. `SchedNode::partitions` is not serialized (schema 1's
    /// snapshots have no such field), so it travels beside the snapshot.
    Partitions(BTreeMap<String, Vec<String>>),
}

/// A frame's content in schema version 1: every update whole.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BatchV1 {
    pub base_ms: i64,
    pub entries: Vec<(u32, Update)>,
}

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Updates as they arrived.
    Data = 0,
    /// Written first in a rotated segment: the node descriptions, link
    /// states and scheduler view so far, so the segment replays on its own.
    /// Skipped when the segment continues the one before it.
    CarriedOver = 1,
}

impl FrameKind {
    fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(FrameKind::Data),
            1 => Some(FrameKind::CarriedOver),
            _ => None,
        }
    }
}

/// Why a recording cannot be written or opened at all (damage after a good
/// start is not an error: see `Damage`).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a fleetop recording (no FLEETREC magic)")]
    NotARecording { path: PathBuf },
    #[error(
        "{path}: recording schema version {found} is newer than this fleetop reads ({SCHEMA_VERSION}); replay it with a newer fleetop"
    )]
    Newer { path: PathBuf, found: u16 },
    #[error("{path}: damaged header at byte {offset}: {what}")]
    BadHeader { path: PathBuf, offset: u64, what: String },
    #[error("{path}: the recording has no nodes")]
    NoNodes { path: PathBuf },
    #[error("{path}: {what}")]
    Encode { path: PathBuf, what: String },
}

/// The path of segment `n` of the recording whose first segment is `first`.
pub fn segment_path(first: &Path, n: u32) -> PathBuf {
    if n == 0 {
        return first.to_path_buf();
    }
    let mut s = first.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// Parses a time given for a recording: RFC 3339 (`2026-11-22T03:12:00Z`)
/// or an offset from the recording's start (`+5m`, `+90s`, `+1h30m`).
pub fn parse_at(text: &str, start_ms: i64) -> Result<i64, String> {
    let t = text.trim();
    if let Some(off) = t.strip_prefix('+') {
        let d = humantime::parse_duration(off).map_err(|e| format!("'{t}': not an offset like +5m or +90s ({e})"))?;
        // No recording spans a century: a larger offset is a typo, said as
        // one, not a time that prints as 1970.
        const CENTURY_MS: u128 = 100 * 365 * 24 * 3_600_000;
        if d.as_millis() > CENTURY_MS {
            return Err(format!("'{t}': an offset past any recording (at most +100y)"));
        }
        return Ok(start_ms.saturating_add(d.as_millis() as i64));
    }
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| d.timestamp_millis())
        .map_err(|e| format!("'{t}': not an RFC 3339 time (2026-11-22T03:12:00Z) nor an offset like +5m ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINNED: &[u8] = &[
        10, 1, 2, 1, 3, 38, 0, 0, 38, 2, 208, 15, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    /// A version-1 frame's batch (`BatchV1`), as version 1 wrote it.
    const PINNED_V1: &[u8] = &[
        10, 1, 2, 0, 3, 1, 7, 128, 160, 213, 237, 238, 102, 0, 1, 1, 0, 1, 97, 0, 0, 0, 0, 1, 0, 242, 170, 50, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn times_are_offsets_or_rfc3339() {
        assert_eq!(parse_at("+5m", 1000), Ok(301_000));
        assert_eq!(parse_at("1970-01-01T00:00:02Z", 0), Ok(2000));
        assert!(parse_at("5m", 0).expect_err("no sign").contains("'5m'"));
        assert!(parse_at("+5 fortnights", 0).is_err());
        let e = parse_at("+99999999999h", 0).expect_err("past any recording");
        assert!(e.contains("at most +100y"), "{e}");
    }

    fn known_sample() -> Box<crate::model::sample::NodeSample> {
        use crate::model::sample::{GpuReading, NodeSample};
        Box::new(NodeSample {
            seq: 7,
            time_ms: 1_767_225_600_000,
            host: None,
            gpus: vec![GpuReading {
                index: 1,
                util_pct: Some(97),
                power_w: Some(f64::from(412_345u32) / 1000.0),
                ..GpuReading::default()
            }],
            ib_ports: vec![],
            sxids: vec![],
        })
    }

    /// Recordings of schema 1 keep replaying: their batches still decode.
    #[test]
    fn a_version_1_batch_still_decodes() {
        use crate::model::update::Event;
        let (b, rest) = postcard::take_from_bytes::<BatchV1>(PINNED_V1).expect("decodes");
        assert!(rest.is_empty());
        assert_eq!(b.base_ms, 5);
        match &b.entries[..] {
            [
                (
                    2,
                    Update::Node {
                        node: 3,
                        event: Event::Sample(s),
                    },
                ),
            ] => {
                assert_eq!(s.gpus[0].util_pct, Some(97));
                assert_eq!(s.gpus[0].power_w, Some(412.345));
            }
            other => panic!("{other:?}"),
        }
    }

    /// The encoding is positional: a change to a recorded model type
    /// changes these bytes, and must come with a new SCHEMA_VERSION (and a
    /// reader for the old one). Update the bytes only then.
    #[test]
    fn the_encoding_of_a_known_update_is_pinned() {
        // Two samples: the second as what the first predicted wrongly.
        let mut chain = delta::Chain::default();
        chain.pack(3, &known_sample()).expect("packs");
        let mut next = known_sample();
        next.seq += 1;
        next.time_ms += 1000;
        next.gpus[0].util_pct = Some(95);
        let p = chain.pack(3, &next).expect("packs");
        let bytes = postcard::to_allocvec(&Batch {
            base_ms: 5,
            entries: vec![(
                2,
                Entry::Sample {
                    node: 3,
                    nums: p.nums.len() as u32,
                    strs: p.strs,
                    raws: p.raws,
                },
            )],
            columns: delta::to_columns(&[p.nums]),
        })
        .expect("encodes");
        assert_eq!(SCHEMA_VERSION, 2, "bump the pinned bytes with the version");
        assert_eq!(bytes, PINNED, "{bytes:?}");
    }

    #[test]
    fn segments_are_numbered_after_the_first() {
        assert_eq!(segment_path(Path::new("a/r.rec"), 0), PathBuf::from("a/r.rec"));
        assert_eq!(segment_path(Path::new("a/r.rec"), 2), PathBuf::from("a/r.rec.2"));
    }
}
