//! The console's domain: what it knows about nodes, GPUs and ports (decoded
//! once from the wire: absent is `None`, never 0; times on the console's
//! clock), the flags raised on them, the scheduler's view, actions and their
//! reports, burn-in results, and the updates that carry all of it; the
//! words and units people read them in (`words`).
//!
//! Nothing here does I/O or imports any other part of the console.

pub mod action;
pub mod bench;
pub mod flag;
pub mod kube;
pub mod pace;
pub mod rates;
pub mod ray;
pub mod remediation;
pub mod request;
pub mod returning;
pub mod sample;
pub mod scaled;
pub mod sched;
pub mod target;
pub mod time;
pub mod timeline;
pub mod update;
pub mod words;
