//! What the agent keeps: the recent samples it serves a console that
//! connects (`ring`), and the faults it remembers across restarts and
//! reboots (`journal`).

pub mod journal;
pub mod ring;
