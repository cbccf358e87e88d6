//! Finding a theme and resolving its inheritance: a spec is a path, a
//! shipped name or a user theme; `parent` chains are followed with cycle
//! detection and a depth limit, then merged root-first into one complete
//! set of styles and heat stops.

use std::fs;
use std::path::{Path, PathBuf};

use ratatui::style::Style;

use super::builtin::shipped_text;
use super::file::{Layer, parse_layer};
use super::{STYLE_KEYS, Theme, ThemeError};

/// How many `parent` hops a chain may take. Deep chains are almost always a
/// mistake, and the bound keeps a pathological directory from recursing long.
pub const MAX_PARENT_DEPTH: usize = 8;

#[derive(Debug, Clone)]
pub(super) enum Source {
    Shipped(&'static str),
    File(PathBuf),
}

impl Source {
    /// The file name used in error messages.
    fn label(&self) -> String {
        match self {
            Source::Shipped(n) => format!("<shipped>/{n}.toml"),
            Source::File(p) => p.display().to_string(),
        }
    }

    /// Short name used for the theme's default name and in cycle chains.
    fn stem(&self) -> String {
        match self {
            Source::Shipped(n) => (*n).to_string(),
            Source::File(p) => p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string()),
        }
    }

    /// Identity for cycle detection: two spellings of one file are one node.
    fn identity(&self) -> String {
        match self {
            Source::Shipped(n) => format!("shipped:{n}"),
            Source::File(p) => {
                let c = fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                format!("file:{}", c.display())
            }
        }
    }

    fn read(&self) -> Result<std::borrow::Cow<'static, str>, ThemeError> {
        match self {
            Source::Shipped(n) => Ok(shipped_text(n).unwrap_or_default().into()),
            Source::File(p) => fleetop_proto::input::read_capped(p, fleetop_proto::input::MAX_FILE_BYTES)
                .map(Into::into)
                .map_err(|source| ThemeError::Read {
                    path: p.display().to_string(),
                    source,
                }),
        }
    }

    fn dir(&self) -> Option<&Path> {
        match self {
            Source::Shipped(_) => None,
            Source::File(p) => p.parent(),
        }
    }
}

fn is_path_spec(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".toml")
}

/// Find a theme by spec. `None` means "no theme of that name"; a path is
/// always returned as found so that reading it reports the real OS error.
pub(super) fn locate(spec: &str, relative_to: Option<&Path>, user_dir: Option<&Path>) -> Option<Source> {
    if is_path_spec(spec) {
        let p = PathBuf::from(spec);
        let p = match relative_to {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p,
        };
        return Some(Source::File(p));
    }
    if let Some(n) = Theme::SHIPPED.iter().find(|n| **n == spec) {
        return Some(Source::Shipped(n));
    }
    let p = user_dir?.join(format!("{spec}.toml"));
    p.exists().then_some(Source::File(p))
}

pub(super) struct Resolved {
    pub(super) name: String,
    pub(super) styles: [Style; 9],
    pub(super) stops: Vec<[u8; 3]>,
}

pub(super) fn resolve_chain(top: Source, user_dir: Option<&Path>) -> Result<Resolved, ThemeError> {
    let top_label = top.label();
    let mut seen: Vec<(String, String)> = Vec::new(); // (identity, stem)
    let mut layers: Vec<Layer> = Vec::new();
    let mut cur = top;
    loop {
        let id = cur.identity();
        let chain = |extra: &str| {
            let mut names: Vec<&str> = seen.iter().map(|(_, s)| s.as_str()).collect();
            names.push(extra);
            names.join(" -> ")
        };
        if seen.iter().any(|(i, _)| *i == id) {
            return Err(ThemeError::Cycle {
                file: top_label,
                chain: chain(&cur.stem()),
            });
        }
        if seen.len() > MAX_PARENT_DEPTH {
            return Err(ThemeError::TooDeep {
                file: top_label,
                chain: chain(&cur.stem()),
            });
        }
        let text = cur.read()?;
        let layer = parse_layer(&text, &cur.label(), cur.stem())?;
        seen.push((id, cur.stem()));
        let next = match &layer.parent {
            None => None,
            Some((pname, line)) => match locate(pname, cur.dir(), user_dir) {
                Some(src) => Some(src),
                None => {
                    return Err(ThemeError::UnknownParent {
                        file: cur.label(),
                        line: *line,
                        name: pname.clone(),
                    });
                }
            },
        };
        let root_label = cur.label();
        layers.push(layer);
        match next {
            Some(n) => cur = n,
            None => return merge(layers, &root_label),
        }
    }
}

