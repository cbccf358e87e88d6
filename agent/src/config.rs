//! The agent's config file (`--config`, default `/etc/fleetop/agent.toml`)
//! and its drop-ins (`agent.d/*.toml` beside it): one TOML key per
//! command-line flag, named as the flag (`--state-dir` is `state_dir`),
//! with no sections. The files become flags placed before the command
//! line's own, so a flag given on the command line wins; among the files,
//! the later one wins.
//!
//! A key that is no flag, a key given twice in one file, a value of the
//! wrong type, and a value the flag refuses are each one error naming the
//! file and the line. A file that cannot be read is an error too, never
//! "no config". A file others may write to is refused ([`trusted`]).
//! Config management runs `fleetop-agent config check` before a restart.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the agent looks for its config file when `--config` is not given.
/// Missing, it is no config; unreadable, it is an error.
pub const DEFAULT_PATH: &str = "/etc/fleetop/agent.toml";

/// At most this many drop-ins are read; more is an error.
pub const MAX_DROP_INS: usize = 256;

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

/// One key of a config file, as the flag it sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The key as the docs name it (`state_dir`).
    pub key: String,
    /// The flag's id in the command (`state_dir`), for clap's lookups.
    pub id: String,
    /// The value as TOML writes it (`"/var/lib/x"`, `8`, `true`).
    pub value: String,
    /// The argument it becomes (`--state-dir=/var/lib/x`); `None`: a
    /// switch set to false, which sets nothing.
    pub arg: Option<String>,
    /// The file and line it came from.
    pub path: PathBuf,
    pub line: Option<usize>,
}

/// The flags `text` (the file at `path`) sets for `cmd`, as arguments to
/// place before the command line's own. Each value is checked by the flag's
/// own parser, so a bad one is refused here with its line, not later
/// without one.
pub fn args(cmd: &clap::Command, path: &Path, text: &str) -> Result<Vec<String>, ConfigError> {
    Ok(settings(cmd, path, text)?.into_iter().filter_map(|s| s.arg).collect())
}

/// The keys of `text` (the file at `path`), each checked as [`args`] says.
pub fn settings(cmd: &clap::Command, path: &Path, text: &str) -> Result<Vec<Setting>, ConfigError> {
    let err = |line: Option<usize>, what: String| ConfigError {
        path: path.to_path_buf(),
        line,
        what,
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        err(line, e.message().trim().to_string())
    })?;
    let mut out: Vec<Setting> = Vec::new();
    // (flag id, key as written, line) of each key so far.
    let mut seen: Vec<(String, &str, Option<usize>)> = Vec::new();
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
        let id = arg.get_id().to_string();
        // `state_dir` and `state-dir` are one flag: which would win is
        // no one's guess, so neither does.
        if let Some((_, other, other_line)) = seen.iter().find(|(i, _, _)| *i == id) {
            // Named at the later of the two lines, the other in words.
            let (mut a, mut b) = ((key.as_str(), line), (*other, *other_line));
            if a.1 < b.1 {
                std::mem::swap(&mut a, &mut b);
            }
            let at = b.1.map(|l| format!(" (line {l})")).unwrap_or_default();
            return Err(err(
                a.1,
                format!("`{}` sets --{flag} again, as `{}`{at} does: keep one", a.0, b.0),
            ));
        }
        seen.push((id.clone(), key.as_str(), line));
        let is_switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        let text_value = match value {
            toml::Value::Boolean(b) if is_switch => {
                out.push(Setting {
                    key: key.replace('-', "_"),
                    id,
                    value: b.to_string(),
                    arg: b.then(|| format!("--{flag}")),
                    path: path.to_path_buf(),
                    line,
                });
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
        out.push(Setting {
            key: key.replace('-', "_"),
            id,
            value: value.to_string(),
            arg: Some(format!("--{flag}={text_value}")),
            path: path.to_path_buf(),
            line,
        });
    }
    // Each value through its flag's parser, one at a time, so the error
    // names the key that caused it.
    for s in &out {
        let Some(a) = &s.arg else { continue };
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
            return Err(err(s.line, format!("`{}`: {first}", s.key)));
        }
    }
    Ok(out)
}

