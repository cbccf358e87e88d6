//! What the agent keeps: the recent samples it serves a console that
//! connects (`ring`), the faults it remembers across restarts and reboots
//! (`journal`), the verdicts of the burn-ins it ran (`burnins`), and how
//! their files are read and written (`file`).

pub mod burnins;
pub mod file;
pub mod journal;
pub mod ring;
