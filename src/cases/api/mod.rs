//! Adapted cases: API lifecycles — objects created, listed across namespaces, fetched, patched,
//! updated and deleted one by one or by collection (`[sig-instrumentation] Events`, `Events API`,
//! `[sig-node] ConfigMap`, `[sig-scheduling] LimitRange`, `[sig-auth] ServiceAccounts`, `[sig-node]
//! PodTemplates`, `[sig-node] Lease`, and the `[sig-apps]` API operations of ReplicaSets,
//! ReplicationControllers, StatefulSets, Deployments, Jobs, CronJobs and PodDisruptionBudgets, with
//! the eviction a budget blocks).
//!
//! These cases make only API calls, so one body serves both OSes; what they guard against is an
//! API server whose write path loses writes (the `writes-lost` fault switch of the simulator).
//! The ServiceAccount issuer discovery case (`oidc_discovery`) also runs one pod, the same on
//! both OSes, that verifies its token against the API server's published keys.

mod apps;
mod batch;
mod events;
mod lease;
mod lifecycle;
mod oidc_discovery;
mod ops;
mod pdb;
pub(crate) mod podtemplates;
mod service_accounts;
mod workloads;

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, ListParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::catalog::Case;
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework};

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = events::cases();
    cases.extend(lifecycle::cases());
    cases.extend(service_accounts::cases());
    cases.extend(oidc_discovery::cases());
    cases.extend(apps::cases());
    cases.extend(workloads::cases());
    cases.extend(batch::cases());
    cases.extend(pdb::cases());
    cases.extend(podtemplates::cases());
    cases.extend(lease::cases());
    cases
}

/// The kind of `K`, for messages.
fn kind_of<K>() -> String
where
    K: Resource,
    K::DynamicType: Default,
{
    K::kind(&K::DynamicType::default()).to_string()
}

/// Lists `K` in all namespaces with label selector `selector` (as upstream does with
/// `metav1.NamespaceAll`) and returns object `name` of namespace `ns` from that list.
///
/// # Errors
/// A failure naming what the list held when `ns/name` is not in it.
pub(crate) async fn find_in_all_namespaces<K>(
    f: &Framework,
    selector: &str,
    ns: &str,
    name: &str,
) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    let kind = kind_of::<K>();
    f.step(format!("listing {kind}s in all namespaces with labels {selector}"));
    let list = f.api_all::<K>().list(&ListParams::default().labels(selector)).await?;
    let seen: Vec<String> = list
        .items
        .iter()
        .map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()))
        .collect();
    list.items
        .into_iter()
        .find(|o| o.namespace().as_deref() == Some(ns) && o.name_any() == name)
        .ok_or_else(|| {
            CaseError::failed(format!(
                "{kind} {ns}/{name} is not in the list of {kind}s in all namespaces with labels {selector}; \
                 the list held {seen:?}"
            ))
        })
}

/// Names of the `K`s of the case namespace that match `selector`.
pub(crate) async fn names_in_ns<K>(f: &Framework, selector: &str) -> Result<Vec<String>, CaseError>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    let list = f.api::<K>().list(&ListParams::default().labels(selector)).await?;
    Ok(list.items.iter().map(ResourceExt::name_any).collect())
}

/// Checks that the case namespace holds exactly `expected` `K`s matching `selector`, deletes them
/// with one DELETE of the collection, and checks that none is left.
///
/// Upstream's "delete a collection" cases (core and events.k8s.io events, ConfigMaps,
/// LimitRanges) all end this way.
pub(crate) async fn delete_collection_and_check<K>(f: &Framework, selector: &str, expected: &[String]) -> CaseResult
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    let kind = kind_of::<K>();
    let mut before = names_in_ns::<K>(f, selector).await?;
    before.sort();
    let mut want = expected.to_vec();
    want.sort();
    ensure!(
        before == want,
        "listing {kind}s with labels {selector} in {}: expected {want:?}, got {before:?}",
        f.ns()
    );
    f.step(format!("deleting the collection of {kind}s with labels {selector}"));
    f.api::<K>()
        .delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
        .await?;
    let after = names_in_ns::<K>(f, selector).await?;
    ensure!(
        after.is_empty(),
        "after the DELETE of the collection of {kind}s with labels {selector} in {}, {} of {} remain: {after:?}",
        f.ns(),
        after.len(),
        want.len()
    );
    Ok(())
}
