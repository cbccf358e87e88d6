//! What a SOURCE is once the command line and the config have been read:
//! plain values, made once by `cli::resolve`, so that nothing below the
//! front ends knows the command line's shape. Files named here are read
//! where they are used (`AccessFiles::load`), not when the value is made:
//! a command that never reaches an agent never reads its TLS files.

use std::path::PathBuf;
use std::time::Duration;

use crate::ingest::agent::{Access, TlsFiles};
use crate::ingest::kube::KubeOptions;
use crate::ingest::scrape::Exporter;

/// Where the nodes come from, and how they are reached.
#[derive(Debug, Clone)]
pub struct Source {
    /// `--hosts` or `--hostfile`: the agents the command line names (else
    /// the config's hosts, or the local node).
    pub hosts: Option<Hosts>,
    /// `--slurm`: the nodes Slurm knows, and Slurm read beside them.
    pub slurm: bool,
    /// `--demo`: a simulated cluster of real agents on loopback.
    pub demo: Option<DemoSource>,
    /// `--dcgm-exporter` or `--amd-exporter`: exporters read instead of
    /// agents, as a hostlist.
    pub exporter: Option<(Exporter, String)>,
    /// `--prometheus`: one Prometheus for the whole fleet.
    pub prometheus: Option<PrometheusSource>,
    /// How often exporters or Prometheus are read.
    pub scrape_interval: Duration,
    /// The longest one read of an exporter or Prometheus may take.
    pub scrape_timeout: Option<Duration>,
    /// The agent port where a host gives none: `--port`, the config's, or 50051.
    pub port: u16,
    /// How much of each agent's history to read on connect (default: by fleet size).
    pub backfill: Option<Duration>,
    /// TLS and the telemetry token for the agents.
    pub access: AccessFiles,
    /// `--kubernetes`: the Kubernetes API read (and acted on) beside the nodes.
    pub kube: Option<KubeOptions>,
    /// `--ray`: the Ray cluster asked for.
    pub ray: RayChoice,
}

/// Agents named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosts {
    /// A hostlist with optional :port ("gpu[01-64],login1:6000").
    List(String),
    /// A file with one hostlist expression per line.
    File(PathBuf),
}

/// The demo's cluster.
#[derive(Debug, Clone, Default)]
pub struct DemoSource {
    pub nodes: u32,
    pub gpus: u32,
    /// The same seed gives the same cluster.
    pub seed: u64,
    /// For tests: one node per scenario named here, instead of the seeded mix.
    pub scenarios: Vec<String>,
    /// The scenarios' problems begin this long after the start...
    pub fault_after: Option<Duration>,
    /// ...and end after this long.
    pub fault_for: Option<Duration>,
}

/// One Prometheus for the whole fleet.
#[derive(Debug, Clone)]
pub struct PrometheusSource {
    /// Its HTTP API ("http://prometheus:9090").
    pub url: String,
    /// Label matchers added to every query.
    pub matchers: Option<String>,
}

/// The Ray cluster asked for on the command line, before the config is
/// looked at (`targets::ray`): it is only an error to ask for Ray without
/// a URL where Ray is used.
#[derive(Debug, Clone, Default)]
pub struct RayChoice {
    /// The dashboard's URL; `Some("")`: asked for, the config's dashboard.
    pub dashboard: Option<String>,
    /// The GCS's host:port, where it is not the dashboard's host at 6379.
    pub gcs: Option<String>,
}

impl RayChoice {
    /// Whether Ray was asked for on the command line.
    pub fn asked(&self) -> bool {
        self.dashboard.is_some()
    }
}

/// The files that make the agents' `Access`: the command line's over the
/// config's, a certificate with its key.
#[derive(Debug, Clone, Default)]
pub struct AccessFiles {
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The name the agents' certificates are checked against, where not their host.
    pub tls_domain: Option<String>,
    pub telemetry_token_file: Option<PathBuf>,
    /// The bench token may cross without TLS.
    pub insecure: bool,
}

impl AccessFiles {
    /// Reads the token and the PEM files; an error names the file.
    pub fn load(&self) -> anyhow::Result<Access> {
        let telemetry_token = match &self.telemetry_token_file {
            Some(p) => Some(
                fleetop_proto::util::read_token_file(p).map_err(|e| anyhow::anyhow!("telemetry_token_file: {e}"))?,
            ),
            None => None,
        };
        let files = TlsFiles {
            ca: self.tls_ca.as_deref(),
            cert: self.tls_cert.as_deref(),
            key: self.tls_key.as_deref(),
            domain: self.tls_domain.as_deref(),
        };
        Access::load(&files, telemetry_token, self.insecure).map_err(anyhow::Error::msg)
    }
}