/// Which config the agent reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `--config none`: no file at all.
    None,
    /// No `--config`: [`DEFAULT_PATH`] (given here, for tests), where it
    /// exists. "Not found" is no file; any other error is fatal.
    Default(PathBuf),
    /// `--config FILE`: it must be there.
    Given(PathBuf),
}

/// The files read and what they set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// Each file read, in the order read: the main file, then its drop-ins.
    pub files: Vec<PathBuf>,
    /// Every key of every file, in the order read; a later one for the
    /// same flag wins ([`Loaded::winners`]).
    pub settings: Vec<Setting>,
}

impl Loaded {
    /// The arguments, in the order read: clap keeps the last of a flag.
    pub fn args(&self) -> Vec<String> {
        self.settings.iter().filter_map(|s| s.arg.clone()).collect()
    }

    /// The setting that wins for each flag, with the ones it overrode.
    pub fn winners(&self) -> Vec<(&Setting, Vec<&Setting>)> {
        let mut out: Vec<(&Setting, Vec<&Setting>)> = Vec::new();
        for s in &self.settings {
            match out.iter_mut().find(|(w, _)| w.id == s.id) {
                Some(slot) => {
                    let old = std::mem::replace(&mut slot.0, s);
                    slot.1.push(old);
                }
                None => out.push((s, Vec::new())),
            }
        }
        out
    }
}

/// The drop-in directory of a config file: `agent.d` beside `agent.toml`,
/// and generally `<stem>.d` beside `<stem>.toml`.
pub fn drop_in_dir(config: &Path) -> PathBuf {
    let stem = config.file_stem().map(|s| s.to_os_string()).unwrap_or_default();
    let mut name = stem;
    name.push(".d");
    config.with_file_name(name)
}

/// Reads the config file of `source` and its drop-ins, each checked by
/// [`trusted`] for `agent_uid` and by [`settings`] against `cmd`.
/// `Ok(None)`: no file at all.
pub fn load(cmd: &clap::Command, source: &Source, agent_uid: u32) -> Result<Option<Loaded>, ConfigError> {
    let (path, given) = match source {
        Source::None => return Ok(None),
        Source::Default(p) => (p.as_path(), false),
        Source::Given(p) => (p.as_path(), true),
    };
    let fail = |p: &Path, what: String| ConfigError {
        path: p.to_path_buf(),
        line: None,
        what,
    };
    let mut loaded = Loaded::default();
    // lstat, not stat: a dangling link is not "no file", it is a broken one.
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !given => {}
        Err(e) => return Err(fail(path, unreadable(&e, given))),
        Ok(_) => {
            // A link that leads nowhere cannot be read: not "no config".
            std::fs::metadata(path).map_err(|e| fail(path, unreadable(&e, given)))?;
            loaded.settings = read_one(cmd, path, agent_uid, given)?;
            loaded.files.push(path.to_path_buf());
        }
    }
    let dir = drop_in_dir(path);
    let entries = match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(fail(&dir, unreadable(&e, given))),
        Ok(_) => {
            trusted(&dir, agent_uid).map_err(|why| fail(&dir, refused(&why)))?;
            let list = std::fs::read_dir(&dir).map_err(|e| fail(&dir, unreadable(&e, given)))?;
            let mut names = Vec::new();
            for entry in list {
                let entry = entry.map_err(|e| fail(&dir, unreadable(&e, given)))?;
                let name = entry.file_name();
                let b = name.as_encoded_bytes();
                // Editors' and dpkg's leftovers (.swp, .dpkg-old) are not read.
                if b.starts_with(b".") || !b.ends_with(b".toml") {
                    continue;
                }
                names.push(name);
            }
            if names.len() > MAX_DROP_INS {
                return Err(fail(&dir, format!("{} drop-ins; at most {MAX_DROP_INS}", names.len())));
            }
            // In lexical order of the names' bytes, whatever the locale.
            names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
            names.into_iter().map(|n| dir.join(n)).collect()
        }
    };
    if loaded.files.is_empty() && entries.is_empty() {
        return Ok(None);
    }
    for p in entries {
        std::fs::metadata(&p).map_err(|e| fail(&p, unreadable(&e, true)))?;
        loaded.settings.extend(read_one(cmd, &p, agent_uid, true)?);
        loaded.files.push(p);
    }
    Ok(Some(loaded))
}

