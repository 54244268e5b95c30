//! Pod admission on the node, as the kubelet's `lifecycle/predicate.go` `Admit`: first the OS
//! checks (a pod whose `kubernetes.io/os` *label* — upstream reads the pod's labels here, not
//! its node selector — or `spec.os.name` names another OS than the node's), then the general
//! predicates the kubelet shares with the scheduler (`scheduler.AdmissionCheck`, every failure
//! collected and the first reported): resources (`OutOfcpu`, `OutOfmemory`, `OutOfpods`, ...:
//! the pod's requests against allocatable less what the node's other active pods request),
//! node affinity (node selector and required node affinity against the node's labels) and
//! host ports. A refused pod never runs: the kubelet sets it Failed with the reason and "Pod
//! was rejected: " and the message, and records a Warning event with the message, as its
//! `rejectPod` does.
//!
//! These matter for pods bound without the scheduler (`spec.nodeName` set by their author):
//! the kubelet is the only check they meet. Node labels: the kubelet first checks against the
//! labels it registered with; when node affinity is the only failure it reads the Node from
//! the API server and checks again, as upstream re-fetches the node synchronously before
//! rejecting for affinity alone (a label added by `kubectl label` just before the pod was
//! scheduled). The node-name predicate always holds (the kubelet only watches pods bound to
//! it); the untolerated-NoExecute-taint check of newer kubelets is not modelled.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodSpec};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use tracing::debug;

use crossconf_model::os::OS_LABEL;

use super::{Kubelet, PodRt};
use crate::control::predicates::{
    Resources, host_ports_taken, matches_node_selector_and_affinity, parse_quantity_milli, pod_requests,
};

/// Why the kubelet refuses a pod: the reason (`PodAdmitResult.Reason`) and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Rejection {
    pub reason: String,
    pub message: String,
}

impl Rejection {
    fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// What admission decided about a pod.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admission {
    Admit,
    Reject(Rejection),
    /// Node affinity failed against the registered labels and nothing else failed: read the
    /// Node and decide again ([`decide_with_fresh_node`]).
    AskNode,
}

/// Upstream's predicate name and reason for a node affinity mismatch.
const NODE_AFFINITY: (&str, &str) = (
    "NodeAffinity",
    "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
);

/// Upstream's predicate failure for a host port already in use on the node: the reason is the
/// predicate's name, the message `PredicateFailureError.Error()`.
const NODE_PORTS: (&str, &str) = (
    "NodePorts",
    "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
);

/// Decides on `pod` against the node's registered labels (`fresh`: `None`) or against a Node
/// just read from the API server.
///
/// `pod-os-admission-off` models a kubelet without the OS checks (before 1.25's pod OS field
/// handling), which starts the pod whatever OS it names; `kubelet-host-port-admission-off` one
/// whose admission skips the host-port predicate.
pub(super) fn decide(
    kl: &Kubelet,
    admitted: &HashMap<String, Arc<PodRt>>,
    pod: &Pod,
    fresh: Option<&Node>,
) -> Admission {
    let Some(spec) = pod.spec.as_ref() else {
        return Admission::Admit;
    };
    if !kl.net.faults().is_on("pod-os-admission-off")
        && let Some(refused) = refuse_os(kl, pod, spec)
    {
        return Admission::Reject(refused);
    }
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let active = active_pod_specs(admitted, uid);
    // `AdmissionCheck` order: resources, node affinity, (node name), host ports.
    let mut failures: Vec<Rejection> = insufficient_resources(spec, &active, &allocatable(kl));
    let registered;
    let node = match fresh {
        Some(node) => node,
        None => {
            registered = Node {
                metadata: ObjectMeta {
                    labels: Some(kl.registered_labels()),
                    ..Default::default()
                },
                ..Default::default()
            };
            &registered
        }
    };
    let affinity_failed = !matches_node_selector_and_affinity(spec, node);
    if affinity_failed {
        failures.push(Rejection::new(NODE_AFFINITY.0, NODE_AFFINITY.1));
    }
    if !kl.net.faults().is_on("kubelet-host-port-admission-off") && host_ports_taken(spec, &active) {
        failures.push(Rejection::new(NODE_PORTS.0, NODE_PORTS.1));
    }
    let only_affinity = affinity_failed && failures.len() == 1;
    match failures.into_iter().next() {
        None => Admission::Admit,
        Some(_) if only_affinity && fresh.is_none() => Admission::AskNode,
        Some(first) => Admission::Reject(first),
    }
}

