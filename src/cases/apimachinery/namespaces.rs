//! `[sig-api-machinery] Namespaces [Serial]` conformance cases of upstream
//! test/e2e/apimachinery/namespace.go: a deleted namespace takes its pods and Services with it
//! (the namespace controller), and a namespace's labels, status and `spec.finalizers` are
//! written through update, patch, `/status` and `/finalize`.
//!
//! Upstream's namespaces get random names, so its "recreate the namespace, the pod is not
//! there" check looks into a namespace that never held the pod; these recreate the namespace
//! under the same name, which also catches content left behind in storage.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Namespace, NamespaceCondition, Pod, Service, ServiceAccount, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::wait::conditions::is_deleted;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::wait::conditions as wc;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream "should ensure that all pods are removed when a namespace is deleted".
pub(crate) const PODS_REMOVED: &str = "[sig-api-machinery] Namespaces [Serial] should ensure that all pods are removed \
                                       when a namespace is deleted [Conformance]";
/// Upstream "should ensure that all services are removed when a namespace is deleted".
pub(crate) const SERVICES_REMOVED: &str = "[sig-api-machinery] Namespaces [Serial] should ensure that all services are \
                                           removed when a namespace is deleted [Conformance]";
/// Upstream "should patch a Namespace".
pub(crate) const PATCH: &str = "[sig-api-machinery] Namespaces [Serial] should patch a Namespace [Conformance]";
/// Upstream "should apply changes to a namespace status".
pub(crate) const STATUS: &str =
    "[sig-api-machinery] Namespaces [Serial] should apply changes to a namespace status [Conformance]";
/// Upstream "should apply an update to a Namespace".
pub(crate) const UPDATE: &str =
    "[sig-api-machinery] Namespaces [Serial] should apply an update to a Namespace [Conformance]";
/// Upstream "should apply a finalizer to a Namespace".
pub(crate) const FINALIZER: &str =
    "[sig-api-machinery] Namespaces [Serial] should apply a finalizer to a Namespace [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(PODS_REMOVED, Kind::Adapted, pods_removed),
        case!(SERVICES_REMOVED, Kind::Adapted, services_removed),
        case!(PATCH, Kind::Adapted, patch),
        case!(STATUS, Kind::Adapted, status),
        case!(UPDATE, Kind::Adapted, update),
        case!(FINALIZER, Kind::Adapted, finalizer),
    ]
}

/// Upstream's bound on a namespace's removal: 60 s, plus the pod's grace period (the default
/// 30 s) where it holds a pod.
const NS_GONE: Duration = Duration::from_secs(60);
const POD_GRACE: Duration = Duration::from_secs(30);
/// Upstream `retry.DefaultRetry`'s attempts on a conflict.
const ATTEMPTS: u32 = 5;
/// Upstream's base name of the namespaces it deletes.
const DELETE_TEST: &str = "nsdeletetest";

fn namespaces(f: &Framework) -> Api<Namespace> {
    f.api_all::<Namespace>()
}

/// Waits for the `default` ServiceAccount of namespace `ns` (upstream
/// `WaitForDefaultServiceAccountInNamespace`).
async fn wait_default_sa(f: &Framework, ns: &str) -> CaseResult {
    let api: Api<ServiceAccount> = Api::namespaced(f.client(), ns);
    f.wait_for(
        &api,
        "default",
        |sa: Option<&ServiceAccount>| sa.is_some(),
        "to be provisioned",
    )
    .await?;
    Ok(())
}

/// Deletes namespace `ns` and waits until it is gone, at most `within`.
async fn delete_and_wait_gone(f: &Framework, ns: &str, within: Duration) -> CaseResult {
    let uid = namespaces(f).get(ns).await?.metadata.uid.unwrap_or_default();
    f.step(format!("deleting namespace {ns}"));
    f.delete_extra_namespace(ns).await?;
    f.wait_for_within(&namespaces(f), ns, is_deleted(&uid), "to be removed", within)
        .await?;
    Ok(())
}

