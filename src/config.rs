//! The config file (`$XDG_CONFIG_HOME/fleetop/config.toml`, or `--config`).
//! Every key is optional; a bad file is refused whole with its path and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::detect::Thresholds;
use crate::model::flag::{FlagKind, Severity};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Hostlist expression of the agents to watch (e.g. "gpu[01-64]").
    pub hosts: Option<String>,
    /// A hostfile, one hostlist expression per line.
    pub hostfile: Option<PathBuf>,
    /// Agent port where a host gives none.
    pub port: Option<u16>,
    /// Colour theme (see `--theme`).
    pub theme: Option<String>,
    /// Refuse every action that changes the cluster.
    pub read_only: bool,
    /// The agents' bench token (the file given to `fleetop-agent --bench-token-file`).
    pub bench_token_file: Option<PathBuf>,
    /// The agents' telemetry token (the file given to `fleetop-agent --token-file`).
    #[serde(alias = "token_file")]
    pub telemetry_token_file: Option<PathBuf>,
    /// Connect to the agents over TLS, trusting this CA (PEM).
    pub tls_ca: Option<PathBuf>,
    /// This console's certificate and key (PEM), for agents that ask for one
    /// (`fleetop-agent --tls-client-ca`).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The name the agents' certificates carry, where it is not the host
    /// name the console connects to (e.g. addresses by IP).
    pub tls_domain: Option<String>,
    pub thresholds: Thresholds,
    /// `[agents]`: a node's agent address ("host:port"), by node name, for
    /// every scheduler (Slurm, Kubernetes, Ray); a node absent here is
    /// found as before (`[slurm.agents]`, else `[slurm] agent_address`).
    pub agents: BTreeMap<String, String>,
    pub slurm: SlurmConfig,
    /// How often the console may redraw (`--refresh`): lower for a slow
    /// SSH link. 50 ms to 10 s.
    #[serde(deserialize_with = "de_refresh")]
    pub refresh: Option<std::time::Duration>,
    /// Clicks and the wheel in the console (`--no-mouse` turns them off).
    pub mouse: Option<bool>,
    pub notify: NotifyConfig,
    /// `[racks]`: which rack each node is in, for the group view and the export.
    pub racks: RacksConfig,
    /// `[remediate]`: the opt-in remediation policy of `fleetop watch`;
    /// absent, the policy is off.
    pub remediate: Option<RemediateConfig>,
    /// `[ray]`: the Ray cluster the nodes are in (`--ray`).
    pub ray: RayConfig,
    /// The file this was read from (`None` for the defaults), for errors
    /// found after parsing (a rack's hostlist is read by `ingest::racks`).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// `[racks]`: a node's rack, from an explicit hostlist per rack
/// (`[racks.hosts] r01 = "gpu[01-16]"`) or else from its host name
/// (`pattern`, a regular expression whose group `rack`, or its only group,
/// is the rack). A hostlist wins over the pattern; a node neither names is in
/// no rack.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RacksConfig {
    /// E.g. `"^(?P<rack>r\\d+)-"` for hosts named `r12-n03`.
    pub pattern: Option<String>,
    /// Rack name -> Slurm hostlist expression of its nodes.
    pub hosts: BTreeMap<String, String>,
    /// The line of each `hosts` key in the file, for errors found later.
    #[serde(skip)]
    pub lines: BTreeMap<String, usize>,
}

impl RacksConfig {
    /// The pattern, compiled; `Err(why)` if it is not a usable one.
    pub fn regex(&self) -> Result<Option<regex::Regex>, String> {
        let Some(p) = &self.pattern else { return Ok(None) };
        let re = regex::Regex::new(p).map_err(|e| {
            let why = e.to_string();
            // The regex crate's message spans lines (the pattern, a caret).
            let last = why.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
            format!(
                "'{p}' is not a regular expression: {}",
                last.trim_start_matches("error: ")
            )
        })?;
        let named = re.capture_names().flatten().any(|n| n == "rack");
        if !named && re.captures_len() != 2 {
            return Err(format!(
                "'{p}' must capture the rack: a group named rack, (?P<rack>...), or exactly one group"
            ));
        }
        Ok(Some(re))
    }

