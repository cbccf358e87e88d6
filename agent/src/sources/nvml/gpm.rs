//! GPM (GPU Performance Monitoring, Hopper and later): SM activity and
//! occupancy, tensor activity and DRAM bandwidth, each over the interval
//! between two GPM samples, of the GPU and of each of its MIG instances.

use nvml_wrapper::GpmSample;
use nvml_wrapper::enums::gpm::GpmMetricId;

use crate::proto::Gpm;

use super::reader::GpuReader;

impl GpuReader {
    /// GPM metrics of MIG instance `k` (GPU instance `gi`) since the previous
    /// sample: asked of the parent GPU by GPU instance id. `None` without
    /// GPM, on the first sample, or where the instance id is unknown (0).
    pub(super) fn mig_gpm(&mut self, k: usize, gi: u32) -> Option<Gpm> {
        if !self.gpm_supported || gi == 0 {
            return None;
        }
        let d = self.gpu.dev.as_ref().ok()?;
        let cur = self.call("nvmlGpmMigSampleGet", || d.gpm_mig_sample(gi));
        let slot = self.mig_gpm_prev.get_mut(k)?;
        let Ok(cur) = cur else {
            *slot = None;
            return None;
        };
        let prev = slot.replace(cur)?;
        let cur = self.mig_gpm_prev.get(k)?.as_ref()?;
        self.gpm_between(&prev, cur)
    }

    /// GPM metrics since the previous sample, `None` without GPM or on the
    /// first sample.
    pub(super) fn gpm(&mut self) -> Option<Gpm> {
        if !self.gpm_supported {
            return None;
        }
        let d = self.gpu.dev.as_ref().ok()?;
        let cur = match self.call("nvmlGpmSampleGet", || d.gpm_sample()) {
            Ok(s) => s,
            Err(_) => {
                self.gpm_prev = None;
                return None;
            }
        };
        let prev = self.gpm_prev.replace(cur)?;
        let cur = self.gpm_prev.as_ref()?;
        self.gpm_between(&prev, cur)
    }

    /// The four GPM metrics between two GPM samples of one GPU or instance.
    fn gpm_between(&self, prev: &GpmSample<'static>, cur: &GpmSample<'static>) -> Option<Gpm> {
        let ids = [
            GpmMetricId::SmUtil,
            GpmMetricId::SmOccupancy,
            GpmMetricId::AnyTensorUtil,
            GpmMetricId::DramBwUtil,
        ];
        let r = self
            .call("nvmlGpmMetricsGet", || {
                nvml_wrapper::gpm::gpm_metrics_get(self.nvml, prev, cur, &ids)
            })
            .ok()?;
        // Percent to hundredths of a percent, as the wire carries them.
        let v = |k: usize| {
            let p = r.get(k)?.as_ref().ok()?.value;
            p.is_finite().then(|| (p.clamp(0.0, 100.0) * 100.0).round() as u32)
        };
        Some(Gpm {
            sm_active_cpct: v(0)?,
            sm_occupancy_cpct: v(1)?,
            tensor_active_cpct: v(2)?,
            dram_bw_cpct: v(3)?,
        })
    }
}
