//! The StatefulSet controller: pods with stable names `<set>-<ordinal>`, hostname and
//! subdomain from serviceName (their DNS identity through the headless Service), claims from
//! volumeClaimTemplates, ordered creation (each pod waits for the previous to be Running and
//! Ready) or Parallel, reverse-ordered scale-down and rolling updates by revision.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::daemonset::CONTROLLER_REVISION_HASH;
use super::error::{ApiContext, Result, is_conflict, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Informer, Requeue, reconcile_each};
use super::plane::{Component, Ctx};
use super::replicaset::claim_pods;
use super::util::{is_available, is_ready, owner_ref, phase, pod_from_template, template_hash};
use super::writes::patch_status;

/// The label with a stateful pod's own name (what per-pod Services select).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label with a stateful pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// Runs the StatefulSet controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let sets = ctx.informers.get::<StatefulSet>();
    let pods = ctx.informers.get::<Pod>();
    let revisions = ctx.informers.get::<ControllerRevision>();
    let recorder = ctx.recorder(Component::StatefulSet);
    let caches = async {
        sets.ready().await?;
        pods.ready().await?;
        // The current revision's template is read from its ControllerRevision.
        revisions.ready().await
    };
    let changes = vec![sets.subscribe(), pods.subscribe()];
    reconcile_each(&ctx, caches, &sets, changes, |set, pass| {
        sync(&ctx, &recorder, &pods, set, pass.requeue).boxed()
    })
    .await
}

/// The ordinal of a pod named `<set>-<ordinal>`, if it is one of the set's.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

fn running_and_ready(p: &Pod) -> bool {
    phase(p) == "Running" && is_ready(p) && p.metadata.deletion_timestamp.is_none()
}

/// The pod for `ordinal` from `template` (the template of `revision`): identity (name,
/// hostname, subdomain, labels) and claims added.
pub fn stateful_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let name = set.name_any();
    let ns = set.namespace().unwrap_or_default();
    let spec = set.spec.as_ref().expect("caller checked the spec");
    let pod_name = format!("{name}-{ordinal}");
    let mut template: PodTemplateSpec = template.clone();
    let labels = template.metadata.get_or_insert_default().labels.get_or_insert_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), revision.into());
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    let mut pod = pod_from_template(&template, &ns, owner_ref(set), Some(pod_name.clone()), None);
    if let Some(ps) = pod.spec.as_mut() {
        ps.hostname = Some(pod_name.clone());
        if !spec.service_name.as_deref().unwrap_or_default().is_empty() {
            ps.subdomain = spec.service_name.clone();
        }
        for claim in spec.volume_claim_templates.iter().flatten() {
            let cname = claim.metadata.name.clone().unwrap_or_default();
            let volumes = ps.volumes.get_or_insert_default();
            volumes.retain(|v| v.name != cname);
            volumes.push(Volume {
                name: cname.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: format!("{cname}-{pod_name}"),
                    read_only: None,
                }),
                ..Volume::default()
            });
        }
    }
    pod
}

fn revision_name(set: &str, hash: &str) -> String {
    format!("{set}-{hash}")
}

/// The pod template a ControllerRevision of a StatefulSet holds (what [`ensure_revision`]
/// writes: `{"spec": {"template": {"$patch": "replace", ...}}}`).
fn revision_template(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision.data.as_ref()?.0.get("spec")?.get("template")?.clone();
    template.as_object_mut()?.remove("$patch");
    serde_json::from_value(template).ok()
}

