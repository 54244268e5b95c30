//! `[sig-api-machinery] Garbage collector` conformance cases of upstream
//! test/e2e/apimachinery/garbage_collector.go: owners deleted with propagationPolicy
//! Background, Orphan and Foreground, dependents that keep a second, valid owner, and a circle
//! of owner references.
//!
//! The pods are the target OS's (upstream's nginx image, grace period 0); what the cases check
//! is kube-controller-manager's garbage collector, the same on both OSes. Upstream sizes its
//! larger ReplicationControllers from the nodes' pod capacity (`estimateMaximumPods`, between
//! 10 and 100 pods); these use its lower bound, which takes the collector through the same
//! paths in seconds.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, ReplicationController};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::wait::conditions::is_deleted;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{CONSISTENTLY, deployment, names, replication_controller, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream "should delete pods created by rc when not orphaning".
pub(crate) const DELETE_PODS: &str =
    "[sig-api-machinery] Garbage collector should delete pods created by rc when not orphaning [Conformance]";
/// Upstream "should orphan pods created by rc if delete options say so".
pub(crate) const ORPHAN_PODS: &str =
    "[sig-api-machinery] Garbage collector should orphan pods created by rc if delete options say so [Conformance]";
/// Upstream "should delete RS created by deployment when not orphaning".
pub(crate) const DELETE_RS: &str =
    "[sig-api-machinery] Garbage collector should delete RS created by deployment when not orphaning [Conformance]";
/// Upstream "should orphan RS created by deployment when deleteOptions.PropagationPolicy is Orphan".
pub(crate) const ORPHAN_RS: &str = "[sig-api-machinery] Garbage collector should orphan RS created by deployment when \
                                    deleteOptions.PropagationPolicy is Orphan [Conformance]";
/// Upstream "should keep the rc around until all its pods are deleted if the deleteOptions says so".
pub(crate) const FOREGROUND: &str = "[sig-api-machinery] Garbage collector should keep the rc around until all its pods \
                                     are deleted if the deleteOptions says so [Conformance]";
/// Upstream "should not delete dependents that have both valid owner and owner that's waiting for
/// dependents to be deleted".
pub(crate) const VALID_OWNER: &str = "[sig-api-machinery] Garbage collector should not delete dependents that have both \
                                      valid owner and owner that's waiting for dependents to be deleted [Conformance]";
/// Upstream "should not be blocked by dependency circle".
pub(crate) const CIRCLE: &str =
    "[sig-api-machinery] Garbage collector should not be blocked by dependency circle [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DELETE_PODS, Kind::Adapted, delete_pods),
        case!(ORPHAN_PODS, Kind::Adapted, orphan_pods),
        case!(DELETE_RS, Kind::Adapted, delete_rs),
        case!(ORPHAN_RS, Kind::Adapted, orphan_rs),
        case!(FOREGROUND, Kind::Adapted, foreground),
        case!(VALID_OWNER, Kind::Adapted, valid_owner),
        case!(CIRCLE, Kind::Adapted, circle),
    ]
}

/// Upstream `estimateMaximumPods`' lower bound: the replicas of the larger controllers.
const MANY: i32 = 10;
/// How long the collector gets to act: upstream's base bound for the background and orphan
/// cases (it adds a minute for informer resyncs caused by parallel tests; these run alone).
const GC_WAIT: Duration = Duration::from_secs(60);
/// Upstream's ReplicationController name.
const RC_NAME: &str = "simpletest.rc";
/// Upstream's Deployment name.
const DEPLOYMENT_NAME: &str = "simpletest.deployment";
/// The label key of upstream's `getUniqLabel` (each case runs in its own namespace, so the
/// value only has to differ between the controllers of one case).
const LABEL: &str = "gctest";

/// Upstream `getPodTemplateSpec`: one nginx container, grace period 0, labelled `gctest=<value>`.
fn template(f: &Framework, value: &str) -> Result<PodTemplateSpec, CaseError> {
    let pod = f
        .pod("nginx")
        .label(LABEL, value)
        .grace_period(0)
        .container(ContainerBuilder::new("nginx", "nginx"));
    Ok(template_of(pod.build(f)?))
}

fn selector(value: &str) -> String {
    format!("{LABEL}={value}")
}

fn uid_of<K: Resource>(obj: &K) -> Result<String, CaseError> {
    obj.meta()
        .uid
        .clone()
        .ok_or_else(|| CaseError::failed("the API server returned an object without a uid"))
}