    fn invalid(&self) -> Option<(&'static str, String)> {
        if let Err(why) = self.regex() {
            return Some(("pattern", why));
        }
        self.hosts
            .iter()
            .find(|(name, hosts)| name.trim().is_empty() || hosts.trim().is_empty())
            .map(|(name, _)| ("hosts", format!("rack '{name}': needs a name and a hostlist")))
    }
}

fn de_refresh<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<std::time::Duration>, D::Error> {
    let s = String::deserialize(d)?;
    crate::model::time::parse_refresh(&s)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("bad refresh: {e}")))
}

impl Config {
    pub fn refresh(&self) -> std::time::Duration {
        self.refresh.unwrap_or(crate::model::time::DEFAULT_REFRESH)
    }
}

pub use crate::model::remediation::Mode as RemediateMode;

/// `[remediate]`: for flags whose action takes the node (reset_gpu,
/// reboot_node, replace), crit and up for `grace`, drain the node with the
/// catalog's reason; at most `max_nodes` (or `max_percent` of the fleet,
/// whichever is fewer) per `window`, or the breaker trips and the policy
/// stops until `fleetop remediate reset`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemediateConfig {
    /// dry-run (the default) or drain.
    pub mode: RemediateMode,
    /// How long a flag must stay up before the policy acts.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub grace: Duration,
    /// The most nodes the policy drains per window (absent: only the percentage bounds it).
    pub max_nodes: Option<u32>,
    /// The most nodes, as a percentage of the fleet watched, per window (at least one node).
    pub max_percent: f64,
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub window: Duration,
    /// Kubernetes: a quarantine evicts only the pods that hold a GPU
    /// (true, the default: the fault is the GPU's; the node's other pods
    /// keep running, and the cordon keeps new ones off), or every pod a
    /// `kubectl drain` would evict (false).
    pub gpu_pods_only: bool,
    /// Kubernetes: the namespace of the policy's Lease (`fleetop-remediate`).
    pub lease_namespace: String,
    /// Kubernetes: the Lease's `leaseDurationSeconds` (default 60 s, at
    /// least 4 s). A watch renews it once less than two thirds are left and
    /// acts only while more than a quarter is left; a watch that stopped is
    /// taken over this long after its last renewal. Tests shorten it.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub lease_duration: Duration,
}

impl Default for RemediateConfig {
    fn default() -> Self {
        RemediateConfig {
            mode: RemediateMode::DryRun,
            grace: Duration::from_secs(300),
            max_nodes: None,
            max_percent: 10.0,
            window: Duration::from_secs(3600),
            gpu_pods_only: true,
            lease_namespace: crate::model::kube::LEASE_NAMESPACE.to_string(),
            lease_duration: Duration::from_secs(60),
        }
    }
}

impl RemediateConfig {
    /// The breaker's limit for a fleet of `fleet` nodes.
    pub fn limit(&self, fleet: usize) -> usize {
        let pct = ((fleet as f64) * self.max_percent / 100.0).floor() as usize;
        let n = self.max_nodes.map_or(pct, |m| pct.min(m as usize));
        n.max(1)
    }

    /// The limit's rule in words: "10% of the fleet, at least 1" or "10%
    /// of the fleet, at least 1, at most 3".
    pub fn limit_words(&self) -> String {
        match self.max_nodes {
            Some(m) => format!("{}% of the fleet, at least 1, at most {m}", self.max_percent),
            None => format!("{}% of the fleet, at least 1", self.max_percent),
        }
    }
}

