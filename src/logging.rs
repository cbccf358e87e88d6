//! Logs go to a file while the TUI owns the terminal, and to stderr for
//! headless commands: never over the screen, never on stdout.

use std::path::PathBuf;

use tracing_subscriber::EnvFilter;

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_env("FLEETOP_LOG").unwrap_or_else(|_| EnvFilter::new(default))
}

/// The log file of the TUI: `$XDG_STATE_HOME/fleetop/fleetop.log`.
pub fn log_path() -> PathBuf {
    if let Some(dir) = sandbox() {
        return dir.join("fleetop.log");
    }
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

/// The demo's own state directory, when this process runs one (`sandbox`).
static SANDBOX: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes this process a sandbox: its log, audit log, timeline and state
/// files go to a fresh private directory (0700 under the temporary
/// directory) instead of the user's, so a demo writes nothing a real node
/// could be judged by. Returns the directory, for removal at exit.
pub fn enter_sandbox() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for i in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("fleetop-demo-{}-{nanos:x}{i}", std::process::id()));
        // Never one that exists: another user may have made it.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                let _ = SANDBOX.set(dir.clone());
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no fresh directory for the demo's state"))
}

/// The demo's state directory, if this process is one.
pub fn sandbox() -> Option<&'static std::path::Path> {
    SANDBOX.get().map(PathBuf::as_path)
}
