//! The burn-in client: runs a suite on agents, all nodes at once, each
//! sending its network test to the next node (a ring, so every node sends
//! once and receives once), and decodes what comes back into the domain's
//! results. Logged in the audit log like any other action.

use std::time::Duration;

use fleetop_proto::pb::bench_event::Kind;
use fleetop_proto::pb::{BenchRequest, NetSinkRequest};
use tokio::sync::mpsc;

use crate::ingest::agent;
use crate::model::action::{ActionReport, NodeAction, NodeResult, Plan, Stage};
use crate::model::bench::{BENCH_SCHEMA_VERSION, BenchNode, BenchReport, BenchResult, BenchUpdate, Suite, Verdict};
use crate::model::target::Target;
use crate::model::time::{now_ms, rfc3339};
use crate::model::update::Update;
use crate::ops::audit;

/// The plan of a run: what each agent will be asked, for the confirmation
/// and the audit log.
pub fn plan(suite: &str, targets: &[Target]) -> Plan {
    Plan::new(
        NodeAction::Bench,
        targets.iter().map(|t| t.name.clone()).collect(),
        Some(format!("suite {suite}")),
        describe(suite, targets),
    )
}

fn describe(suite: &str, targets: &[Target]) -> Vec<Vec<String>> {
    let n = targets.len();
    targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut c = vec![
                "RunBench".into(),
                format!("suite={suite}"),
                format!("agent={}", t.address()),
            ];
            if n > 1 {
                c.push(format!("net_to={}", targets[(i + 1) % n].address()));
            }
            c
        })
        .collect()
}

/// A result from the wire, decoded once: absent figures are `None`.
pub use crate::ingest::decode::check as result;

/// The error of a node whose agent stopped the suite because it was asked to.
const CANCELLED: &str = "cancelled";

use fleetop_proto::bench::HOST_CHECKS;

/// How many agents of this run are on each target's host.
fn sharing(targets: &[Target]) -> Vec<usize> {
    targets
        .iter()
        .map(|t| targets.iter().filter(|o| o.host == t.host).count())
        .collect()
}

/// A host figure measured while `agents` agents ran the suite on the same
/// host is a share of the host: below its floor it is a warning that says
/// so, never a hardware failure of every node on that host.
fn shared_host(mut r: BenchResult, agents: usize, host: &str) -> BenchResult {
    let note = fleetop_proto::bench::shared_host_note(agents as u32, host);
    // An agent told so judged it so already (`BenchRequest.agents_on_host`).
    let judged = (r.reason.as_deref()).is_some_and(|why| why.contains(fleetop_proto::bench::SHARED_HOST));
    if agents < 2 || judged || r.gpu.is_some() || !HOST_CHECKS.contains(&r.name.as_str()) {
        return r;
    }
    if r.verdict == Verdict::Fail {
        r.verdict = Verdict::Warn;
    }
    if r.verdict != Verdict::Skipped {
        r.reason = Some(match r.reason.take() {
            Some(why) => format!("{why}; {note}"),
            None => note,
        });
    }
    r
}

/// Appends a finished run to the audit log (what the person asked for and
/// what came of it; the verdicts themselves are the agents'); returns what
/// was logged. A node whose suite never started is logged as refused, not
/// as a failed burn-in: nothing was measured.
pub fn audit_report(report: &BenchReport, targets: &[Target]) -> anyhow::Result<Vec<ActionReport>> {
    let mut logged = Vec::new();
    let (refused, ran): (Vec<_>, Vec<_>) = report.nodes.iter().zip(targets).partition(|(n, _)| n.refused);
    for (n, t) in refused {
        let why = n.error.clone().unwrap_or_else(|| "refused".into());
        let r = audit::refused(&plan(&report.suite, std::slice::from_ref(t)), &why);
        audit::log(&r)?;
        logged.push(r);
    }
    if !ran.is_empty() {
        let results = ran
            .iter()
            .map(|(n, _)| NodeResult {
                node: n.name.clone(),
                ok: n.ok,
                message: n.summary(),
                state_before: None,
                state_after: None,
            })
            .collect();
        let ran_targets: Vec<Target> = ran.iter().map(|(_, t)| (*t).clone()).collect();
        let r = audit::report(&plan(&report.suite, &ran_targets), Stage::Done, None, results);
        audit::log(&r)?;
        logged.push(r);
    }
    Ok(logged)
}

