//! `[sig-windows] [Feature:Windows] Eviction [Serial] [Slow] [Disruptive] should evict a pod
//! when a node experiences memory pressure` (upstream test/e2e/windows/eviction.go): on a
//! Windows node with a hard `memory.available` eviction threshold, a pod that requests and
//! uses 500Mi and a second that takes more memory than the node has left; the kubelet must
//! evict the second (an `Evicted` event on it), and the node must become schedulable again.
//!
//! Departures from upstream, for clearer and faster failures: where upstream polls events for
//! ten minutes, ours watches them and fails as soon as pod2 has ended without one (a kubelet
//! that killed it some other way will never record it); and where upstream then sleeps 45 s
//! and waits for every node to be schedulable, ours waits for the memory-pressure taint to
//! leave the node it used (the only node the case disturbs).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams};
use serde::Deserialize;

use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::wait::conditions;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::os::Os;

use super::node::resources::quantity_bytes;

/// Upstream It("should evict a pod when a node experiences memory pressure").
pub const MEMORY_PRESSURE: &str = "[sig-windows] [Feature:Windows] Eviction [Serial] [Slow] [Disruptive] should evict a pod when a node experiences memory pressure";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(MEMORY_PRESSURE, Kind::WindowsSpecific, memory_pressure)]
}

/// The taint the node lifecycle controller puts on a node reporting MemoryPressure.
const MEMORY_PRESSURE_TAINT: &str = "node.kubernetes.io/memory-pressure";

/// Upstream's waits: the taint's removal before and after, and the eviction itself.
const WAIT: Duration = Duration::from_secs(600);

/// How long pod2 may have ended before a missing `Evicted` event counts as never coming.
const EVENT_GRACE: Duration = Duration::from_secs(15);

/// The part of `/configz` this case reads.
#[derive(Debug, Default, Deserialize)]
struct Configz {
    #[serde(default)]
    kubeletconfig: EvictionConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EvictionConfig {
    #[serde(default)]
    eviction_hard: std::collections::BTreeMap<String, String>,
}

/// A node's memory capacity and hard `memory.available` threshold (upstream's
/// `getNodeMemory`), in bytes.
async fn node_memory(f: &Framework, node: &Node) -> Result<(i128, i128), CaseError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let capacity = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("memory"))
        .and_then(|q| quantity_bytes(&q.0))
        .ok_or_else(|| CaseError::failed(format!("node {name}: no memory capacity")))?;
    let text = f.node_proxy_get(&name, "configz").await?;
    let cfg: Configz = serde_json::from_str(&text)
        .map_err(|e| CaseError::failed(format!("node {name}: /configz is not a kubelet configuration ({e})")))?;
    let hard = match cfg.kubeletconfig.eviction_hard.get("memory.available") {
        None => 0,
        Some(v) => quantity_bytes(v).ok_or_else(|| {
            CaseError::failed(format!("node {name}: unparseable evictionHard memory.available {v:?}"))
        })?,
    };
    Ok((capacity, hard))
}

/// Whether `node` carries the memory-pressure NoSchedule taint.
fn has_memory_pressure_taint(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| {
        t.iter()
            .any(|t| t.key == MEMORY_PRESSURE_TAINT && t.effect == "NoSchedule")
    })
}

/// Waits until `node` has no memory-pressure taint (upstream's
/// `waitForMemoryPressureTaintRemoval`).
async fn wait_taint_removed(f: &Framework, node: &str) -> CaseResult {
    f.step(format!("waiting for the memory-pressure taint to leave node {node}"));
    f.wait_for_within(
        &f.api_all::<Node>(),
        node,
        |n: Option<&Node>| n.is_some_and(|n| !has_memory_pressure_taint(n)),
        &format!("to lose its {MEMORY_PRESSURE_TAINT} taint"),
        WAIT,
    )
    .await?;
    Ok(())
}

/// Upstream's `cleanupImagePullerPods`: the image pre-puller's pods would be evicted first.
async fn delete_image_puller_pods(f: &Framework) -> CaseResult {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces = f.api_all::<Namespace>().list(&ListParams::default()).await?;
    for ns in namespaces.items {
        let name = ns.metadata.name.unwrap_or_default();
        if !name.contains("img-puller") {
            continue;
        }
        let pods: kube::Api<Pod> = kube::Api::namespaced(f.client(), &name);
        for p in pods.list(&ListParams::default()).await? {
            let pod = p.metadata.name.unwrap_or_default();
            f.step(format!("deleting image puller pod {name}/{pod}"));
            pods.delete(&pod, &DeleteParams::default()).await?;
        }
        break;
    }
    Ok(())
}

