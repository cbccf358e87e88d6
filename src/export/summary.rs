//! The summary view (`export --view summary`): the headline figures and
//! every flag, made from a full snapshot.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::document::{FlagOut, Health, Snapshot, Status};

/// The summary view (`export --view summary`): per node and per GPU the
/// headline figures and every flag, about a tenth of a full snapshot, for
/// cron jobs, jq and dashboards that poll often. Same units and the same
/// rule as the full view: a reading that is not known is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// As in the full view (the summary came with 2, additively).
    pub schema_version: u32,
    /// Always "summary": tells this document from a full snapshot.
    pub view: SummaryView,
    /// RFC 3339.
    pub generated_at: String,
    /// As in the full view.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub console_behind_ms: Option<i64>,
    pub nodes: Vec<NodeSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummaryView {
    Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSummary {
    pub name: String,
    /// As in the full view: host:port of the agent (or exporter).
    pub address: String,
    pub status: Status,
    pub status_detail: Option<String>,
    /// As in the full view: the worst flag's severity.
    pub health: Health,
    /// RFC 3339 time of the latest sample.
    pub sampled_at: Option<String>,
    /// Slurm's state word, with `--slurm`.
    pub scheduler_state: Option<String>,
    pub gpus: Vec<GpuSummary>,
    pub ib_ports: Vec<IbPortSummary>,
    /// Every flag of the node, as in the full view.
    pub flags: Vec<FlagOut>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuSummary {
    pub index: u32,
    /// As the full view's: readings are null then.
    pub error: Option<String>,
    pub util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub temp_c: Option<u32>,
    pub power_w: Option<f64>,
    /// GPM SM activity (Hopper and later), `null` without GPM.
    pub sm_active_pct: Option<f64>,
    pub throttle_reasons: Vec<String>,
    /// Slurm jobs of the GPU's processes, distinct, ascending.
    pub job_ids: Vec<u64>,
    /// As the full view's: who made the GPU.
    #[serde(default)]
    pub vendor: super::document::GpuVendor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IbPortSummary {
    /// "<device>/<port>", as flags name it.
    pub port: String,
    pub state: Option<String>,
    pub rate_gbps: Option<u32>,
}

/// The summary of a full snapshot: the same moment, fewer fields.
pub fn summary(s: &Snapshot) -> Summary {
    Summary {
        schema_version: s.schema_version,
        view: SummaryView::Summary,
        generated_at: s.generated_at.clone(),
        console_behind_ms: s.console_behind_ms,
        nodes: s
            .nodes
            .iter()
            .map(|n| NodeSummary {
                name: n.name.clone(),
                address: n.address.clone(),
                status: n.status,
                status_detail: n.status_detail.clone(),
                health: n.health,
                sampled_at: n.sampled_at.clone(),
                scheduler_state: n.scheduler.as_ref().map(|s| s.state.clone()),
                gpus: n
                    .gpus
                    .iter()
                    .map(|g| {
                        let mut job_ids: Vec<u64> = g.processes.iter().filter_map(|p| p.job_id).collect();
                        job_ids.sort_unstable();
                        job_ids.dedup();
                        GpuSummary {
                            index: g.index,
                            error: g.error.clone(),
                            util_pct: g.util_pct,
                            mem_used_bytes: g.mem_used_bytes,
                            mem_total_bytes: g.mem_total_bytes,
                            temp_c: g.temp_c,
                            power_w: g.power_w,
                            sm_active_pct: g.sm_active_pct,
                            throttle_reasons: g.throttle_reasons.clone(),
                            job_ids,
                            vendor: g.vendor,
                        }
                    })
                    .collect(),
                ib_ports: n
                    .ib_ports
                    .iter()
                    .map(|p| IbPortSummary {
                        port: format!("{}/{}", p.device, p.port),
                        state: p.state.clone(),
                        rate_gbps: p.rate_gbps,
                    })
                    .collect(),
                flags: n.flags.clone(),
            })
            .collect(),
    }
}
