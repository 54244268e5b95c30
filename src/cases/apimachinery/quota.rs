//! `[sig-api-machinery] ResourceQuota` cases of upstream test/e2e/apimachinery/resource_quota.go
//! that count objects (Secrets, Services, ReplicationControllers, ReplicaSets), update and delete
//! a quota, and charge pods to Terminating / NotTerminating scoped quotas. The cases that count
//! pods and ConfigMaps live with the older policy cases (`cases::policy`), whose quota helpers
//! these reuse.
//!
//! The pods are the target OS's; admission, the quota controller's counting and its scopes are
//! what the cases check, the same on both OSes.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController, ResourceQuota, Secret, Service};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::case;
use crate::cases::policy::{quantities, quota, wait_used, with_resources};
use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::update::replace_retrying;
use crate::framework::workloads::{replica_set, replication_controller, secret, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::{ensure, fail};

/// Upstream "should create a ResourceQuota and capture the life of a secret".
pub(crate) const SECRET: &str =
    "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a secret. [Conformance]";
/// Upstream "should create a ResourceQuota and capture the life of a service".
pub(crate) const SERVICE: &str =
    "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a service. [Conformance]";
/// Upstream "should create a ResourceQuota and capture the life of a replication controller".
pub(crate) const RC: &str = "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a replication controller. [Conformance]";
/// Upstream "should create a ResourceQuota and capture the life of a replica set".
pub(crate) const RS: &str = "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a replica set. [Conformance]";
/// Upstream "should be able to update and delete ResourceQuota".
pub(crate) const UPDATE_DELETE: &str =
    "[sig-api-machinery] ResourceQuota should be able to update and delete ResourceQuota. [Conformance]";
/// Upstream "should verify ResourceQuota with terminating scopes".
pub(crate) const TERMINATING: &str =
    "[sig-api-machinery] ResourceQuota should verify ResourceQuota with terminating scopes. [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SECRET, Kind::Adapted, secret_life),
        case!(SERVICE, Kind::Adapted, service_life),
        case!(RC, Kind::Adapted, rc_life),
        case!(RS, Kind::Adapted, rs_life),
        case!(UPDATE_DELETE, Kind::Adapted, update_delete),
        case!(TERMINATING, Kind::Adapted, terminating_scopes),
    ]
}

/// Upstream `newTestResourceQuota`'s hard limits that the sim and a real cluster both count.
const TEST_HARD: &[(&str, &str)] = &[
    ("pods", "5"),
    ("services", "10"),
    ("services.nodeports", "1"),
    ("services.loadbalancers", "1"),
    ("replicationcontrollers", "10"),
    ("resourcequotas", "1"),
    ("cpu", "1"),
    ("memory", "500Mi"),
    ("configmaps", "2"),
    ("secrets", "10"),
    ("persistentvolumeclaims", "10"),
    ("requests.storage", "10Gi"),
    ("count/replicasets.apps", "5"),
];

const QUOTA: &str = "test-quota";

/// Creates upstream's test quota and waits until it counts itself.
async fn create_test_quota(f: &Framework, hard: &[(&str, &str)]) -> CaseResult {
    f.create(&quota(QUOTA, hard, &[])).await?;
    wait_used(f, QUOTA, &[("resourcequotas", "1")]).await?;
    Ok(())
}

/// How many `K` the case namespace holds now.
async fn count<K>(f: &Framework) -> Result<usize, CaseError>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + std::fmt::Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    Ok(f.api::<K>().list(&ListParams::default()).await?.items.len())
}

/// Deletes `name` through `api`, naming it in the step log.
async fn delete<K>(f: &Framework, api: &Api<K>, kind: &str, name: &str) -> CaseResult
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned,
{
    f.step(format!("deleting {kind} {name}"));
    api.delete(name, &DeleteParams::default()).await?;
    Ok(())
}

