//! API writes the workload controllers share: creating and deleting the pods an owner controls,
//! with upstream's events on the owner, and publishing a computed status.

use std::fmt::Debug;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::Informer;

/// The message of a failed request as upstream's controllers put it in events: the API's
/// Status message, or the transport error.
pub(crate) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Creates `pod` for `owner` and records upstream's `SuccessfulCreate` ("Created pod: NAME") or
/// `FailedCreate` ("Error creating: MESSAGE") event on the owner; a created pod is waited for in
/// the `pods` cache so the next pass counts it. The ReplicaSet, DaemonSet and Job controllers
/// create their pods this way and decide themselves what a failure means.
pub(crate) async fn create_owned_pod<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    pods: &Informer<Pod>,
    api: &Api<Pod>,
    owner: &K,
    pod: &Pod,
) -> std::result::Result<Pod, kube::Error> {
    match api.create(&PostParams::default(), pod).await {
        Ok(created) => {
            recorder
                .record(
                    owner,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created pod: {}", created.name_any()),
                )
                .await;
            pods.wait_for_write(&created).await;
            Ok(created)
        }
        Err(e) => {
            recorder
                .record(
                    owner,
                    EventType::Warning,
                    "FailedCreate",
                    format!("Error creating: {}", api_message(&e)),
                )
                .await;
            Err(e)
        }
    }
}

/// Deletes `pod` of `owner` and records upstream's `SuccessfulDelete` ("Deleted pod: NAME") on
/// the owner; a pod already gone is no error (and no event). With `cache`, waits until the
/// deletion shows there, so the next pass does not count the pod. The ReplicaSet, DaemonSet and
/// Job controllers delete their pods this way.
pub(crate) async fn delete_owned_pod<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    api: &Api<Pod>,
    owner: &K,
    pod: &Pod,
    params: &DeleteParams,
    cache: Option<&Informer<Pod>>,
) -> std::result::Result<(), kube::Error> {
    match api.delete(&pod.name_any(), params).await {
        Ok(_) => {
            recorder
                .record(
                    owner,
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!("Deleted pod: {}", pod.name_any()),
                )
                .await;
            if let Some(cache) = cache {
                cache
                    .wait_for_delete(
                        pod.metadata.namespace.as_deref(),
                        &pod.name_any(),
                        pod.metadata.uid.as_deref(),
                    )
                    .await;
            }
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes each of `extra` (objects a pass found it no longer wants, such as EndpointSlices of
/// a port set that changed); one already gone is no error, any other failure is, so the pass is
/// retried. A failure reads "failed to delete OBJECT".
pub(crate) async fn delete_extra<K>(
    api: &Api<K>,
    extra: impl IntoIterator<Item = String>,
    object: impl Fn(&str) -> String,
) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    for name in extra {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e).ctx("delete", || object(&name)),
        }
    }
    Ok(())
}

/// Merge-patches the status subresource of `name` with `status`: how every controller publishes
/// what a pass computed (callers first check that it differs from the stored status). A failure
/// reads "failed to patch status of OBJECT".
pub(crate) async fn patch_status<K>(
    api: &Api<K>,
    name: &str,
    status: serde_json::Value,
    object: impl FnOnce() -> String,
) -> Result<()>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .ctx("patch status of", object)?;
    Ok(())
}

/// As [`patch_status`], conditional on `resource_version` (upstream controllers `UpdateStatus`
/// the object they read): a write computed from a stale cache answers 409 Conflict instead of
/// dropping what another client wrote meanwhile (a condition it added through `/status`).
pub(crate) async fn patch_status_at<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    status: serde_json::Value,
    object: impl FnOnce() -> String,
) -> Result<()>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "resourceVersion": resource_version }, "status": status })),
    )
    .await
    .ctx("patch status of", object)?;
    Ok(())
}