/// `[notify]`: which flags become alerts, where they go, and the TUI's bell.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// Alertmanager's base URL ("http://am:9093"); `--alertmanager` wins.
    pub alertmanager: Option<String>,
    /// A webhook URL (JSON body, docs/NOTIFY.md); `--webhook` wins.
    pub webhook: Option<String>,
    /// The flag kinds that notify (names as in the export); absent: all.
    pub kinds: Option<Vec<FlagKind>>,
    /// The least severity that notifies (after `severity` overrides).
    pub min_severity: Severity,
    /// Severity to send for a kind instead of the detector's (`idle = "warn"`).
    pub severity: BTreeMap<String, Severity>,
    /// How often firing alerts are posted again to Alertmanager: must stay
    /// under its `resolve_timeout` (5m by default) or alerts resolve there.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub repost: Duration,
    /// Labels added to every alert (`cluster = "east"`).
    pub labels: BTreeMap<String, String>,
    /// Webhook events kept while the receiver is down; the oldest go first.
    pub webhook_queue: usize,
    /// The longest one POST may take.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub timeout: Duration,
    /// The TUI rings the terminal bell when a crit flag is raised.
    pub bell: bool,
    /// Where docs/faults.md is served (a URL): alerts link
    /// `<runbook_base>#<kind>`; absent, the path in the repo.
    pub runbook_base: Option<String>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            alertmanager: None,
            webhook: None,
            kinds: None,
            min_severity: Severity::Warn,
            severity: BTreeMap::new(),
            repost: Duration::from_secs(60),
            labels: BTreeMap::new(),
            webhook_queue: 1000,
            timeout: Duration::from_secs(10),
            bell: true,
            runbook_base: None,
        }
    }
}

/// Labels fleetop sets itself: `[notify] labels` may not replace them.
pub const ALERT_LABELS: [&str; 9] = [
    "alertname",
    "node",
    "gpu",
    "ib_port",
    "kind",
    "severity",
    "action",
    "job",
    "user",
];

impl NotifyConfig {
    /// The first value out of its range, as (key, why).
    fn invalid(&self) -> Option<(&'static str, String)> {
        if let Some(k) = self.severity.keys().find(|k| FlagKind::from_name(k).is_none()) {
            return Some(("severity", format!("'{k}' is not a flag kind")));
        }
        if self.repost.is_zero() {
            return Some(("repost", "must be longer than zero".into()));
        }
        if self.timeout.is_zero() {
            return Some(("timeout", "must be longer than zero".into()));
        }
        if !(1..=1_000_000).contains(&self.webhook_queue) {
            return Some(("webhook_queue", "must be 1 to 1000000 events".into()));
        }
        for name in self.labels.keys() {
            let mut chars = name.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid || name.starts_with("__") {
                return Some((
                    "labels",
                    format!("'{name}' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
                ));
            }
            if ALERT_LABELS.contains(&name.as_str()) {
                return Some(("labels", format!("'{name}' is set by fleetop itself")));
            }
        }
        None
    }
}

/// Which output format to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SlurmFormat {
    /// `--json` where the installed Slurm has it, the text formats otherwise.
    #[default]
    Auto,
    Json,
    Text,
}

/// How long a Slurm client may take by default (`[slurm] timeout`).
pub const DEFAULT_SLURM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `[slurm]`: how to read Slurm and find the agents of its nodes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmConfig {
    /// auto (JSON where Slurm has it), json or text.
    pub format: SlurmFormat,
    /// The agent address of a Slurm node; `{name}` is the node name.
    pub agent_address: String,
    /// Addresses for particular nodes, where the pattern does not fit.
    pub agents: std::collections::BTreeMap<String, String>,
    /// How often the scheduler is read.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub refresh: std::time::Duration,
    /// The longest sinfo, squeue or scontrol may take before it is killed.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub timeout: std::time::Duration,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            format: SlurmFormat::Auto,
            agent_address: format!("{{name}}:{}", crate::model::target::DEFAULT_AGENT_PORT),
            agents: Default::default(),
            refresh: std::time::Duration::from_secs(10),
            timeout: DEFAULT_SLURM_TIMEOUT,
        }
    }
}

