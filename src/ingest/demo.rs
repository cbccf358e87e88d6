//! The demo cluster: real agents with the simulated backend, served in this
//! process on loopback ephemeral ports, with scenarios mixed so that every
//! kind of flag appears (given at least as many nodes as problem scenarios):
//! a mixed fleet of NVIDIA racks and a rack of AMD MI300X nodes.

use fleetop_agent::collector::Collector;
use fleetop_agent::serve::server::{self, AgentHandle, AgentOptions};
use fleetop_agent::sim::{Model, Scenario, SimConfig, SimNode};
use fleetop_agent::sources::Sampler;

use crate::ingest::agent::Access;
use crate::ingest::decode;
use crate::model::target::Target;
use crate::model::update::{Event, Update};

/// The scenarios that each show a problem, placed once each in a demo.
pub const PROBLEMS: [Scenario; 21] = [
    Scenario::Idle,
    Scenario::ThermalThrottle,
    Scenario::Hot,
    Scenario::PowerBrake,
    Scenario::PowerCap,
    Scenario::Xid79,
    Scenario::EccUncorrectable,
    Scenario::NvlinkDown,
    Scenario::IbDown,
    Scenario::IbErrors,
    Scenario::Hang,
    // Last, so that adding them moved no other problem in existing demos.
    Scenario::Underused,
    Scenario::NvmlStuck,
    Scenario::PcieDegraded,
    Scenario::FabricFailed,
    Scenario::PersistenceOff,
    Scenario::GpuMissing,
    Scenario::SxidFatal,
    Scenario::NoPeermem,
    Scenario::OldDriver,
    Scenario::RasUncorrectable,
];

/// One simulated node of the demo.
#[derive(Debug, Clone)]
pub struct DemoNode {
    pub target: Target,
    pub sim: SimConfig,
}

/// Running demo agents; dropping this stops them.
pub struct Demo {
    pub nodes: Vec<DemoNode>,
    agents: Vec<AgentHandle>,
    /// The agents run burn-in for this console only: a one-off token.
    pub bench_token: String,
    /// How this console reaches the demo's agents: TLS with the demo's own
    /// CA, and a one-off telemetry token (the secure path is the one tested).
    pub access: Access,
}

/// A certificate authority made up at run time, and certificates it signs:
/// for the demo and for tests. No key is ever written to the repository.
pub struct Pki {
    pub ca_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A certificate and its private key, PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn new(name: &str) -> Result<Pki, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("{name} CA"));
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let ca = params.self_signed(&key)?;
        Ok(Pki {
            ca_pem: ca.pem(),
            issuer: rcgen::Issuer::new(params, key),
        })
    }

    /// A certificate for these names (host names or IP addresses).
    pub fn issue(&self, names: &[&str]) -> Result<Issued, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names.first().copied().unwrap_or("fleetop"));
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A random token of 32 hex digits (two randomly keyed hashes: no
/// dependency for a demo's one-off secret).
fn one_off_token() -> String {
    let h = |x: u8| std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), x);
    format!("{:016x}{:016x}", h(1), h(2))
}

impl Demo {
    pub fn targets(&self) -> Vec<Target> {
        self.nodes.iter().map(|n| n.target.clone()).collect()
    }

    /// Stops every agent at once: each waits a bounded time for its
    /// connections (`AgentHandle::stop`), so 64 agents take that time once,
    /// not 64 times.
    pub async fn stop(self) {
        let stopping: Vec<_> = self.agents.into_iter().map(|a| tokio::spawn(a.stop())).collect();
        for s in stopping {
            let _ = s.await;
        }
    }
}

