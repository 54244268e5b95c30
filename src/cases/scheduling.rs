//! `[sig-scheduling] SchedulerPredicates [Serial]` (upstream test/e2e/scheduling/predicates.go):
//! the scheduler's filters seen from outside. Each case labels nodes, creates pause pods and
//! reads where the scheduler put them (or that it refused to), so they run alone: they read
//! every node's free CPU and put labels on nodes.
//!
//! Departures from upstream, each for a reason:
//! - A pod expected to stay unscheduled is waited on until the scheduler says so
//!   (`PodScheduled=False`, reason `Unschedulable`, with the filter's words in the message),
//!   not for upstream's fixed pod start timeout: the verdict is what the case checks, and
//!   waiting five minutes for a pod that will never start would dominate the serial lane.
//! - In the 0.0.0.0 host-port case upstream never checks pod5 (it ignores the error of
//!   waiting for it); here pod5 must be refused for its port, which is what the case's name
//!   claims.
//! - Pause pods carry the target OS's node selector (every pod in this harness does), so on a
//!   mixed cluster the "not matching" pod is refused by every node of its OS and by the others
//!   for their OS; the filler pods of the resource case are built for each node's own OS.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    Pod, ResourceRequirements,
};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::case;
use crate::cases::policy::quantities;
use crate::catalog::{Case, Kind};
use crate::framework::wait::conditions::is_unschedulable;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;
use crate::{ensure, fail};
use kube::runtime::wait::Condition;

/// Upstream "validates resource limits of pods that are allowed to run".
pub(crate) const RESOURCE_LIMITS: &str = "[sig-scheduling] SchedulerPredicates [Serial] validates resource limits of pods that are allowed to run [Conformance]";
/// Upstream "validates that NodeSelector is respected if not matching".
pub(crate) const SELECTOR_NOT_MATCHING: &str = "[sig-scheduling] SchedulerPredicates [Serial] validates that NodeSelector is respected if not matching [Conformance]";
/// Upstream "validates that NodeSelector is respected if matching".
pub(crate) const SELECTOR_MATCHING: &str =
    "[sig-scheduling] SchedulerPredicates [Serial] validates that NodeSelector is respected if matching [Conformance]";
/// Upstream "validates that there exists conflict between pods with same hostPort and protocol
/// but one using 0.0.0.0 hostIP".
pub(crate) const HOST_PORT_CONFLICT: &str = "[sig-scheduling] SchedulerPredicates [Serial] validates that there exists \
     conflict between pods with same hostPort and protocol but one using 0.0.0.0 hostIP [Conformance]";

/// How long the scheduler gets to place a pod or to say it cannot.
const SCHEDULER_VERDICT: Duration = Duration::from_secs(60);

/// The SchedulerPredicates cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(RESOURCE_LIMITS, Kind::Adapted, resource_limits),
        case!(SELECTOR_NOT_MATCHING, Kind::Adapted, selector_not_matching),
        case!(SELECTOR_MATCHING, Kind::Adapted, selector_matching),
        case!(HOST_PORT_CONFLICT, Kind::Adapted, host_port_conflict),
    ]
}

