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

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use toml::Spanned;

/// How many `parent` hops a chain may take. Deep chains are almost always a
/// mistake, and the bound keeps a pathological directory from recursing long.
pub const MAX_PARENT_DEPTH: usize = 8;

/// Style keys in the order they are stored; also the order errors check them.
const STYLE_KEYS: [&str; 9] = [
    "base", "muted", "border", "title", "selected", "ok", "warn", "crit", "info",
];

const MIN_STOPS: usize = 2;
const MAX_STOPS: usize = 16;

/// What the terminal can display, decided once at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorDepth {
    TrueColor,
    Ansi256,
    Ansi16,
    Mono,
}

impl ColorDepth {
    /// From the environment: NO_COLOR set and non-empty -> Mono; COLORTERM
    /// truecolor/24bit -> TrueColor; TERM containing "256color" -> Ansi256;
    /// TERM "dumb" -> Mono; otherwise Ansi16.
    ///
    /// Over SSH COLORTERM is usually not forwarded (sshd only accepts LANG
    /// and LC_* by default), so most remote sessions land on Ansi256 via
    /// TERM; that is why the 256-colour mapping is carefully chosen.
    pub fn detect() -> Self {
        let get = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
        let (nc, ct, term) = (get("NO_COLOR"), get("COLORTERM"), get("TERM"));
        Self::from_env(nc.as_deref(), ct.as_deref(), term.as_deref())
    }

    /// The same decision as [`ColorDepth::detect`] from explicit values, so
    /// it can be tested without mutating the process environment.
    ///
    /// TERM=dumb is checked before COLORTERM: a dumb terminal (an editor's
    /// shell buffer, a log capture) often inherits COLORTERM from the outer
    /// terminal, and colour escapes there are pure noise.
    pub fn from_env(no_color: Option<&str>, colorterm: Option<&str>, term: Option<&str>) -> Self {
        if no_color.is_some_and(|v| !v.is_empty()) {
            return Self::Mono;
        }
        let term = term.unwrap_or("");
        if term == "dumb" {
            return Self::Mono;
        }
        if let Some(ct) = colorterm {
            let ct = ct.to_ascii_lowercase();
            if ct == "truecolor" || ct == "24bit" {
                return Self::TrueColor;
            }
        }
        if term.contains("256color") {
            return Self::Ansi256;
        }
        Self::Ansi16
    }

    /// Map a colour to one this depth can display.
    ///
    /// * TrueColor: unchanged.
    /// * Ansi256: RGB goes to the nearer (squared Euclidean distance in RGB)
    ///   of the closest 6x6x6 cube entry and the closest grey-ramp entry
    ///   (indices 16..=255), the same rule tmux uses. Indices 0..=15 are never
    ///   produced from RGB because terminals remap them freely. Named and
    ///   indexed colours are kept.
    /// * Ansi16: RGB and indices >= 16 are classified, not matched by plain
    ///   RGB distance, because plain distance sends most theme colours
    ///   (pastels) to grey and status colours would all collapse into
    ///   DarkGray/Gray. Near-greys (chroma < 40 or HSV saturation < 0.2) go
    ///   to the nearest of black, dark_gray, gray, white by xterm values;
    ///   very dark colours (max channel < 48) to black; everything else keeps
    ///   its hue: six 60-degree sectors centred on red, yellow, green, cyan,
    ///   blue, magenta, and the light_* variant when the brightest channel is
    ///   above 230 (midway between xterm's 0xcd and 0xff). So `#ff0000` is
    ///   `LightRed` and `#cc0000` is `Red`.
    /// * Mono: everything becomes `Reset`.
    pub fn degrade(self, color: Color) -> Color {
        match self {
            Self::TrueColor => color,
            Self::Mono => Color::Reset,
            Self::Ansi256 => match color {
                Color::Rgb(r, g, b) => Color::Indexed(rgb_to_256([r, g, b])),
                other => other,
            },
            Self::Ansi16 => match color {
                Color::Rgb(r, g, b) => nearest_ansi16([r, g, b]),
                Color::Indexed(i) if i < 16 => ANSI16[usize::from(i)].0,
                Color::Indexed(i) => nearest_ansi16(xterm_rgb(i)),
                other => other,
            },
        }
    }
}

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

