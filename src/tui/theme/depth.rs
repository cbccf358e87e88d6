//! Colour depth: what the terminal can show ([`ColorDepth`], detected from
//! the environment) and how themes written in 24-bit colour are degraded to
//! the 256-colour palette, the 16 ANSI colours, or no colour at all; with
//! the xterm palette values that mapping needs.

use std::fmt;

use ratatui::style::{Color, Style};

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

pub(super) fn degrade_style(mut s: Style, depth: ColorDepth) -> Style {
    if depth == ColorDepth::Mono {
        s.fg = None;
        s.bg = None;
    } else {
        s.fg = s.fg.map(|c| depth.degrade(c));
        s.bg = s.bg.map(|c| depth.degrade(c));
    }
    s
}

/// The 16 ANSI colours with their config names and standard xterm RGB values.
pub(super) const ANSI16: [(Color, &str, [u8; 3]); 16] = [
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
pub(super) fn color_rgb(c: Color) -> Option<[u8; 3]> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
