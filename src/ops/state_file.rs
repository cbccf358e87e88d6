//! Files in fleetop's state directory (beside the audit log): appended or
//! replaced whole, 0600 in a 0700 directory whatever the umask, and never
//! through a symbolic link planted in their place.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The file's directory: created 0700 where missing; an existing one is
/// used only if it is a real directory (not a link someone planted in its
/// place) that no one else may write to (a sticky one, like /tmp, aside):
/// what is in it is evidence.
fn ensure_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    let refuse = |why: String| Err(std::io::Error::other(format!("{}: {why}: refused", dir.display())));
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        }
        Err(e) => Err(e),
        Ok(m) if m.file_type().is_symlink() => refuse("is a symbolic link".into()),
        Ok(m) if !m.is_dir() => refuse("is not a directory".into()),
        Ok(m) if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 => refuse(format!(
            "others may write to it (mode {:o}); make it 0700 (chmod 700)",
            m.mode() & 0o7777
        )),
        Ok(_) => Ok(()),
    }
}

fn no_link(path: &Path, e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) if code == nix::errno::Errno::ELOOP as i32 => {
            std::io::Error::other(format!("{} is a symbolic link: refused", path.display()))
        }
        _ => e,
    }
}

/// The file opened is the directory's own: a regular file with no other
/// hard link (a link to a file elsewhere would be written, or read, through).
fn own_file(path: &Path, f: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other(format!(
            "{}: not a regular file: refused",
            path.display()
        )));
    }
    // In a shared sticky directory anyone may create the file first: a
    // history or an audit log someone else owns is a forgery.
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        return Err(std::io::Error::other(format!(
            "{}: owned by uid {}, not this user (uid {me}): refused",
            path.display(),
            m.uid()
        )));
    }
    if m.nlink() > 1 {
        return Err(std::io::Error::other(format!(
            "{}: has {} hard links, not fleetop's own file: refused",
            path.display(),
            m.nlink()
        )));
    }
    Ok(())
}

/// Opens a state file to read: never through a symbolic link, never
/// hanging on a FIFO planted in its place (opened without blocking), and
/// only a regular file of this user's with one link; anything else is
/// refused in one line.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| no_link(path, e))?;
    own_file(path, &f)?;
    Ok(f)
}

/// Reads a state file of at most `max` bytes: never through a symbolic
/// link, a FIFO or a hard link planted in its place (each refused in one
/// line), never hanging on the open.
pub fn read(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let f = open(path)?;
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {} MiB", max >> 20)));
    }
    String::from_utf8(buf).map_err(|_| std::io::Error::other("not UTF-8 text"))
}

/// Appends `bytes` in one write (so concurrent consoles do not interleave
/// lines), flushed to disk before this returns.
pub fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_dir(path)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| no_link(path, e))?;
    own_file(path, &f)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.sync_data()
}

/// Replaces the file with `bytes`: written whole to a new temporary file
/// (created, never opened through whatever is there), then renamed over it:
/// never half a file.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_dir(path)?;
    // A link planted in the file's place is refused, not quietly replaced:
    // someone put it there.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(std::io::Error::other(format!(
            "{} is a symbolic link: refused",
            path.display()
        )));
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&tmp)
        .map_err(|e| no_link(&tmp, e))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.sync_data()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn state_files_are_private_and_never_follow_a_planted_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state").join("x.jsonl");
        append(&p, b"one\n").expect("append");
        append(&p, b"two\n").expect("append");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "one\ntwo\n");
        assert_eq!(std::fs::metadata(&p).expect("meta").mode() & 0o777, 0o600);
        let d = std::fs::metadata(p.parent().expect("dir")).expect("meta");
        assert_eq!(d.mode() & 0o777, 0o700);
        replace(&p, b"whole\n").expect("replace");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "whole\n");
        assert_eq!(std::fs::metadata(&p).expect("meta").mode() & 0o777, 0o600);
        // A link in the file's place: refused, its target untouched.
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep").expect("write");
        let link = dir.path().join("state").join("y.jsonl");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let e = append(&link, b"x\n").expect_err("refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
        // A temporary file planted as a link: replace never writes through it.
        let tmp = dir
            .path()
            .join("state")
            .join(format!("x.jsonl.{}.tmp", std::process::id()));
        std::fs::remove_file(&tmp).ok();
        std::os::unix::fs::symlink(&target, &tmp).expect("symlink");
        replace(&p, b"new\n").expect("replaced, the link removed first");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
        // A directory others may write to, or a link in the directory's
        // place: refused, nothing written.
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = append(&open.join("a.jsonl"), b"x\n").expect_err("refused");
        assert!(e.to_string().contains("others may write to it (mode 777)"), "{e}");
        assert!(!open.join("a.jsonl").exists());
        let linked = dir.path().join("linked");
        std::os::unix::fs::symlink(dir.path().join("state"), &linked).expect("symlink");
        let e = replace(&linked.join("b.json"), b"{}").expect_err("refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!dir.path().join("state").join("b.json").exists());
    }

    #[test]
    fn planted_links_fifos_and_hard_links_are_refused_read_or_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, "[]").expect("w");
        replace(&state.join("ok.json"), b"[]").expect("a plain file");
        assert_eq!(read(&state.join("ok.json"), 1 << 20).expect("read"), "[]");
        // A symbolic link: refused to read, and not replaced quietly.
        let link = state.join("silences.json");
        std::os::unix::fs::symlink(&elsewhere, &link).expect("symlink");
        let e = read(&link, 1 << 20).expect_err("a link");
        assert!(e.to_string().contains("symbolic link: refused"), "{e}");
        let e = replace(&link, b"[1]").expect_err("a link");
        assert!(e.to_string().contains("symbolic link: refused"), "{e}");
        assert!(std::fs::symlink_metadata(&link).expect("m").file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&elsewhere).expect("r"), "[]");
        // A FIFO: refused at once, never a hang.
        let fifo = state.join("remediate.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo, 1 << 20).expect_err("a FIFO");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        // A hard link to a file elsewhere: neither read nor written through.
        let hard = state.join("audit.jsonl");
        std::fs::hard_link(&elsewhere, &hard).expect("link");
        let e = append(&hard, b"x\n").expect_err("a hard link");
        assert!(e.to_string().contains("hard links"), "{e}");
        assert!(read(&hard, 1 << 20).is_err());
        assert_eq!(std::fs::read_to_string(&elsewhere).expect("r"), "[]");
    }
    #[test]
    fn a_state_file_another_user_owns_is_refused_read_or_appended() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        replace(&state.join("timeline.jsonl"), b"{}\n").expect("a plain file");
        let p = state.join("timeline.jsonl");
        let me = nix::unistd::geteuid().as_raw();
        let other = if me == 65_534 { 65_533 } else { 65_534 };
        if std::os::unix::fs::lchown(&p, Some(other), None).is_err() {
            eprintln!("cannot give a file to another user here (not root): the check is not exercised");
            return;
        }
        // As someone else planted it in a shared sticky directory.
        let e = read(&p, 1 << 20).expect_err("someone else's history");
        assert!(
            e.to_string()
                .contains(&format!("owned by uid {other}, not this user (uid {me}): refused")),
            "{e}"
        );
        assert!(!e.to_string().contains('\n'));
        let e = append(&p, b"x\n").expect_err("someone else's history");
        assert!(e.to_string().contains("not this user"), "{e}");
        assert!(open(&p).is_err());
        assert_eq!(std::fs::metadata(&p).expect("m").len(), 3, "left as it was");
    }
}
