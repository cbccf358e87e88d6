//! What the job does with the GPU: held idle, or busy with its SMs
//! unused; who holds it.

use super::{Context, GpuState};
use crate::detect::{flag, ms};
use crate::model::flag::{Flag, FlagKind, Holder, HoldingJob, RayHolding, Severity, Subject};
use crate::model::sample::GpuReading;
use crate::model::words::shown;

/// Busy by NVML's utilization (some kernel ran the whole time) while GPM
/// says most SMs had nothing to do, for the window: the waste util % hides.
/// Needs GPM: a GPU without it is never judged.
pub(super) fn underused(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    let (Some(util), Some(gpm)) = (g.util_pct, g.gpm) else {
        st.underused_since = None;
        let _ = st.underused.update(false, cx.t, 1, 1);
        return;
    };
    if util >= cx.th.underused_util_pct && gpm.sm_active_pct < cx.th.underused_sm_active_pct {
        st.underused_since.get_or_insert(cx.t);
    } else {
        st.underused_since = None;
    }
    let long = st
        .underused_since
        .is_some_and(|s| cx.t - s >= ms(cx.th.underused_window));
    let Some(since) = st.underused.update(long, cx.t, 1, 1) else {
        return;
    };
    let start = st.underused_since.unwrap_or(since);
    out.push(Flag {
        holder: Some(holder(g, cx)),
        ..flag(
            FlagKind::Underused,
            Severity::Info,
            Subject::Gpu(g.index),
            start,
            format!("at {util}% utilization but {:.0}% SM activity", gpm.sm_active_pct),
            &[
                ("util_pct", f64::from(util)),
                ("sm_active_pct", gpm.sm_active_pct),
                ("sm_occupancy_pct", gpm.sm_occupancy_pct),
                ("tensor_active_pct", gpm.tensor_active_pct),
            ],
        )
    });
}

/// Who holds a GPU: the jobs of its processes (with their user and GPUs
/// here where the scheduler lists them), else the Ray jobs of its
/// processes, the pods given it, and how many processes it has.
fn holder(g: &GpuReading, cx: &Context) -> Holder {
    let mut ids: Vec<u64> = g.processes.iter().filter_map(|p| p.job_id).collect();
    ids.dedup();
    let jobs: Vec<HoldingJob> = ids
        .iter()
        .map(|&id| HoldingJob {
            id,
            known: cx
                .jobs
                .iter()
                .find(|j| j.id == id)
                .map(|j| (j.user.clone(), j.gpus_per_node)),
        })
        .collect();
    // Ray's work, by the pids Ray gives for it (where no Slurm job is).
    let mut ray = Vec::new();
    if jobs.is_empty() {
        ray = g
            .processes
            .iter()
            .filter_map(|p| cx.ray.iter().find(|w| w.pid == Some(p.pid)))
            .map(|w| RayHolding {
                job: w.job.clone(),
                what: w.what.clone(),
            })
            .collect();
        ray.dedup();
    }
    Holder {
        jobs,
        ray,
        pods: g.pod_names(),
        processes: g.processes.len(),
    }
}

pub(super) fn idle(st: &mut GpuState, g: &GpuReading, cx: &Context, out: &mut Vec<Flag>) {
    // Idle: held (a process on it, or a Kubernetes pod given it: a pod
    // that holds a GPU it does not use keeps it from everyone else) yet
    // under the threshold for the whole window.
    let held = !g.processes.is_empty() || !g.pods.is_empty();
    let util = g.util_pct;
    if held && util.is_some_and(|u| u < cx.th.idle_util_pct) {
        st.low_util_since.get_or_insert(cx.t);
    } else {
        st.low_util_since = None;
    }
    let idle_long = st.low_util_since.is_some_and(|s| cx.t - s >= ms(cx.th.idle_window));
    let Some(since) = st.idle.update(idle_long, cx.t, 1, 1) else {
        return;
    };
    let start = st.low_util_since.unwrap_or(since);
    let mins = (cx.t - start) / 60_000;
    let mut ev = Vec::new();
    ev.extend(util.map(|u| ("util_pct", f64::from(u))));
    ev.extend(g.mem_used_bytes.map(|b| ("mem_used_bytes", b as f64)));
    // Said after its holder (`Flag::words`): "job 4411 holds it at 0% ...".
    out.push(Flag {
        holder: Some(holder(g, cx)),
        ..flag(
            FlagKind::Idle,
            Severity::Warn,
            Subject::Gpu(g.index),
            start,
            format!("at {}% for {mins} min", shown(util)),
            &ev,
        )
    });
}
