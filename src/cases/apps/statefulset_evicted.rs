//! `[sig-apps] StatefulSet` "Should recreate evicted statefulset" (upstream
//! test/e2e/apps/statefulset.go): a StatefulSet pod its node refuses is deleted and recreated
//! by the StatefulSet controller until the node can run it.
//!
//! Upstream's flow: pod `test-pod` holds host port 21017 on a node; StatefulSet `ss` (one
//! replica) is pinned to that node (`nodeName` in its template, past the scheduler) with the
//! same host port, so the kubelet's admission rejects `ss-0` (phase Failed, reason `NodePorts`)
//! and the controller deletes it and makes another. Once a deletion of `ss-0` is seen, `test-pod`
//! is removed, and `ss-0` must come back Running as a new pod (another uid than the last seen).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::services::ServiceBuilder;
use crate::framework::watch_events::{EventType, Resume};
use crate::framework::workloads::{stateful_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream "Should recreate evicted statefulset".
pub(crate) const STS_RECREATE_EVICTED: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality \
     [StatefulSetBasic] Should recreate evicted statefulset [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(STS_RECREATE_EVICTED, Kind::Adapted, sts_recreate_evicted)]
}

const POD: &str = "test-pod";
const SET: &str = "ss";
const STATEFUL_POD: &str = "ss-0";
/// How long a wait may take (upstream `statefulPodTimeout` is 5 minutes; a kubelet rejects a
/// pod at once, so this allows for a loaded cluster without spending minutes on a broken one).
const WAIT: Duration = Duration::from_secs(60);

/// Upstream's `conflictingPort`: host port 21017 to container port 21017, named `conflict`.
fn conflicting_port() -> ContainerPort {
    ContainerPort {
        host_port: Some(21017),
        container_port: 21017,
        name: Some("conflict".into()),
        ..Default::default()
    }
}

fn phase_of(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

/// `phase` and, when set, `(reason: message)`, for messages.
fn describe(pod: &Pod) -> String {
    let st = pod.status.clone().unwrap_or_default();
    match st.reason {
        Some(reason) => format!(
            "{} ({reason}: {})",
            st.phase.unwrap_or_default(),
            st.message.unwrap_or_default()
        ),
        None => st.phase.unwrap_or_default(),
    }
}

/// The upstream flow (see the module documentation).
async fn sts_recreate_evicted(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let node = f.require_nodes(os, 1).await?[0].name.clone();
    f.create(
        &ServiceBuilder::headless("test")
            .selector("foo", "bar")
            .selector("baz", "blah")
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;

    f.step(format!("creating pod {POD} holding host port 21017 on node {node}"));
    let holder = f
        .pod(POD)
        .on_node(&node)
        .container(ContainerBuilder::new("webserver", "httpd").with(|c: &mut Container| {
            c.ports.get_or_insert_default().push(conflicting_port());
        }));
    let holder = f.create_pod(&holder).await?;
    f.wait_for_within(
        &f.api::<Pod>(),
        POD,
        |p: Option<&Pod>| p.is_some_and(|p| phase_of(p) == "Running"),
        "to run",
        WAIT,
    )
    .await?;

    f.step(format!(
        "creating StatefulSet {SET} on node {node} with the same host port"
    ));
    let template = f
        .pod(SET)
        .label("foo", "bar")
        .label("baz", "blah")
        .on_node(&node)
        .container(ContainerBuilder::new("webserver", "httpd").with(|c: &mut Container| {
            c.ports.get_or_insert_default().push(conflicting_port());
        }))
        .build(f)?;
    f.create(&stateful_set(SET, "test", 1, template_of(template))).await?;

    f.step(format!(
        "waiting until the StatefulSet controller deletes {STATEFUL_POD} at least once (its node refuses it)"
    ));
    let api: Api<Pod> = f.api();
    let mut watch = f
        .watch_events_by_fields(&api, &format!("metadata.name={STATEFUL_POD}"), Resume::Relist)
        .await?;
    let mut last: Option<Pod> = api.get_opt(STATEFUL_POD).await?;
    let until = Instant::now() + WAIT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match watch.next(left).await? {
            Some(n) if n.kind == EventType::Deleted => {
                if last.is_some() {
                    break;
                }
            }
            Some(n) => last = Some(n.object),
            None => {
                let seen = last.as_ref().map_or_else(
                    || "never seen".to_string(),
                    |p| format!("uid {}, last {}", p.uid().unwrap_or_default(), describe(p)),
                );
                fail!(
                    "pod {STATEFUL_POD} expected to be re-created at least once: within {WAIT:?} the StatefulSet \
                     controller deleted no {STATEFUL_POD} ({seen}) although {POD} holds its host port 21017 on \
                     node {node}"
                );
            }
        }
    }
    let last = last.ok_or_else(|| CaseError::failed(format!("no {STATEFUL_POD} was seen")))?;
    let initial_uid = last.uid().unwrap_or_default();
    f.step(format!(
        "{STATEFUL_POD} uid {initial_uid} was deleted, last seen {}",
        describe(&last)
    ));

    f.step(format!("removing pod {POD}"));
    api.delete(POD, &DeleteParams::default().grace_period(0)).await?;
    f.wait_for_within(
        &api,
        POD,
        |p: Option<&Pod>| p.is_none_or(|p| p.uid() != holder.uid()),
        "to be deleted",
        WAIT,
    )
    .await?;

    f.step(format!("waiting for {STATEFUL_POD} to be recreated and to run"));
    f.wait_for_within(
        &api,
        STATEFUL_POD,
        |p: Option<&Pod>| p.is_some_and(|p| phase_of(p) == "Running" && p.uid().unwrap_or_default() != initial_uid),
        &format!("to be recreated (a uid other than {initial_uid}) and running once {POD} is gone"),
        WAIT,
    )
    .await?;
    Ok(())
}
