//! The agent's own files in its state directory (the fault journal, the
//! burn-in journal): written whole and atomically (a temporary file beside
//! the old one, 0600, never through a link, synced, then renamed over it),
//! read never through a link, never from a FIFO or a file with other hard
//! links, and never past a size bound.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Writes `bytes` as `dir/name`: a crash leaves the old file or the new
/// one, never half of one.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
    };
    let mut f = match create() {
        Ok(f) => f,
        // Left by an earlier agent that had this pid and died mid-write
        // (removing a link removes the link, not what it names).
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp)?;
            create()?
        }
        Err(e) => return Err(e),
    };
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    drop(f);
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, dir.join(name))) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename itself is durable once the directory is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The bytes of the agent's file at `path`; `None` when there is none yet.
/// Never through a link (the directory is ours, a link in it is not), and
/// non-blocking, so a FIFO planted in its place cannot hang the open: the
/// type is checked on what was opened.
pub fn read_own(path: &Path, max_bytes: u64) -> std::io::Result<Option<Vec<u8>>> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.nlink() > 1 {
        return Err(std::io::Error::other("has other hard links: not the agent's own file"));
    }
    let mut buf = Vec::new();
    f.take(max_bytes + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max_bytes {
        return Err(std::io::Error::other(format!("larger than {} MiB", max_bytes >> 20)));
    }
    Ok(Some(buf))
}
