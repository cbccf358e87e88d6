//! The processes on each GPU, shared from one sample to the next where
//! they did not change (see `LastProcesses`).

use std::sync::Arc;

use fleetop_proto::pb;

use super::nz;
use crate::model::sample::GpuProcess;

/// Per GPU position, the processes of a stream's last sample.
///
/// The same processes run for hours and every sample lists them: a list
/// that is what it was is the last sample's list itself (`Arc`), and a list
/// that changed shares the names of the pids it had, rather than names made
/// printable, copied and freed again every second for every process of
/// every node (a tenth of a large console's CPU, in `perf`, and the list's
/// own allocation and freeing as much again). Where the wire says a list
/// did not change (`wire::Decoder::processes_kept`) it is not even compared:
/// its names, a second cold, were still 7% of that CPU.
pub(super) type LastProcesses = Vec<Arc<[GpuProcess]>>;

/// Bounds of a process's names on screen, in characters.
pub(super) const OWNER_MAX: usize = 64;
pub(super) const COMMAND_MAX: usize = 200;

/// The processes on a GPU, given what its last sample had (`was`, which
/// becomes what this one has), and whether the wire says they are those
/// (`kept`).
pub(super) fn processes(got: &[pb::GpuProcess], was: &mut Arc<[GpuProcess]>, kept: bool) -> Arc<[GpuProcess]> {
    if kept {
        return Arc::clone(was);
    }
    let same = |w: &GpuProcess, p: &pb::GpuProcess| {
        w.pid == p.pid
            && w.used_mem_bytes == p.used_mem_bytes
            && w.job_id == nz(p.job_id)
            && same_name(w.owner.as_ref(), &p.user, OWNER_MAX)
            && same_name(w.command.as_ref(), &p.command, COMMAND_MAX)
    };
    if was.len() != got.len() || !was.iter().zip(got).all(|(w, p)| same(w, p)) {
        let now: Arc<[GpuProcess]> = got
            .iter()
            .map(|p| {
                let w = was.iter().find(|w| w.pid == p.pid);
                GpuProcess {
                    pid: p.pid,
                    used_mem_bytes: p.used_mem_bytes,
                    job_id: nz(p.job_id),
                    owner: shared(w.and_then(|w| w.owner.as_ref()), &p.user, OWNER_MAX),
                    command: shared(w.and_then(|w| w.command.as_ref()), &p.command, COMMAND_MAX),
                }
            })
            .collect();
        *was = now;
    }
    Arc::clone(was)
}

/// Whether `raw` made printable (at most `max` characters) gives `was`: a
/// name no longer than `max` bytes that equals a printable result needs no
/// escape, so it prints as itself.
fn same_name(was: Option<&Arc<str>>, raw: &str, max: usize) -> bool {
    match was {
        None => raw.is_empty(),
        Some(w) => raw.len() <= max && **w == *raw,
    }
}

/// `raw` made printable (at most `max` characters), or `was` where that is
/// what it gives.
fn shared(was: Option<&Arc<str>>, raw: &str, max: usize) -> Option<Arc<str>> {
    match was {
        _ if raw.is_empty() => None,
        Some(w) if same_name(Some(w), raw, max) => Some(Arc::clone(w)),
        _ => Some(Arc::from(fleetop_proto::input::printable(raw, max))),
    }
}
