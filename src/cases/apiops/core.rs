//! `[sig-node] Secrets should patch a secret` (upstream test/e2e/common/node/secrets.go) and the
//! `[sig-node] Pods` API cases "should patch a pod status" and "should run through the lifecycle
//! of Pods and PodStatus" (upstream test/e2e/common/node/pods.go).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::wait::conditions::is_deleted;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::update_status;
use crate::case;
use crate::cases::api::{delete_collection_and_check, find_in_all_namespaces};
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream secrets.go "should patch a secret".
pub(crate) const SECRET_PATCH: &str = "[sig-node] Secrets should patch a secret [Conformance]";
/// Upstream pods.go "should patch a pod status".
pub(crate) const POD_STATUS_PATCH: &str = "[sig-node] Pods should patch a pod status [Conformance]";
/// Upstream pods.go "should run through the lifecycle of Pods and PodStatus".
pub(crate) const POD_LIFECYCLE: &str =
    "[sig-node] Pods should run through the lifecycle of Pods and PodStatus [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SECRET_PATCH, Kind::Adapted, secret_patch),
        case!(POD_STATUS_PATCH, Kind::Adapted, pod_status_patch),
        case!(POD_LIFECYCLE, Kind::Adapted, pod_lifecycle),
    ]
}

/// Creates a labelled Secret, finds it in all namespaces, patches a label and its data, checks
/// both through a fresh read, deletes it by collection under the patched label and checks it is
/// gone.
async fn secret_patch(f: &Framework) -> CaseResult {
    let name = "test-secret";
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("testsecret-constant".into(), "true".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("key".into(), ByteString(b"value".to_vec()))])),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    f.create(&secret).await?;
    find_in_all_namespaces::<Secret>(f, "testsecret-constant=true", f.ns(), name).await?;

    f.step("patching the Secret's label and data");
    let patch = json!({
        "metadata": {"labels": {"testsecret": "true"}},
        "data": {"key": ByteString(b"value1".to_vec())}
    });
    f.api::<Secret>()
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let got = f.api::<Secret>().get(name).await?;
    let value = got
        .data
        .as_ref()
        .and_then(|d| d.get("key"))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned());
    let label = got.labels().get("testsecret").cloned();
    ensure!(
        value.as_deref() == Some("value1") && label.as_deref() == Some("true"),
        "Secret {}/{name} after the patch: expected data key=value1 and label testsecret=true, got data \
         {value:?} and label {label:?}",
        f.ns()
    );
    delete_collection_and_check::<Secret>(f, "testsecret=true", &[name.to_string()]).await
}

/// Runs an agnhost pod, patches its `/status` (message, reason) together with an annotation, and
/// checks the patch's answer carries them.
async fn pod_status_patch(f: &Framework) -> CaseResult {
    let name = "pod-status-patch";
    let pod = f
        .pod(name)
        .label("e2e", name)
        .grace_period(1)
        .container(ContainerBuilder::new("agnhost", "agnhost").args(["pause"]));
    f.create_pod_ready(&pod).await?;

    f.step("patching /status");
    let patch = json!({
        "metadata": {"annotations": {"patchedstatus": "true"}},
        "status": {"message": "Patched by e2e test", "reason": "E2E"}
    });
    let patched = f
        .api::<Pod>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let status = patched.status.unwrap_or_default();
    ensure!(
        status.message.as_deref() == Some("Patched by e2e test") && status.reason.as_deref() == Some("E2E"),
        "pod {name} after the patch of /status: expected message \"Patched by e2e test\" and reason E2E, got \
         message {:?} and reason {:?}",
        status.message,
        status.reason
    );
    Ok(())
}

/// The label upstream's lifecycle pod carries throughout.
const STATIC_LABEL: (&str, &str) = ("test-pod-static", "true");
/// The conditions the lifecycle case turns to False with its status update.
const READY_CONDITIONS: [&str; 2] = ["Ready", "ContainersReady"];

