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
/// fleetop(1) gains EXIT STATUS, ENVIRONMENT, FILES and EXAMPLES.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    man_pages_with(cmd, dir, SECTIONS)
}

/// fleetop(1)'s sections past the flags.
const SECTIONS: &[Section] = &[
    (
        "EXIT STATUS",
        &[
            ("0", "Success."),
            (
                "1",
                "An error, said in one line on stderr: a source that cannot be read, an action refused or failed on any node, a bad config file.",
            ),
            (
                "2",
                "A bad flag (the usage is printed), or the console started without a terminal (use fleetop export there).",
            ),
        ],
    ),
    (
        "ENVIRONMENT",
        &[
            (
                "FLEETOP_LOG",
                "The log filter, as RUST_LOG is read: info by default, debug for more.",
            ),
            (
                "FLEETOP_AUDIT_LOG",
                "The audit log's path instead of $XDG_STATE_HOME/fleetop/audit.jsonl; silences.json, remediate.json and timeline.jsonl then lie beside it.",
            ),
            (
                "XDG_CONFIG_HOME",
                "Where the config file is looked for: $XDG_CONFIG_HOME/fleetop/config.toml (default ~/.config).",
            ),
            (
                "XDG_STATE_HOME",
                "Where the log, the audit log and the console's state go: $XDG_STATE_HOME/fleetop (default ~/.local/state).",
            ),
            ("KUBECONFIG", "The cluster of --kubernetes, as kubectl finds it."),
        ],
    ),
    (
        "FILES",
        &[
            (
                "~/.config/fleetop/config.toml",
                "Settings: hosts, sources, [agents] (each node's agent by node name, for Slurm, Kubernetes and Ray), thresholds, theme (fleetop --help names each key's flag; docs/config.md every key).",
            ),
            (
                "~/.local/state/fleetop/audit.jsonl",
                "The audit log: one JSON line for each action tried (drain, resume, cancel, burn-in, signal, silence), refused ones too. 0600, in a 0700 directory.",
            ),
            (
                "~/.local/state/fleetop/silences.json",
                "The silences in force, kept across restarts.",
            ),
            (
                "~/.local/state/fleetop/remediate.json",
                "What fleetop remediate did and is doing, kept across restarts.",
            ),
            (
                "~/.local/state/fleetop/timeline.jsonl",
                "Each node's events (flags raised and cleared, actions), one JSON line each.",
            ),
            (
                "~/.local/state/fleetop/fleetop.log",
                "The console's log while it owns the terminal.",
            ),
        ],
    ),
    (
        "EXAMPLES",
        &[
            (
                "fleetop --demo",
                "A simulated fleet: no agents, nothing changed anywhere.",
            ),
            (
                "fleetop --hosts 'gpu[01-64]' --tls-ca /etc/fleetop/ca.pem",
                "Every node's agent, over TLS.",
            ),
            ("fleetop --slurm", "The nodes Slurm knows, with their jobs and states."),
            (
                "fleetop --dcgm-exporter 'gpu[01-64]'",
                "Each node's dcgm-exporter instead of an agent.",
            ),
            (
                "fleetop export --once --hosts 'gpu[01-64]'",
                "One JSON snapshot of the fleet on stdout, for scripts.",
            ),
        ],
    ),
];

/// A section a man page gains past what clap knows: a title and its items,
/// each a term and what it says (an empty term: a paragraph).
pub type Section = (&'static str, &'static [(&'static str, &'static str)]);

/// Plain text as roff: backslashes and hyphens escaped, a line that would
/// start with a control character guarded.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The man pages of `cmd` into `dir` (NAME.1, and NAME-SUB.1 for each
/// subcommand that is not hidden; the directory made if missing), the top
/// page with `sections` after clap's own, before VERSION, as man-pages(7)
/// orders them.
pub fn man_pages_with(cmd: clap::Command, dir: &Path, sections: &[Section]) -> anyhow::Result<()> {
    use std::io::Write;
    let err = |e: std::io::Error| anyhow::anyhow!("--out {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(err)?;
    clap_mangen::generate_to(cmd.clone(), dir).map_err(err)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render_title(&mut page).map_err(err)?;
    man.render_name_section(&mut page).map_err(err)?;
    man.render_synopsis_section(&mut page).map_err(err)?;
    man.render_description_section(&mut page).map_err(err)?;
    man.render_options_section(&mut page).map_err(err)?;
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut page).map_err(err)?;
    }
    if cmd.get_after_long_help().is_some() || cmd.get_after_help().is_some() {
        man.render_extra_section(&mut page).map_err(err)?;
    }
    for (title, items) in sections {
        writeln!(page, ".SH \"{title}\"").map_err(err)?;
        for (term, text) in *items {
            if term.is_empty() {
                writeln!(page, ".PP\n{}", roff_text(text)).map_err(err)?;
            } else {
                writeln!(page, ".TP\n\\fB{}\\fR\n{}", roff_text(term), roff_text(text)).map_err(err)?;
            }
        }
    }
    if cmd.get_version().is_some() || cmd.get_long_version().is_some() {
        man.render_version_section(&mut page).map_err(err)?;
    }
    std::fs::write(dir.join(man.get_filename()), page).map_err(err)?;
    Ok(())
}
