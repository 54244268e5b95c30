//! Adapted cases: API operations on one kind each — created, read, listed, watched, patched,
//! updated through the object and its `/status`, and deleted (`[sig-node] Secrets` and `Pods`,
//! `[sig-network]` Ingress, IngressClass, EndpointSlice and Service status, `[sig-auth]`
//! ServiceAccounts, CSRs and SubjectReviews, `[sig-storage]` CSI and StorageClass objects,
//! `[sig-node] RuntimeClass`, `[sig-node] Node Lifecycle`).
//!
//! They make only API calls (the Pods ones run one pod), so one body serves both OSes. What they
//! guard against is an API server that acknowledges writes its storage loses (the simulator's
//! `writes-lost` switch), serves a kind or subresource wrongly, or a controller that stopped.
//! The list-across-namespaces and delete-a-collection steps reuse the API-lifecycle helpers of
//! [`super::api`].

mod auth;
mod core;
mod csr;
mod mirroring;
mod network;
mod node;
mod pv;
mod relabel;
mod runtimeclass;
mod storage;
mod walk;

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::ClusterResourceScope;
use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::catalog::Case;
use crate::framework::{CaseError, Framework, RUN_ID_LABEL};

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = core::cases();
    cases.extend(network::cases());
    cases.extend(mirroring::cases());
    cases.extend(auth::cases());
    cases.extend(csr::cases());
    cases.extend(storage::cases());
    cases.extend(pv::cases());
    cases.extend(runtimeclass::cases());
    cases.extend(node::cases());
    cases
}

/// How often a status update is tried when it meets 409 Conflict (a controller or the kubelet
/// wrote the object in between); upstream's `retry.RetryOnConflict(retry.DefaultRetry, …)` makes
/// five steps.
const CONFLICT_TRIES: u32 = 5;

/// The kind of `K`, for messages.
fn kind_of<K>() -> String
where
    K: Resource,
    K::DynamicType: Default,
{
    K::kind(&K::DynamicType::default()).to_string()
}

/// The resource name of `K` (`storageclasses`), for messages about several objects.
fn plural_of<K>() -> String
where
    K: Resource,
    K::DynamicType: Default,
{
    K::plural(&K::DynamicType::default()).to_string()
}

/// Creates the cluster-scoped `obj` with the run-id label, so the run's clean-up removes it if
/// the case is cut off before it deletes it itself.
///
/// # Errors
/// The API's refusal, naming the object.
pub(crate) async fn create_cluster_scoped<K>(f: &Framework, obj: &K) -> Result<K, CaseError>
where
    K: Resource<Scope = ClusterResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let mut obj = obj.clone();
    obj.meta_mut()
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(RUN_ID_LABEL.into(), f.run().run_id.clone());
    let kind = kind_of::<K>();
    let name = obj.name_any();
    f.step(format!("creating {kind} {name}"));
    f.api_all::<K>()
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating {kind} {name}")))
}

/// Reads `name` through `/status`, applies `edit` and writes it back with an update of
/// `/status`, again from a fresh read when the update meets 409 Conflict, unless `done` says
/// that read already holds the change (an update replayed after its answer was lost); returns
/// what the update answered.
///
/// # Errors
/// The API's refusal, or a failure from `edit` (which says what it could not find to change).
async fn update_status<K>(
    f: &Framework,
    api: &Api<K>,
    name: &str,
    done: impl Fn(&K) -> bool,
    edit: impl Fn(&mut K) -> Result<(), CaseError>,
) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    f.step(format!("updating the status of {} {name}", kind_of::<K>()));
    let mut attempt = 1;
    loop {
        let mut obj = api.get_status(name).await?;
        if attempt > 1 && done(&obj) {
            return Ok(obj);
        }
        edit(&mut obj)?;
        match api.replace_status(name, &PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < CONFLICT_TRIES => attempt += 1,
            other => return Ok(other?),
        }
    }
}
