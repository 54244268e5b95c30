//! RuntimeClass admission of pods (upstream `test/e2e/common/node/runtimeclass.go`): the API
//! server's RuntimeClass plugin refuses a pod naming a class that does not exist (403, checked
//! with a dry-run create as upstream does), and copies the class's `overhead.podFixed` into
//! `spec.overhead` of a pod it admits. None of these cases needs the handler to run anything: they
//! stop once the pod is refused or scheduled.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::api::node::v1::{Overhead, RuntimeClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};

use crate::case;
use crate::cases::apiops::create_cluster_scoped;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node, render_kube_error};
use crate::{ensure, fail};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(REJECT_NONEXISTENT, Kind::Adapted, reject_nonexistent),
        case!(REJECT_DELETED, Kind::Adapted, reject_deleted),
        case!(SCHEDULE_WITHOUT_OVERHEAD, Kind::Adapted, schedule_without_overhead),
        case!(SCHEDULE_WITH_OVERHEAD, Kind::Adapted, schedule_with_overhead),
    ]
}

/// Upstream's `e2eruntimeclass.PreconfiguredRuntimeClassHandler`: the scheduling cases never
/// need the handler to exist on the node.
const HANDLER: &str = "test-handler";

/// Upstream `NewRuntimeClassPod`: a run-once container that exits at once, no token mounted.
fn runtime_class_pod(f: &Framework, rc: &str) -> PodBuilder {
    let rc = rc.to_string();
    f.pod("test-pod")
        .restart_policy("Never")
        .container(ContainerBuilder::new("test", "busybox").command(f.target_os().shell("exit 0")))
        .edit_spec(move |s: &mut PodSpec| {
            s.runtime_class_name = Some(rc.clone());
            s.automount_service_account_token = Some(false);
        })
}

/// Creates RuntimeClass `<namespace>-<base>` (RuntimeClasses are cluster-scoped and both OS
/// trials share one cluster) with `handler` and `overhead`; returns its name.
async fn create_runtime_class(
    f: &Framework,
    base: &str,
    handler: &str,
    overhead: Option<Overhead>,
) -> Result<String, CaseError> {
    let name = format!("{}-{base}", f.ns());
    let rc = RuntimeClass {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        handler: handler.to_string(),
        overhead,
        ..Default::default()
    };
    create_cluster_scoped(f, &rc).await?;
    Ok(name)
}

/// Deletes RuntimeClass `name` (a replay answered 404 counts as done: the retrying client reads
/// it so).
async fn delete_runtime_class(f: &Framework, name: &str) -> CaseResult {
    f.step(format!("deleting RuntimeClass {name}"));
    f.api_all::<RuntimeClass>()
        .delete(name, &DeleteParams::default())
        .await
        .map_err(|e| CaseError::from(e).context(format!("deleting RuntimeClass {name}")))?;
    Ok(())
}

/// Upstream `expectPodRejection`: a dry-run create of a pod naming `rc` must be refused with
/// 403 Forbidden; `Err` says what the server did instead.
async fn expect_rejection(f: &Framework, rc: &str) -> CaseResult {
    let pod = runtime_class_pod(f, rc).build(f)?;
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    f.step(format!("creating (dry run) a pod requesting RuntimeClass {rc}"));
    match f.api::<Pod>().create(&dry, &pod).await {
        Ok(_) => fail!(
            "a pod requesting RuntimeClass {rc}, which does not exist, was admitted (dry run); expected 403 Forbidden from the RuntimeClass admission plugin"
        ),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            f.step(format!("refused: {}", s.message));
            Ok(())
        }
        Err(e) => fail!(
            "a pod requesting RuntimeClass {rc}, which does not exist: expected 403 Forbidden, got {}",
            render_kube_error(&e)
        ),
    }
}

/// Upstream runtimeclass.go "should reject a Pod requesting a non-existent RuntimeClass".
pub(crate) const REJECT_NONEXISTENT: &str = "[sig-node] RuntimeClass should reject a Pod requesting a non-existent \
     RuntimeClass [NodeConformance] [Conformance]";

/// A pod naming a RuntimeClass that was never created is refused at admission.
async fn reject_nonexistent(f: &Framework) -> CaseResult {
    expect_rejection(f, &format!("{}-nonexistent", f.ns())).await
}

