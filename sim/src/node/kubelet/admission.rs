//! Pod admission on the node, as the kubelet's `lifecycle/predicate.go` `Admit`: first the OS
//! checks (a pod whose `kubernetes.io/os` node selector or `spec.os.name` names another OS than
//! the node's), then the general predicates the kubelet shares with the scheduler, of which the
//! host-port check is modelled (a host port an admitted, still active pod of the node already
//! holds). A refused pod never runs: the kubelet sets it Failed with the reason and "Pod was
//! rejected: " and the message, and records a Warning event with the message, as its
//! `rejectPod` does.
//!
//! The other general predicates are left out: node name (the kubelet only watches pods bound to
//! it, so it always holds), node affinity and resources (the scheduler's checks of the same,
//! against the same node, already passed).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodSpec};
use kube::Api;
use kube::api::{Patch, PatchParams};
use tracing::debug;

use crossconf_model::os::OS_LABEL;

use super::{Kubelet, PodRt};
use crate::control::predicates::host_ports_taken;

/// Upstream's predicate failure for a host port already in use on the node: the reason is the
/// predicate's name, the message `PredicateFailureError.Error()`.
const NODE_PORTS: (&str, &str) = (
    "NodePorts",
    "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
);

/// Why the kubelet refuses `pod`, as (reason, message), or `None` when it admits it.
///
/// `pod-os-admission-off` models a kubelet without the OS checks (before 1.25's pod OS field
/// handling), which starts the pod whatever OS it names; `kubelet-host-port-admission-off` one
/// whose admission skips the host-port predicate.
pub(super) fn refuse(
    kl: &Kubelet,
    admitted: &HashMap<String, Arc<PodRt>>,
    pod: &Pod,
) -> Option<(&'static str, &'static str)> {
    let spec = pod.spec.as_ref()?;
    if !kl.net.faults().is_on("pod-os-admission-off")
        && let Some(refused) = refuse_os(kl, spec)
    {
        return Some(refused);
    }
    if !kl.net.faults().is_on("kubelet-host-port-admission-off") {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let active = active_pod_specs(admitted, uid);
        if host_ports_taken(spec, &active) {
            return Some(NODE_PORTS);
        }
    }
    None
}

fn refuse_os(kl: &Kubelet, spec: &PodSpec) -> Option<(&'static str, &'static str)> {
    let node_os = kl.cfg.os.as_str();
    if spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(OS_LABEL))
        .is_some_and(|os| os != node_os)
    {
        return Some((
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        ));
    }
    if spec.os.as_ref().is_some_and(|os| os.name != node_os) {
        return Some((
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS",
        ));
    }
    None
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
pub(super) async fn reject(kl: Arc<Kubelet>, pod: Pod, reason: &'static str, message: &'static str) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(kl.client.clone(), &ns);
    if pod.metadata.deletion_timestamp.is_some() {
        super::pod_worker::final_delete(&kl, &ns, &name, &uid).await;
        return;
    }
    let status = pod.status.as_ref();
    if status.and_then(|s| s.reason.as_deref()) == Some(reason) {
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
    kl.emit(&ns, obj, "Warning", reason, message);
}
