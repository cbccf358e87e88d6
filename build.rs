//! Records the commit the console is built from, for `fleetop --version`
//! (the agent's build.rs does the same for `fleetop-agent --version`).
//! From a tarball, without git, `FLEETOP_COMMIT` names it, else "unknown".
fn main() {
    println!("cargo:rustc-env=FLEETOP_COMMIT={}", commit());
}

/// The short hash of HEAD, and the files that change when HEAD moves (so a
/// commit rebuilds the version string, and nothing else does).
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
