//! Opens a recording: reads the header, then walks every frame of every
//! segment once, checking it (the zstd checksum, the batch decodes, times
//! move forward), and keeps an index of where each frame is and what times
//! it covers. Damage (a truncated file, a flipped byte) ends the recording
//! there: what came before replays, and `Damage` says where it stopped.

use fleetop_proto::input::open_regular;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::model::update::{Event, Update};
use crate::record::{
    Batch, BatchV1, Entry, FRAME_HEAD, FRAME_MAGIC, FrameKind, Header, MAGIC, MAX_FRAME, MAX_HEADER, RecordError,
    SCHEMA_VERSION, delta, segment_path,
};

/// No batch expands past this (a second of a large fleet is a few MB): a
/// frame that claims more is damage, not a reason to run out of memory.
/// The most a frame may expand to (a 10,240-node fleet's carried-over
/// descriptions are well under a tenth of it).
const MAX_RAW: u64 = 256 << 20;

/// Where a recording stopped being readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub path: PathBuf,
    /// Byte offset in `path` of the frame (or header) that could not be read.
    pub offset: u64,
    /// Its number in the segment (0 is the first frame after the header).
    pub frame: u64,
    pub what: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: damaged at byte {} (frame {}): {}",
            self.path.display(),
            self.offset,
            self.frame,
            self.what
        )
    }
}

/// One good frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameRef {
    /// Index into `Recording::segments`.
    pub segment: usize,
    /// Offset of the compressed payload.
    pub offset: u64,
    pub len: u32,
    pub first_ms: i64,
    pub last_ms: i64,
    pub entries: u32,
}

/// A recording, checked and indexed.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The header of the segment it was opened at.
    pub header: Header,
    /// The segment files, in order.
    pub segments: Vec<PathBuf>,
    /// The schema version of each segment.
    schemas: Vec<u16>,
    pub frames: Vec<FrameRef>,
    /// Where reading stopped early, if it did.
    pub damage: Option<Damage>,
    /// The next frame `load` reads without going back, and the samples
    /// its deltas are against.
    cursor: Option<(usize, delta::Chain)>,
}

impl Recording {
    /// Opens `path` (FILE or one of its FILE.n) and every later segment.
    /// Errors only when nothing can be replayed: no such file, not a
    /// recording, a newer schema, a damaged header.
    pub fn open(path: &Path) -> Result<Recording, RecordError> {
        let mut file = open_regular(path).map_err(|e| io(path, e))?;
        let (header, schema) = read_header(&mut file, path)?;
        if header.targets.is_empty() {
            return Err(RecordError::NoNodes { path: path.into() });
        }
        // FILE.n continues as FILE.n+1.
        let first = if header.segment == 0 {
            path.to_path_buf()
        } else {
            let s = path.as_os_str().to_string_lossy();
            let suffix = format!(".{}", header.segment);
            PathBuf::from(s.strip_suffix(&suffix).unwrap_or(&s).to_string())
        };
        let mut rec = Recording {
            header: header.clone(),
            segments: vec![path.to_path_buf()],
            schemas: vec![schema],
            frames: Vec::new(),
            damage: None,
            cursor: None,
        };
        let mut last_ms = i64::MIN;
        if !rec.scan(&mut file, 0, true, &mut last_ms) {
            return Ok(rec);
        }
        let mut n = header.segment + 1;
        loop {
            let next = segment_path(&first, n);
            let Ok(mut f) = open_regular(&next) else { break };
            let schema = match read_header(&mut f, &next) {
                Ok((h, schema)) if h.recording_id == header.recording_id && h.segment == n => schema,
                // Another recording's leftover: not ours, not damage.
                Ok(_) => break,
                Err(e) => {
                    rec.damage = Some(Damage {
                        path: next,
                        offset: 0,
                        frame: 0,
                        what: e.to_string(),
                    });
                    break;
                }
            };
            rec.segments.push(next);
            rec.schemas.push(schema);
            let idx = rec.segments.len() - 1;
            if !rec.scan(&mut f, idx, false, &mut last_ms) {
                break;
            }
            n += 1;
        }
        Ok(rec)
    }

