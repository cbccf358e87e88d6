//! Writes a recording: a thread of its own takes updates from a channel,
//! batches them, and writes one compressed frame at least every second
//! (synced to disk, so a crash loses at most that second). Files are only
//! ever created new and appended to; past `rotate_size` the next frame goes
//! to a new segment (FILE.1, FILE.2, ...) that starts with what a replay of
//! it alone needs (`FrameKind::CarriedOver`).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::sched;
use crate::model::target::Target;
use crate::model::update::{Event, Update};
use crate::record::{
    Batch, Entry, FRAME_MAGIC, FrameKind, Header, MAGIC, RecTarget, RecordError, SCHEMA_VERSION, delta, segment_path,
};

/// zstd's default level: ~10x on this data at a fraction of a core.
const ZSTD_LEVEL: i32 = 3;
/// The default `RecorderOptions::max_batch`.
pub const MAX_BATCH: usize = 50_000;

#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// The first segment; it must not exist yet.
    pub path: PathBuf,
    /// Start a new segment once one holds this many bytes.
    pub rotate_size: Option<u64>,
    /// The longest an update waits in memory before it is on disk.
    pub flush_every: Duration,
    /// A frame is written early once it holds this many updates (a fleet's
    /// history arriving at once), so no frame grows without bound.
    pub max_batch: usize,
}

impl RecorderOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RecorderOptions {
            path: path.into(),
            rotate_size: None,
            flush_every: Duration::from_secs(1),
            max_batch: MAX_BATCH,
        }
    }
}

/// What a finished recording holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub updates: u64,
    pub frames: u64,
    pub segments: u32,
    /// Bytes on disk, every segment together.
    pub bytes: u64,
}

/// A recording being written. Dropping it without `finish` still writes
/// what it was given (the thread flushes when the channel closes).
pub struct Recorder {
    tx: Option<mpsc::Sender<(i64, Update)>>,
    thread: Option<JoinHandle<Result<Stats, RecordError>>>,
    failed: Arc<Mutex<Option<String>>>,
    pub path: PathBuf,
}

impl Recorder {
    /// Creates the first segment and writes its header; fails (one line
    /// naming the file) if it exists or cannot be written.
    pub fn create(opts: RecorderOptions, targets: &[Target], scheduler_known: bool) -> Result<Recorder, RecordError> {
        let now = crate::model::time::now_ms();
        let header = Header {
            fleetop_version: env!("CARGO_PKG_VERSION").to_string(),
            recording_id: (now as u64) << 20 ^ u64::from(std::process::id()),
            segment: 0,
            started_ms: now,
            targets: targets.iter().map(RecTarget::from).collect(),
            scheduler_known,
        };
        let seg = Segment::create(&opts.path, &header)?;
        seg.file.sync_data().map_err(|e| io(&opts.path, e))?;
        let header_bytes = seg.bytes;
        let (tx, rx) = mpsc::channel();
        let failed = Arc::new(Mutex::new(None));
        let state = Writer {
            opts: opts.clone(),
            header,
            seg,
            nodes: vec![NodeCarry::default(); targets.len()],
            scheduler: None,
            timeline: Vec::new(),
            stats: Stats {
                segments: 1,
                bytes: header_bytes,
                ..Stats::default()
            },
            failed: failed.clone(),
            last_ms: i64::MIN,
            chain: delta::Chain::default(),
        };
        let thread = std::thread::Builder::new()
            .name("recorder".into())
            .spawn(move || state.run(rx))
            .map_err(|e| io(&opts.path, e))?;
        Ok(Recorder {
            tx: Some(tx),
            thread: Some(thread),
            failed,
            path: opts.path,
        })
    }

    /// Queues one update that arrived at `time_ms`; false once the writer
    /// has failed (see `error`).
    pub fn record(&self, time_ms: i64, u: &Update) -> bool {
        // A burn-in's record is the agent's evidence, not part of a
        // recording (schema 2 predates it, as it does the description's
        // health): a replay shows none.
        if let Update::Node {
            event: Event::BurnIn(_),
            ..
        } = u
        {
            return self.tx.is_some();
        }
        match &self.tx {
            Some(tx) => tx.send((time_ms, u.clone())).is_ok(),
            None => false,
        }
    }

    /// Shared with the writer thread: why writing stopped, once it has.
    pub fn failed(&self) -> Arc<Mutex<Option<String>>> {
        self.failed.clone()
    }