/// Sets (or with `None` removes) label `key` on `node`, then reads the node back and checks
/// (upstream `AddOrUpdateLabelOnNode` + `ExpectNodeHasLabel`, `RemoveLabelOffNode`).
pub(crate) async fn set_node_label(f: &Framework, node: &str, key: &str, value: Option<&str>) -> CaseResult {
    let nodes = f.api_all::<Node>();
    let patch = json!({"metadata": {"labels": {key: value}}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let seen = nodes.get(node).await?;
    let now = seen.labels().get(key).map(String::as_str);
    ensure!(
        now == value,
        "node {node}: label {key} is {now:?} after the patch, expected {value:?}"
    );
    Ok(())
}

/// Runs `body` with label `key=value` on each of `nodes`, then removes the labels whatever
/// `body` returned (a case's failure must not leave labels on shared nodes).
pub(crate) async fn with_labels<F, Fut>(f: &Framework, nodes: &[(String, String)], key: &str, body: F) -> CaseResult
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = CaseResult>,
{
    let mut labelled = Vec::new();
    let mut result = Ok(());
    for (node, value) in nodes {
        f.step(format!("label node {node} with {key}={value}"));
        result = set_node_label(f, node, key, Some(value)).await;
        labelled.push(node.clone());
        if result.is_err() {
            break;
        }
    }
    if result.is_ok() {
        result = body().await;
    }
    for node in labelled {
        let removed = set_node_label(f, &node, key, None).await;
        if result.is_ok() {
            result = removed.map_err(|e| e.context(format!("removing label {key} from node {node}")));
        }
    }
    result
}

/// The node `pod` is bound to (`spec.nodeName`), or the empty string.
fn bound_node(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

/// A pause pod of the target OS.
fn pause_pod(f: &Framework, name: &str) -> PodBuilder {
    PodBuilder::new(name, f.target_os())
        .label("name", name)
        .container(ContainerBuilder::new("pause", "pause"))
}

/// Upstream `GetNodeThatCanRunPod`: runs a pause pod, notes its node, deletes it.
async fn node_that_can_run_pod(f: &Framework) -> Result<String, CaseError> {
    f.step("launch a pod to find a node which can run it");
    let pod = f.create_pod_ready(&pause_pod(f, "without-label")).await?;
    let node = bound_node(&pod);
    ensure!(!node.is_empty(), "pod without-label is ready but names no node");
    f.delete_pod_and_wait(&pod, &DeleteParams::default().grace_period(0), Duration::from_secs(60))
        .await?;
    Ok(node)
}

/// Waits until the scheduler reports `name` unschedulable and checks that `spec.nodeName` is
/// still empty; returns the scheduler's message.
async fn wait_refused(f: &Framework, name: &str) -> Result<String, CaseError> {
    // Either verdict ends the wait: a bound pod will never be reported unschedulable.
    let unschedulable = is_unschedulable();
    let verdict =
        move |p: Option<&Pod>| unschedulable.matches_object(p) || p.is_some_and(|p| !bound_node(p).is_empty());
    let pod = f
        .wait_for_within(
            &f.api::<Pod>(),
            name,
            verdict,
            "to be reported unschedulable",
            SCHEDULER_VERDICT,
        )
        .await
        .map_err(|e| e.context(format!("pod {name} was expected to stay unscheduled")))?
        .ok_or_else(|| {
            CaseError::Failed(format!(
                "pod {name} disappeared while waiting for the scheduler's verdict"
            ))
        })?;
    let node = bound_node(&pod);
    ensure!(
        node.is_empty(),
        "pod {name} was bound to node {node}, expected it to stay unscheduled"
    );
    let message = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    Ok(message)
}

/// Upstream `verifyResult`: the namespace holds exactly `scheduled` pods bound to a node (with
/// `PodScheduled=True`) and `unscheduled` pods bound to none.
async fn verify_result(f: &Framework, scheduled: usize, unscheduled: usize) -> CaseResult {
    let pods = f.api::<Pod>().list(&ListParams::default()).await?;
    let (mut on_node, mut pending) = (Vec::new(), Vec::new());
    for p in &pods.items {
        let node = bound_node(p);
        if node.is_empty() {
            pending.push(p.name_any());
            continue;
        }
        let condition = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
        match condition {
            Some(c) if c.status == "True" => on_node.push(format!("{} on {node}", p.name_any())),
            Some(c) => fail!(
                "pod {} is bound to {node} but its PodScheduled condition is {}",
                p.name_any(),
                c.status
            ),
            None => fail!(
                "pod {} is bound to {node} but has no PodScheduled condition",
                p.name_any()
            ),
        }
    }
    ensure!(
        on_node.len() == scheduled && pending.len() == unscheduled,
        "expected {scheduled} scheduled and {unscheduled} unscheduled pods in {}, saw {} scheduled [{}] and {} unscheduled [{}]",
        f.ns(),
        on_node.len(),
        on_node.join(", "),
        pending.len(),
        pending.join(", ")
    );
    Ok(())
}

/// Upstream `WaitForStableCluster` and `CheckTestingNSDeletedExcept`: waits until no pod outside
/// this case's namespace is being deleted or waits for a node, so the free CPU read next stays
/// true (a terminating pod still holds its requests, then frees them).
pub(crate) async fn wait_for_stable_cluster(f: &Framework) -> CaseResult {
    let ns = f.ns().to_string();
    let settled = move |pods: &[Pod]| {
        pods.iter().all(|p| {
            let done = matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            p.namespace().as_deref() == Some(ns.as_str())
                || (p.metadata.deletion_timestamp.is_none() && (done || !bound_node(p).is_empty()))
        })
    };
    f.wait_list_within(
        &f.api_all::<Pod>(),
        "",
        settled,
        "the cluster to settle: no pod outside this namespace terminating or waiting for a node",
        Duration::from_secs(120),
    )
    .await?;
    Ok(())
}

/// Millicores a CPU quantity stands for (`"2"`, `"1500m"`, `"0.5"`); `None` if unreadable.
fn millicores(q: &str) -> Option<i64> {
    match q.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => q.parse::<f64>().ok().map(|c| (c * 1000.0).round() as i64),
    }
}

/// The CPU requests of `pod`'s containers, in millicores (upstream `getRequestedCPU`).
fn requested_cpu(pod: &Pod) -> i64 {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
        .filter_map(|q| millicores(&q.0))
        .sum()
}

fn cpu_resources(millis: i64) -> impl Fn(&mut Container) + Clone + Send + Sync + 'static {
    move |c: &mut Container| {
        let q = format!("{millis}m");
        c.resources = Some(ResourceRequirements {
            requests: Some(quantities(&[("cpu", q.as_str())])),
            limits: Some(quantities(&[("cpu", q.as_str())])),
            ..Default::default()
        });
    }
}

/// Upstream: label every ready schedulable node `node=<name>`, fill each with a pod pinned to it
/// asking for 70 % of its free CPU, then ask for half the largest node's allocatable CPU: that
/// pod must stay unscheduled for want of CPU.
async fn resource_limits(f: &Framework) -> CaseResult {
    f.step("wait for the cluster to settle");
    wait_for_stable_cluster(f).await?;
    let mut nodes = Vec::new();
    for os in Os::ALL {
        nodes.extend(f.schedulable_nodes(os).await?);
    }
    ensure!(!nodes.is_empty(), "no ready schedulable node found");
    let node_api = f.api_all::<Node>();
    let mut allocatable = BTreeMap::new();
    for n in &nodes {
        let node = node_api.get(&n.name).await?;
        let cpu = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get("cpu"))
            .and_then(|q| millicores(&q.0));
        let Some(cpu) = cpu else {
            fail!("node {}: status.allocatable has no readable cpu entry", n.name)
        };
        allocatable.insert(n.name.clone(), cpu);
    }
    let max_allocatable = allocatable.values().copied().max().unwrap_or(0);
    let labels: Vec<(String, String)> = nodes.iter().map(|n| (n.name.clone(), n.name.clone())).collect();
    with_labels(f, &labels, "node", || async {
        let mut free = allocatable.clone();
        let all = f.api_all::<Pod>().list(&ListParams::default()).await?;
        for p in &all.items {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if let Some(left) = free.get_mut(&bound_node(p))
                && !matches!(phase, Some("Succeeded" | "Failed"))
            {
                *left -= requested_cpu(p);
            }
        }
        f.step("start pods to consume most of the cluster CPU");
        let mut fillers = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let ask = free[&n.name] * 7 / 10;
            ensure!(
                ask > 0,
                "node {} has no CPU left to fill ({}m free of {}m allocatable)",
                n.name,
                free[&n.name],
                allocatable[&n.name]
            );
            f.property(format!("filler_{}_millicores", n.name), ask);
            let os = n.os.unwrap_or(f.target_os());
            let node = n.name.clone();
            let pod = PodBuilder::new(&format!("filler-pod-{i}"), os)
                .container(ContainerBuilder::new("pause", "pause").with(cpu_resources(ask)))
                .edit_spec(move |spec| spec.affinity = Some(pinned_to_label("node", &node)));
            fillers.push(f.create_pod(&pod).await?.name_any());
        }
        for name in &fillers {
            f.wait_pod_ready(name).await?;
        }
        f.step("create another pod that requires an unavailable amount of CPU");
        let ask = max_allocatable * 5 / 10;
        f.property("additional_pod_millicores", ask);
        let additional = PodBuilder::new("additional-pod", f.target_os())
            .label("name", "additional")
            .container(ContainerBuilder::new("pause", "pause").with(cpu_resources(ask)));
        f.create_pod(&additional).await?;
        let message = wait_refused(f, "additional-pod").await?;
        ensure!(
            message.contains("Insufficient cpu"),
            "pod additional-pod is unschedulable but the scheduler's message does not name CPU: {message:?}"
        );
        verify_result(f, fillers.len(), 1).await
    })
    .await
}

