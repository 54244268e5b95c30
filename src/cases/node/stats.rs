//! Kubelet stats on Windows nodes (upstream `windows/kubelet_stats.go`): `/stats/summary`
//! answering within the scrape timeout with the pods, the node's figures and its boot ID.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

use crate::catalog::{Case, Kind};
use crate::framework::services::POLL_INTERVAL;
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;

/// Upstream kubelet_stats.go, 10 pods on one node, 5 reads.
pub const STATS_10_PODS: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats [Serial] Kubelet stats collection for Windows nodes when running 10 pods should return within 10 seconds";
/// Upstream kubelet_stats.go, 3 pods on one node, 1 read.
pub const STATS_3_PODS: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats Kubelet stats collection for Windows nodes when running 3 pods should return within 10 seconds";
/// Upstream kubelet_stats.go: the node reports a bootID.
pub const STATS_BOOT_ID: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats Kubelet stats collection for Windows nodes when windows is booted should return bootid within 10 seconds";
/// Beyond upstream: node and pod figures present, and CPU time moving.
pub const STATS_FIGURES: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats Kubelet stats collection for Windows nodes should report node CPU, memory, filesystem and network figures and pod network figures";

/// The cases of this group, in catalogue order.
pub(super) fn cases() -> Vec<Case> {
    vec![
        crate::case!(STATS_10_PODS, Kind::WindowsSpecific, stats_10_pods),
        crate::case!(STATS_3_PODS, Kind::WindowsSpecific, stats_3_pods),
        crate::case!(STATS_BOOT_ID, Kind::WindowsSpecific, stats_boot_id),
        crate::case!(STATS_FIGURES, Kind::WindowsSpecific, stats_figures),
    ]
}

/// Upstream's bound on one `/stats/summary` call: the default scrape timeout of
/// metrics-server and kube-prometheus.
const STATS_CALL_LIMIT: Duration = Duration::from_secs(10);

/// Upstream `newKubeletStatsTestPods`: `n` pods pinned to `node`, each with an init container
/// and a long-running container.
pub(crate) async fn stats_pods(f: &Framework, os: Os, node: &str, n: usize) -> CaseResult {
    let builders: Vec<PodBuilder> = (0..n)
        .map(|i| {
            PodBuilder::new(&format!("statscollectiontest-{i}"), os)
                .label("testapp", "stats-collection")
                .on_node(node)
                .init_container(ContainerBuilder::new("init-container", "agnhost").command(os.shell("exit 0")))
                .container(ContainerBuilder::new("stat-container", "agnhost").args(["pause"]))
        })
        .collect();
    for b in &builders {
        f.create_pod(b).await?;
    }
    for b in &builders {
        f.wait_pod_ready(b.name()).await?;
    }
    Ok(())
}

async fn kubelet_stats(f: &Framework, n: usize, iterations: u32) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = nodes[0].name.clone();
    f.step(format!("scheduling {n} pods on node {node}"));
    stats_pods(f, os, &node, n).await?;
    let mut total = Duration::ZERO;
    for i in 0..iterations {
        let start = Instant::now();
        let summary = f.stats_summary(&node).await?;
        total += start.elapsed();
        let pods: Vec<_> = summary.pods_in(f.ns()).collect();
        crate::ensure!(
            pods.len() == n,
            "node {node} read {}: expected stats for {n} pods of namespace {}, found {}: {:?}",
            i + 1,
            f.ns(),
            pods.len(),
            pods.iter().map(|p| p.pod_ref.name.as_str()).collect::<Vec<_>>()
        );
        let problems: Vec<String> = pods.iter().flat_map(|p| p.problems()).collect();
        crate::ensure!(
            problems.is_empty(),
            "node {node} read {}: {}",
            i + 1,
            problems.join("; ")
        );
    }
    let mean = total / iterations.max(1);
    f.property("stats_summary_mean_ms", mean.as_millis());
    crate::ensure!(
        mean <= STATS_CALL_LIMIT,
        "collecting kubelet stats of node {node} took {mean:?} on average over {iterations} reads, more than {STATS_CALL_LIMIT:?}"
    );
    Ok(())
}

/// Upstream kubelet_stats.go "when running 10 pods should return within 10 seconds".
async fn stats_10_pods(f: &Framework) -> CaseResult {
    kubelet_stats(f, 10, 5).await
}

/// Upstream kubelet_stats.go "when running 3 pods should return within 10 seconds".
async fn stats_3_pods(f: &Framework) -> CaseResult {
    kubelet_stats(f, 3, 1).await
}

/// Upstream kubelet_stats.go "when windows is booted should return bootid within 10 seconds":
/// every node of the target OS reports `status.nodeInfo.bootID`.
async fn stats_boot_id(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    for n in &nodes {
        let node = f.api_all::<Node>().get(&n.name).await?;
        let boot_id = node
            .status
            .and_then(|s| s.node_info)
            .map(|i| i.boot_id)
            .unwrap_or_default();
        crate::ensure!(
            !boot_id.is_empty(),
            "node {}: expected status.nodeInfo.bootID, got none",
            n.name
        );
    }
    Ok(())
}

/// Beyond upstream: node CPU, memory, filesystem and network figures are present and node CPU
/// time moves between reads; a running pod has network figures.
async fn stats_figures(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = nodes[0].name.clone();
    stats_pods(f, os, &node, 1).await?;
    let first = f.stats_summary(&node).await?;
    let n = &first.node;
    let cpu0 = n.cpu.as_ref().and_then(|c| c.usage_core_nano_seconds).unwrap_or(0);
    let mut missing = Vec::new();
    if cpu0 == 0 {
        missing.push("cpu.usageCoreNanoSeconds".to_string());
    }
    if n.memory.as_ref().and_then(|m| m.working_set_bytes).unwrap_or(0) == 0 {
        missing.push("memory.workingSetBytes".into());
    }
    if n.fs.as_ref().and_then(|m| m.capacity_bytes).unwrap_or(0) == 0 {
        missing.push("fs.capacityBytes".into());
    }
    if n.fs.as_ref().and_then(|m| m.available_bytes).unwrap_or(0) == 0 {
        missing.push("fs.availableBytes".into());
    }
    if n.network.as_ref().and_then(|m| m.rx_bytes).is_none() || n.network.as_ref().and_then(|m| m.tx_bytes).is_none() {
        missing.push("network.rxBytes/txBytes".into());
    }
    let pods: Vec<_> = first.pods_in(f.ns()).collect();
    crate::ensure!(
        pods.len() == 1,
        "node {node}: expected stats for 1 pod of namespace {}, found {}",
        f.ns(),
        pods.len()
    );
    if pods[0].network.as_ref().and_then(|m| m.rx_bytes).is_none() {
        missing.push(format!("pod {} network.rxBytes", pods[0].pod_ref.name));
    }
    crate::ensure!(
        missing.is_empty(),
        "node {node} /stats/summary lacks or zeroes: {}",
        missing.join(", ")
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tick.tick().await;
        let now = f.stats_summary(&node).await?;
        let cpu = now
            .node
            .cpu
            .as_ref()
            .and_then(|c| c.usage_core_nano_seconds)
            .unwrap_or(0);
        if cpu > cpu0 {
            return Ok(());
        }
        crate::ensure!(
            Instant::now() < deadline,
            "node {node}: cpu.usageCoreNanoSeconds stayed at {cpu0} (now {cpu}) for 60s; the figures do not move"
        );
    }
}