/// `[ray]`: where Ray's dashboard and GCS are, and how often they are read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RayConfig {
    /// The dashboard's HTTP address, e.g. "http://ray-head:8265".
    pub dashboard: Option<String>,
    /// The GCS's host:port (default: the dashboard's host, port 6379).
    pub gcs: Option<String>,
    /// How often Ray is read.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub refresh: std::time::Duration,
    /// The longest one read or one drain may take.
    #[serde(deserialize_with = "crate::detect::de_duration")]
    pub timeout: std::time::Duration,
}

impl Default for RayConfig {
    fn default() -> Self {
        RayConfig {
            dashboard: None,
            gcs: None,
            refresh: std::time::Duration::from_secs(10),
            timeout: std::time::Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config '{path}': {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Where the config lives by default.
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("fleetop").join("config.toml"))
}

/// Loads `path`, or the default file if it exists, or the defaults.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => match default_path() {
            Some(p) if p.exists() => p,
            _ => return Ok(Config::default()),
        },
    };
    let text = fleetop_proto::input::read_capped(&path, fleetop_proto::input::MAX_FILE_BYTES).map_err(|error| {
        ConfigError::Read {
            path: path.clone(),
            error,
        }
    })?;
    parse(&text, &path)
}

pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let cfg: Config = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(1);
        ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            message: e.message().trim().replace('\n', " "),
        }
    })?;
    // Values that parse but would make the console lie are refused too,
    // with the line they are on.
    if let Some((section, key, why)) = cfg.invalid() {
        return Err(ConfigError::Parse {
            path: path.to_path_buf(),
            line: line_of_key(text, section, key),
            message: format!("{}{key}: {why}", section.map(|s| format!("{s}.")).unwrap_or_default()),
        });
    }
    if let Some((section, name, why)) = cfg.bad_agent() {
        return Err(ConfigError::Parse {
            path: path.to_path_buf(),
            line: line_of_key(text, Some(section), name),
            message: format!("{section}.{name}: {why}"),
        });
    }
    let mut cfg = cfg;
    cfg.path = Some(path.to_path_buf());
    let keys: Vec<String> = cfg.racks.hosts.keys().cloned().collect();
    for k in keys {
        let line = line_of_key(text, Some("racks.hosts"), &k);
        cfg.racks.lines.insert(k, line);
    }
    Ok(cfg)
}

impl Config {
    /// The first value out of its range, as (section, key, why).
    fn invalid(&self) -> Option<(Option<&'static str>, &'static str, String)> {
        if self.port == Some(0) {
            return Some((None, "port", "must be 1 to 65535".into()));
        }
        if let Some((key, why)) = self.thresholds.invalid() {
            return Some((Some("thresholds"), key, why));
        }
        let zero = |d: std::time::Duration| d.is_zero().then(|| "must be longer than zero".to_string());
        if let Some(why) = zero(self.slurm.refresh) {
            return Some((Some("slurm"), "refresh", why));
        }
        if let Some((key, why)) = self.notify.invalid() {
            return Some((Some("notify"), key, why));
        }
        if let Some((key, why)) = self.racks.invalid() {
            return Some((Some("racks"), key, why));
        }
        if let Some(r) = &self.remediate {
            if !(r.max_percent > 0.0 && r.max_percent <= 100.0) {
                return Some((
                    Some("remediate"),
                    "max_percent",
                    "must be above 0 and at most 100".into(),
                ));
            }
            if r.max_nodes == Some(0) {
                return Some((Some("remediate"), "max_nodes", "must be at least 1".into()));
            }
            if let Some(why) = zero(r.window) {
                return Some((Some("remediate"), "window", why));
            }
            if r.lease_duration < std::time::Duration::from_secs(4) {
                return Some((Some("remediate"), "lease_duration", "must be at least 4s".into()));
            }
            if !crate::model::kube::valid_name(&r.lease_namespace) {
                return Some((
                    Some("remediate"),
                    "lease_namespace",
                    "must be a Kubernetes namespace name (lower-case letters, digits, '-')".into(),
                ));
            }
        }
        zero(self.slurm.timeout).map(|why| (Some("slurm"), "timeout", why))
    }
}

