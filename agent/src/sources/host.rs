//! The host's CPU, memory, load and uptime, through sysinfo.

use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use crate::proto::{HostSample, NodeInfo, Sample};
use crate::sources::Sampler;

pub struct HostSampler {
    sys: System,
}

impl HostSampler {
    pub fn new() -> Self {
        // CPU usage is a difference between two refreshes: take the first now so
        // the first sample already has a meaningful figure.
        let sys = System::new_with_specifics(
            RefreshKind::nothing()
                .with_cpu(CpuRefreshKind::nothing().with_cpu_usage())
                .with_memory(MemoryRefreshKind::nothing().with_ram()),
        );
        HostSampler { sys }
    }
}

impl Default for HostSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler for HostSampler {
    fn describe(&mut self, info: &mut NodeInfo) {
        if info.hostname.is_empty() {
            info.hostname = System::host_name().unwrap_or_else(|| "localhost".into());
        }
    }

    fn sample(&mut self, _now_ms: i64, out: &mut Sample) {
        self.sys.refresh_cpu_usage();
        self.sys.refresh_memory();
        // No memory total: /proc could not be read (a chroot or a sandbox
        // without it). Nothing of the host was then read, and zeros would
        // read as an idle, empty machine: the host is left out.
        if self.sys.total_memory() == 0 {
            out.host = None;
            return;
        }
        let load = System::load_average();
        out.host = Some(HostSample {
            cpu_permille: (self.sys.global_cpu_usage() * 10.0).round() as u32,
            mem_used_bytes: self.sys.used_memory(),
            mem_total_bytes: self.sys.total_memory(),
            load1_x100: (load.one * 100.0).round() as u32,
            uptime_s: System::uptime(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_this_machines_memory_and_uptime() {
        let mut h = HostSampler::new();
        let mut info = NodeInfo::default();
        h.describe(&mut info);
        assert!(!info.hostname.is_empty());
        let mut s = Sample::default();
        h.sample(0, &mut s);
        let host = s.host.expect("host sample");
        assert!(host.mem_total_bytes > 0);
        assert!(host.mem_used_bytes <= host.mem_total_bytes);
        assert!(host.uptime_s > 0);
        assert!(host.cpu_permille <= 1000);
    }
}