/// A resource-consumer container running Testlimit to take `count` blocks of `block` MB.
fn testlimit(name: &str, block: &str, pause: &str, count: usize) -> ContainerBuilder {
    ContainerBuilder::new(name, "resource-consumer").command([
        "/bin/testlimit.exe".to_string(),
        "-accepteula".into(),
        "-d".into(),
        block.into(),
        "-e".into(),
        pause.into(),
        "20000s".into(),
        "-c".into(),
        count.to_string(),
    ])
}

async fn memory_pressure(f: &Framework) -> CaseResult {
    f.skip_unless(f.target_os() == Os::Windows, "the case evicts from Windows nodes")?;
    f.step("looking for a Windows node with memory-pressure eviction enabled");
    let nodes = f
        .api_all::<Node>()
        .list(&ListParams::default().labels("kubernetes.io/os=windows"))
        .await?;
    let mut chosen = None;
    for n in &nodes.items {
        let (capacity, hard) = node_memory(f, n).await?;
        if hard != 0 {
            chosen = Some((n.metadata.name.clone().unwrap_or_default(), capacity, hard));
            break;
        }
    }
    let Some((node, capacity, hard)) = chosen else {
        return Err(f.skip("No Windows nodes with hard memory-pressure eviction found"));
    };
    f.step(format!(
        "node {node}: capacity {} Mi, hard eviction threshold {} Mi",
        capacity >> 20,
        hard >> 20
    ));
    wait_taint_removed(f, &node).await?;
    delete_image_puller_pods(f).await?;

    f.step("Scheduling a pod that requests and consumes 500Mi of Memory");
    let pod1 = f
        .pod("pod1")
        .on_node(&node)
        .container(testlimit("pod1", "100Mb", "5", 5).with(|c| {
            c.resources = Some(ResourceRequirements {
                requests: Some([("memory".to_string(), Quantity("500Mi".into()))].into()),
                ..Default::default()
            });
        }));
    f.create_pod(&pod1).await?;
    f.wait_for(
        &f.api::<Pod>(),
        "pod1",
        conditions::is_pod_phase("Running"),
        "to be Running",
    )
    .await?;

    let chunks = usize::try_from((capacity - hard) / (300 << 20) + 3).unwrap_or(usize::MAX);
    f.step(format!(
        "Scheduling another pod will consume the rest of the node's memory: {chunks} chunks of 300Mi"
    ));
    let pod2 = f
        .pod("pod2")
        .on_node(&node)
        .container(testlimit("pod2", "300Mb", "1", chunks));
    f.create_pod(&pod2).await?;
    f.wait_for(
        &f.api::<Pod>(),
        "pod2",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph != "Pending")
        },
        "to start running",
    )
    .await?;

    f.step("Waiting for pod2 to be evicted");
    let evicted = f.wait_pod_event("pod2", "Evicted", WAIT, |e| e.reason.as_deref() == Some("Evicted"));
    let pods = f.api::<Pod>();
    let ended = f.wait_for_within(&pods, "pod2", conditions::is_pod_finished(), "to end", WAIT);
    tokio::pin!(evicted, ended);
    let event = tokio::select! {
        e = &mut evicted => e?,
        done = &mut ended => {
            let done = done?;
            // pod2 ended: its Evicted event, if the kubelet evicted it, follows within moments.
            match tokio::time::timeout(EVENT_GRACE, &mut evicted).await {
                Ok(e) => e?,
                Err(_) => {
                    let status = done.and_then(|p| p.status).unwrap_or_default();
                    fail!(
                        "pod2 should eventually be evicted: it ended {} (reason {:?}, message {:?}) on node {node} \
                         but no Evicted event was recorded for it within {EVENT_GRACE:?} of that",
                        status.phase.unwrap_or_default(),
                        status.reason.unwrap_or_default(),
                        status.message.unwrap_or_default()
                    );
                }
            }
        }
    };
    f.step(format!(
        "Eviction event for pod2: {:?}",
        event.message.unwrap_or_default()
    ));

    f.step("Waiting for node.kubernetes.io/memory-pressure taint to be removed");
    wait_taint_removed(f, &node).await
}
