//! Man pages and shell completions, made from the command line's own
//! definitions (clap_mangen, clap_complete), so they cannot drift from the
//! flags. The packages write them at build time (`scripts/package.sh`).

use std::path::Path;

/// The completions of `cmd` (the binary `name`) for `shell`, on stdout.
/// Made whole first: clap_complete panics on a failed write (a closed
/// pipe), and a write here fails as an error.
pub fn completions(shell: clap_complete::Shell, cmd: &mut clap::Command, name: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, name, &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(())
}

/// The man pages of `cmd` into `dir`: NAME.1, and NAME-SUB.1 for each
/// subcommand that is not hidden. The directory is created if missing.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir).map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    Ok(())
}
