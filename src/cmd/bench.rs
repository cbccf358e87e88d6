//! `fleetop bench`: burn-in suites on the agents of SOURCE, all nodes at once,
//! each sending its network test to the next node (a ring, so every node
//! sends once and receives once). A control action: read-only refuses it, a
//! terminal is asked first unless `--yes`, and it goes in the audit log.
//! Progress goes to stderr, results to stdout; the exit status is non-zero
//! when any node fails.

use std::io::Write;

use fleetop_agent::proto::agent_client::AgentClient;
use fleetop_agent::proto::bench_event::Kind;
use fleetop_agent::proto::{BenchRequest, NetSinkRequest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::actions::{self, ActionReport, NodeAction, NodeResult, Plan};
use crate::cli::{BenchArgs, Format};
use crate::config::Config;
use crate::hostlist::Target;

/// One measurement, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchResultOut {
    pub name: String,
    pub gpu: Option<u32>,
    pub peer: Option<u32>,
    pub value: f64,
    pub unit: String,
    pub expected_min: Option<f64>,
    pub expected_source: Option<String>,
    /// pass, warn, fail or skipped.
    pub verdict: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchNode {
    pub name: String,
    pub address: String,
    /// No failed result and no error.
    pub ok: bool,
    /// Why the suite did not run or did not finish.
    pub error: Option<String>,
    /// The agent (host:port) this node sent its network test to.
    pub net_peer: Option<String>,
    pub results: Vec<BenchResultOut>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchReport {
    pub schema_version: u32,
    pub generated_at: String,
    pub suite: String,
    pub nodes: Vec<BenchNode>,
}

impl BenchNode {
    pub fn summary(&self) -> String {
        let count = |v: &str| self.results.iter().filter(|r| r.verdict == v).count();
        let mut s = format!(
            "{} pass, {} warn, {} fail, {} skipped",
            count("pass"),
            count("warn"),
            count("fail"),
            count("skipped")
        );
        if let Some(e) = &self.error {
            s.push_str(&format!("; {e}"));
        }
        for r in self.results.iter().filter(|r| r.verdict == "fail") {
            s.push_str(&format!("; {} failed: {}", r.name, r.reason.as_deref().unwrap_or("")));
        }
        s
    }
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

pub async fn run(args: BenchArgs, cfg: Config, read_only: bool) -> anyhow::Result<()> {
    let suite = args.suite.name().to_string();
    let (targets, demo, demo_token) = resolve(&args.source, &cfg).await?;
    let token = match (&demo_token, &args.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(p)) => std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("cannot read the bench token file {}: {e}", p.display()))?
            .trim()
            .to_string(),
        (None, None) => anyhow::bail!(
            "bench needs the agents' token: --token-file FILE (the file given to fleetop-agent --bench-token-file)"
        ),
    };
    let plan = Plan {
        action: NodeAction::Bench,
        nodes: targets.iter().map(|t| t.name.clone()).collect(),
        reason: Some(format!("suite {suite}")),
        commands: describe(&suite, &targets),
    };
    if read_only {
        audit(&ActionReport::refused(&plan, "read-only mode"))?;
        anyhow::bail!("read-only mode: bench refused (nothing was run)");
    }
    {
        let mut err = std::io::stderr().lock();
        writeln!(err, "bench {suite} on {} node(s):", targets.len())?;
        for c in &plan.commands {
            writeln!(err, "  {}", c.join(" "))?;
        }
        if !args.yes {
            drop(err);
            actions::confirm(&plan, &format!("Run the {suite} suite on these nodes?"))?;
        }
    }
    let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    let progress = |i: usize, k: &Kind| {
        if let Kind::Progress(p) = k {
            eprintln!("{} [{}/{}] {}", names[i], p.done, p.total, p.step);
        }
    };
    let report = run_suites(&targets, &suite, &token, args.timeout, &progress).await;
    if let Some(d) = demo {
        d.stop().await;
    }
    audit_report(&report, &targets)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Format::Ndjson => writeln!(out, "{}", serde_json::to_string(&report)?)?,
    }
    let failed: Vec<&str> = report.nodes.iter().filter(|n| !n.ok).map(|n| n.name.as_str()).collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "bench failed on {} of {} node(s): {}",
            failed.len(),
            report.nodes.len(),
            failed.join(",")
        );
    }
    Ok(())
}

/// Bench settings for the demo's agents, and their one-off token.
pub fn demo_bench() -> anyhow::Result<(fleetop_agent::server::BenchSettings, String)> {
    let token = format!(
        "{:016x}",
        std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 1u8)
    );
    let bench = fleetop_agent::server::BenchSettings {
        token: token.clone(),
        expectations: fleetop_agent::bench::expect::Expectations::load(None).map_err(|e| anyhow::anyhow!(e))?,
        max_duration: std::time::Duration::from_secs(1800),
    };
    Ok((bench, token))
}

/// A result from the wire as reported.
pub fn result_out(r: fleetop_agent::proto::BenchResult) -> BenchResultOut {
    BenchResultOut {
        name: r.name,
        gpu: u32::try_from(r.gpu).ok(),
        peer: u32::try_from(r.peer).ok(),
        value: r.value,
        unit: r.unit,
        expected_min: (r.expected_min > 0.0).then_some(r.expected_min),
        expected_source: (!r.expected_source.is_empty()).then_some(r.expected_source),
        verdict: r.verdict,
        reason: (!r.reason.is_empty()).then_some(r.reason),
    }
}

