//! The kubelet's `/stats/summary` as cases read it through the API server's node proxy: the
//! fields upstream's stats cases check ([`Summary`], [`PodStats`]) and the checks themselves
//! ([`PodStats::problems`]), pure and unit-tested; [`Framework::stats_summary`] adds the I/O.

use serde::Deserialize;

use super::{CaseError, Framework};

/// The kubelet's `/stats/summary` (the fields cases read; `k8s.io/kubelet/pkg/apis/stats/v1alpha1`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Node-level figures.
    pub node: NodeStats,
    /// One entry per pod the kubelet runs.
    #[serde(default)]
    pub pods: Vec<PodStats>,
}

/// Node-level stats.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// The node's name.
    #[serde(default)]
    pub node_name: String,
    /// CPU.
    pub cpu: Option<CpuStats>,
    /// Memory.
    pub memory: Option<MemoryStats>,
    /// The node's root filesystem.
    pub fs: Option<FsStats>,
    /// Network.
    pub network: Option<NetworkStats>,
}

/// A pod's reference in the summary.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodReference {
    /// The pod's name.
    pub name: String,
    /// The pod's namespace.
    pub namespace: String,
}

/// Pod-level stats.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// Which pod.
    pub pod_ref: PodReference,
    /// CPU.
    pub cpu: Option<CpuStats>,
    /// Memory.
    pub memory: Option<MemoryStats>,
    /// Network.
    pub network: Option<NetworkStats>,
    /// Per container.
    #[serde(default)]
    pub containers: Vec<ContainerStats>,
}

/// Container-level stats.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// The container's name.
    pub name: String,
    /// CPU.
    pub cpu: Option<CpuStats>,
    /// Memory.
    pub memory: Option<MemoryStats>,
    /// The container's log files.
    pub logs: Option<FsStats>,
}

/// CPU figures.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// Current usage in nanocores.
    pub usage_nano_cores: Option<u64>,
    /// Cumulative usage in core-nanoseconds.
    pub usage_core_nano_seconds: Option<u64>,
}

/// Memory figures.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// The working set.
    pub working_set_bytes: Option<u64>,
    /// Total usage.
    pub usage_bytes: Option<u64>,
    /// Available memory.
    pub available_bytes: Option<u64>,
}

/// Filesystem figures.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// Bytes available.
    pub available_bytes: Option<u64>,
    /// Capacity.
    pub capacity_bytes: Option<u64>,
    /// Bytes used.
    pub used_bytes: Option<u64>,
}

/// Network figures (the default interface's, plus the list).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStats {
    /// Bytes received.
    pub rx_bytes: Option<u64>,
    /// Bytes sent.
    pub tx_bytes: Option<u64>,
}

impl Summary {
    /// The stats of the pods of namespace `ns`.
    pub fn pods_in<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a PodStats> {
        self.pods.iter().filter(move |p| p.pod_ref.namespace == ns)
    }
}

impl PodStats {
    /// What upstream `kubelet_stats.go` requires of a running pod, as failure lines:
    /// `cpu.usageCoreNanoSeconds > 0`, `memory.workingSetBytes > 0`, and every container with
    /// `logs.availableBytes > 0`. Empty when the pod's stats are sane.
    pub fn problems(&self) -> Vec<String> {
        let who = format!("pod {}/{}", self.pod_ref.namespace, self.pod_ref.name);
        let mut out = Vec::new();
        match self.cpu.as_ref().and_then(|c| c.usage_core_nano_seconds) {
            Some(v) if v > 0 => {}
            other => out.push(format!("{who}: cpu.usageCoreNanoSeconds is {other:?}, expected > 0")),
        }
        match self.memory.as_ref().and_then(|m| m.working_set_bytes) {
            Some(v) if v > 0 => {}
            other => out.push(format!("{who}: memory.workingSetBytes is {other:?}, expected > 0")),
        }
        if self.containers.is_empty() {
            out.push(format!("{who}: no container stats"));
        }
        for c in &self.containers {
            match c.logs.as_ref().and_then(|l| l.available_bytes) {
                Some(v) if v > 0 => {}
                other => out.push(format!(
                    "{who} container {}: logs.availableBytes is {other:?}, expected > 0",
                    c.name
                )),
            }
        }
        out
    }
}

impl Framework {
    /// Reads and parses `/stats/summary` of `node` through the API server's node proxy.
    ///
    /// # Errors
    /// When the request fails or the body is not a stats summary.
    pub async fn stats_summary(&self, node: &str) -> Result<Summary, CaseError> {
        let text = self.node_proxy_get(node, "stats/summary").await?;
        serde_json::from_str(&text).map_err(|e| {
            CaseError::failed(format!(
                "node {node}: /stats/summary is not a stats summary ({e}): {}",
                text.chars().take(200).collect::<String>()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_stats_problems_follow_upstream_checks() {
        let good: PodStats = serde_json::from_value(json!({"podRef": {"name": "p", "namespace": "n"},
            "cpu": {"usageCoreNanoSeconds": 5}, "memory": {"workingSetBytes": 7},
            "containers": [{"name": "c", "logs": {"availableBytes": 9}}]}))
        .unwrap();
        assert!(good.problems().is_empty());
        let bad: PodStats = serde_json::from_value(json!({"podRef": {"name": "p", "namespace": "n"},
            "cpu": {"usageCoreNanoSeconds": 0}, "containers": [{"name": "c"}]}))
        .unwrap();
        let p = bad.problems();
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("usageCoreNanoSeconds"));
        assert!(p[2].contains("container c"));
    }
}
