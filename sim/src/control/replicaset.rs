//! The ReplicaSet and ReplicationController controller: keeps `spec.replicas` active pods
//! matching the selector, adopting orphans and releasing pods that stopped matching, and
//! reports replicas, fullyLabeledReplicas, readyReplicas and availableReplicas.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Cached, Informer, Requeue, reconcile_each};
use super::plane::{Component, Ctx};
use super::util::{
    controlled_by, controller_of, generate_name_prefix, is_active, is_available, is_ready, owner_ref, phase,
    pod_from_template, ready_since, selector_matches,
};
use super::writes::{api_message, create_owned_pod, delete_owned_pod, patch_status_at};

/// Pods a controller creates or deletes in one pass at most (upstream's burstReplicas).
pub(crate) const BURST_REPLICAS: usize = 500;

/// What the controller needs of ReplicaSets and ReplicationControllers alike.
pub(crate) trait ReplicaOwner: Cached + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> {
    fn replicas(&self) -> i32;
    fn selector(&self) -> Option<LabelSelector>;
    fn template(&self) -> Option<&PodTemplateSpec>;
    fn min_ready_seconds(&self) -> i32;
    fn status_json(&self) -> serde_json::Value;
}

impl ReplicaOwner for ReplicaSet {
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn selector(&self) -> Option<LabelSelector> {
        self.spec.as_ref().map(|s| s.selector.clone())
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }
    fn status_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.status).unwrap_or_default()
    }
}

impl ReplicaOwner for ReplicationController {
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn selector(&self) -> Option<LabelSelector> {
        // An RC without a selector selects its template's labels (the API server defaults it).
        let spec = self.spec.as_ref()?;
        let labels = spec.selector.clone().or_else(|| {
            spec.template
                .as_ref()
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.clone())
        })?;
        Some(LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        })
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }
    fn status_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.status).unwrap_or_default()
    }
}

/// Runs the ReplicaSet and ReplicationController loops until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let rc = if ctx.informers.served::<ReplicationController>().await {
        tokio::spawn(run_kind::<ReplicationController>(ctx.clone()))
    } else {
        tracing::info!("replicationcontrollers are not served; their controller stays idle");
        tokio::spawn(async { Ok(()) })
    };
    let rs = run_kind::<ReplicaSet>(ctx).await;
    match rc.await {
        Ok(r) => r?,
        Err(e) => tracing::error!(error = %e, "replicationcontroller loop panicked"),
    }
    rs
}

async fn run_kind<K: ReplicaOwner>(ctx: Ctx) -> Result<()> {
    let owners = ctx.informers.get::<K>();
    let pods = ctx.informers.get::<Pod>();
    let recorder = ctx.recorder(Component::ReplicaSet);
    let caches = async {
        owners.ready().await?;
        pods.ready().await
    };
    let changes = vec![owners.subscribe(), pods.subscribe()];
    reconcile_each(&ctx, caches, &owners, changes, |owner, pass| {
        sync(&ctx, &recorder, &pods, owner, pass.requeue).boxed()
    })
    .await
}

/// Upstream's ActivePods ordering: the pod to delete first sorts first.
pub(crate) fn deletion_rank(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let assigned = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    let phase_rank = |p: &Pod| match phase(p) {
        "Pending" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    let restarts = |p: &Pod| -> i32 {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
    };
    assigned(a)
        .cmp(&assigned(b))
        .then(phase_rank(a).cmp(&phase_rank(b)))
        .then(is_ready(a).cmp(&is_ready(b)))
        .then_with(|| ready_since(b).cmp(&ready_since(a)))
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| b.metadata.creation_timestamp.cmp(&a.metadata.creation_timestamp))
}

/// Adopts orphans matching `selector` and releases owned pods that no longer match; returns
/// the pods the owner controls afterwards.
pub(crate) async fn claim_pods<K: Cached>(
    ctx: &Ctx,
    owner: &K,
    selector: Option<&LabelSelector>,
    candidates: Vec<Arc<Pod>>,
) -> Result<Vec<Arc<Pod>>> {
    claim_pods_adding(ctx, owner, selector, candidates, &[]).await
}

