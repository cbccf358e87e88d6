//! The heat scale: a theme's `heat.stops` interpolated in RGB for a
//! fraction, degraded to the terminal's depth, and a readable text colour
//! to draw on top of it.

use ratatui::style::Color;

use super::depth::color_rgb;
use super::{ColorDepth, Theme};

impl Theme {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
