//! A failing init container on a `restartPolicy: Always` pod (upstream
//! `test/e2e/common/node/init_container.go`): the kubelet restarts the failing init container
//! with back-off, never runs the next init container or the app container, and the pod stays
//! Pending and not Initialized.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(INIT_FAIL_RESTART_ALWAYS, Kind::Adapted, init_fail_restart_always)]
}

/// Upstream waits for the pod start timeout; three back-offs (10 s, 20 s, 40 s on a real
/// kubelet) fit in it.
const RESTARTS_WITHIN: Duration = Duration::from_secs(150);

/// Upstream init_container.go "should not start app containers if init containers fail on a
/// RestartAlways pod".
pub(crate) const INIT_FAIL_RESTART_ALWAYS: &str = "[sig-node] InitContainer [NodeConformance] should not start app \
     containers if init containers fail on a RestartAlways pod [Conformance]";

fn waiting_reason(s: &ContainerStatus) -> Option<&str> {
    s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

/// What breaks upstream's invariants in `pod`: an app container or init2 out of Waiting
/// `PodInitializing`, or init1 terminated with exit 0.
fn violation(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    for s in status.container_statuses.iter().flatten() {
        if waiting_reason(s) != Some("PodInitializing") {
            return Some(format!(
                "app container {} left Waiting PodInitializing: {:?}",
                s.name, s.state
            ));
        }
    }
    let inits = status.init_container_statuses.as_deref().unwrap_or_default();
    if let Some(init2) = inits.get(1)
        && waiting_reason(init2) != Some("PodInitializing")
    {
        return Some(format!(
            "init2 left Waiting PodInitializing although init1 fails: {:?}",
            init2.state
        ));
    }
    if let Some(t) = inits
        .first()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        && t.exit_code == 0
    {
        return Some("init1 (/bin/false) terminated with exit 0".into());
    }
    None
}

fn init1_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|s| s.first())
        .map_or(0, |s| s.restart_count)
}

/// init1 runs `/bin/false`, init2 `/bin/true`, the app container is pause with a 100m CPU
/// limit. Once init1 has restarted three times (and nothing else ran meanwhile), the pod is
/// Pending with Initialized False, reason `ContainersNotInitialized`, message `containers with
/// incomplete status: [init1 init2]`.
async fn init_fail_restart_always(f: &Framework) -> CaseResult {
    let name = "pod-init-fail-always";
    let builder = f
        .pod(name)
        .restart_policy("Always")
        .init_container(ContainerBuilder::new("init1", "busybox").command(["/bin/false"]))
        .init_container(ContainerBuilder::new("init2", "busybox").command(["/bin/true"]))
        .container(ContainerBuilder::new("run1", "pause").with(|c: &mut Container| {
            c.resources = Some(ResourceRequirements {
                limits: Some([("cpu".to_string(), Quantity("100m".into()))].into()),
                ..Default::default()
            });
        }));
    f.create_pod(&builder).await?;
    let pod = super::wait_pod(
        f,
        name,
        |p: Option<&Pod>| p.is_some_and(|p| violation(p).is_some() || init1_restarts(p) >= 3),
        "init1 to restart 3 times",
        RESTARTS_WITHIN,
    )
    .await?;
    let node = pod_node(&pod);
    if let Some(v) = violation(&pod) {
        crate::fail!("pod {name} on node {node}: {v}");
    }
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.clone().unwrap_or_default();
    ensure!(
        phase == "Pending",
        "pod {name} on node {node}: expected phase Pending while init1 fails, got {phase}"
    );
    let init = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Initialized")
        .cloned();
    let want_message = "containers with incomplete status: [init1 init2]";
    ensure!(
        init.as_ref().is_some_and(|c| c.status == "False"
            && c.reason.as_deref() == Some("ContainersNotInitialized")
            && c.message.as_deref() == Some(want_message)),
        "pod {name} on node {node}: expected condition Initialized=False (ContainersNotInitialized: {want_message:?}), got {init:?}"
    );
    let inits = status.init_container_statuses.map_or(0, |s| s.len());
    ensure!(
        inits == 2,
        "pod {name} on node {node}: expected 2 init container statuses, got {inits}"
    );
    Ok(())
}
