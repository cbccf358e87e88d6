//! Reading one AMD GPU's (or partition's) sample, on its worker thread:
//! the AMD SMI calls in order, each named first for a stuck GPU's report.
//! A call that fails leaves its reading absent (its `absent` bit, or the
//! field's "not read"), never 0; a GPU that does not answer at all is
//! "gpu_lost", as NVML's lost GPU is.

use std::path::PathBuf;
use std::sync::Arc;

use fleetop_amdsmi_abi as abi;
use fleetop_proto::absent as a;

use crate::proto::{GpuProcess, GpuSample, RasCount};
use crate::sources::{jobs, procinfo};

use super::Gpu;
use super::info::known32;
use super::library::{Amd, Status};
use super::throttle::throttle;
use crate::sources::worker::Doing;

/// One GPU's reader, owned by its worker thread.
pub(crate) struct GpuReader {
    pub(crate) amd: &'static Amd,
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) proc_root: PathBuf,
    pub(crate) doing: Doing,
}

/// What one sample's calls said beyond their readings.
#[derive(Default)]
struct Seen {
    absent: u32,
    /// The probe (activity, or VRAM use where activity is not supported)
    /// answered that the GPU does not answer at all. Only the probe
    /// decides: a later call's NOT_FOUND may well mean "no such thing
    /// here" (no XGMI on a PCIe card) and costs that reading alone.
    lost: Option<Status>,
}

impl Seen {
    /// The reading, or its absent bit set.
    fn got<T>(&mut self, r: Result<T, Status>, bit: u32) -> Option<T> {
        r.map_err(|_| self.absent |= bit).ok()
    }

    /// As `got`, for a probe: a status that says the GPU does not answer
    /// marks it lost.
    fn probe<T>(&mut self, r: Result<T, Status>, bit: u32) -> Option<T> {
        if let Err(e) = &r
            && e.is_lost()
        {
            self.lost.get_or_insert(*e);
        }
        self.got(r, bit)
    }
}

/// A percentage, where AMD SMI gave one (0xFFFF and above 100: none).
fn pct(v: u32) -> Option<u32> {
    (v <= 100).then_some(v)
}

/// GFX busy now per XCC of compute partition `partition` (MI300's
/// metrics table, `xcp_stats[partition].gfx_busy_inst`), by XCC index, up
/// to the first XCC the table does not report (all-ones). None where the
/// table has no such partition.
fn xcc_busy(m: &abi::amdsmi_gpu_metrics_t, partition: u32) -> Vec<u32> {
    let parts = m.num_partition;
    if parts != u16::MAX && partition >= u32::from(parts) {
        return Vec::new();
    }
    let Some(x) = m.xcp_stats.get(partition as usize) else {
        return Vec::new();
    };
    x.gfx_busy_inst
        .iter()
        .copied()
        .take_while(|&v| v != u32::MAX && v != u32::from(u16::MAX))
        .collect()
}

/// The PCIe generation a link speed (MT/s) is.
fn pcie_gen(mts: u32) -> Option<u32> {
    Some(match mts {
        2500 => 1,
        5000 => 2,
        8000 => 3,
        16000 => 4,
        32000 => 5,
        64000 => 6,
        _ => return None,
    })
}

impl GpuReader {
    /// Notes the call about to be made (for a stuck GPU's report), then makes it.
    fn call<T>(&self, name: &'static str, f: impl FnOnce() -> T) -> T {
        if let Ok(mut d) = self.doing.lock() {
            *d = name;
        }
        f()
    }

