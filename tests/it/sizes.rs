//! No source file grows past what one person reads whole: 800 lines in a
//! crate's source (the console's, the agent's, the wire's), 1,500 in the
//! tests. A file over is split along what it holds (a folder: `mod.rs`
//! and parts named for them), not cut anywhere.

use std::path::{Path, PathBuf};

/// The source folders and the most lines a file in them may have.
const LIMITS: &[(&str, usize)] = &[("src", 800), ("agent/src", 800), ("proto/src", 800), ("tests", 1500)];

/// Files over their limit while they are being split elsewhere: each is a
/// debt with a name, to empty when that work is merged. A file here that
/// is no longer over fails the test too, so the list cannot rot.
const STILL_OVER: &[&str] = &[
    // None: every file is within its bound. A file named here must be over
    // it (and is being split), or the test fails.
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let p = e.path();
        if p.is_dir() {
            // A fake library's own build output is no source.
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Each file over its folder's limit, as "path (lines)", paths from the
/// workspace's root.
fn over(root: &Path) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (dir, limit) in LIMITS {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for f in files {
            let lines = std::fs::read_to_string(&f).expect("readable").lines().count();
            if lines > *limit {
                let rel = f.strip_prefix(root).expect("under the root");
                found.push((rel.to_string_lossy().replace('\\', "/"), lines));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn no_source_file_is_over_its_limit_but_those_named_as_being_split() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = over(root);
    let unnamed: Vec<String> = found
        .iter()
        .filter(|(f, _)| !STILL_OVER.contains(&f.as_str()))
        .map(|(f, n)| format!("{f} ({n} lines)"))
        .collect();
    assert!(
        unnamed.is_empty(),
        "over 800 lines (src) or 1,500 (tests): split them along what they hold:\n{}",
        unnamed.join("\n")
    );
    let rotted: Vec<&str> = STILL_OVER
        .iter()
        .copied()
        .filter(|f| !found.iter().any(|(g, _)| g == f))
        .collect();
    assert!(
        rotted.is_empty(),
        "no longer over (or gone): take them off STILL_OVER in tests/it/sizes.rs:\n{}",
        rotted.join("\n")
    );
}
