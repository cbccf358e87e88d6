//! Which nodes a SOURCE names, resolved in one place for every command: a
//! hostlist, a hostfile, the nodes Slurm knows, the demo's agents, the
//! config's hosts, the GPU nodes Kubernetes knows (where nothing else
//! names them), or the local node.

use crate::config::Config;
use crate::ingest::hostlist;
use crate::ingest::prometheus::{self, Prometheus};
use crate::ingest::scrape::ScrapeOptions;
use crate::ingest::slurm::Slurm;
use crate::ingest::source::{Hosts, RayChoice, Source};
use crate::model::target::Target;

/// The nodes of a SOURCE, and what came with them.
pub struct Resolved {
    pub targets: Vec<Target>,
    /// The demo's agents, running for as long as this is kept.
    #[cfg(feature = "demo")]
    pub demo: Option<crate::ingest::demo::Demo>,
    /// The agents' bench token, where known (config, or the demo's own).
    pub bench_token: Option<String>,
    /// TLS and the telemetry token for every agent of the source.
    pub access: crate::ingest::agent::Access,
    /// What feeds the nodes' data.
    pub feed: Feed,
}

/// Where the nodes' readings come from.
#[derive(Debug, Clone)]
pub enum Feed {
    /// A stream from each node's agent.
    Agents,
    /// Each node's exporter, read over HTTP (the targets' addresses):
    /// dcgm-exporter, or AMD's device-metrics-exporter (`ScrapeOptions::exporter`).
    Exporter(ScrapeOptions),
    /// One Prometheus for the whole fleet.
    Prometheus(Prometheus),
}

impl Feed {
    /// Whether the targets' addresses are agents (not exporters).
    pub fn is_agents(&self) -> bool {
        matches!(self, Feed::Agents)
    }
}

/// The Slurm reader the config describes.
pub fn slurm(cfg: &Config) -> Slurm {
    Slurm {
        format: cfg.slurm.format,
        timeout: cfg.slurm.timeout,
    }
}

/// The Ray cluster of `--ray URL` (or `--ray` alone, or no flag, with the
/// config's `[ray] dashboard`); `None` without either.
pub fn ray(choice: &RayChoice, cfg: &Config) -> anyhow::Result<Option<crate::ingest::ray::Ray>> {
    let url = match choice.dashboard.as_deref() {
        Some("") => match &cfg.ray.dashboard {
            Some(u) => u.as_str(),
            None => anyhow::bail!("--ray: no URL given, and the config has no [ray] dashboard"),
        },
        Some(u) => u,
        None => match &cfg.ray.dashboard {
            Some(u) => u.as_str(),
            None => return Ok(None),
        },
    };
    let gcs = choice.gcs.as_deref().or(cfg.ray.gcs.as_deref());
    Ok(Some(crate::ingest::ray::Ray::new(url, gcs, cfg.ray.timeout)?))
}

/// Resolves SOURCE, starting the demo's agents for `--demo`.
pub async fn resolve(source: &Source, cfg: &Config) -> anyhow::Result<Resolved> {
    let bench_token = match &cfg.bench_token_file {
        Some(p) => Some(fleetop_proto::util::read_token_file(p).map_err(|e| anyhow::anyhow!("bench_token_file: {e}"))?),
        None => None,
    };
    if let Some(demo) = &source.demo {
        #[cfg(feature = "demo")]
        {
            let script = crate::ingest::demo::Script::from_source(demo)?;
            let d = crate::ingest::demo::start_with(demo.nodes, demo.gpus, demo.seed, script.as_ref()).await?;
            return Ok(Resolved {
                targets: d.nodes.iter().map(|n| n.target.clone()).collect(),
                bench_token: Some(d.bench_token.clone()),
                access: d.access.clone(),
                demo: Some(d),
                feed: Feed::Agents,
            });
        }
        #[cfg(not(feature = "demo"))]
        {
            let _ = demo;
            anyhow::bail!("--demo: this fleetop was built without the demo (cargo feature \"demo\")");
        }
    }
    let access = source.access.load()?;
    let mut feed = Feed::Agents;
    let targets = if let Some((exporter, h)) = &source.exporter {
        let exporter = *exporter;
        feed = Feed::Exporter(ScrapeOptions {
            interval: source.scrape_interval,
            timeout: source.scrape_timeout.unwrap_or(prometheus::DEFAULT_TIMEOUT),
            exporter,
            ..ScrapeOptions::default()
        });
        hostlist::parse_targets(h, exporter.default_port()).map_err(|e| anyhow::anyhow!("{}: {e}", exporter.flag()))?
    } else if let Some(prom) = &source.prometheus {
        let p =
            Prometheus::new(&prom.url, prom.matchers.as_deref(), source.scrape_timeout).map_err(anyhow::Error::msg)?;
        let t = prometheus::discover(&p, source.port).await?;
        feed = Feed::Prometheus(p);
        t
    } else if source.slurm && source.hosts.is_none() {
        // The nodes come from Slurm only where nothing else names them: with
        // `--hosts` a hung controller costs the scheduler's fields, not the
        // agents' document.
        let (s, c, port) = (slurm(cfg), cfg.clone(), source.port);
        tokio::task::spawn_blocking(move || slurm_targets(&s, &c, port)).await??
    } else if let Some(k) = source.kube.as_ref().filter(|_| nothing_names_nodes(source, cfg)) {
        kube_targets(k, cfg, source.port).await?
    } else {
        static_targets(source, cfg)?
    };
    Ok(Resolved {
        targets,
        #[cfg(feature = "demo")]
        demo: None,
        bench_token,
        access,
        feed,
    })
}