    /// The start of the recording (its first update, or the header's time).
    pub fn start_ms(&self) -> i64 {
        // An empty frame (a 16-byte one, written or planted) holds no time:
        // taken for one, it made the end come before the start.
        self.frames
            .iter()
            .find(|f| f.entries > 0)
            .map_or(self.header.started_ms, |f| f.first_ms)
    }

    /// The time of the last update that can be replayed.
    pub fn end_ms(&self) -> i64 {
        self.frames
            .iter()
            .rev()
            .find(|f| f.entries > 0)
            .map_or(self.start_ms(), |f| f.last_ms)
            .max(self.start_ms())
    }

    /// Reads the frames of one segment (its header already read); false
    /// when it stopped at damage. `carried`: whether a carried-over frame is
    /// replayed (the segment opened) or skipped (continued into).
    fn scan(&mut self, file: &mut File, segment: usize, carried: bool, last_ms: &mut i64) -> bool {
        let path = self.segments[segment].clone();
        let size = match file.metadata() {
            Ok(m) => m.len(),
            Err(e) => {
                self.damage = Some(Damage {
                    path,
                    offset: 0,
                    frame: 0,
                    what: e.to_string(),
                });
                return false;
            }
        };
        let mut offset = match file.stream_position() {
            Ok(o) => o,
            Err(_) => return false,
        };
        let mut frame = 0u64;
        let mut chain = delta::Chain::default();
        while offset < size {
            let damage = |what: String| Damage {
                path: path.clone(),
                offset,
                frame,
                what,
            };
            match read_frame(file, offset, size, &self.reading(segment), frame, &mut chain) {
                Ok((kind, fr)) => {
                    if fr.entries > 0 && fr.first_ms < *last_ms {
                        self.damage = Some(damage(format!("time goes back ({} before {})", fr.first_ms, *last_ms)));
                        return false;
                    }
                    if kind == FrameKind::Data || carried {
                        if fr.entries > 0 {
                            *last_ms = fr.last_ms;
                        }
                        self.frames.push(fr);
                    }
                    offset = fr.offset + u64::from(fr.len);
                }
                Err(what) => {
                    self.damage = Some(damage(what));
                    return false;
                }
            }
            frame += 1;
        }
        true
    }

    /// The updates of frame `i`, with their times. Frames are read in
    /// order; any other frame first reads its segment up to it.
    pub fn load(&mut self, i: usize) -> Result<Vec<(i64, Update)>, Damage> {
        let fr = self.frames[i];
        let same_segment = i > 0 && self.frames[i - 1].segment == fr.segment;
        // Reading on in order within a segment keeps the chain; anything
        // else (a jump, a new segment) reads from the segment's first frame
        // with a fresh one.
        let (mut next, mut chain) = match self.cursor.take() {
            Some((next, chain)) if next == i && same_segment => (next, chain),
            _ => {
                let first = self.frames[..i]
                    .iter()
                    .rposition(|f| f.segment != fr.segment)
                    .map_or(0, |p| p + 1);
                (first, delta::Chain::default())
            }
        };
        loop {
            let got = self.load_with(next, &mut chain)?;
            next += 1;
            if next > i {
                self.cursor = Some((next, chain));
                return Ok(got);
            }
        }
    }

    fn load_with(&self, i: usize, chain: &mut delta::Chain) -> Result<Vec<(i64, Update)>, Damage> {
        let fr = self.frames[i];
        let path = &self.segments[fr.segment];
        let damage = |what: String| Damage {
            path: path.clone(),
            offset: fr.offset - FRAME_HEAD as u64,
            frame: i as u64,
            what,
        };
        let mut f = open_regular(path).map_err(|e| damage(e.to_string()))?;
        f.seek(SeekFrom::Start(fr.offset)).map_err(|e| damage(e.to_string()))?;
        let mut packed = vec![0; fr.len as usize];
        f.read_exact(&mut packed).map_err(|e| damage(e.to_string()))?;
        decode(&packed, &self.reading(fr.segment), chain).map_err(damage)
    }