impl Config {
    /// The first agent address that is not one "host:port" (or "host"),
    /// or a node that `[agents]` and `[slurm.agents]` give two addresses.
    fn bad_agent(&self) -> Option<(&'static str, &str, String)> {
        for (section, map) in [("agents", &self.agents), ("slurm.agents", &self.slurm.agents)] {
            for (name, addr) in map {
                if let Err(why) = agent_address(addr) {
                    return Some((section, name, format!("'{addr}' is not an agent's address: {why}")));
                }
            }
        }
        for (name, addr) in &self.agents {
            if let Some(other) = self.slurm.agents.get(name).filter(|o| *o != addr) {
                return Some((
                    "agents",
                    name,
                    format!("'{addr}', but [slurm.agents] gives {name} '{other}': name each node in one of them"),
                ));
            }
        }
        None
    }

    /// The agent address the config gives node `name`: `[agents]`, else
    /// `[slurm.agents]`, else `None` (the caller's own way to find it).
    pub fn agent_of(&self, name: &str) -> Option<&str> {
        self.agents
            .get(name)
            .or_else(|| self.slurm.agents.get(name))
            .map(String::as_str)
    }

    /// Every node the config gives an agent address.
    pub fn agent_names(&self) -> std::collections::BTreeSet<&str> {
        self.agents
            .keys()
            .chain(self.slurm.agents.keys())
            .map(String::as_str)
            .collect()
    }
}

/// One agent's address: "host", "host:port" or "[v6]:port", nothing else
/// (a hostlist is for `hosts`, not for one node's agent).
fn agent_address(addr: &str) -> Result<(), String> {
    let (host, port) = match addr.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest.split_once(']').ok_or("an IPv6 address needs its ']'")?;
            if v6.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("'{v6}' is not an IPv6 address"));
            }
            match after {
                "" => return Ok(()),
                p => (v6, Some(p.strip_prefix(':').ok_or("':port' must follow ']'")?)),
            }
        }
        None => match addr.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (addr, None),
        },
    };
    let bad_char = |c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' || c == ':');
    if host.is_empty() || host.chars().any(bad_char) {
        return Err("want host:port, e.g. \"10.1.0.7:50051\"".into());
    }
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => {}
            _ => return Err(format!("port '{p}' must be 1 to 65535")),
        }
    }
    Ok(())
}

