//! The Kubernetes manifests in `deploy/kubernetes`, rendered as kustomize
//! renders them here (each kustomization's resources, files and
//! directories, and the components named; no patches are in the
//! DaemonSets' own kustomizations) and read into the Kubernetes API's own
//! types (k8s-openapi, which the console links): a field the API does not
//! have, or of the wrong type, fails here, not at `kubectl apply`. Then
//! what the DaemonSets promise: GPU nodes only, TLS on and nothing in clear,
//! a NetworkPolicy that names who comes in, the least privilege that still
//! reads NVML and the kubelet's pod-resources socket, an AMD variant, the
//! optional parts as components, and a config the agent accepts.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// `text` as the API's type `T`, and proof that nothing was dropped on the
/// way: the object read and written back is the YAML itself.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(file: &str, doc: &Value) -> T {
    let typed: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    let back = serde_json::to_value(&typed).expect("serializes");
    assert_eq!(&back, doc, "{file}: a field the API does not have, or of another type");
    typed
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The documents of a YAML file (`---` between them).
fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|d: &Value| !d.is_null())
        .collect()
}

/// What `kubectl kustomize DIR` gives for these manifests, each object
/// with the file it came from, and every file read on the way: the
/// resources (a file, or a directory's own kustomization) and the
/// components' resources, in order, in the kustomization's namespace.
fn render(kdir: &Path, read: &mut Vec<PathBuf>) -> Vec<(String, Value)> {
    let kfile = kdir.join("kustomization.yaml");
    read.push(kfile.clone());
    let k = yaml(&kfile);
    let mut out = Vec::new();
    for key in ["resources", "components"] {
        for r in k[key].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let p = kdir.join(r);
            if p.is_dir() {
                out.extend(render(&p, read));
            } else {
                read.push(p.clone());
                let name = p.strip_prefix(dir()).unwrap_or(&p).display().to_string();
                out.extend(docs(&p).into_iter().map(|d| (name.clone(), d)));
            }
        }
    }
    if let Some(ns) = k["namespace"].as_str() {
        for (_, d) in &mut out {
            if d["kind"] != "Namespace" {
                d["metadata"]["namespace"] = Value::from(ns);
            }
        }
    }
    out
}

fn of_kind<'a>(objs: &'a [(String, Value)], kind: &str) -> Vec<&'a (String, Value)> {
    objs.iter().filter(|(_, d)| d["kind"] == kind).collect()
}

/// Each DaemonSet of a rendering, as the API's type.
fn daemonsets(objs: &[(String, Value)]) -> Vec<DaemonSet> {
    of_kind(objs, "DaemonSet")
        .into_iter()
        .map(|(f, d)| typed(f, d))
        .collect()
}

