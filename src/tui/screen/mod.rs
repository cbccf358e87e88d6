//! The console's screens. Each screen's module holds its key table: the
//! one list of (keys, what they do) that the help popup draws and that
//! docs/console.md's key tables are made from (a test holds them equal,
//! and holds that the key handlers take every key a table names).

pub mod alerts;
pub mod bench;
pub mod detail;
pub mod groups;
pub mod heatmap;
pub mod help;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Heatmap,
    Detail,
    Alerts,
    /// Burn-in progress and verdicts.
    Bench,
    /// The shown nodes grouped by Slurm job, partition or rack (`J`).
    Groups,
}

impl Screen {
    pub const ALL: [Screen; 5] = [
        Screen::Heatmap,
        Screen::Detail,
        Screen::Alerts,
        Screen::Bench,
        Screen::Groups,
    ];
}

/// One row of a key table: the keys as the help prints them (groups of
/// keys two spaces apart), and what they do. A row with no keys goes on
/// with the row above (the help popup is 86 columns wide).
pub type KeyRow = (&'static str, &'static str);

/// The keys every screen shares.
pub const GLOBAL: &[KeyRow] = &[
    ("?", "this help; ? again: flag short names; other keys close"),
    ("q  Ctrl-C  p", "quit · p: pause the display (data still arrives)"),
    ("Tab  Shift-Tab", "next / previous screen: heatmap, alerts, node"),
    ("Esc", "back to the heatmap; on the heatmap, clear the filter"),
    ("/", "filter as you type: name, gpu[01-08], flag or short (thr),"),
    ("", "  crit, warn, ok, partition, rack; a,b = either; ^U clears"),
    (":", "command: node NAME, filter F, sort K, drain [why], resume,"),
    ("", "  return, help, q; Tab completes names, Esc cancels"),
    ("m", "metric: util, memory, temperature, power, SM clock"),
    ("J", "group by Slurm or Ray job, partition, rack or pod"),
];

/// The cluster actions, on the screens that show nodes (the heatmap and
/// node detail).
pub const ACTIONS: &[KeyRow] = &[
    ("D R U", "drain (with a reason), resume, undrain: marked or this"),
    ("T", "return to service: resume after a passing burn-in"),
    ("B", "burn-in on the marked nodes or this one (s: quick/full)"),
];

/// Every key of `screen`, as its help lists them: the shared keys, then
/// the actions where it has them, then its own.
pub fn help_rows(screen: Screen) -> Vec<KeyRow> {
    let own: &[&[KeyRow]] = match screen {
        Screen::Heatmap => &[ACTIONS, heatmap::KEYS],
        Screen::Detail => &[ACTIONS, detail::KEYS],
        Screen::Alerts => &[alerts::KEYS],
        Screen::Groups => &[groups::KEYS],
        Screen::Bench => &[bench::KEYS],
    };
    std::iter::once(GLOBAL)
        .chain(own.iter().copied())
        .flatten()
        .copied()
        .collect()
}

/// Every key table by the name docs/console.md marks it with
/// (`<!-- keys: NAME -->`).
pub const TABLES: [(&str, &[KeyRow]); 7] = [
    ("global", GLOBAL),
    ("actions", ACTIONS),
    ("heatmap", heatmap::KEYS),
    ("detail", detail::KEYS),
    ("alerts", alerts::KEYS),
    ("groups", groups::KEYS),
    ("bench", bench::KEYS),
];

/// A key table as a Markdown table: each group of keys in backticks, a
/// row with no keys joined to the row above.
pub fn markdown(rows: &[KeyRow]) -> String {
    let mut out: Vec<(String, String)> = Vec::new();
    for &(keys, does) in rows {
        match out.last_mut() {
            // A sentence going on (`name, ...`), or another fact.
            Some(last) if keys.is_empty() => {
                last.1.push_str(if last.1.ends_with(',') { " " } else { "; " });
                last.1.push_str(does.trim());
            }
            _ => {
                let keys: Vec<String> = keys.split("  ").map(|g| format!("`{}`", g.trim())).collect();
                out.push((keys.join(", "), does.trim().to_string()));
            }
        }
    }
    let mut md = String::from("| key | does |\n| --- | --- |\n");
    for (keys, does) in out {
        md.push_str(&format!("| {keys} | {} |\n", does.replace('|', "\\|")));
    }
    md
}

