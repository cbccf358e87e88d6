//! Small helpers both binaries need at their edges.

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The longest duration any flag or setting takes: anything longer is a
/// typo, and would overflow when added to a clock.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(366 * 86_400);

/// Parses a command-line interval ("500ms", "1s", "10m"); zero is refused,
/// since nothing can be done every zero seconds, and so is anything past
/// `MAX_DURATION`.
pub fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be longer than zero".into()),
        Ok(d) if d > MAX_DURATION => Err("must be at most a year".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
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
}

/// Reads a shared secret (bench or telemetry token): the file's content,
/// trimmed. An empty file is refused, on both ends: an empty token would
/// match an empty guess.
pub fn read_token_file(path: &std::path::Path) -> Result<String, TokenFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
        path: shown.clone(),
        source,
    })?;
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
        assert_eq!(super::read_token_file(&good).expect("read"), "s3cret");
        let empty = dir.join("empty");
        std::fs::write(&empty, " \n").expect("write");
        let e = super::read_token_file(&empty).expect_err("empty");
        assert!(e.to_string().contains("is empty"), "{e}");
        let e = super::read_token_file(&dir.join("missing")).expect_err("missing");
        assert!(e.to_string().starts_with("cannot read the token file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn first_line_skips_blank_lines() {
        assert_eq!(super::first_line(b"\n  \n oops \nmore", "none"), "oops");
        assert_eq!(super::first_line(b"", "none"), "none");
    }
}
