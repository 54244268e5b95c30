//! Pod admission on the node: the OS checks of the kubelet's `lifecycle/predicate.go`. A pod
//! whose `kubernetes.io/os` node selector or `spec.os.name` names another OS than the node's is
//! rejected before anything runs: the kubelet sets it Failed with the reason and message and
//! records a Warning event, as its `rejectPod` does.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use tracing::debug;

use crossconf_model::os::OS_LABEL;

use super::Kubelet;

/// Why the kubelet refuses `pod`, as (reason, message), or `None` when it admits it.
///
/// `pod-os-admission-off` models a kubelet without these checks (before 1.25's pod OS field
/// handling), which starts the pod whatever OS it names.
pub(super) fn refuse(kl: &Kubelet, pod: &Pod) -> Option<(&'static str, &'static str)> {
    if kl.net.faults().is_on("pod-os-admission-off") {
        return None;
    }
    let spec = pod.spec.as_ref()?;
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

/// Rejects `pod`: phase Failed with `reason` and `message` and a Warning event, once; when the
/// pod is being deleted, completes the deletion instead (nothing of it ever ran).
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
    let patch = serde_json::json!({"status": {"phase": "Failed", "reason": reason, "message": message}});
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