/// Whether the pod of `ordinal` is (re)created at the current revision rather than the update
/// revision: upstream `newVersionedStatefulSetPod`. With a RollingUpdate strategy, the ordinals
/// below the partition stay on the current revision (without a rollingUpdate block, those
/// below `status.currentReplicas`).
fn created_at_current(
    spec: &StatefulSetSpec,
    current_replicas: i32,
    partition: Option<i32>,
    start: i32,
    ordinal: i32,
) -> bool {
    let strategy = spec.update_strategy.as_ref();
    let rolling = strategy.and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate") == "RollingUpdate";
    match partition {
        None => rolling && ordinal < start + current_replicas,
        Some(p) => ordinal < start + p,
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass of the ordered state machine, kept together"
)]
async fn sync(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    set: &Arc<StatefulSet>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let Some(spec) = set.spec.as_ref() else { return Ok(()) };
    let status = set.status.clone().unwrap_or_default();
    let update_revision = revision_name(&name, &template_hash(&spec.template, status.collision_count));
    // `revisions-not-written=statefulset`: a controller that keeps no ControllerRevisions.
    if !ctx.cfg.faults.applies_to("revisions-not-written", "statefulset") {
        ensure_revision(ctx, set, &update_revision).await?;
    }
    // As upstream `getStatefulSetRevisions`: the current revision is the one status names while
    // its ControllerRevision exists; otherwise the history starts at the update revision.
    let named_current = status.current_revision.clone().filter(|c| *c != update_revision);
    let current = named_current.and_then(|c| {
        let revision = ctx.informers.get::<ControllerRevision>().get(Some(&ns), &c)?;
        Some((c, revision_template(&revision)?))
    });
    let (current_revision, current_template) = match current {
        Some((name, template)) => (name, template),
        None => (update_revision.clone(), spec.template.clone()),
    };
    // `statefulset-partition-ignored`: a controller that rolls every ordinal, whatever
    // rollingUpdate.partition holds back.
    let partition_ignored = ctx.cfg.faults.is_on("statefulset-partition-ignored");
    let partition = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .map(|r| if partition_ignored { 0 } else { r.partition.unwrap_or(0) });

    let owned = claim_pods(ctx, set.as_ref(), Some(&spec.selector), pods.in_namespace(&ns)).await?;
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let mut by_ordinal: BTreeMap<i32, Arc<Pod>> = BTreeMap::new();
    for p in owned {
        if let Some(o) = ordinal_of(&name, &p.name_any()) {
            by_ordinal.insert(o, p);
        }
    }
    // `statefulset-unordered`: a controller that manages every set as if it were Parallel;
    // `statefulset-parallel-ignored`: one that manages every set as if it were OrderedReady.
    let parallel = (spec.pod_management_policy.as_deref() == Some("Parallel")
        && !ctx.cfg.faults.is_on("statefulset-parallel-ignored"))
        || ctx.cfg.faults.is_on("statefulset-unordered");
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = set.metadata.deletion_timestamp.is_some();

    if !deleting {
        // Create or replace pods in order.
        for ordinal in start..start + replicas {
            let existing = by_ordinal.get(&ordinal);
            // As upstream `processReplica`: a pod that ended (rejected or evicted by its node,
            // or stopped) is deleted and recreated, whatever its exit code.
            // `statefulset-failed-pods-kept`: a controller that leaves them in place.
            if let Some(p) = existing
                && matches!(phase(p), "Failed" | "Succeeded")
                && p.metadata.deletion_timestamp.is_none()
                && !ctx.cfg.faults.is_on("statefulset-failed-pods-kept")
            {
                let pod_name = p.name_any();
                let (kind, reason, what) = if phase(p) == "Failed" {
                    (EventType::Warning, "RecreatingFailedPod", "failed")
                } else {
                    (EventType::Normal, "RecreatingTerminatedPod", "terminated")
                };
                recorder
                    .record(
                        set.as_ref(),
                        kind,
                        reason,
                        format!("StatefulSet {ns}/{name} is recreating {what} Pod {pod_name}"),
                    )
                    .await;
                delete_pod(recorder, pods, &pod_api, set, p).await?;
                if !parallel {
                    break;
                }
                continue;
            }
            match existing {
                None => {
                    ensure_claims(ctx, recorder, set, ordinal).await?;
                    let current_replicas = status.current_replicas.unwrap_or(0);
                    let pod = if created_at_current(spec, current_replicas, partition, start, ordinal) {
                        stateful_pod(set, &current_template, ordinal, &current_revision)
                    } else {
                        stateful_pod(set, &spec.template, ordinal, &update_revision)
                    };
                    match pod_api.create(&PostParams::default(), &pod).await {
                        Ok(created) => {
                            recorder
                                .record(
                                    set.as_ref(),
                                    EventType::Normal,
                                    "SuccessfulCreate",
                                    format!("create Pod {} in StatefulSet {name} successful", created.name_any()),
                                )
                                .await;
                            pods.wait_for_write(&created).await;
                        }
                        Err(e) if is_conflict(&e) => {}
                        Err(e) => {
                            recorder
                                .record(
                                    set.as_ref(),
                                    EventType::Warning,
                                    "FailedCreate",
                                    format!("create Pod {name}-{ordinal} in StatefulSet {name} failed error: {e}"),
                                )
                                .await;
                            return Err(e).ctx("create", || format!("pod {ns}/{name}-{ordinal}"));
                        }
                    }
                    if !parallel {
                        break;
                    }
                }
                Some(p) if !parallel && !running_and_ready(p) => break,
                Some(_) => {}
            }
        }
        // Scale down from the highest ordinal.
        let condemned: Vec<&Arc<Pod>> = by_ordinal
            .iter()
            .rev()
            .filter(|(o, _)| **o < start || **o >= start + replicas)
            .map(|(_, p)| p)
            .collect();
        let terminating = by_ordinal.values().any(|p| p.metadata.deletion_timestamp.is_some());
        for p in condemned.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
            if !parallel && terminating {
                break;
            }
            delete_pod(recorder, pods, &pod_api, set, p).await?;
            if !parallel {
                break;
            }
        }
        // Rolling update: replace the highest out-of-date pod at or above the partition once
        // every pod is Running and Ready.
        let strategy = spec.update_strategy.as_ref();
        let rolling = strategy.and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate") == "RollingUpdate";
        let partition = partition.unwrap_or(0);
        let all_healthy = (start..start + replicas).all(|o| by_ordinal.get(&o).is_some_and(|p| running_and_ready(p)));
        // `rollout-stuck=statefulset`: a controller that never replaces pods of an old template.
        let stuck = ctx.cfg.faults.applies_to("rollout-stuck", "statefulset");
        if rolling && all_healthy && !stuck {
            let stale = (start..start + replicas)
                .rev()
                .filter(|o| *o - start >= partition)
                .find_map(|o| {
                    by_ordinal
                        .get(&o)
                        .filter(|p| p.labels().get(CONTROLLER_REVISION_HASH) != Some(&update_revision))
                });
            if let Some(p) = stale {
                delete_pod(recorder, pods, &pod_api, set, p).await?;
            }
        }
    }

    // Status from the cache after this pass's writes.
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let now = ctx.now();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let live: Vec<Arc<Pod>> = pods
        .in_namespace(&ns)
        .into_iter()
        .filter(|p| super::util::controlled_by(&p.metadata, &uid) && ordinal_of(&name, &p.name_any()).is_some())
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !matches!(phase(p), "Failed" | "Succeeded"))
        .collect();
    let count = |f: &dyn Fn(&Pod) -> bool| live.iter().filter(|p| f(p)).count() as i32;
    let ready = count(&|p| is_ready(p));
    let available = count(&|p| is_available(p, min_ready, now));
    if available < ready {
        requeue.after(Duration::from_secs(1));
    }
    let updated = count(&|p| p.labels().get(CONTROLLER_REVISION_HASH) == Some(&update_revision));
    let mut current_revision = current_revision;
    if updated == replicas && ready == replicas && live.len() as i32 == replicas {
        current_revision = update_revision.clone();
    }
    let current = count(&|p| p.labels().get(CONTROLLER_REVISION_HASH) == Some(&current_revision));
    let desired = json!({
        "observedGeneration": set.metadata.generation,
        "replicas": live.len(),
        "readyReplicas": ready,
        "availableReplicas": available,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "currentRevision": current_revision,
        "updateRevision": update_revision,
    });
    let have = serde_json::to_value(&status).unwrap_or_default();
    let differs = desired.as_object().expect("object").iter().any(|(k, v)| {
        let h = have.get(k).cloned().unwrap_or(serde_json::Value::Null);
        h != *v && !(h.is_null() && *v == json!(0))
    });
    if differs {
        let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
        patch_status(&api, &name, desired, || format!("statefulset {ns}/{name}")).await?;
    }
    Ok(())
}

