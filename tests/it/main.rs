//! fleetop's integration tests: real agents on loopback (in-process and as
//! processes), the real binaries, JSON read back into the typed export.

mod agent_stream;
mod agents_map;
mod amd_agents;
mod amd_exporter;
mod amd_fleet;
mod audit;
mod bench;
mod cli;
mod dcgm_exporter;
mod deploy;
mod export_demo;
mod export_errors;
mod export_live;
mod export_pods;
mod export_summary;
mod fuzz_regressions;
mod kube;
mod kube_loop;
mod kube_policy;
mod kube_quarantine;
mod kube_return;
mod layers;
mod limits;
mod metrics;
mod notify;
mod nvml_fake;
mod ray;
mod record;
mod replay;
mod security;
mod sizes;
mod stale_restart;
mod starved;
mod stream_conn;
mod tui;
mod wire_compat;

#[path = "../support/mod.rs"]
mod support;
pub use support::*;