    /// Why writing stopped, if it did.
    pub fn error(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|e| e.clone())
    }

    /// Writes what is queued and closes the recording.
    pub fn finish(mut self) -> Result<Stats, RecordError> {
        self.tx.take();
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(RecordError::Encode {
                path: self.path.clone(),
                what: "the recorder thread panicked".into(),
            }),
            None => Ok(Stats::default()),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn io(path: &Path, source: std::io::Error) -> RecordError {
    RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One segment file being appended to.
struct Segment {
    path: PathBuf,
    file: File,
    bytes: u64,
}

impl Segment {
    fn create(path: &Path, header: &Header) -> Result<Segment, RecordError> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io(path, e))?;
        let raw = postcard::to_allocvec(header).map_err(|e| RecordError::Encode {
            path: path.to_path_buf(),
            what: e.to_string(),
        })?;
        // Compressed for its checksum: a flipped byte in a node's name is found too.
        let body = compress(&raw).map_err(|e| io(path, e))?;
        let mut buf = Vec::with_capacity(14 + body.len());
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&SCHEMA_VERSION.to_le_bytes());
        buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
        buf.extend_from_slice(&body);
        file.write_all(&buf).map_err(|e| io(path, e))?;
        Ok(Segment {
            path: path.to_path_buf(),
            file,
            bytes: buf.len() as u64,
        })
    }
}

/// What a node's replay needs to start mid-recording.
#[derive(Debug, Clone, Default)]
struct NodeCarry {
    info: Option<Box<NodeDesc>>,
    last: Option<Box<NodeSample>>,
    /// The last two samples with NVLink counters (not every sample has
    /// them): NVLink rates are derived from two.
    nvlink: [Option<Box<NodeSample>>; 2],
    caught_up: bool,
    down: Option<String>,
}

