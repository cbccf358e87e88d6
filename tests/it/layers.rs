//! The console's and the agent's layers point one way (see `src/lib.rs`
//! and `agent/src/lib.rs`): a module may import only modules of lower
//! layers or its own. This reads every `crate::` and `super::` path and
//! fails on an import against that order, and on any circle of imports
//! between the files of one folder, so a knot cannot come back unnoticed.

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
    ("ingest", 3),
    ("store", 3),
    ("ops", 4),
    // Recordings: the player feeds a store; the session tees into a recorder.
    ("record", 4),
    ("session", 5),
    ("export", 5),
    // The command line, and its resolving into what the layers below take.
    ("cli", 5),
    ("cmd", 6),
    // The fuzz targets' entry points drive every front end, like main does.
    ("fuzz", 7),
    ("tui", 6),
];

/// The agent's top-level modules and their layers, as `LAYERS` is the
/// console's: where readings come from and what is kept below, the
/// simulation (a source), the collector that runs the sources, the
/// backend that builds it, and serving on top.
const AGENT_LAYERS: &[(&str, u32)] = &[
    ("config", 0),
    ("manual", 0),
    ("keep", 0),
    ("sources", 0),
    ("sim", 1),
    ("collector", 2),
    ("bench", 2),
    ("backend", 3),
    ("serve", 4),
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

/// Imports against `layers` among the top-level modules under `src`.
fn against_layers(src: &Path, layers: &[(&str, u32)]) -> Vec<String> {
    let layer: BTreeMap<&str, u32> = layers.iter().copied().collect();
    let mut wrong = Vec::new();
    visit(src, &mut |p| {
        let rel = p.strip_prefix(src).expect("under src");
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
        for m in imports(without_tests(&text)) {
            match layer.get(m.as_str()) {
                Some(_) if m == top => {}
                Some(&theirs) if theirs < mine => {}
                Some(_) => wrong.push(format!("{}: `{top}` imports `{m}`", rel.display())),
                None => {}
            }
        }
    });
    wrong
}

/// A file's text before its unit tests, which may use any module.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests").map_or(text, |i| &text[..i])
}