/// As [`claim_pods`], adding `finalizers` to each pod it adopts in the same patch (upstream's
/// Job controller adopts with its tracking finalizer, `NewPodControllerRefManager`'s
/// finalizers argument).
pub(crate) async fn claim_pods_adding<K: Cached>(
    ctx: &Ctx,
    owner: &K,
    selector: Option<&LabelSelector>,
    candidates: Vec<Arc<Pod>>,
    finalizers: &[&str],
) -> Result<Vec<Arc<Pod>>> {
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let deleting = owner.meta().deletion_timestamp.is_some();
    let mut claimed = Vec::new();
    // Upstream's RecheckDeletionTimestamp: whether the owner may adopt is read fresh from the
    // API once, before the first adoption, as the cached owner may predate its deletion; an
    // owner found deleted ends the sync (no pods are created for it either).
    let mut adoptable: Option<bool> = None;
    for pod in candidates {
        let matches = selector_matches(selector, pod.metadata.labels.as_ref());
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
        if controlled_by(&pod.metadata, &uid) {
            if matches || deleting {
                claimed.push(pod);
            } else {
                let refs: Vec<_> = pod
                    .owner_references()
                    .iter()
                    .filter(|o| o.uid != uid)
                    .cloned()
                    .collect();
                let patch = json!({"metadata": {"ownerReferences": refs, "uid": pod.metadata.uid}});
                match api
                    .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => tracing::info!(pod = %pod.name_any(), owner = %owner.name_any(), "released pod"),
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e).ctx("release", || format!("pod {}", pod.name_any())),
                }
            }
        } else if controller_of(&pod.metadata).is_none()
            && matches
            && !deleting
            && pod.metadata.deletion_timestamp.is_none()
        {
            if adoptable.is_none() {
                adoptable = Some(still_adoptable(ctx, owner).await?);
            }
            if adoptable != Some(true) {
                return Err(super::error::Error::OwnerDeleted {
                    object: format!(
                        "{} {}/{}",
                        K::kind(&()),
                        owner.namespace().unwrap_or_default(),
                        owner.name_any()
                    ),
                });
            }
            let mut refs = pod.owner_references().to_vec();
            refs.push(owner_ref(owner));
            let mut patch = json!({"metadata": {"ownerReferences": refs, "uid": pod.metadata.uid}});
            let mut fins = pod.finalizers().to_vec();
            let missing: Vec<String> = finalizers
                .iter()
                .filter(|f| !fins.iter().any(|x| x == *f))
                .map(|f| (*f).to_owned())
                .collect();
            if !missing.is_empty() {
                fins.extend(missing);
                patch["metadata"]["finalizers"] = json!(fins);
            }
            match api
                .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(p) => {
                    tracing::info!(pod = %pod.name_any(), owner = %owner.name_any(), "adopted pod");
                    claimed.push(Arc::new(p));
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e).ctx("adopt", || format!("pod {}", pod.name_any())),
            }
        }
    }
    Ok(claimed)
}

/// Whether `owner`, read fresh, is still the same object and not being deleted (upstream's
/// `RecheckDeletionTimestamp` before adopting orphans).
pub(crate) async fn still_adoptable<K: Cached>(ctx: &Ctx, owner: &K) -> Result<bool> {
    let ar = kube::api::ApiResource::erase::<K>(&());
    let ns = owner.meta().namespace.clone().unwrap_or_default();
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ar);
    let name = owner.name_any();
    match api.get_opt(&name).await {
        Ok(Some(o)) => Ok(o.metadata.uid == owner.meta().uid && o.metadata.deletion_timestamp.is_none()),
        Ok(None) => Ok(false),
        Err(e) => Err(e).ctx("recheck", || format!("owner {name} before adopting pods")),
    }
}