/// Every YAML file under deploy/kubernetes.
fn all_yaml(d: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(d).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            all_yaml(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

const COMPONENTS: [&str; 4] = ["servicemonitor", "cert-manager", "kernel-log", "console-rbac"];

#[test]
fn every_manifest_is_rendered_and_each_is_the_kubernetes_apis_own_object() {
    let mut read = Vec::new();
    let nvidia = render(&dir(), &mut read);
    let amd = render(&dir().join("amd"), &mut read);
    for c in COMPONENTS {
        let p = dir().join("components").join(c);
        let k = yaml(&p.join("kustomization.yaml"));
        assert_eq!(k["kind"], "Component", "components/{c}");
        render(&p, &mut read);
    }
    let mut here = Vec::new();
    all_yaml(&dir(), &mut here);
    for p in here {
        assert!(read.contains(&p), "{} is in no kustomization", p.display());
    }
    for objs in [&nvidia, &amd] {
        for (file, d) in objs {
            match d["kind"].as_str() {
                Some("Namespace") => drop(typed::<Namespace>(file, d)),
                Some("ConfigMap") => drop(typed::<ConfigMap>(file, d)),
                Some("DaemonSet") => drop(typed::<DaemonSet>(file, d)),
                Some("Service") => drop(typed::<Service>(file, d)),
                Some("NetworkPolicy") => drop(typed::<NetworkPolicy>(file, d)),
                other => panic!("{file}: {other:?} in a rendering applied without CRDs"),
            }
        }
    }
    // `kubectl apply -k` works without the Prometheus Operator and without
    // cert-manager: their objects are in components alone.
    assert_eq!(daemonsets(&nvidia).len(), 1);
    assert_eq!(daemonsets(&amd).len(), 1);
}

#[test]
fn tls_is_on_and_nothing_crosses_the_network_in_clear() {
    let mut read = Vec::new();
    for objs in [render(&dir(), &mut read), render(&dir().join("amd"), &mut read)] {
        let (f, cm) = of_kind(&objs, "ConfigMap")[0];
        let cm: ConfigMap = typed(f, cm);
        let toml = cm.data.as_ref().and_then(|d| d.get("agent.toml")).expect("agent.toml");
        let config: toml::Table = toml.parse().expect("TOML");
        assert_eq!(config["tls_cert"].as_str(), Some("/etc/fleetop/tls/tls.crt"));
        assert_eq!(config["tls_key"].as_str(), Some("/etc/fleetop/tls/tls.key"));
        assert_eq!(
            config["token_file"].as_str(),
            Some("/etc/fleetop/secrets/telemetry.token")
        );
        // /metrics is plain HTTP: off unless the ServiceMonitor's component is on.
        assert!(!config.contains_key("metrics_listen"), "{toml}");
        assert!(!config.contains_key("insecure"), "{toml}");
        for ds in daemonsets(&objs) {
            let pod = ds.spec.and_then(|s| s.template.spec).expect("a pod spec");
            let tls = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == "tls")
                .and_then(|v| v.secret.clone())
                .expect("the TLS Secret");
            assert_eq!(tls.secret_name.as_deref(), Some("fleetop-agent-tls"));
            assert_eq!(tls.default_mode, Some(0o400));
            let c = &pod.containers[0];
            let args = c.args.clone().unwrap_or_default().join(" ");
            assert!(!args.contains("metrics-listen"), "{args}");
            let mounted = c
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == "tls" && m.mount_path == "/etc/fleetop/tls");
            assert!(mounted, "the TLS Secret is not mounted where the config says");
        }
    }
    // The ServiceMonitor's component turns /metrics on and scrapes it with
    // the telemetry token; cert-manager's writes the Secret the pods mount.
    let mut read = Vec::new();
    let sm = render(&dir().join("components/servicemonitor"), &mut read);
    let (_, sm) = of_kind(&sm, "ServiceMonitor")[0];
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(
        sm["spec"]["endpoints"][0]["authorization"]["credentials"]["key"],
        "telemetry.token"
    );
    let k = yaml(&dir().join("components/servicemonitor/kustomization.yaml"));
    let patch = k["patches"][0]["patch"].as_str().expect("a patch");
    assert!(patch.contains("--metrics-listen=0.0.0.0:9400"), "{patch}");
    let cm = render(&dir().join("components/cert-manager"), &mut read);
    let (_, cert) = of_kind(&cm, "Certificate")[0];
    assert_eq!(cert["spec"]["secretName"], "fleetop-agent-tls");
}

/// The console's RBAC (components/console-rbac): the API's own objects,
/// each Role bound to the console's ServiceAccount, no wildcard, no
/// Secret; the agent mounts no token, so it has no API rights at all.
/// `kube_policy` holds the rules to the calls fleetop makes.
#[test]
fn the_consoles_rbac_is_the_apis_own_and_the_agent_needs_none() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let mut read = Vec::new();
    let objs = render(&dir().join("components/console-rbac"), &mut read);
    let mut kinds = Vec::new();
    for (file, d) in &objs {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "ServiceAccount" => drop(typed::<ServiceAccount>(file, d)),
            "ClusterRole" => drop(typed::<ClusterRole>(file, d)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(file, d)),
            "Role" => drop(typed::<Role>(file, d)),
            "RoleBinding" => drop(typed::<RoleBinding>(file, d)),
            other => panic!("{file}: {other:?} in the RBAC component"),
        }
        kinds.push(kind);
    }
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding"
        ]
    );
    let text = serde_json::to_string(&objs.iter().map(|(_, d)| d).collect::<Vec<_>>()).expect("json");
    assert!(!text.contains("\"*\"") && !text.contains("secrets"), "{text}");
    for (_, b) in objs
        .iter()
        .filter(|(_, d)| d["kind"].as_str().is_some_and(|k| k.ends_with("Binding")))
    {
        assert_eq!(b["subjects"][0]["name"], "fleetop-console");
        assert_eq!(b["subjects"][0]["namespace"], "fleetop");
    }
    let mut read = Vec::new();
    for objs in [render(&dir(), &mut read), render(&dir().join("amd"), &mut read)] {
        for ds in daemonsets(&objs) {
            let spec = ds.spec.and_then(|s| s.template.spec).expect("pod spec");
            assert_eq!(
                spec.automount_service_account_token,
                Some(false),
                "the agent needs no API rights"
            );
        }
    }
}