/// Deletes `name` with `policy` and upstream's uid precondition, then waits (at most
/// [`GC_WAIT`]) until it is gone.
async fn delete_and_wait_gone<K>(
    f: &Framework,
    api: &Api<K>,
    name: &str,
    uid: &str,
    policy: PropagationPolicy,
) -> CaseResult
where
    K: Resource + Clone + std::fmt::Debug + Send + DeserializeOwned + Serialize + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    f.step(format!("deleting {kind} {name} with propagationPolicy {policy:?}"));
    let dp = DeleteParams {
        propagation_policy: Some(policy),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete(name, &dp)
        .await
        .map_err(|e| CaseError::from(e).context(format!("deleting {kind} {name}")))?;
    f.wait_for_within(api, name, is_deleted(uid), "to be deleted", GC_WAIT)
        .await?;
    Ok(())
}

/// Upstream `waitForReplicas`: the ReplicationController reports all its replicas created.
async fn wait_rc_replicas(f: &Framework, name: &str, n: i32) -> CaseResult {
    let created =
        move |rc: Option<&ReplicationController>| rc.and_then(|rc| rc.status.as_ref()).is_some_and(|s| s.replicas == n);
    f.wait_for(
        &f.api::<ReplicationController>(),
        name,
        created,
        &format!("to report {n} replicas"),
    )
    .await?;
    Ok(())
}

/// The pods matching `selector` now, terminating ones included (upstream lists them all).
async fn pods(f: &Framework, selector: &str) -> Result<Vec<Pod>, CaseError> {
    Ok(f.api::<Pod>()
        .list(&ListParams::default().labels(selector))
        .await?
        .items)
}

fn refers_to(pod: &Pod, uid: &str) -> bool {
    pod.owner_references().iter().any(|r| r.uid == uid)
}

/// Upstream: an RC deleted (before it settles) with propagationPolicy Background takes its
/// pods with it.
async fn delete_pods(f: &Framework) -> CaseResult {
    let value = "delete_pods";
    let rc = f
        .create(&replication_controller(RC_NAME, 2, template(f, value)?))
        .await?;
    let api = f.api::<Pod>();
    // Upstream deliberately does not wait for every replica: the collector and the RC manager
    // must cope with an RC deleted before it settles.
    f.wait_list_within(
        &api,
        &selector(value),
        |p: &[Pod]| !p.is_empty(),
        "the rc to create some pods",
        GC_WAIT,
    )
    .await?;
    let rcs = f.api::<ReplicationController>();
    delete_and_wait_gone(f, &rcs, RC_NAME, &uid_of(&rc)?, PropagationPolicy::Background).await?;
    f.wait_list_within(
        &api,
        &selector(value),
        |p: &[Pod]| p.is_empty(),
        &format!("every pod of rc {RC_NAME} to be garbage collected"),
        GC_WAIT,
    )
    .await?;
    Ok(())
}

/// Upstream: an RC deleted with propagationPolicy Orphan goes, and every one of its pods stays
/// (upstream watches for 30 s; here a watch over [`CONSISTENTLY`]), released from the RC.
async fn orphan_pods(f: &Framework) -> CaseResult {
    let value = "orphan_pods";
    let rc = f
        .create(&replication_controller(RC_NAME, MANY, template(f, value)?))
        .await?;
    wait_rc_replicas(f, RC_NAME, MANY).await?;
    let uid = uid_of(&rc)?;
    let rcs = f.api::<ReplicationController>();
    delete_and_wait_gone(f, &rcs, RC_NAME, &uid, PropagationPolicy::Orphan).await?;
    f.step("checking the garbage collector does not delete the orphaned pods");
    let want = usize::try_from(MANY).unwrap_or_default();
    f.consistently_list(
        &f.api::<Pod>(),
        &selector(value),
        |p: &[Pod]| {
            p.len() == want
                && p.iter()
                    .all(|p| p.metadata.deletion_timestamp.is_none() && !refers_to(p, &uid))
        },
        &format!("{MANY} pods orphaned by {RC_NAME} (not deleted, no owner reference to it)"),
        CONSISTENTLY,
    )
    .await
}