/// One file: trusted, a regular file, read within the bound, parsed.
fn read_one(cmd: &clap::Command, path: &Path, agent_uid: u32, given: bool) -> Result<Vec<Setting>, ConfigError> {
    let fail = |what: String| ConfigError {
        path: path.to_path_buf(),
        line: None,
        what,
    };
    trusted(path, agent_uid).map_err(|why| fail(refused(&why)))?;
    let text = fleetop_proto::input::read_capped(path, fleetop_proto::input::MAX_FILE_BYTES)
        .map_err(|e| fail(unreadable(&e, given)))?;
    settings(cmd, path, &text)
}

fn unreadable(e: &std::io::Error, given: bool) -> String {
    if given {
        format!("cannot read it: {e}")
    } else {
        format!("cannot read it: {e}; the agent does not start without its config (--config none: no file)")
    }
}

fn refused(why: &str) -> String {
    format!(
        "{why}; refusing it (it must be root's or the agent's user's, and no one else may write to it or a directory above it)"
    )
}

/// Whether the file or directory at `path` may be trusted by an agent
/// running as `agent_uid`: what it says runs as the agent (a library it
/// loads, a config that names one). As sshd's StrictModes:
///
/// - it, and every directory above it, is owned by root or `agent_uid`;
/// - none of them may be written by group or others, except a directory
///   with the sticky bit (/tmp): there only an entry's owner may rename or
///   remove it, and the entry below is root's or the agent's already;
/// - both the path as given and the path its links resolve to are
///   checked, so a link cannot lead past an unsafe directory.
///
/// The error says which path, and why, in a few words.
pub fn trusted(path: &Path, agent_uid: u32) -> Result<(), String> {
    let absolute = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    chain(&absolute, agent_uid, false)?;
    let real = std::fs::canonicalize(&absolute).map_err(|e| format!("{}: {e}", path.display()))?;
    if real != absolute {
        chain(&real, agent_uid, true)?;
    }
    Ok(())
}

/// `path` and each directory above it, by [`trusted`]'s rules. `follow`:
/// stat, not lstat (`path` has no links left).
fn chain(path: &Path, agent_uid: u32, follow: bool) -> Result<(), String> {
    for (i, p) in path.ancestors().enumerate() {
        let m = if follow {
            std::fs::metadata(p)
        } else {
            std::fs::symlink_metadata(p)
        }
        .map_err(|e| format!("{}: {e}", p.display()))?;
        if m.uid() != 0 && m.uid() != agent_uid {
            return Err(format!(
                "{} is owned by uid {}, not root or the agent's user",
                p.display(),
                m.uid()
            ));
        }
        // A link's own mode means nothing; its directory is checked next.
        if m.file_type().is_symlink() {
            continue;
        }
        let mode = m.mode() & 0o7777;
        let sticky_dir = i > 0 && m.is_dir() && mode & 0o1000 != 0;
        if mode & 0o022 != 0 && !sticky_dir {
            let who = if mode & 0o002 != 0 { "anyone" } else { "its group" };
            return Err(format!("{who} may write to {} (mode {mode:o})", p.display()));
        }
    }
    Ok(())
}

/// Who the agent runs as, for the checks that depend on it: who may own
/// what it trusts, and whether it can read its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// The user's name, or its uid where it has none.
    pub name: String,
    pub uid: u32,
    /// Its primary group and the others it is in.
    pub gids: Vec<u32>,
}

/// The user the packaged unit runs as (`User=` in fleetop-agent.service).
pub const UNIT_USER: &str = "fleetop-agent";

