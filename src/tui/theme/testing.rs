//! Helpers shared by the theme modules' unit tests.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ratatui::style::Style;

use super::{ColorDepth, Theme};

pub(super) fn styles(t: &Theme) -> [Style; 9] {
    [
        t.base, t.muted, t.border, t.title, t.selected, t.ok, t.warn, t.crit, t.info,
    ]
}

pub(super) fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    let mut f = fs::File::create(&p).expect("create theme file");
    f.write_all(body.as_bytes()).expect("write theme file");
    p
}

pub(super) fn err(spec: &str, dir: Option<&Path>) -> String {
    Theme::load(spec, dir, ColorDepth::TrueColor)
        .expect_err("theme should fail to load")
        .to_string()
}
