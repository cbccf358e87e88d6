//! Which of another scheduler's nodes (Kubernetes', Ray's) each of the
//! fleet's nodes is: one rule for both.

use std::collections::HashMap;

use crate::store::NodeState;

/// For each node, the index of the other scheduler's node it is: by name
/// first (`by_name`), then by the address of its agent (`by_address`), only
/// for a node whose agent's address is its own (several agents at one
/// address say nothing of which node is which). One of theirs is never two
/// of ours.
pub(super) fn match_nodes(
    nodes: &[NodeState],
    theirs: usize,
    by_name: impl Fn(&NodeState) -> Option<usize>,
    by_address: impl Fn(&str) -> Option<usize>,
) -> Vec<Option<usize>> {
    let mut claimed = vec![false; theirs];
    let mut of_node: Vec<Option<usize>> = nodes
        .iter()
        .map(|n| {
            let j = by_name(n).filter(|&j| !claimed[j])?;
            claimed[j] = true;
            Some(j)
        })
        .collect();
    let mut hosts: HashMap<&str, usize> = HashMap::new();
    for n in nodes {
        *hosts.entry(n.target.host.as_str()).or_default() += 1;
    }
    for (n, of) in nodes.iter().zip(of_node.iter_mut()) {
        if of.is_some() || hosts.get(n.target.host.as_str()) != Some(&1) {
            continue;
        }
        if let Some(j) = by_address(&n.target.host).filter(|&j| !claimed[j]) {
            claimed[j] = true;
            *of = Some(j);
        }
    }
    of_node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::target::Target;

    fn node(name: &str, host: &str) -> NodeState {
        NodeState::new(Target {
            name: name.into(),
            host: host.into(),
            port: 50051,
        })
    }

    #[test]
    fn by_name_first_then_an_address_that_is_the_nodes_alone_each_of_theirs_once() {
        // Theirs: 0 "gpu01" at 10.0.0.1, 1 "x" at 10.0.0.2, 2 "y" at 10.0.0.3.
        let theirs = [("gpu01", "10.0.0.1"), ("x", "10.0.0.2"), ("y", "10.0.0.3")];
        let by_name = |n: &NodeState| theirs.iter().position(|t| t.0 == n.target.name);
        let by_address = |h: &str| theirs.iter().position(|t| t.1 == h);
        let ours = [
            // By name, though its address is another's.
            node("gpu01", "10.0.0.2"),
            // Its agent shares 10.0.0.2 with gpu01's: not matched by it.
            node("n2", "10.0.0.2"),
            // Two agents at 10.0.0.3: neither is matched by address.
            node("n3", "10.0.0.3"),
            node("n3:7002", "10.0.0.3"),
            // Nobody's.
            node("n9", "10.0.0.9"),
        ];
        let got = match_nodes(&ours, theirs.len(), by_name, by_address);
        assert_eq!(got, [Some(0), None, None, None, None]);
        // With gpu01's agent elsewhere, 10.0.0.2 is n2's alone: it takes 1.
        let ours = [node("gpu01", "10.0.0.1"), node("n2", "10.0.0.2")];
        assert_eq!(
            match_nodes(&ours, theirs.len(), by_name, by_address),
            [Some(0), Some(1)]
        );
        // A name taken once: a second node of the same name gets nothing.
        let ours = [node("gpu01", "10.0.0.7"), node("gpu01", "10.0.0.8")];
        assert_eq!(match_nodes(&ours, theirs.len(), by_name, by_address), [Some(0), None]);
    }
}
