//! [`ThemeError`]: everything that can go wrong loading a theme, each a
//! one-line message naming the file (and line and key path where known).

use super::{MAX_PARENT_DEPTH, Theme};

/// Everything that can go wrong loading a theme. Every message is one line
/// naming the file (and line and key path where there is one) because it is
/// shown in a status bar or printed before the TUI starts.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    /// A value that parsed as TOML but is not acceptable (colour, stop count).
    #[error("{file}:{line}: {key}: {message}")]
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
    /// TOML syntax errors and serde errors (unknown key, wrong type).
    #[error("{file}:{line}: {}{message}", key_prefix(.key))]
    Syntax {
        file: String,
        line: usize,
        /// Best-effort key path from the surrounding text; may be empty.
        key: String,
        message: String,
    },
    #[error("{file}:{line}: parent: no theme named '{name}'")]
    UnknownParent { file: String, line: usize, name: String },
    #[error("{file}: parent cycle: {chain}")]
    Cycle { file: String, chain: String },
    #[error("{file}: parent chain deeper than {MAX_PARENT_DEPTH}: {chain}")]
    TooDeep { file: String, chain: String },
    #[error("{file}: {key} missing (a theme without a parent must define every key)")]
    Missing { file: String, key: String },
    #[error("theme '{name}': no such theme (shipped: {})", Theme::SHIPPED.join(", "))]
    NoSuchTheme { name: String },
    #[error("cannot read theme '{path}': {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}
