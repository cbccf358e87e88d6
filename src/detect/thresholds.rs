//! Detector thresholds (`[thresholds]` in the config file), with the
//! defaults an on-call SRE would pick.

use std::time::Duration;

use serde::Deserialize;

/// Detector thresholds (`[thresholds]` in the config file). Every field is
/// optional there; these defaults are what an on-call SRE would pick.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// A held GPU under this utilization...
    pub idle_util_pct: u32,
    /// ...for this long is idle.
    #[serde(deserialize_with = "de_duration")]
    pub idle_window: Duration,
    /// Consecutive samples with a trouble throttle bit before `throttled`
    /// (HwSlowdown flickers during clock changes).
    pub throttle_raise_samples: u32,
    /// Consecutive clean samples before a raised flag clears.
    pub clear_samples: u32,
    /// Software power cap sustained this long raises `power_capped`.
    #[serde(deserialize_with = "de_duration")]
    pub power_cap_window: Duration,
    /// `hot` within this many degrees of the GPU's slowdown temperature.
    pub hot_margin_c: u32,
    /// Slowdown temperature to assume where the GPU does not report one.
    pub hot_fallback_slowdown_c: u32,
    /// How long an XID keeps its flag after the last one.
    #[serde(deserialize_with = "de_duration")]
    pub xid_hold: Duration,
    /// How long rising IB error counters keep their flag after the last rise.
    #[serde(deserialize_with = "de_duration")]
    pub ib_errors_hold: Duration,
    /// Consecutive samples a link must be down before it is flagged.
    pub link_down_samples: u32,
    /// A node is stale after this many sample intervals without a sample.
    pub stale_intervals: u32,
    /// A stale node whose agent cannot be reached this long is unreachable.
    #[serde(deserialize_with = "de_duration")]
    pub unreachable_after: Duration,
    /// `underused`: utilization (NVML's: some kernel ran) at least this...
    pub underused_util_pct: u32,
    /// ...while GPM's SM activity stays under this...
    pub underused_sm_active_pct: f64,
    /// ...for this long.
    #[serde(deserialize_with = "de_duration")]
    pub underused_window: Duration,
    /// How long cleared flags stay visible.
    #[serde(deserialize_with = "de_duration")]
    pub cleared_keep: Duration,
    /// GPUs every node should have, where its agent does not say
    /// (`fleetop-agent --expect-gpus` wins): fewer is `gpu_missing`; no
    /// GPU library loaded at all is `gpu_library`.
    pub expect_gpus: Option<u32>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            idle_util_pct: 5,
            idle_window: Duration::from_secs(300),
            throttle_raise_samples: 3,
            clear_samples: 5,
            power_cap_window: Duration::from_secs(300),
            hot_margin_c: 5,
            hot_fallback_slowdown_c: 87,
            xid_hold: Duration::from_secs(3600),
            ib_errors_hold: Duration::from_secs(300),
            link_down_samples: 2,
            stale_intervals: 3,
            unreachable_after: Duration::from_secs(30),
            cleared_keep: Duration::from_secs(900),
            expect_gpus: None,
            underused_util_pct: 80,
            underused_sm_active_pct: 30.0,
            underused_window: Duration::from_secs(300),
        }
    }
}

impl Thresholds {
    /// The temperature at which a GPU slows down: its own, or the fallback
    /// where it reports none.
    pub fn slowdown_c(&self, gpu: Option<&crate::model::sample::GpuDesc>) -> u32 {
        gpu.and_then(|g| g.slowdown_temp_c)
            .unwrap_or(self.hot_fallback_slowdown_c)
    }
}

/// A duration in the config ("90s", "5m"): at most a year, like every
/// flag (keys that must not be zero are checked by `invalid`).
pub fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    fleetop_proto::util::parse_bounded_duration(&s, Duration::ZERO, fleetop_proto::util::MAX_DURATION)
        .map_err(|e| serde::de::Error::custom(format!("bad duration: {e}")))
}

impl Thresholds {
    /// Values that parse but make no sense (a threshold above 100%, a zero
    /// window): the first, as (key, why).
    pub fn invalid(&self) -> Option<(&'static str, String)> {
        let samples = |v: u32| (1..=1000).contains(&v);
        let checks: [(&'static str, bool, &str); 10] = [
            ("idle_util_pct", self.idle_util_pct <= 100, "a percentage: 0 to 100"),
            (
                "throttle_raise_samples",
                samples(self.throttle_raise_samples),
                "1 to 1000 samples",
            ),
            ("clear_samples", samples(self.clear_samples), "1 to 1000 samples"),
            (
                "link_down_samples",
                samples(self.link_down_samples),
                "1 to 1000 samples",
            ),
            ("stale_intervals", samples(self.stale_intervals), "1 to 1000 intervals"),
            ("hot_margin_c", self.hot_margin_c <= 50, "0 to 50 °C"),
            (
                "hot_fallback_slowdown_c",
                (40..=150).contains(&self.hot_fallback_slowdown_c),
                "40 to 150 °C",
            ),
            ("idle_window", !self.idle_window.is_zero(), "longer than zero"),
            ("power_cap_window", !self.power_cap_window.is_zero(), "longer than zero"),
            (
                "unreachable_after",
                !self.unreachable_after.is_zero(),
                "longer than zero",
            ),
        ];
        checks
            .into_iter()
            .find(|(_, ok, _)| !ok)
            .map(|(key, _, why)| (key, format!("must be {why}")))
    }
}
