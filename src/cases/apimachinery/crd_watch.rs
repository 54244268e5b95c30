//! `[sig-api-machinery] CustomResourceDefinition Watch` (upstream
//! test/e2e/apimachinery/crd_watch.go): watches of custom objects, each selecting one object by
//! `metadata.name`, deliver that object's ADDED, MODIFIED and DELETED notifications and none of
//! the other's.
//!
//! Only API calls, so one body serves both OSes. The CRD is cluster-scoped with a name unique to
//! the case (see [`super::crd`]); the watches resume after the server ends them ([`EventWatch`]).

use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::crd::{create_established, delete_gone, objects_api, random_crd};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::watch_events::{EventType, EventWatch, Resume};
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream crd_watch.go "watch on custom resource definition objects".
pub(crate) const CRD_WATCH: &str = "[sig-api-machinery] CustomResourceDefinition Watch [Privileged:ClusterAdmin] \
     CustomResourceDefinition Watch watch on custom resource definition objects [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CRD_WATCH, Kind::Adapted, crd_watch)]
}

/// Upstream `expectEvent`'s bound (watch.go's `watchTimeout`-style minute).
const EXPECT: Duration = Duration::from_secs(60);
/// How long a watch must stay silent for `expectNoEvent`. Upstream waits 10 s; the notification
/// it must not see would come with the one the other watch already delivered, so a shorter
/// window checks the same thing (as in [`super::watch`]).
const SILENCE: Duration = Duration::from_secs(3);

/// Upstream `fixtures.NewNoxuInstance`: an object of the CRD's kind with nested content and
/// 64-bit numbers.
fn noxu_instance(api: &Api<DynamicObject>, kind: &str, name: &str) -> Result<DynamicObject, CaseError> {
    let body = json!({
        "apiVersion": api_version(api),
        "kind": kind,
        "metadata": ObjectMeta { name: Some(name.into()), ..Default::default() },
        "content": {"key": "value"},
        "num": {"num1": i64::MAX, "num2": 1_000_000},
    });
    serde_json::from_value(body).map_err(|e| CaseError::failed(format!("building custom object {name}: {e}")))
}

/// `GROUP/VERSION` of a custom object handle (its URL is `/apis/GROUP/VERSION/PLURAL`).
fn api_version(api: &Api<DynamicObject>) -> String {
    let url = api.resource_url().trim_start_matches("/apis/");
    let mut parts = url.splitn(3, '/');
    format!(
        "{}/{}",
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default()
    )
}

/// Upstream `instantiateCustomResource`: creates the object and checks that the answer has a
/// uid and the CRD's apiVersion and kind.
async fn instantiate(api: &Api<DynamicObject>, obj: &DynamicObject, kind: &str) -> Result<DynamicObject, CaseError> {
    let name = obj.name_any();
    let created = api.create(&PostParams::default(), obj).await?;
    ensure!(
        created.uid().is_some_and(|u| !u.is_empty()),
        "custom object {name} was created without a uid: {created:?}"
    );
    let types = created.types.clone().unwrap_or_default();
    ensure!(
        types.api_version == api_version(api) && types.kind == kind,
        "custom object {name} was created as {}/{}, expected {}/{kind}",
        types.api_version,
        types.kind,
        api_version(api)
    );
    Ok(created)
}

/// Upstream `patchCustomResource`: a JSON patch (RFC 6902) adding `/dummy`.
async fn patch_dummy(f: &Framework, api: &Api<DynamicObject>, name: &str) -> CaseResult {
    let patch = json!([{"op": "add", "path": "/dummy", "value": "test"}]);
    let _: DynamicObject = f.json_patch(&format!("{}/{name}", api.resource_url()), &patch).await?;
    Ok(())
}

/// Each change shows on `yes` and not on `no`.
async fn observe(
    yes: &mut EventWatch<DynamicObject>,
    no: &mut EventWatch<DynamicObject>,
    kind: EventType,
    name: &str,
) -> CaseResult {
    let named = |o: &DynamicObject| o.name_any() == name;
    yes.expect(kind, name, named, EXPECT).await?;
    no.expect_none(kind, name, named, SILENCE).await
}

/// Upstream: a cluster-scoped CRD; watches selecting `metadata.name=name1` and `name2`; each
/// of the two objects is created, patched and deleted in turn, and each change is delivered
/// to its own watch only.
async fn crd_watch(f: &Framework) -> CaseResult {
    let crd = create_established(f, &random_crd(f, 0, &[])).await?;
    let result = async {
        let api = objects_api(f, &crd);
        let kind = crd.spec.names.kind.clone();
        let (a, b) = ("name1", "name2");
        let mut wa = f
            .watch_events_by_fields(&api, &format!("metadata.name={a}"), Resume::Relist)
            .await?;
        let mut wb = f
            .watch_events_by_fields(&api, &format!("metadata.name={b}"), Resume::Relist)
            .await?;

        f.step("creating the first custom object");
        instantiate(&api, &noxu_instance(&api, &kind, a)?, &kind).await?;
        observe(&mut wa, &mut wb, EventType::Added, a).await?;
        f.step("creating the second custom object");
        instantiate(&api, &noxu_instance(&api, &kind, b)?, &kind).await?;
        observe(&mut wb, &mut wa, EventType::Added, b).await?;

        patch_dummy(f, &api, a).await?;
        observe(&mut wa, &mut wb, EventType::Modified, a).await?;
        patch_dummy(f, &api, b).await?;
        observe(&mut wb, &mut wa, EventType::Modified, b).await?;

        f.step("deleting the first custom object");
        api.delete(a, &DeleteParams::default()).await?;
        observe(&mut wa, &mut wb, EventType::Deleted, a).await?;
        f.step("deleting the second custom object");
        api.delete(b, &DeleteParams::default()).await?;
        observe(&mut wb, &mut wa, EventType::Deleted, b).await
    }
    .await;
    let cleanup = delete_gone(f, &crd.name_any()).await;
    result.and(cleanup)
}