/// The key presses a row's keys name (`1-5` is five of them). A name the
/// tables should not use is an error, so a typo in a table fails its test.
pub fn key_events(keys: &str) -> Result<Vec<KeyEvent>, String> {
    let plain = |c| KeyEvent::new(c, KeyModifiers::NONE);
    let mut out = Vec::new();
    for name in keys.split_whitespace() {
        let code = match name {
            "Ctrl-C" => {
                out.push(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
                continue;
            }
            "Ctrl-Space" => {
                out.push(KeyEvent::new(KeyCode::Char(' '), KeyModifiers::CONTROL));
                continue;
            }
            "Shift-Tab" => KeyCode::BackTab,
            "Tab" => KeyCode::Tab,
            "Esc" => KeyCode::Esc,
            "Enter" => KeyCode::Enter,
            "space" => KeyCode::Char(' '),
            "PgUp" => KeyCode::PageUp,
            "PgDn" => KeyCode::PageDown,
            "↑" => KeyCode::Up,
            "↓" => KeyCode::Down,
            "←" => KeyCode::Left,
            "→" => KeyCode::Right,
            _ => match name.chars().collect::<Vec<char>>()[..] {
                [c] => KeyCode::Char(c),
                [a, '-', b] if a.is_ascii_digit() && b.is_ascii_digit() => {
                    out.extend((a..=b).map(|c| plain(KeyCode::Char(c))));
                    continue;
                }
                _ => return Err(format!("`{name}` in `{keys}` names no key")),
            },
        };
        out.push(plain(code));
    }
    Ok(out)
}

/// Up/down/page/home/end as a signed move (`page` steps a page).
pub(crate) fn vertical(k: &KeyEvent, page: isize) -> Option<isize> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    Some(match k.code {
        KeyCode::Char('j') | KeyCode::Down => 1,
        KeyCode::Char('k') | KeyCode::Up => -1,
        KeyCode::PageDown => page,
        KeyCode::Char('d') if ctrl => page,
        KeyCode::PageUp => -page,
        KeyCode::Char('u') if ctrl => -page,
        KeyCode::Char('g') | KeyCode::Home => isize::MIN / 2,
        KeyCode::Char('G') | KeyCode::End => isize::MAX / 2,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/console.md's key tables, each between `<!-- keys: NAME -->`
    /// and `<!-- /keys -->`, are the tables here rendered. With
    /// `FLEETOP_BLESS_DOCS=1` the test writes them there instead.
    #[test]
    fn the_docs_key_tables_are_the_screens_key_tables() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console.md");
        let doc = std::fs::read_to_string(&path).expect("docs/console.md");
        let mut made = doc.clone();
        for (name, rows) in TABLES {
            let open = format!("<!-- keys: {name} -->\n");
            let start = made
                .find(&open)
                .unwrap_or_else(|| panic!("docs/console.md has no `{open}`"))
                + open.len();
            let end = start + made[start..].find("<!-- /keys -->").expect("each table closed");
            made.replace_range(start..end, &markdown(rows));
        }
        if std::env::var_os("FLEETOP_BLESS_DOCS").is_some() {
            std::fs::write(&path, &made).expect("write docs/console.md");
            return;
        }
        assert!(
            doc == made,
            "docs/console.md's key tables differ from src/tui/screen (FLEETOP_BLESS_DOCS=1 writes them):\n{made}"
        );
    }

    /// Every key a table names is taken by that screen's key handler: a
    /// key in the help that does nothing is a lie to the person reading it.
    #[test]
    fn each_screen_takes_every_key_its_table_names() {
        use crate::detect::Thresholds;
        use crate::model::target::Target;
        use crate::store::Store;
        use crate::tui::app::{App, Wall};
        use crate::tui::theme::{ColorDepth, Theme};
        let targets: Vec<Target> = ["gpu01", "gpu02"]
            .into_iter()
            .map(|n| Target {
                name: n.into(),
                host: "10.0.0.1".into(),
                port: 50051,
            })
            .collect();
        let theme = Theme::load("default", None, ColorDepth::TrueColor).expect("theme");
        for screen in Screen::ALL {
            for (keys, _) in help_rows(screen) {
                for k in key_events(keys).unwrap_or_else(|e| panic!("{screen:?}: {e}")) {
                    let mut app = App::new(Store::new(targets.clone(), Thresholds::default()), theme.clone(), 0);
                    app.screen = screen;
                    // The wall's keys are the heatmap's too.
                    app.heatmap.wall = Wall::On;
                    assert!(
                        crate::tui::keys::on_key(&mut app, k),
                        "{screen:?}: {k:?} (`{keys}` in its table) is not taken"
                    );
                }
            }
        }
    }

    #[test]
    fn a_key_name_the_tables_should_not_use_is_an_error() {
        assert_eq!(key_events("1-3").map(|v| v.len()), Ok(3));
        assert!(key_events("Ctrl-X").is_err());
    }
}
