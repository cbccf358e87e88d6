//! `swarm`: many simulated agents in one process (for load tests), and
//! `sample`: one sample printed.

use std::time::Duration;

use fleetop_agent::backend::{self, Backend};
use fleetop_agent::config::RunAs;
use fleetop_agent::serve::server::{self, AgentOptions};

use crate::cli::*;
use crate::{Security, stop_signal};

/// Where a swarm writes its agents' addresses.
pub(crate) struct SwarmFiles<'a> {
    pub(crate) grpc: &'a std::path::Path,
    pub(crate) metrics: Option<&'a std::path::Path>,
}

/// Each agent of a swarm holds a listener and its subscriber's connection
/// (and a /metrics listener and Prometheus' connection where asked): past
/// the limit of open files, agents would fail one by one, unseen, and a
/// console count them unreachable. Refused up front instead.
fn check_open_files(count: u32, metrics: bool) -> anyhow::Result<()> {
    let per_agent = if metrics { 4 } else { 2 };
    let need = u64::from(count) * per_agent + 64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    if lim.rlim_max >= need {
        let raised = libc::rlimit {
            rlim_cur: need,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    anyhow::bail!(
        "{count} agents need {need} open files and this process may have {}: run several swarms \
         (--count, --first) or raise the limit",
        lim.rlim_max
    )
}

pub(crate) fn swarm(
    numbers: std::ops::Range<u32>,
    files: SwarmFiles,
    node: &NodeArgs,
    bench: Option<server::BenchSettings>,
    sec: Security,
    cli: &Cli,
) -> anyhow::Result<()> {
    let count = numbers.len() as u32;
    check_open_files(count, files.metrics.is_some())?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let mut lines = String::new();
        let mut metrics_lines = String::new();
        let mut agents = Vec::new();
        for n in numbers {
            let mut opts = node.options(fleetop_agent::now_ms(), Mode::Serve);
            opts.backend = Backend::Sim;
            // Many simulated nodes in one process: no kernel log, no journal.
            opts.kmsg = None;
            opts.state_dir = None;
            opts.sim.hostname = format!("sim{n:04}");
            // As many seeds as names: sim0001 is the same node in any swarm.
            opts.sim.seed = node.sim_seed.wrapping_add(u64::from(n).wrapping_sub(1));
            let (collector, _) = backend::build(&opts)?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let opts = AgentOptions {
                interval: node.interval,
                bench: bench.clone(),
                tls: sec.tls.clone(),
                telemetry_token: sec.telemetry_token.clone(),
                insecure: cli.insecure,
                limits: cli.limits(),
                ..Default::default()
            };
            let mut h = server::serve(collector, opts, listener).await?;
            lines.push_str(&format!("{}\n", h.addr));
            if files.metrics.is_some() {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let limits = fleetop_agent::serve::metrics::http::Limits {
                    max_connections: cli.metrics_max_connections as usize,
                    idle_timeout: cli.idle_timeout,
                    head_timeout: cli.handshake_timeout,
                };
                metrics_lines.push_str(&format!("{}\n", h.serve_metrics(l, limits)?));
            }
            agents.push(h);
        }
        // The metrics file first: the gRPC hostfile's existence says both are whole.
        if let Some(path) = files.metrics {
            std::fs::write(path, metrics_lines)?;
        }
        std::fs::write(files.grpc, lines)?;
        // SIGUSR1 prints the running totals (for measurement windows); Ctrl-C
        // or SIGTERM prints them and ends.
        let report = || {
            let bytes: u64 = agents.iter().map(|a| a.bytes_sent()).sum();
            let samples: u64 = agents.iter().map(|a| a.samples_taken()).sum();
            eprintln!(
                "swarm: agents={count} samples={samples} gpu_samples={} protobuf_bytes_sent={bytes}",
                samples * u64::from(node.sim_gpus)
            );
        };
        let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())?;
        let stop = stop_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = usr1.recv() => report(),
                r = &mut stop => {
                    r?;
                    break;
                }
            }
        }
        report();
        Ok(())
    })
}

/// One sample, printed as JSON: the node description and the sample.
pub(crate) fn sample_once(node: &NodeArgs) -> anyhow::Result<()> {
    node.libraries_trusted(RunAs::current().uid)?;
    let now = fleetop_agent::now_ms();
    let (mut collector, note) = backend::build(&node.options(now - fleetop_agent::sim::ONSET_MS, Mode::Once))?;
    if let Some(note) = note {
        eprintln!("fleetop-agent: {note}");
    }
    // CPU usage is a difference of two readings: give it a moment.
    std::thread::sleep(Duration::from_millis(250));
    let sample = collector.sample(fleetop_agent::now_ms());
    let doc = serde_json::json!({ "info": collector.info(), "sample": sample });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_swarm_past_the_open_files_limit_is_refused_up_front() {
        let e = super::check_open_files(u32::MAX, true).expect_err("no process may hold that many files");
        let e = e.to_string();
        assert!(e.contains("run several swarms"), "{e}");
        assert!(super::check_open_files(1, false).is_ok(), "one agent fits anywhere");
    }
}