    /// This GPU's sample.
    pub(crate) fn sample(&mut self) -> GpuSample {
        let (amd, g) = (self.amd, &*self.gpu);
        let h = g.handle;
        let mut s = GpuSample {
            index: g.index,
            ..Default::default()
        };
        let mut seen = Seen::default();
        // Activity first: a GPU that does not answer it is asked nothing
        // more (each call would take the library's timeout).
        let activity = self.call("amdsmi_get_gpu_activity", || amd.activity(h));
        let answered = activity.is_ok();
        if let Some(u) = seen.probe(activity, 0) {
            match pct(u.gfx_activity) {
                Some(p) => s.util_pct = p,
                None => seen.absent |= a::UTIL,
            }
            match pct(u.umc_activity) {
                Some(p) => s.mem_util_pct = p,
                None => seen.absent |= a::MEM_UTIL,
            }
        } else {
            seen.absent |= a::UTIL | a::MEM_UTIL;
        }
        if seen.lost.is_none() {
            self.readings(&mut s, &mut seen, answered);
        }
        if let Some(status) = seen.lost {
            // Readings from a GPU that does not answer are none at all.
            if !g.lost.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!("GPU {}: AMD SMI answers {status}: the GPU is lost", g.index);
            }
            return GpuSample {
                index: g.index,
                error: "gpu_lost".into(),
                ..Default::default()
            };
        }
        g.lost.store(false, std::sync::atomic::Ordering::Relaxed);
        s.absent = seen.absent;
        s
    }

    /// The rest of the sample; `probed`: activity answered, else VRAM use
    /// is the probe.
    fn readings(&self, s: &mut GpuSample, seen: &mut Seen, probed: bool) {
        use abi::{AMDSMI_TEMP_CURRENT as NOW, AMDSMI_TEMPERATURE_TYPE_HOTSPOT as HOTSPOT};
        let (amd, g) = (self.amd, &*self.gpu);
        let h = g.handle;
        let deg = |t: i64| u32::try_from(t).ok();
        let used = self.call("amdsmi_get_gpu_memory_usage", || amd.vram_used(h));
        let used = match probed {
            true => seen.got(used, a::MEM_USED),
            false => seen.probe(used, a::MEM_USED),
        };
        if seen.lost.is_some() {
            return;
        }
        if let Some(b) = used {
            s.mem_used_bytes = b;
        }
        let temp = |sensor| self.call("amdsmi_get_temp_metric", || amd.temperature(h, sensor, NOW));
        match seen.got(temp(HOTSPOT), a::TEMP).map(deg) {
            Some(Some(t)) => s.temp_c = t,
            Some(None) => seen.absent |= a::TEMP,
            None => {}
        }
        // AMD's VRAM sensor is the hottest HBM stack.
        match seen.got(temp(abi::AMDSMI_TEMPERATURE_TYPE_VRAM), a::HBM_TEMP).map(deg) {
            Some(Some(t)) => s.hbm_temp_c = t,
            Some(None) => seen.absent |= a::HBM_TEMP,
            None => {}
        }
        if g.edge {
            s.edge_temp_c = seen.got(temp(abi::AMDSMI_TEMPERATURE_TYPE_EDGE), 0).and_then(deg);
        }
        if let Some(p) = seen.got(self.call("amdsmi_get_power_info", || amd.power_info(h)), a::POWER) {
            // W: the current socket power on MI300, the average on older parts.
            let w = [p.current_socket_power, p.average_socket_power]
                .into_iter()
                .find(|&w| w != u32::MAX && w != u32::from(u16::MAX));
            match w {
                Some(w) => s.power_mw = w.saturating_mul(1000),
                None => seen.absent |= a::POWER,
            }
        }
        if let Some(c) = seen.got(
            self.call("amdsmi_get_power_cap_info", || amd.power_cap(h)),
            a::POWER_LIMIT,
        ) {
            // µW.
            s.power_limit_mw = u32::try_from(c.power_cap / 1000).unwrap_or(u32::MAX);
        }
        if let Some((acc, res)) = seen.got(self.call("amdsmi_get_energy_count", || amd.energy(h)), a::ENERGY) {
            // Counts of `res` µJ; mJ on the wire.
            s.energy_mj = (acc as f64 * f64::from(res) / 1000.0) as u64;
        }
        let clock = |c| self.call("amdsmi_get_clock_info", || amd.clock(h, c));
        match seen
            .got(clock(abi::AMDSMI_CLK_TYPE_GFX), a::SM_CLOCK)
            .map(|c| known32(c.clk))
        {
            Some(Some(mhz)) => s.sm_clock_mhz = mhz,
            Some(None) => seen.absent |= a::SM_CLOCK,
            None => {}
        }
        match seen
            .got(clock(abi::AMDSMI_CLK_TYPE_MEM), a::MEM_CLOCK)
            .map(|c| known32(c.clk))
        {
            Some(Some(mhz)) => s.mem_clock_mhz = mhz,
            Some(None) => seen.absent |= a::MEM_CLOCK,
            None => {}
        }
        let metrics = seen.got(self.call("amdsmi_get_gpu_metrics_info", || amd.gpu_metrics(h)), 0);
        if let Some(m) = &metrics {
            s.xcc_gfx_busy_pct = xcc_busy(m, g.partition);
        }
        let violation = seen.got(self.call("amdsmi_get_violation_status", || amd.violation_status(h)), 0);
        match throttle(violation.as_deref(), metrics.as_ref().map(|m| m.indep_throttle_status)) {
            Some(t) => {
                s.throttle_reasons = t.reasons;
                s.throttle_detail = t.words;
            }
            None => seen.absent |= a::THROTTLE,
        }
        // AMD gives one bidirectional PCIe figure (pcie_bandwidth), not
        // NVIDIA's two directions; and retires pages, not rows.
        seen.absent |= a::PCIE_THROUGHPUT | a::REMAPPED_ROWS;
        if let Some(p) = seen.got(self.call("amdsmi_get_pcie_info", || amd.pcie_info(h)), a::PCIE_REPLAY) {
            // The generation from the speed trained now; the static
            // interface version where the speed says nothing.
            s.pcie_gen = pcie_gen(p.pcie_metric.pcie_speed)
                .or(known32(p.pcie_static.pcie_interface_version))
                .unwrap_or(0);
            s.pcie_width = Some(p.pcie_metric.pcie_width)
                .filter(|&w| w != u16::MAX)
                .map_or(0, u32::from);
            match p.pcie_metric.pcie_replay_count {
                u64::MAX => seen.absent |= a::PCIE_REPLAY,
                n => s.pcie_replay_count = n,
            }
        }
        self.ras(s, seen);
        self.xgmi(s, seen, metrics.as_deref());
        let procs = self.call("amdsmi_get_gpu_process_list", || amd.processes(h));
        if let Some(list) = seen.got(procs, a::PROCESSES) {
            s.processes = list.iter().map(|p| self.process(p)).collect();
        }
    }

    /// ECC per RAS block, their sums, and the retired pages.
    fn ras(&self, s: &mut GpuSample, seen: &mut Seen) {
        let (amd, h) = (self.amd, self.gpu.handle);
        let enabled = seen
            .got(self.call("amdsmi_get_gpu_ecc_enabled", || amd.ecc_enabled(h)), a::ECC)
            .unwrap_or(0);
        for (bit, name) in abi::GPU_BLOCKS.iter().filter(|(b, _)| enabled & b != 0) {
            // A block that does not answer is left out; the others stand.
            if let Some(c) = seen.got(self.call("amdsmi_get_gpu_ecc_count", || amd.ecc_count(h, *bit)), 0) {
                s.ras.push(RasCount {
                    block: (*name).to_string(),
                    correctable: c.correctable_count,
                    uncorrectable: c.uncorrectable_count,
                    deferred: c.deferred_count,
                });
            }
        }
        // AMD's own sum over the blocks with ECC on; the sum of those read
        // where it does not answer; no ECC on anywhere is no reading.
        let total = (enabled != 0)
            .then(|| seen.got(self.call("amdsmi_get_gpu_total_ecc_count", || amd.ecc_total(h)), 0))
            .flatten();
        match total {
            Some(t) => {
                (s.ecc_corrected_volatile, s.ecc_uncorrected_volatile) = (t.correctable_count, t.uncorrectable_count)
            }
            None if !s.ras.is_empty() => {
                s.ecc_corrected_volatile = s.ras.iter().map(|r| r.correctable).sum();
                s.ecc_uncorrected_volatile = s.ras.iter().map(|r| r.uncorrectable).sum();
            }
            None => seen.absent |= a::ECC,
        }
        if let Some(pages) = seen.got(self.call("amdsmi_get_gpu_bad_page_info", || amd.bad_pages(h)), 0) {
            s.retired_pages = u32::try_from(pages.len()).unwrap_or(u32::MAX);
            s.retired_pages_pending = pages
                .iter()
                .filter(|p| p.status == abi::AMDSMI_MEM_PAGE_STATUS_PENDING)
                .count() as u32;
        }
    }

    /// The XGMI links in the NVLink fields: state from the link status
    /// (the metrics table's where that call fails), data counters (KB) from
    /// the metrics table's accumulators, and the error status.
    fn xgmi(&self, s: &mut GpuSample, seen: &mut Seen, metrics: Option<&abi::amdsmi_gpu_metrics_t>) {
        let (amd, g) = (self.amd, &*self.gpu);
        if g.links.is_empty() {
            return;
        }
        let status = seen.got(
            self.call("amdsmi_get_gpu_xgmi_link_status", || amd.xgmi_link_status(g.handle)),
            0,
        );
        let up = |k: usize| -> Option<bool> {
            match &status {
                Some(st) if k < (st.total_links as usize).min(st.status.len()) => {
                    Some(st.status[k] == abi::AMDSMI_XGMI_LINK_UP)
                }
                _ => match *metrics?.xgmi_link_status.get(k)? {
                    u16::MAX => None,
                    v => Some(v == 1),
                },
            }
        };
        let states: Option<Vec<bool>> = g.links.iter().map(|&k| up(k as usize)).collect();
        match states {
            Some(states) => {
                for (i, &on) in states.iter().enumerate() {
                    // NVML's words: 1 active, 0 inactive.
                    s.nvlink_state.push(u32::from(on));
                    if !on && i < 32 {
                        s.nvlink_down_mask |= 1 << i;
                    }
                }
                // Every link up, the usual case, travels as no states at all.
                if states.iter().all(|&on| on) {
                    s.nvlink_state.clear();
                }
            }
            None => seen.absent |= a::LINKS,
        }
        if let Some(m) = metrics {
            let acc = |v: &[u64], k: u32| v.get(k as usize).copied().filter(|&x| x != u64::MAX).unwrap_or(0);
            // Written to the peer is sent (tx), read from it received (rx).
            s.nvlink_tx_kib = g.links.iter().map(|&k| acc(&m.xgmi_write_data_acc, k)).collect();
            s.nvlink_rx_kib = g.links.iter().map(|&k| acc(&m.xgmi_read_data_acc, k)).collect();
        }
        s.xgmi_error_status = seen.got(
            self.call("amdsmi_gpu_xgmi_error_status", || amd.xgmi_error_status(g.handle)),
            0,
        );
    }

    /// A process on the GPU, with its VRAM, Slurm job, owner and command.
    fn process(&self, p: &abi::amdsmi_proc_info_t) -> GpuProcess {
        let owner = procinfo::owner_of_pid(&self.proc_root, p.pid);
        GpuProcess {
            pid: p.pid,
            used_mem_bytes: p.memory_usage.vram_mem,
            job_id: jobs::job_id_of_pid(&self.proc_root, p.pid).unwrap_or(0),
            user: owner.user,
            command: owner.command,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_and_link_speeds_outside_amds_range_are_no_reading() {
        assert_eq!(pct(92), Some(92));
        assert_eq!(pct(0xFFFF), None);
        assert_eq!(pct(u32::MAX), None);
        assert_eq!(pcie_gen(32000), Some(5));
        assert_eq!(pcie_gen(u32::MAX), None);
    }

    #[test]
    fn per_xcc_busy_is_the_partitions_own_up_to_the_first_xcc_not_reported() {
        let mut m = Box::new(abi::amdsmi_gpu_metrics_t::zeroed());
        for x in &mut m.xcp_stats {
            x.gfx_busy_inst = [u32::MAX; abi::AMDSMI_MAX_NUM_XCC];
        }
        m.num_partition = 2;
        m.xcp_stats[0].gfx_busy_inst[..4].copy_from_slice(&[90, 91, 92, 93]);
        m.xcp_stats[1].gfx_busy_inst[..2].copy_from_slice(&[10, 11]);
        assert_eq!(xcc_busy(&m, 0), [90, 91, 92, 93]);
        assert_eq!(xcc_busy(&m, 1), [10, 11]);
        // No third partition; a table that does not count them.
        assert!(xcc_busy(&m, 2).is_empty());
        m.num_partition = u16::MAX;
        assert_eq!(xcc_busy(&m, 1), [10, 11]);
        assert!(xcc_busy(&m, 8).is_empty());
    }
}