#[test]
fn console_modules_import_only_lower_layers() {
    let wrong = against_layers(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LAYERS);
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

/// The only modules that may know the command line's shape: the front
/// ends, which resolve it (`cli::resolve`) into plain values for the rest.
const CLI_USERS: &[&str] = &["cli", "cmd", "tui", "lib", "main", "fuzz"];

/// Files under `src` outside `CLI_USERS` that import `cli`.
fn cli_importers(src: &Path) -> Vec<String> {
    let mut wrong = Vec::new();
    visit(src, &mut |p| {
        let rel = p.strip_prefix(src).expect("under src");
        let top = rel
            .iter()
            .next()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .trim_end_matches(".rs");
        if CLI_USERS.contains(&top) {
            return;
        }
        let text = std::fs::read_to_string(p).expect("readable");
        // Unit tests too: a test that builds clap structs tests the front end.
        if imports(&text).contains("cli") {
            wrong.push(format!("{}: `{top}` imports `cli`", rel.display()));
        }
    });
    wrong
}

#[test]
fn only_the_front_ends_import_the_command_line() {
    let wrong = cli_importers(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        wrong.is_empty(),
        "below cmd and tui, take the values of `cli::resolve`, not clap's structs:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_cli_rule_sees_an_import_below_the_front_ends() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("ingest")).expect("dir");
    std::fs::create_dir(dir.path().join("cmd")).expect("dir");
    std::fs::write(dir.path().join("ingest/targets.rs"), "use crate::cli::SourceArgs;\n").expect("write");
    std::fs::write(dir.path().join("session.rs"), "fn f(a: &crate::cli::KubeArgs) {}\n").expect("write");
    std::fs::write(dir.path().join("cmd/node.rs"), "use crate::cli::{resolve, NodeCmd};\n").expect("write");
    std::fs::write(dir.path().join("lib.rs"), "use cli::Cli;\nuse crate::cli::Command;\n").expect("write");
    let mut found = cli_importers(dir.path());
    found.sort();
    assert_eq!(
        found,
        [
            "ingest/targets.rs: `ingest` imports `cli`",
            "session.rs: `session` imports `cli`"
        ]
    );
}

#[test]
fn agent_modules_import_only_lower_layers() {
    let wrong = against_layers(&Path::new(env!("CARGO_MANIFEST_DIR")).join("agent/src"), AGENT_LAYERS);
    assert!(
        wrong.is_empty(),
        "imports against the agent's layers:\n{}",
        wrong.join("\n")
    );
}

/// Every module (one per file: `a/b.rs` is `a::b`, `a/mod.rs` is `a`) and
/// the modules it imports through `crate::` and `super::` paths.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    visit(src, &mut |p| files.push(p.to_path_buf()));
    let name = |p: &Path| {
        let rel = p.strip_prefix(src).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        parts.join("::")
    };
    let modules: BTreeSet<String> = files.iter().map(|p| name(p)).collect();
    // The longest module that `path` (segments from the crate root) is in.
    let resolve = |path: &[&str]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find(|m| modules.contains(m))
    };
    let mut graph = BTreeMap::new();
    for f in &files {
        let me = name(f);
        let is_mod = f.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(f).expect("readable");
        let mut to = BTreeSet::new();
        for line in without_tests(&text)
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("//"))
        {
            for (start, base) in [
                ("crate::", Vec::new()),
                ("super::", {
                    let mut b: Vec<&str> = me.split("::").collect();
                    // `super` of a.rs's items is a's parent; of a/mod.rs's, too.
                    b.pop();
                    if is_mod {
                        // a/mod.rs is `a`: its `super` is a's parent, popped above.
                    }
                    b
                }),
            ] {
                let mut rest = line;
                while let Some(i) = rest.find(start) {
                    if start == "crate::" && i > 0 && rest[..i].ends_with(char::is_alphanumeric) {
                        rest = &rest[i + start.len()..];
                        continue;
                    }
                    rest = &rest[i + start.len()..];
                    let path: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    let mut segs: Vec<&str> = base.clone();
                    segs.extend(path.split("::").filter(|s| !s.is_empty()));
                    // `a::{b, c}`: each item is looked at on its own.
                    let mut targets = vec![segs.clone()];
                    if let Some(group) = rest[path.len()..].strip_prefix('{') {
                        let end = group.find('}').unwrap_or(group.len());
                        for item in group[..end].split(',') {
                            let first: String = item
                                .trim()
                                .chars()
                                .take_while(|c| c.is_alphanumeric() || *c == '_')
                                .collect();
                            let mut s = segs.clone();
                            s.push(Box::leak(first.into_boxed_str()));
                            targets.push(s);
                        }
                    }
                    for t in targets {
                        if let Some(m) = resolve(&t)
                            && m != me
                        {
                            to.insert(m);
                        }
                    }
                }
            }
        }
        graph.insert(me, to);
    }
    graph
}

/// Circles of imports between modules of which neither holds the other (a
/// parent's shared types used by its children are no circle).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let within = |a: &str, b: &str| a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"));
    let edges = |m: &str| -> Vec<String> {
        graph
            .get(m)
            .into_iter()
            .flatten()
            .filter(|t| !within(m, t))
            .cloned()
            .collect()
    };
    let mut found = Vec::new();
    for start in graph.keys() {
        // Paths from `start` back to it, shortest first.
        let mut seen = BTreeSet::new();
        let mut queue = std::collections::VecDeque::from([vec![start.clone()]]);
        while let Some(path) = queue.pop_front() {
            let last = path.last().expect("a path");
            for next in edges(last) {
                if &next == start {
                    let circle = path.join(" -> ") + " -> " + start;
                    // Each circle once, from its smallest module.
                    if path.iter().all(|m| m >= start) {
                        found.push(circle);
                    }
                    queue.clear();
                    break;
                }
                if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next);
                    queue.push_back(p);
                }
            }
        }
    }
    found
}

