//! `p`: the display freezes so a person can read a moving fleet. The app's
//! store stays as it was when `p` was pressed, and every screen draws it;
//! what arrives meanwhile goes into the live store kept here, which takes
//! its place on `p` again. Nothing is lost and nothing is drawn twice.

use crate::model::update::Update;
use crate::store::Store;

/// The live state behind a frozen display.
#[derive(Debug, Clone)]
pub struct Paused {
    /// Where updates keep arriving while the display shows the frozen copy.
    pub live: Box<Store>,
    /// The console's time when it froze (the screen's ages are from then).
    pub at_ms: i64,
    /// The clock's latest time, to resume at.
    pub now_ms: i64,
    /// Updates taken in meanwhile, for the header.
    pub arrived: u64,
}

impl Paused {
    /// Freezes `store`: the live copy takes the events still to be saved,
    /// so none is saved twice when it comes back.
    pub fn new(store: &mut Store, now_ms: i64) -> Paused {
        let live = Box::new(store.clone());
        store.take_unsaved();
        Paused {
            live,
            at_ms: now_ms,
            now_ms,
            arrived: 0,
        }
    }

    pub fn apply(&mut self, u: Update, now_ms: i64) {
        self.live.apply(u, now_ms);
        self.arrived += 1;
    }

    pub fn tick(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
        self.live.tick(now_ms);
    }
}