/// The nodes Slurm knows, at the agent address the config gives them.
pub fn slurm_targets(slurm: &Slurm, cfg: &Config, port: u16) -> anyhow::Result<Vec<Target>> {
    let snap = match slurm.query() {
        Ok(snap) => snap,
        // A controller that cannot be read still leaves the nodes the
        // config names: their agents are read, and the document says why
        // Slurm's fields are missing.
        Err(e) if !cfg.agent_names().is_empty() => {
            let names = cfg.agent_names();
            tracing::warn!(
                "--slurm: {e}; reading the {} nodes of [agents] and [slurm.agents]",
                names.len()
            );
            return names.into_iter().map(|name| node_agent(cfg, name, port)).collect();
        }
        Err(e) => anyhow::bail!("--slurm: {e} (no node list without Slurm: give --hosts, or [agents])"),
    };
    if snap.nodes.is_empty() {
        anyhow::bail!("--slurm: Slurm lists no nodes");
    }
    snap.nodes.keys().map(|name| node_agent(cfg, name, port)).collect()
}

/// Whether neither the command line nor the config names the nodes (so a
/// scheduler read beside them may).
fn nothing_names_nodes(source: &Source, cfg: &Config) -> bool {
    source.hosts.is_none() && cfg.hosts.is_none() && cfg.hostfile.is_none()
}

/// The GPU nodes Kubernetes knows, where nothing else names the nodes, at
/// the agent address the config gives them (`node_agent`).
async fn kube_targets(k: &crate::ingest::kube::KubeOptions, cfg: &Config, port: u16) -> anyhow::Result<Vec<Target>> {
    let kube = crate::ingest::kube::connect(k)
        .await
        .map_err(|e| anyhow::anyhow!("--kubernetes: {e}"))?;
    let snap = kube
        .gpu_nodes()
        .await
        .map_err(|e| anyhow::anyhow!("--kubernetes: {e}"))?;
    if snap.nodes.is_empty() {
        anyhow::bail!("--kubernetes: the API server lists no GPU nodes (give --hosts to name the nodes)");
    }
    snap.nodes.iter().map(|n| node_agent(cfg, &n.name, port)).collect()
}

/// The agent of node `name`, whichever scheduler names it (Slurm,
/// Kubernetes, Ray), at the address the config gives it: `[agents]`, else
/// `[slurm.agents]`, else `[slurm] agent_address` (config.md).
pub fn node_agent(cfg: &Config, name: &str, port: u16) -> anyhow::Result<Target> {
    let (addr, from) = match cfg.agent_of(name) {
        Some(a) => (a.to_string(), "[agents]"),
        None => (cfg.slurm.agent_address.replace("{name}", name), "[slurm] agent_address"),
    };
    let mut t = hostlist::parse_targets(&addr, port)
        .map_err(|e| anyhow::anyhow!("{from} gives a bad address for {name}: {e}"))?;
    let mut t = t
        .pop()
        .ok_or_else(|| anyhow::anyhow!("{from} gives no address for {name}"))?;
    t.name = name.to_string();
    Ok(t)
}

/// The agents of these node names: the hosts the SOURCE names (by name),
/// else the addresses the config maps them to (`node_agent`).
pub fn agents_of(names: &[String], source: &Source, cfg: &Config) -> anyhow::Result<Vec<Target>> {
    if source.hosts.is_some() {
        // A node given by its address goes by the host name its agent
        // reports (see `Store`): those are asked, and the caller keeps the
        // answers of the nodes it wants.
        let all = static_targets(source, cfg)?;
        return Ok(all
            .into_iter()
            .filter(|t| names.contains(&t.name) || t.by_address())
            .collect());
    }
    let port = source.port;
    names.iter().map(|n| node_agent(cfg, n, port)).collect()
}

/// The targets a hostlist or hostfile names (flags first, then the config),
/// or the local node.
fn static_targets(source: &Source, cfg: &Config) -> anyhow::Result<Vec<Target>> {
    let port = source.port;
    match &source.hosts {
        Some(Hosts::List(h)) => return Ok(hostlist::parse_targets(h, port)?),
        Some(Hosts::File(f)) => return Ok(hostlist::read_hostfile(f, port)?),
        None => {}
    }
    if let Some(h) = &cfg.hosts {
        return Ok(hostlist::parse_targets(h, port)?);
    }
    if let Some(f) = &cfg.hostfile {
        return Ok(hostlist::read_hostfile(f, port)?);
    }
    Ok(vec![Target {
        name: "localhost".into(),
        host: "127.0.0.1".into(),
        port,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_agent_is_found_in_agents_then_slurm_agents_then_the_pattern() {
        let cfg = crate::config::parse(
            "[agents]\nray-w1 = \"10.0.0.8:6000\"\n[slurm]\nagent_address = \"{name}.ib:7000\"\n[slurm.agents]\ngpu02 = \"10.0.0.2\"\n",
            std::path::Path::new("c.toml"),
        )
        .expect("parses");
        let at = |n: &str| {
            let t = node_agent(&cfg, n, 50051).expect("an agent");
            assert_eq!(t.name, n);
            t.address()
        };
        assert_eq!(at("ray-w1"), "10.0.0.8:6000");
        assert_eq!(at("gpu02"), "10.0.0.2:50051");
        assert_eq!(at("k8s-n1"), "k8s-n1.ib:7000");
    }
}
