//! The Deployment controller: one ReplicaSet per pod template (named and labelled by
//! `pod-template-hash`), rolling updates within maxSurge/maxUnavailable or Recreate, revision
//! annotations, history cleanup, and the status and conditions `kubectl rollout status` and
//! `kubectl wait --for=condition=Available` read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Informer, Requeue, reconcile_each};
use super::plane::{Component, Ctx};
use super::util::{controlled_by, controller_of, owner_ref, selector_matches, set_condition, template_hash};
use super::writes::{patch_status, patch_status_at};

/// The label that ties a ReplicaSet and its pods to one template of a Deployment.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision annotation on Deployments and their ReplicaSets.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
use super::deployment_scale::{DESIRED_REPLICAS, MAX_REPLICAS, is_scaling_event, scaling_targets};

/// Runs the Deployment controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let deployments = ctx.informers.get::<Deployment>();
    let sets = ctx.informers.get::<ReplicaSet>();
    let pods = ctx.informers.get::<Pod>();
    let recorder = ctx.recorder(Component::Deployment);
    let caches = async {
        deployments.ready().await?;
        sets.ready().await?;
        pods.ready().await
    };
    let changes = vec![deployments.subscribe(), sets.subscribe(), pods.subscribe()];
    reconcile_each(&ctx, caches, &deployments, changes, |d, pass| {
        sync(&ctx, &recorder, &sets, &pods, d, pass.requeue).boxed()
    })
    .await
}

/// Resolves an int-or-percent against `total`, rounding up (surge) or down (unavailable).
pub fn resolve_int_or_percent(v: Option<&IntOrString>, total: i32, round_up: bool, default: &str) -> i32 {
    let s = match v {
        Some(IntOrString::Int(i)) => return *i,
        Some(IntOrString::String(s)) => s.as_str(),
        None => default,
    };
    let Some(pct) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
        return s.parse().unwrap_or(0);
    };
    let scaled = pct * i64::from(total);
    (if round_up { (scaled + 99) / 100 } else { scaled / 100 }) as i32
}

/// maxSurge and maxUnavailable of a rolling Deployment (upstream's ResolveFenceposts: both 0
/// would deadlock, so unavailable becomes 1).
pub fn fenceposts(d: &Deployment) -> (i32, i32) {
    let replicas = replicas(d);
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let surge = resolve_int_or_percent(ru.and_then(|r| r.max_surge.as_ref()), replicas, true, "25%");
    let unavailable = resolve_int_or_percent(ru.and_then(|r| r.max_unavailable.as_ref()), replicas, false, "25%");
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0)
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations().get(REVISION).and_then(|r| r.parse().ok()).unwrap_or(0)
}

/// Whether the Deployment rolls out by Recreate (`deployment-recreate-ignored`: a controller
/// that rolls every Deployment like RollingUpdate).
fn is_recreate(ctx: &Ctx, d: &Deployment) -> bool {
    !ctx.cfg.faults.is_on("deployment-recreate-ignored")
        && d.spec
            .as_ref()
            .and_then(|s| s.strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
            == Some("Recreate")
}

/// The template with the `pod-template-hash` label removed, for comparing a ReplicaSet's
/// template with its Deployment's (upstream's EqualIgnoreHash).
fn without_hash(t: &PodTemplateSpec) -> serde_json::Value {
    let mut t = t.clone();
    if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        l.remove(POD_TEMPLATE_HASH);
        if l.is_empty() {
            t.metadata.as_mut().expect("has metadata").labels = None;
        }
    }
    serde_json::to_value(t).unwrap_or_default()
}

