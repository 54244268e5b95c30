//! Kubelet admission of a pod naming another OS (upstream
//! `test/e2e/common/node/pod_admission.go`): a pod whose `spec.os.name` is not the node's OS,
//! bound straight to the node, is failed by the kubelet with reason `PodOSNotSupported`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodSpec};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::wait::conditions as wc;
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(POD_OS_REJECTION, Kind::Adapted, pod_os_rejection)]
}

/// Upstream waits `PodStartShort` (2 minutes); the kubelet rejects at admission, at once, so
/// half a minute is plenty.
const REJECTED_WITHIN: Duration = Duration::from_secs(30);

/// Upstream pod_admission.go.
pub(crate) const POD_OS_REJECTION: &str = "[sig-node] PodOSRejection [NodeConformance] Kubelet should reject pod when \
     the node OS doesn't match pod's OS";

/// Upstream takes a Linux node and a pod with `spec.os.name: windows`; here the node is one of
/// the target OS and the pod names the other OS, so both pools are checked. The pod carries no
/// OS node selector (as upstream's), so the rejection comes from the OS field.
async fn pod_os_rejection(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = nodes[0].name.clone();
    let name = "wrong-pod-os";
    let builder = PodBuilder::new(name, os.other())
        .on_node(&node)
        .container(ContainerBuilder::new(name, "agnhost").args(["pause"]))
        .edit_spec(|s: &mut PodSpec| s.node_selector = None);
    f.create_pod(&builder).await?;
    let pod = f
        .wait_for_within(
            &f.api::<Pod>(),
            name,
            wc::is_pod_finished(),
            "to be rejected by the kubelet",
            REJECTED_WITHIN,
        )
        .await?
        .unwrap_or_default();
    let status = pod.status.unwrap_or_default();
    let (phase, reason) = (status.phase.unwrap_or_default(), status.reason.unwrap_or_default());
    ensure!(
        phase == "Failed" && reason == "PodOSNotSupported",
        "pod {name} with spec.os.name={} bound to {} node {node}: expected phase Failed with reason PodOSNotSupported, got {phase} {reason:?} ({:?})",
        os.other().as_str(),
        os.title(),
        status.message
    );
    Ok(())
}