/// Reads the Node and decides on `pod` again; starts it (through `start`) when it now fits,
/// else rejects it. A pod the kubelet admitted meanwhile (a later watch event) is left alone.
pub(super) async fn decide_with_fresh_node(kl: Arc<Kubelet>, pod: Pod, start: fn(&Arc<Kubelet>, Pod)) {
    let nodes: Api<Node> = Api::all(kl.client.clone());
    let verdict = match nodes.get(&kl.cfg.name).await {
        Ok(node) => {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let pods = kl.pods.lock().expect("pods lock");
            if pods.contains_key(&uid) {
                return;
            }
            decide(&kl, &pods, &pod, Some(&node))
        }
        Err(e) => {
            // Upstream keeps the first verdict when the synchronous read fails.
            debug!(node = %kl.cfg.name, error = %e, "node read for admission failed");
            Admission::Reject(Rejection::new(NODE_AFFINITY.0, NODE_AFFINITY.1))
        }
    };
    match verdict {
        Admission::Admit => start(&kl, pod),
        Admission::Reject(r) => reject(kl, pod, r).await,
        Admission::AskNode => {}
    }
}

fn refuse_os(kl: &Kubelet, pod: &Pod, spec: &PodSpec) -> Option<Rejection> {
    let node_os = kl.cfg.os.as_str();
    if pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OS_LABEL))
        .is_some_and(|os| os != node_os)
    {
        return Some(Rejection::new(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        ));
    }
    if spec.os.as_ref().is_some_and(|os| os.name != node_os) {
        return Some(Rejection::new(
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS",
        ));
    }
    None
}

/// The node's allocatable, in milli-units by resource name.
fn allocatable(kl: &Kubelet) -> Resources {
    kl.allocatable()
        .into_iter()
        .map(|(k, v)| (k, parse_quantity_milli(&v.0).unwrap_or(0)))
        .collect()
}

/// Whether `name` is an extended resource (upstream `IsExtendedResourceName`: qualified with a
/// domain outside `kubernetes.io/`, not a quota `requests.` name).
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Upstream `noderesources.Fits` as the kubelet runs it: the pod count first, then cpu, memory,
/// ephemeral storage and the rest by name, each the pod's request against allocatable less the
/// other active pods' requests; extended resources the node does not have are left out
/// (`removeMissingExtendedResources`). One rejection per short resource, reason `OutOf<name>`.
fn insufficient_resources(spec: &PodSpec, active: &[PodSpec], allocatable: &Resources) -> Vec<Rejection> {
    let mut used = Resources::new();
    for other in active {
        for (k, v) in pod_requests(other) {
            *used.entry(k).or_default() += v;
        }
    }
    let requests = pod_requests(spec);
    let mut names: Vec<&String> = requests.keys().collect();
    let rank = |n: &str| match n {
        "pods" => 0,
        "cpu" => 1,
        "memory" => 2,
        "ephemeral-storage" => 3,
        _ => 4,
    };
    names.sort_by_key(|n| (rank(n), (*n).clone()));
    let mut out = Vec::new();
    for name in names {
        let want = requests[name];
        if want <= 0 || (is_extended(name) && !allocatable.contains_key(name)) {
            continue;
        }
        let have = allocatable.get(name).copied().unwrap_or(0);
        let taken = used.get(name).copied().unwrap_or(0);
        if want <= have - taken {
            continue;
        }
        // The message's units: millicores for cpu, whole units (bytes, pods) otherwise.
        let shown = |milli: i128| {
            if name == "cpu" {
                milli
            } else {
                (milli + 999).div_euclid(1000)
            }
        };
        out.push(Rejection::new(
            format!("OutOf{name}"),
            format!(
                "Node didn't have enough resource: {name}, requested: {}, used: {}, capacity: {}",
                shown(want),
                shown(taken),
                shown(have)
            ),
        ));
    }
    out
}

