//! The console's state. Nothing here does I/O or reads the clock: time
//! arrives in actions, which `dispatch::update` applies.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crossterm::event::KeyEvent;

use crate::model::request::Request;
use crate::model::update::Update;
use crate::store::{NodeState, Store};
use crate::tui::layout;
use crate::tui::theme::Theme;
use crate::tui::view::{self, Filter, Metric, Sort};

pub use crate::tui::modal::{CommandLine, Dialog, Guard};
pub use crate::tui::screen::Screen;
pub use crate::tui::screen::alerts::{AlertRow, AlertSort, AlertsState};
pub use crate::tui::screen::bench::BenchState;
pub use crate::tui::screen::detail::{DetailState, Pane, Zoom};
pub use crate::tui::screen::groups::GroupsState;
pub use crate::tui::screen::heatmap::{HeatmapState, WALL_AUTO_NODES, Wall};
pub use crate::tui::screen::help::HelpState;

/// Where copied text goes (the terminal's clipboard, by OSC 52).
pub type ClipboardSink = Box<dyn FnMut(&str) + Send>;

/// Everything that can happen to the app.
#[derive(Debug, Clone)]
pub enum Action {
    Key(KeyEvent),
    /// The clock moved (ages, stale judgement), to this time.
    Tick(i64),
    /// Something arrived from a node, at this time.
    Store(Update, i64),
    /// The terminal's size (at start and on every resize).
    Resize(u16, u16),
    /// A click or the wheel.
    Mouse(crossterm::event::MouseEvent),
    Quit,
}

/// What this console may do to the cluster: the three are set once, at
/// start, from the sources and the flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allowed {
    /// Actions are possible (a scheduler is known) and allowed (not read-only).
    pub actions: bool,
    /// Burn-in is possible (the agents' token is known).
    pub bench: bool,
    pub read_only: bool,
}

/// What a key asked of the world outside the app: the loop takes each
/// after an update and hands it on, so the app itself does no I/O.
#[derive(Default)]
pub struct Outbox {
    /// A request for the action task.
    pub request: Option<Request>,
    /// Text for the terminal's clipboard, handed by the loop to `clipboard_sink`.
    pub clipboard: Option<String>,
    /// Where copied text goes: the terminal (OSC 52) in the console; tests
    /// keep it.
    pub clipboard_sink: Option<ClipboardSink>,
    /// Rings the terminal bell on a new crit flag (`[notify] bell`); set by
    /// `tui::run` only, so tests on `TestBackend` never ring.
    pub bell: Option<crate::ops::notify::bell::Bell>,
}

/// The files the console writes, named on screen.
pub struct Files {
    /// The log (shown in the footer where a message points to it).
    pub log: Option<PathBuf>,
    /// Where actions are logged (shown with their results).
    pub audit: PathBuf,
}

pub struct App {
    pub store: Store,
    pub theme: Theme,
    pub now_ms: i64,
    pub screen: Screen,
    pub metric: Metric,
    pub sort: Sort,
    /// `S`: the sort runs the other way (lowest utilization first).
    pub sort_reverse: bool,
    pub filter: Filter,
    pub filter_text: String,
    /// The filter being typed, while `/` is open: applied as it is typed.
    pub input: Option<String>,
    /// The filter before `/` was pressed, restored by Esc.
    pub(crate) filter_before: Option<(Filter, String)>,
    /// The `:` command line, while it is open (`tui::command`).
    pub command: Option<CommandLine>,
    /// How often the screen may be redrawn (`--refresh`).
    pub refresh: std::time::Duration,
    /// A one-line message for the footer (a bad filter, ...).
    pub message: Option<String>,
    /// The node under the cursor (its index in the store): the selection
    /// follows the node, not the row, so a live re-sort never moves another
    /// node under a key press.
    pub selected: Option<usize>,
    /// Where the selection was in the visible list: where it goes when the
    /// selected node leaves the list (a filter).
    cursor: usize,
    /// Nodes marked with space (node indices), for actions.
    pub marked: BTreeSet<usize>,
    /// Each screen's own state (`tui::screen`), and the help popup's.
    pub heatmap: HeatmapState,
    pub detail: DetailState,
    pub alerts: AlertsState,
    pub bench: BenchState,
    pub groups: GroupsState,
    pub help: HelpState,
    pub quit: bool,
    /// What this console may do to the cluster.
    pub allowed: Allowed,
    pub dialog: Option<Dialog>,
    /// What a key asked of the world outside the app, taken by the loop.
    pub out: Outbox,
    /// The files the console writes, named on screen.
    pub files: Files,
    /// The terminal's size, for layout-dependent moves (the wall's rows).
    pub size: (u16, u16),
    /// `p`: the display is frozen; what arrives meanwhile goes here.
    pub paused: Option<crate::tui::pause::Paused>,
    pub(super) changed: bool,
}

