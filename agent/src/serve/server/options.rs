//! How an agent is set up (`AgentOptions`) and what it needs to run
//! burn-ins (`BenchSettings`): plain settings, apart from the server that
//! reads them so that a caller (main, the demo, the tests) sees them alone.

use std::time::Duration;

use crate::serve::net::Limits;
use crate::serve::tls::TlsSettings;

/// How an agent samples and what it keeps.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub interval: Duration,
    /// How much history the ring buffer keeps (default 10 minutes).
    pub history: Duration,
    /// For a simulated node: invent history from this time (ms since the
    /// epoch) up to now at start, so a console sees a lived-in node at once.
    pub backfill_from_ms: Option<i64>,
    /// Benchmarks on request; `None` refuses them.
    pub bench: Option<BenchSettings>,
    /// Added to this machine's clock for every time the agent stamps: a
    /// simulated node whose clock is wrong (`--sim-clock-offset`), so the
    /// console's handling of skew can be tested.
    pub clock_offset_ms: i64,
    /// Serve TLS (rustls) with this certificate; `None` serves plaintext.
    pub tls: Option<TlsSettings>,
    /// Subscribers must present this token (`authorization: Bearer ...`).
    pub telemetry_token: Option<String>,
    /// Allow a bench token on a plaintext listener (`--insecure`).
    pub insecure: bool,
    pub limits: Limits,
    /// The ring's bound in bytes of memory, beside its bound in samples: a
    /// short interval or a long history cannot talk it past this.
    pub max_ring_bytes: usize,
    /// Ask the kubelet which pods hold the GPUs (`--kubelet-socket`);
    /// `None`: never.
    pub pods: Option<crate::sources::pods::PodsOptions>,
}

/// Default bound of the ring in bytes of memory: ten minutes of a big node
/// (8 GPUs, 18 NVLink links each, 8 IB ports) every second fit several
/// times over.
pub const DEFAULT_MAX_RING_BYTES: usize = 64 << 20;

/// What the agent needs to run burn-in suites.
#[derive(Clone)]
pub struct BenchSettings {
    /// Requests must carry this (read from the file named by `--bench-token-file`).
    pub token: String,
    pub expectations: crate::bench::expect::Expectations,
    /// The agent's own bound on a suite, whatever a request asks.
    pub max_duration: Duration,
}

impl std::fmt::Debug for BenchSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("BenchSettings")
            .field("max_duration", &self.max_duration)
            .finish_non_exhaustive()
    }
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            interval: Duration::from_secs(1),
            history: Duration::from_secs(600),
            backfill_from_ms: None,
            bench: None,
            clock_offset_ms: 0,
            tls: None,
            telemetry_token: None,
            insecure: false,
            limits: Limits::default(),
            max_ring_bytes: DEFAULT_MAX_RING_BYTES,
            pods: None,
        }
    }
}
