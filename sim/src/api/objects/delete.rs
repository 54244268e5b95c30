//! Deletion: DeleteOptions (grace period, propagation policy, preconditions, dry run) and
//! the rules one delete follows (finalizers, pod grace periods, namespaces that terminate
//! first), for DELETE of one object and of a collection.

use axum::response::Response;
use serde_json::{Value, json};

use super::read::select;
use super::{Query, json_response, present, scope_ns, store_err, stored, target_name};
use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::meta;
use crate::api::registry::ResourceDef;
use crate::api::route::Target;
use crate::api::state::AppState;
use crate::api::store::rv_of;
use crate::api::webhook::{self, Attributes, Operation};

/// Whether an object whose deletion is pending can go now: no finalizers left and no grace
/// period to wait for (namespaces also wait for `spec.finalizers`).
pub(super) fn ready_to_remove(def: &ResourceDef, obj: &Value) -> bool {
    if !meta::is_deleting(obj) || !meta::finalizers(obj).is_empty() {
        return false;
    }
    if def.plural == "namespaces" {
        return obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    }
    obj.pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        == 0
}

/// DeleteOptions from the body and query.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    grace: Option<i64>,
    propagation: Option<String>,
    uid: Option<String>,
    rv: Option<String>,
    dry_run: bool,
}

impl DeleteOptions {
    /// Reads body (may be empty) and query.
    pub fn parse(q: &Query, body: &[u8]) -> ApiResult<Self> {
        let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let b = if b.get("deleteOptions").is_some() {
            b["deleteOptions"].clone()
        } else {
            b
        };
        let grace = q
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok())
            .or_else(|| b.get("gracePeriodSeconds").and_then(Value::as_i64));
        let propagation = q
            .get("propagationPolicy")
            .cloned()
            .or_else(|| b.get("propagationPolicy").and_then(Value::as_str).map(String::from))
            .or_else(|| match b.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                Some(false) => Some("Background".into()),
                None => None,
            });
        if let Some(p) = &propagation
            && !matches!(p.as_str(), "Orphan" | "Foreground" | "Background")
        {
            return Err(ApiError::invalid(
                "",
                "DeleteOptions",
                "",
                vec![Cause::not_supported(
                    "propagationPolicy",
                    &json!(p),
                    &["Foreground", "Background", "Orphan"],
                )],
            ));
        }
        let dry_run = q.get("dryRun").is_some_and(|v| v == "All")
            || b.get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|v| v == "All"));
        Ok(Self {
            grace,
            propagation,
            uid: b
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            rv: b
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            dry_run,
        })
    }
}

fn success_status(def: &ResourceDef, obj: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": meta::name(obj), "group": def.group, "kind": def.plural,
                    "uid": obj.pointer("/metadata/uid")}
    })
}

/// Deletes one object following its deletion rules; returns the HTTP body (the object while
/// deletion is pending, else the deleted object or a Status, as upstream's registries do).
///
/// Upstream's store reads, checks and writes in a loop that starts again from a fresh read
/// when another write got in between (etcd3 `conditionalDelete`, `GuaranteedUpdate` for the
/// graceful path): a DELETE never answers "the object has been modified". Without the loop a
/// kubelet's status write racing its own final delete made the delete fail with 409, and a
/// kubelet taking that 409 for "already gone" stranded the pod in Terminating.
pub fn delete_one(st: &AppState, def: &ResourceDef, ns: &str, name: &str, opts: &DeleteOptions) -> ApiResult<Value> {
    let mut tries = 0;
    loop {
        match delete_attempt(st, def, ns, name, opts) {
            Err(e) if super::is_stale_write(&e) && tries < 32 => tries += 1,
            other => return other,
        }
    }
}

