//! Files in fleetop's state directory (beside the audit log): appended or
//! replaced whole, 0600 in a 0700 directory whatever the umask, and never
//! through a symbolic link planted in their place.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

fn ensure_dir(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn no_link(path: &Path, e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) if code == nix::errno::Errno::ELOOP as i32 => {
            std::io::Error::other(format!("{} is a symbolic link: refused", path.display()))
        }
        _ => e,
    }
}

/// Appends `bytes` in one write (so concurrent consoles do not interleave
/// lines), flushed to disk before this returns.
pub fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_dir(path)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|e| no_link(path, e))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.sync_data()
}

/// Replaces the file with `bytes`: written whole to a new temporary file
/// (created, never opened through whatever is there), then renamed over it:
/// never half a file.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_dir(path)?;
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
    }
}
