//! `[sig-apps] ReplicaSet` and `Deployment` API cases (upstream test/e2e/apps/replica_set.go,
//! deployment.go): a collection of ReplicaSets listed across namespaces and deleted, and the
//! status subresource of each read, updated and patched.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, ReplicaSet, ReplicaSetCondition};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::{delete_collection_and_check, find_in_all_namespaces};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{conditions as wl, deployment, replica_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream replica_set.go "should list and delete a collection of ReplicaSets".
pub(crate) const RS_COLLECTION: &str =
    "[sig-apps] ReplicaSet should list and delete a collection of ReplicaSets [Conformance]";
/// Upstream replica_set.go "should validate Replicaset Status endpoints".
pub(crate) const RS_STATUS: &str = "[sig-apps] ReplicaSet should validate Replicaset Status endpoints [Conformance]";

/// Upstream deployment.go "should validate Deployment Status endpoints".
pub(crate) const DEPLOYMENT_STATUS: &str =
    "[sig-apps] Deployment should validate Deployment Status endpoints [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(RS_COLLECTION, Kind::Adapted, rs_collection),
        case!(RS_STATUS, Kind::Adapted, rs_status),
        case!(DEPLOYMENT_STATUS, Kind::Adapted, deployment_status),
    ]
}

/// A pod template of one pause container labelled `name=<name>`.
fn pause_template(f: &Framework, name: &str) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod(name)
        .label("name", name)
        .container(ContainerBuilder::new("pause", "agnhost").args(["pause"]));
    Ok(template_of(pod.build(f)?))
}

/// Creates ReplicaSet `name` (one pause replica, labelled `e2e=<name>`) and waits until its
/// replica is ready.
async fn ready_replica_set(f: &Framework, name: &str) -> Result<ReplicaSet, CaseError> {
    let mut rs = replica_set(name, 1, pause_template(f, name)?);
    rs.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("e2e".into(), name.into());
    f.create(&rs).await?;
    let ready = f
        .wait_for(
            &f.api::<ReplicaSet>(),
            name,
            wl::replica_set_ready(1),
            "to have 1 ready replica",
        )
        .await?;
    ready.ok_or_else(|| CaseError::failed(format!("ReplicaSet {name} was ready but not returned")))
}

/// Creates a ReplicaSet, finds it listed in all namespaces by label, deletes the collection and
/// checks it is gone.
async fn rs_collection(f: &Framework) -> CaseResult {
    let name = "test-rs";
    ready_replica_set(f, name).await?;
    let selector = format!("e2e={name}");
    find_in_all_namespaces::<ReplicaSet>(f, &selector, f.ns(), name).await?;
    delete_collection_and_check::<ReplicaSet>(f, &selector, &[name.to_string()]).await
}

/// The condition of `type_` in a ReplicaSet's status, if any.
fn condition<'a>(rs: &'a ReplicaSet, type_: &str) -> Option<&'a ReplicaSetCondition> {
    rs.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Reads a ReplicaSet through `/status`, adds a condition with an update of `/status`, then
/// another with a patch of `/status`, and checks each through a fresh read.
async fn rs_status(f: &Framework) -> CaseResult {
    let name = "test-rs";
    ready_replica_set(f, name).await?;
    let api = f.api::<ReplicaSet>();

    f.step("getting /status");
    let mut rs = api.get_status(name).await?;
    let ready = rs.status.as_ref().and_then(|s| s.ready_replicas);
    ensure!(
        ready == Some(1),
        "ReplicaSet {name} read through /status: expected 1 ready replica, got {ready:?}"
    );

    f.step("updating the ReplicaSet status");
    // Upstream retries on conflict: the controller writes the status too.
    for attempt in 1..=5 {
        rs.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(ReplicaSetCondition {
                type_: "StatusUpdate".into(),
                status: "True".into(),
                reason: Some("E2E".into()),
                message: Some("Set from e2e test".into()),
                ..Default::default()
            });
        match api.replace_status(name, &PostParams::default(), &rs).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => rs = api.get_status(name).await?,
            other => {
                other?;
                break;
            }
        }
    }
    let got = api.get(name).await?;
    let updated = condition(&got, "StatusUpdate");
    ensure!(
        updated.is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("E2E")),
        "ReplicaSet {name} after the update of /status: expected condition StatusUpdate=True (reason E2E), got {:?}",
        got.status.as_ref().and_then(|s| s.conditions.as_ref())
    );

    f.step("patching the ReplicaSet status");
    let mut conditions = got.status.and_then(|s| s.conditions).unwrap_or_default();
    conditions.push(ReplicaSetCondition {
        type_: "StatusPatched".into(),
        status: "True".into(),
        ..Default::default()
    });
    let patch = json!({"status": {"conditions": conditions}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let got = api.get(name).await?;
    ensure!(
        condition(&got, "StatusPatched").is_some_and(|c| c.status == "True"),
        "ReplicaSet {name} after the patch of /status: expected condition StatusPatched=True, got {:?}",
        got.status.as_ref().and_then(|s| s.conditions.as_ref())
    );
    Ok(())
}

/// The condition of `type_` in a Deployment's status, if any.
fn deployment_condition<'a>(d: &'a Deployment, type_: &str) -> Option<&'a DeploymentCondition> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// As [`rs_status`], for a Deployment: read `/status`, add a condition with an update of
/// `/status`, another with a patch, each checked through a fresh read.
async fn deployment_status(f: &Framework) -> CaseResult {
    let name = "test-deployment";
    let api = f.api::<Deployment>();
    f.create(&deployment(name, 1, pause_template(f, name)?)).await?;
    f.wait_for(&api, name, wc::is_deployment_rolled_out(), "to roll out")
        .await?;

    f.step("getting /status");
    let mut d = api.get_status(name).await?;
    let available = d.status.as_ref().and_then(|s| s.available_replicas);
    ensure!(
        available == Some(1),
        "Deployment {name} read through /status: expected 1 available replica, got {available:?}"
    );

    f.step("updating the Deployment status");
    for attempt in 1..=5 {
        d.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(DeploymentCondition {
                type_: "StatusUpdate".into(),
                status: "True".into(),
                reason: Some("E2E".into()),
                message: Some("Set from e2e test".into()),
                ..Default::default()
            });
        match api.replace_status(name, &PostParams::default(), &d).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => d = api.get_status(name).await?,
            other => {
                other?;
                break;
            }
        }
    }
    let got = api.get(name).await?;
    ensure!(
        deployment_condition(&got, "StatusUpdate")
            .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("E2E")),
        "Deployment {name} after the update of /status: expected condition StatusUpdate=True (reason E2E), got {:?}",
        got.status.as_ref().and_then(|s| s.conditions.as_ref())
    );

    f.step("patching the Deployment status");
    let mut conditions = got.status.and_then(|s| s.conditions).unwrap_or_default();
    conditions.push(DeploymentCondition {
        type_: "StatusPatched".into(),
        status: "True".into(),
        ..Default::default()
    });
    let patch = json!({"status": {"conditions": conditions}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let got = api.get(name).await?;
    ensure!(
        deployment_condition(&got, "StatusPatched").is_some_and(|c| c.status == "True"),
        "Deployment {name} after the patch of /status: expected condition StatusPatched=True, got {:?}",
        got.status.as_ref().and_then(|s| s.conditions.as_ref())
    );
    Ok(())
}