impl App {
    pub fn new(store: Store, theme: Theme, now_ms: i64) -> Self {
        App {
            store,
            theme,
            now_ms,
            screen: Screen::Heatmap,
            metric: Metric::Util,
            sort: Sort::Flags,
            sort_reverse: false,
            filter: Filter::All,
            filter_text: String::new(),
            input: None,
            filter_before: None,
            command: None,
            refresh: crate::model::time::DEFAULT_REFRESH,
            message: None,
            selected: None,
            cursor: 0,
            marked: BTreeSet::new(),
            heatmap: HeatmapState::default(),
            detail: DetailState::default(),
            alerts: AlertsState::default(),
            bench: BenchState::default(),
            groups: GroupsState::default(),
            help: HelpState::default(),
            quit: false,
            allowed: Allowed::default(),
            dialog: None,
            out: Outbox::default(),
            files: Files {
                log: None,
                audit: crate::ops::audit::audit_path(),
            },
            size: (80, 24),
            paused: None,
            changed: true,
        }
    }

    /// The store updates go to: behind the display while paused. What
    /// acts on news (notifications, the bell, saving the timeline) reads
    /// this one, so a pause never holds them back.
    pub fn live_store_mut(&mut self) -> &mut Store {
        match self.paused.as_mut() {
            Some(p) => &mut p.live,
            None => &mut self.store,
        }
    }

    /// Whether the store changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The nodes shown, in order (node indices). The dense wall never
    /// re-sorts under the person's eyes: a live sort is taken once, when
    /// they sort (or turn the wall on), and kept until they sort again; a
    /// node not in that order goes last, by name.
    pub fn visible(&self) -> Vec<usize> {
        let mut v = view::visible(
            &self.store,
            &self.filter,
            self.sort,
            self.sort_reverse,
            self.metric,
            self.now_ms,
        );
        if self.wall_active() && self.sort != Sort::Name {
            match &self.heatmap.wall_order {
                Some(rank) => v.sort_by_key(|&i| rank.get(i).copied().unwrap_or(usize::MAX)),
                None => v.sort_by(|&a, &b| self.store.nodes[a].target.name.cmp(&self.store.nodes[b].target.name)),
            }
        }
        v
    }

    /// The order the heatmap shows: the wall keeps a live sort only once
    /// it was taken (`s`); until then it is in name order, and says so.
    pub fn shown_sort(&self) -> Sort {
        if self.wall_active() && self.heatmap.wall_order.is_none() {
            Sort::Name
        } else {
            self.sort
        }
    }

    /// Takes the current sort's order for the wall to keep (see `visible`).
    pub(crate) fn freeze_wall_order(&mut self) {
        self.heatmap.wall_order = None;
        let all = view::visible(
            &self.store,
            &Filter::All,
            self.sort,
            self.sort_reverse,
            self.metric,
            self.now_ms,
        );
        let mut rank = vec![usize::MAX; self.store.nodes.len()];
        for (pos, &i) in all.iter().enumerate() {
            rank[i] = pos;
        }
        self.heatmap.wall_order = Some(rank);
    }

    pub fn wall_active(&self) -> bool {
        match self.heatmap.wall {
            Wall::Auto => self.store.nodes.len() > WALL_AUTO_NODES,
            Wall::On => true,
            Wall::Off => false,
        }
    }

