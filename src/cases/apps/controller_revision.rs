//! `[sig-apps] ControllerRevision [Serial]` of upstream test/e2e/apps/controller_revision.go: the
//! ControllerRevisions the DaemonSet controller writes are listed, patched, created, deleted,
//! updated and deleted as a collection through the apps/v1 API, and a template change makes the
//! controller write the next revision, numbered 3 after the one the case created by hand.
//!
//! The DaemonSet is `daemonset_api`'s labelled one (its label value carries the namespace, so
//! the list across all namespaces finds this case's revisions only); its pods run on every
//! schedulable node of the target OS.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::daemonset_api::{DS_NAME, create_ready};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::update::replace_retrying;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream "should manage the lifecycle of a ControllerRevision".
pub(crate) const CR_LIFECYCLE: &str =
    "[sig-apps] ControllerRevision [Serial] should manage the lifecycle of a ControllerRevision [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CR_LIFECYCLE, Kind::Adapted, cr_lifecycle)]
}

/// The label every revision of a DaemonSet carries with its hash.
const HASH_LABEL: &str = "controller-revision-hash";
/// Upstream `controllerRevisionRetryTimeout`.
const COUNT_TIMEOUT: Duration = Duration::from_secs(60);

/// Upstream `hashAndNameForDaemonSet`'s hash, `controller.ComputeHash` of the template and the
/// collision count: FNV-32a, written in decimal and mapped through `rand.SafeEncodeString`'s
/// alphabet. (Go hashes its own dump of the template, so on a real cluster the name only has to
/// be valid; against a controller that hashes the JSON, it is the name the controller gives the
/// revision of this template, as upstream's is.)
fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(c.to_string().as_bytes());
    }
    let hash = bytes
        .iter()
        .fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193));
    hash.to_string()
        .bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// Waits until exactly `n` revisions in the case namespace match `selector`.
async fn wait_count(f: &Framework, selector: &str, n: usize) -> Result<Vec<ControllerRevision>, CaseError> {
    f.wait_list_within(
        &f.api::<ControllerRevision>(),
        selector,
        |revs: &[ControllerRevision]| revs.len() == n,
        &format!("exactly {n} ControllerRevision(s) labelled {selector}"),
        COUNT_TIMEOUT,
    )
    .await
}

/// Upstream: the DaemonSet's one revision (found across all namespaces by the DaemonSet's label,
/// owned by it) takes a strategic-merge label patch; a hand-made revision with the same data and
/// the next number makes two; deleting the first leaves one, which takes a label update; a
/// template change makes the controller write a second; deleting the hand-made one by its label
/// leaves one, revision 3.
async fn cr_lifecycle(f: &Framework) -> CaseResult {
    let (_, selector) = create_ready(f).await?;
    let dsets = f
        .api_all::<DaemonSet>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    ensure!(
        dsets.items.len() == 1,
        "listing DaemonSets labelled {selector} in all namespaces found {}, expected 1",
        dsets.items.len()
    );
    let ds = f.api::<DaemonSet>().get(DS_NAME).await?;
    let uid = ds.uid().unwrap_or_default();

    f.step(format!("listing all ControllerRevisions labelled {selector}"));
    let revs = f
        .api_all::<ControllerRevision>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    ensure!(
        revs.items.len() == 1,
        "listing ControllerRevisions labelled {selector} in all namespaces found {} ({:?}), expected the 1 \
         the DaemonSet controller writes for DaemonSet {DS_NAME}",
        revs.items.len(),
        revs.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    let rev = &revs.items[0];
    let owner = rev.owner_references().first().cloned();
    ensure!(
        owner
            .as_ref()
            .is_some_and(|o| o.kind == "DaemonSet" && o.uid == uid && o.controller == Some(true)),
        "ControllerRevision {} is owned by {owner:?}, expected DaemonSet {DS_NAME} (uid {uid}) as its controller",
        rev.name_any()
    );
    let api: Api<ControllerRevision> = f.api();
    let initial = api.get(&rev.name_any()).await?;
    let initial_name = initial.name_any();

    f.step(format!("patching ControllerRevision {initial_name}"));
    let patch = json!({"metadata": {"labels": {initial_name.as_str(): "patched"}}});
    let patched = api
        .patch(&initial_name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    ensure!(
        patched.labels().get(&initial_name).map(String::as_str) == Some("patched"),
        "the answer to the label patch of ControllerRevision {initial_name} lacks label {initial_name}=patched; \
         labels: {:?}",
        patched.labels()
    );

    f.step("creating a new ControllerRevision");
    let mut template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    if let Some(spec) = template.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(1);
    }
    let hash = compute_hash(&template, ds.status.as_ref().and_then(|s| s.collision_count));
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(HASH_LABEL.into(), hash.clone());
    let made = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{DS_NAME}-{hash}")),
            labels: Some(labels),
            annotations: ds.metadata.annotations.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "DaemonSet".into(),
                name: DS_NAME.into(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: initial.data.clone(),
        revision: initial.revision + 1,
    };
    let made = f.create(&made).await?;
    wait_count(f, &selector, 2).await?;

    f.step(format!("deleting ControllerRevision {initial_name}"));
    match api.delete(&initial_name, &DeleteParams::default()).await {
        // The DaemonSet controller keeps the newest of two revisions equal to its template
        // (upstream `dedupCurHistories`) and may have deleted this one first; the count below
        // still checks that exactly one is left.
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        other => {
            other?;
        }
    }
    wait_count(f, &selector, 1).await?;

    let left = api.list(&ListParams::default()).await?;
    let current = left.items.first().map(ResourceExt::name_any).ok_or_else(|| {
        CaseError::failed(format!(
            "no ControllerRevision is left in namespace {} after deleting {initial_name}",
            f.ns()
        ))
    })?;
    f.step(format!("updating ControllerRevision {current}"));
    let updated = replace_retrying(&api, &current, |r: &mut ControllerRevision| {
        r.labels_mut().insert(current.clone(), "updated".into());
    })
    .await?;
    ensure!(
        updated.labels().get(&current).map(String::as_str) == Some("updated"),
        "the answer to the update of ControllerRevision {current} lacks label {current}=updated; labels: {:?}",
        updated.labels()
    );

    f.step("generating another ControllerRevision by patching the DaemonSet");
    let patch = json!({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 1}}}});
    f.api::<DaemonSet>()
        .patch(DS_NAME, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    wait_count(f, &selector, 2).await?;

    let by_update = format!("{current}=updated");
    f.step(format!("deleting the ControllerRevisions labelled {by_update}"));
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&by_update))
        .await?;
    wait_count(f, &selector, 1).await?;
    let last = api.list(&ListParams::default()).await?;
    let revisions: Vec<(String, i64)> = last.items.iter().map(|r| (r.name_any(), r.revision)).collect();
    ensure!(
        revisions.len() == 1 && revisions[0].1 == 3,
        "after the template change and the deletion of {by_update}, the ControllerRevisions in namespace {} are \
         {revisions:?}; expected one, revision 3 (hand-made {} was revision {})",
        f.ns(),
        made.name_any(),
        made.revision
    );
    Ok(())
}
