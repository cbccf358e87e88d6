//! Colour themes for the console.
//!
//! Themes are small TOML files so that SREs can restyle the console without
//! rebuilding it, and so that a site can ship one house theme next to the
//! binary. Five themes are compiled in (see [`Theme::SHIPPED`]) so the console
//! always starts, even on a host where the config directory is read-only or
//! missing.
//!
//! # File format
//!
//! ```toml
//! name   = "mine"        # optional; defaults to the file stem
//! parent = "default"     # optional: shipped name, user theme name, or path
//! [styles]
//! warn = { fg = "#f0c674", bold = true }
//! [heat]
//! stops = ["#1d3557", "#e63946"]   # low -> high, 2..=16 stops
//! ```
//!
//! Style keys: `base muted border title selected ok warn crit info`. A style
//! table accepts `fg`, `bg` and the booleans `bold dim italic underline
//! reversed`; `true` adds the modifier and `false` explicitly removes it
//! (which matters when the style is patched over `base`). Colours are
//! `"#rrggbb"`, `"reset"`, one of the 16 ANSI names (`grey` spellings
//! accepted), or `"idx:N"` for an xterm palette index. Unknown keys are
//! errors, because a typo that silently does nothing is worse than a refusal.
//!
//! # Inheritance
//!
//! A theme with `parent` starts from the fully resolved parent. Each style key
//! the child defines replaces the parent's table for that key *entirely*
//! (`warn = { bold = true }` drops the parent's `warn.fg`), and `heat.stops`
//! replaces the parent's stops. Whole-table replacement was chosen over
//! field-level merging because what you read in the child file is exactly
//! what you get. Chains may be at most [`MAX_PARENT_DEPTH`] hops long and
//! cycles are errors. A theme without a parent must define every style key
//! and the heat stops, so a resolved theme never has holes.
//!
//! Relative parent paths are resolved against the directory of the file that
//! names them, so a theme directory can be moved as a whole.
//!
//! # Colour depth
//!
//! Themes are written in 24-bit colour and degraded to what the terminal can
//! show ([`ColorDepth`]); see [`ColorDepth::degrade`] for the rules.
//!
//! # Where things are
//!
//! This file holds [`Theme`] itself and how it is loaded; the rest is split
//! by concern:
//!
//! * `resolve`: finding a theme by name or path and resolving its `parent`
//!   chain (lookup, cycles, depth limit, merging).
//! * `file`: parsing and validating one theme file (colours, stop counts,
//!   the file, line and key path of each error).
//! * `error`: [`ThemeError`], every way loading can fail.
//! * `depth`: [`ColorDepth`], its detection and the degrading of colours
//!   and styles to 256, 16 or no colours.
//! * `heat`: the heat scale ([`Theme::heat`], [`Theme::heat_fg`]).
//! * `builtin`: the shipped themes, compiled in.

mod builtin;
mod depth;
mod error;
mod file;
mod heat;
mod resolve;
#[cfg(test)]
mod testing;

use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};

pub use depth::ColorDepth;
pub use error::ThemeError;
pub use resolve::MAX_PARENT_DEPTH;

use depth::degrade_style;
use resolve::{locate, resolve_chain};

/// Style keys in the order they are stored; also the order errors check them.
const STYLE_KEYS: [&str; 9] = [
    "base", "muted", "border", "title", "selected", "ok", "warn", "crit", "info",
];

/// A resolved theme: every style is present and already degraded to `depth`.
///
/// Styles are deliberately independent (not pre-patched over `base`) so a
/// widget can choose to layer them with `base.patch(theme.warn)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub base: Style,
    pub muted: Style,
    pub border: Style,
    pub title: Style,
    pub selected: Style,
    pub ok: Style,
    pub warn: Style,
    pub crit: Style,
    pub info: Style,
    pub depth: ColorDepth,
    /// Kept in RGB so interpolation happens before degrading; degrading each
    /// stop first would make a 16-colour heat map jump in a few big steps.
    stops: Vec<[u8; 3]>,
}

