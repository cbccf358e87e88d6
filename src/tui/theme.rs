//! PROVISIONAL stand-in with the final API; replaced by the theme system.
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorDepth {
    TrueColor,
    Ansi256,
    Ansi16,
    Mono,
}

impl ColorDepth {
    pub fn detect() -> Self {
        ColorDepth::Ansi256
    }
}

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
}

#[derive(Debug, thiserror::Error)]
#[error("theme error")]
pub struct ThemeError;

impl Theme {
    pub fn load(_spec: &str, _user_dir: Option<&std::path::Path>, depth: ColorDepth) -> Result<Theme, ThemeError> {
        Ok(Theme {
            name: "default".into(),
            base: Style::new(),
            muted: Style::new().fg(Color::DarkGray),
            border: Style::new().fg(Color::DarkGray),
            title: Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            selected: Style::new().fg(Color::Black).bg(Color::Cyan),
            ok: Style::new().fg(Color::Green),
            warn: Style::new().fg(Color::Yellow),
            crit: Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            info: Style::new().fg(Color::Cyan),
            depth,
        })
    }
    pub fn user_dir() -> Option<std::path::PathBuf> {
        None
    }
    pub fn heat(&self, frac: f64) -> Color {
        const RAMP: [u8; 6] = [17, 24, 30, 36, 142, 166];
        let f = if frac.is_nan() { 0.0 } else { frac.clamp(0.0, 1.0) };
        Color::Indexed(RAMP[(f * 5.0).round() as usize])
    }
    pub fn heat_fg(&self, _frac: f64) -> Color {
        Color::White
    }
    pub fn is_mono(&self) -> bool {
        self.depth == ColorDepth::Mono
    }
}