/// Opens every node's sink, then runs every node's suite, concurrently.
/// `seen` is told every event as it arrives (node index, event): the command
/// line prints progress, the console turns them into updates.
pub async fn run_suites(
    targets: &[Target],
    suite: &str,
    token: &str,
    access: &agent::Access,
    timeout: Duration,
    seen: &(dyn Fn(usize, &BenchUpdate) + Sync),
) -> BenchReport {
    let n = targets.len();
    if let Err(why) = access.control_token_allowed() {
        // Nothing was sent: every node says why.
        return BenchReport {
            schema_version: BENCH_SCHEMA_VERSION,
            generated_at: rfc3339(now_ms()),
            suite: suite.into(),
            nodes: targets
                .iter()
                .map(|t| BenchNode {
                    name: t.name.clone(),
                    address: t.address(),
                    ok: false,
                    error: Some(why.clone()),
                    net_peer: None,
                    results: Vec::new(),
                    refused: true,
                    record: None,
                })
                .collect(),
        };
    }
    // Who asks, for the agents' burn-in journals.
    let requested_by = format!("{}@{}", audit::actor().display(), audit::host_name());
    let requested_by = requested_by.as_str();
    // Sinks first: node i+1 receives what node i sends. Each stays open until
    // its stream is dropped, after the suites.
    let mut sinks = Vec::new();
    let mut net_targets: Vec<Option<String>> = vec![None; n];
    // A node that refused the token for its sink is not asked again: the
    // agent makes a peer with a wrong token wait, and the answer that
    // matters is the first ("wrong bench token").
    let mut refused: Vec<Option<String>> = vec![None; n];
    if n > 1 {
        for (i, t) in targets.iter().enumerate() {
            let from = (i + n - 1) % n;
            let Ok(mut c) = agent::connect(t, access).await.map(|c| c.client()) else {
                continue;
            };
            let req = NetSinkRequest {
                token: token.into(),
                duration_s: timeout.as_secs().clamp(1, 3600) as u32,
            };
            match c.net_sink(req).await {
                Ok(resp) => {
                    let mut stream = resp.into_inner();
                    if let Ok(Some(first)) = stream.message().await {
                        net_targets[from] = Some(format!("{}:{}", t.host, first.port));
                        sinks.push(stream);
                    }
                }
                Err(s) if s.code() == tonic::Code::PermissionDenied => refused[i] = Some(s.message().to_string()),
                Err(_) => {}
            }
        }
    }
    let sharing = sharing(targets);
    let runs = targets.iter().enumerate().map(|(i, t)| {
        let agents_on_host = sharing[i];
        let net_target = net_targets[i].clone();
        let peer = (n > 1).then(|| targets[(i + 1) % n].address());
        let refused = refused[i].clone();
        async move {
            let mut node = BenchNode {
                name: t.name.clone(),
                address: t.address(),
                ok: false,
                error: None,
                net_peer: peer,
                results: Vec::new(),
                refused: false,
                record: None,
            };
            let req = BenchRequest {
                token: token.into(),
                suite: suite.into(),
                timeout_s: timeout.as_secs() as u32,
                net_target: net_target.unwrap_or_default(),
                requested_by: requested_by.into(),
                agents_on_host: agents_on_host as u32,
            };
            // Until the agent takes the suite, an error is a refusal: no
            // burn-in ran, nothing is said of the hardware.
            let mut started = false;
            let outcome = async {
                if let Some(why) = refused {
                    return Err(why);
                }
                let mut c = agent::connect(t, access)
                    .await
                    .map_err(|e| format!("cannot reach the agent at {}: {e}", t.address()))?
                    .client();
                let mut stream = c
                    .run_bench(req)
                    .await
                    .map_err(|s| s.message().to_string())?
                    .into_inner();
                started = true;
                while let Some(ev) = stream
                    .message()
                    .await
                    .map_err(|s| format!("stream broke: {}", s.message()))?
                {
                    match ev.kind {
                        None => {}
                        Some(Kind::Progress(p)) => seen(
                            i,
                            &BenchUpdate::Progress {
                                step: p.step,
                                done: p.done,
                                total: p.total,
                            },
                        ),
                        Some(Kind::Result(r)) => {
                            let r = shared_host(result(r), agents_on_host, &t.host);
                            seen(i, &BenchUpdate::Result(r.clone()));
                            node.results.push(r);
                        }
                        Some(Kind::Done(d)) => {
                            // The verdict as the node's agent keeps it; a
                            // node reached by address is named by its host.
                            node.record = d.record.map(|r| crate::ingest::decode::burn_in_alone(r, 0));
                            if let Some(r) = &node.record
                                && t.by_address()
                                && !r.node.hostname.is_empty()
                            {
                                node.name = r.node.hostname.clone();
                            }
                            return match (d.error.is_empty(), d.cancelled) {
                                (false, _) => Err(d.error),
                                (true, true) => Err(CANCELLED.to_string()),
                                (true, false) => Ok(()),
                            };
                        }
                    }
                }
                Err("the agent ended the suite without finishing it".to_string())
            }
            .await;
            node.refused = outcome.is_err() && !started;
            node.error = outcome.err();
            node.ok =
                node.error.is_none() && !node.incomplete() && !node.results.iter().any(|r| r.verdict == Verdict::Fail);
            node
        }
    });
    let nodes = futures_util::future::join_all(runs).await;
    drop(sinks);
    BenchReport {
        schema_version: BENCH_SCHEMA_VERSION,
        generated_at: rfc3339(now_ms()),
        suite: suite.into(),
        nodes,
    }
}

