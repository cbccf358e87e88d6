//! InfiniBand ports from sysfs (`/sys/class/infiniband/<dev>/ports/<n>/`).
//!
//! Any single file may be missing, unreadable, or read "N/A (no PMA)": that
//! reading is skipped, the sample goes on.

use std::fs;
use std::path::{Path, PathBuf};

use crate::proto::{IbPortInfo, IbSample, NodeInfo, Sample};
use crate::sources::Sampler;
pub use fleetop_proto::ib::{DATA_WIDTH, ERROR_COUNTERS, counter_name};

/// The default sysfs root.
pub const DEFAULT_ROOT: &str = "/sys/class/infiniband";

/// One port found under the sysfs root.
#[derive(Debug, Clone)]
struct Port {
    device: String,
    port: u32,
    dir: PathBuf,
}

pub struct IbSampler {
    root: PathBuf,
    ports: Vec<Port>,
}

impl IbSampler {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        IbSampler {
            root: root.into(),
            ports: Vec::new(),
        }
    }

    fn discover(root: &Path) -> Vec<Port> {
        let mut ports = Vec::new();
        let Ok(devs) = fs::read_dir(root) else {
            return ports;
        };
        let mut devs: Vec<_> = devs.flatten().map(|e| e.path()).collect();
        devs.sort();
        for dev in devs {
            let device = dev
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Ok(entries) = fs::read_dir(dev.join("ports")) else {
                continue;
            };
            let mut found: Vec<Port> = entries
                .flatten()
                .filter_map(|e| {
                    let port = e.file_name().to_string_lossy().parse().ok()?;
                    Some(Port {
                        device: device.clone(),
                        port,
                        dir: e.path(),
                    })
                })
                .collect();
            found.sort_by_key(|p| p.port);
            ports.extend(found);
        }
        ports
    }
}