impl RunAs {
    /// This process.
    pub fn current() -> RunAs {
        let uid = nix::unistd::geteuid().as_raw();
        let mut gids = vec![nix::unistd::getegid().as_raw()];
        gids.extend(nix::unistd::getgroups().unwrap_or_default().iter().map(|g| g.as_raw()));
        let name = nix::unistd::User::from_uid(uid.into())
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| uid.to_string());
        RunAs { name, uid, gids }
    }

    /// A user by name, or by number (a uid with no name has no groups).
    pub fn named(who: &str) -> Result<RunAs, String> {
        let user = match who.parse::<u32>() {
            Ok(uid) => nix::unistd::User::from_uid(uid.into()).map_err(|e| format!("user {who}: {e}"))?,
            Err(_) => nix::unistd::User::from_name(who).map_err(|e| format!("user {who}: {e}"))?,
        };
        let Some(u) = user else {
            return match who.parse::<u32>() {
                Ok(uid) => Ok(RunAs {
                    name: who.to_string(),
                    uid,
                    gids: Vec::new(),
                }),
                Err(_) => Err(format!("no user named {who}")),
            };
        };
        let mut gids = vec![u.gid.as_raw()];
        if let Ok(c) = std::ffi::CString::new(u.name.clone())
            && let Ok(groups) = nix::unistd::getgrouplist(&c, u.gid)
        {
            gids.extend(groups.iter().map(|g| g.as_raw()));
        }
        Ok(RunAs {
            name: u.name,
            uid: u.uid.as_raw(),
            gids,
        })
    }

    /// Who `config check` checks for: `as_user` where given; else, run as
    /// root, the unit's user where it exists; else this process.
    pub fn for_check(as_user: Option<&str>) -> Result<RunAs, String> {
        if let Some(who) = as_user {
            return RunAs::named(who);
        }
        if nix::unistd::geteuid().is_root()
            && let Ok(Some(_)) = nix::unistd::User::from_name(UNIT_USER)
        {
            return RunAs::named(UNIT_USER);
        }
        Ok(RunAs::current())
    }

    /// Whether this user may read the file at `path` by its modes: search
    /// on every directory above it and read on the file. ACLs and
    /// capabilities are not looked at. Root reads everything.
    pub fn can_read(&self, path: &Path) -> Result<(), String> {
        if self.uid == 0 {
            return Ok(());
        }
        let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (i, p) in real.ancestors().enumerate() {
            let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let bits = if m.uid() == self.uid {
                (m.mode() >> 6) & 7
            } else if self.gids.contains(&m.gid()) {
                (m.mode() >> 3) & 7
            } else {
                m.mode() & 7
            };
            let (need, what) = if i == 0 { (4, "read") } else { (1, "enter") };
            if bits & need == 0 {
                return Err(format!(
                    "user {} may not {what} {} (owner uid {}, group {}, mode {:o})",
                    self.name,
                    p.display(),
                    m.uid(),
                    m.gid(),
                    m.mode() & 0o7777
                ));
            }
        }
        Ok(())
    }
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

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    #[test]
    fn a_key_given_twice_in_one_file_is_refused_with_its_line() {
        let e = args_of("state_dir = \"/a\"\ninsecure = true\nstate-dir = \"/b\"\n").expect_err("twice");
        assert_eq!(
            e.to_string(),
            "/etc/fleetop/agent.toml:3: `state-dir` sets --state-dir again, as `state_dir` (line 1) does: keep one"
        );
        // The order of the lines, not of the names, says which is named.
        let e = args_of("state-dir = \"/b\"\nstate_dir = \"/a\"\n").expect_err("twice");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.what
                .starts_with("`state_dir` sets --state-dir again, as `state-dir` (line 1)"),
            "{e}"
        );
    }

    #[test]
    fn a_default_config_that_cannot_be_read_is_fatal_not_absent() {
        let dir = tempfile::tempdir().expect("tmp");
        let load_default = |p: &Path| load(&cmd(), &Source::Default(p.to_path_buf()), me());
        // Not there: no config, and the agent starts on its flags.
        assert_eq!(load_default(&dir.path().join("agent.toml")), Ok(None));
        // A link that leads nowhere is a broken config, not none.
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(dir.path().join("gone.toml"), &link).expect("symlink");
        let e = load_default(&link).expect_err("dangling link");
        assert_eq!(e.path, link);
        assert!(
            e.what.starts_with("cannot read it: ") && e.what.contains("--config none"),
            "{e}"
        );
        // Any other error than "not found" (here: a file where a directory should be).
        let file = dir.path().join("file");
        std::fs::write(&file, "").expect("write");
        let e = load_default(&file.join("agent.toml")).expect_err("not a directory");
        assert!(e.what.starts_with("cannot read it: "), "{e}");
        // A directory the agent may not enter (`chmod 700 /etc/fleetop`).
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).expect("mkdir");
        std::fs::write(locked.join("agent.toml"), "insecure = true\n").expect("write");
        chmod(&locked, 0o700);
        let path = locked.join("agent.toml");
        let e = if is_root() {
            // Root enters every directory: look as another user, on a
            // thread of its own (the file system uid is per thread, and
            // leaving 0 drops the override of permissions).
            std::thread::spawn(move || {
                // SAFETY: setfsuid changes this thread's file system uid only.
                unsafe { libc::setfsuid(65534) };
                load(&cmd(), &Source::Default(path), me()).expect_err("EACCES")
            })
            .join()
            .expect("the thread")
        } else {
            chmod(&locked, 0o000);
            let e = load_default(&path).expect_err("EACCES");
            chmod(&locked, 0o700);
            e
        };
        assert!(e.what.contains("ermission denied"), "{e}");
        // A file that is there is read.
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "insecure = true\n").expect("write");
        let got = load_default(&good).expect("read").expect("a config");
        assert_eq!(got.args(), ["--insecure"]);
        assert_eq!(got.files, [good]);
    }

    #[test]
    fn a_path_others_may_write_to_or_own_is_not_trusted() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path().join("etc");
        std::fs::create_dir(&d).expect("mkdir");
        chmod(&d, 0o755);
        let f = d.join("agent.toml");
        std::fs::write(&f, "").expect("write");
        chmod(&f, 0o644);
        // Under /tmp (1777, root's): sticky, and the tempdir below is ours.
        assert_eq!(trusted(&f, me()), Ok(()));
        chmod(&f, 0o666);
        let e = trusted(&f, me()).expect_err("0666");
        assert!(
            e.starts_with("anyone may write to ") && e.ends_with("(mode 666)"),
            "{e}"
        );
        chmod(&f, 0o664);
        assert!(
            trusted(&f, me())
                .expect_err("0664")
                .starts_with("its group may write to")
        );
        chmod(&f, 0o644);
        // The file's directory, even sticky: no one else may add a drop-in.
        chmod(&d, 0o777);
        assert!(trusted(&f, me()).expect_err("0777 dir").contains("/etc (mode 777)"));
        chmod(&d, 0o1777);
        assert_eq!(trusted(&f, me()), Ok(()), "sticky, and the file below is ours");
        chmod(&d, 0o755);
        // A link in a safe place to a file in an unsafe one.
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        chmod(&open, 0o777);
        let target = open.join("agent.toml");
        std::fs::write(&target, "").expect("write");
        chmod(&target, 0o644);
        let link = d.join("link.toml");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(trusted(&link, me()).expect_err("via link").contains("/open (mode 777)"));
        // Owned by another user.
        if is_root() {
            std::os::unix::fs::lchown(&f, Some(4242), None).expect("chown");
            let e = trusted(&f, me()).expect_err("not ours");
            assert!(e.ends_with("is owned by uid 4242, not root or the agent's user"), "{e}");
            // ...who is the agent's user: trusted for that user.
            assert_eq!(trusted(&f, 4242), Ok(()));
        }
    }

    #[test]
    fn drop_ins_follow_the_file_in_order_and_the_later_one_wins() {
        assert_eq!(
            drop_in_dir(Path::new("/etc/fleetop/agent.toml")),
            Path::new("/etc/fleetop/agent.d")
        );
        assert_eq!(drop_in_dir(Path::new("site/gpu.toml")), Path::new("site/gpu.d"));
        let dir = tempfile::tempdir().expect("tmp");
        let main = dir.path().join("agent.toml");
        std::fs::write(&main, "state_dir = \"/a\"\nexpect_gpus = 8\n").expect("write");
        let d = dir.path().join("agent.d");
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::write(d.join("50-site.toml"), "state_dir = \"/b\"\n").expect("write");
        std::fs::write(d.join("20-early.toml"), "\nstate_dir = \"/c\"\ninsecure = true\n").expect("write");
        std::fs::write(d.join(".50-site.toml.swp"), "garbage").expect("write");
        std::fs::write(d.join("50-site.toml.dpkg-old"), "garbage").expect("write");
        // The main file's keys, then each drop-in's, in the names' order.
        let got = load(&cmd(), &Source::Given(main.clone()), me())
            .expect("read")
            .expect("some");
        assert_eq!(
            got.files,
            [main.clone(), d.join("20-early.toml"), d.join("50-site.toml")]
        );
        assert_eq!(
            got.args(),
            [
                "--expect-gpus=8",
                "--state-dir=/a",
                "--insecure",
                "--state-dir=/c",
                "--state-dir=/b"
            ]
        );
        let winners = got.winners();
        let (w, over) = winners.iter().find(|(w, _)| w.key == "state_dir").expect("state_dir");
        assert_eq!(
            (w.path.as_path(), w.line, w.value.as_str()),
            (d.join("50-site.toml").as_path(), Some(1), "\"/b\"")
        );
        let over: Vec<_> = over.iter().map(|o| (o.path.clone(), o.line)).collect();
        assert_eq!(over, [(main.clone(), Some(1)), (d.join("20-early.toml"), Some(2))]);
        // A bad drop-in names itself and its line.
        std::fs::write(d.join("60-bad.toml"), "expect_gpus = 0\n").expect("write");
        let e = load(&cmd(), &Source::Given(main.clone()), me()).expect_err("bad");
        assert_eq!((e.path, e.line), (d.join("60-bad.toml"), Some(1)));
        std::fs::remove_file(d.join("60-bad.toml")).expect("rm");
        // A default file missing, with drop-ins: they are the config.
        std::fs::remove_file(&main).expect("rm");
        let got = load(&cmd(), &Source::Default(main.clone()), me())
            .expect("read")
            .expect("some");
        assert_eq!(got.files.len(), 2);
        // A drop-in directory anyone may write to is refused.
        chmod(&d, 0o777);
        let e = load(&cmd(), &Source::Default(main), me()).expect_err("open dir");
        assert!(
            e.what.starts_with("anyone may write to ") && e.what.contains("refusing it"),
            "{e}"
        );
    }

    #[test]
    fn who_may_read_a_file_is_told_by_its_modes() {
        let dir = tempfile::tempdir().expect("tmp");
        chmod(dir.path(), 0o755);
        let f = dir.path().join("key");
        std::fs::write(&f, "k").expect("write");
        chmod(&f, 0o600);
        let owner = nix::unistd::geteuid().as_raw();
        let other = RunAs {
            name: "someone".into(),
            uid: if owner == 4242 { 4243 } else { 4242 },
            gids: vec![4242],
        };
        let e = other.can_read(&f).expect_err("0600, not theirs");
        assert!(
            e.starts_with("user someone may not read ") && e.contains("mode 600"),
            "{e}"
        );
        chmod(&f, 0o644);
        assert_eq!(other.can_read(&f), Ok(()));
        chmod(dir.path(), 0o700);
        assert!(other.can_read(&f).expect_err("the dir").contains("may not enter"));
        let owner = RunAs {
            name: "me".into(),
            uid: owner,
            gids: Vec::new(),
        };
        assert_eq!(owner.can_read(&f), Ok(()));
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
