//! The help popup's state. Its rows are the screens' key tables
//! (`screen::help_rows`); it is drawn by `ui::help`.

/// Whether help is open, and on which page.
#[derive(Debug, Clone, Default)]
pub struct HelpState {
    pub shown: bool,
    /// The second page: the short flag names (`?` again).
    pub legend: bool,
}