#[test]
fn no_circle_of_imports_between_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for src in ["src", "agent/src"] {
        for c in circles(&module_graph(&root.join(src))) {
            all.push(format!("{src}: {c}"));
        }
    }
    assert!(all.is_empty(), "circles of imports:\n{}", all.join("\n"));
}

#[test]
fn the_circle_finder_sees_a_circle_through_super_and_crate_paths() {
    let dir = tempfile::tempdir().expect("tmp");
    let nvml = dir.path().join("nvml");
    std::fs::create_dir(&nvml).expect("dir");
    std::fs::write(nvml.join("mod.rs"), "mod fields;\nmod reader;\npub struct Gpu;\n").expect("write");
    std::fs::write(
        nvml.join("fields.rs"),
        "use super::reader::GpuReader;\nuse super::Gpu;\n",
    )
    .expect("write");
    std::fs::write(nvml.join("reader.rs"), "use crate::nvml::{fields, Gpu};\n").expect("write");
    std::fs::write(dir.path().join("lib.rs"), "mod nvml;\n").expect("write");
    let found = circles(&module_graph(dir.path()));
    assert_eq!(found, ["nvml::fields -> nvml::reader -> nvml::fields"]);
}

#[test]
fn the_checker_sees_grouped_and_nested_paths() {
    let found = imports("use crate::{store::Store, tui::app};\nlet x = crate::cmd::run();\n// crate::ops is a comment");
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["cmd", "store", "tui"]);
}

/// Where the console's drawing and its screens may not reach: `ui/`
/// draws from state and never names a key handler (a drawing that could
/// change state is no longer a drawing); a screen's module never names
/// another screen's (what they share is in `screen/mod.rs` or `app`).
fn tui_rules(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let handler = |t: &str| {
        matches!(t, "tui::keys" | "tui::dispatch" | "tui::mouse" | "tui::command")
            || t.starts_with("tui::actions::dialog")
            || (t.starts_with("tui::screen::") && t.ends_with("::keys"))
    };
    let screen_of = |m: &str| {
        m.strip_prefix("tui::screen::")
            .map(|r| r.split("::").next().unwrap_or("").to_string())
    };
    let mut wrong = Vec::new();
    for (m, to) in graph {
        for t in to {
            if m.starts_with("tui::ui") && handler(t) {
                wrong.push(format!("{m} (drawing) imports the key handler {t}"));
            }
            if let (Some(a), Some(b)) = (screen_of(m), screen_of(t))
                && a != b
            {
                wrong.push(format!("{m} imports another screen's {t}"));
            }
        }
    }
    wrong
}

#[test]
fn drawing_names_no_key_handler_and_screens_do_not_import_each_other() {
    let wrong = tui_rules(&module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_tui_rules_see_a_drawing_that_handles_keys_and_a_screen_that_imports_another() {
    let dir = tempfile::tempdir().expect("tmp");
    let tui = dir.path().join("tui");
    for d in ["ui", "screen/alerts", "screen/bench"] {
        std::fs::create_dir_all(tui.join(d)).expect("dir");
    }
    std::fs::write(tui.join("keys.rs"), "").expect("write");
    std::fs::write(tui.join("ui/alerts.rs"), "use crate::tui::keys::on_key;\n").expect("write");
    std::fs::write(tui.join("screen/alerts/mod.rs"), "").expect("write");
    std::fs::write(
        tui.join("screen/bench/mod.rs"),
        "use crate::tui::screen::alerts::AlertsState;\n",
    )
    .expect("write");
    let found = tui_rules(&module_graph(dir.path()));
    assert_eq!(
        found,
        [
            "tui::screen::bench imports another screen's tui::screen::alerts",
            "tui::ui::alerts (drawing) imports the key handler tui::keys"
        ]
    );
}
