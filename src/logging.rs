//! Logs go to a file while the TUI owns the terminal, and to stderr for
//! headless commands: never over the screen, never on stdout.

use std::path::PathBuf;

use tracing_subscriber::EnvFilter;

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_env("FLEETOP_LOG").unwrap_or_else(|_| EnvFilter::new(default))
}

/// The log file of the TUI: `$XDG_STATE_HOME/fleetop/fleetop.log`.
pub fn log_path() -> PathBuf {
    dirs::state_dir()
        .or_else(dirs::cache_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("fleetop")
        .join("fleetop.log")
}

/// For the TUI. A log file that cannot be opened means no logs, not no console.
pub fn to_file() -> Option<PathBuf> {
    let path = log_path();
    // The state directory holds the audit log too: private from the start.
    {
        use std::os::unix::fs::DirBuilderExt;
        let dir = path.parent()?;
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .ok()?;
        }
    }
    // Private (a log says which nodes were drained and by whom), never
    // through a link planted in its place, never a file linked elsewhere.
    let file = {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&path)
            .ok()?;
        let m = f.metadata().ok()?;
        if !m.is_file() || m.nlink() > 1 {
            return None;
        }
        f.set_permissions(std::fs::Permissions::from_mode(0o600)).ok()?;
        f
    };
    tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_env_filter(filter("info"))
        .try_init()
        .ok()?;
    Some(path)
}

/// How headless commands write their log lines: text, or one JSON object a
/// line for log shippers (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// For headless commands.
pub fn to_stderr(format: LogFormat) {
    to_stderr_at("warn", format);
}

/// For headless commands, at `level` unless FLEETOP_LOG says otherwise
/// (`fleetop watch` logs each alert it raises or resolves at info).
pub fn to_stderr_at(level: &str, format: LogFormat) {
    use std::io::IsTerminal;
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour for a person at a terminal, not escape codes in the journal.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter(level));
    let _ = match format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
}
