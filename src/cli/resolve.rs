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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Cli {
        Cli::parse_from(std::iter::once("fleetop").chain(args.iter().copied()))
    }

    #[test]
    fn the_flags_win_over_the_config_and_the_config_fills_in() {
        let cfg = Config {
            port: Some(7000),
            tls_ca: Some("cfg-ca.pem".into()),
            tls_cert: Some("cfg-cert.pem".into()),
            tls_key: Some("cfg-key.pem".into()),
            telemetry_token_file: Some("cfg.token".into()),
            ..Config::default()
        };
        let bare = source(&parse(&[]).source, &cfg);
        assert_eq!(bare.port, 7000);
        assert_eq!(bare.access.tls_ca, Some(PathBuf::from("cfg-ca.pem")));
        assert_eq!(bare.access.tls_cert, Some(PathBuf::from("cfg-cert.pem")));
        assert_eq!(bare.access.telemetry_token_file, Some(PathBuf::from("cfg.token")));
        let given = source(
            &parse(&[
                "--port",
                "6000",
                "--tls-ca",
                "ca.pem",
                "--tls-cert",
                "cert.pem",
                "--tls-key",
                "key.pem",
                "--insecure",
            ])
            .source,
            &cfg,
        );
        assert_eq!(given.port, 6000);
        assert_eq!(given.access.tls_ca, Some(PathBuf::from("ca.pem")));
        // A certificate comes with its own key, never the config's.
        assert_eq!(given.access.tls_cert, Some(PathBuf::from("cert.pem")));
        assert_eq!(given.access.tls_key, Some(PathBuf::from("key.pem")));
        assert!(given.access.insecure);
        assert_eq!(source(&parse(&[]).source, &Config::default()).port, DEFAULT_AGENT_PORT);
    }

    #[test]
    fn each_source_flag_becomes_its_value() {
        let cfg = Config::default();
        let s = source(&parse(&["--hostfile", "nodes.txt"]).source, &cfg);
        assert_eq!(s.hosts, Some(Hosts::File("nodes.txt".into())));
        assert!(!s.slurm && s.demo.is_none() && s.kube.is_none() && !s.ray.asked());
        let s = source(&parse(&["--slurm"]).source, &cfg);
        assert!(s.slurm && s.hosts.is_none());
        let s = source(&parse(&["--amd-exporter", "mi[01-02]"]).source, &cfg);
        assert!(matches!(s.exporter, Some((Exporter::Amd, ref h)) if h == "mi[01-02]"));
        let s = source(
            &parse(&["--kubernetes", "--kube-context", "prod", "--ray", "--demo"]).source,
            &cfg,
        );
        let kube = s.kube.expect("--kubernetes");
        assert_eq!((kube.context.as_deref(), kube.refresh), (Some("prod"), KUBE_REFRESH));
        assert_eq!(s.ray.dashboard.as_deref(), Some(""), "--ray alone: the config's");
        assert_eq!(s.demo.expect("--demo").nodes, 32);
    }

    #[test]
    fn the_agents_options_after_node_win_over_those_before_it() {
        let cli = parse(&[
            "--tls-ca",
            "a.pem",
            "--insecure",
            "node",
            "history",
            "gpu01",
            "--tls-ca",
            "b.pem",
        ]);
        let Some(Command::Node(node)) = &cli.command else {
            panic!("node")
        };
        let s = source(&cli.source.with_agents(&node.agents), &Config::default());
        assert_eq!(s.access.tls_ca, Some(PathBuf::from("b.pem")));
        assert!(s.access.insecure, "given before node, still given");
    }

    #[test]
    fn a_recording_is_asked_for_by_record_alone() {
        assert!(recording(&parse(&[]).record).is_none());
        let opts = recording(&parse(&["--record", "r.rec", "--rotate-size", "1MB"]).record).expect("--record");
        assert_eq!(opts.rotate_size, Some(1_000_000));
    }
}