fn delete_attempt(st: &AppState, def: &ResourceDef, ns: &str, name: &str, opts: &DeleteOptions) -> ApiResult<Value> {
    let key = def.storage_key();
    let obj = stored(st, def, ns, name)?;
    if opts
        .uid
        .as_deref()
        .is_some_and(|u| Some(u) != obj.pointer("/metadata/uid").and_then(Value::as_str))
    {
        return Err(ApiError::conflict(
            def.group,
            def.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                opts.uid.as_deref().unwrap_or_default(),
                obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &opts.rv
        && rv.parse::<u64>().ok() != Some(rv_of(&obj))
    {
        return Err(ApiError::conflict(
            def.group,
            def.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                rv_of(&obj)
            ),
        ));
    }
    let returns_object = matches!(def.plural, "pods" | "services" | "namespaces");
    let done = |removed: Value| {
        if returns_object {
            present(def, removed)
        } else {
            success_status(def, &removed)
        }
    };

    if def.plural == "namespaces" {
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(format!(
                "namespaces {name:?} is forbidden: this namespace may not be deleted"
            )));
        }
        if meta::is_deleting(&obj) {
            return Ok(present(def, obj));
        }
        let mut new = obj.clone();
        meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now()));
        meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(0));
        add_propagation_finalizer(&mut new, opts);
        new["status"]["phase"] = json!("Terminating");
        if opts.dry_run {
            return Ok(present(def, new));
        }
        return st
            .store
            .update(&key, ns, name, new, Some(rv_of(&obj)))
            .map(|v| present(def, v))
            .map_err(|e| store_err(def, name, e));
    }

    if (def.group, def.plural) == (crate::api::crd::GROUP, "customresourcedefinitions") {
        // Upstream's CRD delete: the first call adds the cleanup finalizer, the Terminating
        // condition and deletionTimestamp and answers with the CRD; the finalizing
        // controller then empties and removes it.
        if meta::is_deleting(&obj) {
            return Ok(present(def, obj));
        }
        let mut new = obj.clone();
        crate::api::crd::mark_for_deletion(&mut new);
        meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now()));
        meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(0));
        if opts.dry_run {
            return Ok(present(def, new));
        }
        let written = st
            .store
            .update(&key, ns, name, new, Some(rv_of(&obj)))
            .map_err(|e| store_err(def, name, e))?;
        crate::api::crd::reconcile(st, name);
        return Ok(present(def, written));
    }
    let mut grace = 0i64;
    if def.plural == "pods" {
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let terminal = matches!(
            obj.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        grace = opts
            .grace
            .or_else(|| {
                obj.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0);
        if !bound || terminal {
            grace = 0;
        }
    }
    if meta::is_deleting(&obj) {
        // Already being deleted: only a shorter grace period changes anything (the kubelet's
        // final delete uses 0).
        let current = obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if def.plural == "pods" && opts.grace.is_some() && grace < current {
            let mut new = obj.clone();
            meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(grace));
            meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now_plus(grace)));
            if opts.dry_run {
                return Ok(present(def, new));
            }
            if ready_to_remove(def, &new) {
                return st
                    .store
                    .remove(&key, ns, name, Some(rv_of(&obj)))
                    .map(done)
                    .map_err(|e| store_err(def, name, e));
            }
            return st
                .store
                .update(&key, ns, name, new, Some(rv_of(&obj)))
                .map(|v| present(def, v))
                .map_err(|e| store_err(def, name, e));
        }
        return Ok(present(def, obj));
    }
    let mut new = obj.clone();
    add_propagation_finalizer(&mut new, opts);
    if grace == 0 && meta::finalizers(&new).is_empty() {
        if opts.dry_run {
            return Ok(done(obj));
        }
        return st
            .store
            .remove(&key, ns, name, Some(rv_of(&obj)))
            .map(done)
            .map_err(|e| store_err(def, name, e));
    }
    meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now_plus(grace)));
    meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(grace));
    if def.tracks_generation() {
        let g = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        meta::meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    if opts.dry_run {
        return Ok(present(def, new));
    }
    st.store
        .update(&key, ns, name, new, Some(rv_of(&obj)))
        .map(|v| present(def, v))
        .map_err(|e| store_err(def, name, e))
}

fn add_propagation_finalizer(obj: &mut Value, opts: &DeleteOptions) {
    let f = match opts.propagation.as_deref() {
        Some("Orphan") => "orphan",
        Some("Foreground") => "foregroundDeletion",
        _ => return,
    };
    let mut fins = meta::finalizers(obj);
    if !fins.iter().any(|x| x == f) {
        fins.push(f.to_string());
        meta::meta_mut(obj).insert("finalizers".into(), json!(fins));
    }
}

/// The admission webhooks' say on deleting `ns/name` (nothing when it is already gone: the
/// deletion answers 404 itself). Upstream runs admission for each object a deletecollection
/// removes as well.
async fn admit_delete(
    st: &AppState,
    def: &'static ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    let Some(old) = st.store.get(&def.storage_key(), ns, name) else {
        return Ok(());
    };
    let mut attrs = Attributes::new(def, Operation::Delete, ns, name);
    attrs.old = Some(old);
    attrs.dry_run = opts.dry_run;
    if opts.dry_run {
        attrs.options["dryRun"] = json!(["All"]);
    }
    if let Some(p) = &opts.propagation {
        attrs.options["propagationPolicy"] = json!(p);
    }
    if let Some(g) = opts.grace {
        attrs.options["gracePeriodSeconds"] = json!(g);
    }
    webhook::mutate(st, &attrs, None).await?;
    webhook::validate(st, &attrs, None).await
}

/// DELETE of one object.
pub async fn delete(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> ApiResult<Response> {
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let opts = DeleteOptions::parse(q, body)?;
    admit_delete(st, t.def, &ns, &name, &opts).await?;
    let out = delete_one(st, t.def, &ns, &name, &opts)?;
    Ok(json_response(200, &out, &[]))
}

/// DELETE of a collection: every selected object, each by its own rules.
pub async fn delete_collection(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    if !def.allows("deletecollection") {
        return Err(ApiError::method_not_allowed(format!(
            "deletecollection is not supported on {}",
            def.plural
        )));
    }
    let opts = DeleteOptions::parse(q, body)?;
    let (items, rv) = select(st, def, t.namespace.as_deref(), q)?;
    let mut out = Vec::new();
    if super::write_lost(st, def, None, "deletecollection") {
        tracing::debug!(
            resource = def.plural,
            n = items.len(),
            "writes-lost: deletecollection acknowledged and dropped"
        );
        out = items;
    } else {
        for o in &items {
            admit_delete(st, def, meta::namespace(o), meta::name(o), &opts).await?;
            match delete_one(st, def, meta::namespace(o), meta::name(o), &opts) {
                Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => out.push(o.clone()),
                Ok(v) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    let list = json!({"apiVersion": def.api_version(), "kind": def.list_kind(),
        "metadata": {"resourceVersion": rv.to_string()}, "items": out});
    Ok(json_response(200, &list, &[]))
}
