//! Controller history as kube-controller-manager keeps it for DaemonSets
//! (pkg/controller/history and the DaemonSet controller's `constructHistory`,
//! `dedupCurHistories` and `cleanupHistory`): every template a DaemonSet had is a
//! ControllerRevision `<owner>-<hash>` (the hash of the template and the collision count, the
//! `controller-revision-hash` its pods carry) whose data is the strategic-merge patch that restores
//! the template, labelled with the template's labels plus `controller-revision-hash`, owned
//! (controller=true) by the DaemonSet, numbered 1, 2, 3… with the current one always the
//! newest; old revisions no pod uses are trimmed to `revisionHistoryLimit` (default 10).
//!
//! With `revisions-not-written=daemonset` on, the controller writes no revisions (its pods
//! still carry the template's hash).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::daemonset::CONTROLLER_REVISION_HASH;
use super::error::{ApiContext, Result, is_conflict, is_not_found};
use super::plane::Ctx;
use super::util::{controlled_by, owner_ref, template_hash};
use super::writes::patch_status;

/// Upstream's default `revisionHistoryLimit` of a DaemonSet.
const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// The data of a DaemonSet revision: upstream `getPatch`, the template under
/// `spec.template` with `$patch: replace`.
pub fn daemonset_patch(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_default();
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": t}})
}

/// The data a revision holds, if any.
fn data_of(r: &ControllerRevision) -> Option<&Value> {
    r.data.as_ref().map(|d| &d.0)
}

/// The revision hash of `r` (its label).
pub fn hash_of(r: &ControllerRevision) -> String {
    r.labels().get(CONTROLLER_REVISION_HASH).cloned().unwrap_or_default()
}

/// The DaemonSet's history after this pass: the hash of the current revision and the old ones.
pub(crate) struct History {
    /// The current revision's `controller-revision-hash`.
    pub hash: String,
    /// Every other revision the DaemonSet controls.
    pub old: Vec<Arc<ControllerRevision>>,
}

/// Upstream `constructHistory`: finds the revisions equal to the current template (creating one
/// numbered after the newest if none is), keeps the newest of several (relabelling pods of the
/// others and deleting them), and renumbers the current one to be the newest.
pub(crate) async fn construct(ctx: &Ctx, ds: &DaemonSet, pods: &[Arc<Pod>]) -> Result<History> {
    let ns = ds.namespace().unwrap_or_default();
    let name = ds.name_any();
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let spec = ds.spec.as_ref().expect("caller checked the spec");
    let data = daemonset_patch(&spec.template);
    let cache = ctx.informers.get::<ControllerRevision>();
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let (cur, old): (Vec<_>, Vec<_>) = cache
        .in_namespace(&ns)
        .into_iter()
        .filter(|r| controlled_by(&r.metadata, &uid) && r.metadata.deletion_timestamp.is_none())
        .partition(|r| data_of(r) == Some(&data));
    let next = old.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
    let keep = if cur.is_empty() {
        // Upstream `snapshot` names the revision after the template's hash (`ComputeHash`, as
        // the Deployment controller names ReplicaSets), not the data's.
        let collision = ds.status.as_ref().and_then(|s| s.collision_count);
        let hash = template_hash(&spec.template, collision);
        let mut labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(CONTROLLER_REVISION_HASH.into(), hash.clone());
        let cr = ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{hash}")),
                namespace: Some(ns.clone()),
                labels: Some(labels),
                annotations: ds.metadata.annotations.clone(),
                owner_references: Some(vec![owner_ref(ds)]),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(data.clone())),
            revision: next,
        };
        match api.create(&PostParams::default(), &cr).await {
            Ok(created) => {
                cache.wait_for_write(&created).await;
                Arc::new(created)
            }
            Err(e) if is_conflict(&e) => {
                let existing = api
                    .get(&format!("{name}-{hash}"))
                    .await
                    .ctx("get", || format!("controllerrevision {ns}/{name}-{hash}"))?;
                if controlled_by(&existing.metadata, &uid) && data_of(&existing) == Some(&data) {
                    Arc::new(existing)
                } else {
                    // A hash collision with someone else's revision: count it, so the next
                    // pass hashes differently (upstream bumps status.collisionCount).
                    let dsapi: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ns);
                    let bumped = json!({"collisionCount": collision.unwrap_or(0) + 1});
                    patch_status(&dsapi, &name, bumped, || format!("daemonset {ns}/{name}")).await?;
                    return Err(e).ctx("create", || format!("controllerrevision {ns}/{name}-{hash}"));
                }
            }
            Err(e) => return Err(e).ctx("create", || format!("controllerrevision {ns}/{name}-{hash}")),
        }
    } else {
        dedup(ctx, &api, &ns, cur, pods).await?
    };
    let keep = if keep.revision < next {
        let patch = json!({"revision": next});
        let renumbered = api
            .patch(&keep.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .ctx("patch", || format!("controllerrevision {ns}/{}", keep.name_any()))?;
        cache.wait_for_write(&renumbered).await;
        Arc::new(renumbered)
    } else {
        keep
    };
    Ok(History {
        hash: hash_of(&keep),
        old,
    })
}