/// Upstream: a Deployment deleted with propagationPolicy Background takes its ReplicaSet and
/// their pods with it.
async fn delete_rs(f: &Framework) -> CaseResult {
    let value = "delete_rs";
    let d = f.create(&deployment(DEPLOYMENT_NAME, 2, template(f, value)?)).await?;
    let rss = f.api::<ReplicaSet>();
    f.wait_list_within(
        &rss,
        &selector(value),
        |r: &[ReplicaSet]| !r.is_empty(),
        "the Deployment to create a ReplicaSet",
        GC_WAIT,
    )
    .await?;
    let deployments = f.api::<Deployment>();
    delete_and_wait_gone(
        f,
        &deployments,
        DEPLOYMENT_NAME,
        &uid_of(&d)?,
        PropagationPolicy::Background,
    )
    .await?;
    f.wait_list_within(
        &rss,
        &selector(value),
        |r: &[ReplicaSet]| r.is_empty(),
        &format!("the ReplicaSets of Deployment {DEPLOYMENT_NAME} to be garbage collected"),
        GC_WAIT,
    )
    .await?;
    f.wait_list_within(
        &f.api::<Pod>(),
        &selector(value),
        |p: &[Pod]| p.is_empty(),
        &format!("the pods of Deployment {DEPLOYMENT_NAME} to be garbage collected"),
        GC_WAIT,
    )
    .await?;
    Ok(())
}

/// Upstream: a Deployment deleted with propagationPolicy Orphan goes; its ReplicaSet stays with
/// no controller reference, and so do its two pods.
async fn orphan_rs(f: &Framework) -> CaseResult {
    let value = "orphan_rs";
    let d = f.create(&deployment(DEPLOYMENT_NAME, 2, template(f, value)?)).await?;
    let rss = f.api::<ReplicaSet>();
    let listed = f
        .wait_list_within(
            &rss,
            &selector(value),
            |r: &[ReplicaSet]| !r.is_empty(),
            "the Deployment to create a ReplicaSet",
            GC_WAIT,
        )
        .await?;
    let rs = &listed[0];
    let (rs_name, generation) = (rs.name_any(), rs.metadata.generation.unwrap_or_default());
    let want = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let settled = move |r: Option<&ReplicaSet>| {
        r.and_then(|r| r.status.as_ref())
            .is_some_and(|s| s.observed_generation.unwrap_or_default() >= generation && s.replicas == want)
    };
    f.wait_for(
        &rss,
        &rs_name,
        settled,
        &format!("to observe generation {generation} and report {want} replicas"),
    )
    .await?;
    let deployments = f.api::<Deployment>();
    delete_and_wait_gone(
        f,
        &deployments,
        DEPLOYMENT_NAME,
        &uid_of(&d)?,
        PropagationPolicy::Orphan,
    )
    .await?;
    // Upstream checks once, right after the Deployment is gone; a watch over a short window
    // also catches a collector that deletes the ReplicaSet a moment later.
    f.consistently_list(
        &rss,
        &selector(value),
        |r: &[ReplicaSet]| {
            r.len() == 1
                && r.iter()
                    .all(|r| r.meta().deletion_timestamp.is_none() && !controlled(r))
        },
        &format!("one ReplicaSet of Deployment {DEPLOYMENT_NAME}, orphaned (no controller reference)"),
        CONSISTENTLY,
    )
    .await?;
    let left: Vec<Pod> = pods(f, &selector(value))
        .await?
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    ensure!(
        left.len() == 2,
        "expected the 2 pods of the orphaned ReplicaSet {rs_name} to remain, got {}: {:?}",
        left.len(),
        names(&left)
    );
    Ok(())
}

fn controlled<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true))
}

/// Upstream: an RC deleted with propagationPolicy Foreground stays until every one of its pods
/// is gone, so once it is gone no pod is left.
async fn foreground(f: &Framework) -> CaseResult {
    let value = "delete_pods_foreground";
    let rc = f
        .create(&replication_controller(RC_NAME, MANY, template(f, value)?))
        .await?;
    wait_rc_replicas(f, RC_NAME, MANY).await?;
    let rcs = f.api::<ReplicationController>();
    delete_and_wait_gone(f, &rcs, RC_NAME, &uid_of(&rc)?, PropagationPolicy::Foreground).await?;
    let left = pods(f, &selector(value)).await?;
    ensure!(
        left.is_empty(),
        "rc {RC_NAME} deleted in the foreground was gone while {} of its pods remained: {:?}; expected no pods",
        left.len(),
        names(&left)
    );
    Ok(())
}