    fn reading(&self, segment: usize) -> Reading {
        Reading {
            segment,
            schema: self.schemas[segment],
            nodes: self.header.targets.len(),
        }
    }
}

/// What reading a segment's frames needs to know.
struct Reading {
    segment: usize,
    schema: u16,
    /// Samples are of nodes below this.
    nodes: usize,
}

fn io(path: &Path, source: std::io::Error) -> RecordError {
    RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads and checks a segment's header, and says its schema version; the
/// file is left at its first frame.
fn read_header(file: &mut File, path: &Path) -> Result<(Header, u16), RecordError> {
    let bad = |offset: u64, what: &str| RecordError::BadHeader {
        path: path.into(),
        offset,
        what: what.into(),
    };
    let mut head = [0u8; 14];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(io(path, e)),
        }
    }
    if got < MAGIC.len() || &head[..8] != MAGIC {
        if got < MAGIC.len() && MAGIC.starts_with(&head[..got]) {
            return Err(bad(got as u64, "truncated"));
        }
        return Err(RecordError::NotARecording { path: path.into() });
    }
    if got < head.len() {
        return Err(bad(got as u64, "truncated"));
    }
    let version = u16::from_le_bytes([head[8], head[9]]);
    if version > SCHEMA_VERSION {
        return Err(RecordError::Newer {
            path: path.into(),
            found: version,
        });
    }
    if version == 0 {
        return Err(bad(8, "schema version 0"));
    }
    let len = u32::from_le_bytes([head[10], head[11], head[12], head[13]]);
    if len > MAX_HEADER {
        return Err(bad(10, &format!("a header of {len} bytes")));
    }
    let mut body = vec![0; len as usize];
    file.read_exact(&mut body).map_err(|_| bad(14, "truncated"))?;
    let raw = unzstd(&body).map_err(|e| bad(14, &e))?;
    match postcard::take_from_bytes::<Header>(&raw) {
        Ok((h, [])) => Ok((h, version)),
        Ok(_) => Err(bad(14, "bytes after the header")),
        Err(e) => Err(bad(14, &e.to_string())),
    }
}