/// A queue for a burn-in's progress callback, which cannot wait, and the
/// task that forwards it onto the update channel: events queue without
/// bound (a suite makes a few dozen a node), so nothing is dropped. Drop
/// the queue, then await the task: everything queued has gone out.
pub fn forwarder(tx: mpsc::Sender<Update>) -> (mpsc::UnboundedSender<Update>, tokio::task::JoinHandle<()>) {
    let (queue, mut queued) = mpsc::unbounded_channel::<Update>();
    let task = tokio::spawn(async move {
        while let Some(u) = queued.recv().await {
            if tx.send(u).await.is_err() {
                return;
            }
        }
    });
    (queue, task)
}

/// Runs a burn-in suite on some nodes, reporting every event as an update,
/// and logs it like any other action.
pub async fn run_reporting(
    targets: Vec<(usize, Target)>,
    suite: Suite,
    token: String,
    access: agent::Access,
    tx: mpsc::Sender<Update>,
) {
    let suite = suite.name();
    for (node, _) in &targets {
        let _ = tx
            .send(Update::Bench {
                node: *node,
                event: BenchUpdate::Started { suite: suite.into() },
            })
            .await;
    }
    let index: Vec<usize> = targets.iter().map(|(i, _)| *i).collect();
    let list: Vec<Target> = targets.into_iter().map(|(_, t)| t).collect();
    if let Err(e) = audit::started(&plan(suite, &list)) {
        // Not logged, not run: each node says why.
        for node in index {
            let event = BenchUpdate::Finished {
                error: Some(e.to_string()),
            };
            let _ = tx.send(Update::Bench { node, event }).await;
        }
        return;
    }
    let (queue, forward) = forwarder(tx.clone());
    let seen = |i: usize, event: &BenchUpdate| {
        let _ = queue.send(Update::Bench {
            node: index[i],
            event: event.clone(),
        });
    };
    let report = run_suites(&list, suite, &token, &access, Duration::from_secs(1800), &seen).await;
    // Everything seen goes out before the finish.
    drop(queue);
    let _ = forward.await;
    for (i, n) in report.nodes.iter().enumerate() {
        let _ = tx
            .send(Update::Bench {
                node: index[i],
                event: finished(n),
            })
            .await;
    }
    match audit_report(&report, &list) {
        // The nodes' timelines show the result with who ran it.
        Ok(logged) => {
            let events = logged
                .iter()
                .flat_map(|r| crate::model::timeline::from_report(r, now_ms()))
                .collect();
            let _ = tx.send(Update::Timeline(events)).await;
        }
        Err(e) => tracing::error!("{e}"),
    }
}

/// How a node's run ended, for its screen: the agent stopped it because
/// it was asked to, or it never started, neither a failure; else finished.
pub fn finished(n: &BenchNode) -> BenchUpdate {
    match &n.error {
        Some(e) if e == CANCELLED => BenchUpdate::Cancelled,
        Some(e) if n.refused => BenchUpdate::Refused { why: e.clone() },
        e => BenchUpdate::Finished { error: e.clone() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_copy(verdict: Verdict) -> BenchResult {
        BenchResult {
            name: "host_memcpy".into(),
            gpu: None,
            peer: None,
            value: Some(9.0),
            unit: Some("GB/s".into()),
            expected_min: Some(20.0),
            expected_source: None,
            verdict,
            reason: Some("9.0 GB/s is below the minimum 20.0".into()),
        }
    }

    #[test]
    fn a_host_figure_shared_by_several_agents_warns_and_says_why() {
        let t = |name: &str, host: &str| Target {
            name: name.into(),
            host: host.into(),
            port: 1,
        };
        let targets = [t("a", "127.0.0.1"), t("b", "127.0.0.1"), t("c", "10.0.0.3")];
        assert_eq!(sharing(&targets), [2, 2, 1]);

        let r = shared_host(host_copy(Verdict::Fail), 2, "127.0.0.1");
        assert_eq!(r.verdict, Verdict::Warn);
        let why = r.reason.unwrap_or_default();
        assert!(
            why.contains("below the minimum") && why.contains("2 agents on 127.0.0.1"),
            "{why}"
        );
        // Alone on its host, a failure stays a failure; a GPU figure is never shared.
        assert_eq!(shared_host(host_copy(Verdict::Fail), 1, "h").verdict, Verdict::Fail);
        let mut gpu = host_copy(Verdict::Fail);
        (gpu.name, gpu.gpu) = ("hbm_d2d".into(), Some(0));
        assert_eq!(shared_host(gpu, 4, "h").verdict, Verdict::Fail);
    }

    #[test]
    fn a_node_that_measured_no_gpu_is_not_ok() {
        let skipped = |name: &str| BenchResult {
            name: name.into(),
            value: None,
            unit: None,
            verdict: Verdict::Skipped,
            reason: Some("no CUDA driver".into()),
            ..host_copy(Verdict::Skipped)
        };
        let node = BenchNode {
            name: "gpu01".into(),
            address: "h:1".into(),
            ok: false,
            error: None,
            net_peer: None,
            results: vec![host_copy(Verdict::Pass), skipped("hbm_d2d"), skipped("gemm_tflops")],
            refused: false,
            record: None,
        };
        assert!(node.incomplete());
        assert!(
            node.summary().contains("incomplete: no GPU check ran"),
            "{}",
            node.summary()
        );
    }
}
