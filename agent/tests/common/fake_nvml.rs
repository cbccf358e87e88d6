//! The fake libnvidia-ml.so for the agent's tests that load it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The fake libnvidia-ml.so, built once for this run (cargo does not build a
/// workspace member the agent does not depend on).
pub fn fake_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "fleetop-fake-nvml"])
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the fake NVML failed");
        // Beside the agent binary: the same target directory and profile.
        let lib = PathBuf::from(env!("CARGO_BIN_EXE_fleetop-agent")).with_file_name("libnvidia_ml.so");
        assert!(lib.exists(), "{} is missing", lib.display());
        lib
    })
}