async fn delete_pod(
    recorder: &Recorder,
    pods: &Informer<Pod>,
    api: &Api<Pod>,
    set: &StatefulSet,
    p: &Pod,
) -> Result<()> {
    match api.delete(&p.name_any(), &DeleteParams::default()).await {
        Ok(_) => {
            recorder
                .record(
                    set,
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!(
                        "delete Pod {} in StatefulSet {} successful",
                        p.name_any(),
                        set.name_any()
                    ),
                )
                .await;
            pods.wait_for_delete(
                p.metadata.namespace.as_deref(),
                &p.name_any(),
                p.metadata.uid.as_deref(),
            )
            .await;
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("delete", || format!("pod {}", p.name_any())),
    }
}

async fn ensure_claims(ctx: &Ctx, recorder: &Recorder, set: &StatefulSet, ordinal: i32) -> Result<()> {
    let ns = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    for t in set
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_ref())
        .into_iter()
        .flatten()
    {
        let cname = format!("{}-{name}-{ordinal}", t.metadata.name.clone().unwrap_or_default());
        let mut labels = t.metadata.labels.clone().unwrap_or_default();
        for (k, v) in set
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone())
            .unwrap_or_default()
        {
            labels.insert(k, v);
        }
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(cname.clone()),
                namespace: Some(ns.clone()),
                labels: Some(labels),
                annotations: t.metadata.annotations.clone(),
                ..ObjectMeta::default()
            },
            spec: t.spec.clone(),
            status: None,
        };
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => {
                recorder
                    .record(
                        set,
                        EventType::Normal,
                        "SuccessfulCreate",
                        format!("create Claim {cname} Pod {name}-{ordinal} in StatefulSet {name} success"),
                    )
                    .await;
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e).ctx("create", || format!("persistentvolumeclaim {ns}/{cname}")),
        }
    }
    Ok(())
}