/// Everything that can go wrong loading a theme. Every message is one line
/// naming the file (and line and key path where there is one) because it is
/// shown in a status bar or printed before the TUI starts.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    /// A value that parsed as TOML but is not acceptable (colour, stop count).
    #[error("{file}:{line}: {key}: {message}")]
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
    /// TOML syntax errors and serde errors (unknown key, wrong type).
    #[error("{file}:{line}: {}{message}", key_prefix(.key))]
    Syntax {
        file: String,
        line: usize,
        /// Best-effort key path from the surrounding text; may be empty.
        key: String,
        message: String,
    },
    #[error("{file}:{line}: parent: no theme named '{name}'")]
    UnknownParent { file: String, line: usize, name: String },
    #[error("{file}: parent cycle: {chain}")]
    Cycle { file: String, chain: String },
    #[error("{file}: parent chain deeper than {MAX_PARENT_DEPTH}: {chain}")]
    TooDeep { file: String, chain: String },
    #[error("{file}: {key} missing (a theme without a parent must define every key)")]
    Missing { file: String, key: String },
    #[error("theme '{name}': no such theme (shipped: {})", Theme::SHIPPED.join(", "))]
    NoSuchTheme { name: String },
    #[error("cannot read theme '{path}': {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
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

    /// Heat colour for a fraction 0.0..=1.0 (clamped; NaN -> 0): linear
    /// interpolation in RGB between stops, then degraded to depth. In Mono
    /// returns `Color::Reset`, because a colourless heat map must be drawn
    /// with glyphs or numbers instead.
    pub fn heat(&self, frac: f64) -> Color {
        if self.depth == ColorDepth::Mono {
            return Color::Reset;
        }
        let [r, g, b] = self.heat_rgb(frac);
        self.depth.degrade(Color::Rgb(r, g, b))
    }

    /// A readable foreground for text drawn on `heat(frac)`: black or white,
    /// whichever contrasts more with the colour actually displayed (after
    /// degrading), judged by WCAG relative luminance. Mono: `Reset`.
    pub fn heat_fg(&self, frac: f64) -> Color {
        if self.depth == ColorDepth::Mono {
            return Color::Reset;
        }
        let shown = color_rgb(self.heat(frac)).unwrap_or_else(|| self.heat_rgb(frac));
        // 0.179 is where contrast against black equals contrast against white.
        let rgb = if luminance(shown) > 0.179 {
            Color::Rgb(0, 0, 0)
        } else {
            Color::Rgb(255, 255, 255)
        };
        self.depth.degrade(rgb)
    }

    /// True when no colour may be drawn; callers then need other cues
    /// (glyphs, numbers) where they would otherwise rely on colour.
    pub fn is_mono(&self) -> bool {
        self.depth == ColorDepth::Mono
    }

    fn heat_rgb(&self, frac: f64) -> [u8; 3] {
        let f = if frac.is_nan() { 0.0 } else { frac.clamp(0.0, 1.0) };
        let n = self.stops.len();
        let (Some(first), Some(last)) = (self.stops.first(), self.stops.last()) else {
            return [0, 0, 0];
        };
        if n == 1 || f <= 0.0 {
            return *first;
        }
        if f >= 1.0 {
            return *last;
        }
        let pos = f * (n - 1) as f64;
        let i = (pos.floor() as usize).min(n - 2);
        let t = pos - i as f64;
        let (a, b) = (self.stops[i], self.stops[i + 1]);
        let lerp = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * t).round() as u8;
        [lerp(a[0], b[0]), lerp(a[1], b[1]), lerp(a[2], b[2])]
    }
}

fn degrade_style(mut s: Style, depth: ColorDepth) -> Style {
    if depth == ColorDepth::Mono {
        s.fg = None;
        s.bg = None;
    } else {
        s.fg = s.fg.map(|c| depth.degrade(c));
        s.bg = s.bg.map(|c| depth.degrade(c));
    }
    s
}

// ---------------------------------------------------------------------------
// Files and lookup

fn shipped_text(name: &str) -> Option<&'static str> {
    match name {
        "default" => Some(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/themes/default.toml"
        ))),
        "light" => Some(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/light.toml"))),
        "high-contrast" => Some(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/themes/high-contrast.toml"
        ))),
        "colorblind" => Some(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/themes/colorblind.toml"
        ))),
        "mono" => Some(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/mono.toml"))),
        _ => None,
    }
}

