//! Version skew across the fleet: a node whose driver or VBIOS differs from
//! most nodes with the same GPU model, or whose fleetop agent differs from
//! most agents (a half-finished rollout, a node that missed one). Judged
//! only where there are enough nodes for "most" to mean something.

use std::collections::BTreeMap;

use crate::model::sample::NodeDesc;

/// Nodes of one GPU model needed before any of them is called different.
pub const MIN_NODES: usize = 3;

/// For each node (in order), what differs from its model's majority, if anything.
pub fn judge(descs: &[Option<&NodeDesc>]) -> Vec<Option<String>> {
    // Per model: how many nodes run each driver, and each VBIOS.
    let mut drivers: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut vbioses: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut agents: BTreeMap<&str, usize> = BTreeMap::new();
    for d in descs.iter().flatten() {
        if let Some(v) = agent(d) {
            *agents.entry(v).or_default() += 1;
        }
        let Some(model) = model(d) else { continue };
        if let Some(v) = &d.driver_version {
            *drivers.entry(model).or_default().entry(v).or_default() += 1;
        }
        for v in vbios(d) {
            *vbioses.entry(model).or_default().entry(v).or_default() += 1;
        }
    }
    descs
        .iter()
        .map(|d| {
            let d = (*d)?;
            let mut what = Vec::new();
            if let (Some(v), Some((major, n, all))) = (agent(d), majority(Some(&agents)))
                && v != major
            {
                what.push(format!("agent {v}; {major} on {n} of {all} nodes"));
            }
            let Some(model) = model(d) else {
                return (!what.is_empty()).then(|| what.join("; "));
            };
            if let (Some(v), Some((major, n, all))) = (&d.driver_version, majority(drivers.get(model)))
                && v != major
            {
                what.push(format!("driver {v}; {major} on {n} of {all} {model} nodes"));
            }
            if let Some((major, n, all)) = majority(vbioses.get(model)) {
                let odd: Vec<&str> = vbios(d).filter(|v| *v != major).collect();
                if let Some(v) = odd.first() {
                    what.push(format!("VBIOS {v}; {major} on {n} of {all} {model} GPUs"));
                }
            }
            (!what.is_empty()).then(|| what.join("; "))
        })
        .collect()
}

/// The fleetop agent's version, where the node is read from one (directly,
/// or through Prometheus); a dcgm-exporter's node names its source instead.
fn agent(d: &NodeDesc) -> Option<&str> {
    Some(d.agent_version.as_str()).filter(|v| !v.is_empty() && *v != d.backend && *v != "prometheus")
}

fn model(d: &NodeDesc) -> Option<&str> {
    d.gpus.first().map(|g| g.model.as_str()).filter(|m| !m.is_empty())
}

fn vbios(d: &NodeDesc) -> impl Iterator<Item = &str> {
    d.gpus.iter().filter_map(|g| g.vbios_version.as_deref())
}

/// The value most have, with its count and the total, when it is a strict
/// majority of at least `MIN_NODES`.
fn majority<'a>(counts: Option<&BTreeMap<&'a str, usize>>) -> Option<(&'a str, usize, usize)> {
    let counts = counts?;
    let all: usize = counts.values().sum();
    let (v, n) = counts.iter().max_by_key(|(_, n)| **n)?;
    (all >= MIN_NODES && *n * 2 > all).then_some((*v, *n, all))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::GpuDesc;

    fn node(driver: &str, vbios: &str) -> NodeDesc {
        NodeDesc {
            driver_version: Some(driver.into()),
            gpus: vec![GpuDesc {
                model: "NVIDIA H100 80GB HBM3".into(),
                vbios_version: Some(vbios.into()),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_odd_node_out_is_named_with_what_the_others_run() {
        let nodes = [
            node("550.54.15", "96.00.99.00.01"),
            node("550.54.15", "96.00.99.00.01"),
            node("535.161.08", "96.00.99.00.01"),
            node("550.54.15", "96.00.74.00.0A"),
        ];
        let got = judge(&nodes.iter().map(Some).collect::<Vec<_>>());
        assert_eq!(got[0], None);
        assert_eq!(
            got[2].as_deref(),
            Some("driver 535.161.08; 550.54.15 on 3 of 4 NVIDIA H100 80GB HBM3 nodes")
        );
        assert!(
            got[3].as_deref().is_some_and(|s| s.starts_with("VBIOS 96.00.74.00.0A")),
            "{got:?}"
        );
    }

    #[test]
    fn no_majority_or_too_few_nodes_judges_nobody() {
        let two = [node("1", "a"), node("2", "a")];
        assert!(
            judge(&two.iter().map(Some).collect::<Vec<_>>())
                .iter()
                .all(Option::is_none)
        );
        let split = [node("1", "a"), node("1", "a"), node("2", "a"), node("2", "a")];
        assert!(
            judge(&split.iter().map(Some).collect::<Vec<_>>())
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn an_agent_on_another_version_is_named_whatever_its_gpus() {
        let agent = |v: &str, model: &str| NodeDesc {
            agent_version: v.into(),
            backend: "nvml".into(),
            gpus: vec![GpuDesc {
                model: model.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let nodes = [
            agent("0.2.0", "NVIDIA H100 80GB HBM3"),
            agent("0.2.0", "NVIDIA H200"),
            agent("0.1.0", "AMD Instinct MI300X"),
            agent("0.2.0", ""),
        ];
        let got = judge(&nodes.iter().map(Some).collect::<Vec<_>>());
        assert_eq!(got[2].as_deref(), Some("agent 0.1.0; 0.2.0 on 3 of 4 nodes"));
        assert_eq!(got.iter().flatten().count(), 1, "{got:?}");
        // A dcgm-exporter's nodes name their source, not an agent's version:
        // they are not judged against the agents.
        let mut mixed = nodes.to_vec();
        for n in &mut mixed[..2] {
            n.agent_version = "dcgm-exporter".into();
            n.backend = "dcgm-exporter".into();
        }
        let got = judge(&mixed.iter().map(Some).collect::<Vec<_>>());
        assert!(got.iter().all(Option::is_none), "{got:?}");
    }
}