/// Records the template as a ControllerRevision (what `kubectl rollout history` lists).
///
/// As upstream `getStatefulSetRevisions`: a template equal to an older revision's (a rollback)
/// reuses that revision, renumbered to follow the newest.
async fn ensure_revision(ctx: &Ctx, set: &StatefulSet, revision: &str) -> Result<()> {
    let ns = set.namespace().unwrap_or_default();
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let cache = ctx.informers.get::<ControllerRevision>();
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let others_max = cache
        .in_namespace(&ns)
        .iter()
        .filter(|r| super::util::controlled_by(&r.metadata, &uid) && r.name_any() != revision)
        .map(|r| r.revision)
        .max()
        .unwrap_or(0);
    if let Some(existing) = cache.get(Some(&ns), revision) {
        if existing.revision < others_max {
            let patch = json!({"revision": others_max + 1});
            let renumbered = api
                .patch(revision, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .ctx("patch", || format!("controllerrevision {ns}/{revision}"))?;
            cache.wait_for_write(&renumbered).await;
        }
        return Ok(());
    }
    let number = others_max + 1;
    let spec = set.spec.as_ref().expect("caller checked the spec");
    let mut labels = spec.selector.match_labels.clone().unwrap_or_default();
    labels.insert(
        CONTROLLER_REVISION_HASH.into(),
        revision.rsplit('-').next().unwrap_or_default().into(),
    );
    let cr = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision.into()),
            namespace: Some(ns.clone()),
            labels: Some(labels),
            owner_references: Some(vec![owner_ref(set)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(
            json!({"spec": {"template": {"$patch": "replace", "metadata": spec.template.metadata, "spec": spec.template.spec}}}),
        )),
        revision: number,
    };
    match api.create(&PostParams::default(), &cr).await {
        Ok(created) => {
            cache.wait_for_write(&created).await;
            Ok(())
        }
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(e).ctx("create", || format!("controllerrevision {ns}/{revision}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_parse_from_names() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-abc"), None);
    }

    #[test]
    fn ordinals_below_the_partition_are_created_at_the_current_revision() {
        let spec = |strategy: serde_json::Value| -> StatefulSetSpec {
            serde_json::from_value(json!({"selector": {}, "serviceName": "s",
                "template": {"spec": {"containers": []}}, "updateStrategy": strategy}))
            .unwrap()
        };
        let rolling = spec(json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}));
        // Partition 2 of three replicas: 0 and 1 stay current, 2 is the canary.
        assert!(created_at_current(&rolling, 3, Some(2), 0, 0));
        assert!(created_at_current(&rolling, 3, Some(2), 0, 1));
        assert!(!created_at_current(&rolling, 3, Some(2), 0, 2));
        // Ordinals counted from spec.ordinals.start.
        assert!(created_at_current(&rolling, 3, Some(2), 5, 6));
        assert!(!created_at_current(&rolling, 3, Some(2), 5, 7));
        // Partition 0: everything at the update revision.
        assert!(!created_at_current(&rolling, 3, Some(0), 0, 0));
        // No rollingUpdate block: the pods below status.currentReplicas stay current.
        let bare = spec(json!({"type": "RollingUpdate"}));
        assert!(created_at_current(&bare, 2, None, 0, 1));
        assert!(!created_at_current(&bare, 2, None, 0, 2));
        let on_delete = spec(json!({"type": "OnDelete"}));
        assert!(!created_at_current(&on_delete, 2, None, 0, 0));
    }

    #[test]
    fn a_revision_gives_back_its_template() {
        let template: PodTemplateSpec = serde_json::from_value(
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "old"}]}}),
        )
        .unwrap();
        let revision = ControllerRevision {
            data: Some(RawExtension(json!({"spec": {"template": {"$patch": "replace",
                "metadata": template.metadata, "spec": template.spec}}}))),
            ..ControllerRevision::default()
        };
        assert_eq!(revision_template(&revision), Some(template));
        assert_eq!(revision_template(&ControllerRevision::default()), None);
    }

    #[test]
    fn pods_get_their_identity_and_claims() {
        let set: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {"serviceName": "nginx", "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}
        }))
        .unwrap();
        let pod = stateful_pod(&set, &set.spec.as_ref().unwrap().template, 2, "web-abc");
        assert_eq!(pod.name_any(), "web-2");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        assert_eq!(
            spec.volumes.as_ref().unwrap()[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "www-web-2"
        );
        assert_eq!(pod.labels()[POD_NAME_LABEL], "web-2");
        assert_eq!(pod.labels()[CONTROLLER_REVISION_HASH], "web-abc");
    }
}