/// Upstream: a running pod goes with its namespace; the namespace created again under the same
/// name holds no such pod.
async fn pods_removed(f: &Framework) -> CaseResult {
    let ns = f.create_scoped_namespace(DELETE_TEST, &[]).await?;
    wait_default_sa(f, &ns).await?;
    let mut pod = f
        .pod("test-pod")
        .container(ContainerBuilder::new("nginx", "pause"))
        .build(f)?;
    pod.metadata.namespace = Some(ns.clone());
    let pods: Api<Pod> = Api::namespaced(f.client(), &ns);
    f.step(format!("creating pod test-pod in namespace {ns}"));
    pods.create(&PostParams::default(), &pod)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating pod test-pod in namespace {ns}")))?;
    f.wait_for(&pods, "test-pod", wc::is_pod_phase("Running"), "to be running")
        .await?;
    delete_and_wait_gone(f, &ns, NS_GONE + POD_GRACE).await?;
    f.step(format!("recreating namespace {ns}"));
    f.create_scoped_namespace(DELETE_TEST, &[]).await?;
    let found = pods.get_opt("test-pod").await?;
    f.delete_extra_namespace(&ns).await?;
    if let Some(p) = found {
        fail!(
            "pod test-pod of the deleted namespace {ns} is still there after the namespace was recreated (uid {}, phase {:?}); \
             expected the namespace controller to have removed it",
            p.uid().unwrap_or_default(),
            p.status.and_then(|s| s.phase)
        );
    }
    Ok(())
}

