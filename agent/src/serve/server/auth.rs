//! The tokens a call must carry: the bench token (RunBench, NetSink,
//! SignalProcess) and the telemetry token (Subscribe). Apart from the calls
//! so that every call checks them the same way, wrong tokens limited alike.

use tonic::{Request, Status};

use super::{AgentService, BenchSettings};
use crate::serve::net::same_token;

impl AgentService {
    /// The bench settings, if the request carries the agent's token. The
    /// connection from `peer` is then authenticated: never evicted for a
    /// new one (`net::Connections`).
    pub(super) fn authorize(&self, addr: Option<std::net::SocketAddr>, token: &str) -> Result<BenchSettings, Status> {
        let peer = addr.map(|a| a.ip());
        let Some(b) = &self.shared.bench else {
            return Err(Status::failed_precondition(
                "benchmarks are disabled on this agent: start it with --bench-token-file",
            ));
        };
        // The right token first: only wrong ones are limited, so consoles
        // that share an address with a guesser keep working.
        if same_token(&b.token, token) {
            self.shared.connections.authenticated(addr);
            return Ok(b.clone());
        }
        let failed = &self.shared.failed_tokens;
        failed.check(peer)?;
        failed.failed(peer, "bench");
        Err(Status::permission_denied("wrong bench token"))
    }

    /// Checks the telemetry token (`authorization: Bearer TOKEN`), where one
    /// is set. A call that passes authenticates its connection (see
    /// `authorize`), as any call does on an agent without a token.
    pub(super) fn authorize_telemetry<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let Some(want) = &self.shared.telemetry_token else {
            self.shared.connections.authenticated(req.remote_addr());
            return Ok(());
        };
        let given = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        // The right token first: only wrong (or missing) ones are limited.
        let why = match given {
            Some(t) if same_token(want, t) => {
                self.shared.connections.authenticated(req.remote_addr());
                return Ok(());
            }
            Some(_) => "wrong telemetry token",
            None => "this agent needs a telemetry token (console: telemetry_token_file)",
        };
        let peer = req.remote_addr().map(|a| a.ip());
        let failed = &self.shared.failed_tokens;
        failed.check(peer)?;
        failed.failed(peer, "telemetry");
        Err(Status::unauthenticated(why))
    }
}