#[test]
fn the_network_policy_names_the_consoles_and_prometheus() {
    let mut read = Vec::new();
    let objs = render(&dir(), &mut read);
    let (f, np) = of_kind(&objs, "NetworkPolicy")[0];
    let np: NetworkPolicy = typed(f, np);
    let spec = np.spec.expect("a spec");
    assert_eq!(spec.policy_types.as_deref(), Some(&["Ingress".to_string()][..]));
    let rules = spec.ingress.expect("ingress rules");
    let mut by_port = std::collections::BTreeMap::new();
    for r in &rules {
        let from = r.from.as_deref().unwrap_or_default();
        assert!(!from.is_empty(), "a rule with no from: admits every source");
        for peer in from {
            // Each source named: a pod in a namespace, or an address block.
            let named = (peer.namespace_selector.is_some() && peer.pod_selector.is_some()) || peer.ip_block.is_some();
            assert!(named, "a source that is not named: {peer:?}");
        }
        for p in r.ports.iter().flatten() {
            let port = serde_json::to_value(&p.port).expect("port").to_string();
            by_port.insert(port, from.to_vec());
        }
    }
    assert_eq!(by_port.keys().collect::<Vec<_>>(), ["50051", "9400"]);
    let label = |peers: &[k8s_openapi::api::networking::v1::NetworkPolicyPeer], key: &str| -> Vec<String> {
        peers
            .iter()
            .filter_map(|p| p.pod_selector.as_ref()?.match_labels.as_ref()?.get(key).cloned())
            .collect()
    };
    assert_eq!(label(&by_port["50051"], "app.kubernetes.io/name"), ["fleetop"]);
    assert_eq!(label(&by_port["9400"], "app.kubernetes.io/name"), ["prometheus"]);
}