/// Reads the frame at `offset` and checks all of it.
fn read_frame(
    file: &mut File,
    offset: u64,
    size: u64,
    reading: &Reading,
    n: u64,
    chain: &mut delta::Chain,
) -> Result<(FrameKind, FrameRef), String> {
    let left = size - offset;
    if left < FRAME_HEAD as u64 {
        return Err(format!("truncated: {left} bytes where a frame starts"));
    }
    file.seek(SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut head = [0u8; FRAME_HEAD];
    file.read_exact(&mut head).map_err(|e| e.to_string())?;
    if &head[..2] != FRAME_MAGIC {
        return Err("no frame marker".into());
    }
    let kind = FrameKind::from_byte(head[2]).ok_or_else(|| format!("unknown frame kind {}", head[2]))?;
    if kind == FrameKind::CarriedOver && n != 0 {
        return Err("a carried-over frame that is not a segment's first".into());
    }
    let len = u32::from_le_bytes([head[3], head[4], head[5], head[6]]);
    if len > MAX_FRAME {
        return Err(format!("a frame of {len} bytes"));
    }
    let body_left = left - FRAME_HEAD as u64;
    if u64::from(len) > body_left {
        return Err(format!("truncated: a frame of {len} bytes with {body_left} left"));
    }
    let mut packed = vec![0; len as usize];
    file.read_exact(&mut packed).map_err(|e| e.to_string())?;
    let entries = decode(&packed, reading, chain)?;
    let first_ms = entries.first().map_or(0, |(t, _)| *t);
    let last_ms = entries.last().map_or(0, |(t, _)| *t);
    Ok((
        kind,
        FrameRef {
            segment: reading.segment,
            offset: offset + FRAME_HEAD as u64,
            len,
            first_ms,
            last_ms,
            entries: entries.len() as u32,
        },
    ))
}

/// A frame's payload, back to updates with their absolute times; its
/// samples' deltas are read against `chain`, which then holds them.
fn decode(packed: &[u8], reading: &Reading, chain: &mut delta::Chain) -> Result<Vec<(i64, Update)>, String> {
    let raw = unzstd(packed)?;
    if reading.schema == 1 {
        let batch: BatchV1 = whole(&raw)?;
        let base = batch.base_ms;
        return Ok((batch.entries.into_iter())
            .map(|(dt, u)| (base + i64::from(dt), u))
            .collect());
    }
    let batch: Batch = whole(&raw)?;
    let base = batch.base_ms;
    let lens: Vec<usize> = (batch.entries.iter())
        .filter_map(|(_, e)| match e {
            Entry::Sample { nums, .. } => Some(*nums as usize),
            Entry::Update(_) | Entry::Partitions(_) => None,
        })
        .collect();
    let mut nums = delta::from_columns(&lens, &batch.columns)?.into_iter();
    let mut out = Vec::with_capacity(batch.entries.len());
    for (dt, e) in batch.entries {
        let u = match e {
            Entry::Update(u) => u,
            Entry::Partitions(parts) => {
                match out.last_mut() {
                    Some((_, Update::Scheduler(snap))) => {
                        let snap = std::sync::Arc::make_mut(snap);
                        for (name, p) in parts {
                            if let Some(n) = snap.nodes.get_mut(&name) {
                                n.partitions = p;
                            }
                        }
                    }
                    _ => return Err("partitions without the scheduler's view before them".into()),
                }
                continue;
            }
            Entry::Sample { node, strs, raws, .. } => {
                let node = node as usize;
                if node >= reading.nodes {
                    return Err(format!("a sample of node {node} in a recording of {}", reading.nodes));
                }
                let packed = delta::Packed {
                    nums: nums.next().unwrap_or_default(),
                    strs,
                    raws,
                };
                let s = chain
                    .unpack(node, &packed)
                    .map_err(|e| format!("undecodable sample: {e}"))?;
                Update::Node {
                    node,
                    event: Event::Sample(Box::new(s)),
                }
            }
        };
        out.push((base + i64::from(dt), u));
    }
    Ok(out)
}

/// All of `raw` as one `T`.
fn whole<T: serde::de::DeserializeOwned>(raw: &[u8]) -> Result<T, String> {
    match postcard::take_from_bytes(raw) {
        Ok((b, [])) => Ok(b),
        Ok(_) => Err("bytes after the batch".into()),
        Err(e) => Err(format!("undecodable batch: {e}")),
    }
}

fn unzstd(packed: &[u8]) -> Result<Vec<u8>, String> {
    // The frame says how large it expands (the writer always records it):
    // that much is allowed and no more, so a small frame that inflates to a
    // gigabyte is refused at its declared size, in one allocation.
    let declared = match zstd::zstd_safe::get_frame_content_size(packed) {
        Ok(Some(n)) => n,
        Ok(None) => MAX_RAW,
        Err(_) => return Err("zstd: not a frame".into()),
    };
    if declared > MAX_RAW {
        return Err(format!(
            "a frame that says it expands to {declared} bytes, past {MAX_RAW}"
        ));
    }
    let raw = zstd::bulk::decompress(packed, declared as usize).map_err(|e| format!("zstd: {e}"))?;
    if (raw.len() as u64) < declared && declared != MAX_RAW {
        return Err(format!(
            "a frame that expands to {} bytes, not the {declared} it says",
            raw.len()
        ));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_frame_that_would_inflate_past_the_limit_is_refused_at_its_header() {
        use std::io::Write;
        // Under a megabyte that say (truly) they expand to 257 MiB of zeros.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).expect("encoder");
        enc.include_contentsize(true).expect("size");
        let total = MAX_RAW + (1 << 20);
        enc.set_pledged_src_size(Some(total)).expect("pledge");
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(total >> 20) {
            enc.write_all(&zeros).expect("write");
        }
        let bomb = enc.finish().expect("finish");
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        let e = unzstd(&bomb).expect_err("refused");
        assert!(e.contains("says it expands to 269484032 bytes"), "{e}");
        let small = zstd::bulk::compress(&[7u8; 4096], 3).expect("compress");
        assert_eq!(unzstd(&small).map(|r| r.len()), Ok(4096));
    }
}