#[derive(Debug, Clone)]
enum Source {
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
fn locate(spec: &str, relative_to: Option<&Path>, user_dir: Option<&Path>) -> Option<Source> {
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

struct Resolved {
    name: String,
    styles: [Style; 9],
    stops: Vec<[u8; 3]>,
}

fn resolve_chain(top: Source, user_dir: Option<&Path>) -> Result<Resolved, ThemeError> {
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

// ---------------------------------------------------------------------------
// Parsing

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    parent: Option<Spanned<String>>,
    styles: Option<StylesFile>,
    heat: Option<HeatFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StylesFile {
    base: Option<StyleFile>,
    muted: Option<StyleFile>,
    border: Option<StyleFile>,
    title: Option<StyleFile>,
    selected: Option<StyleFile>,
    ok: Option<StyleFile>,
    warn: Option<StyleFile>,
    crit: Option<StyleFile>,
    info: Option<StyleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleFile {
    fg: Option<Spanned<String>>,
    bg: Option<Spanned<String>>,
    bold: Option<bool>,
    dim: Option<bool>,
    italic: Option<bool>,
    underline: Option<bool>,
    reversed: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeatFile {
    stops: Option<Spanned<Vec<Spanned<String>>>>,
}

/// One file's contribution, with colours parsed but not yet degraded.
struct Layer {
    name: String,
    parent: Option<(String, usize)>,
    styles: [Option<Style>; 9],
    stops: Option<Vec<[u8; 3]>>,
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|b| **b == b'\n').count() + 1
}

/// Best-effort key path for a serde/TOML error at `offset`: the nearest
/// `[table]` header above plus the key of the error's line when the error is
/// inside that key's value. toml's own messages name the offending field but
/// not where it sits, which is what a user editing the file needs.
fn key_path_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let header = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| {
            l.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default();
    let line = text[line_start..].lines().next().unwrap_or("");
    let mut path = header;
    if let Some(eq) = line.find('=') {
        let key = line[..eq].trim();
        let key_ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        if key_ok && offset > line_start + eq {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(key);
        }
    }
    path
}

fn parse_layer(text: &str, file: &str, stem: String) -> Result<Layer, ThemeError> {
    let tf: ThemeFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        ThemeError::Syntax {
            file: file.to_string(),
            line: line_of(text, offset),
            key: e.span().map(|s| key_path_at(text, s.start)).unwrap_or_default(),
            message: e.message().trim().replace('\n', " "),
        }
    })?;
    let invalid = |span: std::ops::Range<usize>, key: String, message: String| ThemeError::Invalid {
        file: file.to_string(),
        line: line_of(text, span.start),
        key,
        message,
    };

    let mut styles: [Option<Style>; 9] = [None; 9];
    if let Some(sf) = tf.styles {
        let given = [
            sf.base,
            sf.muted,
            sf.border,
            sf.title,
            sf.selected,
            sf.ok,
            sf.warn,
            sf.crit,
            sf.info,
        ];
        for ((slot, key), style) in styles.iter_mut().zip(STYLE_KEYS).zip(given) {
            let Some(style) = style else { continue };
            let mut s = Style::new();
            for (field, value) in [("fg", &style.fg), ("bg", &style.bg)] {
                if let Some(v) = value {
                    let c =
                        parse_color(v.get_ref()).map_err(|m| invalid(v.span(), format!("styles.{key}.{field}"), m))?;
                    if field == "fg" {
                        s.fg = Some(c);
                    } else {
                        s.bg = Some(c);
                    }
                }
            }
            for (flag, m) in [
                (style.bold, Modifier::BOLD),
                (style.dim, Modifier::DIM),
                (style.italic, Modifier::ITALIC),
                (style.underline, Modifier::UNDERLINED),
                (style.reversed, Modifier::REVERSED),
            ] {
                s = match flag {
                    Some(true) => s.add_modifier(m),
                    Some(false) => s.remove_modifier(m),
                    None => s,
                };
            }
            *slot = Some(s);
        }
    }

    let mut stops = None;
    if let Some(list) = tf.heat.and_then(|h| h.stops) {
        let n = list.get_ref().len();
        if !(MIN_STOPS..=MAX_STOPS).contains(&n) {
            return Err(invalid(
                list.span(),
                "heat.stops".to_string(),
                format!("need {MIN_STOPS}..={MAX_STOPS} stops, found {n}"),
            ));
        }
        let mut rgbs = Vec::with_capacity(n);
        for (i, v) in list.get_ref().iter().enumerate() {
            let key = format!("heat.stops[{i}]");
            let c = parse_color(v.get_ref()).map_err(|m| invalid(v.span(), key.clone(), m))?;
            let rgb = color_rgb(c).ok_or_else(|| {
                invalid(
                    v.span(),
                    key,
                    format!("'{}' has no fixed RGB value; heat stops need one", v.get_ref()),
                )
            })?;
            rgbs.push(rgb);
        }
        stops = Some(rgbs);
    }

    Ok(Layer {
        name: tf.name.unwrap_or(stem),
        parent: tf.parent.map(|p| (p.get_ref().clone(), line_of(text, p.span().start))),
        styles,
        stops,
    })
}

/// Parse a colour string. The error is the message without location; the
/// caller adds file, line and key path.
fn parse_color(s: &str) -> Result<Color, String> {
    let lower = s.trim().to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix('#') {
        let bad = || format!("bad hex colour '{s}' (expected #rrggbb)");
        // Checked first so the byte slicing below cannot split a UTF-8 char.
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| bad());
        return Ok(Color::Rgb(byte(0)?, byte(2)?, byte(4)?));
    }
    if let Some(idx) = lower.strip_prefix("idx:") {
        return idx
            .parse::<u8>()
            .map(Color::Indexed)
            .map_err(|_| format!("bad colour index '{s}' (expected idx:0 ..= idx:255)"));
    }
    if lower == "reset" {
        return Ok(Color::Reset);
    }
    let name = lower.replace("grey", "gray");
    ANSI16
        .iter()
        .find(|(_, n, _)| *n == name)
        .map(|(c, _, _)| *c)
        .ok_or_else(|| format!("unknown colour '{s}'"))
}

// ---------------------------------------------------------------------------
// Colour maths

/// The 16 ANSI colours with their config names and standard xterm RGB values.
const ANSI16: [(Color, &str, [u8; 3]); 16] = [
    (Color::Black, "black", [0x00, 0x00, 0x00]),
    (Color::Red, "red", [0xcd, 0x00, 0x00]),
    (Color::Green, "green", [0x00, 0xcd, 0x00]),
    (Color::Yellow, "yellow", [0xcd, 0xcd, 0x00]),
    (Color::Blue, "blue", [0x00, 0x00, 0xee]),
    (Color::Magenta, "magenta", [0xcd, 0x00, 0xcd]),
    (Color::Cyan, "cyan", [0x00, 0xcd, 0xcd]),
    (Color::Gray, "gray", [0xe5, 0xe5, 0xe5]),
    (Color::DarkGray, "dark_gray", [0x7f, 0x7f, 0x7f]),
    (Color::LightRed, "light_red", [0xff, 0x00, 0x00]),
    (Color::LightGreen, "light_green", [0x00, 0xff, 0x00]),
    (Color::LightYellow, "light_yellow", [0xff, 0xff, 0x00]),
    (Color::LightBlue, "light_blue", [0x5c, 0x5c, 0xff]),
    (Color::LightMagenta, "light_magenta", [0xff, 0x00, 0xff]),
    (Color::LightCyan, "light_cyan", [0x00, 0xff, 0xff]),
    (Color::White, "white", [0xff, 0xff, 0xff]),
];

/// Channel values of the xterm 6x6x6 cube.
const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];

