//! Plays a recording into a `Store`: the recorded updates in time order,
//! each applied at the time it arrived, with the store's clock ticked once
//! per recorded second as the live console ticks it. Going back in time
//! starts again from the beginning (a store cannot be unwound).

use std::collections::BTreeSet;
use std::path::Path;

use crate::detect::Thresholds;
use crate::model::flag::{FlagKind, Subject};
use crate::model::target::Target;
use crate::model::update::Update;
use crate::record::{Damage, RecordError, Recording};
use crate::store::Store;

/// The live console ticks its store every second; so does the player.
const TICK_MS: i64 = 1000;

/// A flag, as "is it new" sees it.
type FlagKey = (FlagKind, Subject);

pub struct Player {
    pub rec: Recording,
    /// The next frame to load.
    frame: usize,
    /// The loaded frame's updates, the next one first (reversed for `pop`).
    pending: Vec<(i64, Update)>,
    /// The last time the store was ticked at (a whole second).
    ticked_ms: i64,
    /// Damage found while playing (the file changed since it was opened).
    late_damage: Option<Damage>,
    /// Per node, the flags active after the last update seen: what
    /// "the next flag raised" is new against.
    flags: Vec<BTreeSet<FlagKey>>,
}

/// A flag that `next_flag` found raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    pub time_ms: i64,
    pub node: usize,
    pub kind: FlagKind,
    pub subject: Subject,
}

/// What one step touched.
enum Touched {
    Node(usize),
    All,
    Other,
}

impl Player {
    pub fn open(path: &Path) -> Result<Player, RecordError> {
        Ok(Player::new(Recording::open(path)?))
    }

    pub fn new(rec: Recording) -> Player {
        let n = rec.header.targets.len();
        let start = rec.start_ms();
        Player {
            rec,
            frame: 0,
            pending: Vec::new(),
            ticked_ms: start - start.rem_euclid(TICK_MS),
            late_damage: None,
            flags: vec![BTreeSet::new(); n],
        }
    }

    /// An empty store for this recording's nodes, judged with `thresholds`.
    pub fn new_store(&self, thresholds: Thresholds) -> Store {
        let targets: Vec<Target> = self.rec.header.targets.iter().map(Target::from).collect();
        let mut store = Store::new(targets, thresholds);
        store.scheduler_known = self.rec.header.scheduler_known;
        store
    }

    pub fn start_ms(&self) -> i64 {
        self.rec.start_ms()
    }

    pub fn end_ms(&self) -> i64 {
        self.rec.end_ms()
    }

    /// Where the recording stopped early, if it did.
    pub fn damage(&self) -> Option<&Damage> {
        self.late_damage.as_ref().or(self.rec.damage.as_ref())
    }

    /// Back to the start: the caller replaces its store with `new_store`.
    pub fn rewind(&mut self) {
        let start = self.start_ms();
        self.frame = 0;
        self.pending.clear();
        self.ticked_ms = start - start.rem_euclid(TICK_MS);
        for f in &mut self.flags {
            f.clear();
        }
    }

    /// The time of the next update, if any.
    pub fn peek_time(&mut self) -> Option<i64> {
        while self.pending.is_empty() {
            if self.frame >= self.rec.frames.len() || self.late_damage.is_some() {
                return None;
            }
            match self.rec.load(self.frame) {
                Ok(mut e) => {
                    e.reverse();
                    self.pending = e;
                }
                Err(d) => {
                    self.late_damage = Some(d);
                    return None;
                }
            }
            self.frame += 1;
        }
        self.pending.last().map(|(t, _)| *t)
    }

    /// Applies what comes next: a clock tick when a recorded second has
    /// passed, else the next update. None at the end.
    fn step(&mut self, store: &mut Store, until_ms: i64) -> Option<(i64, Touched)> {
        let next = self.peek_time().filter(|t| *t <= until_ms);
        let due = self.ticked_ms + TICK_MS;
        if due <= until_ms && next.is_none_or(|t| t >= due) {
            self.ticked_ms = due;
            store.tick(due);
            return Some((due, Touched::All));
        }
        next?;
        let (t, u) = self.pending.pop()?;
        let touched = match &u {
            Update::Node { node, .. } => Touched::Node(*node),
            _ => Touched::Other,
        };
        store.apply(u, t);
        Some((t, touched))
    }

    /// Plays everything up to `t` into `store` (which holds what was played
    /// so far) and ticks it at `t`.
    pub fn feed_until(&mut self, store: &mut Store, t: i64) {
        while let Some((_, touched)) = self.step(store, t) {
            self.note_flags(store, &touched);
        }
        store.tick(t);
    }

    /// Plays on until a flag is raised that was not active before, and
    /// says when, on which node and what (the store is then at that time);
    /// None, with the store at the end, when none is raised before the end.
    pub fn next_flag(&mut self, store: &mut Store) -> Option<Raised> {
        let end = self.end_ms();
        while let Some((t, touched)) = self.step(store, end) {
            if let Some((node, kind, subject)) = self.note_flags(store, &touched) {
                return Some(Raised {
                    time_ms: t,
                    node,
                    kind,
                    subject,
                });
            }
        }
        None
    }

    /// Updates the flags known for what a step touched; returns the first new one.
    fn note_flags(&mut self, store: &Store, touched: &Touched) -> Option<(usize, FlagKind, Subject)> {
        let nodes = match touched {
            Touched::Node(i) => *i..*i + 1,
            Touched::All => 0..store.nodes.len(),
            Touched::Other => return None,
        };
        let mut raised = None;
        for i in nodes {
            let (Some(n), Some(known)) = (store.nodes.get(i), self.flags.get_mut(i)) else {
                continue;
            };
            let now: BTreeSet<FlagKey> = n.detector.active().map(|f| (f.kind, f.subject)).collect();
            if raised.is_none()
                && let Some((kind, subject)) = now.difference(known).next()
            {
                raised = Some((i, *kind, *subject));
            }
            *known = now;
        }
        raised
    }
}