/// A required node affinity to nodes whose `key` label is `value`.
fn pinned_to_label(key: &str, value: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: key.into(),
                        operator: "In".into(),
                        values: Some(vec![value.into()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Upstream: no node carries `label=nonempty`, so a pod selecting it stays unscheduled.
async fn selector_not_matching(f: &Framework) -> CaseResult {
    f.step("schedule a pod with a nonempty NodeSelector");
    let pod = pause_pod(f, "restricted-pod").edit_spec(|spec| {
        spec.node_selector
            .get_or_insert_with(BTreeMap::new)
            .insert("label".into(), "nonempty".into());
    });
    f.create_pod(&pod).await?;
    let message = wait_refused(f, "restricted-pod").await?;
    ensure!(
        message.contains("didn't match Pod's node affinity/selector"),
        "pod restricted-pod is unschedulable but the scheduler's message does not name the node selector: {message:?}"
    );
    verify_result(f, 0, 1).await
}

/// Upstream: a random label on a node that can run a pod; a pod selecting it lands there.
async fn selector_matching(f: &Framework) -> CaseResult {
    let node = node_that_can_run_pod(f).await?;
    let key = format!("kubernetes.io/e2e-{}", uuid::Uuid::new_v4());
    let labels = [(node.clone(), "42".to_string())];
    with_labels(f, &labels, &key, || async {
        f.step("relaunch the pod, now with labels");
        let selector = key.clone();
        let pod = pause_pod(f, "with-labels").edit_spec(move |spec| {
            spec.node_selector
                .get_or_insert_with(BTreeMap::new)
                .insert(selector.clone(), "42".into());
        });
        f.create_pod(&pod).await?;
        // Upstream waits for "not pending" only: the kubelet may not have seen the new label
        // yet; where the scheduler put the pod is the point.
        let placed = wait_bound(f, "with-labels").await?;
        let on = bound_node(&placed);
        ensure!(
            on == node,
            "pod with-labels was scheduled to node {on}, expected {node} (the node labelled {key}=42)"
        );
        Ok(())
    })
    .await
}

/// Waits until pod `name` is bound to a node; returns it.
async fn wait_bound(f: &Framework, name: &str) -> Result<Pod, CaseError> {
    let bound = |p: Option<&Pod>| p.is_some_and(|p| !bound_node(p).is_empty());
    f.wait_for_within(&f.api::<Pod>(), name, bound, "to be scheduled", SCHEDULER_VERDICT)
        .await?
        .ok_or_else(|| CaseError::Failed(format!("pod {name} disappeared while waiting for it to be scheduled")))
}

/// The node's first InternalIP, as upstream's `getNodeHostIP` reads it.
async fn node_internal_ip(f: &Framework, node: &str) -> Result<String, CaseError> {
    let n = f.api_all::<Node>().get(node).await?;
    n.status
        .and_then(|s| s.addresses)
        .into_iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address)
        .ok_or_else(|| CaseError::Failed(format!("node {node} reports no InternalIP address")))
}

/// Upstream's host-port pod: agnhost netexec with container port 8080 published on `port` at
/// `host_ip` (empty: every address), pinned by `selector`.
fn host_port_pod(f: &Framework, name: &str, host_ip: &str, port: i32, selector: (&str, &str)) -> PodBuilder {
    let host_ip = (!host_ip.is_empty()).then(|| host_ip.to_string());
    let (key, value) = (selector.0.to_string(), selector.1.to_string());
    PodBuilder::new(name, f.target_os())
        .container(
            ContainerBuilder::new("agnhost", "agnhost")
                .args(["netexec", "--http-port=8080", "--udp-port=8080"])
                .with(move |c: &mut Container| {
                    c.ports = Some(vec![ContainerPort {
                        container_port: 8080,
                        host_port: Some(port),
                        host_ip: host_ip.clone(),
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    }]);
                }),
        )
        .edit_spec(move |spec| {
            spec.node_selector
                .get_or_insert_with(BTreeMap::new)
                .insert(key.clone(), value.clone());
        })
}

/// Upstream: pod4 takes host port 54322/TCP on 0.0.0.0 of a labelled node; pod5 asks for the
/// same port and protocol on the node's InternalIP and must not be scheduled beside it.
async fn host_port_conflict(f: &Framework) -> CaseResult {
    let node = node_that_can_run_pod(f).await?;
    let host_ip = node_internal_ip(f, &node).await?;
    let key = format!("kubernetes.io/e2e-{}", uuid::Uuid::new_v4());
    let labels = [(node.clone(), "95".to_string())];
    let port = 54322;
    with_labels(f, &labels, &key, || async {
        f.step(format!(
            "create pod4 with hostPort {port} and hostIP 0.0.0.0 and expect it scheduled"
        ));
        f.create_pod(&host_port_pod(f, "pod4", "", port, (&key, "95"))).await?;
        let pod4 = wait_bound(f, "pod4").await?;
        ensure!(
            bound_node(&pod4) == node,
            "pod4 was scheduled to {}, expected {node}",
            bound_node(&pod4)
        );
        f.step(format!(
            "create pod5 with hostPort {port} and hostIP {host_ip} on the node of pod4 and expect it not scheduled"
        ));
        f.create_pod(&host_port_pod(f, "pod5", &host_ip, port, (&key, "95")))
            .await?;
        let message = wait_refused(f, "pod5").await?;
        ensure!(
            message.contains("didn't have free ports"),
            "pod5 is unschedulable but the scheduler's message does not name the host port: {message:?}"
        );
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_quantities() {
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("1500m"), Some(1500));
        assert_eq!(millicores("0.5"), Some(500));
        assert_eq!(millicores("lots"), None);
    }

    #[test]
    fn sums_container_cpu_requests() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "250m"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
            {"name": "c"}
        ]}}))
        .unwrap();
        assert_eq!(requested_cpu(&pod), 1250);
    }
}