/// The line where `key` is set in `[section]` (or before any section), for
/// errors about values; 1 where it cannot be found.
fn line_of_key(text: &str, section: Option<&str>, key: &str) -> usize {
    let mut current: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_string());
            continue;
        }
        let here = line.split('=').next().map(str::trim) == Some(key);
        if here && current.as_deref() == section {
            return i + 1;
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn empty_file_gives_defaults() {
        let c = parse("", Path::new("c.toml")).expect("parses");
        assert_eq!(
            c,
            Config {
                path: Some("c.toml".into()),
                ..Config::default()
            }
        );
    }

    #[test]
    fn thresholds_override_key_by_key() {
        let c = parse(
            "hosts = \"gpu[01-04]\"\n[thresholds]\nidle_window = \"90s\"\nidle_util_pct = 2\n",
            Path::new("c.toml"),
        )
        .expect("parses");
        assert_eq!(c.hosts.as_deref(), Some("gpu[01-04]"));
        assert_eq!(c.thresholds.idle_window, Duration::from_secs(90));
        assert_eq!(c.thresholds.idle_util_pct, 2);
        assert_eq!(c.thresholds.stale_intervals, Thresholds::default().stale_intervals);
    }

    #[test]
    fn notify_keys_parse_and_the_bell_can_be_silenced() {
        assert!(Config::default().notify.bell, "on unless configured off");
        let c = parse(
            "[notify]\nbell = false\nalertmanager = \"http://am:9093\"\nkinds = [\"xid\", \"gpu_lost\"]\nmin_severity = \"crit\"\nrepost = \"2m\"\n[notify.severity]\nidle = \"warn\"\n[notify.labels]\ncluster = \"east\"\n",
            Path::new("c.toml"),
        )
        .expect("parses");
        let n = &c.notify;
        assert!(!n.bell);
        assert_eq!(n.alertmanager.as_deref(), Some("http://am:9093"));
        assert_eq!(n.kinds, Some(vec![FlagKind::Xid, FlagKind::GpuLost]));
        assert_eq!(n.min_severity, Severity::Crit);
        assert_eq!(n.repost, Duration::from_secs(120));
        assert_eq!(n.severity.get("idle"), Some(&Severity::Warn));
        assert_eq!(n.labels.get("cluster").map(String::as_str), Some("east"));
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse(
            "port = 50051\n\n[thresholds]\nidle_windw = \"5m\"\n",
            Path::new("/etc/f.toml"),
        )
        .expect_err("unknown key");
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/f.toml:4: "), "{msg}");
        assert!(msg.contains("idle_windw"), "{msg}");
        let e = parse("[thresholds]\nidle_window = \"five\"\n", Path::new("f.toml")).expect_err("bad duration");
        assert!(e.to_string().starts_with("f.toml:2: "), "{e}");
        assert!(e.to_string().contains("five"), "{e}");
    }

    #[test]
    fn values_that_would_make_the_console_lie_are_refused_with_file_line_and_key() {
        let bad = [
            ("[thresholds]\nidle_util_pct = 1000\n", 2, "thresholds.idle_util_pct"),
            (
                "port = 50051\n[thresholds]\n\nstale_intervals = 0\n",
                4,
                "thresholds.stale_intervals",
            ),
            (
                "[thresholds]\nunreachable_after = \"0s\"\n",
                2,
                "thresholds.unreachable_after",
            ),
            ("[thresholds]\nclear_samples = 0\n", 2, "thresholds.clear_samples"),
            ("[slurm]\nrefresh = \"0s\"\n", 2, "slurm.refresh"),
            ("[notify]\nrepost = \"0s\"\n", 2, "notify.repost"),
            (
                "[notify]\n\nseverity = { idel = \"warn\" }\n",
                3,
                "'idel' is not a flag kind",
            ),
            ("[notify]\nlabels = { node = \"x\" }\n", 2, "'node' is set by fleetop"),
            ("[notify]\nkinds = [\"xid\", \"xyd\"]\n", 2, "xyd"),
            ("port = 0\n", 1, "port"),
            ("[thresholds]\nxid_hold = \"300000000000y\"\n", 2, "out of range"),
            (
                "[remediate]\nmode = \"drain\"\nmax_percent = 0\n",
                3,
                "remediate.max_percent",
            ),
            ("[remediate]\nmax_nodes = 0\n", 2, "remediate.max_nodes"),
            ("[remediate]\nmode = \"yolo\"\n", 2, "dry-run"),
        ];
        for (text, line, needle) in bad {
            let e = parse(text, Path::new("/etc/f.toml")).expect_err(text).to_string();
            assert!(e.starts_with(&format!("/etc/f.toml:{line}: ")), "{text:?}: {e}");
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        assert!(parse("[thresholds]\nidle_util_pct = 100\n", Path::new("f")).is_ok());
    }

    #[test]
    fn racks_by_pattern_and_by_hostlist() {
        let c = parse(
            "[racks]\npattern = \"^(?P<rack>r\\\\d+)-\"\n\n[racks.hosts]\nr09 = \"gpu[01-04]\"\n",
            Path::new("c.toml"),
        )
        .expect("parses");
        let re = c.racks.regex().expect("compiles").expect("given");
        assert_eq!(&re.captures("r12-n03").expect("matches")["rack"], "r12");
        assert_eq!(c.racks.hosts.get("r09").map(String::as_str), Some("gpu[01-04]"));
        assert_eq!(c.racks.lines.get("r09"), Some(&5), "for errors found later");
        // One unnamed group is the rack too.
        assert!(parse("[racks]\npattern = \"^([a-z]+)\"\n", Path::new("c")).is_ok());
        assert!(matches!(
            parse("", Path::new("c")).expect("parses").racks.regex(),
            Ok(None)
        ));
    }

    #[test]
    fn a_bad_rack_pattern_is_refused_with_file_line_and_value() {
        let bad = [
            (
                "[racks]\npattern = \"^(r\\\\d+\"\n",
                2,
                "'^(r\\d+' is not a regular expression",
            ),
            (
                "\n[racks]\npattern = \"^r\\\\d+-n\\\\d+\"\n",
                3,
                "must capture the rack",
            ),
            ("[racks]\npattern = \"(a)(b)\"\n", 2, "exactly one group"),
            ("[racks.hosts]\nr01 = \"\"\n", 1, "rack 'r01'"),
            ("[racks]\nhost = {}\n", 2, "unknown field `host`"),
        ];
        for (text, line, needle) in bad {
            let e = parse(text, Path::new("/etc/f.toml")).expect_err(text).to_string();
            assert!(e.starts_with(&format!("/etc/f.toml:{line}: ")), "{text:?}: {e}");
            assert!(e.contains(needle), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1, "one line: {e}");
        }
    }

    #[test]
    fn agents_map_every_schedulers_nodes_and_slurm_agents_keeps_working() {
        let c = parse(
            "[agents]\nray-w1 = \"10.1.0.8:6000\"\nk8s-n1 = \"[::1]:50051\"\ngpu01 = \"10.1.0.7\"\n[slurm.agents]\ngpu01 = \"10.1.0.7\"\ngpu02 = \"10.1.0.9:50051\"\n",
            Path::new("c.toml"),
        )
        .expect("parses");
        assert_eq!(c.agent_of("ray-w1"), Some("10.1.0.8:6000"));
        assert_eq!(c.agent_of("k8s-n1"), Some("[::1]:50051"));
        // The same address in both is no conflict; [slurm.agents] alone still serves.
        assert_eq!(c.agent_of("gpu01"), Some("10.1.0.7"));
        assert_eq!(c.agent_of("gpu02"), Some("10.1.0.9:50051"));
        assert_eq!(c.agent_of("gpu03"), None, "found as before: [slurm] agent_address");
        assert_eq!(c.agent_names().len(), 4);
    }

    #[test]
    fn a_bad_agent_address_or_two_addresses_for_one_node_is_one_line_with_file_line_and_value() {
        let bad = [
            (
                "[agents]\ngpu01 = \"10.1.0.7:99999\"\n",
                2,
                "agents.gpu01: '10.1.0.7:99999'",
            ),
            (
                "\n[agents]\n\ngpu01 = \"gpu[01-02]\"\n",
                4,
                "agents.gpu01: 'gpu[01-02]'",
            ),
            ("[agents]\ngpu01 = \"\"\n", 2, "agents.gpu01"),
            ("[agents]\ngpu01 = \"[::1:50051\"\n", 2, "']'"),
            ("[slurm.agents]\ngpu01 = \"a b:1\"\n", 2, "slurm.agents.gpu01: 'a b:1'"),
            (
                "[slurm.agents]\ngpu01 = \"a:1\"\n[agents]\ngpu01 = \"b:1\"\n",
                4,
                "agents.gpu01: 'b:1', but [slurm.agents] gives gpu01 'a:1'",
            ),
        ];
        for (text, line, needle) in bad {
            let e = parse(text, Path::new("/etc/f.toml")).expect_err(text).to_string();
            assert!(e.starts_with(&format!("/etc/f.toml:{line}: ")), "{text:?}: {e}");
            assert!(e.contains(needle), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1, "one line: {e}");
        }
    }
}
