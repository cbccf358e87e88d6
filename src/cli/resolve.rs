//! The command line and the config, turned once into the plain values the
//! layers below take (as ripgrep turns its flags into one resolved value):
//! nothing below `cmd` and `tui` knows clap. Where a flag and the config
//! both say something, the flag wins, here and nowhere else.

use std::time::Duration;

use super::{KubeArgs, RayArgs, RecordFlags, SourceArgs};
use crate::config::Config;
use crate::ingest::kube::KubeOptions;
use crate::ingest::scrape::Exporter;
use crate::ingest::source::{AccessFiles, DemoSource, Hosts, PrometheusSource, RayChoice, Source};
use crate::model::target::DEFAULT_AGENT_PORT;
use crate::record::RecorderOptions;

/// How often the console reads Kubernetes without `--kube-refresh`.
const KUBE_REFRESH: Duration = Duration::from_secs(10);

/// The SOURCE of `args`, over the config.
pub fn source(args: &SourceArgs, cfg: &Config) -> Source {
    let hosts = match (&args.hosts, &args.hostfile) {
        (Some(h), _) => Some(Hosts::List(h.clone())),
        (None, Some(f)) => Some(Hosts::File(f.clone())),
        (None, None) => None,
    };
    let exporter = match (&args.dcgm_exporter, &args.amd_exporter) {
        (Some(h), _) => Some((Exporter::Dcgm, h.clone())),
        (None, Some(h)) => Some((Exporter::Amd, h.clone())),
        (None, None) => None,
    };
    Source {
        hosts,
        slurm: args.slurm,
        demo: args.demo.then(|| DemoSource {
            nodes: args.nodes,
            gpus: args.gpus,
            seed: args.seed,
            scenarios: args.demo_scenarios.clone(),
            fault_after: args.demo_fault_after,
            fault_for: args.demo_fault_for,
        }),
        exporter,
        prometheus: args.prometheus.as_ref().map(|url| PrometheusSource {
            url: url.clone(),
            matchers: args.prometheus_match.clone(),
        }),
        scrape_interval: args.scrape_interval,
        scrape_timeout: args.scrape_timeout,
        port: args.port.or(cfg.port).unwrap_or(DEFAULT_AGENT_PORT),
        backfill: args.backfill,
        access: access(&args.access, cfg),
        kube: kube(&args.kube),
        ray: ray(&args.ray),
    }
}

/// TLS and the telemetry token: flags first, then the config; a
/// certificate and its key come from the same place.
fn access(args: &super::AccessArgs, cfg: &Config) -> AccessFiles {
    let (tls_cert, tls_key) = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => (Some(c.clone()), Some(k.clone())),
        _ => (cfg.tls_cert.clone(), cfg.tls_key.clone()),
    };
    AccessFiles {
        tls_ca: args.tls_ca.clone().or_else(|| cfg.tls_ca.clone()),
        tls_cert,
        tls_key,
        tls_domain: cfg.tls_domain.clone(),
        telemetry_token_file: args
            .telemetry_token_file
            .clone()
            .or_else(|| cfg.telemetry_token_file.clone()),
        insecure: args.insecure,
    }
}

/// Kubernetes, where `--kubernetes` asks for it.
pub fn kube(args: &KubeArgs) -> Option<KubeOptions> {
    args.kubernetes.then(|| KubeOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.kube_context.clone(),
        refresh: args.kube_refresh.unwrap_or(KUBE_REFRESH),
    })
}

/// The Ray cluster asked for (the config is read where Ray is used).
pub fn ray(args: &RayArgs) -> RayChoice {
    RayChoice {
        dashboard: args.ray.clone(),
        gcs: args.ray_gcs.clone(),
    }
}

/// The console's `--record`, if given.
pub fn recording(flags: &RecordFlags) -> Option<RecorderOptions> {
    flags.record.as_ref().map(|path| {
        let mut opts = RecorderOptions::new(path);
        opts.rotate_size = flags.rotate_size;
        opts
    })
}
