//! Parsing and validating one theme file into a [`Layer`]: the TOML shape
//! (unknown keys refused), colour names, heat stop counts, and for every
//! error the file, line and key path a user needs to fix it.

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use toml::Spanned;

use super::depth::{ANSI16, color_rgb};
use super::{STYLE_KEYS, ThemeError};

const MIN_STOPS: usize = 2;
const MAX_STOPS: usize = 16;

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
pub(super) struct Layer {
    pub(super) name: String,
    pub(super) parent: Option<(String, usize)>,
    pub(super) styles: [Option<Style>; 9],
    pub(super) stops: Option<Vec<[u8; 3]>>,
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

pub(super) fn parse_layer(text: &str, file: &str, stem: String) -> Result<Layer, ThemeError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::theme::testing::{err, write};

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
