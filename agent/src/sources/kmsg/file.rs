//! A regular file in the kernel log's record format (`--kmsg FILE`: tests,
//! a saved log), read whole and then followed as it grows. Apart from the
//! device: a file is read in lines, on the sampler's own call, with no thread.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::{MAX_LINE, Pending};

/// The most a followed file is read in one sample (the rest next sample), so
/// a large saved log cannot stall one sample for long.
const MAX_FILE_READ_PER_SAMPLE: u64 = 8 << 20;

/// A regular file in the record format, read whole and then followed.
pub(super) struct FileFollower {
    pub(super) path: PathBuf,
    pub(super) file: File,
    /// Bytes consumed so far.
    pub(super) offset: u64,
    /// A line not yet ended by a newline (the writer is mid-line).
    pub(super) partial: Vec<u8>,
    /// Skipping the rest of a line longer than MAX_LINE.
    pub(super) skipping: bool,
}

impl FileFollower {
    /// Reads what was appended since the last call (at most a bound; the rest
    /// next time). A file that shrank was replaced or truncated: read again
    /// from its start.
    pub(super) fn poll(&mut self, pending: &mut Pending) {
        let len = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(_) => return,
        };
        if len < self.offset {
            match File::open(&self.path) {
                Ok(f) => self.file = f,
                Err(_) => return,
            }
            self.offset = 0;
            self.partial.clear();
            self.skipping = false;
        }
        if len == self.offset || self.file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut chunk = Vec::new();
        let want = (len - self.offset).min(MAX_FILE_READ_PER_SAMPLE);
        if (&mut self.file).take(want).read_to_end(&mut chunk).is_err() {
            return;
        }
        self.offset += chunk.len() as u64;
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let ended = piece.last() == Some(&b'\n');
            if self.skipping {
                self.skipping = !ended;
                continue;
            }
            self.partial.extend_from_slice(piece);
            if self.partial.len() > MAX_LINE {
                self.partial.clear();
                self.skipping = !ended;
                continue;
            }
            if ended {
                let line = String::from_utf8_lossy(&self.partial);
                pending.record(line.trim_end_matches(['\n', '\r']));
                self.partial.clear();
            }
        }
    }
}
