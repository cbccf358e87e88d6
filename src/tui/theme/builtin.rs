//! The shipped themes: their names and their texts, compiled in from
//! `themes/*.toml` so the console always starts; with the tests that hold
//! every shipped theme to its promises at every colour depth.

pub(super) fn shipped_text(name: &str) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use ratatui::style::Color;

    use super::*;
    use crate::tui::theme::depth::{ANSI16, color_rgb};
    use crate::tui::theme::testing::styles;
    use crate::tui::theme::{ColorDepth, Theme};

    const DEPTHS: [ColorDepth; 4] = [
        ColorDepth::TrueColor,
        ColorDepth::Ansi256,
        ColorDepth::Ansi16,
        ColorDepth::Mono,
    ];

    fn colors(t: &Theme) -> Vec<Color> {
        styles(t).iter().flat_map(|s| [s.fg, s.bg]).flatten().collect()
    }

    fn is_named(c: Color) -> bool {
        c == Color::Reset || ANSI16.iter().any(|(n, _, _)| *n == c)
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
}