#[test]
fn the_daemonsets_take_the_least_privilege_and_an_amd_variant_is_there() {
    let mut read = Vec::new();
    let nvidia = daemonsets(&render(&dir(), &mut read)).remove(0);
    let amd = daemonsets(&render(&dir().join("amd"), &mut read)).remove(0);
    for (ds, vendor) in [(&nvidia, "nvidia.com"), (&amd, "amd.com")] {
        let pod = ds
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod spec");
        // GPU nodes of its vendor only, their taint tolerated.
        let terms = pod
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|r| r.node_selector_terms.clone())
            .expect("a required node affinity");
        assert!(
            terms
                .iter()
                .flat_map(|t| t.match_expressions.iter().flatten())
                .any(|e| e.key.starts_with(&format!("{vendor}/gpu"))),
            "{vendor}: no node term"
        );
        let tolerates = pod
            .tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some(&format!("{vendor}/gpu")));
        assert!(tolerates, "{vendor}/gpu's taint not tolerated");
        // A monitor takes no GPU from the jobs, sees no host pids, holds no
        // service account token.
        let c = &pod.containers[0];
        let asks_gpus = c
            .resources
            .as_ref()
            .into_iter()
            .flat_map(|r| r.limits.iter().chain(r.requests.iter()))
            .flat_map(|l| l.keys())
            .any(|k| k.contains("gpu"));
        assert!(!asks_gpus, "{vendor}: a monitor takes no GPU from the jobs");
        assert_ne!(pod.host_pid, Some(true), "{vendor}: hostPID");
        assert_ne!(pod.host_network, Some(true), "{vendor}: hostNetwork");
        assert_eq!(pod.automount_service_account_token, Some(false));
        let sc = c.security_context.as_ref().expect("a security context");
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        let caps = sc.capabilities.as_ref().expect("capabilities");
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
        let mounts: Vec<&str> = c
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.as_str())
            .collect();
        for path in [
            "/etc/fleetop/agent.toml",
            "/etc/fleetop/tls",
            "/etc/fleetop/secrets",
            "/var/lib/kubelet/pod-resources",
            "/var/lib/fleetop-agent",
        ] {
            assert!(mounts.contains(&path), "{vendor}: {path} not mounted");
        }
    }
    // NVIDIA's: the runtime adds the devices, so nothing privileged and no
    // capability at all; no kernel log (components/kernel-log).
    let pod = nvidia
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec");
    assert_eq!(pod.runtime_class_name.as_deref(), Some("nvidia"));
    let sc = pod.containers[0].security_context.as_ref().expect("sc");
    assert_eq!(sc.privileged, Some(false));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.capabilities.as_ref().and_then(|c| c.add.clone()), None);
    // AMD's: ROCm from the node, /dev/kfd and /dev/dri, the AMD backend.
    let pod = amd
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec");
    let c = &pod.containers[0];
    let mounts: Vec<&str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    for path in ["/dev/kfd", "/dev/dri", "/opt/rocm", "/dev/kmsg"] {
        assert!(mounts.contains(&path), "amd: {path} not mounted");
    }
    let args = c.args.clone().unwrap_or_default().join(" ");
    assert!(args.contains("--backend amd"), "{args}");
    // Both DaemonSets' pods are the Service's and the NetworkPolicy's.
    for ds in [&nvidia, &amd] {
        let labels = ds
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        assert_eq!(
            labels.get("app.kubernetes.io/name").map(String::as_str),
            Some("fleetop-agent")
        );
    }
}

/// The Service finds the pods and names the ports their containers have.
#[test]
fn the_service_names_the_containers_ports() {
    let mut read = Vec::new();
    let objs = render(&dir(), &mut read);
    let (f, svc) = of_kind(&objs, "Service")[0];
    let svc: Service = typed(f, svc);
    let ds = daemonsets(&objs).remove(0);
    let pod_labels = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let spec = svc.spec.expect("a spec");
    for (k, v) in spec.selector.iter().flatten() {
        assert_eq!(pod_labels.get(k), Some(v), "the Service's selector {k}");
    }
    let c = &ds.spec.and_then(|s| s.template.spec).expect("pod").containers[0];
    let port_names: Vec<&str> = c.ports.iter().flatten().filter_map(|p| p.name.as_deref()).collect();
    for p in spec.ports.iter().flatten() {
        let target = serde_json::to_value(&p.target_port).expect("port");
        assert!(port_names.contains(&target.as_str().unwrap_or_default()), "{target}");
    }
}

/// The ConfigMap's settings are a config the agent accepts (its token,
/// key and certificate put where this machine has them).
#[test]
fn the_configmaps_settings_pass_the_agents_config_check() {
    let mut read = Vec::new();
    let objs = render(&dir(), &mut read);
    let (f, cm) = of_kind(&objs, "ConfigMap")[0];
    let cm: ConfigMap = typed(f, cm);
    let toml = cm.data.and_then(|d| d.get("agent.toml").cloned()).expect("agent.toml");
    let dir = tempfile::tempdir().expect("tmp");
    let private = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("writes");
        let mut perm = std::fs::metadata(&p).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
        std::fs::set_permissions(&p, perm).expect("chmod");
        p.to_string_lossy().into_owned()
    };
    let cert = rcgen::generate_simple_self_signed(vec!["gpu01".to_string()]).expect("a certificate");
    let here = toml
        .replace(
            "/etc/fleetop/secrets/telemetry.token",
            &private("telemetry.token", "t0ken\n"),
        )
        .replace("/etc/fleetop/tls/tls.crt", &private("tls.crt", &cert.cert.pem()))
        .replace(
            "/etc/fleetop/tls/tls.key",
            &private("tls.key", &cert.signing_key.serialize_pem()),
        );
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, here).expect("writes");
    let out = assert_cmd::Command::new(crate::agent_bin())
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .timeout(crate::BIN_TIMEOUT)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
