//! What comes from outside (files, flags, peers), made safe: files are read
//! up to a bound, and text is escaped and shortened before it is printed,
//! so a hostfile pointed at /dev/zero or a host name full of terminal
//! escapes can neither exhaust memory nor reach the terminal.

use std::io::Read;
use std::path::Path;

/// The most any operator file (hostfile, config, theme, token) may hold.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Reads a text file of at most `max` bytes; a larger one (or an endless
/// one, like /dev/zero) is refused after reading just past the bound.
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<String> {
    let mut buf = Vec::new();
    open_regular(path)?.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {} MiB", max >> 20)));
    }
    let text = String::from_utf8(buf).map_err(|_| std::io::Error::other("not UTF-8 text"))?;
    // A byte-order mark is invisible and never part of the content.
    Ok(text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text))
}

/// Opens a regular file for reading, and nothing else. A FIFO with no
/// writer would block a plain open for ever and a device (/dev/zero) would
/// never end: the open does not wait (`O_NONBLOCK`, which a regular file
/// ignores), and the type is checked on what was opened, not on the path.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// Cuts `s` to at most `max` bytes, on a character boundary (a cut never
/// splits a character).
pub fn truncate_to(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

/// Control characters, the byte-order mark, and the characters that
/// reorder text on screen (bidi overrides and isolates, the direction
/// marks): a line from outside must read as it is.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{feff}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Whether `s` holds anything `printable` would escape.
pub fn has_unprintable(s: &str) -> bool {
    s.chars().any(needs_escape)
}

/// `s` for a one-line message: control characters escaped (`\x1b`, `\n`),
/// and at most `max_chars` characters, the rest counted.
pub fn printable(s: &str, max_chars: usize) -> String {
    // Nearly every name is printable and short already (a console converts
    // each GPU's process and pod names every second): one copy, no walk
    // that grows a string a character at a time.
    if s.len() <= max_chars && !s.chars().any(needs_escape) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    for (n, c) in s.chars().enumerate() {
        if n == max_chars {
            let rest = s.chars().count() - n;
            out.push_str(&format!("… ({rest} more characters)"));
            break;
        }
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// An error and its causes on one line, each cause added only where the
/// text so far does not already say it (many errors print their source).
pub fn error_line(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_oversized_files_are_refused() {
        let e = read_capped(Path::new("/dev/zero"), 1024).expect_err("endless");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let p = std::env::temp_dir().join(format!("fleetop-big-{}", std::process::id()));
        std::fs::write(&p, vec![b'x'; 2 << 20]).expect("write");
        let e = read_capped(&p, 1 << 20).expect_err("oversized");
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn controls_and_bidi_overrides_are_escaped_and_long_text_cut() {
        assert_eq!(
            printable("\u{1b}]0;T\u{7}\u{1b}[2J", 100),
            "\\u{1b}]0;T\\u{7}\\u{1b}[2J"
        );
        assert_eq!(printable("abc\u{202e}def", 100), "abc\\u{202e}def");
        assert_eq!(printable("a\u{2067}b", 100), "a\\u{2067}b");
        assert!(!has_unprintable("plain words: 79"));
        assert!(has_unprintable("x\u{200f}"));
        assert_eq!(printable("abcdef", 3), "abc… (3 more characters)");
    }

    #[test]
    fn a_byte_order_mark_is_dropped() {
        let p = std::env::temp_dir().join(format!("fleetop-bom-{}", std::process::id()));
        std::fs::write(&p, "\u{feff}gpu01\n").expect("write");
        assert_eq!(read_capped(&p, 100).expect("read"), "gpu01\n");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn terminal_escapes_are_shown_not_sent() {
        let s = printable("a\u{1b}]0;pwned\u{7}b\nc", 100);
        assert_eq!(s, "a\\u{1b}]0;pwned\\u{7}b\\nc");
        assert!(!s.chars().any(char::is_control));
        let long = printable(&"x".repeat(5_000_000), 10);
        assert_eq!(long, "xxxxxxxxxx… (4999990 more characters)");
    }

    #[test]
    fn causes_already_said_are_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read theme 'x': {0}")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(error_line(&e), "cannot read theme 'x': entity not found");
    }
}