fn dist2(a: [u8; 3], b: [u8; 3]) -> u32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let d = i32::from(*x) - i32::from(y);
            (d * d) as u32
        })
        .sum()
}

/// RGB of an xterm palette index (standard xterm values).
fn xterm_rgb(i: u8) -> [u8; 3] {
    match i {
        0..=15 => ANSI16[usize::from(i)].2,
        16..=231 => {
            let n = usize::from(i - 16);
            [CUBE[n / 36], CUBE[(n / 6) % 6], CUBE[n % 6]]
        }
        _ => {
            let v = 8 + 10 * (i - 232);
            [v, v, v]
        }
    }
}

/// RGB actually shown for a colour, where it is fixed (`Reset` is not).
fn color_rgb(c: Color) -> Option<[u8; 3]> {
    match c {
        Color::Rgb(r, g, b) => Some([r, g, b]),
        Color::Indexed(i) => Some(xterm_rgb(i)),
        Color::Reset => None,
        named => ANSI16.iter().find(|(c, _, _)| *c == named).map(|(_, _, rgb)| *rgb),
    }
}

fn rgb_to_256(rgb: [u8; 3]) -> u8 {
    // Nearest cube level per channel (levels are uneven, so search).
    let level = |v: u8| -> usize {
        (0..6)
            .min_by_key(|&i| (i32::from(CUBE[i]) - i32::from(v)).abs())
            .unwrap_or(0)
    };
    let (r, g, b) = (level(rgb[0]), level(rgb[1]), level(rgb[2]));
    let cube_idx = 16 + 36 * r + 6 * g + b;
    let cube_rgb = [CUBE[r], CUBE[g], CUBE[b]];

    // Nearest grey-ramp entry (8, 18, ..., 238) to the channel average.
    let avg = (u32::from(rgb[0]) + u32::from(rgb[1]) + u32::from(rgb[2])) / 3;
    let gi = (0..24u32)
        .min_by_key(|&i| (i64::from(8 + 10 * i) - i64::from(avg)).abs())
        .unwrap_or(0);
    let gv = (8 + 10 * gi) as u8;
    let grey_idx = 232 + gi as usize;

    let chosen = if dist2([gv, gv, gv], rgb) < dist2(cube_rgb, rgb) {
        grey_idx
    } else {
        cube_idx
    };
    chosen as u8
}