/// Upstream: a Secret is counted while it exists and released after; the quota allows exactly
/// one more than the namespace already holds.
async fn secret_life(f: &Framework) -> CaseResult {
    let before = count::<Secret>(f).await?;
    let (n, n1) = (before.to_string(), (before + 1).to_string());
    let mut hard = TEST_HARD.to_vec();
    hard.retain(|(k, _)| *k != "secrets");
    hard.push(("secrets", &n1));
    create_test_quota(f, &hard).await?;
    wait_used(f, QUOTA, &[("secrets", &n)]).await?;
    f.create(&secret("test-secret", &[("data-1", "value-1")])).await?;
    wait_used(f, QUOTA, &[("secrets", &n1)]).await?;
    delete(f, &f.api::<Secret>(), "Secret", "test-secret").await?;
    wait_used(f, QUOTA, &[("secrets", &n)]).await.map(|_| ())
}

/// Upstream: a ClusterIP and a NodePort Service are counted (one node port used), a second
/// NodePort Service past the node-port quota is refused, and deleting both releases them.
async fn service_life(f: &Framework) -> CaseResult {
    create_test_quota(f, TEST_HARD).await?;
    wait_used(f, QUOTA, &[("services", "0"), ("services.nodeports", "0")]).await?;
    let port = |b: ServiceBuilder| b.port("http", 80, 8080, "TCP");
    f.create_service(&port(ServiceBuilder::cluster_ip("test-service-clusterip")))
        .await?;
    f.create_service(&port(ServiceBuilder::node_port("test-service-np")))
        .await?;
    match f
        .create_service(&port(ServiceBuilder::node_port("test-service-np-over")))
        .await
    {
        Err(CaseError::Failed(m)) if m.contains("exceeded quota") || m.contains("403") => {}
        Err(other) => return Err(other.context("a NodePort Service past the quota was refused for another reason")),
        Ok(_) => fail!("a second NodePort Service was admitted past services.nodeports=1; expected 403 exceeded quota"),
    }
    wait_used(f, QUOTA, &[("services", "2"), ("services.nodeports", "1")]).await?;
    for name in ["test-service-clusterip", "test-service-np"] {
        delete(f, &f.api::<Service>(), "Service", name).await?;
    }
    wait_used(f, QUOTA, &[("services", "0"), ("services.nodeports", "0")])
        .await
        .map(|_| ())
}

/// A pause pod spec of the target OS for the controllers (never scaled up: replicas 0).
fn pause_template(f: &Framework, name: &str) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod(name)
        .label("name", name)
        .container(ContainerBuilder::new("pause", "pause"))
        .build(f)?;
    Ok(template_of(pod))
}

/// Upstream: a ReplicationController with no replicas is counted and released.
async fn rc_life(f: &Framework) -> CaseResult {
    create_test_quota(f, TEST_HARD).await?;
    wait_used(f, QUOTA, &[("replicationcontrollers", "0")]).await?;
    f.create(&replication_controller("test-rc", 0, pause_template(f, "test-rc")?))
        .await?;
    wait_used(f, QUOTA, &[("replicationcontrollers", "1")]).await?;
    delete(f, &f.api::<ReplicationController>(), "ReplicationController", "test-rc").await?;
    wait_used(f, QUOTA, &[("replicationcontrollers", "0")])
        .await
        .map(|_| ())
}

/// Upstream: a ReplicaSet with no replicas is counted (`count/replicasets.apps`) and released.
async fn rs_life(f: &Framework) -> CaseResult {
    create_test_quota(f, TEST_HARD).await?;
    wait_used(f, QUOTA, &[("count/replicasets.apps", "0")]).await?;
    f.create(&replica_set("test-rs", 0, pause_template(f, "test-rs")?))
        .await?;
    wait_used(f, QUOTA, &[("count/replicasets.apps", "1")]).await?;
    delete(f, &f.api::<ReplicaSet>(), "ReplicaSet", "test-rs").await?;
    wait_used(f, QUOTA, &[("count/replicasets.apps", "0")])
        .await
        .map(|_| ())
}

