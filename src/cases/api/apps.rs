//! `[sig-apps] ReplicaSet` and `Deployment` API cases (upstream test/e2e/apps/replica_set.go,
//! deployment.go): a collection of ReplicaSets listed across namespaces and deleted, and the
//! status subresource of each read, updated and patched.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::ops::status_conditions_round_trip;
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

/// Reads a ReplicaSet through `/status`, then adds a condition with an update of `/status` and
/// another with a patch, each seen through a watch ([`status_conditions_round_trip`]).
async fn rs_status(f: &Framework) -> CaseResult {
    let name = "test-rs";
    ready_replica_set(f, name).await?;
    f.step("getting /status");
    let rs = f.api::<ReplicaSet>().get_status(name).await?;
    let ready = rs.status.as_ref().and_then(|s| s.ready_replicas);
    ensure!(
        ready == Some(1),
        "ReplicaSet {name} read through /status: expected 1 ready replica, got {ready:?}"
    );
    status_conditions_round_trip::<ReplicaSet>(f, name).await
}

/// As [`rs_status`], for a Deployment.
async fn deployment_status(f: &Framework) -> CaseResult {
    let name = "test-deployment";
    let api = f.api::<Deployment>();
    f.create(&deployment(name, 1, pause_template(f, name)?)).await?;
    f.wait_for(&api, name, wc::is_deployment_rolled_out(), "to roll out")
        .await?;
    f.step("getting /status");
    let d = api.get_status(name).await?;
    let available = d.status.as_ref().and_then(|s| s.available_replicas);
    ensure!(
        available == Some(1),
        "Deployment {name} read through /status: expected 1 available replica, got {available:?}"
    );
    status_conditions_round_trip::<Deployment>(f, name).await
}
