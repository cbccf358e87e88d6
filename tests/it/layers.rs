//! The console's layers point one way (see `src/lib.rs`): a module may
//! import only modules of lower layers or its own. This reads every
//! `crate::` path in `src/` and fails on an import against that order, so a
//! cycle between the console's modules cannot come back unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module and its layer: lower numbers are imported by
/// higher ones, never the other way. Modules on one layer do not import
/// each other.
const LAYERS: &[(&str, u32)] = &[
    ("model", 0),
    ("logging", 1),
    ("detect", 1),
    ("config", 2),
    ("cli", 2),
    ("ingest", 3),
    ("store", 3),
    ("ops", 4),
    // Recordings: the player feeds a store; the session tees into a recorder.
    ("record", 4),
    ("session", 5),
    ("export", 5),
    ("cmd", 6),
    // The fuzz targets' entry points drive every front end, like main does.
    ("fuzz", 7),
    ("tui", 6),
];

/// The top-level modules named by `crate::` paths in `text`, `use crate::{a, b}` included.
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            } else {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                out.insert(name);
            }
        }
    }
    out
}

fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for e in std::fs::read_dir(dir).expect("src").flatten() {
        let p = e.path();
        if p.is_dir() {
            visit(&p, f);
        } else if p.extension().is_some_and(|x| x == "rs") {
            f(&p);
        }
    }
}

#[test]
fn console_modules_import_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    visit(&src, &mut |p| {
        let rel = p.strip_prefix(&src).expect("under src");
        let top = rel
            .iter()
            .next()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .trim_end_matches(".rs");
        if matches!(top, "lib" | "main") {
            return;
        }
        let Some(&mine) = layer.get(top) else {
            wrong.push(format!(
                "{}: module `{top}` has no layer in tests/it/layers.rs",
                rel.display()
            ));
            return;
        };
        let text = std::fs::read_to_string(p).expect("readable");
        for m in imports(&text) {
            match layer.get(m.as_str()) {
                Some(_) if m == top => {}
                Some(&theirs) if theirs < mine => {}
                Some(_) => wrong.push(format!("{}: `{top}` imports `{m}`", rel.display())),
                None => {}
            }
        }
    });
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_grouped_and_nested_paths() {
    let found = imports("use crate::{store::Store, tui::app};\nlet x = crate::cmd::run();\n// crate::ops is a comment");
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["cmd", "store", "tui"]);
}
