//! NVIDIA's XID codes (placeholder until the table lands).

use crate::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidEntry {
    pub code: u32,
    pub meaning: &'static str,
    pub immediate: Action,
    pub investigate: Option<Action>,
}

pub const XIDS: &[XidEntry] = &[];

pub fn lookup(code: u32) -> Option<&'static XidEntry> {
    XIDS.binary_search_by_key(&code, |e| e.code).ok().map(|i| &XIDS[i])
}
