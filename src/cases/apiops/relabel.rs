//! The label lifecycle the `[sig-storage]` CSI-conformance cases share (upstream
//! storageclass.go, csinodes.go, volume_attachment.go, csi_inline.go): an object created, read,
//! patched with a label `<name>=patched`, listed by it, deleted and confirmed gone; then its
//! replacements updated with a label `<name>=updated`, listed, deleted as a collection and
//! confirmed gone.
//!
//! The main function is [`label_lifecycle`]. Names carry the case namespace, since both OS
//! trials of a case share one cluster and these kinds are cluster-scoped.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::ClusterResourceScope;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::walk::update_with;
use super::{create_cluster_scoped, kind_of, plural_of};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream's bound on each "confirm deletion" poll.
const CONFIRM_DELETION: Duration = Duration::from_secs(30);

/// The resource version as a number, for upstream's "patched object should have a larger
/// resource version" check (`resourceversion.CompareResourceVersion`).
fn rv_number<K: Resource>(obj: &K) -> Option<u128> {
    obj.resource_version()?.parse().ok()
}

/// Waits, at most [`CONFIRM_DELETION`], until no `K` matches `selector`.
///
/// # Errors
/// A failure naming what was still listed.
pub(super) async fn confirm_deleted<K>(f: &Framework, api: &Api<K>, selector: &str) -> CaseResult
where
    K: Resource + Clone + Debug + Send + Serialize + DeserializeOwned + 'static,
    K::DynamicType: Default,
{
    f.wait_list_within(
        api,
        selector,
        <[K]>::is_empty,
        &format!("{} with labels {selector} to be deleted", plural_of::<K>()),
        CONFIRM_DELETION,
    )
    .await?;
    Ok(())
}

/// Patches label `<name>=patched` onto `before` and checks the answer (the label, and a
/// resource version above `before`'s: upstream's "patched object should have a larger resource
/// version").
///
/// # Errors
/// A failure naming the labels and resource version seen.
pub(super) async fn patch_label<K>(f: &Framework, api: &Api<K>, before: &K) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let kind = kind_of::<K>();
    let name = before.name_any();
    f.step(format!("patching {kind} {name}"));
    let patch = json!({"metadata": {"labels": {name.as_str(): "patched"}}});
    let patched = api
        .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    ensure!(
        patched.labels().get(&name).map(String::as_str) == Some("patched") && rv_number(&patched) > rv_number(before),
        "{kind} {name} after the patch: expected label {name}=patched and a resource version above {:?}, got \
         labels {:?} and resource version {:?}",
        before.resource_version(),
        patched.labels(),
        patched.resource_version()
    );
    Ok(patched)
}

/// Updates `name` to carry label `<key>=updated` (upstream's update step of these lifecycles)
/// and checks the answer.
///
/// # Errors
/// A failure naming the labels seen.
pub(super) async fn update_label<K>(f: &Framework, api: &Api<K>, name: &str, key: &str) -> CaseResult
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let has_label = |o: &K| o.labels().get(key).map(String::as_str) == Some("updated");
    let updated = update_with(f, api, name, has_label, |o: &mut K| {
        o.labels_mut().insert(key.to_string(), "updated".into());
        Ok(())
    })
    .await?;
    ensure!(
        has_label(&updated),
        "{} {name} after the update: expected label {key}=updated, got labels {:?}",
        kind_of::<K>(),
        updated.labels()
    );
    Ok(())
}

/// Creates `first`, reads it back, patches label `<name>=patched` (checking the resource
/// version grew), lists it by that label, deletes it and confirms it is gone; then creates
/// `replacements`, updates each with label `<first replacement's name>=updated`, lists them by
/// it, deletes them as a collection and confirms they are gone.
///
/// # Errors
/// A failure naming the step whose answer was wrong.
pub(super) async fn label_lifecycle<K>(f: &Framework, first: K, replacements: Vec<K>) -> CaseResult
where
    K: Resource<Scope = ClusterResourceScope> + Clone + Debug + Send + Serialize + DeserializeOwned + 'static,
    K::DynamicType: Default,
{
    let kind = kind_of::<K>();
    let plural = plural_of::<K>();
    let api: Api<K> = f.api_all();
    let created = create_cluster_scoped(f, &first).await?;
    let name = created.name_any();
    ensure!(
        rv_number(&created).is_some(),
        "{kind} {name} as created: expected a resource version, got {:?}",
        created.resource_version()
    );
    let got = api.get(&name).await?;
    ensure!(
        got.uid() == created.uid(),
        "{kind} {name} as read back: expected uid {:?}, got {:?}",
        created.uid(),
        got.uid()
    );

    patch_label(f, &api, &got).await?;
    let patched_selector = format!("{name}=patched");
    let listed = api.list(&ListParams::default().labels(&patched_selector)).await?;
    ensure!(
        listed.items.len() == 1,
        "listing {plural} with labels {patched_selector}: expected 1, got {}",
        listed.items.len()
    );
    f.step(format!("deleting {kind} {name}"));
    api.delete(&name, &DeleteParams::default()).await?;
    confirm_deleted(f, &api, &patched_selector).await?;

    let Some(key) = replacements.first().map(ResourceExt::name_any) else {
        return Ok(());
    };
    let updated_selector = format!("{key}=updated");
    for replacement in &replacements {
        let stored = create_cluster_scoped(f, replacement).await?;
        update_label(f, &api, &stored.name_any(), &key).await?;
    }
    let listed = api.list(&ListParams::default().labels(&updated_selector)).await?;
    ensure!(
        listed.items.len() == replacements.len(),
        "listing {plural} with labels {updated_selector}: expected {}, got {}",
        replacements.len(),
        listed.items.len()
    );
    f.step(format!(
        "deleting the collection of {plural} with labels {updated_selector}"
    ));
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&updated_selector),
    )
    .await?;
    confirm_deleted(f, &api, &updated_selector)
        .await
        .map_err(|e: CaseError| e.context(format!("after the DELETE of the collection of {plural}")))
}
