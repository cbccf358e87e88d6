//! Expected minimums and verdicts. The numbers live in a data file
//! (`agent/data/expectations.toml`, embedded) with their sources; an
//! operator's file can replace any of them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    pub min: f64,
    pub warn: Option<f64>,
    #[serde(default)]
    pub source: String,
}

/// A GPU model's table: its link types and its own metrics. (No
/// deny_unknown_fields: serde cannot combine it with flatten; a key that is
/// not an expectation still fails, as the flattened map's type.)
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct GpuEntry {
    #[serde(default)]
    pcie: Option<String>,
    #[serde(default)]
    nvlink: Option<String>,
    #[serde(flatten)]
    metrics: BTreeMap<String, Expectation>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    #[serde(default)]
    gpu: BTreeMap<String, GpuEntry>,
    #[serde(default)]
    link: BTreeMap<String, BTreeMap<String, Expectation>>,
    #[serde(default)]
    host: BTreeMap<String, Expectation>,
    #[serde(default)]
    net: BTreeMap<String, Expectation>,
}

const SHIPPED: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/expectations.toml"));

/// A verdict is part of the wire contract (an enum there, never a string).
pub use fleetop_proto::pb::Verdict;

impl Expectations {
    /// The shipped expectations, with an operator's file laid over them.
    pub fn load(over: Option<&Path>) -> Result<Self, String> {
        let mut e: Expectations = toml::from_str(SHIPPED).map_err(|e| format!("shipped expectations: {e}"))?;
        if let Some(p) = over {
            // Capped, and regular files only (not /dev/zero, not a FIFO).
            let text = fleetop_proto::input::read_capped(p, fleetop_proto::input::MAX_FILE_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            let o: Expectations = toml::from_str(&text).map_err(|e| format!("{}: {}", p.display(), e.message()))?;
            for (model, entry) in o.gpu {
                let mine = e.gpu.entry(model).or_default();
                mine.pcie = entry.pcie.or(mine.pcie.take());
                mine.nvlink = entry.nvlink.or(mine.nvlink.take());
                mine.metrics.extend(entry.metrics);
            }
            for (link, m) in o.link {
                e.link.entry(link).or_default().extend(m);
            }
            e.host.extend(o.host);
            e.net.extend(o.net);
        }
        Ok(e)
    }

    /// The expectation for a metric on a GPU model (its own table, then the
    /// tables of its PCIe and NVLink types), the host, or the network.
    pub fn find(&self, metric: &str, gpu_model: Option<&str>, ib_link: Option<&str>) -> Option<&Expectation> {
        if let Some(x) = self.host.get(metric).or_else(|| self.net.get(metric)) {
            return Some(x);
        }
        if let Some(link) = ib_link
            && let Some(x) = self.link.get(link).and_then(|m| m.get(metric))
        {
            return Some(x);
        }
        let g = self.gpu.get(gpu_model?)?;
        g.metrics.get(metric).or_else(|| {
            [&g.pcie, &g.nvlink]
                .into_iter()
                .flatten()
                .find_map(|l| self.link.get(l).and_then(|m| m.get(metric)))
        })
    }
}

/// Judges a value against its expectation: below `min` fails, below `warn`
/// warns. Without an expectation the figure is reported but not judged.
pub fn judge(value: f64, unit: &str, exp: Option<&Expectation>) -> (Verdict, String) {
    match exp {
        None => (
            Verdict::Pass,
            "no expected minimum for this hardware; figure reported only".into(),
        ),
        Some(e) if value < e.min => (
            Verdict::Fail,
            format!("{value:.1} {unit} is below the minimum {:.1}", e.min),
        ),
        Some(e) if e.warn.is_some_and(|w| value < w) => (
            Verdict::Warn,
            format!("{value:.1} {unit} is below the expected {:.1}", e.warn.unwrap_or(e.min)),
        ),
        Some(_) => (Verdict::Pass, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_parses_and_links_resolve() {
        let e = Expectations::load(None).expect("shipped");
        let h100 = Some("NVIDIA H100 80GB HBM3");
        assert_eq!(e.find("hbm_d2d", h100, None).map(|x| x.min), Some(1000.0));
        assert_eq!(
            e.find("pcie_h2d", h100, None).map(|x| x.min),
            Some(35.0),
            "through its PCIe type"
        );
        assert_eq!(
            e.find("nvlink_p2p", Some("NVIDIA A100-SXM4-80GB"), None).map(|x| x.min),
            Some(150.0)
        );
        assert_eq!(e.find("ib_write_bw", None, Some("ndr")).map(|x| x.min), Some(300.0));
        assert!(e.find("hbm_d2d", Some("Some Other GPU"), None).is_none());
        // AMD's MI300X: every check HIP runs has a floor from AMD's figures.
        let mi300x = Some("AMD Instinct MI300X");
        for (name, min) in [
            ("hbm_d2d", 1250.0),
            ("pcie_h2d", 35.0),
            ("pcie_d2h", 35.0),
            ("nvlink_p2p", 30.0),
            ("gemm_tflops", 350.0),
        ] {
            let x = e.find(name, mi300x, None).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(x.min, min, "{name}");
            assert!(x.warn.is_some_and(|w| w > min), "{name}");
            assert!(
                x.source.contains("MI300X") && x.source.contains("AMD"),
                "{name}: {}",
                x.source
            );
        }
        assert!(e.find("host_memcpy", None, None).is_some_and(|x| !x.source.is_empty()));
    }

    #[test]
    fn verdicts_on_a_table_of_values() {
        let exp = Expectation {
            min: 100.0,
            warn: Some(120.0),
            source: String::new(),
        };
        let table = [
            (150.0, Verdict::Pass),
            (120.0, Verdict::Pass),
            (119.9, Verdict::Warn),
            (100.0, Verdict::Warn),
            (99.9, Verdict::Fail),
            (0.0, Verdict::Fail),
        ];
        for (v, want) in table {
            assert_eq!(judge(v, "GB/s", Some(&exp)).0, want, "{v}");
        }
        let no_warn = Expectation {
            min: 10.0,
            warn: None,
            source: String::new(),
        };
        assert_eq!(judge(10.0, "GB/s", Some(&no_warn)).0, Verdict::Pass);
        assert_eq!(judge(1.0, "GB/s", None).0, Verdict::Pass);
        assert!(judge(99.0, "GB/s", Some(&exp)).1.contains("below the minimum 100.0"));
    }

    #[test]
    fn an_operators_file_replaces_single_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("mine.toml");
        std::fs::write(
            &p,
            "[host]\nhost_memcpy = { min = 50.0 }\n[gpu.\"NVIDIA H100 80GB HBM3\"]\nhbm_d2d = { min = 1300.0 }\n",
        )
        .expect("write");
        let e = Expectations::load(Some(&p)).expect("loads");
        assert_eq!(e.find("host_memcpy", None, None).map(|x| x.min), Some(50.0));
        let h100 = Some("NVIDIA H100 80GB HBM3");
        assert_eq!(e.find("hbm_d2d", h100, None).map(|x| x.min), Some(1300.0));
        assert_eq!(
            e.find("pcie_h2d", h100, None).map(|x| x.min),
            Some(35.0),
            "the rest stays"
        );
        std::fs::write(&p, "[host]\nhost_memcpy = { mni = 1 }\n").expect("write");
        assert!(Expectations::load(Some(&p)).expect_err("bad key").contains("mine.toml"));
    }
}