/// Reads a sysfs file as trimmed text; `None` if missing, unreadable or "N/A".
fn read_text(path: &Path) -> Option<String> {
    let s = fs::read_to_string(path).ok()?;
    let s = s.trim();
    if s.is_empty() || s.starts_with("N/A") {
        None
    } else {
        Some(s.to_string())
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    read_text(path)?.parse().ok()
}

/// "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp".
pub fn parse_state(s: &str) -> String {
    s.split_once(':').map(|(_, w)| w.trim()).unwrap_or(s.trim()).to_string()
}

/// "400 Gb/sec (4X NDR)" -> 400; "2.5 Gb/sec (1X SDR)" -> 2 (whole Gb/s).
pub fn parse_rate_gbps(s: &str) -> Option<u32> {
    let num = s.split_whitespace().next()?;
    num.parse::<f64>().ok().map(|v| v as u32)
}

impl Sampler for IbSampler {
    fn describe(&mut self, info: &mut NodeInfo) {
        self.ports = Self::discover(&self.root);
        for p in &self.ports {
            info.ib_ports.push(IbPortInfo {
                device: p.device.clone(),
                port: p.port,
                link_layer: read_text(&p.dir.join("link_layer")).unwrap_or_default(),
            });
        }
    }

    fn sample(&mut self, _now_ms: i64, out: &mut Sample) {
        // Ports of other samplers (a simulated node) come first.
        let base = out.ib_ports.len() as u32;
        for (i, p) in self.ports.iter().enumerate() {
            let c = p.dir.join("counters");
            let mut s = IbSample {
                port: base + i as u32,
                state: read_text(&p.dir.join("state"))
                    .map(|s| parse_state(&s))
                    .unwrap_or_default(),
                phys_state: read_text(&p.dir.join("phys_state"))
                    .map(|s| parse_state(&s))
                    .unwrap_or_default(),
                rate_gbps: read_text(&p.dir.join("rate"))
                    .and_then(|s| parse_rate_gbps(&s))
                    .unwrap_or(0),
                // The data counters count 4-octet words.
                tx_bytes: read_u64(&c.join("port_xmit_data")).unwrap_or(0) * 4,
                rx_bytes: read_u64(&c.join("port_rcv_data")).unwrap_or(0) * 4,
                tx_packets: read_u64(&c.join("port_xmit_packets")).unwrap_or(0),
                rx_packets: read_u64(&c.join("port_rcv_packets")).unwrap_or(0),
                ..Default::default()
            };
            for (bit, (name, _)) in ERROR_COUNTERS.iter().enumerate() {
                let path = if name.starts_with("hw_counters/") {
                    p.dir.join(name)
                } else {
                    c.join(name)
                };
                match read_u64(&path) {
                    Some(v) => {
                        s.errors.push(v);
                        s.errors_present_mask |= 1 << bit;
                    }
                    None => s.errors.push(0),
                }
            }
            out.ib_ports.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    #[test]
    fn parses_state_and_rate() {
        assert_eq!(parse_state("4: ACTIVE\n"), "ACTIVE");
        assert_eq!(parse_state("1: DOWN"), "DOWN");
        assert_eq!(parse_state("weird"), "weird");
        assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)"), Some(400));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2));
        assert_eq!(parse_rate_gbps("garbage"), None);
    }

    #[test]
    fn reads_a_tree_with_missing_and_na_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        write(r, "mlx5_0/ports/1/state", "4: ACTIVE\n");
        write(r, "mlx5_0/ports/1/phys_state", "5: LinkUp\n");
        write(r, "mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n");
        write(r, "mlx5_0/ports/1/link_layer", "InfiniBand\n");
        write(r, "mlx5_0/ports/1/counters/port_xmit_data", "1000\n");
        write(r, "mlx5_0/ports/1/counters/port_rcv_data", "N/A (no PMA)\n");
        write(r, "mlx5_0/ports/1/counters/symbol_error", "3\n");
        write(r, "mlx5_0/ports/1/hw_counters/out_of_sequence", "9\n");
        // A second device with nothing readable but its state.
        write(r, "mlx5_1/ports/1/state", "1: DOWN\n");
        // Junk that is not a port.
        write(r, "mlx5_1/ports/notaport/state", "4: ACTIVE\n");

        let mut ib = IbSampler::new(r);
        let mut info = NodeInfo::default();
        ib.describe(&mut info);
        assert_eq!(info.ib_ports.len(), 2);
        assert_eq!(info.ib_ports[0].device, "mlx5_0");
        assert_eq!(info.ib_ports[0].link_layer, "InfiniBand");

        let mut s = Sample::default();
        ib.sample(0, &mut s);
        let p0 = &s.ib_ports[0];
        assert_eq!(p0.state, "ACTIVE");
        assert_eq!(p0.phys_state, "LinkUp");
        assert_eq!(p0.rate_gbps, 400);
        assert_eq!(p0.tx_bytes, 4000, "port_xmit_data counts 4-octet words");
        assert_eq!(p0.rx_bytes, 0, "N/A is skipped");
        let sym = ERROR_COUNTERS
            .iter()
            .position(|(n, _)| *n == "symbol_error")
            .expect("idx");
        let ooo = ERROR_COUNTERS
            .iter()
            .position(|(n, _)| *n == "hw_counters/out_of_sequence")
            .expect("idx");
        assert_eq!(p0.errors[sym], 3);
        assert_eq!(p0.errors[ooo], 9);
        assert_eq!(p0.errors_present_mask, (1 << sym) | (1 << ooo));
        assert_eq!(counter_name(ooo), "out_of_sequence");

        let p1 = &s.ib_ports[1];
        assert_eq!(p1.state, "DOWN");
        assert_eq!(p1.errors_present_mask, 0);
    }

    #[test]
    fn missing_root_gives_no_ports() {
        let mut ib = IbSampler::new("/nonexistent/fleetop/ib");
        let mut info = NodeInfo::default();
        ib.describe(&mut info);
        assert!(info.ib_ports.is_empty());
        let mut s = Sample::default();
        ib.sample(0, &mut s);
        assert!(s.ib_ports.is_empty());
    }
}