fn mix(z: u64) -> u64 {
    let z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

/// The layout of a demo cluster: names, models and scenarios, from the seed.
pub fn plan(nodes: u32, gpus: u32, seed: u64, start_ms: i64) -> Vec<SimConfig> {
    let width = nodes.to_string().len().max(2);
    // Problem scenarios go to seeded positions; the rest mostly train.
    let mut order: Vec<u32> = (0..nodes).collect();
    order.sort_by_key(|&i| mix(seed ^ (u64::from(i) << 17)));
    let mut scenario = vec![Scenario::Training; nodes as usize];
    for (k, &pos) in order.iter().enumerate() {
        scenario[pos as usize] = match PROBLEMS.get(k) {
            Some(p) => *p,
            None if mix(seed + u64::from(pos)).is_multiple_of(6) => Scenario::Quiet,
            None => Scenario::Training,
        };
    }
    // A mixed fleet in eighths: mostly H100, an H200 rack, an AMD MI300X
    // rack (which of the two eighths after the H100s, by the seed), an A100
    // rack.
    let amd_rack = 5 + (seed % 2) as u32;
    let model_of = |i: u32, scenario: Scenario| match i * 8 / nodes.max(1) {
        0..=4 => Model::H100,
        r if r == amd_rack => Model::Mi300x,
        5 | 6 => Model::H200,
        // GPM, which the underused scenario is about, needs Hopper.
        // Version skew is judged against the node's model: the
        // odd one out needs the fleet's main model around it.
        _ if matches!(scenario, Scenario::Underused | Scenario::OldDriver) => Model::H100,
        _ => Model::A100,
    };
    // A problem of one vendor's that landed on the other's GPUs changes
    // places with the first node (in the seeded order) of the right vendor
    // whose scenario either vendor plays.
    let is_amd = |i: usize| (i as u32) * 8 / nodes.max(1) == amd_rack;
    let neutral = |s: Scenario| !s.nvidia_only() && !s.amd_only();
    for &pos in &order {
        let pos = pos as usize;
        let s = scenario[pos];
        if !(s.nvidia_only() && is_amd(pos) || s.amd_only() && !is_amd(pos)) {
            continue;
        }
        let to = order
            .iter()
            .map(|&o| o as usize)
            .find(|&o| is_amd(o) != is_amd(pos) && neutral(scenario[o]));
        if let Some(o) = to {
            scenario.swap(pos, o);
        }
    }
    (0..nodes)
        .map(|i| {
            let node_seed = mix(seed.wrapping_mul(1_000_003) + u64::from(i));
            let model = model_of(i, scenario[i as usize]);
            SimConfig {
                hostname: format!("gpu{:0width$}", i + 1),
                gpus,
                ib_ports: gpus.clamp(1, 8),
                model,
                scenario: scenario[i as usize],
                seed: node_seed,
                start_ms,
                interval_ms: 1000,
                problem_ms: None,
            }
        })
        .collect()
}

/// A demo made for tests: chosen scenarios, one node each, whose problems
/// begin and end when the test says (the hidden `--demo-scenarios`,
/// `--demo-fault-after`, `--demo-fault-for`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub scenarios: Vec<Scenario>,
    /// The problems begin this long after the demo starts (default: in its history).
    pub fault_after: Option<std::time::Duration>,
    /// The problems end this long after they began (default: never).
    pub fault_for: Option<std::time::Duration>,
}

