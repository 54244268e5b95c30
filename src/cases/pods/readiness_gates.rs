//! `[sig-node] Pods should support pod readiness gates` (upstream test/e2e/common/node/pods.go):
//! a pod's Ready condition waits for the conditions its `spec.readinessGates` name, which
//! someone other than the kubelet sets through the status subresource.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodReadinessGate};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::pause;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::is_ready;
use crate::framework::{CaseResult, Framework, pod_node};

/// Upstream pods.go "should support pod readiness gates".
pub(crate) const READINESS_GATES: &str = "[sig-node] Pods should support pod readiness gates [NodeConformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(READINESS_GATES, Kind::Adapted, readiness_gates)]
}

/// Upstream's two gates.
const GATE_1: &str = "k8s.io/test-condition1";
const GATE_2: &str = "k8s.io/test-condition2";

/// Upstream `syncLoopFrequency`: how long the pod must stay unready with one gate True.
const SYNC_LOOP: Duration = Duration::from_secs(10);

/// Upstream `maxReadyStatusUpdateTolerance`: how long a Ready change may take to show.
const READY_UPDATE: Duration = Duration::from_secs(60);

/// Sets condition `gate` of pod `name` to `status` with a strategic-merge patch of `/status`,
/// as upstream's `patchStatusFmt` does.
async fn set_gate(f: &Framework, name: &str, gate: &str, status: &str) -> CaseResult {
    f.step(format!(
        "patching pod {name} status with condition {gate:?} to {status}"
    ));
    let patch = json!({"status": {"conditions": [{"type": gate, "status": status}]}});
    f.api::<Pod>()
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    Ok(())
}

/// Creates pod `pod-ready` with two readiness gates: it runs but is not Ready; with one gate's
/// condition True it stays unready for a sync period; with both True it becomes Ready; with the
/// first set back to False it is unready again.
async fn readiness_gates(f: &Framework) -> CaseResult {
    let name = "pod-ready";
    let b = f
        .pod(name)
        .label("test", "pod-readiness-gate")
        .container(pause("pod-readiness-gate"))
        .edit_spec(|s| {
            s.readiness_gates = Some(
                [GATE_1, GATE_2]
                    .map(|g| PodReadinessGate {
                        condition_type: g.into(),
                    })
                    .to_vec(),
            );
        });
    f.create_pod(&b).await?;
    let api = f.api::<Pod>();
    let running = f
        .wait_for(&api, name, wc::is_pod_phase("Running"), "to run")
        .await?
        .unwrap_or_default();
    let not_set = format!("readiness gate {GATE_2} is not set");
    ensure!(
        !is_ready(&running),
        "pod {name} on node {} is Ready although {not_set} (nor {GATE_1}): conditions {:?}",
        pod_node(&running),
        running.status.as_ref().and_then(|s| s.conditions.clone())
    );

    set_gate(f, name, GATE_1, "True").await?;
    f.consistently(
        &api,
        name,
        |p: &Pod| !is_ready(p),
        &format!("not Ready although {not_set}"),
        SYNC_LOOP,
    )
    .await?;

    set_gate(f, name, GATE_2, "True").await?;
    f.wait_for_within(
        &api,
        name,
        wc::is_pod_ready(),
        "to become Ready with both readiness gates True",
        READY_UPDATE,
    )
    .await?;

    set_gate(f, name, GATE_1, "False").await?;
    f.wait_for_within(
        &api,
        name,
        |p: Option<&Pod>| p.is_some_and(|p| !is_ready(p)),
        &format!("to become not Ready with readiness gate {GATE_1} False"),
        READY_UPDATE,
    )
    .await?;
    Ok(())
}
