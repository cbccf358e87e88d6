//! Which rack a node is in, from the config's `[racks]`: an explicit
//! hostlist per rack, or else the rack captured from the node's name by
//! `pattern`. Built once at start, so a hostlist that does not parse stops
//! the console before it draws anything, with the file, line and value.
//!
//! It lives here, not in `config`, because reading a hostlist is `ingest`'s
//! (config sits below ingest and may not import it).

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::Config;
use crate::ingest::hostlist;

/// A rack's hostlist that does not parse, or a pattern that does not compile.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{path}:{line}: racks.{key}: {why}")]
pub struct RackError {
    pub path: String,
    pub line: usize,
    pub key: String,
    pub why: String,
}

/// Node name -> rack.
#[derive(Debug, Clone, Default)]
pub struct Racks {
    /// From `[racks.hosts]`: these win over the pattern.
    named: BTreeMap<String, String>,
    pattern: Option<regex::Regex>,
}

impl Racks {
    pub fn from_config(cfg: &Config) -> Result<Racks, RackError> {
        let path = cfg.path.as_deref().unwrap_or(Path::new("config")).display().to_string();
        let err = |line: usize, key: String, why: String| RackError {
            path: path.clone(),
            line,
            key,
            why,
        };
        let r = &cfg.racks;
        let pattern = r.regex().map_err(|why| err(1, "pattern".into(), why))?;
        let mut named = BTreeMap::new();
        for (rack, hosts) in &r.hosts {
            let line = r.lines.get(rack).copied().unwrap_or(1);
            let names =
                hostlist::expand(hosts.trim()).map_err(|e| err(line, format!("hosts.{rack}"), e.to_string()))?;
            for n in names {
                // A node in two racks is a typing error, not a choice.
                if let Some(other) = named.insert(n.clone(), rack.clone())
                    && other != *rack
                {
                    let why = format!("'{n}' is in rack '{other}' too");
                    return Err(err(line, format!("hosts.{rack}"), why));
                }
            }
        }
        Ok(Racks { named, pattern })
    }

    /// The rack of node `name`, if the config gives one.
    pub fn rack_of(&self, name: &str) -> Option<String> {
        if let Some(r) = self.named.get(name) {
            return Some(r.clone());
        }
        let caps = self.pattern.as_ref()?.captures(name)?;
        let m = caps.name("rack").or_else(|| caps.get(1))?;
        (!m.as_str().is_empty()).then(|| m.as_str().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn racks(text: &str) -> Result<Racks, RackError> {
        Racks::from_config(&crate::config::parse(text, Path::new("/etc/fleetop.toml")).expect("config parses"))
    }

    #[test]
    fn hostlists_win_over_the_pattern_and_unnamed_nodes_have_none() {
        let r =
            racks("[racks]\npattern = \"^(r\\\\d+)-\"\n[racks.hosts]\nspecial = \"r01-n[01-02]\"\n").expect("reads");
        assert_eq!(r.rack_of("r01-n01").as_deref(), Some("special"));
        assert_eq!(r.rack_of("r01-n03").as_deref(), Some("r01"));
        assert_eq!(r.rack_of("login1"), None);
        assert_eq!(Racks::default().rack_of("r01-n01"), None);
    }

    #[test]
    fn a_bad_hostlist_names_the_file_line_and_value() {
        let e = racks("[racks.hosts]\nr01 = \"gpu[01-04]\"\nr02 = \"gpu[05-\"\n").expect_err("bad hostlist");
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/fleetop.toml:3: racks.hosts.r02: "), "{msg}");
        assert!(msg.contains("'gpu[05-'"), "{msg}");
        assert_eq!(msg.lines().count(), 1);
        let e = racks("[racks.hosts]\na = \"gpu[01-04]\"\nb = \"gpu04\"\n").expect_err("in two racks");
        assert!(e.to_string().contains("'gpu04' is in rack 'a' too"), "{e}");
    }
}
