//! The agent's config file (`--config`, default `/etc/fleetop/agent.toml`):
//! one TOML key per command-line flag, named as the flag (`--state-dir` is
//! `state_dir`), with no sections. The file becomes flags placed before
//! the command line's own, so a flag given on the command line wins.
//!
//! A key that is no flag, a value of the wrong type, and a value the flag
//! refuses are each one error naming the file and the line. Config
//! management runs `fleetop-agent config check` before a restart.

use std::path::{Path, PathBuf};

/// Where the agent looks for its config file when `--config` is not given
/// (read only if it exists).
pub const DEFAULT_PATH: &str = "/etc/fleetop/agent.toml";

/// Why a config file cannot be used, naming the file and, where there is
/// one, the line.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{}{}: {what}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub what: String,
}

/// Flags the file may not set: they choose the file or print and exit.
const NOT_IN_A_FILE: &[&str] = &["config", "help", "version"];

/// The flags `text` (the file at `path`) sets for `cmd`, as arguments to
/// place before the command line's own. Each value is checked by the flag's
/// own parser, so a bad one is refused here with its line, not later
/// without one.
pub fn args(cmd: &clap::Command, path: &Path, text: &str) -> Result<Vec<String>, ConfigError> {
    let err = |line: Option<usize>, what: String| ConfigError {
        path: path.to_path_buf(),
        line,
        what,
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        err(line, e.message().trim().to_string())
    })?;
    let mut out = Vec::new();
    // (key, line, the flag's argument) for the check below.
    let mut given: Vec<(String, Option<usize>, String)> = Vec::new();
    for (key, value) in &table {
        let line = line_of(text, key);
        if value.is_table() {
            return Err(err(line, format!("`[{key}]`: no sections; every key is a flag")));
        }
        let flag = key.replace('_', "-");
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(flag.as_str()) && !NOT_IN_A_FILE.contains(&flag.as_str()));
        let Some(arg) = arg else {
            return Err(err(
                line,
                format!("unknown key `{key}`: no flag --{flag} (see fleetop-agent --help)"),
            ));
        };
        let is_switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        let text_value = match value {
            toml::Value::Boolean(b) if is_switch => {
                if *b {
                    out.push(format!("--{flag}"));
                    given.push((key.clone(), line, format!("--{flag}")));
                }
                continue;
            }
            _ if is_switch => return Err(err(line, format!("`{key}` is true or false"))),
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            other => {
                return Err(err(
                    line,
                    format!("`{key}`: a {} where a string or a number was meant", other.type_str()),
                ));
            }
        };
        let a = format!("--{flag}={text_value}");
        out.push(a.clone());
        given.push((key.clone(), line, a));
    }
    // Each value through its flag's parser, one at a time, so the error
    // names the key that caused it.
    for (key, line, a) in &given {
        let probe = cmd
            .clone()
            .ignore_errors(false)
            .subcommand_required(false)
            .try_get_matches_from(["fleetop-agent", a.as_str()]);
        if let Err(e) = probe
            && e.kind() != clap::error::ErrorKind::MissingRequiredArgument
        {
            let said = e.to_string();
            let first = said.lines().next().unwrap_or_default().trim_start_matches("error: ");
            return Err(err(*line, format!("`{key}`: {first}")));
        }
    }
    Ok(out)
}

/// The line where `key` is set, if one plainly is (`key = ...`, or
/// `[key]` for a section).
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            if l.strip_prefix('[')
                .and_then(|r| r.strip_prefix(key))
                .is_some_and(|r| r.trim_start().starts_with(']'))
            {
                return true;
            }
            let l = l.strip_prefix(key).or_else(|| l.strip_prefix(&format!("\"{key}\"")));
            l.is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cmd() -> Command {
        Command::new("fleetop-agent")
            .arg(Arg::new("state_dir").long("state-dir"))
            .arg(Arg::new("insecure").long("insecure").action(ArgAction::SetTrue))
            .arg(
                Arg::new("expect_gpus")
                    .long("expect-gpus")
                    .value_parser(clap::value_parser!(u32).range(1..=64)),
            )
            .arg(Arg::new("config").long("config"))
    }

    fn args_of(text: &str) -> Result<Vec<String>, ConfigError> {
        args(&cmd(), Path::new("/etc/fleetop/agent.toml"), text)
    }

    #[test]
    fn keys_become_the_flags_they_are_named_as() {
        let got = args_of("# the node's journal\nstate_dir = \"/var/lib/x\"\ninsecure = true\nexpect_gpus = 8\n");
        assert_eq!(
            got.expect("valid"),
            // In the file's keys' order of names: each flag is given once.
            ["--expect-gpus=8", "--insecure", "--state-dir=/var/lib/x"]
        );
        assert_eq!(args_of("insecure = false\n").expect("valid"), Vec::<String>::new());
    }

    #[test]
    fn unknown_keys_bad_types_and_bad_values_name_the_file_and_line() {
        let e = args_of("state_dir = \"/x\"\n\nstate_dri = \"/y\"\n").expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "/etc/fleetop/agent.toml:3: unknown key `state_dri`: no flag --state-dri (see fleetop-agent --help)"
        );
        let e = args_of("expect_gpus = 99\n").expect_err("out of range");
        assert_eq!(e.line, Some(1));
        assert!(e.what.starts_with("`expect_gpus`: ") && e.what.contains("99"), "{e}");
        let e = args_of("insecure = \"yes\"\n").expect_err("not a bool");
        assert_eq!((e.line, e.what.as_str()), (Some(1), "`insecure` is true or false"));
        let e = args_of("insecure = true\n[agent]\nstate_dir = \"/x\"\n").expect_err("a section");
        assert_eq!(
            (e.line, e.what.as_str()),
            (Some(2), "`[agent]`: no sections; every key is a flag")
        );
        let e = args_of("config = \"/other.toml\"\n").expect_err("not from a file");
        assert!(e.what.contains("unknown key `config`"), "{e}");
        let e = args_of("state_dir = \n").expect_err("not TOML");
        assert_eq!(e.line, Some(1), "{e}");
    }
}