/// Upstream runtimeclass.go "should reject a Pod requesting a deleted RuntimeClass".
pub(crate) const REJECT_DELETED: &str = "[sig-node] RuntimeClass should reject a Pod requesting a deleted \
     RuntimeClass [NodeConformance] [Conformance]";

/// A RuntimeClass is created, deleted and waited gone; a pod naming it is then refused (the
/// admission plugin reads the class live, so a deleted class is as absent as one never made).
async fn reject_deleted(f: &Framework) -> CaseResult {
    let rc = create_runtime_class(f, "delete-me", "runc", None).await?;
    delete_runtime_class(f, &rc).await?;
    f.wait_for(
        &f.api_all::<RuntimeClass>(),
        &rc,
        |o: Option<&RuntimeClass>| o.is_none(),
        "to disappear",
    )
    .await?;
    expect_rejection(f, &rc).await
}

/// Creates the class and its pod, waits until the scheduler placed the pod, and returns it.
async fn schedule_pod(f: &Framework, overhead: Option<Overhead>) -> Result<(String, Pod), CaseError> {
    let rc = create_runtime_class(f, "preconfigured-handler", HANDLER, overhead).await?;
    let builder = runtime_class_pod(f, &rc);
    f.create_pod(&builder).await?;
    let scheduled = f
        .wait_for(
            &f.api::<Pod>(),
            builder.name(),
            |p: Option<&Pod>| {
                p.and_then(|p| p.spec.as_ref())
                    .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()))
            },
            "to be scheduled",
        )
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {} vanished", builder.name())))?;
    Ok((rc, scheduled))
}

/// Deletes the case's RuntimeClass after the checks ran, keeping the checks' verdict first.
async fn finish(f: &Framework, rc: &str, verdict: CaseResult) -> CaseResult {
    let cleaned = delete_runtime_class(f, rc).await;
    verdict.and(cleaned)
}

/// Upstream runtimeclass.go "should schedule a Pod requesting a RuntimeClass without PodOverhead".
pub(crate) const SCHEDULE_WITHOUT_OVERHEAD: &str = "[sig-node] RuntimeClass should schedule a Pod requesting a \
     RuntimeClass without PodOverhead [NodeConformance] [Conformance]";

/// A class without overhead: the pod is admitted, scheduled, and carries no `spec.overhead`.
async fn schedule_without_overhead(f: &Framework) -> CaseResult {
    let (rc, pod) = schedule_pod(f, None).await?;
    let overhead = pod.spec.as_ref().and_then(|s| s.overhead.clone()).unwrap_or_default();
    let verdict = if overhead.is_empty() {
        Ok(())
    } else {
        Err(CaseError::failed(format!(
            "pod {} (RuntimeClass {rc} without overhead) scheduled on {}: expected no spec.overhead, got {overhead:?}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod_node(&pod)
        )))
    };
    finish(f, &rc, verdict).await
}

/// Upstream runtimeclass.go "should schedule a Pod requesting a RuntimeClass and initialize its Overhead".
pub(crate) const SCHEDULE_WITH_OVERHEAD: &str = "[sig-node] RuntimeClass should schedule a Pod requesting a \
     RuntimeClass and initialize its Overhead [NodeConformance] [Conformance]";

/// A class with `overhead.podFixed` cpu 10m and memory 1Mi: the admitted, scheduled pod carries
/// exactly that in `spec.overhead`.
async fn schedule_with_overhead(f: &Framework) -> CaseResult {
    let fixed = BTreeMap::from([
        ("cpu".to_string(), Quantity("10m".into())),
        ("memory".to_string(), Quantity("1Mi".into())),
    ]);
    let (rc, pod) = schedule_pod(
        f,
        Some(Overhead {
            pod_fixed: Some(fixed.clone()),
        }),
    )
    .await?;
    let overhead = pod.spec.as_ref().and_then(|s| s.overhead.clone()).unwrap_or_default();
    let verdict = (|| {
        ensure!(
            overhead == fixed,
            "pod {} (RuntimeClass {rc} with overhead.podFixed cpu 10m, memory 1Mi) scheduled on {}: expected spec.overhead {fixed:?} set by RuntimeClass admission, got {overhead:?}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod_node(&pod)
        );
        Ok(())
    })();
    finish(f, &rc, verdict).await
}
