//! The headless subcommands, each a thin layer over the library: parse,
//! resolve the SOURCE, call into `session`, `ops` or `export`, print.

pub mod bench;
pub mod export;
pub mod manual;
pub mod node;
pub mod record;
pub mod watch;
mod watch_kube;

use std::io::Write;

use crate::model::action::Plan;
use crate::ops::audit;

/// Asks on the terminal before `plan` runs; without a terminal, or without
/// a yes, refuses (and logs the refusal). The caller has shown the plan.
pub fn confirm(plan: &Plan, question: &str) -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal};
    let verb = plan.action.verb();
    let refuse = |why: &str| -> anyhow::Result<()> { audit::log(&audit::refused(plan, why)).map(|_| ()) };
    if !std::io::stdin().is_terminal() {
        refuse("not confirmed (no terminal, no --yes)")?;
        anyhow::bail!("not confirmed: stdin is not a terminal; pass --yes to {verb}");
    }
    let mut err = std::io::stderr().lock();
    write!(err, "{question} [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        refuse("not confirmed")?;
        anyhow::bail!("not confirmed: nothing was run");
    }
    Ok(())
}

/// `--alertmanager` / `--webhook` over the config's `[notify]`: the command line wins.
pub fn apply_notify_flags(flags: &crate::cli::NotifyFlags, cfg: &mut crate::config::NotifyConfig) {
    if flags.alertmanager.is_some() {
        cfg.alertmanager = flags.alertmanager.clone();
    }
    if flags.webhook.is_some() {
        cfg.webhook = flags.webhook.clone();
    }
}
