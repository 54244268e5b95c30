//! `[sig-auth]` API cases: the lifecycle and the update of a ServiceAccount and a projected
//! token volume (upstream test/e2e/auth/service_accounts.go), and SubjectAccessReviews checked against an impersonated
//! request (upstream test/e2e/auth/subjectreviews.go).

use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ProjectedVolumeSource, ServiceAccount, ServiceAccountTokenProjection, Volume, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ObjectList, Patch, PatchParams, PostParams};
use kube::runtime::wait::conditions::is_deleted;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::walk::update_with;
use crate::case;
use crate::cases::api::{delete_collection_and_check, find_in_all_namespaces};
use crate::cases::config::{file_path, mount_path, reader};
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream service_accounts.go "should run through the lifecycle of a ServiceAccount".
pub(crate) const SA_LIFECYCLE: &str =
    "[sig-auth] ServiceAccounts should run through the lifecycle of a ServiceAccount [Conformance]";
/// Upstream service_accounts.go "should update a ServiceAccount".
pub(crate) const SA_UPDATE: &str = "[sig-auth] ServiceAccounts should update a ServiceAccount [Conformance]";
/// Upstream service_accounts.go "should mount projected service account token".
pub(crate) const PROJECTED_TOKEN: &str =
    "[sig-auth] ServiceAccounts should mount projected service account token [Conformance]";
/// Upstream subjectreviews.go "should support SubjectReview API operations".
pub(crate) const SUBJECT_REVIEW: &str =
    "[sig-auth] SubjectReview should support SubjectReview API operations [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SA_LIFECYCLE, Kind::Adapted, sa_lifecycle),
        case!(SA_UPDATE, Kind::Adapted, sa_update),
        case!(SUBJECT_REVIEW, Kind::Adapted, subject_review),
        case!(PROJECTED_TOKEN, Kind::Adapted, projected_token),
    ]
}

/// A ServiceAccount `name` with labels `labels` and `automountServiceAccountToken: automount`.
fn account(name: &str, labels: &[(&str, &str)], automount: Option<bool>) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        automount_service_account_token: automount,
        ..Default::default()
    }
}

/// Creates a labelled ServiceAccount, patches a label and its automount setting (awaited on a
/// watch), finds the patched form in all namespaces, deletes it by collection and waits for it
/// to be gone.
async fn sa_lifecycle(f: &Framework) -> CaseResult {
    let name = "testserviceaccount";
    let static_label = "test-serviceaccount-static=true";
    let api: Api<ServiceAccount> = f.api();
    let created = f
        .create(&account(name, &[("test-serviceaccount-static", "true")], None))
        .await?;

    f.step("patching the ServiceAccount");
    let patch = json!({
        "metadata": {"labels": {"test-serviceaccount": "patched"}},
        "automountServiceAccountToken": false
    });
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let patched = |sa: &ServiceAccount| {
        sa.labels().get("test-serviceaccount").map(String::as_str) == Some("patched")
            && sa.automount_service_account_token == Some(false)
    };
    f.wait_for(
        &api,
        name,
        move |sa: Option<&ServiceAccount>| sa.is_some_and(patched),
        "to show the patch (label test-serviceaccount=patched, automountServiceAccountToken false)",
    )
    .await?;
    let listed = find_in_all_namespaces::<ServiceAccount>(f, static_label, f.ns(), name).await?;
    ensure!(
        patched(&listed),
        "ServiceAccount {}/{name} as listed in all namespaces after the patch: expected label \
         test-serviceaccount=patched and automountServiceAccountToken false, got labels {:?} and {:?}",
        f.ns(),
        listed.labels(),
        listed.automount_service_account_token
    );
    delete_collection_and_check::<ServiceAccount>(f, static_label, &[name.to_string()]).await?;
    f.wait_for(
        &api,
        name,
        is_deleted(&created.uid().unwrap_or_default()),
        "to be deleted",
    )
    .await?;
    Ok(())
}

/// Creates a ServiceAccount with `automountServiceAccountToken: false`, updates it to `true`,
/// and checks each answer.
async fn sa_update(f: &Framework) -> CaseResult {
    let name = "e2e-sa-update";
    let created = f.create(&account(name, &[], Some(false))).await?;
    ensure!(
        created.automount_service_account_token == Some(false),
        "ServiceAccount {name} as created: expected automountServiceAccountToken false, got {:?}",
        created.automount_service_account_token
    );
    let automounts = |sa: &ServiceAccount| sa.automount_service_account_token == Some(true);
    let updated = update_with(f, &f.api::<ServiceAccount>(), name, automounts, |sa| {
        sa.automount_service_account_token = Some(true);
        Ok(())
    })
    .await?;
    ensure!(
        automounts(&updated),
        "ServiceAccount {name} after the update: expected automountServiceAccountToken true, got {:?}",
        updated.automount_service_account_token
    );
    Ok(())
}

