//! Upstream `[sig-architecture] Conformance Tests` (test/e2e/architecture/conformance.go): the
//! cluster has at least two nodes test pods can be scheduled to.
//!
//! Upstream counts `e2enode.GetReadySchedulableNodes`: every node of the cluster (whatever its
//! OS; the case creates no pod) that is Ready, not cordoned and carries no `NoSchedule` or
//! `NoExecute` taint. Departure: upstream first waits up to ten minutes
//! (`WaitForAllNodesSchedulable`) for every node to become schedulable; here the count is
//! re-read on every node change for at most [`SETTLE`], and the case passes as soon as two such
//! nodes are seen (the positive evidence), otherwise fails naming why each other node does not
//! count.

use std::time::Duration;

use crate::catalog::{Case, Kind};
use crate::cluster::{NodeInfo, Pools};
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream conformance.go "should have at least two untainted nodes".
pub const TWO_UNTAINTED_NODES: &str =
    "[sig-architecture] Conformance Tests should have at least two untainted nodes [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(TWO_UNTAINTED_NODES, Kind::Adapted, two_untainted_nodes)]
}

/// How long nodes may take to become schedulable (upstream waits ten minutes).
const SETTLE: Duration = Duration::from_secs(30);

/// Why `node` does not count as a ready, schedulable, untainted node; `None` when it counts.
fn not_counted(node: &NodeInfo) -> Option<String> {
    if !node.ready {
        return Some("not Ready".into());
    }
    if node.unschedulable {
        return Some("cordoned (spec.unschedulable)".into());
    }
    let taints: Vec<String> = node.blocking_taints().map(ToString::to_string).collect();
    (!taints.is_empty()).then(|| format!("tainted {}", taints.join(", ")))
}

/// Upstream conformance.go "should have at least two untainted nodes".
async fn two_untainted_nodes(f: &Framework) -> CaseResult {
    f.step("counting ready, schedulable, untainted nodes");
    let until = tokio::time::Instant::now() + SETTLE;
    let mut pace = tokio::time::interval(Duration::from_secs(1));
    loop {
        pace.tick().await;
        let pools = Pools::read(&f.client())
            .await
            .map_err(|e| CaseError::from(e).context("listing nodes"))?;
        let (counted, others): (Vec<&NodeInfo>, Vec<&NodeInfo>) =
            pools.nodes.iter().partition(|n| not_counted(n).is_none());
        if counted.len() >= 2 {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            let names: Vec<&str> = counted.iter().map(|n| n.name.as_str()).collect();
            let why: Vec<String> = others
                .iter()
                .map(|n| format!("{} {}", n.name, not_counted(n).unwrap_or_default()))
                .collect();
            return Err(CaseError::failed(format!(
                "Conformance requires at least two nodes: expected at least 2 ready, schedulable, \
                 untainted nodes within {SETTLE:?}, found {} [{}]; not counted: [{}]",
                counted.len(),
                names.join(", "),
                why.join("; ")
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    fn node(ready: bool, unschedulable: bool, effect: Option<&str>) -> NodeInfo {
        let mut v = json!({
            "metadata": {"name": "n", "labels": {"kubernetes.io/os": "linux"}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        });
        if let Some(effect) = effect {
            v["spec"]["taints"] = json!([{"key": "dedicated", "value": "x", "effect": effect}]);
        }
        NodeInfo::from_node(&serde_json::from_value::<Node>(v).unwrap())
    }

    #[test]
    fn counts_only_ready_schedulable_untainted_nodes() {
        assert_eq!(not_counted(&node(true, false, None)), None);
        assert_eq!(not_counted(&node(true, false, Some("PreferNoSchedule"))), None);
        assert!(
            not_counted(&node(true, false, Some("NoSchedule")))
                .unwrap()
                .contains("dedicated=x:NoSchedule")
        );
        assert!(not_counted(&node(true, false, Some("NoExecute"))).is_some());
        assert_eq!(not_counted(&node(false, false, None)).as_deref(), Some("not Ready"));
        assert!(not_counted(&node(true, true, None)).unwrap().contains("cordoned"));
    }
}