impl Script {
    /// The script the command line asks for, if any; an unknown scenario
    /// is refused in one line naming it and the known ones.
    pub fn from_source(demo: &crate::ingest::source::DemoSource) -> anyhow::Result<Option<Script>> {
        if demo.scenarios.is_empty() {
            return Ok(None);
        }
        let scenarios = demo
            .scenarios
            .iter()
            .map(|name| {
                <Scenario as clap::ValueEnum>::from_str(name.trim(), true).map_err(|_| {
                    let known: Vec<String> = Scenario::all().iter().map(|s| s.name()).collect();
                    anyhow::anyhow!("--demo-scenarios: '{name}' is not a scenario ({})", known.join(", "))
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Some(Script {
            scenarios,
            fault_after: demo.fault_after,
            fault_for: demo.fault_for,
        }))
    }

    /// The scripted nodes, for a demo whose history begins at `start_ms`
    /// and that starts at `now_ms`.
    fn plan(&self, gpus: u32, seed: u64, start_ms: i64, now_ms: i64) -> Vec<SimConfig> {
        let width = self.scenarios.len().to_string().len().max(2);
        let story_start = match self.fault_after {
            Some(after) => now_ms + after.as_millis() as i64 - fleetop_agent::sim::ONSET_MS,
            None => start_ms,
        };
        self.scenarios
            .iter()
            .enumerate()
            .map(|(i, &scenario)| SimConfig {
                hostname: format!("gpu{:0width$}", i + 1),
                gpus,
                ib_ports: gpus.clamp(1, 8),
                // An AMD scenario plays on AMD's GPUs.
                model: if scenario.amd_only() {
                    Model::Mi300x
                } else {
                    Model::H100
                },
                scenario,
                seed: mix(seed.wrapping_mul(1_000_003) + i as u64),
                start_ms: story_start,
                interval_ms: 1000,
                problem_ms: self.fault_for.map(|d| d.as_millis() as i64),
            })
            .collect()
    }
}

/// Starts the demo agents with invented history: ten minutes, or six for big
/// fleets (enough for the five-minute windows of the idle and power-cap
/// flags), so a thousand-node demo starts in seconds on a laptop. Burn-in
/// is on in every agent, for a token made up here.
pub async fn start(nodes: u32, gpus: u32, seed: u64) -> std::io::Result<Demo> {
    start_with(nodes, gpus, seed, None).await
}

/// As `start`, or with the nodes of `script` where one is given.
pub async fn start_with(nodes: u32, gpus: u32, seed: u64, script: Option<&Script>) -> std::io::Result<Demo> {
    let bench_token = one_off_token();
    let telemetry_token = one_off_token();
    let pki = Pki::new("fleetop demo").map_err(std::io::Error::other)?;
    let server_cert = pki.issue(&["localhost", "127.0.0.1"]).map_err(std::io::Error::other)?;
    let tls = server::TlsSettings {
        cert_pem: server_cert.cert_pem.into_bytes(),
        key_pem: server_cert.key_pem.into_bytes(),
        client_ca_pem: None,
    };
    // The console side trusts the demo's CA and nothing else.
    let access = Access {
        tls: Some(
            crate::ingest::conn::Tls::from_pem(
                &crate::ingest::conn::Pem {
                    name: "the demo's CA".into(),
                    bytes: pki.ca_pem.clone().into_bytes(),
                },
                None,
                None,
            )
            .map_err(std::io::Error::other)?,
        ),
        telemetry_token: Some(telemetry_token.clone()),
        insecure: false,
        client_cert: false,
        pace: Default::default(),
    };
    let bench = server::BenchSettings {
        token: bench_token.clone(),
        expectations: fleetop_agent::bench::expect::Expectations::load(None).map_err(std::io::Error::other)?,
        max_duration: std::time::Duration::from_secs(1800),
    };
    let history = std::time::Duration::from_secs(if nodes > 128 { 360 } else { 600 });
    let start_ms = fleetop_agent::now_ms() - history.as_millis() as i64;
    let mut demo = Demo {
        nodes: Vec::new(),
        agents: Vec::new(),
        bench_token,
        access,
    };
    let sims = match script {
        Some(script) => script.plan(gpus, seed, start_ms, fleetop_agent::now_ms()),
        None => plan(nodes, gpus, seed, start_ms),
    };
    for sim in sims {
        let opts = AgentOptions {
            history,
            backfill_from_ms: Some(start_ms),
            bench: Some(bench.clone()),
            tls: Some(tls.clone()),
            telemetry_token: Some(telemetry_token.clone()),
            ..Default::default()
        };
        let agent = server::serve_sim(sim.clone(), opts).await?;
        demo.nodes.push(DemoNode {
            target: Target {
                name: sim.hostname.clone(),
                host: agent.addr.ip().to_string(),
                port: agent.addr.port(),
            },
            sim,
        });
        demo.agents.push(agent);
    }
    Ok(demo)
}

/// A simulated fleet without a network: the demo's nodes sampled in this
/// process and decoded as a connection would decode them, for tests and
/// benchmarks that feed a store directly.
pub struct SimFleet {
    pub plan: Vec<SimConfig>,
    collectors: Vec<Collector>,
    streams: Vec<decode::Stream>,
}

impl SimFleet {
    pub fn new(plan: Vec<SimConfig>) -> Self {
        let collectors = plan
            .iter()
            .map(|c| {
                let sim: Box<dyn Sampler> = Box::new(SimNode::new(c.clone()));
                Collector::new(vec![sim], Default::default())
            })
            .collect();
        let streams = plan.iter().map(|_| decode::Stream::default()).collect();
        SimFleet {
            plan,
            collectors,
            streams,
        }
    }

    /// Every node's description, as if each connected at `now_ms` with its
    /// clock right and sampling every second.
    pub fn connect(&mut self, now_ms: i64) -> Vec<Update> {
        self.collectors
            .iter()
            .zip(&mut self.streams)
            .enumerate()
            .map(|(node, (c, st))| {
                let mut info = c.info().clone();
                info.sample_interval_ms = 1000;
                info.agent_time_ms = now_ms;
                info.agent_instance = node as u64 + 1;
                // As the demo's in-process agents say (their backend sets it).
                info.agent_version = fleetop_agent::VERSION.into();
                Update::Node {
                    node,
                    event: Event::Info(Box::new(st.info(info, now_ms))),
                }
            })
            .collect()
    }

    /// One sample of every node, taken at `t`.
    pub fn sample(&mut self, t: i64) -> Vec<Update> {
        let mut out = Vec::with_capacity(self.collectors.len());
        for (node, (c, st)) in self.collectors.iter_mut().zip(&mut self.streams).enumerate() {
            let Some(s) = c.sample(t) else { continue };
            if let Ok(s) = st.sample(s, t) {
                out.push(Update::Node {
                    node,
                    event: Event::Sample(Box::new(s)),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_places_every_problem_once_and_is_seeded() {
        let p = plan(32, 8, 7, 0);
        for s in PROBLEMS {
            assert_eq!(p.iter().filter(|c| c.scenario == s).count(), 1, "{s:?}");
        }
        assert_eq!(p[0].hostname, "gpu01");
        let names: Vec<_> = p.iter().map(|c| (c.hostname.clone(), c.scenario)).collect();
        let again: Vec<_> = plan(32, 8, 7, 0)
            .iter()
            .map(|c| (c.hostname.clone(), c.scenario))
            .collect();
        assert_eq!(names, again);
        let other: Vec<_> = plan(32, 8, 8, 0)
            .iter()
            .map(|c| (c.hostname.clone(), c.scenario))
            .collect();
        assert_ne!(names, other);
    }

    /// The default demo has a rack of MI300X nodes among the NVIDIA ones;
    /// the AMD fault plays on it, and no NVIDIA fault does.
    #[test]
    fn the_demo_has_an_amd_rack_with_the_amd_fault_on_it() {
        for seed in [1, 2, 7] {
            let p = plan(32, 8, seed, 0);
            let amd: Vec<&SimConfig> = p.iter().filter(|c| c.model == Model::Mi300x).collect();
            assert_eq!(amd.len(), 4, "a rack: an eighth of the fleet (seed {seed})");
            let first = p.iter().position(|c| c.model == Model::Mi300x).expect("an AMD node");
            assert!(
                p[first..first + 4].iter().all(|c| c.model == Model::Mi300x),
                "side by side"
            );
            assert!(p.iter().any(|c| c.model == Model::H100), "among NVIDIA's");
            for s in PROBLEMS {
                assert_eq!(p.iter().filter(|c| c.scenario == s).count(), 1, "{s:?} (seed {seed})");
            }
            let ras = p
                .iter()
                .find(|c| c.scenario == Scenario::RasUncorrectable)
                .expect("placed");
            assert_eq!(ras.model, Model::Mi300x);
            for c in &amd {
                assert!(!c.scenario.nvidia_only(), "{:?} on an MI300X (seed {seed})", c.scenario);
            }
        }
        // Which eighth is AMD's, by the seed.
        let rack = |seed| plan(32, 8, seed, 0).iter().position(|c| c.model == Model::Mi300x);
        assert_ne!(rack(1), rack(2));
    }
}