/// The specs of the pods of `admitted` (the kubelet's pods) that are still active (upstream
/// `filterOutInactivePods`: not in a terminal phase; a pod being deleted counts until it is
/// gone), other than the pod of `uid`.
fn active_pod_specs(admitted: &HashMap<String, Arc<PodRt>>, uid: &str) -> Vec<PodSpec> {
    admitted
        .values()
        .filter(|rt| rt.uid != uid && !rt.gone.is_cancelled())
        .filter_map(|rt| {
            let pod = rt.pod();
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                return None;
            }
            pod.spec
        })
        .collect()
}

/// Rejects `pod`: phase Failed with `reason` and the message "Pod was rejected: `message`", and
/// a Warning event with `reason` and `message`, once; when the pod is being deleted, completes
/// the deletion instead (nothing of it ever ran).
pub(super) async fn reject(kl: Arc<Kubelet>, pod: Pod, rejection: Rejection) {
    let Rejection { reason, message } = rejection;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(kl.client.clone(), &ns);
    if pod.metadata.deletion_timestamp.is_some() {
        super::pod_worker::final_delete(&kl, &ns, &name, &uid).await;
        return;
    }
    let status = pod.status.as_ref();
    if status.and_then(|s| s.reason.as_deref()) == Some(reason.as_str()) {
        return;
    }
    let patch = serde_json::json!({"status": {"phase": "Failed", "reason": reason,
        "message": format!("Pod was rejected: {message}")}});
    if let Err(e) = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        debug!(pod = %name, error = %e, "rejecting a pod failed");
        return;
    }
    let obj = ObjectReference {
        kind: Some("Pod".into()),
        name: Some(name),
        namespace: Some(ns.clone()),
        uid: Some(uid),
        api_version: Some("v1".into()),
        ..Default::default()
    };
    kl.emit(&ns, obj, "Warning", &reason, &message);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(requests: &[(&str, &str)]) -> PodSpec {
        serde_json::from_value(serde_json::json!({"containers": [{"name": "c", "resources": {
            "requests": requests.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>()}}]}))
        .unwrap()
    }

    fn allocatable(pairs: &[(&str, &str)]) -> Resources {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), parse_quantity_milli(v).unwrap()))
            .collect()
    }

    #[test]
    fn resources_are_checked_against_what_other_pods_request() {
        let node = allocatable(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]);
        let others = [spec(&[("cpu", "1500m")])];
        assert_eq!(insufficient_resources(&spec(&[("cpu", "500m")]), &others, &node), []);
        assert_eq!(
            insufficient_resources(&spec(&[("cpu", "600m"), ("memory", "5Gi")]), &others, &node),
            [
                Rejection::new(
                    "OutOfcpu",
                    "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"
                ),
                Rejection::new(
                    "OutOfmemory",
                    "Node didn't have enough resource: memory, requested: 5368709120, used: 0, capacity: 4294967296"
                ),
            ]
        );
    }

    #[test]
    fn the_pod_count_is_a_resource_and_missing_extended_resources_are_ignored() {
        let node = allocatable(&[("cpu", "2"), ("pods", "2")]);
        let others = [spec(&[]), spec(&[])];
        assert_eq!(
            insufficient_resources(&spec(&[]), &others, &node),
            [Rejection::new(
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
            )]
        );
        // A cluster-level extended resource the node does not advertise is not the kubelet's
        // to refuse; one it advertises is counted; hugepages are native and always counted.
        assert_eq!(
            insufficient_resources(&spec(&[("example.com/dongle", "1")]), &[], &node),
            []
        );
        let with_dongle = allocatable(&[("cpu", "2"), ("pods", "2"), ("example.com/dongle", "1")]);
        assert_eq!(
            insufficient_resources(&spec(&[("example.com/dongle", "2")]), &[], &with_dongle)[0].reason,
            "OutOfexample.com/dongle"
        );
        assert_eq!(
            insufficient_resources(&spec(&[("hugepages-2Mi", "2Mi")]), &[], &node)[0].reason,
            "OutOfhugepages-2Mi"
        );
    }
}
