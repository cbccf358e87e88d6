//! Who runs a GPU process and what it is: the owner (the real uid in
//! `/proc/<pid>/status`, named through the node's password database, LDAP
//! included) and the command line (`/proc/<pid>/cmdline`), as nvitop shows
//! them. A pid's owner and command do not change while it lives; the wire
//! sends them once per pid (see `fleetop_proto::wire`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Command lines are cut here (on a character boundary): enough to tell
/// `python train.py --config big.yaml` from another job's.
pub const MAX_COMMAND: usize = 200;

/// A process's owner and command line; empty where `/proc` does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    pub user: String,
    pub command: String,
}

/// uid -> name: a password-database lookup (NSS, maybe over the network)
/// is made once per uid, not once per process per sample.
static NAMES: Mutex<Option<HashMap<u32, String>>> = Mutex::new(None);

fn name_of(uid: u32) -> String {
    if let Ok(mut names) = NAMES.lock()
        && let Some(n) = names.get_or_insert_with(HashMap::new).get(&uid)
    {
        return n.clone();
    }
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        // A uid the node does not know is still worth showing.
        .unwrap_or_else(|| uid.to_string());
    if let Ok(mut names) = NAMES.lock() {
        names.get_or_insert_with(HashMap::new).insert(uid, name.clone());
    }
    name
}

/// The real uid from the text of `/proc/<pid>/status`.
pub fn uid_from_status(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

/// A command line from `/proc/<pid>/cmdline` (arguments NUL-separated):
/// one line of printable text, at most `MAX_COMMAND` bytes.
pub fn command_from_cmdline(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::new();
    for c in text.trim_end_matches('\0').chars() {
        let c = if c == '\0' || c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > MAX_COMMAND {
            break;
        }
        out.push(c);
    }
    out
}

/// The owner and command of `pid`, read under `proc_root`; empty fields
/// for a process that is gone or hidden (`hidepid`).
pub fn owner_of_pid(proc_root: &Path, pid: u32) -> Owner {
    let dir = proc_root.join(pid.to_string());
    let user = std::fs::read_to_string(dir.join("status"))
        .ok()
        .and_then(|t| uid_from_status(&t))
        .map(name_of)
        .unwrap_or_default();
    let command = std::fs::read(dir.join("cmdline"))
        .map(|raw| command_from_cmdline(&raw[..raw.len().min(4 * MAX_COMMAND)]))
        .unwrap_or_default();
    Owner { user, command }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_and_command_line_come_from_proc() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("42");
        std::fs::create_dir(&p).expect("mkdir");
        std::fs::write(p.join("status"), "Name:\tpython\nUid:\t0\t0\t0\t0\nGid:\t0\n").expect("status");
        std::fs::write(p.join("cmdline"), b"python\0train.py\0--lr\x1b0.1\0").expect("cmdline");
        let o = owner_of_pid(dir.path(), 42);
        assert_eq!(o.user, "root");
        assert_eq!(
            o.command, "python train.py --lr 0.1",
            "no control character reaches a terminal"
        );
        assert_eq!(owner_of_pid(dir.path(), 43), Owner::default(), "gone: nothing known");
        let long = vec![b'x'; 1000];
        assert_eq!(command_from_cmdline(&long).len(), MAX_COMMAND);
        assert_eq!(uid_from_status("Uid:\t1000\t1000\t1000\t1000\n"), Some(1000));
    }
}
