//! Steps that the `[sig-apps]` API-operation cases share: an update retried on conflict (upstream's
//! `retry.RetryOnConflict` around a get and an update), the same for `/status`, and the
//! status-endpoints round trip (a condition added by an update of `/status`, another by a patch,
//! each seen through a watch).
//!
//! They work on any namespaced kind through its JSON form, so one flow serves ReplicaSets,
//! StatefulSets, Jobs and PodDisruptionBudgets alike.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::kind_of;
use crate::framework::{CaseError, CaseResult, Framework};

/// How many times an update is sent again after a 409 Conflict (client-go's `DefaultRetry`
/// tries five times).
const CONFLICT_TRIES: usize = 5;

/// Whether `e` is the API's 409 Conflict (a stale resourceVersion).
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Reads `name`, applies `edit` and replaces it, reading again and retrying on 409 Conflict as
/// upstream's `RetryOnConflict` does (a controller may write the object between the two calls).
///
/// # Errors
/// The API's refusal, or the last conflict after [`CONFLICT_TRIES`] tries.
pub(super) async fn update_retrying<K>(api: &Api<K>, name: &str, edit: impl Fn(&mut K)) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    replace_retrying(
        name,
        edit,
        || api.get(name),
        |obj| async move { api.replace(name, &PostParams::default(), &obj).await },
    )
    .await
}

/// As [`update_retrying`], through the `/status` subresource.
///
/// # Errors
/// As [`update_retrying`].
pub(super) async fn update_status_retrying<K>(api: &Api<K>, name: &str, edit: impl Fn(&mut K)) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    replace_retrying(
        name,
        edit,
        || api.get_status(name),
        |obj| async move { api.replace_status(name, &PostParams::default(), &obj).await },
    )
    .await
}

/// The loop behind [`update_retrying`] and [`update_status_retrying`].
async fn replace_retrying<K, G, GF, P, PF>(name: &str, edit: impl Fn(&mut K), get: G, put: P) -> Result<K, CaseError>
where
    K: Resource,
    K::DynamicType: Default,
    G: Fn() -> GF,
    GF: Future<Output = Result<K, kube::Error>>,
    P: Fn(K) -> PF,
    PF: Future<Output = Result<K, kube::Error>>,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let mut tries = 0;
    loop {
        tries += 1;
        let mut obj = get().await?;
        edit(&mut obj);
        match put(obj).await {
            Err(e) if is_conflict(&e) && tries < CONFLICT_TRIES => {
                tracing::debug!(%kind, name, tries, "conflict on update; reading again");
            }
            other => {
                return other.map_err(|e| CaseError::from(e).context(format!("updating {kind} {name}")));
            }
        }
    }
}

/// The `status.conditions` of an object in its JSON form.
fn conditions_of<K: Serialize>(obj: &K) -> Vec<Value> {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.pointer("/status/conditions").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// Whether `obj` carries a condition of `type_` with every field of `want` (a JSON object).
fn has_condition<K: Serialize>(obj: &K, type_: &str, want: &Value) -> bool {
    conditions_of(obj).iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some(type_)
            && want
                .as_object()
                .is_none_or(|w| w.iter().all(|(k, v)| c.get(k) == Some(v)))
    })
}

/// Appends `condition` (a JSON object) to `obj`'s `status.conditions`.
fn push_condition<K: Serialize + DeserializeOwned>(obj: &mut K, condition: &Value) {
    let Ok(mut v) = serde_json::to_value(&*obj) else { return };
    let status = v
        .as_object_mut()
        .map(|o| o.entry("status").or_insert_with(|| json!({})));
    if let Some(status) = status.and_then(Value::as_object_mut) {
        let conditions = status.entry("conditions").or_insert_with(|| json!([]));
        if let Some(list) = conditions.as_array_mut() {
            list.push(condition.clone());
        }
    }
    if let Ok(back) = serde_json::from_value(v) {
        *obj = back;
    }
}

/// Upstream's "Status endpoints" flow (replica_set.go, statefulset.go, deployment.go): reads
/// `name` through `/status`, adds condition `StatusUpdate=True` (reason `E2E`) with an update
/// of `/status`, waits on a watch until it shows, then patches in `StatusPatched=True` and waits
/// for that too.
///
/// # Errors
/// A failure naming the condition the watch never showed, or the API's refusal.
pub(super) async fn status_conditions_round_trip<K>(f: &Framework, name: &str) -> CaseResult
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Send + Serialize + DeserializeOwned + 'static,
    K::DynamicType: Default,
{
    let kind = kind_of::<K>();
    let api = f.api::<K>();
    f.step(format!("getting /status of {kind} {name}"));
    let read = api.get_status(name).await?;
    crate::ensure!(
        read.meta().name.as_deref() == Some(name),
        "{kind} {name} read through /status came back as {:?}",
        read.meta().name
    );

    f.step(format!("updating the {kind} status"));
    let update = json!({"type": "StatusUpdate", "status": "True", "reason": "E2E", "message": "Set from e2e test"});
    let answered = update_status_retrying(&api, name, |obj: &mut K| push_condition(obj, &update)).await?;
    crate::ensure!(
        has_condition(&answered, "StatusUpdate", &update),
        "{kind} {name} after the update of /status: expected condition StatusUpdate=True (reason E2E) in \
         the answer, got {:?}",
        conditions_of(&answered)
    );
    let want = update.clone();
    f.wait_for(
        &api,
        name,
        move |o: Option<&K>| o.is_some_and(|o| has_condition(o, "StatusUpdate", &want)),
        "to show condition StatusUpdate=True (reason E2E) after the update of /status",
    )
    .await?;

    f.step(format!("patching the {kind} status"));
    let patch = json!({"status": {"conditions": [{"type": "StatusPatched", "status": "True"}]}});
    let answered = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    crate::ensure!(
        has_condition(&answered, "StatusPatched", &json!({"status": "True"})),
        "{kind} {name} after the patch of /status: expected condition StatusPatched=True in the answer, got {:?}",
        conditions_of(&answered)
    );
    f.wait_for(
        &api,
        name,
        |o: Option<&K>| o.is_some_and(|o| has_condition(o, "StatusPatched", &json!({"status": "True"}))),
        "to show condition StatusPatched=True after the patch of /status",
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSet;

    use super::*;

    #[test]
    fn a_pushed_condition_is_found_with_its_fields() {
        let mut ss = StatefulSet {
            status: Some(Default::default()),
            ..Default::default()
        };
        assert!(!has_condition(&ss, "StatusUpdate", &json!({})));
        push_condition(
            &mut ss,
            &json!({"type": "StatusUpdate", "status": "True", "reason": "E2E"}),
        );
        assert!(has_condition(&ss, "StatusUpdate", &json!({"reason": "E2E"})));
        assert!(!has_condition(&ss, "StatusUpdate", &json!({"reason": "other"})));
        assert!(!has_condition(&ss, "StatusPatched", &json!({})));
    }
}