impl Theme {
    pub const SHIPPED: [&'static str; 5] = ["default", "light", "high-contrast", "colorblind", "mono"];

    /// Load and resolve a theme.
    ///
    /// `spec` is a path if it contains '/' or ends with ".toml"; otherwise a
    /// shipped name, then a user theme `<user_dir>/<spec>.toml`. Shipped names
    /// are reserved: a user file called `default.toml` is ignored, so that a
    /// stale copy in someone's home directory cannot silently change what
    /// `--theme default` means (copy it under another name and set
    /// `parent = "default"` instead). The same lookup applies to `parent`.
    ///
    /// With depth Mono the result is always the shipped mono theme, whatever
    /// `spec` says (even an invalid one): NO_COLOR is the user's explicit
    /// wish and must win over a configured theme. Conversely, asking for the
    /// shipped "mono" theme yields depth Mono, so its heat map is colourless
    /// too.
    pub fn load(spec: &str, user_dir: Option<&Path>, depth: ColorDepth) -> Result<Theme, ThemeError> {
        let (spec, depth) = if depth == ColorDepth::Mono || spec == "mono" {
            ("mono", ColorDepth::Mono)
        } else {
            (spec, depth)
        };
        let top = match locate(spec, None, user_dir) {
            Some(src) => src,
            None => {
                return Err(ThemeError::NoSuchTheme { name: spec.to_string() });
            }
        };
        let resolved = resolve_chain(top, user_dir)?;
        let [base, muted, border, title, selected, ok, warn, crit, info] =
            resolved.styles.map(|s| degrade_style(s, depth));
        Ok(Theme {
            name: resolved.name,
            base,
            muted,
            border,
            title,
            selected,
            ok,
            warn,
            crit,
            info,
            depth,
            stops: resolved.stops,
        })
    }

    /// Default user theme dir: `dirs::config_dir()/fleetop/themes`
    /// (e.g. `~/.config/fleetop/themes` on Linux).
    pub fn user_dir() -> Option<PathBuf> {
        dirs::config_dir().map(|d| d.join("fleetop").join("themes"))
    }

    /// A block of the crit colour (a critical wall cell, a GPU with no
    /// reading): crit reversed, unless crit already paints a background.
    pub fn crit_block(&self) -> Style {
        match self.crit.bg {
            Some(c) if c != Color::Reset => self.crit,
            _ => self.crit.add_modifier(Modifier::REVERSED),
        }
    }

    /// True when no colour may be drawn; callers then need other cues
    /// (glyphs, numbers) where they would otherwise rely on colour.
    pub fn is_mono(&self) -> bool {
        self.depth == ColorDepth::Mono
    }
}

#[cfg(test)]
mod tests {
    use super::testing::styles;
    use super::*;

    #[test]
    fn no_color_yields_mono_with_distinct_modifiers() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Even a broken or unknown spec is ignored under NO_COLOR.
        for spec in ["default", "high-contrast", "nope", "/no/such/file.toml"] {
            let t = Theme::load(spec, Some(dir.path()), ColorDepth::Mono).expect("mono always loads");
            assert_eq!(t.name, "mono");
            for s in styles(&t) {
                assert!(s.fg.is_none_or(|c| c == Color::Reset), "{s:?}");
                assert!(s.bg.is_none_or(|c| c == Color::Reset), "{s:?}");
            }
            assert_eq!(t.heat(0.7), Color::Reset);
            assert_eq!(t.heat_fg(0.7), Color::Reset);
            assert_eq!(t.crit.add_modifier, Modifier::BOLD | Modifier::REVERSED);
            assert_eq!(t.selected.add_modifier, Modifier::REVERSED);
            assert_eq!(t.muted.add_modifier, Modifier::DIM);
            assert_eq!(t.title.add_modifier, Modifier::BOLD);
            assert_eq!(t.warn.add_modifier, Modifier::BOLD | Modifier::UNDERLINED);
            // Everything that must stand out differs from plain text and from
            // each other.
            let loud = [t.muted, t.title, t.selected, t.warn, t.crit, t.info];
            for (i, a) in loud.iter().enumerate() {
                assert_ne!(a.add_modifier, t.base.add_modifier);
                for b in &loud[i + 1..] {
                    assert_ne!(a.add_modifier, b.add_modifier);
                }
            }
        }
        // Asking for mono on a colour terminal is mono too.
        let m = Theme::load("mono", None, ColorDepth::TrueColor).expect("mono");
        assert!(m.is_mono());
        assert_eq!(m.heat(1.0), Color::Reset);
    }
}