/// Upstream: half the pods of rc1 also get rc2 as an owner; rc1 deleted in the foreground goes,
/// its other pods with it, while the half with a valid owner stay, not terminating, with only
/// rc2's reference left.
async fn valid_owner(f: &Framework) -> CaseResult {
    let (rc1_name, rc2_name) = ("simpletest-rc-to-be-deleted", "simpletest-rc-to-stay");
    let (deleted, stay) = ("valid_and_pending_owners_d", "valid_and_pending_owners_s");
    let rc1 = f
        .create(&replication_controller(rc1_name, MANY, template(f, deleted)?))
        .await?;
    let rc2 = f
        .create(&replication_controller(rc2_name, 0, template(f, stay)?))
        .await?;
    wait_rc_replicas(f, rc1_name, MANY).await?;
    let rc2_uid = uid_of(&rc2)?;
    let mut all = pods(f, &selector(deleted)).await?;
    all.sort_by_key(ResourceExt::name_any);
    let half = usize::try_from(MANY / 2).unwrap_or_default();
    f.step(format!(
        "setting {half} pods of rc {rc1_name} to have rc {rc2_name} as owner as well"
    ));
    let patch = json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ReplicationController", "name": rc2_name, "uid": rc2_uid}
    ]}});
    let api = f.api::<Pod>();
    for pod in all.iter().take(half) {
        api.patch(&pod.name_any(), &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|e| {
                CaseError::from(e).context(format!("adding rc {rc2_name} as an owner of pod {}", pod.name_any()))
            })?;
    }
    let rcs = f.api::<ReplicationController>();
    delete_and_wait_gone(f, &rcs, rc1_name, &uid_of(&rc1)?, PropagationPolicy::Foreground).await?;
    let left = pods(f, &selector(deleted)).await?;
    ensure!(
        left.len() == half,
        "expected the {half} pods that also have rc {rc2_name} as owner to remain after rc {rc1_name} was deleted, got {}: {:?}",
        left.len(),
        names(&left)
    );
    for pod in &left {
        if pod.metadata.deletion_timestamp.is_some() {
            fail!(
                "pod {} has a valid owner (rc {rc2_name}) but is being deleted",
                pod.name_any()
            );
        }
        let refs: Vec<(&str, &str)> = pod
            .owner_references()
            .iter()
            .map(|r| (r.kind.as_str(), r.name.as_str()))
            .collect();
        ensure!(
            refs.len() == 1 && pod.owner_references()[0].uid == rc2_uid,
            "pod {} should have only rc {rc2_name} as owner after rc {rc1_name} was deleted, has {refs:?}",
            pod.name_any()
        );
    }
    Ok(())
}

/// Upstream: pod1 is owned by pod3, pod2 by pod1 and pod3 by pod2 (each reference a blocking
/// controller); deleting pod1 in the foreground deletes all three.
async fn circle(f: &Framework) -> CaseResult {
    let value = "circle";
    let mut uids = Vec::new();
    for name in ["pod1", "pod2", "pod3"] {
        let pod = f
            .pod(name)
            .label(LABEL, value)
            .grace_period(0)
            .container(ContainerBuilder::new("nginx", "nginx"));
        uids.push(uid_of(&f.create_pod(&pod).await?)?);
    }
    let api = f.api::<Pod>();
    // (dependent, owner): pod1 <- pod3, pod2 <- pod1, pod3 <- pod2.
    for (dependent, owner) in [(0usize, 2usize), (1, 0), (2, 1)] {
        let (dep_name, owner_name) = (format!("pod{}", dependent + 1), format!("pod{}", owner + 1));
        let patch = json!({"metadata": {"ownerReferences": [{
            "apiVersion": "v1", "kind": "Pod", "name": owner_name, "uid": uids[owner],
            "controller": true, "blockOwnerDeletion": true
        }]}});
        api.patch(&dep_name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|e| CaseError::from(e).context(format!("making {owner_name} the owner of {dep_name}")))?;
    }
    f.step("deleting pod1 in the foreground");
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: Some(uids[0].clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete("pod1", &dp)
        .await
        .map_err(|e| CaseError::from(e).context("deleting pod1"))?;
    f.wait_list_within(
        &api,
        &selector(value),
        |p: &[Pod]| p.is_empty(),
        "all three pods of the ownership circle to be deleted",
        GC_WAIT,
    )
    .await?;
    Ok(())
}
