//! The agent's man pages, made from its command line's own definitions
//! (clap_mangen) so they cannot drift from the flags, and fleetop-agent(1)'s
//! sections past the flags: EXIT STATUS, ENVIRONMENT, FILES and EXAMPLES.
//! The package writes them at build time (`scripts/package.sh`).

use std::path::Path;

/// The man pages of `cmd` into `dir`: fleetop-agent.1 with the sections
/// below, and fleetop-agent-SUB.1 for each subcommand that is not hidden.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    man_pages_with(cmd, dir, SECTIONS)
}

const SECTIONS: &[Section] = &[
    (
        "EXIT STATUS",
        &[
            ("0", "Success; the agent stopped on SIGTERM or SIGINT."),
            (
                "1",
                "An error at start or while serving, said in one line: a listener that cannot be bound, a key or token refused, a sample that failed.",
            ),
            (
                "2",
                "A bad flag or config file: one line names the file, the line and the key.",
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
                "ROCM_PATH",
                "Where AMD SMI is looked for first: $ROCM_PATH/lib/libamd_smi.so (then the loader's path, then /opt/rocm/lib).",
            ),
            (
                "NVIDIA_VISIBLE_DEVICES",
                "Read by the NVIDIA container runtime, not by the agent: which GPUs a container sees (all, for a monitor).",
            ),
        ],
    ),
    (
        "FILES",
        &[
            (
                "/etc/fleetop/agent.toml",
                "The settings, one key per flag (the package's conffile); --config names another, none reads no file.",
            ),
            (
                "/etc/fleetop/agent.d/*.toml",
                "Site settings, read in name order after agent.toml; a later file wins. The package ships none.",
            ),
            (
                "/var/lib/fleetop-agent/",
                "The state directory (--state-dir; the unit's StateDirectory, 0700, the agent's own).",
            ),
            (
                "/var/lib/fleetop-agent/faults.json",
                "The fault journal: XIDs and other faults across restarts and reboots.",
            ),
            (
                "/var/lib/fleetop-agent/burnins.pb",
                "The burn-in journal: each suite this agent ran, who asked, each check and the verdict.",
            ),
            (
                "/var/lib/kubelet/pod-resources/kubelet.sock",
                "The kubelet's PodResources API: which pod holds each GPU (--kubelet-socket).",
            ),
            (
                "/dev/kmsg",
                "The kernel log: XIDs NVML misses, NVSwitch SXids (--kmsg; needs CAP_SYSLOG).",
            ),
            (
                "libnvidia-ml.so.1",
                "NVIDIA's NVML, from the driver, loaded at run time (--backend nvml or auto).",
            ),
        ],
    ),
    (
        "EXAMPLES",
        &[
            (
                "fleetop-agent config check",
                "Reads what a start reads and says ok, or what is wrong, in one line.",
            ),
            (
                "systemctl enable --now fleetop-agent",
                "Runs the packaged unit (fleetop-agent.service) after the check.",
            ),
            (
                "fleetop-agent sample --once --backend sim",
                "One sample of a simulated node, as JSON: no GPU needed.",
            ),
            (
                "fleetop-agent --tls-cert /etc/fleetop/agent.pem --tls-key /etc/fleetop/agent.key --token-file /etc/fleetop/telemetry.token",
                "Serves consoles over TLS and asks them for the telemetry token.",
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
