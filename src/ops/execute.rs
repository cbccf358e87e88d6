//! The console's action task: runs what the person confirmed, one plan at
//! a time, logs it (and each refusal), starts burn-in suites and returns to
//! service beside that queue, and reports back on the update channel. Each
//! plan goes to the scheduler it names (Slurm, Kubernetes or Ray); a plan
//! for a scheduler that is not read is refused and logged, never sent
//! elsewhere.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use crate::ingest::agent::Access;
use crate::ingest::kube::Kube;
use crate::ingest::ray::Ray;
use crate::ingest::slurm::Slurm;
use crate::model::action::{ActionReport, Plan, Scheduler};
use crate::model::bench::{BenchUpdate, Suite};
use crate::model::request::Request;
use crate::model::returning::Prepared;
use crate::model::target::Target;
use crate::model::update::Update;
use crate::ops::{audit, bench, return_to_service, slurm};

/// What the action task acts with: the schedulers the session reads, its
/// nodes, and how their agents are reached.
pub struct Executor {
    pub slurm: Slurm,
    /// Re-reads Slurm at once after an action.
    pub poke: Arc<Notify>,
    /// Kubernetes where it is read, and what re-reads it.
    pub kube: Option<(Kube, Arc<Notify>)>,
    /// Ray where it is read, and what re-reads it.
    pub ray: Option<(Ray, Arc<Notify>)>,
    /// The session's nodes, in the store's order: requests name them by index.
    pub targets: Vec<Target>,
    /// The agents' bench token, where known: without it no burn-in or signal runs.
    pub bench_token: Option<String>,
    pub access: Access,
}

/// A burn-in suite running beside the queue, and the nodes it runs on.
type Running = (JoinHandle<()>, Vec<usize>);

impl Executor {
    /// Takes requests from `asks` until it closes, or until no one reads `tx`.
    pub async fn run(self, mut asks: mpsc::Receiver<Request>, tx: mpsc::Sender<Update>) {
        let mut running: Option<Running> = None;
        while let Some(ask) = asks.recv().await {
            let plan = match ask {
                Request::Run(plan) => plan,
                Request::Refused(plan, why) => {
                    log(&audit::refused(&plan, &why));
                    continue;
                }
                Request::Bench { nodes, suite } => {
                    if let Some(r) = self.start_bench(nodes, suite, &tx) {
                        running = Some(r);
                    }
                    continue;
                }
                Request::Signal { node, plan } => {
                    if !self.signal(node, plan, &tx).await {
                        return;
                    }
                    continue;
                }
                Request::Return(prepared) => {
                    self.start_return(prepared, &tx);
                    continue;
                }
                Request::Silences { all, made } => {
                    if let Err(e) = crate::ops::silences::save(&all, &made) {
                        tracing::error!("silences not saved: {e}");
                    }
                    continue;
                }
                Request::CancelBench => {
                    if let Some((task, nodes)) = running.take() {
                        // Dropping the task drops its streams: each agent stops its suite.
                        task.abort();
                        for node in nodes {
                            let event = BenchUpdate::Cancelled;
                            let _ = tx.send(Update::Bench { node, event }).await;
                        }
                    }
                    continue;
                }
            };
            let report = self.execute(plan).await;
            self.poke.notify_one();
            if tx.send(Update::ActionDone(Arc::new(report))).await.is_err() {
                return;
            }
        }
    }

    /// Sends `plan` to the scheduler it names, or refuses it where that
    /// scheduler is not read.
    async fn execute(&self, plan: Plan) -> ActionReport {
        let refused = |why: &str| {
            let r = audit::refused(&plan, why);
            log(&r);
            r
        };
        match plan.scheduler {
            Scheduler::Kubernetes => match &self.kube {
                Some((k, kpoke)) => {
                    let r = crate::ops::kube::run_logged(k, plan).await;
                    kpoke.notify_one();
                    r
                }
                None => refused("Kubernetes is not read (start with --kubernetes)"),
            },
            Scheduler::Ray => match &self.ray {
                Some((r, rpoke)) => {
                    let report = crate::ops::ray::run_logged(r, plan).await;
                    rpoke.notify_one();
                    report
                }
                None => refused("Ray is not read (start with --ray URL)"),
            },
            Scheduler::Slurm => slurm::run_logged(&self.slurm, plan).await,
        }
    }