/// Appends a finished run to the audit log.
pub fn audit_report(report: &BenchReport, targets: &[Target]) -> anyhow::Result<()> {
    let plan = Plan {
        action: NodeAction::Bench,
        nodes: targets.iter().map(|t| t.name.clone()).collect(),
        reason: Some(format!("suite {}", report.suite)),
        commands: describe(&report.suite, targets),
    };
    let logged = ActionReport {
        refused: None,
        results: report
            .nodes
            .iter()
            .map(|n| NodeResult {
                node: n.name.clone(),
                ok: n.ok,
                message: n.summary(),
                state_before: None,
                state_after: None,
            })
            .collect(),
        ..ActionReport::refused(&plan, "")
    };
    audit(&logged)
}

/// The nodes of SOURCE; for `--demo`, agents started with benchmarks on
/// and the token they were given.
async fn resolve(
    source: &crate::cli::SourceArgs,
    cfg: &Config,
) -> anyhow::Result<(Vec<Target>, Option<crate::demo::Demo>, Option<String>)> {
    if source.demo {
        let (bench, token) = demo_bench()?;
        let d = crate::demo::start_with(source.nodes, source.gpus, source.seed, Some(bench)).await?;
        return Ok((d.targets(), Some(d), Some(token)));
    }
    if source.slurm {
        let port = source.port.or(cfg.port).unwrap_or(50051);
        let slurm = crate::sched::Slurm {
            format: cfg.slurm.format,
        };
        let c = cfg.clone();
        return Ok((
            tokio::task::spawn_blocking(move || crate::session::slurm_targets(&slurm, &c, port)).await??,
            None,
            None,
        ));
    }
    Ok((crate::session::targets(source, cfg)?, None, None))
}

fn audit(r: &ActionReport) -> anyhow::Result<()> {
    actions::audit(r)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("cannot write the audit log: {e}"))
}

async fn client(t: &Target) -> Result<AgentClient<tonic::transport::Channel>, String> {
    let ep = tonic::transport::Endpoint::from_shared(format!("http://{}", t.address()))
        .map_err(|e| e.to_string())?
        .connect_timeout(std::time::Duration::from_secs(5));
    ep.connect()
        .await
        .map(AgentClient::new)
        .map_err(|e| format!("cannot reach the agent at {}: {e}", t.address()))
}

/// Opens every node's sink, then runs every node's suite, concurrently.
/// `seen` is told every event as it arrives (node index, event): the command
/// line prints progress, the console turns them into updates.
pub async fn run_suites(
    targets: &[Target],
    suite: &str,
    token: &str,
    timeout: std::time::Duration,
    seen: &(dyn Fn(usize, &Kind) + Sync),
) -> BenchReport {
    let n = targets.len();
    // Sinks first: node i+1 receives what node i sends. Each stays open until
    // its stream is dropped, after the suites.
    let mut sinks = Vec::new();
    let mut net_targets: Vec<Option<String>> = vec![None; n];
    if n > 1 {
        for (i, t) in targets.iter().enumerate() {
            let from = (i + n - 1) % n;
            let Ok(mut c) = client(t).await else { continue };
            let req = NetSinkRequest {
                token: token.into(),
                duration_s: timeout.as_secs().clamp(1, 3600) as u32,
            };
            if let Ok(resp) = c.net_sink(req).await {
                let mut stream = resp.into_inner();
                if let Ok(Some(first)) = stream.message().await {
                    net_targets[from] = Some(format!("{}:{}", t.host, first.port));
                    sinks.push(stream);
                }
            }
        }
    }
    let runs = targets.iter().enumerate().map(|(i, t)| {
        let net_target = net_targets[i].clone();
        let peer = (n > 1).then(|| targets[(i + 1) % n].address());
        async move {
            let mut node = BenchNode {
                name: t.name.clone(),
                address: t.address(),
                ok: false,
                error: None,
                net_peer: peer,
                results: Vec::new(),
            };
            let req = BenchRequest {
                token: token.into(),
                suite: suite.into(),
                timeout_s: timeout.as_secs() as u32,
                net_target: net_target.unwrap_or_default(),
            };
            let outcome = async {
                let mut c = client(t).await?;
                let mut stream = c
                    .run_bench(req)
                    .await
                    .map_err(|s| s.message().to_string())?
                    .into_inner();
                while let Some(ev) = stream
                    .message()
                    .await
                    .map_err(|s| format!("stream broke: {}", s.message()))?
                {
                    if let Some(k) = &ev.kind {
                        seen(i, k);
                    }
                    match ev.kind {
                        Some(Kind::Progress(_)) | None => {}
                        Some(Kind::Result(r)) => node.results.push(result_out(r)),
                        Some(Kind::Done(d)) if !d.error.is_empty() => return Err(d.error),
                        Some(Kind::Done(d)) if d.cancelled => return Err("cancelled".to_string()),
                        Some(Kind::Done(_)) => return Ok(()),
                    }
                }
                Err("the agent ended the suite without finishing it".to_string())
            }
            .await;
            node.error = outcome.err();
            node.ok = node.error.is_none() && !node.results.iter().any(|r| r.verdict == "fail");
            node
        }
    });
    let nodes = futures_util::future::join_all(runs).await;
    drop(sinks);
    BenchReport {
        schema_version: 1,
        generated_at: crate::export::rfc3339(fleetop_agent::now_ms()),
        suite: suite.into(),
        nodes,
    }
}