async fn sync(
    ctx: &Ctx,
    recorder: &Recorder,
    sets: &Informer<ReplicaSet>,
    pods: &Informer<Pod>,
    d: &Arc<Deployment>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = d.namespace().unwrap_or_default();
    let name = d.name_any();
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let Some(spec) = d.spec.as_ref() else { return Ok(()) };
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);

    // Claim ReplicaSets: owned ones, plus orphans matching the selector.
    let mut owned: Vec<ReplicaSet> = Vec::new();
    // Read fresh once before the first adoption (upstream's RecheckDeletionTimestamp): the
    // cached Deployment may predate its deletion with propagationPolicy Orphan.
    let mut adoptable: Option<bool> = None;
    for rs in sets.in_namespace(&ns) {
        if controlled_by(&rs.metadata, &uid) {
            owned.push(ReplicaSet::clone(&rs));
        } else if controller_of(&rs.metadata).is_none()
            && d.metadata.deletion_timestamp.is_none()
            && rs.metadata.deletion_timestamp.is_none()
            && selector_matches(Some(&spec.selector), rs.metadata.labels.as_ref())
        {
            if adoptable.is_none() {
                adoptable = Some(super::replicaset::still_adoptable(ctx, d.as_ref()).await?);
            }
            if adoptable != Some(true) {
                return Err(super::error::Error::OwnerDeleted {
                    object: format!("Deployment {ns}/{name}"),
                });
            }
            let mut refs = rs.owner_references().to_vec();
            refs.push(owner_ref(d.as_ref()));
            let patch = json!({"metadata": {"ownerReferences": refs, "uid": rs.metadata.uid}});
            let adopted = rs_api
                .patch(&rs.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .ctx("adopt", || format!("replicaset {ns}/{}", rs.name_any()))?;
            owned.push(adopted);
        }
    }
    if d.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }

    let template_json = without_hash(&spec.template);
    let mut new_rs: Option<ReplicaSet> = owned
        .iter()
        .filter(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|t| without_hash(t) == template_json)
        })
        .min_by_key(|rs| rs.metadata.creation_timestamp.clone())
        .cloned();
    let mut old: Vec<ReplicaSet> = owned
        .iter()
        .filter(|rs| new_rs.as_ref().is_none_or(|n| n.metadata.uid != rs.metadata.uid))
        .cloned()
        .collect();
    old.sort_by_key(|rs| (revision(rs), rs.metadata.creation_timestamp.clone()));
    let max_old_revision = old.iter().map(revision).max().unwrap_or(0);
    let paused = spec.paused == Some(true);
    let want = replicas(d);
    let (surge, max_unavailable) = if is_recreate(ctx, d) { (0, want) } else { fenceposts(d) };
    let mut created_new = None;

    // A paused Deployment and a scaling event are handled alone (upstream syncDeployment:
    // `Paused` or `isScalingEvent`, then `sync`): a change of spec.replicas is spread over the
    // active ReplicaSets in proportion to their size; the rollout goes on at the next pass.
    // `deployment-proportional-off`: a controller that only rolls, so a stuck rollout's new
    // ReplicaSet takes the whole change (and a paused Deployment is left as it is).
    let all: Vec<&ReplicaSet> = new_rs.iter().chain(old.iter()).collect();
    if !ctx.cfg.faults.is_on("deployment-proportional-off") && (paused || is_scaling_event(want, &all)) {
        let status_replicas = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let targets = scaling_targets(
            want,
            surge,
            !is_recreate(ctx, d),
            status_replicas,
            new_rs.as_ref(),
            &old,
        );
        for rs in new_rs.iter_mut().chain(old.iter_mut()) {
            let Some((_, to)) = targets.iter().find(|(n, _)| *n == rs.name_any()) else {
                continue;
            };
            let annotated = rs.annotations().get(DESIRED_REPLICAS) == Some(&want.to_string())
                && rs.annotations().get(MAX_REPLICAS) == Some(&(want + surge).to_string());
            if rs_replicas(rs) != *to || !annotated {
                scale(ctx, recorder, d, sets, rs, *to, want, surge).await?;
            }
        }
        if paused {
            cleanup_history(ctx, d, &old, &rs_api).await?;
        }
        return update_status(ctx, d, new_rs.as_ref(), &old, None, requeue).await;
    }

    if paused {
        // A paused Deployment keeps its ReplicaSets as they are; only status is updated.
    } else if new_rs.is_none() {
        let collision = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = template_hash(&spec.template, collision);
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_default()
            .labels
            .get_or_insert_default()
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector: LabelSelector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_default()
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let initial = if is_recreate(ctx, d) {
            0
        } else {
            let total: i32 = owned.iter().map(rs_replicas).sum();
            (want + surge - total).clamp(0, want)
        };
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{hash}")),
                namespace: Some(ns.clone()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([
                    (REVISION.to_owned(), (max_old_revision + 1).to_string()),
                    (DESIRED_REPLICAS.to_owned(), want.to_string()),
                    (MAX_REPLICAS.to_owned(), (want + surge).to_string()),
                ])),
                owner_references: Some(vec![owner_ref(d.as_ref())]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(initial),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        match rs_api.create(&PostParams::default(), &rs).await {
            Ok(created) => {
                tracing::info!(deployment = %name, replicaset = %created.name_any(), "created new replica set");
                if initial > 0 {
                    recorder
                        .record(
                            d.as_ref(),
                            EventType::Normal,
                            "ScalingReplicaSet",
                            format!("Scaled up replica set {} from 0 to {initial}", created.name_any()),
                        )
                        .await;
                }
                sets.wait_for_write(&created).await;
                created_new = Some(created.name_any());
                new_rs = Some(created);
            }
            Err(e) if super::error::is_conflict(&e) => {
                // The name is taken by a ReplicaSet with another template: bump collisionCount
                // so the next hash differs (upstream's hash-collision handling).
                let count = collision.unwrap_or(0) + 1;
                let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
                let status = json!({"collisionCount": count});
                patch_status(&api, &name, status, || format!("deployment {ns}/{name}")).await?;
                return Ok(());
            }
            Err(e) => return Err(e).ctx("create", || format!("replicaset for deployment {ns}/{name}")),
        }
    } else if let Some(n) = new_rs.as_mut()
        && revision(n) <= max_old_revision
    {
        // A rollback to an older template makes that ReplicaSet the newest revision again.
        let rev = (max_old_revision + 1).to_string();
        let patched = rs_api
            .patch(
                &n.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {REVISION: rev}}})),
            )
            .await
            .ctx("patch", || format!("replicaset {ns}/{}", n.name_any()))?;
        *n = patched;
    }

    if !paused && let Some(new) = new_rs.clone() {
        if is_recreate(ctx, d) {
            let old_active = old.iter().any(|rs| rs_replicas(rs) > 0);
            for rs in old.iter_mut().filter(|rs| rs_replicas(rs) > 0) {
                scale(ctx, recorder, d, sets, rs, 0, want, surge).await?;
            }
            let old_uids: Vec<String> = old.iter().filter_map(|rs| rs.metadata.uid.clone()).collect();
            // Recreate waits until every old pod has terminated, not just been asked to.
            let old_pods_running = pods.in_namespace(&ns).iter().any(|p| {
                controller_of(&p.metadata).is_some_and(|o| old_uids.contains(&o.uid))
                    && !matches!(super::util::phase(p), "Succeeded" | "Failed")
            });
            if !old_active && !old_pods_running && rs_replicas(&new) != want {
                let mut new = new;
                scale(ctx, recorder, d, sets, &mut new, want, want, surge).await?;
            }
        } else {
            let mut new = new;
            // Scale the new ReplicaSet up within maxSurge (or down to the desired count).
            let total: i32 = rs_replicas(&new) + old.iter().map(rs_replicas).sum::<i32>();
            let current = rs_replicas(&new);
            let target = if current > want {
                want
            } else {
                (want + surge - total + current).clamp(current, want)
            };
            if target != current {
                scale(ctx, recorder, d, sets, &mut new, target, want, surge).await?;
            }
            // Scale old ReplicaSets down while keeping want - maxUnavailable available.
            let min_available = want - max_unavailable;
            let all_pods: i32 = rs_replicas(&new) + old.iter().map(rs_replicas).sum::<i32>();
            let new_unavailable = rs_replicas(&new) - rs_available(&new);
            let mut max_scale_down = all_pods - min_available - new_unavailable;
            // First the old replicas that are not available anyway.
            for rs in old.iter_mut() {
                if max_scale_down <= 0 {
                    break;
                }
                let unhealthy = rs_replicas(rs) - rs_available(rs);
                if unhealthy <= 0 {
                    continue;
                }
                let down = unhealthy.min(max_scale_down);
                let to = rs_replicas(rs) - down;
                scale(ctx, recorder, d, sets, rs, to, want, surge).await?;
                max_scale_down -= down;
            }
            // Then available ones, oldest first, as far as availability allows.
            let available: i32 = rs_available(&new) + old.iter().map(rs_available).sum::<i32>();
            let mut budget = (available - min_available).min(max_scale_down.max(0));
            for rs in old.iter_mut() {
                if budget <= 0 {
                    break;
                }
                let r = rs_replicas(rs);
                if r == 0 {
                    continue;
                }
                let down = r.min(budget);
                scale(ctx, recorder, d, sets, rs, r - down, want, surge).await?;
                budget -= down;
            }
            new_rs = Some(new);
        }
    }

    cleanup_history(ctx, d, &old, &rs_api).await?;
    update_status(ctx, d, new_rs.as_ref(), &old, created_new, requeue).await
}