/// How many of `pod`'s [`READY_CONDITIONS`] have status `status`.
fn ready_conditions_with(pod: &Pod, status: &str) -> usize {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| READY_CONDITIONS.contains(&c.type_.as_str()) && c.status == status)
        .count()
}

/// Runs a labelled pod, patches a label and its container image, updates its status to turn its
/// Ready conditions False, deletes it by collection and waits for it to be gone.
async fn pod_lifecycle(f: &Framework) -> CaseResult {
    let name = "pod-test";
    let os = f.target_os();
    let pod = f
        .pod(name)
        .label(STATIC_LABEL.0, STATIC_LABEL.1)
        .grace_period(1)
        .container(ContainerBuilder::new(name, "agnhost").args(["pause"]));
    f.create_pod_ready(&pod).await?;
    let api: Api<Pod> = f.api();

    f.step("patching the pod with a new label and another image");
    // Upstream swaps agnhost for httpd; the other image this catalogue pulls is pause.
    let image = f.image("pause", os)?;
    let patch = json!({
        "metadata": {"labels": {"test-pod": "patched"}},
        "spec": {"containers": [{"name": name, "image": image}]}
    });
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let got = api.get(name).await?;
    let label = got.labels().get("test-pod").cloned();
    let images: Vec<String> = got
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.image.clone())
        .collect();
    ensure!(
        label.as_deref() == Some("patched") && images == [image.clone()],
        "pod {name} after the patch: expected label test-pod=patched and image {image}, got label {label:?} and \
         images {images:?}"
    );

    let all_false = |pod: &Pod| ready_conditions_with(pod, "False") == READY_CONDITIONS.len();
    let updated = update_status(f, &api, name, all_false, |pod: &mut Pod| {
        let conditions = pod
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .map(|c| c.iter_mut().filter(|c| READY_CONDITIONS.contains(&c.type_.as_str())));
        let mut turned = 0;
        for c in conditions.into_iter().flatten() {
            if c.status == "True" {
                c.status = "False".into();
                turned += 1;
            }
        }
        ensure!(
            turned == READY_CONDITIONS.len(),
            "pod {name} read through /status: expected conditions {READY_CONDITIONS:?} True, got {:?}",
            pod.status.as_ref().and_then(|s| s.conditions.as_ref())
        );
        Ok(())
    })
    .await?;
    let turned = ready_conditions_with(&updated, "False");
    ensure!(
        turned == READY_CONDITIONS.len(),
        "pod {name} after the update of /status: expected conditions {READY_CONDITIONS:?} False, got {:?}",
        updated.status.as_ref().and_then(|s| s.conditions.as_ref())
    );

    f.step("deleting the pod by collection");
    let selector = format!("{}={}", STATIC_LABEL.0, STATIC_LABEL.1);
    api.delete_collection(
        &DeleteParams::default().grace_period(1),
        &ListParams::default().labels(&selector),
    )
    .await?;
    f.wait_for(
        &api,
        name,
        is_deleted(&updated.uid().unwrap_or_default()),
        "to be deleted",
    )
    .await?;
    match api.get_opt(name).await? {
        None => Ok(()),
        Some(p) => fail!(
            "pod {name} is still there after its deletion (phase {:?})",
            p.status.and_then(|s| s.phase)
        ),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    use super::*;

    #[test]
    fn counts_only_the_ready_conditions() {
        let cond = |t: &str, s: &str| PodCondition {
            type_: t.into(),
            status: s.into(),
            ..Default::default()
        };
        let pod = Pod {
            status: Some(PodStatus {
                conditions: Some(vec![
                    cond("Ready", "False"),
                    cond("ContainersReady", "False"),
                    cond("PodScheduled", "False"),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(ready_conditions_with(&pod, "False"), 2);
        assert_eq!(ready_conditions_with(&pod, "True"), 0);
    }
}