fn nearest_ansi16(rgb: [u8; 3]) -> Color {
    let [r, g, b] = rgb.map(i32::from);
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let chroma = max - min;
    if chroma < 40 || chroma * 5 < max {
        // Achromatic: only the four greys are candidates.
        return [0usize, 8, 7, 15]
            .into_iter()
            .min_by_key(|&i| dist2(ANSI16[i].2, rgb))
            .map_or(Color::Reset, |i| ANSI16[i].0);
    }
    if max < 48 {
        return Color::Black;
    }
    let c = f64::from(chroma);
    let hue = if max == r {
        60.0 * (f64::from(g - b) / c)
    } else if max == g {
        60.0 * (f64::from(b - r) / c) + 120.0
    } else {
        60.0 * (f64::from(r - g) / c) + 240.0
    };
    let hue = hue.rem_euclid(360.0);
    // Sector 0..6 = red, yellow, green, cyan, blue, magenta (ANSI 1,3,2,6,4,5).
    let sector = ((hue + 30.0) / 60.0).floor() as usize % 6;
    let normal = [1usize, 3, 2, 6, 4, 5][sector];
    let idx = if max > 230 { normal + 8 } else { normal };
    ANSI16[idx].0
}

/// WCAG relative luminance.
fn luminance(rgb: [u8; 3]) -> f64 {
    let lin = |v: u8| {
        let c = f64::from(v) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
}

impl fmt::Display for ColorDepth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TrueColor => "truecolor",
            Self::Ansi256 => "256",
            Self::Ansi16 => "16",
            Self::Mono => "mono",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const DEPTHS: [ColorDepth; 4] = [
        ColorDepth::TrueColor,
        ColorDepth::Ansi256,
        ColorDepth::Ansi16,
        ColorDepth::Mono,
    ];

    fn styles(t: &Theme) -> [Style; 9] {
        [
            t.base, t.muted, t.border, t.title, t.selected, t.ok, t.warn, t.crit, t.info,
        ]
    }

    fn colors(t: &Theme) -> Vec<Color> {
        styles(t).iter().flat_map(|s| [s.fg, s.bg]).flatten().collect()
    }

    fn is_named(c: Color) -> bool {
        c == Color::Reset || ANSI16.iter().any(|(n, _, _)| *n == c)
    }

    fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        let mut f = fs::File::create(&p).expect("create theme file");
        f.write_all(body.as_bytes()).expect("write theme file");
        p
    }

    fn err(spec: &str, dir: Option<&Path>) -> String {
        Theme::load(spec, dir, ColorDepth::TrueColor)
            .expect_err("theme should fail to load")
            .to_string()
    }

    #[test]
    fn every_shipped_theme_resolves_at_every_depth() {
        for name in Theme::SHIPPED {
            for depth in DEPTHS {
                let t = Theme::load(name, None, depth).expect("shipped theme loads");
                match depth {
                    ColorDepth::Ansi16 => {
                        for c in colors(&t) {
                            assert!(is_named(c), "{name}@16: {c:?}");
                        }
                        for f in [0.0, 0.3, 0.5, 1.0] {
                            assert!(is_named(t.heat(f)) && is_named(t.heat_fg(f)));
                        }
                    }
                    ColorDepth::Ansi256 => {
                        for c in colors(&t) {
                            assert!(matches!(c, Color::Indexed(_)) || is_named(c), "{name}@256: {c:?}");
                        }
                        assert!(matches!(t.heat(0.5), Color::Indexed(_)) || name == "mono");
                    }
                    ColorDepth::Mono => {
                        assert_eq!(t.name, "mono");
                        assert!(t.is_mono());
                    }
                    ColorDepth::TrueColor => {
                        assert!(!t.is_mono() || name == "mono");
                    }
                }
                // One-line, newline-free output is what every caller relies on.
                assert!(!t.name.contains('\n'));
            }
        }
    }

    #[test]
    fn status_styles_stay_distinct_after_degrading() {
        // ok/warn/crit must never collapse into one look, or the console
        // would hide failures on a 16-colour terminal.
        for name in Theme::SHIPPED {
            for depth in DEPTHS {
                let t = Theme::load(name, None, depth).expect("shipped theme loads");
                let st = [t.ok, t.warn, t.crit];
                for (i, a) in st.iter().enumerate() {
                    for b in &st[i + 1..] {
                        assert_ne!(a, b, "{name} at {depth}");
                    }
                }
                if !t.is_mono() {
                    let hue = [t.ok, t.warn, t.crit].map(|s| (s.fg, s.bg));
                    assert!(
                        hue[0] != hue[1] && hue[1] != hue[2] && hue[0] != hue[2],
                        "{name} at {depth}: {hue:?}"
                    );
                }
            }
        }
    }

    /// The colour a theme's crit style paints: its background where it has
    /// one, else its foreground (drawn reversed on the wall).
    fn crit_colour(t: &Theme) -> Option<Color> {
        t.crit.bg.filter(|c| *c != Color::Reset).or(t.crit.fg)
    }

    #[test]
    fn the_heat_scale_never_takes_the_crit_colour_nor_red() {
        // A 95 %-busy cell must not look like a critical node: red belongs
        // to crit alone, at every depth a terminal may have.
        for name in Theme::SHIPPED.into_iter().filter(|n| *n != "mono") {
            for depth in [ColorDepth::TrueColor, ColorDepth::Ansi256, ColorDepth::Ansi16] {
                let t = Theme::load(name, None, depth).expect("shipped theme loads");
                let crit = crit_colour(&t).expect("crit has a colour");
                for i in 0..=100 {
                    let heat = t.heat(f64::from(i) / 100.0);
                    assert_ne!(heat, crit, "{name} at {depth}: heat {i}% is crit's colour");
                    assert!(
                        !matches!(heat, Color::Red | Color::LightRed),
                        "{name} at {depth}: heat {i}% is red"
                    );
                    if let Some([r, g, b]) = color_rgb(heat) {
                        // Red-dominant (hue within 30 degrees of red) and saturated.
                        let red = r > 120 && u32::from(r) > 2 * u32::from(g).max(u32::from(b));
                        assert!(!red, "{name} at {depth}: heat {i}% is {heat:?}, a red");
                    }
                }
            }
        }
    }

    #[test]
    fn shipped_texts_exist_for_every_name() {
        for name in Theme::SHIPPED {
            assert!(shipped_text(name).is_some_and(|t| !t.is_empty()), "{name}");
        }
        assert!(shipped_text("nope").is_none());
    }

    #[test]
    fn colorblind_inherits_default_but_changes_status_colours() {
        let d = Theme::load("default", None, ColorDepth::TrueColor).expect("default");
        let c = Theme::load("colorblind", None, ColorDepth::TrueColor).expect("colorblind");
        assert_eq!(c.name, "colorblind");
        assert_eq!(c.base, d.base);
        assert_eq!(c.selected, d.selected);
        assert_eq!(c.ok.fg, Some(Color::Rgb(0x56, 0xb4, 0xe9)));
        assert_ne!(c.crit, d.crit);
        assert_eq!(c.heat(0.0), Color::Rgb(0x44, 0x01, 0x54));
        assert_eq!(c.heat(1.0), Color::Rgb(0xfd, 0xe7, 0x25));
    }

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
    fn bad_colour_names_file_line_and_key_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(
            dir.path(),
            "x.toml",
            "parent = \"default\"\n\n[styles]\nok = { fg = \"green\" }\n\n# comment\nwarn = { fg = \"yelow\" }\n",
        );
        assert_eq!(
            err("x", Some(dir.path())),
            format!("{}:7: styles.warn.fg: unknown colour 'yelow'", p.display())
        );
        write(
            dir.path(),
            "h.toml",
            "parent = \"default\"\n[heat]\nstops = [\n  \"#000000\",\n  \"#111111\",\n  \"idx:300\",\n]\n",
        );
        let e = err("h", Some(dir.path()));
        assert!(
            e.ends_with("h.toml:6: heat.stops[2]: bad colour index 'idx:300' (expected idx:0 ..= idx:255)"),
            "{e}"
        );
        write(
            dir.path(),
            "r.toml",
            "parent = \"default\"\n[heat]\nstops = [\"reset\", \"#ffffff\"]\n",
        );
        assert!(err("r", Some(dir.path())).contains("r.toml:3: heat.stops[0]: 'reset' has no fixed RGB"));
        write(
            dir.path(),
            "n.toml",
            "parent = \"default\"\n[heat]\nstops = [\"#ffffff\"]\n",
        );
        assert!(err("n", Some(dir.path())).ends_with("n.toml:3: heat.stops: need 2..=16 stops, found 1"));
        write(
            dir.path(),
            "hex.toml",
            "parent = \"default\"\n[styles]\nbase = { bg = \"#12345\" }\n",
        );
        assert!(
            err("hex", Some(dir.path()))
                .ends_with("hex.toml:3: styles.base.bg: bad hex colour '#12345' (expected #rrggbb)")
        );
    }

    #[test]
    fn unknown_key_is_an_error_with_line_and_section() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "u.toml",
            "parent = \"default\"\n[styles]\nwarn = { fgg = \"red\" }\n",
        );
        let e = err("u", Some(dir.path()));
        assert!(e.contains("u.toml:3: styles.warn: unknown field `fgg`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        write(
            dir.path(),
            "v.toml",
            "parent = \"default\"\n[styles]\nwarning = { fg = \"red\" }\n",
        );
        let e = err("v", Some(dir.path()));
        assert!(e.contains("v.toml:3: styles: unknown field `warning`"), "{e}");
        write(dir.path(), "w.toml", "colour = 1\n");
        let e = err("w", Some(dir.path()));
        assert!(e.contains("w.toml:1: unknown field `colour`"), "{e}");
        write(
            dir.path(),
            "t.toml",
            "parent = \"default\"\n[styles]\ncrit = { bold = \"yes\" }\n",
        );
        let e = err("t", Some(dir.path()));
        assert!(e.contains("t.toml:3: styles.crit"), "{e}");
        write(dir.path(), "s.toml", "parent = \"default\"\n[styles\n");
        let e = err("s", Some(dir.path()));
        assert!(e.contains("s.toml:2: ") && !e.contains('\n'), "{e}");
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

    #[test]
    fn degrade_known_mappings() {
        let d256 = |r, g, b| ColorDepth::Ansi256.degrade(Color::Rgb(r, g, b));
        let d16 = |r, g, b| ColorDepth::Ansi16.degrade(Color::Rgb(r, g, b));
        assert_eq!(d256(0xff, 0, 0), Color::Indexed(196));
        assert_eq!(d256(0, 0, 0), Color::Indexed(16));
        assert_eq!(d256(0xff, 0xff, 0xff), Color::Indexed(231));
        assert_eq!(d256(0x5f, 0x87, 0xaf), Color::Indexed(67));
        // Greys: the ramp is finer than the cube's diagonal.
        assert_eq!(d256(0x80, 0x80, 0x80), Color::Indexed(244)); // 128 ~ ramp 128
        assert_eq!(d256(0x12, 0x12, 0x12), Color::Indexed(233)); // 18
        assert_eq!(d256(0x87, 0x87, 0x87), Color::Indexed(102)); // exact cube grey
        assert_eq!(d256(0xee, 0xee, 0xee), Color::Indexed(255)); // 238
        // Ansi16 uses xterm's values: #ff0000 is bright red exactly.
        assert_eq!(d16(0xff, 0, 0), Color::LightRed);
        assert_eq!(d16(0xcc, 0x00, 0x00), Color::Red);
        assert_eq!(d16(0, 0, 0), Color::Black);
        assert_eq!(d16(0x80, 0x80, 0x80), Color::DarkGray);
        // Pastels keep their hue instead of collapsing to grey.
        assert_eq!(d16(0xf0, 0xc6, 0x74), Color::LightYellow);
        assert_eq!(d16(0xcc, 0x66, 0x66), Color::Red);
        assert_eq!(d16(0x78, 0xc3, 0x5f), Color::Green);
        assert_eq!(d16(0x1d, 0x35, 0x57), Color::Blue);
        assert_eq!(d16(0x8a, 0xbe, 0xb7), Color::Cyan);
        assert_eq!(d16(0xcc, 0x79, 0xa7), Color::Magenta);
        assert_eq!(d16(0x56, 0xb4, 0xe9), Color::LightCyan);
        assert_eq!(d16(0x70, 0x78, 0x80), Color::DarkGray);
        assert_eq!(d16(0xc5, 0xc8, 0xc6), Color::Gray);
        assert_eq!(d16(0x20, 0x00, 0x10), Color::Black);
        assert_eq!(ColorDepth::Ansi16.degrade(Color::Indexed(196)), Color::LightRed);
        assert_eq!(ColorDepth::Ansi16.degrade(Color::Indexed(4)), Color::Blue);
        assert_eq!(ColorDepth::Ansi16.degrade(Color::Indexed(255)), Color::Gray);
        // Named and reset pass through everywhere but Mono.
        assert_eq!(ColorDepth::Ansi256.degrade(Color::Cyan), Color::Cyan);
        assert_eq!(ColorDepth::Ansi16.degrade(Color::Reset), Color::Reset);
        assert_eq!(ColorDepth::Mono.degrade(Color::Rgb(1, 2, 3)), Color::Reset);
        assert_eq!(ColorDepth::TrueColor.degrade(Color::Rgb(1, 2, 3)), Color::Rgb(1, 2, 3));
    }

    #[test]
    fn xterm_palette_round_trips_through_256() {
        for i in 16..=255u8 {
            let [r, g, b] = xterm_rgb(i);
            assert_eq!(rgb_to_256([r, g, b]), i, "index {i}");
        }
    }

    #[test]
    fn colour_parsing() {
        assert_eq!(parse_color("#C5c8C6"), Ok(Color::Rgb(0xc5, 0xc8, 0xc6)));
        assert_eq!(parse_color("reset"), Ok(Color::Reset));
        assert_eq!(parse_color("dark_grey"), Ok(Color::DarkGray));
        assert_eq!(parse_color("grey"), Ok(Color::Gray));
        assert_eq!(parse_color("Light_Cyan"), Ok(Color::LightCyan));
        assert_eq!(parse_color("idx:0"), Ok(Color::Indexed(0)));
        assert_eq!(parse_color("idx:255"), Ok(Color::Indexed(255)));
        assert!(parse_color("idx:256").is_err());
        assert!(parse_color("#12345g").is_err());
        assert!(parse_color("#ééé").is_err());
        assert!(parse_color("orange").is_err());
    }

    fn heat_theme(stops: Vec<[u8; 3]>, depth: ColorDepth) -> Theme {
        let mut t = Theme::load("default", None, depth).expect("default");
        t.stops = stops;
        t
    }

    #[test]
    fn heat_interpolation() {
        let t = heat_theme(vec![[0, 0, 0], [200, 100, 50], [255, 255, 255]], ColorDepth::TrueColor);
        assert_eq!(t.heat(0.0), Color::Rgb(0, 0, 0));
        assert_eq!(t.heat(1.0), Color::Rgb(255, 255, 255));
        assert_eq!(t.heat(0.5), Color::Rgb(200, 100, 50));
        assert_eq!(t.heat(0.25), Color::Rgb(100, 50, 25));
        assert_eq!(t.heat(-3.0), t.heat(0.0));
        assert_eq!(t.heat(7.0), t.heat(1.0));
        assert_eq!(t.heat(f64::NAN), t.heat(0.0));
        assert_eq!(t.heat(f64::INFINITY), t.heat(1.0));
        assert_eq!(t.heat_fg(0.0), Color::Rgb(255, 255, 255));
        assert_eq!(t.heat_fg(1.0), Color::Rgb(0, 0, 0));

        let d = Theme::load("default", None, ColorDepth::TrueColor).expect("default");
        assert_eq!(d.heat(0.0), Color::Rgb(0x0f, 0x2a, 0x4a));
        assert_eq!(d.heat(1.0), Color::Rgb(0xe0, 0xf3, 0xf0));

        let t16 = heat_theme(vec![[0, 0, 0], [255, 255, 255]], ColorDepth::Ansi16);
        assert_eq!(t16.heat(0.0), Color::Black);
        assert_eq!(t16.heat(1.0), Color::White);
        assert_eq!(t16.heat_fg(0.0), Color::White);
        assert_eq!(t16.heat_fg(1.0), Color::Black);
        let t256 = heat_theme(vec![[0, 0, 0], [255, 255, 255]], ColorDepth::Ansi256);
        assert_eq!(t256.heat(0.5), Color::Indexed(244));
        assert_eq!(t256.heat_fg(0.0), Color::Indexed(231));
    }

    #[test]
    fn color_depth_from_env_table() {
        use ColorDepth::*;
        // (NO_COLOR, COLORTERM, TERM, expected)
        type Case = (
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
            ColorDepth,
        );
        let cases: [Case; 12] = [
            (Some("1"), Some("truecolor"), Some("xterm-256color"), Mono),
            (Some(""), Some("truecolor"), Some("xterm"), TrueColor),
            (None, Some("truecolor"), Some("xterm-256color"), TrueColor),
            (None, Some("24bit"), Some("screen"), TrueColor),
            (None, Some("TrueColor"), None, TrueColor),
            (None, Some("yes"), Some("xterm-256color"), Ansi256),
            (None, None, Some("tmux-256color"), Ansi256),
            (None, None, Some("dumb"), Mono),
            (None, Some("truecolor"), Some("dumb"), Mono),
            (None, None, Some("xterm"), Ansi16),
            (None, None, Some("linux"), Ansi16),
            (None, None, None, Ansi16),
        ];
        for (nc, ct, term, want) in cases {
            assert_eq!(ColorDepth::from_env(nc, ct, term), want, "{nc:?} {ct:?} {term:?}");
        }
    }

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

    #[test]
    fn key_path_heuristic() {
        let text = "a = 1\n[styles]\nwarn = { fgg = 1 }\n";
        let at = text.find("fgg").expect("fgg");
        assert_eq!(key_path_at(text, at), "styles.warn");
        assert_eq!(key_path_at(text, text.find("warn").expect("warn")), "styles");
        assert_eq!(key_path_at(text, 0), "");
        assert_eq!(line_of(text, at), 3);
    }
}
