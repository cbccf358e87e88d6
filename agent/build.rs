//! Compiles the kubelet's PodResources API (vendored in proto/podresources)
//! with protox, as the proto crate compiles fleetop.proto: no system `protoc`.
//! The server side too: the agent's tests answer `List` as a kubelet would.
//! Also records the commit built from, for `fleetop-agent --version`.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rustc-env=FLEETOP_COMMIT={}", commit());
    println!("cargo:rerun-if-changed=proto/podresources/v1/api.proto");
    let fds = protox::compile(["podresources/v1/api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

/// The short hash of HEAD, and the files that change when HEAD moves (so a
/// commit rebuilds the version string). The console's build.rs is the same:
/// the two crates share no build code. Without git, `FLEETOP_COMMIT`.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=FLEETOP_COMMIT");
    if let Ok(c) = std::env::var("FLEETOP_COMMIT") {
        return c;
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(hash) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for f in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        if let Some(path) = git(&["rev-parse", "--git-path", f]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    hash
}