/// Apply layers root-first; the last element of `layers` is the root.
fn merge(layers: Vec<Layer>, root_label: &str) -> Result<Resolved, ThemeError> {
    let mut it = layers.into_iter().rev();
    let Some(root) = it.next() else {
        return Err(ThemeError::Missing {
            file: root_label.to_string(),
            key: "styles".to_string(),
        });
    };
    let mut name = root.name;
    let mut styles = [Style::new(); 9];
    for (i, slot) in styles.iter_mut().enumerate() {
        *slot = root.styles[i].ok_or_else(|| ThemeError::Missing {
            file: root_label.to_string(),
            key: format!("styles.{}", STYLE_KEYS[i]),
        })?;
    }
    let mut stops = root.stops.ok_or_else(|| ThemeError::Missing {
        file: root_label.to_string(),
        key: "heat.stops".to_string(),
    })?;
    for layer in it {
        for (slot, s) in styles.iter_mut().zip(layer.styles) {
            if let Some(s) = s {
                *slot = s;
            }
        }
        if let Some(st) = layer.stops {
            stops = st;
        }
        name = layer.name;
    }
    Ok(Resolved { name, styles, stops })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use ratatui::style::{Color, Modifier, Style};

    use super::*;
    use crate::tui::theme::testing::{err, styles, write};
    use crate::tui::theme::{ColorDepth, Theme};

    #[test]
    fn user_theme_overrides_one_key_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "mine.toml",
            "parent = \"default\"\n[styles]\nwarn = { fg = \"#ff8800\", underline = true }\n",
        );
        let d = Theme::load("default", None, ColorDepth::TrueColor).expect("default");
        let t = Theme::load("mine", Some(dir.path()), ColorDepth::TrueColor).expect("mine");
        assert_eq!(t.name, "mine");
        assert_eq!(
            t.warn,
            Style::new()
                .fg(Color::Rgb(0xff, 0x88, 0))
                .add_modifier(Modifier::UNDERLINED)
        );
        for (a, b) in styles(&t).iter().zip(styles(&d)).filter(|(a, _)| **a != t.warn) {
            assert_eq!(*a, b);
        }
        assert_eq!(t.heat(0.5), d.heat(0.5));
    }

    #[test]
    fn child_table_replaces_parent_table_entirely() {
        let dir = tempfile::tempdir().expect("tempdir");
        // default's crit is fg + bold; the child's crit has only underline.
        write(
            dir.path(),
            "c.toml",
            "parent = \"default\"\n[styles]\ncrit = { underline = true }\n",
        );
        let t = Theme::load("c", Some(dir.path()), ColorDepth::TrueColor).expect("c");
        assert_eq!(t.crit, Style::new().add_modifier(Modifier::UNDERLINED));
    }

    #[test]
    fn user_chain_and_stops_replacement_and_name_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "a.toml",
            "parent = \"light\"\n[styles]\nok = { fg = \"green\" }\n[heat]\nstops = [\"#000000\", \"#ffffff\"]\n",
        );
        write(
            dir.path(),
            "b.toml",
            "name = \"Bee\"\nparent = \"a\"\n[styles]\ninfo = { fg = \"idx:33\" }\n",
        );
        let l = Theme::load("light", None, ColorDepth::TrueColor).expect("light");
        let t = Theme::load("b", Some(dir.path()), ColorDepth::TrueColor).expect("b");
        assert_eq!(t.name, "Bee");
        assert_eq!(t.ok.fg, Some(Color::Green));
        assert_eq!(t.info.fg, Some(Color::Indexed(33)));
        assert_eq!(t.base, l.base);
        assert_eq!(t.heat(0.5), Color::Rgb(128, 128, 128));
    }

    #[test]
    fn shipped_names_are_reserved() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "default.toml", "this is not even toml = = =\n");
        let t = Theme::load("default", Some(dir.path()), ColorDepth::TrueColor).expect("shipped default wins");
        assert_eq!(t.base.fg, Some(Color::Rgb(0xc5, 0xc8, 0xc6)));
        // ... also as a parent.
        write(dir.path(), "kid.toml", "parent = \"default\"\n");
        let k = Theme::load("kid", Some(dir.path()), ColorDepth::TrueColor).expect("kid");
        assert_eq!(k.base, t.base);
    }

    #[test]
    fn path_loading_and_relative_parent_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).expect("mkdir");
        write(
            &sub,
            "p.toml",
            "parent = \"default\"\n[styles]\nok = { fg = \"blue\" }\n",
        );
        let c = write(
            dir.path(),
            "c.toml",
            "parent = \"sub/p.toml\"\n[styles]\nwarn = { fg = \"red\" }\n",
        );
        let spec = c.to_str().expect("utf-8 path");
        let t = Theme::load(spec, None, ColorDepth::TrueColor).expect("path theme");
        assert_eq!(t.name, "c");
        assert_eq!(t.ok.fg, Some(Color::Blue));
        assert_eq!(t.warn.fg, Some(Color::Red));
    }

    #[test]
    fn unknown_parent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(dir.path(), "x.toml", "# hi\nparent = \"nope\"\n");
        assert_eq!(
            err("x", Some(dir.path())),
            format!("{}:2: parent: no theme named 'nope'", p.display())
        );
        // Without a user dir only shipped names and paths can be parents.
        let spec = p.to_str().expect("utf-8 path");
        assert!(err(spec, None).ends_with("x.toml:2: parent: no theme named 'nope'"));
    }

    #[test]
    fn parent_cycle() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(dir.path(), "x.toml", "parent = \"y\"\n");
        write(dir.path(), "y.toml", "parent = \"x\"\n");
        assert_eq!(
            err("x", Some(dir.path())),
            format!("{}: parent cycle: x -> y -> x", p.display())
        );
        write(dir.path(), "self.toml", "parent = \"self.toml\"\n");
        assert!(err("self", Some(dir.path())).ends_with("self.toml: parent cycle: self -> self"));
    }

    #[test]
    fn parent_chain_depth_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        // t0 -> t1 -> ... -> t9 -> default is 10 hops: too deep.
        for i in 0..9 {
            write(dir.path(), &format!("t{i}.toml"), &format!("parent = \"t{}\"\n", i + 1));
        }
        write(dir.path(), "t9.toml", "parent = \"default\"\n");
        let e = err("t0", Some(dir.path()));
        assert!(e.contains("parent chain deeper than 8"), "{e}");
        // 8 hops is fine: t2 -> ... -> t9 -> default.
        Theme::load("t2", Some(dir.path()), ColorDepth::Ansi16).expect("8 hops allowed");
    }

    #[test]
    fn root_theme_must_define_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut body = String::from("[styles]\n");
        for k in STYLE_KEYS.iter().filter(|k| **k != "info") {
            body.push_str(&format!("{k} = {{}}\n"));
        }
        body.push_str("[heat]\nstops = [\"#000000\", \"#ffffff\"]\n");
        let p = write(dir.path(), "x.toml", &body);
        assert_eq!(
            err("x", Some(dir.path())),
            format!(
                "{}: styles.info missing (a theme without a parent must define every key)",
                p.display()
            )
        );
        // The missing key is reported on the root, even via a child.
        write(dir.path(), "kid.toml", "parent = \"x\"\n[styles]\ninfo = {}\n");
        assert!(
            err("kid", Some(dir.path()))
                .ends_with("x.toml: styles.info missing (a theme without a parent must define every key)")
        );
        write(
            dir.path(),
            "nostops.toml",
            &body
                .replace("[styles]\n", "[styles]\ninfo = {}\n")
                .replace("[heat]\nstops = [\"#000000\", \"#ffffff\"]\n", ""),
        );
        assert!(
            err("nostops", Some(dir.path()))
                .ends_with("nostops.toml: heat.stops missing (a theme without a parent must define every key)")
        );
    }

    #[test]
    fn unreadable_path_and_unknown_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("x.toml");
        let spec = missing.to_str().expect("utf-8 path");
        let e = err(spec, None);
        assert!(e.starts_with(&format!("cannot read theme '{spec}': ")), "{e}");
        assert!(e.contains("os error 2"), "{e}");
        assert_eq!(
            err("nope", Some(dir.path())),
            "theme 'nope': no such theme (shipped: default, light, high-contrast, colorblind, mono)"
        );
        assert!(err("nope", None).starts_with("theme 'nope': no such theme"));
    }
}
