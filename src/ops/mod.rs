//! What changes a cluster: Slurm actions, the burn-in client, and the audit
//! log every attempt goes to; and what goes out of it: notifications. Results come back as updates on the same
//! channel as everything else.

pub mod audit;
pub mod bench;
pub mod execute;
pub mod kube;
pub mod notify;
pub mod ray;
pub mod remediate;
pub mod return_to_service;
pub mod signal;
pub mod silences;
pub mod slurm;
pub mod state_file;
pub mod timeline;
