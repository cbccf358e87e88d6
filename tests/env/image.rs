//! The agent's OCI image as `scripts/image.sh` builds it with buildah
//! (`.ci/run` builds it before the tests): run once here with `--isolation
//! chroot`, as CI can, its version and commit checked, a simulated sample
//! taken, nothing in it but the agent, and the DaemonSet naming it.

use std::time::Duration;

use assert_cmd::Command;

const TAG: &str = concat!("localhost/fleetop-agent:", env!("CARGO_PKG_VERSION"));

fn buildah() -> Command {
    let mut c = Command::new("buildah");
    // The script's storage (vfs: no overlay or fuse needed).
    c.env(
        "STORAGE_DRIVER",
        std::env::var("STORAGE_DRIVER").unwrap_or_else(|_| "vfs".into()),
    )
    // A hang fails this test only.
    .timeout(Duration::from_secs(180));
    c
}

pub fn built() -> bool {
    buildah()
        .args(["inspect", "--type", "image", TAG])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_in(container: &str, args: &[&str]) -> std::process::Output {
    buildah()
        .args(["run", "--isolation", "chroot", container, "--"])
        .args(args)
        .output()
        .expect("buildah runs")
}

/// A working container of the image, removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = buildah().args(["rm", &self.0]).output();
    }
}

pub fn the_agents_image_runs_its_version_and_a_simulated_sample_and_holds_nothing_else() {
    let out = buildah().args(["from", "--quiet", TAG]).output().expect("buildah from");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c = Container(String::from_utf8_lossy(&out.stdout).trim().to_string());

    // The version and commit of this checkout, as the label says too.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let out = run_in(&c.0, &["/usr/bin/fleetop-agent", "--version"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        said.starts_with(concat!("fleetop-agent ", env!("CARGO_PKG_VERSION"), " (commit ")),
        "{said}"
    );
    let label = buildah()
        .args(["inspect", "--type", "image", "--format"])
        .arg("{{index .OCIv1.Config.Labels \"org.opencontainers.image.revision\"}}")
        .arg(TAG)
        .output()
        .expect("inspect");
    let label = String::from_utf8_lossy(&label.stdout).trim().to_string();
    if let Some(head) = head {
        assert!(said.contains(&format!("(commit {head})")), "{said}: HEAD is {head}");
        assert_eq!(label, head, "the image's revision label");
    }

    // A sample from the simulated backend, as JSON, from inside the image.
    let out = run_in(
        &c.0,
        &["/usr/bin/fleetop-agent", "sample", "--once", "--backend", "sim"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sample: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a sample as JSON");
    assert!(
        sample["info"]["backend"].as_str().is_some_and(|b| b.starts_with("sim")),
        "{sample}"
    );
    assert_eq!(sample["sample"]["gpus"].as_array().map(Vec::len), Some(8), "{sample}");

    // FROM scratch: no shell to start.
    let out = run_in(&c.0, &["/bin/sh", "-c", "true"]);
    assert!(!out.status.success(), "the image has a shell");

    // The DaemonSet runs this image.
    let ds = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/daemonset.yaml"))
        .expect("daemonset.yaml");
    let want = format!("image: {}", TAG.trim_start_matches("localhost/"));
    assert!(ds.contains(&want), "the DaemonSet does not name {want}");
}

/// Debian's own `libnvidia-ml.so.1` (bookworm non-free, `libnvidia-ml1`),
/// as `scripts/debian-nvml.sh` fetches it: `$FLEETOP_DEBIAN_NVML`.
pub fn debian_nvml() -> Option<std::path::PathBuf> {
    std::env::var_os("FLEETOP_DEBIAN_NVML")
        .map(std::path::PathBuf::from)
        .filter(|p| p.exists())
}

/// The real NVML, put where the NVIDIA container runtime mounts it, loads
/// in the image: its own needs (libpthread, libdl, librt, libm) are there,
/// and with no GPU driver on this machine it answers NVML's "driver not
/// loaded", never the loader's "cannot open shared object file".
pub fn the_agents_image_loads_debians_libnvidia_ml_and_answers_driver_not_loaded() {
    let lib = debian_nvml().expect("FLEETOP_DEBIAN_NVML: scripts/debian-nvml.sh");
    let out = buildah().args(["from", "--quiet", TAG]).output().expect("buildah from");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c = Container(String::from_utf8_lossy(&out.stdout).trim().to_string());
    // The file itself (the package's name is a link to it).
    let real = std::fs::canonicalize(&lib).expect("the library");
    let out = buildah()
        .args(["copy", "--quiet", &c.0])
        .arg(&real)
        .arg("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
        .output()
        .expect("buildah copy");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = run_in(
        &c.0,
        &["/usr/bin/fleetop-agent", "sample", "--once", "--backend", "nvml"],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!said.contains("cannot open shared object file"), "{said}");
    assert!(!said.contains("could not be loaded"), "{said}");
    assert!(said.contains("the NVIDIA kernel driver is not loaded"), "{said}");
}
