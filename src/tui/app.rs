//! The console's state. Nothing here does I/O or reads the clock: time
//! arrives in actions, which `dispatch::update` applies.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crossterm::event::KeyEvent;

use crate::model::flag::{Flag, Silence, Subject};
use crate::model::request::Request;
use crate::model::update::Update;
use crate::store::{NodeState, Store};
use crate::tui::layout;
use crate::tui::theme::Theme;
use crate::tui::view::{self, Filter, Metric, Sort};

pub use crate::tui::modal::{CommandLine, Dialog, Guard};

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

/// How much history the node detail's sparklines show (`z` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoom {
    OneMinute,
    TenMinutes,
    /// Everything the ring holds.
    All,
}

impl Zoom {
    pub fn window_ms(self) -> i64 {
        match self {
            Zoom::OneMinute => 60_000,
            Zoom::TenMinutes => 600_000,
            Zoom::All => i64::MAX,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Zoom::OneMinute => "1 min",
            Zoom::TenMinutes => "10 min",
            Zoom::All => "all",
        }
    }

    pub(super) fn next(self) -> Zoom {
        match self {
            Zoom::OneMinute => Zoom::TenMinutes,
            Zoom::TenMinutes => Zoom::All,
            Zoom::All => Zoom::OneMinute,
        }
    }
}

/// The panes of the node detail's lower half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    History,
    Nvlink,
    Infiniband,
    Processes,
    /// What happened to the node and who did it, newest first.
    Timeline,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::History,
        Pane::Nvlink,
        Pane::Infiniband,
        Pane::Processes,
        Pane::Timeline,
    ];

    /// The pane's tab, for a node whose GPUs are `vendor`'s: its links
    /// are NVLink on NVIDIA, XGMI on AMD.
    pub fn title_for(self, vendor: crate::model::sample::Vendor) -> &'static str {
        match (self, vendor) {
            (Pane::Nvlink, crate::model::sample::Vendor::Amd) => "2 XGMI",
            _ => self.title(),
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Pane::History => "1 history",
            Pane::Nvlink => "2 NVLink",
            Pane::Infiniband => "3 InfiniBand",
            Pane::Processes => "4 processes",
            Pane::Timeline => "5 timeline",
        }
    }
}

/// How alerts are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertSort {
    Severity,
    Age,
    Node,
    Kind,
}

impl AlertSort {
    pub fn next(self) -> Self {
        match self {
            AlertSort::Severity => AlertSort::Age,
            AlertSort::Age => AlertSort::Node,
            AlertSort::Node => AlertSort::Kind,
            AlertSort::Kind => AlertSort::Severity,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AlertSort::Severity => "severity",
            AlertSort::Age => "age",
            AlertSort::Node => "node",
            AlertSort::Kind => "kind",
        }
    }
}

/// Whether the fleet is drawn as one row per node or as a dense wall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wall {
    /// A wall above `WALL_AUTO_NODES` nodes.
    Auto,
    On,
    Off,
}

/// From this many nodes the heatmap becomes a wall on its own.
pub const WALL_AUTO_NODES: usize = 256;

pub struct App {
    pub store: Store,
    pub theme: Theme,
    pub now_ms: i64,
    pub screen: Screen,
    pub metric: Metric,
    pub sort: Sort,
    /// `S`: the sort runs the other way (lowest utilization first).
    pub sort_reverse: bool,
    pub wall: Wall,
    pub filter: Filter,
    pub filter_text: String,
    /// The filter being typed, while `/` is open: applied as it is typed.
    pub input: Option<String>,
    /// The filter before `/` was pressed, restored by Esc.
    pub(crate) filter_before: Option<(Filter, String)>,
    /// The `:` command line, while it is open (`tui::command`).
    pub command: Option<CommandLine>,
    /// Where a range mark (Ctrl-Space) starts: the last node marked.
    pub(super) mark_anchor: Option<usize>,
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
    /// The node shown in detail (node index) and its selected GPU position.
    pub detail_node: usize,
    pub detail_gpu: usize,
    pub pane: Pane,
    /// How many of the node's newest events the timeline pane scrolled past.
    pub timeline_scroll: usize,
    pub history_zoom: Zoom,
    pub alert_cursor: usize,
    pub alert_sort: AlertSort,
    /// Identical flags of one job fold into one row (`z` unfolds).
    pub alerts_folded: bool,
    /// Acknowledged and silenced alerts (loaded from the state dir at start).
    pub silences: Vec<Silence>,
    pub help: bool,
    /// Help shows its second page: the short flag names (`?` again).
    pub help_legend: bool,
    pub quit: bool,
    /// Actions are possible (a scheduler is known) and allowed (not read-only).
    pub actions_enabled: bool,
    /// Burn-in is possible (the agents' token is known).
    pub bench_enabled: bool,
    pub bench_cursor: usize,
    pub group_cursor: usize,
    /// What the group view groups by (`b` cycles).
    pub group_by: view::GroupBy,
    /// The bench screen shows this node's every check (Enter toggles).
    pub bench_open: Option<usize>,
    pub read_only: bool,
    pub dialog: Option<Dialog>,
    /// Taken by the loop after each update.
    pub outgoing: Option<Request>,
    /// Text for the terminal's clipboard, handed by the loop to `clipboard_sink`.
    pub clipboard: Option<String>,
    /// Where copied text goes: the terminal (OSC 52) in the console; tests
    /// keep it.
    pub clipboard_sink: Option<ClipboardSink>,
    pub log_path: Option<PathBuf>,
    /// Rings the terminal bell on a new crit flag (`[notify] bell`); set by
    /// `tui::run` only, so tests on `TestBackend` never ring.
    pub bell: Option<crate::ops::notify::bell::Bell>,
    /// Where actions are logged (shown with their results).
    pub audit_path: PathBuf,
    /// The terminal's size, for layout-dependent moves (the wall's rows).
    pub size: (u16, u16),
    /// `p`: the display is frozen; what arrives meanwhile goes here.
    pub paused: Option<crate::tui::pause::Paused>,
    /// The wall's order, frozen when the person last sorted: each node's
    /// rank by node index.
    wall_order: Option<Vec<usize>>,
    pub(super) changed: bool,
}