async fn sync<K: ReplicaOwner>(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    owner: &Arc<K>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = owner.namespace().unwrap_or_default();
    let name = owner.name_any();
    let kind = K::kind(&()).into_owned();
    let selector = owner.selector();
    let in_ns: Vec<Arc<Pod>> = pods
        .in_namespace(&ns)
        .into_iter()
        .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    let owned = claim_pods(ctx, owner.as_ref(), selector.as_ref(), in_ns).await?;
    let mut active: Vec<Arc<Pod>> = owned.iter().filter(|p| is_active(p)).cloned().collect();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // The first create or delete that failed in this pass: it becomes the ReplicaFailure
    // condition (upstream's manageReplicasErr) and is returned after the status write.
    let mut failure: Option<(&'static str, String, kube::Error)> = None;
    if owner.meta().deletion_timestamp.is_none() {
        let want = owner.replicas().max(0) as usize;
        if active.len() < want {
            let Some(template) = owner.template() else {
                return Ok(());
            };
            let n = (want - active.len()).min(BURST_REPLICAS);
            for _ in 0..n {
                let pod = pod_from_template(
                    template,
                    &ns,
                    super::util::owner_ref(owner.as_ref()),
                    None,
                    Some(generate_name_prefix(&name)),
                );
                if let Err(e) = create_owned_pod(recorder, pods, &api, owner.as_ref(), &pod).await {
                    failure = Some(("FailedCreate", api_message(&e), e));
                    break;
                }
            }
        } else if active.len() > want {
            active.sort_by(|a, b| deletion_rank(a, b));
            let extra: Vec<Arc<Pod>> = active.drain(..active.len() - want).collect();
            for pod in extra.iter().take(BURST_REPLICAS) {
                let deleted = delete_owned_pod(
                    recorder,
                    &api,
                    owner.as_ref(),
                    pod,
                    &DeleteParams::default(),
                    Some(pods),
                )
                .await;
                if let Err(e) = deleted {
                    let msg = api_message(&e);
                    recorder
                        .record(
                            owner.as_ref(),
                            EventType::Warning,
                            "FailedDelete",
                            format!("Error deleting: {msg}"),
                        )
                        .await;
                    failure = Some(("FailedDelete", msg, e));
                    break;
                }
            }
        }
    }
    let condition = failure.as_ref().map(|(reason, msg, _)| (*reason, msg.as_str()));
    update_status(ctx, pods, owner, condition, requeue).await?;
    match failure {
        Some((reason, _, e)) => Err(e).ctx(if reason == "FailedCreate" { "create" } else { "delete" }, || {
            format!("pod for {kind} {ns}/{name}")
        }),
        None => Ok(()),
    }
}

/// Upstream's `calculateStatus` for the ReplicaFailure condition: a failed create or delete
/// (`failure`: reason and the API's message) adds it when absent; a pass without failure
/// removes it. Other conditions are kept as they are.
fn failure_conditions(status: &serde_json::Value, failure: Option<(&str, &str)>, now: &str) -> serde_json::Value {
    let mut conditions: Vec<serde_json::Value> = status
        .get("conditions")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    let present = conditions.iter().any(|c| c["type"] == "ReplicaFailure");
    match failure {
        Some((reason, message)) if !present => conditions.push(json!({
            "type": "ReplicaFailure",
            "status": "True",
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        })),
        None if present => conditions.retain(|c| c["type"] != "ReplicaFailure"),
        _ => {}
    }
    json!(conditions)
}

async fn update_status<K: ReplicaOwner>(
    ctx: &Ctx,
    pods: &Informer<Pod>,
    owner: &Arc<K>,
    failure: Option<(&str, &str)>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = owner.namespace().unwrap_or_default();
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let now = ctx.now();
    let min_ready = owner.min_ready_seconds();
    let template_labels: BTreeMap<String, String> = owner
        .template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let active: Vec<Arc<Pod>> = pods
        .in_namespace(&ns)
        .into_iter()
        .filter(|p| controlled_by(&p.metadata, &uid) && is_active(p))
        .collect();
    let fully_labeled = active
        .iter()
        .filter(|p| template_labels.iter().all(|(k, v)| p.labels().get(k) == Some(v)))
        .count();
    let ready = active.iter().filter(|p| is_ready(p)).count();
    let available = active.iter().filter(|p| is_available(p, min_ready, now)).count();
    if available < ready {
        requeue.after(Duration::from_secs(1));
    }
    let mut status = owner.status_json();
    if status.is_null() {
        status = json!({});
    }
    let stamp = jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_default();
    let desired = json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": owner.meta().generation,
        "conditions": failure_conditions(&status, failure, &stamp),
    });
    let differs = desired.as_object().expect("object").iter().any(|(k, v)| {
        let empty = if k == "conditions" { json!([]) } else { json!(0) };
        let have = status
            .get(k)
            .cloned()
            .filter(|v| !v.is_null())
            .unwrap_or_else(|| empty.clone());
        let want = if v.is_null() { empty } else { v.clone() };
        have != want
    });
    if differs {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
        // Conditional on the version this pass read, as upstream's UpdateStatus: conditions
        // computed from a stale cache must not drop one a client added through /status.
        let rv = owner.meta().resource_version.as_deref();
        patch_status_at(&api, &owner.name_any(), rv, desired, || {
            format!("{} {ns}/{}", K::kind(&()), owner.name_any())
        })
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn deletion_prefers_unassigned_pending_unready_pods() {
        let unassigned = pod(json!({"metadata": {"name": "u"}}));
        let pending = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [], "nodeName": "n"}, "status": {"phase": "Pending"}}),
        );
        let running = pod(
            json!({"metadata": {"name": "r"}, "spec": {"containers": [], "nodeName": "n"}, "status": {"phase": "Running"}}),
        );
        let ready = pod(
            json!({"metadata": {"name": "ok"}, "spec": {"containers": [], "nodeName": "n"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let mut all = [ready, running, pending, unassigned];
        all.sort_by(deletion_rank);
        let names: Vec<_> = all.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, vec!["u", "p", "r", "ok"]);
    }

    #[test]
    fn replica_failure_is_added_once_and_removed_on_success() {
        let none = json!({});
        let added = failure_conditions(&none, Some(("FailedCreate", "exceeded quota")), "t1");
        assert_eq!(added[0]["type"], "ReplicaFailure");
        assert_eq!(added[0]["reason"], "FailedCreate");
        let status = json!({"conditions": added});
        let kept = failure_conditions(&status, Some(("FailedCreate", "other")), "t2");
        assert_eq!(kept[0]["lastTransitionTime"], "t1");
        assert_eq!(failure_conditions(&status, None, "t3"), json!([]));
    }

    #[test]
    fn rc_selector_defaults_to_template_labels() {
        let rc: ReplicationController = serde_json::from_value(json!({"metadata": {"name": "rc"},
            "spec": {"template": {"metadata": {"labels": {"app": "x"}}}}}))
        .unwrap();
        let sel = rc.selector().unwrap();
        assert_eq!(sel.match_labels.unwrap().get("app").map(String::as_str), Some("x"));
        assert_eq!(rc.replicas(), 1);
    }
}
