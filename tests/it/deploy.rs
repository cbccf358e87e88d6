//! The Kubernetes manifests in `deploy/kubernetes`, read into the
//! Kubernetes API's own types (k8s-openapi, which the console links): a
//! field the API does not have, or of the wrong type, fails here, not at
//! `kubectl apply`. Then what the DaemonSet promises: GPU nodes only, the
//! least privilege that still reads NVML, the kernel log and the kubelet's
//! pod-resources socket, and a config the agent accepts.

use std::path::Path;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// `text` as the API's type `T`, and proof that nothing was dropped on the
/// way: the object read and written back is the YAML itself.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(file: &str, text: &str) -> T {
    let typed: T = serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let back = serde_json::to_value(&typed).expect("serializes");
    let raw: Value = serde_yaml::from_str(text).expect("YAML");
    assert_eq!(back, raw, "{file}: a field the API does not have, or of another type");
    typed
}

fn read(file: &str) -> String {
    std::fs::read_to_string(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn the_manifests_are_the_kubernetes_apis_own_objects() {
    let kustomization: Value = serde_yaml::from_str(&read("kustomization.yaml")).expect("YAML");
    let resources: Vec<&str> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Every manifest is listed, and every listed one is here.
    let mut here: Vec<String> = std::fs::read_dir(dir())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    here.sort();
    let mut listed: Vec<String> = resources.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(here, listed);

    let _: Namespace = typed("namespace.yaml", &read("namespace.yaml"));
    let cm: ConfigMap = typed("configmap.yaml", &read("configmap.yaml"));
    let ds: DaemonSet = typed("daemonset.yaml", &read("daemonset.yaml"));
    let svc: Service = typed("service.yaml", &read("service.yaml"));
    let np: NetworkPolicy = typed("networkpolicy.yaml", &read("networkpolicy.yaml"));
    // Only the gRPC and metrics ports come in.
    let allowed: Vec<String> = np
        .spec
        .iter()
        .flat_map(|s| s.ingress.iter().flatten())
        .flat_map(|r| r.ports.iter().flatten())
        .filter_map(|p| serde_json::to_value(&p.port).ok())
        .map(|v| v.to_string())
        .collect();
    assert_eq!(allowed, ["50051", "9400"]);

    // GPU nodes only, on the NVIDIA runtime, taking no GPU from the jobs.
    let pod = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec");
    let selector = pod.node_selector.as_ref().expect("a node selector");
    assert_eq!(selector.get("nvidia.com/gpu.present").map(String::as_str), Some("true"));
    let tolerates = pod
        .tolerations
        .iter()
        .flatten()
        .any(|t| t.key.as_deref() == Some("nvidia.com/gpu"));
    assert!(tolerates, "GPU nodes' taint tolerated");
    assert_eq!(pod.runtime_class_name.as_deref(), Some("nvidia"));
    let c = &pod.containers[0];
    let asks_gpus = c
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .is_some_and(|l| l.contains_key("nvidia.com/gpu"));
    assert!(!asks_gpus, "a monitor takes no GPU from the jobs");

    // The least privilege that still does the job.
    let sc = c.security_context.as_ref().expect("a security context");
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_ne!(sc.privileged, Some(true));
    let caps = sc.capabilities.as_ref().expect("capabilities");
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
    let mut added = caps.add.clone().unwrap_or_default();
    added.sort();
    assert_eq!(added, ["DAC_READ_SEARCH", "KILL", "SYSLOG"]);
    assert_eq!(pod.automount_service_account_token, Some(false));

    // The mounts the agent's config names are there.
    let mounts: Vec<&str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    for path in [
        "/etc/fleetop/agent.toml",
        "/etc/fleetop/secrets",
        "/var/lib/kubelet/pod-resources",
        "/dev/kmsg",
        "/var/lib/fleetop-agent",
    ] {
        assert!(mounts.contains(&path), "{path} not mounted");
    }
    // Its config from the ConfigMap, its token from the Secret.
    let toml = cm.data.as_ref().and_then(|d| d.get("agent.toml")).expect("agent.toml");
    assert!(toml.contains("token_file = \"/etc/fleetop/secrets/telemetry.token\""));

    // The Service finds the pods, and names the ports the container has.
    let svc_spec = svc.spec.expect("a spec");
    let pod_labels = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for (k, v) in svc_spec.selector.iter().flatten() {
        assert_eq!(pod_labels.get(k), Some(v), "the Service's selector {k}");
    }
    let port_names: Vec<&str> = c.ports.iter().flatten().filter_map(|p| p.name.as_deref()).collect();
    for p in svc_spec.ports.iter().flatten() {
        let target = serde_json::to_value(&p.target_port).expect("port");
        assert!(port_names.contains(&target.as_str().unwrap_or_default()), "{target}");
    }
    // The ServiceMonitor (the Prometheus Operator's own type) scrapes the
    // Service's metrics port with the telemetry token.
    let sm: Value = serde_yaml::from_str(&read("servicemonitor.yaml")).expect("YAML");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(
        sm["spec"]["endpoints"][0]["authorization"]["credentials"]["key"],
        "telemetry.token"
    );
}

/// The ConfigMap's settings are a config the agent accepts (its token file
/// put where this machine has one).
#[test]
fn the_configmaps_settings_pass_the_agents_config_check() {
    let cm: ConfigMap = typed("configmap.yaml", &read("configmap.yaml"));
    let toml = cm.data.and_then(|d| d.get("agent.toml").cloned()).expect("agent.toml");
    let dir = tempfile::tempdir().expect("tmp");
    let token = dir.path().join("telemetry.token");
    std::fs::write(&token, "t0ken\n").expect("writes");
    let mut perm = std::fs::metadata(&token).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
    std::fs::set_permissions(&token, perm).expect("chmod");
    let config = dir.path().join("agent.toml");
    let here = toml.replace("/etc/fleetop/secrets/telemetry.token", &token.to_string_lossy());
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