/// One row of the alerts screen.
pub struct AlertRow<'a> {
    pub node: usize,
    pub flag: &'a Flag,
    /// When it cleared, for flags that have.
    pub cleared_ms: Option<i64>,
    /// The Slurm job on the flag's GPU, where known.
    pub job: Option<u64>,
    /// Identical flags (kind, severity, job) folded into this row: GPUs and
    /// nodes (1 and 1 for a row of its own).
    pub gpus: usize,
    pub nodes: usize,
    /// Acknowledged or silenced: drawn dimmed, after the others.
    pub quiet: Option<&'a Silence>,
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
            wall: Wall::Auto,
            filter: Filter::All,
            filter_text: String::new(),
            input: None,
            filter_before: None,
            command: None,
            mark_anchor: None,
            refresh: crate::model::time::DEFAULT_REFRESH,
            message: None,
            selected: None,
            cursor: 0,
            marked: BTreeSet::new(),
            detail_node: 0,
            detail_gpu: 0,
            pane: Pane::History,
            timeline_scroll: 0,
            history_zoom: Zoom::TenMinutes,
            alert_cursor: 0,
            alert_sort: AlertSort::Severity,
            alerts_folded: true,
            silences: Vec::new(),
            help: false,
            help_legend: false,
            quit: false,
            actions_enabled: false,
            bench_enabled: false,
            bench_cursor: 0,
            group_cursor: 0,
            group_by: view::GroupBy::Job,
            bench_open: None,
            read_only: false,
            dialog: None,
            outgoing: None,
            clipboard: None,
            clipboard_sink: None,
            log_path: None,
            bell: None,
            audit_path: crate::ops::audit::audit_path(),
            size: (80, 24),
            paused: None,
            wall_order: None,
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
            match &self.wall_order {
                Some(rank) => v.sort_by_key(|&i| rank.get(i).copied().unwrap_or(usize::MAX)),
                None => v.sort_by(|&a, &b| self.store.nodes[a].target.name.cmp(&self.store.nodes[b].target.name)),
            }
        }
        v
    }

    /// The order the heatmap shows: the wall keeps a live sort only once
    /// it was taken (`s`); until then it is in name order, and says so.
    pub fn shown_sort(&self) -> Sort {
        if self.wall_active() && self.wall_order.is_none() {
            Sort::Name
        } else {
            self.sort
        }
    }

    /// Takes the current sort's order for the wall to keep (see `visible`).
    pub(crate) fn freeze_wall_order(&mut self) {
        self.wall_order = None;
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
        self.wall_order = Some(rank);
    }

    pub fn wall_active(&self) -> bool {
        match self.wall {
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

    pub fn detail(&self) -> Option<&NodeState> {
        self.store.nodes.get(self.detail_node)
    }

    /// Active flags of the visible nodes, then recently cleared ones, in the
    /// chosen order.
    pub fn alerts(&self) -> Vec<AlertRow<'_>> {
        let visible = self.visible();
        let mut rows: Vec<AlertRow<'_>> = visible
            .iter()
            .flat_map(|&i| {
                let n = &self.store.nodes[i];
                n.detector.active().map(move |f| AlertRow {
                    node: i,
                    flag: f,
                    cleared_ms: None,
                    job: flag_job(n, f),
                    gpus: 1,
                    nodes: 1,
                    quiet: self.silences.iter().find(|s| s.covers(&n.target.name, f, self.now_ms)),
                })
            })
            .collect();
        if self.alerts_folded {
            rows = fold_by_job(rows);
        }
        let name = |i: usize| self.store.nodes[i].target.name.as_str();
        let key = |r: &AlertRow<'_>| (std::cmp::Reverse(r.flag.severity), r.flag.since_ms);
        match self.alert_sort {
            AlertSort::Severity => rows.sort_by(|a, b| key(a).cmp(&key(b)).then(name(a.node).cmp(name(b.node)))),
            AlertSort::Age => rows.sort_by_key(|r| r.flag.since_ms),
            AlertSort::Node => rows.sort_by(|a, b| name(a.node).cmp(name(b.node)).then(key(a).cmp(&key(b)))),
            AlertSort::Kind => rows.sort_by(|a, b| a.flag.kind.cmp(&b.flag.kind).then(key(a).cmp(&key(b)))),
        }
        let mut cleared: Vec<AlertRow<'_>> = visible
            .iter()
            .flat_map(|&i| {
                self.store.nodes[i].detector.cleared().map(move |c| AlertRow {
                    node: i,
                    flag: &c.flag,
                    cleared_ms: Some(c.cleared_ms),
                    job: None,
                    gpus: 1,
                    nodes: 1,
                    quiet: None,
                })
            })
            .collect();
        // What a person has already seen goes after what they have not.
        rows.sort_by_key(|r| r.quiet.is_some());
        cleared.sort_by_key(|r| std::cmp::Reverse(r.cleared_ms));
        rows.extend(cleared);
        rows
    }

    pub(crate) fn open_detail(&mut self, node: usize, gpu: Option<u32>) {
        self.detail_node = node;
        self.timeline_scroll = 0;
        self.detail_gpu = gpu
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
        self.detail()
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

/// The Slurm job on a GPU flag's GPU (its processes' cgroup), where known.
fn flag_job(n: &NodeState, f: &Flag) -> Option<u64> {
    let Subject::Gpu(g) = f.subject else { return None };
    n.gpu(g)?.processes.iter().find_map(|p| p.job_id)
}

/// Folds the flags of one kind and severity on one job into its first row:
/// "job 4152: 8 GPUs idle" is one line, not eight. What is about the job
/// (idle, underused) folds across its nodes; anything else (a hardware
/// fault, persistence off) only within one node, so each node's fault is a
/// row of its own that `D` can drain.
fn fold_by_job(rows: Vec<AlertRow<'_>>) -> Vec<AlertRow<'_>> {
    use std::collections::{BTreeMap, BTreeSet};
    type Key = (
        crate::model::flag::FlagKind,
        crate::model::flag::Severity,
        u64,
        Option<usize>,
    );
    let mut out: Vec<AlertRow<'_>> = Vec::new();
    let mut at: BTreeMap<Key, usize> = BTreeMap::new();
    let mut nodes: Vec<BTreeSet<usize>> = Vec::new();
    for r in rows {
        let Some(job) = r.job else {
            nodes.push(BTreeSet::from([r.node]));
            out.push(r);
            continue;
        };
        let node = (!r.flag.kind.about_the_job()).then_some(r.node);
        let key = (r.flag.kind, r.flag.severity, job, node);
        match at.get(&key) {
            Some(&i) => {
                out[i].gpus += 1;
                nodes[i].insert(r.node);
                out[i].nodes = nodes[i].len();
            }
            None => {
                at.insert(key, out.len());
                nodes.push(BTreeSet::from([r.node]));
                out.push(r);
            }
        }
    }
    out
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
    app.detail_gpu = app.detail_gpu.min(g.saturating_sub(1));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::flag::{FlagKind, Severity};

    fn flag(kind: FlagKind, severity: Severity) -> Flag {
        Flag {
            kind,
            severity,
            subject: Subject::Gpu(0),
            since_ms: 0,
            detail: String::new(),
            evidence: Default::default(),
            action: kind.action(),
            escalation: None,
        }
    }

    #[test]
    fn only_what_is_about_the_job_folds_never_a_nodes_hardware_fault() {
        fn row(node: usize, flag: &Flag) -> AlertRow<'_> {
            AlertRow {
                node,
                flag,
                cleared_ms: None,
                job: Some(4848),
                gpus: 1,
                nodes: 1,
                quiet: None,
            }
        }
        let (idle, xid) = (
            flag(FlagKind::Idle, Severity::Warn),
            flag(FlagKind::Xid, Severity::Crit),
        );
        let out = fold_by_job(vec![
            row(0, &idle),
            row(1, &idle),
            row(0, &xid),
            row(1, &xid),
            row(1, &xid),
        ]);
        let shape: Vec<(FlagKind, usize, usize, usize)> =
            out.iter().map(|r| (r.flag.kind, r.node, r.nodes, r.gpus)).collect();
        assert_eq!(
            shape,
            [
                (FlagKind::Idle, 0, 2, 2),
                (FlagKind::Xid, 0, 1, 1),
                (FlagKind::Xid, 1, 1, 2)
            ],
            "one row for the job's idle GPUs; XID 79 one row per node (its GPUs folded)"
        );
    }
}