/// Upstream `dedupCurHistories`: of several revisions equal to the template, the newest stays;
/// pods labelled with another's hash are relabelled and the others deleted.
async fn dedup(
    ctx: &Ctx,
    api: &Api<ControllerRevision>,
    ns: &str,
    mut cur: Vec<Arc<ControllerRevision>>,
    pods: &[Arc<Pod>],
) -> Result<Arc<ControllerRevision>> {
    cur.sort_by_key(|r| r.revision);
    let keep = cur.pop().expect("caller checked one exists");
    if cur.is_empty() {
        return Ok(keep);
    }
    let hash = hash_of(&keep);
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    for p in pods {
        if p.labels().get(CONTROLLER_REVISION_HASH) != Some(&hash) {
            let patch = json!({"metadata": {"labels": {CONTROLLER_REVISION_HASH: hash}}});
            match pod_api
                .patch(&p.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e).ctx("patch", || format!("pod {ns}/{}", p.name_any())),
            }
        }
    }
    for r in cur {
        delete(api, ns, &r).await?;
    }
    Ok(keep)
}

async fn delete(api: &Api<ControllerRevision>, ns: &str, r: &ControllerRevision) -> Result<()> {
    match api.delete(&r.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("delete", || format!("controllerrevision {ns}/{}", r.name_any())),
    }
}

/// The old revisions upstream `cleanupHistory` deletes: beyond `limit`, the oldest first, never
/// one whose hash a live pod still carries.
pub fn to_trim<'a>(
    old: &'a [Arc<ControllerRevision>],
    limit: Option<i32>,
    live_hashes: &[String],
) -> Vec<&'a ControllerRevision> {
    let limit = usize::try_from(limit.unwrap_or(DEFAULT_HISTORY_LIMIT).max(0)).unwrap_or(0);
    let mut excess = old.len().saturating_sub(limit);
    let mut sorted: Vec<&ControllerRevision> = old.iter().map(AsRef::as_ref).collect();
    sorted.sort_by_key(|r| r.revision);
    let mut out = Vec::new();
    for r in sorted {
        if excess == 0 {
            break;
        }
        if live_hashes.contains(&hash_of(r)) {
            continue;
        }
        out.push(r);
        excess -= 1;
    }
    out
}

/// Upstream `cleanupHistory`: deletes the revisions [`to_trim`] picks.
pub(crate) async fn cleanup(
    ctx: &Ctx,
    ds: &DaemonSet,
    old: &[Arc<ControllerRevision>],
    pods: &[Arc<Pod>],
) -> Result<()> {
    let ns = ds.namespace().unwrap_or_default();
    let live: Vec<String> = pods
        .iter()
        .filter_map(|p| p.labels().get(CONTROLLER_REVISION_HASH).cloned())
        .collect();
    let limit = ds.spec.as_ref().and_then(|s| s.revision_history_limit);
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    for r in to_trim(old, limit, &live) {
        delete(&api, &ns, r).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(hash: &str, revision: i64) -> Arc<ControllerRevision> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": format!("ds-{hash}"),
                "labels": {CONTROLLER_REVISION_HASH: hash}}, "revision": revision}))
            .unwrap(),
        )
    }

    #[test]
    fn patch_replaces_the_template() {
        let t: PodTemplateSpec = serde_json::from_value(json!({"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}))
        .unwrap();
        let p = daemonset_patch(&t);
        assert_eq!(p["spec"]["template"]["$patch"], "replace");
        assert_eq!(p["spec"]["template"]["spec"]["containers"][0]["image"], "x");
        assert_eq!(p["spec"]["template"]["metadata"]["labels"]["a"], "b");
        let mut t2 = t.clone();
        t2.spec.as_mut().unwrap().termination_grace_period_seconds = Some(1);
        assert_ne!(p, daemonset_patch(&t2));
    }

    #[test]
    fn trimming_keeps_the_limit_and_revisions_pods_use() {
        let old = vec![rev("c", 3), rev("a", 1), rev("b", 2)];
        let names = |v: Vec<&ControllerRevision>| v.iter().map(|r| r.name_any()).collect::<Vec<_>>();
        assert_eq!(names(to_trim(&old, Some(1), &[])), ["ds-a", "ds-b"]);
        assert_eq!(names(to_trim(&old, Some(1), &["a".into()])), ["ds-b", "ds-c"]);
        assert!(to_trim(&old, None, &[]).is_empty(), "default limit 10");
        assert_eq!(names(to_trim(&old, Some(0), &[])), ["ds-a", "ds-b", "ds-c"]);
    }
}