struct Writer {
    opts: RecorderOptions,
    header: Header,
    seg: Segment,
    nodes: Vec<NodeCarry>,
    scheduler: Option<Arc<sched::Snapshot>>,
    /// Timeline events read from disk and reported so far (the newest
    /// `CARRIED_EVENTS`), carried into each new segment.
    timeline: Vec<crate::model::timeline::Event>,
    stats: Stats,
    failed: Arc<Mutex<Option<String>>>,
    /// The time of the last update taken (carried-over frames bear it).
    last_ms: i64,
    /// Each node's last sample in this segment, for the next one's delta.
    chain: delta::Chain,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<(i64, Update)>) -> Result<Stats, RecordError> {
        let r = self.pump(&rx);
        if let Err(e) = &r
            && let Ok(mut f) = self.failed.lock()
        {
            *f = Some(e.to_string());
        }
        // Dropping the receiver makes every later `record` return false.
        drop(rx);
        r
    }

    fn pump(&mut self, rx: &mpsc::Receiver<(i64, Update)>) -> Result<Stats, RecordError> {
        let mut batch: Vec<(i64, Update)> = Vec::new();
        let mut deadline = Instant::now() + self.opts.flush_every;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok((t, u)) => {
                    self.track(&u);
                    // Times never go back inside a recording (a clock step
                    // would otherwise reorder what replay applies).
                    let t = t.max(self.last_ms);
                    self.last_ms = t;
                    batch.push((t, u));
                    if batch.len() >= self.opts.max_batch.max(1) {
                        self.flush(&mut batch)?;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.flush(&mut batch)?;
                    deadline = Instant::now() + self.opts.flush_every;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.flush(&mut batch)?;
                    return Ok(self.stats);
                }
            }
        }
    }

    fn track(&mut self, u: &Update) {
        match u {
            Update::Node { node, event } => {
                let Some(n) = self.nodes.get_mut(*node) else { return };
                match event {
                    Event::Info(d) => {
                        n.info = Some(d.clone());
                        n.caught_up = false;
                        n.down = None;
                    }
                    Event::Sample(s) => {
                        if s.gpus.iter().any(|g| !g.nvlink_tx_kib.is_empty()) {
                            n.nvlink = [n.nvlink[1].take(), Some(s.clone())];
                        }
                        n.last = Some(s.clone());
                    }
                    Event::CaughtUp => n.caught_up = true,
                    Event::BurnIn(_) => {}
                    Event::Down(e) => {
                        n.down = Some(e.clone());
                        n.caught_up = false;
                    }
                }
            }
            Update::Scheduler(s) => self.scheduler = Some(s.clone()),
            Update::Timeline(events) => {
                self.timeline.extend(events.iter().cloned());
                let over = self.timeline.len().saturating_sub(CARRIED_EVENTS);
                self.timeline.drain(..over);
            }
            _ => {}
        }
    }

    /// Writes `batch` as one frame (if it holds anything), then rotates if
    /// the segment has grown past its size.
    fn flush(&mut self, batch: &mut Vec<(i64, Update)>) -> Result<(), RecordError> {
        if batch.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(batch);
        self.stats.updates += entries.len() as u64;
        self.write_frame(FrameKind::Data, entries)?;
        if self.opts.rotate_size.is_some_and(|max| self.seg.bytes >= max) {
            self.rotate()?;
        }
        Ok(())
    }

    fn write_frame(&mut self, kind: FrameKind, entries: Vec<(i64, Update)>) -> Result<(), RecordError> {
        let path = self.seg.path.clone();
        let encode = |what: String| RecordError::Encode {
            path: path.clone(),
            what,
        };
        let base_ms = entries.first().map_or(0, |(t, _)| *t);
        let mut batch = Batch {
            base_ms,
            entries: Vec::with_capacity(entries.len()),
            columns: Vec::new(),
        };
        let mut nums = Vec::new();
        for (t, u) in entries {
            let dt = (t - base_ms).clamp(0, i64::from(u32::MAX)) as u32;
            // A carried-over frame is written whole: the chain starts at the
            // segment's first data frame, whether or not a replay reads it.
            let entry = match u {
                Update::Node {
                    node,
                    event: Event::Sample(s),
                } if kind == FrameKind::Data => {
                    let p = self.chain.pack(node, &s).map_err(|e| encode(e.to_string()))?;
                    let entry = Entry::Sample {
                        node: node as u32,
                        nums: p.nums.len() as u32,
                        strs: p.strs,
                        raws: p.raws,
                    };
                    nums.push(p.nums);
                    entry
                }
                Update::Scheduler(snap) => {
                    let parts: BTreeMap<String, Vec<String>> = (snap.nodes.iter())
                        .filter(|(_, n)| !n.partitions.is_empty())
                        .map(|(name, n)| (name.clone(), n.partitions.clone()))
                        .collect();
                    batch.entries.push((dt, Entry::Update(Update::Scheduler(snap))));
                    if parts.is_empty() {
                        continue;
                    }
                    Entry::Partitions(parts)
                }
                u => Entry::Update(u),
            };
            batch.entries.push((dt, entry));
        }
        batch.columns = delta::to_columns(&nums);
        let raw = postcard::to_allocvec(&batch).map_err(|e| encode(e.to_string()))?;
        let packed = compress(&raw).map_err(|e| io(&path, e))?;
        let mut buf = Vec::with_capacity(packed.len() + super::FRAME_HEAD);
        buf.extend_from_slice(FRAME_MAGIC);
        buf.push(kind as u8);
        buf.extend_from_slice(&(packed.len() as u32).to_le_bytes());
        buf.extend_from_slice(&packed);
        self.seg.file.write_all(&buf).map_err(|e| io(&path, e))?;
        // On disk, not only in the page cache: a crash of the machine, not
        // just of fleetop, loses at most this second.
        self.seg.file.sync_data().map_err(|e| io(&path, e))?;
        self.seg.bytes += buf.len() as u64;
        self.stats.bytes += buf.len() as u64;
        self.stats.frames += 1;
        Ok(())
    }

    /// Starts the next segment: its header, then what a replay of it alone
    /// needs to know from before (descriptions, last samples, link states,
    /// the scheduler's view).
    fn rotate(&mut self) -> Result<(), RecordError> {
        let n = self.header.segment + 1;
        let path = segment_path(&self.opts.path, n);
        self.header.segment = n;
        let seg = Segment::create(&path, &self.header)?;
        self.stats.bytes += seg.bytes;
        self.seg = seg;
        self.chain = delta::Chain::default();
        self.stats.segments += 1;
        let now = self.last_ms;
        let mut carried = Vec::new();
        for (node, n) in self.nodes.iter().enumerate() {
            let mut push = |event| carried.push((now, Update::Node { node, event }));
            if let Some(d) = &n.info {
                push(Event::Info(d.clone()));
            }
            for s in n.nvlink.iter().flatten() {
                if n.last.as_ref().is_some_and(|l| l.seq != s.seq) {
                    push(Event::Sample(s.clone()));
                }
            }
            if let Some(s) = &n.last {
                push(Event::Sample(s.clone()));
            }
            if n.caught_up {
                push(Event::CaughtUp);
            }
            if let Some(e) = &n.down {
                push(Event::Down(e.clone()));
            }
        }
        if let Some(s) = &self.scheduler {
            carried.push((now, Update::Scheduler(s.clone())));
        }
        if !self.timeline.is_empty() {
            carried.push((now, Update::Timeline(self.timeline.clone())));
        }
        self.write_frame(FrameKind::CarriedOver, carried)
    }
}

/// Timeline events carried into a new segment at most.
const CARRIED_EVENTS: usize = 10_000;

fn compress(raw: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = zstd::stream::Encoder::new(Vec::with_capacity(raw.len() / 4), ZSTD_LEVEL)?;
    // A flipped bit anywhere in the frame is then found, never replayed.
    enc.include_checksum(true)?;
    enc.include_contentsize(true)?;
    enc.set_pledged_src_size(Some(raw.len() as u64))?;
    enc.write_all(raw)?;
    enc.finish()
}