#[expect(
    clippy::too_many_arguments,
    reason = "scaling needs the deployment's fenceposts for its annotations"
)]
async fn scale(
    ctx: &Ctx,
    recorder: &Recorder,
    d: &Deployment,
    sets: &Informer<ReplicaSet>,
    rs: &mut ReplicaSet,
    to: i32,
    want: i32,
    surge: i32,
) -> Result<()> {
    let from = rs_replicas(rs);
    let ns = rs.namespace().unwrap_or_default();
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = json!({
        "metadata": {"annotations": {DESIRED_REPLICAS: want.to_string(), MAX_REPLICAS: (want + surge).to_string()}},
        "spec": {"replicas": to},
    });
    let patched = api
        .patch(&rs.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .ctx("scale", || format!("replicaset {ns}/{}", rs.name_any()))?;
    if from != to {
        let verb = if to > from { "up" } else { "down" };
        recorder
            .record(
                d,
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled {verb} replica set {} from {from} to {to}", rs.name_any()),
            )
            .await;
    }
    sets.wait_for_write(&patched).await;
    *rs = patched;
    Ok(())
}

async fn cleanup_history(ctx: &Ctx, d: &Deployment, old: &[ReplicaSet], api: &Api<ReplicaSet>) -> Result<()> {
    if ctx.cfg.faults.is_on("revision-history-limit-ignored") {
        return Ok(());
    }
    let limit = d
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize;
    let idle: Vec<&ReplicaSet> = old
        .iter()
        .filter(|rs| {
            rs_replicas(rs) == 0
                && rs.status.as_ref().map_or(0, |s| s.replicas) == 0
                && rs.metadata.deletion_timestamp.is_none()
        })
        .collect();
    if idle.len() <= limit {
        return Ok(());
    }
    // `old` is sorted by revision, oldest first.
    for rs in &idle[..idle.len() - limit] {
        match api.delete(&rs.name_any(), &DeleteParams::default()).await {
            Ok(_) => tracing::info!(replicaset = %rs.name_any(), "deleted old replica set beyond revisionHistoryLimit"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e).ctx("delete", || format!("replicaset {}", rs.name_any())),
        }
    }
    let _ = ctx;
    Ok(())
}

async fn update_status(
    ctx: &Ctx,
    d: &Deployment,
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
    created_new: Option<String>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = d.namespace().unwrap_or_default();
    let name = d.name_any();
    let now = ctx.now();
    let want = replicas(d);
    let all: Vec<&ReplicaSet> = new.into_iter().chain(old.iter()).collect();
    let st = |f: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> i32| -> i32 {
        all.iter().filter_map(|rs| rs.status.as_ref()).map(f).sum()
    };
    let total = st(|s| s.replicas);
    let ready = st(|s| s.ready_replicas.unwrap_or(0));
    let available = st(|s| s.available_replicas.unwrap_or(0));
    let updated = new.and_then(|n| n.status.as_ref()).map_or(0, |s| s.replicas);
    let (_, max_unavailable) = if is_recreate(ctx, d) { (0, 0) } else { fenceposts(d) };
    let old_replicas: i32 = old.iter().filter_map(|rs| rs.status.as_ref()).map(|s| s.replicas).sum();

    let status = d.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.clone().unwrap_or_default();
    let cond = |type_: &str, status: &str, reason: &str, message: String| DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    let min_available = want - max_unavailable;
    if available >= min_available {
        set_condition(
            &mut conditions,
            cond(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            ),
            |c| &c.type_,
        );
    } else {
        set_condition(
            &mut conditions,
            cond(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            ),
            |c| &c.type_,
        );
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused) == Some(true);
    let new_name = new.map(|n| n.name_any()).unwrap_or_default();
    let complete = new.is_some() && updated == want && total == updated && available == updated && old_replicas == 0;
    let progressing = if paused {
        Some(cond(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
        ))
    } else if let Some(n) = created_new {
        Some(cond(
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            format!("Created new replica set \"{n}\""),
        ))
    } else if complete {
        Some(cond(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{new_name}\" has successfully progressed."),
        ))
    } else if new.is_some() {
        let deadline = d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).unwrap_or(600);
        let last = conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .and_then(|c| c.last_update_time.as_ref())
            .map(|t| t.0);
        let moved = status.updated_replicas.unwrap_or(0) != updated
            || status.ready_replicas.unwrap_or(0) != ready
            || status.available_replicas.unwrap_or(0) != available
            || status.replicas.unwrap_or(0) != total;
        let timed_out = !moved && last.is_some_and(|l| now.duration_since(l).as_secs() > i64::from(deadline));
        if timed_out {
            Some(cond(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("ReplicaSet \"{new_name}\" has timed out progressing."),
            ))
        } else if moved || last.is_none() {
            // Progress refreshes lastUpdateTime even when reason and message stay the same.
            let c = cond(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                format!("ReplicaSet \"{new_name}\" is progressing."),
            );
            set_condition(&mut conditions, c, |c| &c.type_);
            if let Some(p) = conditions.iter_mut().find(|c| c.type_ == "Progressing") {
                p.last_update_time = Some(Time(now));
            }
            None
        } else {
            requeue.after(Duration::from_secs(5));
            None
        }
    } else {
        None
    };
    if let Some(p) = progressing {
        set_condition(&mut conditions, p, |c| &c.type_);
    }
    let mut desired = json!({
        "observedGeneration": d.metadata.generation,
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": (want - available).max(0),
        "conditions": conditions,
    });
    if let Some(c) = status.collision_count {
        desired["collisionCount"] = json!(c);
    }
    let current = serde_json::to_value(&status).unwrap_or_default();
    let zero_if_missing = |k: &str| current.get(k).cloned().unwrap_or(json!(0));
    let differs = [
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ]
    .iter()
    .any(|k| zero_if_missing(k) != desired[*k])
        || current.get("conditions").cloned().unwrap_or(json!([])) != desired["conditions"];
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    // The version the status write is conditional on: the one this pass read, or the one the
    // revision annotation's write produced (upstream updates the object it got back).
    let mut rv = d.metadata.resource_version.clone();
    if let Some(n) = new {
        let rev = n.annotations().get(REVISION).cloned().unwrap_or_default();
        if d.annotations().get(REVISION) != Some(&rev) && !rev.is_empty() {
            let annotated = api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {
                        "resourceVersion": rv,
                        "annotations": {REVISION: rev},
                    }})),
                )
                .await
                .ctx("annotate", || format!("deployment {ns}/{name}"))?;
            rv = annotated.metadata.resource_version;
        }
    }
    if differs {
        // Conditional, as upstream's UpdateStatus: conditions computed from a stale cache must
        // answer 409 (and be recomputed) rather than drop one a client added through /status.
        patch_status_at(&api, &name, rv.as_deref(), desired, || {
            format!("deployment {ns}/{name}")
        })
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_like_upstream() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(resolve_int_or_percent(Some(&pct("25%")), 3, true, "25%"), 1);
        assert_eq!(resolve_int_or_percent(Some(&pct("25%")), 3, false, "25%"), 0);
        assert_eq!(resolve_int_or_percent(Some(&IntOrString::Int(2)), 3, false, "25%"), 2);
        assert_eq!(resolve_int_or_percent(None, 10, true, "25%"), 3);
    }

    #[test]
    fn fenceposts_never_both_zero() {
        let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {
            "replicas": 1, "selector": {}, "template": {},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}}}}))
        .unwrap();
        assert_eq!(fenceposts(&d), (0, 1));
    }

    #[test]
    fn templates_compare_without_the_hash_label() {
        let a: PodTemplateSpec = serde_json::from_value(json!({"metadata": {"labels": {"app": "x"}}})).unwrap();
        let b: PodTemplateSpec =
            serde_json::from_value(json!({"metadata": {"labels": {"app": "x", POD_TEMPLATE_HASH: "abc"}}})).unwrap();
        assert_eq!(without_hash(&a), without_hash(&b));
    }
}
