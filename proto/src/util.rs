//! Small helpers both binaries need at their edges.

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The longest duration any flag or setting takes (a year, as humantime
/// counts one): anything longer is a typo, and would overflow when added to
/// a clock.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(31_557_600);

/// Parses a command-line interval ("500ms", "1s", "10m") for flags with no
/// tighter range of their own: longer than zero, since nothing can be done
/// every zero seconds, and at most `MAX_DURATION`.
pub fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    parse_bounded_duration(s, std::time::Duration::from_millis(1), MAX_DURATION)
}

/// Parses a duration for a flag or key that must lie in `[min, max]`
/// ("500ms", "10m"): anything outside is refused in one line naming the
/// value and the range, so no later arithmetic (an `Instant` plus it, a ring
/// sized from it) can overflow or allocate without bound.
pub fn parse_bounded_duration(
    s: &str,
    min: std::time::Duration,
    max: std::time::Duration,
) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| format!("'{s}' is not a duration ({e})"))?;
    let show = |d: std::time::Duration| humantime::format_duration(d).to_string();
    if d < min || d > max {
        return Err(format!("'{s}' is out of range: from {} to {}", show(min), show(max)));
    }
    Ok(d)
}

/// The first non-empty line of a program's complaint, for one-line errors.
pub fn first_line(text: &[u8], otherwise: &str) -> String {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(otherwise)
        .to_string()
}

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {0} is empty")]
    Empty(String),
    #[error("the token file {path} is readable by group or others (mode {mode:04o}): chmod 600 it")]
    Exposed { path: String, mode: u32 },
}

/// Reads a shared secret (bench or telemetry token): the file's content,
/// trimmed. An empty file is refused, on both ends: an empty token would
/// match an empty guess. So is a file group or others can read: a secret
/// every local user can read is no secret (the caller logs the refusal).
pub fn read_token_file(path: &std::path::Path) -> Result<String, TokenFileError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display().to_string();
    let read_err = |source| TokenFileError::Read {
        path: shown.clone(),
        source,
    };
    // A FIFO would block the open for ever: regular files only.
    if !std::fs::metadata(path).map_err(read_err)?.is_file() {
        return Err(read_err(std::io::Error::other("not a regular file")));
    }
    let file = std::fs::File::open(path).map_err(read_err)?;
    // The mode of the file opened, not of whatever the path names later.
    let mode = file.metadata().map_err(read_err)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenFileError::Exposed { path: shown, mode });
    }
    // A token is short: a few KB is plenty, and /dev/zero is not a token.
    let mut text = String::new();
    file.take(64 * 1024).read_to_string(&mut text).map_err(read_err)?;
    let token = text.trim();
    if token.is_empty() {
        return Err(TokenFileError::Empty(shown));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn intervals_must_be_positive() {
        assert_eq!(
            super::parse_interval("250ms"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert!(super::parse_interval("0s").is_err());
        assert!(super::parse_interval("300000000000y").is_err());
        assert!(super::parse_interval("367d").is_err());
        assert!(super::parse_interval("soon").is_err());
    }

    #[test]
    fn token_files_must_hold_a_token() {
        let dir = std::env::temp_dir().join(format!("fleetop-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let good = dir.join("good");
        std::fs::write(&good, "s3cret\n").expect("write");
        set_mode(&good, 0o600);
        assert_eq!(super::read_token_file(&good).expect("read"), "s3cret");
        let empty = dir.join("empty");
        std::fs::write(&empty, " \n").expect("write");
        set_mode(&empty, 0o600);
        let e = super::read_token_file(&empty).expect_err("empty");
        assert!(e.to_string().contains("is empty"), "{e}");
        let e = super::read_token_file(&dir.join("missing")).expect_err("missing");
        assert!(e.to_string().starts_with("cannot read the token file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn set_mode(p: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn token_files_readable_by_others_are_refused() {
        let dir = std::env::temp_dir().join(format!("fleetop-token-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("token");
        std::fs::write(&p, "s3cret\n").expect("write");
        for mode in [0o644, 0o640, 0o604] {
            set_mode(&p, mode);
            let e = super::read_token_file(&p).expect_err("exposed");
            assert!(e.to_string().contains("readable by group or others"), "{e}");
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
        set_mode(&p, 0o400);
        assert_eq!(super::read_token_file(&p).expect("read"), "s3cret");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bounded_durations_refuse_what_is_out_of_range() {
        use std::time::Duration;
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(3600));
        assert_eq!(
            super::parse_bounded_duration("1s", min, max),
            Ok(Duration::from_secs(1))
        );
        let e = super::parse_bounded_duration("1ms", min, max).expect_err("too short");
        assert!(e.contains("'1ms' is out of range: from 100ms to 1h"), "{e}");
        let e = super::parse_bounded_duration("300000000000y", min, max).expect_err("huge");
        assert!(e.contains("300000000000y"), "{e}");
        let e = super::parse_bounded_duration("soon", min, max).expect_err("nonsense");
        assert!(e.contains("'soon' is not a duration"), "{e}");
    }

    #[test]
    fn first_line_skips_blank_lines() {
        assert_eq!(super::first_line(b"\n  \n oops \nmore", "none"), "oops");
        assert_eq!(super::first_line(b"", "none"), "none");
    }
}
