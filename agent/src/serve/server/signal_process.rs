//! SignalProcess: TERM or KILL to a process on one of the node's GPUs, and
//! only to such a process, held from the check to the signal. Apart from
//! the other calls: the one that acts on something outside the agent.

use tonic::{Request, Response, Status};

use super::AgentService;
use crate::proto::{SignalReply, SignalRequest};

impl AgentService {
    pub(super) async fn signal_gpu_process(
        &self,
        req: Request<SignalRequest>,
    ) -> Result<Response<SignalReply>, Status> {
        let peer = req.remote_addr();
        let req = req.into_inner();
        self.authorize(peer, &req.token)?;
        if self.shared.info.backend.starts_with("sim") {
            return Err(Status::failed_precondition(
                "simulated processes: nothing to signal (their pids are invented)",
            ));
        }
        let signal = match req.signal.as_str() {
            "TERM" => libc::SIGTERM,
            "KILL" => libc::SIGKILL,
            other => return Err(Status::invalid_argument(format!("signal '{other}': TERM or KILL"))),
        };
        // Never pid 0 (the agent's process group), init or the agent,
        // whatever a GPU's process list says.
        let pid = crate::serve::signal::allowed(req.pid).map_err(Status::permission_denied)?;
        // Only a process the latest sample shows on a GPU: never any pid.
        let latest = self.shared.ring.lock().ok().and_then(|r| r.latest().cloned());
        let gpu = latest.and_then(|s| {
            s.gpus
                .iter()
                .find(|g| g.processes.iter().any(|p| p.pid == req.pid))
                .map(|g| g.index)
        });
        let Some(gpu) = gpu else {
            return Err(Status::not_found(format!(
                "pid {} is not a process on this node's GPUs (in the latest sample)",
                req.pid
            )));
        };
        // Held from here to the signal: if it exits, no other process that
        // takes its pid is signalled instead.
        let target = crate::serve::signal::Target::hold(pid)
            .map_err(|e| Status::not_found(format!("pid {}: {e}: not signalled", req.pid)))?;
        crate::serve::signal::outside_own_group(pid).map_err(Status::permission_denied)?;
        // Still on that GPU now, by the driver's list at this moment (the
        // sample may be an interval old: the process may have ended).
        crate::serve::signal::still_on_gpu(self.shared.gpu_processes.clone(), gpu, req.pid)
            .await
            .map_err(Status::failed_precondition)?;
        if let Err(e) = target.signal(signal) {
            return Err(Status::failed_precondition(format!("kill {}: {e}", req.pid)));
        }
        tracing::warn!("SIG{} sent to pid {} (GPU {gpu}) for {peer:?}", req.signal, req.pid);
        Ok(Response::new(SignalReply {
            outcome: format!("SIG{} sent to {} (GPU {gpu})", req.signal, req.pid),
        }))
    }
}