    /// Starts `suite` on these nodes; none without a bench token. A suite
    /// takes minutes: it runs beside the drain/resume queue.
    fn start_bench(&self, nodes: Vec<usize>, suite: Suite, tx: &mpsc::Sender<Update>) -> Option<Running> {
        let token = self.bench_token.clone()?;
        let chosen: Vec<(usize, Target)> = nodes
            .into_iter()
            .filter_map(|i| self.targets.get(i).map(|t| (i, t.clone())))
            .collect();
        let idx = chosen.iter().map(|(i, _)| *i).collect();
        let task = tokio::spawn(bench::run_reporting(
            chosen,
            suite,
            token,
            self.access.clone(),
            tx.clone(),
        ));
        Some((task, idx))
    }

    /// Sends a signal to one node's agent; false when no one reads `tx`.
    async fn signal(&self, node: usize, plan: Plan, tx: &mpsc::Sender<Update>) -> bool {
        let (Some(target), Some(token)) = (self.targets.get(node), self.bench_token.as_deref()) else {
            return true;
        };
        if let Err(e) = audit::started(&plan) {
            let report = audit::refused(&plan, &e.to_string());
            let _ = tx.send(Update::ActionDone(Arc::new(report))).await;
            return true;
        }
        let report = crate::ops::signal::run(&plan, target, token, &self.access).await;
        log(&report);
        tx.send(Update::ActionDone(Arc::new(report))).await.is_ok()
    }

    /// Starts a return to service. A burn-in takes minutes: it runs beside
    /// the drain/resume queue.
    fn start_return(&self, prepared: Box<Prepared>, tx: &mpsc::Sender<Update>) {
        let (slurm, access, token) = (self.slurm.clone(), self.access.clone(), self.bench_token.clone());
        // A return goes back through the scheduler its plan names: `None`
        // where that is Kubernetes and it is not read here.
        let kube = match prepared.plan.scheduler {
            Scheduler::Kubernetes => self.kube.as_ref().map(|(k, _)| Some(k.clone())),
            _ => Some(None),
        };
        let (poke, tx) = (self.poke.clone(), tx.clone());
        // The burn-in's progress goes to the store as `B`'s does, so a
        // failed return raises `burnin_failed` and the bench screen shows it.
        let nodes: Vec<Option<usize>> = prepared
            .bench_targets()
            .iter()
            .map(|b| self.targets.iter().position(|t| t.name == b.name))
            .collect();
        tokio::spawn(async move {
            let plan = prepared.plan.clone();
            let (queue, forward) = bench::forwarder(tx.clone());
            let started = match kube {
                None => Err("Kubernetes is not read (start with --kubernetes)".to_string()),
                Some(k) => audit::started(&plan).map(|()| k).map_err(|e| e.to_string()),
            };
            let report = match started {
                Err(e) => {
                    let r = audit::refused(&plan, &e);
                    log(&r);
                    r
                }
                Ok(kube) => {
                    let seen = |i: usize, u: &BenchUpdate| {
                        if let Some(&Some(node)) = nodes.get(i) {
                            let event = u.clone();
                            let _ = queue.send(Update::Bench { node, event });
                        }
                    };
                    let timeout = Duration::from_secs(1800);
                    let back = match &kube {
                        Some(k) => return_to_service::Back::Kube(k),
                        None => return_to_service::Back::Slurm(&slurm),
                    };
                    let r = return_to_service::run(&prepared, back, token.as_deref(), &access, timeout, &seen).await;
                    log(&r);
                    r
                }
            };
            drop(queue);
            let _ = forward.await;
            poke.notify_one();
            let _ = tx.send(Update::ActionDone(Arc::new(report))).await;
        });
    }
}

/// Appends `report` to the audit log; a failure is logged, not returned:
/// the action's report still goes to the console.
fn log(report: &ActionReport) {
    if let Err(e) = audit::log(report) {
        tracing::error!("{e}");
    }
}
