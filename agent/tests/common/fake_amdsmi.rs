//! The fake libamd_smi.so (tests/fake-amdsmi) for the agent's tests that
//! load it, found as AMD's tools find the real one: `$ROCM_PATH/lib`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The moment every test reads the fake at (its clock frozen), after every
/// fault its profiles script: the moment `.ci/amdsmi_check.py` reads it at.
pub const MOMENT_S: &str = "20";

/// The fake libamd_smi.so, built once for this run (cargo does not build a
/// workspace member the agent does not depend on).
pub fn fake_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "fleetop-fake-amdsmi"])
            .current_dir(root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the fake AMD SMI failed");
        // Beside the agent binary: the same target directory and profile.
        let lib = PathBuf::from(env!("CARGO_BIN_EXE_fleetop-agent")).with_file_name("libamd_smi.so");
        assert!(lib.exists(), "{} is missing", lib.display());
        lib
    })
}

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A profile of the fake by its path under tests/fake-amdsmi/profiles.
pub fn profile(name: &str) -> PathBuf {
    root().join("tests/fake-amdsmi/profiles").join(name)
}

/// A ROCm install that holds the fake: `<dir>/lib/libamd_smi.so`, to point
/// `ROCM_PATH` at.
pub struct Rocm {
    pub dir: tempfile::TempDir,
}

impl Rocm {
    pub fn new() -> Rocm {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("lib")).expect("mkdir");
        std::os::unix::fs::symlink(fake_lib(), dir.path().join("lib/libamd_smi.so")).expect("symlink");
        Rocm { dir }
    }

    /// The agent, set to load the fake on `profile` at `MOMENT_S`.
    pub fn agent(&self, profile: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_fleetop-agent"));
        c.env("ROCM_PATH", self.dir.path())
            .env("FAKE_AMDSMI_PROFILE", profile)
            .env("FAKE_AMDSMI_TIME_S", MOMENT_S)
            // cargo puts the target directory, where the fake is built, on
            // the loader's path: the agent must find it through ROCM_PATH.
            .env_remove("LD_LIBRARY_PATH");
        c
    }
}