    /// The node under the cursor: the selected one while it is shown.
    pub fn current_node(&self) -> Option<usize> {
        let vis = self.visible();
        vis.get(self.cursor_pos_in(&vis)).copied()
    }

    /// The cursor's row in the visible list (where the current node is).
    pub fn cursor_pos(&self) -> usize {
        self.cursor_pos_in(&self.visible())
    }

    /// The cursor's row in `vis`, the visible list already computed.
    pub fn cursor_pos_in(&self, vis: &[usize]) -> usize {
        self.selected
            .and_then(|n| vis.iter().position(|&i| i == n))
            .unwrap_or_else(|| self.cursor.min(vis.len().saturating_sub(1)))
    }

    /// Selects the node at row `pos` of the visible list.
    pub(crate) fn select_row(&mut self, pos: usize) {
        let vis = self.visible();
        let pos = pos.min(vis.len().saturating_sub(1));
        self.cursor = pos;
        self.selected = vis.get(pos).copied();
    }

    /// Moves the cursor `delta` rows from the current node.
    pub(super) fn move_cursor(&mut self, delta: isize) {
        let len = self.visible().len();
        self.select_row(moved(self.cursor_pos(), delta, len));
    }

    /// Selects node `node` (by store index), wherever it is in the list.
    pub(crate) fn select_node(&mut self, node: usize) {
        self.selected = Some(node);
        if let Some(pos) = self.visible().iter().position(|&i| i == node) {
            self.cursor = pos;
        }
    }

    /// The node shown in detail.
    pub fn node_in_detail(&self) -> Option<&NodeState> {
        self.store.nodes.get(self.detail.node)
    }

    pub(crate) fn open_detail(&mut self, node: usize, gpu: Option<u32>) {
        self.detail.node = node;
        self.detail.timeline_scroll = 0;
        self.detail.gpu = gpu
            .and_then(|g| {
                self.store
                    .nodes
                    .get(node)?
                    .last
                    .as_ref()?
                    .gpus
                    .iter()
                    .position(|x| x.index == g)
            })
            .unwrap_or(0);
        self.screen = Screen::Detail;
    }

    pub(super) fn gpu_count(&self) -> usize {
        self.node_in_detail()
            .and_then(|n| n.last.as_ref())
            .map(|s| s.gpus.len())
            .unwrap_or(0)
    }

    /// Cells per row of the dense wall at the current size.
    pub fn wall_columns(&self) -> usize {
        self.wall_cell().0
    }

    /// Cells per row and cell width of the dense wall at the current size.
    pub(super) fn wall_cell(&self) -> (usize, usize) {
        let area = ratatui::layout::Rect::new(0, 0, self.size.0, self.size.1);
        layout::wall_geometry(layout::body_area(area), self.visible().len())
    }
}

pub(super) fn moved(pos: usize, delta: isize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (pos as isize + delta).clamp(0, len as isize - 1) as usize
}

/// `p`: freezes the display (the store drawn stays as it is) or brings
/// it back to now, with everything that arrived meanwhile.
pub(super) fn toggle_pause(app: &mut App) {
    match app.paused.take() {
        None => app.paused = Some(crate::tui::pause::Paused::new(&mut app.store, app.now_ms)),
        Some(p) => {
            app.store = *p.live;
            app.now_ms = p.now_ms;
            app.message = Some(format!("resumed: {} updates arrived while paused", p.arrived));
            clamp_cursors(app);
        }
    }
    app.changed = true;
}

/// Keeps cursors inside what is shown (the list can shrink under a filter).
pub(super) fn clamp_cursors(app: &mut App) {
    // The selected node keeps the cursor wherever a re-sort takes it; one
    // that is no longer shown hands it to whatever is now on its row.
    // Until the person picks a node the cursor stays on its row (the top,
    // the worst node): what reaches the top later is what they see first.
    if app.selected.is_some() {
        let pos = app.cursor_pos();
        app.select_row(pos);
    } else {
        app.cursor = app.cursor.min(app.visible().len().saturating_sub(1));
    }
    let g = app.gpu_count();
    app.detail.gpu = app.detail.gpu.min(g.saturating_sub(1));
}
