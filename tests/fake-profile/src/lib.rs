//! The profile files of the fake GPU libraries (tests/fake-nvml,
//! tests/fake-amdsmi, tests/fake-hip): one TOML format, read here.
//!
//! A profile may be layered on another (`base = "h100-sxm5.toml"`, relative
//! to the file, at most 5 deep). A layer's top-level keys replace the
//! base's; its `[gpu]` keys change the base's template (every GPU); its
//! `[[override]]`s and `[[fault]]`s add to the base's. GPU `i` is the
//! `[gpu]` template with the keys of each `[[override]]` whose `index` is
//! `i`. Each fake gives its own types (serde) and its own checks.
//!
//! Errors are one line that starts with the file, for the fake to print
//! where its caller sees it (the agent's log, a Python check).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A profile read with its layers, its GPU template and overrides set
/// apart: [`Layers::profile`] reads the top level, [`Layers::gpus`] each GPU.
pub struct Layers {
    path: PathBuf,
    top: Option<toml::Table>,
    template: toml::Table,
    overrides: Vec<toml::Value>,
}

impl Layers {
    /// Reads `path` and the bases it is layered on.
    pub fn read(path: &Path) -> Result<Layers, String> {
        let here = |e: &str| format!("{}: {e}", path.display());
        let mut v = load_value(path, 0)?;
        let template = match v.remove("gpu") {
            Some(toml::Value::Table(t)) => t,
            _ => return Err(here("no [gpu] table")),
        };
        let overrides = match v.remove("override") {
            Some(toml::Value::Array(a)) => a,
            None => Vec::new(),
            Some(_) => return Err(here("override must be [[override]] tables")),
        };
        Ok(Layers {
            path: path.to_path_buf(),
            top: Some(v),
            template,
            overrides,
        })
    }

    /// `e`, said of this profile's file.
    pub fn here(&self, e: impl std::fmt::Display) -> String {
        format!("{}: {e}", self.path.display())
    }

    /// The top-level keys (all but `[gpu]` and `[[override]]`) as `P`;
    /// once: a second call finds nothing left.
    pub fn profile<P: DeserializeOwned>(&mut self) -> Result<P, String> {
        let top = self.top.take().ok_or_else(|| self.here("profile read twice"))?;
        top.try_into().map_err(|e: toml::de::Error| self.here(e))
    }

    /// GPUs `0..count`, each its template with its overrides, as `G`.
    pub fn gpus<G: DeserializeOwned>(&self, count: u32) -> Result<Vec<G>, String> {
        (0..count).map(|i| self.gpu(i)).collect()
    }

    fn gpu<G: DeserializeOwned>(&self, i: u32) -> Result<G, String> {
        let mut t = self.template.clone();
        for o in self.overrides.iter().filter_map(|o| o.as_table()) {
            if o.get("index").and_then(|x| x.as_integer()) == Some(i64::from(i)) {
                t.extend(
                    o.iter()
                        .filter(|(k, _)| *k != "index")
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
        }
        toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| self.here(format!("GPU {i}: {e}")))
    }
}

/// The file at `path` merged onto its bases, `base` taken out.
fn load_value(path: &Path, depth: u32) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut t: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(base) = t.remove("base") else {
        return Ok(t);
    };
    let base = base.as_str().ok_or("base must be a file name")?.to_string();
    if depth > 4 {
        return Err(format!("{}: base nested too deep", path.display()));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut b = load_value(&dir.join(base), depth + 1)?;
    for (k, v) in t {
        match (k.as_str(), b.get_mut(&k), v) {
            // Faults and per-GPU overrides add to the base's.
            ("fault" | "override", Some(toml::Value::Array(old)), toml::Value::Array(new)) => old.extend(new),
            // The GPU template: the layer's keys replace the base's, the others stay.
            ("gpu", Some(toml::Value::Table(old)), toml::Value::Table(new)) => old.extend(new),
            (_, _, v) => {
                b.insert(k, v);
            }
        }
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Top {
        name: String,
        count: u32,
        #[serde(default)]
        fault: Vec<toml::Value>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Gpu {
        model: String,
        watts: u32,
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fake-profile-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn a_layer_changes_the_template_and_adds_overrides_and_faults() {
        let d = tmp("layers");
        write(
            &d,
            "base.toml",
            "name = \"b\"\ncount = 3\n[gpu]\nmodel = \"X\"\nwatts = 700\n\
             [[override]]\nindex = 1\nwatts = 600\n[[fault]]\ngpu = 0\n",
        );
        let top = write(
            &d,
            "top.toml",
            "base = \"base.toml\"\nname = \"t\"\n[gpu]\nwatts = 500\n\
             [[override]]\nindex = 2\nmodel = \"Y\"\n[[fault]]\ngpu = 1\n",
        );
        let mut l = Layers::read(&top).expect("reads");
        let p: Top = l.profile().expect("top");
        assert_eq!((p.name.as_str(), p.count, p.fault.len()), ("t", 3, 2));
        let g: Vec<Gpu> = l.gpus(p.count).expect("gpus");
        let w: Vec<(&str, u32)> = g.iter().map(|g| (g.model.as_str(), g.watts)).collect();
        assert_eq!(w, [("X", 500), ("X", 600), ("Y", 500)]);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn errors_name_the_file_and_the_gpu() {
        let d = tmp("errors");
        let none = write(&d, "none.toml", "name = \"n\"\ncount = 1\n");
        assert!(
            Layers::read(&none)
                .err()
                .is_some_and(|e| e.ends_with("none.toml: no [gpu] table"))
        );
        let bad = write(
            &d,
            "bad.toml",
            "name = \"n\"\ncount = 2\n[gpu]\nmodel = \"X\"\nwatts = 1\n[[override]]\nindex = 1\nwatts = \"many\"\n",
        );
        let mut l = Layers::read(&bad).expect("reads");
        let p: Top = l.profile().expect("top");
        let e = l.gpus::<Gpu>(p.count).expect_err("GPU 1 is bad");
        assert!(e.contains("bad.toml: GPU 1: "), "{e}");
        let deep = write(&d, "loop.toml", "base = \"loop.toml\"\n");
        assert!(
            Layers::read(&deep)
                .err()
                .is_some_and(|e| e.ends_with("base nested too deep"))
        );
        let _ = std::fs::remove_dir_all(d);
    }
}