/// Upstream: a Service goes with its namespace; the namespace created again under the same
/// name holds no such Service.
async fn services_removed(f: &Framework) -> CaseResult {
    let ns = f.create_scoped_namespace(DELETE_TEST, &[]).await?;
    wait_default_sa(f, &ns).await?;
    let service = Service {
        metadata: ObjectMeta {
            name: Some("test-service".into()),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(
                [("foo", "bar"), ("baz", "blah")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
            ),
            ports: Some(vec![ServicePort {
                port: 80,
                target_port: Some(IntOrString::Int(80)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    let services: Api<Service> = Api::namespaced(f.client(), &ns);
    f.step(format!("creating Service test-service in namespace {ns}"));
    services
        .create(&PostParams::default(), &service)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating Service test-service in namespace {ns}")))?;
    delete_and_wait_gone(f, &ns, NS_GONE).await?;
    f.step(format!("recreating namespace {ns}"));
    f.create_scoped_namespace(DELETE_TEST, &[]).await?;
    let found = services.get_opt("test-service").await?;
    f.delete_extra_namespace(&ns).await?;
    if let Some(s) = found {
        fail!(
            "Service test-service of the deleted namespace {ns} is still there after the namespace was recreated (uid {}); \
             expected the namespace controller to have removed it",
            s.uid().unwrap_or_default()
        );
    }
    Ok(())
}

fn rv_number(ns: &Namespace) -> u64 {
    ns.resource_version().and_then(|rv| rv.parse().ok()).unwrap_or_default()
}

/// Upstream: a strategic merge patch adds a label; the answer has a newer resourceVersion and
/// a read shows the label.
async fn patch(f: &Framework) -> CaseResult {
    let name = f.create_scoped_namespace("nspatchtest", &[]).await?;
    let api = namespaces(f);
    let created = api.get(&name).await?;
    ensure!(
        rv_number(&created) > 0,
        "namespace {name} has no valid resourceVersion: {:?}",
        created.resource_version()
    );
    f.step(format!("patching namespace {name}"));
    let body = json!({"metadata": {"labels": {"testLabel": "testValue"}}});
    let patched = api
        .patch(&name, &PatchParams::default(), &Patch::Strategic(&body))
        .await?;
    ensure!(
        rv_number(&patched) > rv_number(&created),
        "the patched namespace {name} should have a newer resourceVersion than {:?}, has {:?}",
        created.resource_version(),
        patched.resource_version()
    );
    let read = api.get(&name).await?;
    f.delete_extra_namespace(&name).await?;
    let label = read.labels().get("testLabel").cloned();
    ensure!(
        label.as_deref() == Some("testValue"),
        "namespace {name} was not patched: label testLabel is {label:?}, expected \"testValue\"; labels {:?}",
        read.labels()
    );
    Ok(())
}

fn conditions(ns: &Namespace) -> Vec<NamespaceCondition> {
    ns.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// Upstream: the case namespace's status reads Active; a merge patch of `/status` adds an
/// annotation and a condition, and an update of `/status` appends another.
async fn status(f: &Framework) -> CaseResult {
    let ns = f.ns().to_string();
    let api = namespaces(f);
    let read = api.get_status(&ns).await?;
    let phase = read.status.as_ref().and_then(|s| s.phase.clone());
    ensure!(
        phase.as_deref() == Some("Active"),
        "the status of namespace {ns} reads phase {phase:?}, expected Active"
    );
    f.step(format!("patching the status of namespace {ns}"));
    let body = json!({
        "metadata": {"annotations": {"e2e-patched-ns-status": ns}},
        "status": {"conditions": [{"type": "StatusPatch", "status": "True", "reason": "E2E", "message": "Patched by an e2e test"}]}
    });
    let patched = api
        .patch_status(&ns, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    let annotation = patched.annotations().get("e2e-patched-ns-status").cloned();
    ensure!(
        annotation.as_deref() == Some(ns.as_str()),
        "the status patch of namespace {ns} did not keep its annotation: e2e-patched-ns-status is {annotation:?}"
    );
    match conditions(&patched).last() {
        Some(c) if c.reason.as_deref() == Some("E2E") && c.message.as_deref() == Some("Patched by an e2e test") => {}
        other => fail!(
            "after the status patch of namespace {ns}, the last condition is {other:?}; expected reason E2E, message \"Patched by an e2e test\""
        ),
    }
    f.step(format!("updating the status of namespace {ns}"));
    let mut attempt = 1;
    let updated = loop {
        let mut current = api.get_status(&ns).await?;
        let mut conds = conditions(&current);
        conds.push(NamespaceCondition {
            type_: "StatusUpdate".into(),
            status: "True".into(),
            reason: Some("E2E".into()),
            message: Some("Updated by an e2e test".into()),
            last_transition_time: None,
        });
        current.status.get_or_insert_with(Default::default).conditions = Some(conds);
        match api.replace_status(&ns, &PostParams::default(), &current).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => attempt += 1,
            other => break other?,
        }
    };
    match conditions(&updated).last() {
        Some(c) if c.type_ == "StatusUpdate" && c.message.as_deref() == Some("Updated by an e2e test") => Ok(()),
        other => fail!(
            "after the status update of namespace {ns}, the last condition is {other:?}; expected type StatusUpdate, message \"Updated by an e2e test\""
        ),
    }
}

/// Upstream: an update of the case namespace sets label `<namespace>=updated`.
async fn update(f: &Framework) -> CaseResult {
    let ns = f.ns().to_string();
    f.step(format!("updating namespace {ns}"));
    let key = ns.clone();
    let updated = replace_retrying(&namespaces(f), &ns, move |n: &mut Namespace| {
        n.labels_mut().insert(key.clone(), "updated".into());
    })
    .await?;
    let label = updated.labels().get(&ns).cloned();
    ensure!(
        label.as_deref() == Some("updated"),
        "namespace {ns} was not updated: label {ns} is {label:?}, expected \"updated\"; labels {:?}",
        updated.labels()
    );
    Ok(())
}

/// The finalizer upstream adds through `/finalize`.
const FAKE_FINALIZER: &str = "e2e.example.com/fakeFinalizer";

/// Writes `spec.finalizers` of namespace `name` through `/finalize`, changed by `change`,
/// retrying on a conflict as upstream's `RetryOnConflict` does.
async fn finalize(api: &Api<Namespace>, name: &str, change: impl Fn(&mut Vec<String>)) -> Result<Namespace, CaseError> {
    let mut attempt = 1;
    loop {
        let mut ns = api.get(name).await?;
        let spec = ns.spec.get_or_insert_with(Default::default);
        let mut finalizers = spec.finalizers.clone().unwrap_or_default();
        change(&mut finalizers);
        spec.finalizers = Some(finalizers);
        match api
            .replace_subresource("finalize", name, &PostParams::default(), &ns)
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => attempt += 1,
            other => return Ok(other?),
        }
    }
}

fn finalizers(ns: &Namespace) -> Vec<String> {
    ns.spec.as_ref().and_then(|s| s.finalizers.clone()).unwrap_or_default()
}

/// Upstream: a finalizer added through `/finalize` is in the answer's `spec.finalizers`, and
/// once removed through `/finalize` it is gone.
async fn finalizer(f: &Framework) -> CaseResult {
    let name = f.create_scoped_namespace("e2e-ns", &[]).await?;
    let api = namespaces(f);
    f.step(format!("adding finalizer {FAKE_FINALIZER} to namespace {name}"));
    let added = finalize(&api, &name, |fs| fs.push(FAKE_FINALIZER.into())).await?;
    ensure!(
        finalizers(&added).iter().any(|x| x == FAKE_FINALIZER),
        "finalizer {FAKE_FINALIZER} was not found after /finalize; namespace {name} has {:?}",
        finalizers(&added)
    );
    f.step(format!("removing finalizer {FAKE_FINALIZER} from namespace {name}"));
    let removed = finalize(&api, &name, |fs| fs.retain(|x| x != FAKE_FINALIZER)).await?;
    f.delete_extra_namespace(&name).await?;
    ensure!(
        !finalizers(&removed).iter().any(|x| x == FAKE_FINALIZER),
        "finalizer {FAKE_FINALIZER} was still found after removing it through /finalize; namespace {name} has {:?}",
        finalizers(&removed)
    );
    Ok(())
}