/// Runs a pod with a projected service account token volume (path `token`, one hour) that
/// prints the token file, and checks it printed a token (a JWT: three dot-separated parts).
async fn projected_token(f: &Framework) -> CaseResult {
    let volume = Volume {
        name: "test-volume".into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    expiration_seconds: Some(60 * 60),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = mount_path(f, "test-volume");
    let token_path = file_path(f, &mount, "token");
    let container =
        reader(f, "agnhost-container", std::slice::from_ref(&token_path)).mount("test-volume", &mount, true);
    let pod = f.pod("test-pod-projected-token").volume(volume).container(container);
    let out = f.container_output(&pod, "agnhost-container").await?;
    let token = out.trim();
    let parts = token.split('.').filter(|p| !p.is_empty()).count();
    ensure!(
        parts == 3,
        "pod test-pod-projected-token: expected {token_path} to hold a service account token (a JWT of three \
         dot-separated parts), got {} bytes: {:?}",
        token.len(),
        token.chars().take(40).collect::<String>()
    );
    Ok(())
}

/// The review spec upstream asks about: may `user` (in `groups`, with `uid`) list ConfigMaps in
/// namespace `ns`.
fn review_spec(ns: &str, user: &str, groups: &[String], uid: &str) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        resource_attributes: Some(ResourceAttributes {
            verb: Some("list".into()),
            resource: Some("configmaps".into()),
            namespace: Some(ns.into()),
            version: Some("v1".into()),
            ..Default::default()
        }),
        user: Some(user.into()),
        groups: Some(groups.to_vec()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

/// Lists ConfigMaps of `ns` as `user` (impersonated, with `groups` and `uid`): `Ok(true)` when
/// the list is allowed, `Ok(false)` on 403 Forbidden.
///
/// # Errors
/// Any other answer.
async fn list_as(f: &Framework, ns: &str, user: &str, groups: &[String], uid: &str) -> Result<bool, CaseError> {
    let mut req = http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps"))
        .header("Impersonate-User", user)
        .header("Impersonate-Uid", uid);
    for g in groups {
        req = req.header("Impersonate-Group", g);
    }
    let req = req
        .body(Vec::new())
        .map_err(|e| CaseError::failed(format!("building the impersonated list request: {e}")))?;
    match f.client().request::<ObjectList<ConfigMap>>(req).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(false),
        Err(e) => Err(CaseError::from(e).context(format!("listing ConfigMaps of {ns} as {user}"))),
    }
}

/// Creates a ServiceAccount, asks a SubjectAccessReview and a LocalSubjectAccessReview whether
/// it may list ConfigMaps in the case namespace, and checks both answers match what a list
/// made as that account (impersonated) meets.
async fn subject_review(f: &Framework) -> CaseResult {
    let ns = f.ns();
    let sa = f.create(&account("e2e", &[], None)).await?;
    let user = format!("system:serviceaccount:{ns}:e2e");
    let groups = vec![
        "system:authenticated".to_string(),
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{ns}"),
    ];
    let uid = sa.uid().unwrap_or_default();

    f.step(format!("creating a SubjectAccessReview for {user}"));
    let sar = SubjectAccessReview {
        spec: review_spec(ns, &user, &groups, &uid),
        ..Default::default()
    };
    let sar = f
        .api_all::<SubjectAccessReview>()
        .create(&PostParams::default(), &sar)
        .await?;
    let Some(status) = sar.status else {
        fail!("the SubjectAccessReview for {user} came back without a status");
    };

    f.step(format!("listing ConfigMaps in {ns} as {user}"));
    let allowed = list_as(f, ns, &user, &groups, &uid).await?;
    ensure!(
        allowed == status.allowed,
        "SubjectAccessReview for {user} (list configmaps in {ns}) answered allowed={} (reason {:?}), but the \
         list made as {user} was {}",
        status.allowed,
        status.reason,
        if allowed { "allowed" } else { "forbidden" }
    );

    f.step(format!("creating a LocalSubjectAccessReview for {user}"));
    let lsar = LocalSubjectAccessReview {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            ..Default::default()
        },
        spec: review_spec(ns, &user, &groups, &uid),
        ..Default::default()
    };
    let lsar = f
        .api::<LocalSubjectAccessReview>()
        .create(&PostParams::default(), &lsar)
        .await?;
    let local = lsar.status.map(|s| s.allowed);
    ensure!(
        local == Some(allowed),
        "LocalSubjectAccessReview for {user} (list configmaps in {ns}) answered allowed={local:?}, but the list \
         made as {user} was {}",
        if allowed { "allowed" } else { "forbidden" }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_spec_asks_about_listing_configmaps() {
        let spec = review_spec("ns1", "u", &["g".into()], "id");
        let attrs = spec.resource_attributes.unwrap();
        assert_eq!(attrs.verb.as_deref(), Some("list"));
        assert_eq!(attrs.resource.as_deref(), Some("configmaps"));
        assert_eq!(spec.groups, Some(vec!["g".to_string()]));
    }
}
