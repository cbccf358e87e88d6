//! Burn-in suites, by the names a console sends in `BenchRequest.suite`.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// A few minutes at most: every check, short.
    Quick,
    /// Longer copies and a five-minute burn; every GPU pair.
    Full,
}

impl Suite {
    pub const ALL: [Suite; 2] = [Suite::Quick, Suite::Full];

    /// The name on the wire and for people.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Quick => "quick",
            Suite::Full => "full",
        }
    }

    pub fn parse(s: &str) -> Option<Suite> {
        Self::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// The checks that measure a GPU (by result name). A run where all of them
/// were skipped measured no GPU: the console calls it incomplete, not passed.
pub const GPU_CHECKS: &[&str] = &[
    "hbm_d2d",
    "pcie_h2d",
    "pcie_d2h",
    "nvlink_p2p",
    "nccl_allreduce_algbw",
    "nccl_allreduce_busbw",
    "gemm_tflops",
];

/// Checks whose figure is the host's, not a GPU's: when several agents of
/// one run share a host (the demo, containers), each gets a share of it.
pub const HOST_CHECKS: &[&str] = &["host_memcpy", "tcp"];

/// Why a host figure of a run that `agents` agents on `host` ran at once is
/// a share of the host (`BenchRequest.agents_on_host`).
pub fn shared_host_note(agents: u32, host: &str) -> String {
    format!("{agents} agents on {host} ran this at once: {SHARED_HOST}")
}

/// The words that end a shared host figure's reason.
pub const SHARED_HOST: &str = "the figure is a share of the host";