/// The `spec.hard` of a quota as `name=value` text pairs.
fn hard_of(q: &ResourceQuota) -> Vec<(String, String)> {
    q.spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// Upstream: a quota of 1 CPU and 500Mi is read back, updated to 2 CPU and 1Gi, read back with
/// the new limits, deleted, and then not found.
async fn update_delete(f: &Framework) -> CaseResult {
    let name = QUOTA;
    f.create(&quota(name, &[("cpu", "1"), ("memory", "500Mi")], &[]))
        .await?;
    let api = f.api::<ResourceQuota>();
    let read = api.get(name).await?;
    let want = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    ensure!(
        hard_of(&read) == want(&[("cpu", "1"), ("memory", "500Mi")]),
        "ResourceQuota {name} as read back has hard {:?}, expected cpu=1 memory=500Mi",
        hard_of(&read)
    );
    f.step(format!("updating ResourceQuota {name} to cpu=2 memory=1Gi"));
    replace_retrying(&api, name, |q: &mut ResourceQuota| {
        q.spec.get_or_insert_with(Default::default).hard = Some(quantities(&[("cpu", "2"), ("memory", "1Gi")]));
    })
    .await?;
    let read = api.get(name).await?;
    ensure!(
        hard_of(&read) == want(&[("cpu", "2"), ("memory", "1Gi")]),
        "ResourceQuota {name} after the update has hard {:?}, expected cpu=2 memory=1Gi",
        hard_of(&read)
    );
    delete(f, &api, "ResourceQuota", name).await?;
    if let Some(q) = api.get_opt(name).await? {
        fail!(
            "ResourceQuota {name} can still be read after its deletion: hard {:?}",
            hard_of(&q)
        );
    }
    Ok(())
}

/// A pause pod with upstream's requests (500m, 200Mi) and limits (1, 400Mi), and an active
/// deadline when `deadline` is set (which makes it Terminating).
fn sized_pod(f: &Framework, name: &str, deadline: Option<i64>) -> PodBuilder {
    let mut pod =
        PodBuilder::new(name, f.target_os()).container(ContainerBuilder::new("pause", "pause").with(with_resources(
            &[("cpu", "500m"), ("memory", "200Mi")],
            &[("cpu", "1"), ("memory", "400Mi")],
        )));
    if let Some(d) = deadline {
        pod = pod.edit_spec(move |s| s.active_deadline_seconds = Some(d));
    }
    pod
}

const CHARGED: &[(&str, &str)] = &[
    ("pods", "1"),
    ("requests.cpu", "500m"),
    ("requests.memory", "200Mi"),
    ("limits.cpu", "1"),
    ("limits.memory", "400Mi"),
];
const FREE: &[(&str, &str)] = &[
    ("pods", "0"),
    ("requests.cpu", "0"),
    ("requests.memory", "0"),
    ("limits.cpu", "0"),
    ("limits.memory", "0"),
];

/// Upstream: a pod without an active deadline is charged to the NotTerminating quota only, one
/// with a deadline to the Terminating quota only; each is released on deletion.
async fn terminating_scopes(f: &Framework) -> CaseResult {
    let hard = [
        ("pods", "5"),
        ("requests.cpu", "1"),
        ("requests.memory", "500Mi"),
        ("limits.cpu", "2"),
        ("limits.memory", "1Gi"),
    ];
    let (term, not_term) = ("quota-terminating", "quota-not-terminating");
    f.create(&quota(term, &hard, &["Terminating"])).await?;
    f.create(&quota(not_term, &hard, &["NotTerminating"])).await?;
    wait_used(f, term, &[("pods", "0")]).await?;
    wait_used(f, not_term, &[("pods", "0")]).await?;

    for (pod, charged, spared, deadline) in [
        ("test-pod", not_term, term, None),
        ("terminating-pod", term, not_term, Some(3600)),
    ] {
        f.create_pod(&sized_pod(f, pod, deadline)).await?;
        wait_used(f, charged, CHARGED).await?;
        wait_used(f, spared, FREE).await?;
        f.step(format!("deleting pod {pod}"));
        f.api::<Pod>()
            .delete(pod, &DeleteParams::default().grace_period(0))
            .await?;
        wait_used(f, charged, FREE).await?;
    }
    Ok(())
}
