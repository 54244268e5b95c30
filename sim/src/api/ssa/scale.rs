//! Managed fields through the scale subresource, as upstream's `ScaleHandler` converts them:
//! the Scale shows the parent's entries that own `.spec.replicas` (as `autoscaling/v1`), and a
//! write through `/scale` moves `.spec.replicas` between the parent's entries, recorded with
//! `subresource: scale` and the parent's apiVersion.
//!
//! Upstream quirk kept: `ToParent` stamps converted entries with the parent's earlier time for
//! that manager, so an entry a scale write creates has no `time`.

use serde_json::Value;

use super::fieldmanager::BEFORE_FIRST_APPLY;
use super::fieldset::{FieldSet, PathElement};
use super::managed::{Entry, Managed, Operation};
use crate::api::error::{ApiError, ApiResult};
use crate::api::meta;
use crate::api::registry::ResourceDef;

/// `.spec.replicas`, the replicas path of every scalable kind the simulator serves.
fn replicas() -> [PathElement; 2] {
    [PathElement::Field("spec".into()), PathElement::Field("replicas".into())]
}

fn replicas_set() -> FieldSet {
    let mut s = FieldSet::default();
    s.insert(&replicas());
    s
}

/// The Scale's managedFields (upstream's `ToSubresource`), `None` when no entry owns replicas
/// or the parent's entries do not decode.
pub fn to_subresource(parent: &Value) -> Option<Value> {
    let managed = Managed::decode(parent.pointer("/metadata/managedFields")).ok()?;
    let entries = managed
        .entries
        .into_iter()
        .filter(|e| e.set.has(&replicas()))
        .map(|e| Entry {
            api_version: "autoscaling/v1".into(),
            set: replicas_set(),
            ..e
        })
        .collect();
    Managed { entries }.encode()
}

/// Keeps a scale-written entry's earlier time (none when the write created it).
pub fn keep_time(managed: &mut Managed, before: &Managed, manager: &str, op: Operation, api_version: &str) {
    let earlier = before
        .entries
        .iter()
        .find(|e| e.is(manager, op, "scale", api_version))
        .and_then(|e| e.time.clone());
    if let Some(e) = managed
        .entries
        .iter_mut()
        .find(|e| e.is(manager, op, "scale", api_version))
    {
        e.time = earlier;
    }
}

/// Server-side apply of a Scale to `live` (the parent): conflicts with the other owners of
/// `.spec.replicas` when the value changes (taken over with `force`), the applier's entry owns
/// `.spec.replicas` when it sends it. Returns the parent with its new replicas and entries.
pub fn apply_scale(def: &ResourceDef, live: &Value, config: &Value, manager: &str, force: bool) -> ApiResult<Value> {
    let s = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default();
    if s("apiVersion") != "autoscaling/v1" || s("kind") != "Scale" {
        let (g, v) = s("apiVersion").split_once('/').unwrap_or(("", s("apiVersion")));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {g}/{v}, Kind={}",
            s("kind")
        )));
    }
    if config.pointer("/metadata/managedFields").is_some() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let api_version = def.api_version();
    let before = Managed::decode(live.pointer("/metadata/managedFields"))
        .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?;
    let mut managed = before.clone();
    let current = live.pointer("/spec/replicas");
    if managed.entries.is_empty() && current.is_some() {
        // skipNonAppliedManager, seen through the Scale: the existing replicas get an owner.
        managed.entries.push(Entry {
            manager: BEFORE_FIRST_APPLY.into(),
            operation: Operation::Update,
            api_version: api_version.clone(),
            time: None,
            subresource: "scale".into(),
            set: replicas_set(),
        });
    }
    let wanted = config.pointer("/spec/replicas");
    let changes = wanted.is_some_and(|w| Some(w) != current);
    let mine = |e: &Entry| e.is(manager, Operation::Apply, "scale", &api_version);
    if changes {
        let owners: Vec<&Entry> = managed
            .entries
            .iter()
            .filter(|e| !mine(e) && e.set.has(&replicas()))
            .collect();
        if !owners.is_empty() && !force {
            let mut sorted = owners;
            sorted.sort_by(|a, b| a.manager.cmp(&b.manager));
            return Err(super::fieldmanager::conflict_error(
                &sorted
                    .into_iter()
                    .map(|e| (e.clone(), replicas_set()))
                    .collect::<Vec<_>>(),
            ));
        }
        for e in managed.entries.iter_mut().filter(|e| !mine(e)) {
            e.set = e.set.difference(&replicas_set());
        }
    }
    managed.entries.retain(|e| !mine(e));
    if wanted.is_some() {
        managed.entries.push(Entry {
            manager: manager.to_string(),
            operation: Operation::Apply,
            api_version: api_version.clone(),
            time: None,
            subresource: "scale".into(),
            set: replicas_set(),
        });
        keep_time(&mut managed, &before, manager, Operation::Apply, &api_version);
    }
    managed.entries.retain(|e| !e.set.is_empty());
    let mut out = live.clone();
    if let Some(w) = wanted {
        out["spec"]["replicas"] = w.clone();
    }
    let m = meta::meta_mut(&mut out);
    match managed.encode() {
        Some(v) => m.insert("managedFields".into(), v),
        None => m.remove("managedFields"),
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry;
    use serde_json::json;

    #[test]
    fn scale_apply_conflicts_with_replicas_owners_and_scale_shows_them() {
        let def = registry::find("apps", "v1", "deployments").unwrap();
        let mut live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "paused": false}});
        super::super::track_update(def, None, &mut live, "kubectl-create", "");
        let scale = to_subresource(&live).unwrap();
        assert_eq!(scale[0]["apiVersion"], "autoscaling/v1");
        assert_eq!(scale[0]["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        let config = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 3}});
        let e = apply_scale(def, &live, &config, "hpa", false).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using apps/v1: .spec.replicas"
        );
        let out = apply_scale(def, &live, &config, "hpa", true).unwrap();
        assert_eq!(out["spec"]["replicas"], 3);
        let mf = out["metadata"]["managedFields"].as_array().unwrap();
        let hpa = mf.iter().find(|e| e["manager"] == "hpa").unwrap();
        assert_eq!(
            hpa,
            &json!({"manager": "hpa", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"})
        );
        let create = mf.iter().find(|e| e["manager"] == "kubectl-create").unwrap();
        assert_eq!(create["fieldsV1"], json!({"f:spec": {"f:paused": {}}}));
    }
}
